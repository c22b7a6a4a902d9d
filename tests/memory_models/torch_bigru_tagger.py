"""Bidirectional 2-layer GRU sequence tagger on float features."""
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, n_features=40, hidden=128, n_tags=17):
        super().__init__()
        self.proj = nn.Linear(n_features, hidden)
        self.rnn = nn.GRU(hidden, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.norm = nn.LayerNorm(2 * hidden)
        self.out = nn.Linear(2 * hidden, n_tags)

    def forward(self, x):
        x = torch.relu(self.proj(x))
        x, _ = self.rnn(x)
        x = self.norm(x)
        return self.out(x)


model = Tagger()

if __name__ == "__main__":
    feats = torch.randn(16, 200, 40)
    print(model(feats).shape)
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loader = torch.utils.data.DataLoader(utterances, batch_size=32, collate_fn=pad)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optim.step()
