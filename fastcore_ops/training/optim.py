"""The optimizer of a run: SGD(W), AdamW, LAMB or LARS, over parameter groups with and without weight decay.

Method card: lamb_lars
    What: LAMB (Adam's direction) and LARS (SGD with momentum) scale every parameter's update by
        a trust ratio of its weight norm to its update norm, so each layer moves by a similar
        fraction of its size; parameters without weight decay are not adapted.
    When it helps: very large batches, where one learning rate for every layer stops working.
    Cost: a norm per parameter tensor per step.
    Options: ``optimizer.name`` "lamb" or "lars"; LAMB takes ``betas`` and ``eps``, LARS
        ``momentum``, ``nesterov`` and ``trust_coefficient`` 0.001.

Method card: gradient_clipping
    What: before each optimizer step the gradients are scaled down, all together, when their
        global L2 norm exceeds ``grad_clip_norm`` (after unscaling fp16's loss scale).
    When it helps: language models and other runs with rare loss spikes.
    Cost: one norm over all gradients per step.
    Options: ``optimizer.grad_clip_norm`` 0 (off); 1.0 is the usual value for GPTs.

    >>> model = torch.nn.Linear(4, 2)
    >>> optimizer = build_optimizer(model, OptimizerConfig(lr=0.1, decoupled_weight_decay=True))
    >>> type(build_optimizer(model, OptimizerConfig(name="adamw", lr=1e-3, weight_decay=0.1))).__name__
    'AdamW'
"""

from __future__ import annotations

import torch
from torch import nn

from fastcore_ops.checks import check_choice
from fastcore_ops.training.config import OPTIMIZERS, OptimizerConfig
from fastcore_ops.training.methods.bias_lr_scale import NORM_TYPES
from fastcore_ops.training.methods.muon import MuonSGD, check_beside_sgd


class DecoupledSGDW(torch.optim.SGD):
    """SGD whose weight decay shrinks the weights directly by ``weight_decay * lr / peak_lr``.

    Written here because torch.optim has no decoupled SGD (only AdamW). Decoupling keeps the
    decay's strength independent of the gradient's scale and of momentum, and scaling it by the
    schedule (lr / peak lr) makes it fade with the learning rate.
    """

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)
        for group in self.param_groups:
            group.setdefault("peak_lr", group["lr"])

    @torch.no_grad()
    def step(self, closure=None):
        decays = [group["weight_decay"] for group in self.param_groups]
        for group in self.param_groups:
            factor = 1.0 - group["weight_decay"] * group["lr"] / group["peak_lr"]
            if factor != 1.0:
                torch._foreach_mul_([p for p in group["params"] if p.grad is not None], factor)
            group["weight_decay"] = 0.0  # the SGD update below must not decay a second time
        try:
            return super().step(closure)
        finally:
            for group, decay in zip(self.param_groups, decays):
                group["weight_decay"] = decay


def _exempt(module: nn.Module, name: str, *, norm_and_bias: bool, embeddings: bool) -> bool:
    """Whether ``module``'s own parameter ``name`` goes without weight decay."""
    if norm_and_bias and (isinstance(module, NORM_TYPES) or name == "bias"):
        return True
    return embeddings and isinstance(module, nn.Embedding) and name == "weight"


def parameter_groups(model: nn.Module, weight_decay: float, *, no_decay_norm_and_bias: bool,
                     no_decay_embeddings: bool = False) -> list[dict]:
    """One group with decay; with either flag, a second without for the parameters it exempts.

    no_decay_norm_and_bias: normalization weights and biases. no_decay_embeddings: the weights
    of ``nn.Embedding`` modules, told by identity, so an output layer that shares one (a GPT's
    tied head) is exempt too. A parameter that several modules share is listed once.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]  # parameters() yields a shared one once
    if not (no_decay_norm_and_bias or no_decay_embeddings):
        return [{"params": trainable, "weight_decay": weight_decay}]
    exempt = {id(parameter) for module in model.modules() for name, parameter in module.named_parameters(recurse=False)
              if _exempt(module, name, norm_and_bias=no_decay_norm_and_bias, embeddings=no_decay_embeddings)}
    return [{"params": [p for p in trainable if id(p) not in exempt], "weight_decay": weight_decay},
            {"params": [p for p in trainable if id(p) in exempt], "weight_decay": 0.0}]


def _timm_optimizer(name: str):
    """timm's LAMB or LARS class: a well-kept implementation of each paper's update rule."""
    try:
        from timm import optim as timm_optim
    except ImportError:
        raise ImportError(f"optimizer.name={name!r} uses timm's implementation; install it with "
                          f"pip install 'fastcore_ops[optim]' (or pip install timm)") from None
    return {"lamb": timm_optim.Lamb, "lars": timm_optim.Lars}[name]


def build_optimizer(model: nn.Module, config: OptimizerConfig, group_methods=()) -> torch.optim.Optimizer:
    """``config.name``'s optimizer over :func:`parameter_groups`: SGD (SGDW with decoupled decay),
    AdamW, LAMB or LARS.

    group_methods: the options of the run's optimizer-stage methods, in their order (``methods.bias_lr_scale``,
    ``methods.muon``): each reshapes the groups (``shape_groups``) before the optimizer is built; with a group
    marked ``muon`` the optimizer is SGD with Muon's step for that group (:class:`MuonSGD`).

    AdamW ignores momentum, nesterov and decoupled_weight_decay: its decay is decoupled always.
    LAMB (You et al., 2020) and LARS (You et al., 2017) are timm's: both scale each parameter's
    update by its own trust ratio, and, as those papers do for BERT and ResNet, leave the
    parameters without weight decay (norms and biases, with ``no_decay_norm_and_bias``) unadapted.
    LAMB's global gradient clipping is the trainer's (``grad_clip_norm``), not timm's.
    """
    check_choice("optimizer.name", config.name, OPTIMIZERS)
    groups = parameter_groups(model, config.weight_decay, no_decay_norm_and_bias=config.no_decay_norm_and_bias,
                              no_decay_embeddings=config.no_decay_embeddings)
    # Every optimizer's decay per step grows with the group's learning rate but SGDW's, which follows its schedule only.
    decay_follows_lr = not (config.name == "sgd" and config.decoupled_weight_decay)
    for options in group_methods:
        groups = options.shape_groups(model, groups, lr=config.lr, decay_follows_lr=decay_follows_lr)
    if any(group.get("muon") for group in groups):  # methods.muon took the filter banks
        check_beside_sgd(config)
        return MuonSGD(groups, lr=config.lr, momentum=config.momentum, nesterov=config.nesterov)
    if config.name == "adamw":
        # Fused: one kernel over every parameter, PyTorch's fastest AdamW, and on a CPU the only one whose
        # arithmetic is the same on every x86 CPU. The others take their square root from MKL's VML, which
        # rounds by the CPU's vendor even in MKL's compatible mode: that alone made the GPT recipes'
        # fingerprints differ between an AMD EPYC (AVX2), an emulated one and an Intel Xeon.
        return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, eps=config.eps, fused=True)
    if config.name == "lamb":
        return _timm_optimizer("lamb")(groups, lr=config.lr, betas=config.betas, eps=config.eps, max_grad_norm=None)
    if config.name == "lars":
        return _timm_optimizer("lars")(groups, lr=config.lr, momentum=config.momentum, nesterov=config.nesterov,
                                       trust_coeff=config.trust_coefficient)
    kind = DecoupledSGDW if config.decoupled_weight_decay else torch.optim.SGD
    return kind(groups, lr=config.lr, momentum=config.momentum, nesterov=config.nesterov)
