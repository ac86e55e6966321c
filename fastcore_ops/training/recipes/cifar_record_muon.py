"""``cifar_record`` the way airbench94_muon trains it: its filters on Muon, batch 2000, 8 epochs, no lookahead.

Jordan's ``airbench94_muon.py`` (github.com/KellerJordan/cifar10-airbench) reaches airbench94's 94% on
CIFAR-10 in 8 epochs instead of 9.9: the same network, flips, translation, label smoothing and TTA, with
every convolution filter on Muon (``muon``: lr 0.24, momentum 0.6, Nesterov, 3 Newton-Schulz steps, each
bank rescaled to norm sqrt(output channels)) and the rest on Nesterov SGD, every learning rate falling
linearly from its peak at the first step to 0 at the last. It is the faster variant of issue 70 §4; the
methods of ours that might pay on top of it are its ablation's, not part of this recipe.

Its SGD side, restated for our mean loss at batch 2000 and our head (weights at PyTorch's initial scale,
logits times 1/9): airbench94_muon sums the loss and gives its head weights a std of 1 and logits times
1/256, which is our head with its weights times c = 256/9. An SGD step of lr on those weights is a step of
lr / c**2 on ours, so its head's 0.67 per summed image is 0.67 * 2000 / c**2 = 1.656 here; its biases' 0.053
is 0.053 * 2000 = 106, which is 64 times that (``bias_lr_scale``, as in ``cifar_record``). Its coupled weight
decay takes 2e-6 * 2000 = 0.004 of every SGD-trained weight a step at the peak: 0.004 / 1.656 here.

Deviations from airbench94_muon, besides ``cifar_record``'s (its covariance, flips' draw, precision, data):
- the whitening stem's bias trains at the head's learning rate for the whole run; airbench94_muon trains it at
  the biases' (64 times more), falling to 0 over the first 3 epochs, then freezes it;
- our head starts with weights of std 1 / (16 sqrt 3) (PyTorch's), 2.6% above airbench94_muon's 9 / 256;
- Muon's Newton-Schulz products run in float32 (``muon``'s card), airbench94_muon's in bfloat16.
"""

from fastcore_ops.training.methods import MuonOptions
from fastcore_ops.training.recipes import Derived

HEAD_SCALE = 256 / 9  # airbench94_muon's head weights over ours, at the same logits
BATCH = 2000
HEAD_LR = 0.67 * BATCH / HEAD_SCALE ** 2  # its head's lr per summed image, for our mean loss and our head
DECAY_PER_STEP = 2e-6 * BATCH  # the share of each SGD-trained weight its coupled decay takes a step at the peak

RECIPE = Derived("cifar_record", {
    "schedule.epochs": 8.0,
    # From the peak at the first step linearly to 0, as its lr * (1 - step / total_steps).
    "schedule.warmup_epochs": 0.0,
    "schedule.warmup_start_fraction": 0.0,
    "schedule.final_lr_fraction": 0.0,
    "data.batch_size": BATCH,
    "optimizer.lr": HEAD_LR,
    "optimizer.reference_batch": BATCH,
    "optimizer.weight_decay": DECAY_PER_STEP / HEAD_LR,
    "methods.lookahead": None,
    "methods.muon": MuonOptions(lr=0.24, momentum=0.6, nesterov=True, newton_schulz_steps=3),
})
