"""8 epochs of the pil loader over the 500 ImageNet photos at 176 px, 2 workers (timed from outside by farm-bench).

python loader_epochs.py CODE_ROOT   (run from the project root)
"""
import sys
sys.path.insert(0, sys.argv[1])
from fastcore_ops.data import build_loader
loader = build_loader("../shared/datasets/imagenet-sample", batch_size=64, train=True, image_size=176,
                      backend="pil", epochs=10)
for epoch in range(8):
    loader.set_epoch(epoch)
    for images, labels in loader:
        pass
