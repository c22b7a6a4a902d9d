"""Hugging Face GPT-2 (124M) language model, built from a configuration and trained with AdamW."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

model = GPT2LMHeadModel(GPT2Config())

if __name__ == "__main__":
    sample = torch.randint(0, 1000, (2, 512))
    model(sample)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=8, shuffle=True)
    for batch in train_loader:
        out = model(input_ids=batch["input_ids"].cuda(), labels=batch["labels"].cuda())
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
