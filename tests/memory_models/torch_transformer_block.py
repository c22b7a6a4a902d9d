"""Pre-norm transformer encoder built from nn.MultiheadAttention, with a ModuleList of blocks."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, dropout=0.1, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h)
        x = x + self.drop(a)
        h = self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))
        return x + self.drop(h)


class Encoder(nn.Module):
    def __init__(self, vocab=8000, d_model=256, n_heads=8, d_ff=1024, n_layers=4, n_classes=3):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, ids):
        x = self.tok(ids)
        for blk in self.blocks:
            x = blk(x)
        x = self.ln(x)
        return self.head(x[:, 0])


model = Encoder()

if __name__ == "__main__":
    print(model(torch.randint(0, 8000, (2, 128))).shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    loader = torch.utils.data.DataLoader(train, batch_size=32, shuffle=True)
    for ids, y in loader:
        loss = nn.functional.cross_entropy(model(ids), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
