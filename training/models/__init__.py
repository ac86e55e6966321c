"""Models the recipes train that torchvision does not provide: a small GPT."""
