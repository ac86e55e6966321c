"""gpt_baseline with ALiBi and sequence-length warmup: train short, evaluate at the full length.

- ALiBi (Press et al., 2022) replaces the learned position table by a fixed, per-head linear
  penalty on attention to distant tokens: the model needs no positions it has not trained on,
  so training on short sequences still serves the full length L (and more: it is evaluated at
  2L and 4L too).
- Sequence-length warmup (Li et al., 2022; Composer's SeqLengthWarmup) trains on sequences
  growing from 8 bytes to L over the first 30% of the run, with as many tokens in every step:
  short sequences cost less attention work, and their steadier gradients early on suit a
  high learning rate. ALiBi is what lets the short early sequences transfer to L.

Everything else (model size, optimizer, batch, schedule with its warmup, data) is
gpt_baseline's, so the difference measures the two methods. Its peak LR was searched for this
recipe (same machine and budget, seed 0, the baseline's warmup of then, 0.02 epochs; validation
loss in nats per byte at L):

    LR:  2e-3: 1.359   4e-3: 1.279   8e-3: 1.441

and is the baseline's since the baseline's LR and warmup were searched for seeds that agree
(in its file).
"""

from fastcore_ops.surgery.alibi import ALiBiOptions
from fastcore_ops.training.methods import SeqLengthWarmupOptions
from fastcore_ops.training.recipes import Derived

RECIPE = Derived("gpt_baseline", {
    "methods.alibi": ALiBiOptions(),
    "methods.seq_length_warmup": SeqLengthWarmupOptions(start_length=8, duration=0.3),
    "text.eval_length_multiples": (1, 2, 4),
})
