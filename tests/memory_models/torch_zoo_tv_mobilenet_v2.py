"""torchvision `mobilenet_v2` trained from scratch on ImageNet-sized images."""
import torch
import torchvision

model = torchvision.models.mobilenet_v2(weights=None)

if __name__ == "__main__":
    model = model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True, num_workers=8)
    for images, labels in loader:
        loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
