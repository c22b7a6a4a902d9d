"""DCGAN generator with ConvTranspose2d (PyTorch examples style)."""
import torch
import torch.nn as nn

nz, ngf, nc = 100, 64, 3


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


model = Generator()

if __name__ == "__main__":
    fixed_noise = torch.randn(64, nz, 1, 1)
    fake = model(fixed_noise)
    optimizerG = torch.optim.Adam(model.parameters(), lr=0.0002, betas=(0.5, 0.999))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True)
    for data in dataloader:
        model.zero_grad()
        errG = criterion(netD(model(torch.randn(128, nz, 1, 1))), label)
        errG.backward()
        optimizerG.step()
