"""VGG-11 for CIFAR built from a config list (torchvision style)."""
import torch
import torch.nn as nn

cfg = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


class VGG(nn.Module):
    def __init__(self, cfg, num_classes=10):
        super().__init__()
        self.features = self._make_layers(cfg)
        self.classifier = nn.Linear(512, num_classes)

    def forward(self, x):
        out = self.features(x)
        out = out.view(out.size(0), -1)
        out = self.classifier(out)
        return out

    def _make_layers(self, cfg):
        layers = []
        in_channels = 3
        for x in cfg:
            if x == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(in_channels, x, kernel_size=3, padding=1),
                           nn.BatchNorm2d(x),
                           nn.ReLU(inplace=True)]
                in_channels = x
        layers += [nn.AvgPool2d(kernel_size=1, stride=1)]
        return nn.Sequential(*layers)


model = VGG(cfg)

if __name__ == "__main__":
    net = model.cuda()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=128, shuffle=True, num_workers=2)
    y = net(torch.randn(2, 3, 32, 32).cuda())
    for inputs, targets in trainloader:
        optimizer.zero_grad()
        loss = criterion(net(inputs.cuda()), targets.cuda())
        loss.backward()
        optimizer.step()
