"""Embedding plus mean pooling over the sequence (fastText-like)."""
import torch
import torch.nn as nn


class FastText(nn.Module):
    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc1 = nn.Linear(dim, 64)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(64, classes)

    def forward(self, ids):
        x = self.emb(ids)
        x = x.mean(dim=1)
        return self.fc2(self.act(self.fc1(x)))


model = FastText(50000, 300, 14)

if __name__ == "__main__":
    ids = torch.randint(50000, (8, 256))
    logits = model(ids)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    dl = torch.utils.data.DataLoader(ds, batch_size=1024)
    for ids, y in dl:
        nn.functional.cross_entropy(model(ids), y).backward()
        opt.step()
