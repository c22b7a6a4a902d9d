"""Small U-Net with skip connections via torch.cat and ConvTranspose2d upsampling."""
import torch
import torch.nn as nn


class DoubleConv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 3, padding=1),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, 3, padding=1),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=2):
        super().__init__()
        self.inc = DoubleConv(n_channels, 32)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(32, 64))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(64, 128))
        self.up1 = nn.ConvTranspose2d(128, 64, kernel_size=2, stride=2)
        self.conv1 = DoubleConv(128, 64)
        self.up2 = nn.ConvTranspose2d(64, 32, kernel_size=2, stride=2)
        self.conv2 = DoubleConv(64, 32)
        self.outc = nn.Conv2d(32, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3)
        x = self.conv1(torch.cat([x2, x], dim=1))
        x = self.up2(x)
        x = self.conv2(torch.cat([x1, x], dim=1))
        return self.outc(x)


model = UNet()

if __name__ == "__main__":
    from torchinfo import summary

    summary(model, input_size=(8, 3, 256, 256))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    train_loader = torch.utils.data.DataLoader(train_ds, batch_size=8, shuffle=True)
    for img, mask in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(img), mask)
        loss.backward()
        optimizer.step()
