"""Dilated convolutions with GroupNorm and a residual sum (segmentation head)."""
import torch
import torch.nn as nn


class ContextModule(nn.Module):
    def __init__(self, channels=64, groups=8):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, stride=2, padding=1)
        self.d1 = nn.Conv2d(channels, channels, 3, padding=2, dilation=2)
        self.g1 = nn.GroupNorm(groups, channels)
        self.d2 = nn.Conv2d(channels, channels, 3, padding=4, dilation=4)
        self.g2 = nn.GroupNorm(groups, channels)
        self.act = nn.SiLU()
        self.head = nn.Conv2d(channels, 21, 1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

    def forward(self, x):
        x = self.act(self.stem(x))
        y = self.act(self.g1(self.d1(x)))
        y = self.g2(self.d2(y))
        x = self.act(x + y)
        return self.up(self.head(x))


model = ContextModule()

if __name__ == "__main__":
    print(model(torch.randn(1, 3, 320, 320)).shape)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = torch.utils.data.DataLoader(voc, batch_size=12)
    for img, target in loader:
        criterion(model(img), target).backward()
        optimizer.step()
