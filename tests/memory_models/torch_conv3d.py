"""C3D-like 3D convnet over video clips."""
import torch
import torch.nn as nn


class C3D(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv3d(3, 32, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.pool1 = nn.MaxPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.conv2 = nn.Conv3d(32, 64, kernel_size=3, padding=1)
        self.pool2 = nn.MaxPool3d(kernel_size=2, stride=2)
        self.conv3 = nn.Conv3d(64, 128, kernel_size=3, padding=1)
        self.pool3 = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(128, num_classes)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.pool1(self.relu(self.conv1(x)))
        x = self.pool2(self.relu(self.conv2(x)))
        x = self.pool3(self.relu(self.conv3(x)))
        x = torch.flatten(x, start_dim=1)
        return self.fc(x)


model = C3D()

if __name__ == "__main__":
    clip = torch.randn(2, 3, 16, 112, 112)
    model(clip)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.003, momentum=0.9)
    loader = torch.utils.data.DataLoader(videos, batch_size=20)
    for x, y in loader:
        criterion(model(x), y).backward()
        optimizer.step()
