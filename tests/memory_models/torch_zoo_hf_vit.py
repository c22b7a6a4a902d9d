"""Hugging Face ViT-base image classifier built from a configuration."""
import torch
from transformers import ViTConfig, ViTForImageClassification

model = ViTForImageClassification(ViTConfig(num_labels=10))

if __name__ == "__main__":
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=48, shuffle=True)
    for pixels, labels in train_loader:
        out = model(pixel_values=pixels.cuda(), labels=labels.cuda())
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
