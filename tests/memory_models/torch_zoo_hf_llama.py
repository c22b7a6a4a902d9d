"""Hugging Face Llama-style decoder (4 layers, grouped-query attention), built from a configuration and trained with AdamW."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

model = LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4))

if __name__ == "__main__":
    sample = torch.randint(0, 1000, (2, 512))
    model(sample)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=16, shuffle=True)
    for batch in train_loader:
        out = model(input_ids=batch["input_ids"].cuda(), labels=batch["labels"].cuda())
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
