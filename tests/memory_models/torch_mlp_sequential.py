"""MNIST MLP as an nn.Sequential, with argparse defaults for the batch size."""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--hidden", type=int, default=512)
args = parser.parse_args()

model = nn.Sequential(
    nn.Flatten(),
    nn.Linear(28 * 28, args.hidden),
    nn.ReLU(),
    nn.Linear(args.hidden, args.hidden),
    nn.ReLU(),
    nn.Dropout(0.2),
    nn.Linear(args.hidden, 10),
)

if __name__ == "__main__":
    device = "cuda"
    model = model.to(device)
    train_loader = DataLoader(train_data, batch_size=args.batch_size, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for X, y in train_loader:
        loss = nn.functional.cross_entropy(model(X.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        print(model(torch.zeros(1, 1, 28, 28, device=device)).shape)
