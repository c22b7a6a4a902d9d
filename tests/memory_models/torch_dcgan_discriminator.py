"""DCGAN discriminator with LeakyReLU and a final sigmoid."""
import torch
import torch.nn as nn

ndf = 64


class Discriminator(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, 1, 8, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


model = Discriminator()

if __name__ == "__main__":
    print(model(torch.randn(2, 3, 64, 64)).shape)
    optimizerD = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.5, 0.999))
    loader = torch.utils.data.DataLoader(images, batch_size=64)
    for real in loader:
        errD = criterion(model(real), ones)
        errD.backward()
        optimizerD.step()
