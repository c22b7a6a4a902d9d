"""LSTM text classifier over token ids (batch_first), using the last time step."""
import torch
import torch.nn as nn

VOCAB_SIZE = 25000
EMBED_DIM = 100
HIDDEN = 256
SEQ_LEN = 80


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, num_layers=2, batch_first=True, dropout=0.3)
        self.dropout = nn.Dropout(0.3)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, text):
        embedded = self.dropout(self.embedding(text))
        output, (hidden, cell) = self.lstm(embedded)
        last = output[:, -1, :]
        return self.fc(self.dropout(last))


model = LSTMClassifier(VOCAB_SIZE, EMBED_DIM, HIDDEN, 2)

if __name__ == "__main__":
    sample = torch.randint(0, VOCAB_SIZE, (4, SEQ_LEN))
    print(model(sample).shape)
    optimizer = torch.optim.Adam(model.parameters())
    train_iterator = torch.utils.data.DataLoader(train_data, batch_size=64)
    for text, label in train_iterator:
        optimizer.zero_grad()
        criterion(model(text), label).backward()
        optimizer.step()
