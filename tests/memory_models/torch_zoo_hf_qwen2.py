"""Hugging Face Qwen2-style decoder (biased q/k/v projections, tied embeddings), built from a configuration and trained with AdamW."""
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

model = Qwen2ForCausalLM(Qwen2Config(vocab_size=32000, hidden_size=256, intermediate_size=704, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True))

if __name__ == "__main__":
    sample = torch.randint(0, 1000, (2, 256))
    model(sample)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
    for batch in train_loader:
        out = model(input_ids=batch["input_ids"].cuda(), labels=batch["labels"].cuda())
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
