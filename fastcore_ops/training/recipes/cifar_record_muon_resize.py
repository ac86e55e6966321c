"""``cifar_record_muon`` with progressive resizing: 28 px images first, the faster variant of issue 70 §4.

Everything else is ``cifar_record_muon``'s (airbench94_muon's network, Muon on its filters, batch 2000, 8
epochs, TTA). The size stays 28 px for the first half of the run, grows linearly to 32 px by three quarters
of it in 4 px steps (so it jumps to 32 px at 62.5%), and is 32 px for the last quarter: a step in the first
62.5% costs about (28 / 32)**2 = 77% of a full one. No peer combines the record's recipe with resizing.

Timed against airbench94 in one sitting on held-out seeds 3 to 5 (a 2-core Zen 4 EPYC,
``reports/cifar-record-muon-resize-peers-20261202/``): 1.34x sooner, 90.59% with TTA against 90.52%, but
seed 3 ends at 90.34%, below it: resizing costs accuracy on some seeds at this budget.

    >>> from fastcore_ops.training.recipes import get_recipe
    >>> schedule = get_recipe("cifar_record_muon_resize").methods.progressive_resize
    >>> [schedule.size(32, progress) for progress in (0.0, 0.6, 0.65, 1.0)]
    [28, 28, 32, 32]
"""

from fastcore_ops.data import ProgressiveResize
from fastcore_ops.training.recipes import Derived

RECIPE = Derived("cifar_record_muon", {
    "methods.progressive_resize": ProgressiveResize(
        initial_scale=0.875,  # 28 px
        delay_fraction=0.5,
        finetune_fraction=0.25,
        size_increment=4,
    ),
})
