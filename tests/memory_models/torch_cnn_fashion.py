"""Fashion-MNIST CNN with Dropout2d, nn.Flatten and x.view in a helper-built Sequential."""
import torch
import torch.nn as nn

BATCH_SIZE = 100


def make_model(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(1, 32, kernel_size=3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(32, 64, kernel_size=3),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout2d(0.25),
        nn.Flatten(),
        nn.Linear(64 * 6 * 6, 600),
        nn.Dropout(0.25),
        nn.Linear(600, 120),
        nn.Linear(120, num_classes),
    )


model = make_model()

if __name__ == "__main__":
    from torchsummary import summary

    summary(model, input_size=(1, 28, 28))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=BATCH_SIZE)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    for images, labels in train_loader:
        loss = error(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
