"""Training: the trainer, the methods, the recipes and the models that are not in torchvision."""
