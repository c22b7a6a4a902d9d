"""Tabular MLP with BatchNorm1d, PReLU and a ModuleList of hidden layers."""
import torch
import torch.nn as nn

HIDDEN = [256, 128, 64]


class TabularNet(nn.Module):
    def __init__(self, n_features, hidden=HIDDEN, n_out=1):
        super().__init__()
        self.input_bn = nn.BatchNorm1d(n_features)
        dims = [n_features] + hidden
        self.layers = nn.ModuleList([nn.Linear(dims[i], dims[i + 1]) for i in range(len(hidden))])
        self.norms = nn.ModuleList([nn.BatchNorm1d(h) for h in hidden])
        self.act = nn.PReLU()
        self.out = nn.Linear(hidden[-1], n_out)

    def forward(self, x):
        x = self.input_bn(x)
        for linear, norm in zip(self.layers, self.norms):
            x = self.act(norm(linear(x)))
        return self.out(x)


model = TabularNet(n_features=57)

if __name__ == "__main__":
    print(model(torch.randn(32, 57)).shape)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_dl = torch.utils.data.DataLoader(train_ds, batch_size=2048, shuffle=True)
    for xb, yb in train_dl:
        loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
