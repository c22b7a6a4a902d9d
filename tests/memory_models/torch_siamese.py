"""Siamese network: one shared tower applied to two inputs, concatenated."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 64, 10)
        self.conv2 = nn.Conv2d(64, 128, 7)
        self.conv3 = nn.Conv2d(128, 128, 4)
        self.conv4 = nn.Conv2d(128, 256, 4)
        self.fc = nn.Linear(256 * 6 * 6, 256)
        self.out = nn.Linear(512, 1)

    def tower(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        x = F.relu(self.conv4(x))
        x = x.reshape(x.size(0), -1)
        return torch.sigmoid(self.fc(x))

    def forward(self, x):
        a = self.tower(x)
        b = self.tower(x)
        return self.out(torch.cat([a, b], dim=1))


model = Siamese()

if __name__ == "__main__":
    print(model(torch.randn(2, 1, 105, 105)).shape)
    optimizer = torch.optim.Adam(model.parameters(), lr=6e-5)
    loader = torch.utils.data.DataLoader(pairs, batch_size=128)
    for x1, y in loader:
        F.binary_cross_entropy_with_logits(model(x1), y).backward()
        optimizer.step()
