"""Ghost BatchNorm surgery (Hoffer et al., 2017): batch statistics over small chunks of the batch.

Method card
    What: every BatchNorm1d/2d (and timm's BatchNormAct2d, keeping its dropout and activation)
        normalizes each chunk of ``ghost_batch_size`` samples of the batch with that chunk's own
        mean and variance, as if the batch were several small ones; the running statistics,
        weights and evaluation are the BatchNorm's as before.
    When it helps: large batches (thousands of images), whose statistics are so exact that
        BatchNorm stops regularizing; small chunks bring back the noise of a small batch.
    Cost: one fused kernel per norm on a GPU, as a BatchNorm; nothing at evaluation.
    Options: ``ghost_batch_size`` 32 (at least 2; the last chunk of a batch may be smaller).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..checks import check_int
from ..kernels import ghost_batch_norm
from .core import Plan, Replacement, apply_surgery, count_modules, find_sites, imported_classes, register_surgery

# timm's norms that normalize as a BatchNorm2d and then apply their own dropout and activation.
_TIMM_NORM_ACTS = {"timm.layers.norm_act": ("BatchNormAct2d",)}


class GhostBatchNorm(nn.Module):
    """A BatchNorm1d/2d that normalizes each chunk of ``ghost_batch_size`` samples on its own.

    It holds the very same weight, bias and running statistics as the BatchNorm it replaces
    (same state_dict keys), and in eval it computes exactly what that BatchNorm did.
    """

    def __init__(self, norm: nn.modules.batchnorm._BatchNorm, ghost_batch_size: int):
        super().__init__()
        self.ghost_batch_size = ghost_batch_size
        self.num_features, self.eps, self.momentum = norm.num_features, norm.eps, norm.momentum
        self.affine, self.track_running_stats = norm.affine, norm.track_running_stats
        self.weight, self.bias = norm.weight, norm.bias
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            self.register_buffer(name, getattr(norm, name))

    def forward(self, x):
        momentum = self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative average, as BatchNorm does with momentum=None
                momentum = 1.0 / float(self.num_batches_tracked)
        use_batch_statistics = self.training or self.running_mean is None
        keep_running = not self.training or self.track_running_stats
        # The kernel takes (N, C) and (N, C, H, W); BatchNorm1d also takes (N, C, L).
        sequence = x.dim() == 3
        out = ghost_batch_norm(
            x.unsqueeze(-1) if sequence else x,
            self.running_mean if keep_running else None, self.running_var if keep_running else None,
            self.weight, self.bias, training=use_batch_statistics, momentum=momentum or 0.0, eps=self.eps,
            ghost_batch_size=self.ghost_batch_size,
        )
        return out.squeeze(-1) if sequence else out

    def extra_repr(self) -> str:
        return f"{self.num_features}, ghost_batch_size={self.ghost_batch_size}, eps={self.eps}, momentum={self.momentum}"


class GhostBatchNormAct(GhostBatchNorm):
    """A GhostBatchNorm followed by the dropout and activation of the timm ``BatchNormAct2d`` it replaces.

    It holds the very same modules (state_dict keys ``drop.*`` and ``act.*`` included) and
    applies them in timm's order.
    """

    def __init__(self, norm: nn.BatchNorm2d, ghost_batch_size: int):
        super().__init__(norm, ghost_batch_size)
        self.drop, self.act = norm.drop, norm.act

    def forward(self, x):
        return self.act(self.drop(super().forward(x)))


def _ghosts() -> dict[type, type]:
    """The ghost module that replaces each kind of norm.

    Exact types, not subclasses: a subclass may compute more than its base, as timm's
    BatchNormAct2d (a BatchNorm2d) does, and a ghost that dropped that part would change the model.
    """
    ghosts = {nn.BatchNorm1d: GhostBatchNorm, nn.BatchNorm2d: GhostBatchNorm}
    ghosts.update(dict.fromkeys(imported_classes(_TIMM_NORM_ACTS), GhostBatchNormAct))
    return ghosts


@dataclass
class GhostBatchNormOptions:
    ghost_batch_size: int = 32  # samples per chunk; the last chunk of a batch may be smaller

    def validate(self):
        if check_int("ghost_batch_size", self.ghost_batch_size) < 2:
            raise ValueError(
                f"ghost_batch_size must be at least 2 (one sample has no batch variance), got {self.ghost_batch_size}"
            )


@register_surgery(
    "ghost_batchnorm",
    "replace BatchNorm1d/2d (and timm's BatchNormAct2d) with Ghost BatchNorm: statistics per chunk of "
    "ghost_batch_size samples",
    GhostBatchNormOptions,
    order=50,
    inputs="images",
)
def plan_ghost_batchnorm(model: nn.Module, options: GhostBatchNormOptions) -> Plan:
    ghosts = _ghosts()
    sites = find_sites(model, lambda m: type(m) in ghosts, skip=(GhostBatchNorm,))
    replacements = [
        Replacement(site, ghosts[type(site.module)](site.module, options.ghost_batch_size)) for site in sites
    ]
    return Plan(replacements, already_applied=count_modules(model, (GhostBatchNorm,)))


def apply_ghost_batchnorm(model: nn.Module, optimizers=None, **options):
    """Apply the ``ghost_batchnorm`` surgery alone; see :func:`apply_surgery`.

    Example:
        >>> import torchvision
        >>> print(apply_ghost_batchnorm(torchvision.models.resnet18(num_classes=10), ghost_batch_size=32))
        ghost_batchnorm: 20 modules replaced, +0 / -0 parameters
          bn1                    BatchNorm2d -> GhostBatchNorm
        ...
    """
    return apply_surgery(model, [("ghost_batchnorm", options)], optimizers)
