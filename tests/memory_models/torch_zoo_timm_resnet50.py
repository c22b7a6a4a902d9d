"""timm `resnet50` fine-tuned with AdamW."""
import timm
import torch

model = timm.create_model("resnet50", pretrained=False, num_classes=1000)

if __name__ == "__main__":
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True)
    for x, y in train_loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
