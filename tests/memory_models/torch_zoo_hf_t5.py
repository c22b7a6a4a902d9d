"""Hugging Face T5-small, built from a configuration and trained with AdamW."""
import torch
from transformers import T5Config, T5ForConditionalGeneration

model = T5ForConditionalGeneration(T5Config(decoder_start_token_id=0))

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
