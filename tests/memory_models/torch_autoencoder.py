"""Fully connected autoencoder with separate encoder and decoder Sequentials."""
import torch
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self, in_dim=784, latent=32):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(in_dim, 256), nn.ReLU(True),
            nn.Linear(256, 64), nn.ReLU(True),
            nn.Linear(64, latent),
        )
        self.decoder = nn.Sequential(
            nn.Linear(latent, 64), nn.ReLU(True),
            nn.Linear(64, 256), nn.ReLU(True),
            nn.Linear(256, in_dim), nn.Sigmoid(),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


model = AutoEncoder()

if __name__ == "__main__":
    x = torch.rand(16, 784)
    recon = model(x)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    dataloader = torch.utils.data.DataLoader(flat_mnist, batch_size=256, shuffle=True)
    for img in dataloader:
        loss = nn.MSELoss()(model(img), img)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
