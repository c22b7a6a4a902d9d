"""Pooling corner cases: ceil_mode, padding, AvgPool2d with stride, ZeroPad2d."""
import torch
import torch.nn as nn


class PoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.pad = nn.ZeroPad2d((1, 2, 1, 2))
        self.conv = nn.Conv2d(3, 16, kernel_size=(3, 5), stride=(1, 2))
        self.mp = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.ap = nn.AvgPool2d(kernel_size=3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 24, 3, padding="same")
        self.gap = nn.AdaptiveMaxPool2d((2, 3))
        self.flat = nn.Flatten()
        self.fc = nn.Linear(24 * 2 * 3, 5)

    def forward(self, x):
        x = self.conv(self.pad(x))
        x = self.mp(x)
        x = self.ap(x)
        x = self.conv2(x)
        x = self.gap(x)
        return self.fc(self.flat(x))


model = PoolNet()

if __name__ == "__main__":
    model(torch.zeros(3, 3, 57, 61))
    optimizer = torch.optim.NAdam(model.parameters())
    loader = torch.utils.data.DataLoader(samples, batch_size=50)
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step()
