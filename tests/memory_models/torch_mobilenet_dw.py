"""MobileNet v1 blocks with depthwise (grouped) convolutions."""
import torch
import torch.nn as nn


def conv_dw(inp, oup, stride):
    return nn.Sequential(
        nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
        nn.BatchNorm2d(inp),
        nn.ReLU(inplace=True),
        nn.Conv2d(inp, oup, 1, 1, 0, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU(inplace=True),
    )


class MobileNet(nn.Module):
    def __init__(self, n_class=1000):
        super().__init__()
        self.model = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True)),
            conv_dw(32, 64, 1),
            conv_dw(64, 128, 2),
            conv_dw(128, 128, 1),
            conv_dw(128, 256, 2),
            conv_dw(256, 512, 2),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(512, n_class)

    def forward(self, x):
        x = self.model(x)
        x = x.view(-1, 512)
        x = self.fc(x)
        return x


model = MobileNet()

if __name__ == "__main__":
    model = model.cuda()
    out = model(torch.rand(4, 3, 224, 224).cuda())
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.045, alpha=0.9, eps=1.0)
    train_loader = torch.utils.data.DataLoader(dataset, batch_size=96)
    for x, y in train_loader:
        optimizer.zero_grad()
        criterion(model(x.cuda()), y.cuda()).backward()
        optimizer.step()
