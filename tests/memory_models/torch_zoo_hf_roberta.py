"""Hugging Face RoBERTa-base masked language model, built from a configuration and trained with AdamW."""
import torch
from transformers import RobertaConfig, RobertaForMaskedLM

model = RobertaForMaskedLM(RobertaConfig(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1))

if __name__ == "__main__":
    sample = torch.randint(0, 1000, (2, 256))
    model(sample)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=16, shuffle=True)
    for batch in train_loader:
        out = model(input_ids=batch["input_ids"].cuda(), labels=batch["labels"].cuda())
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
