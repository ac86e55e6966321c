"""The methods an ablation can add to or remove from a recipe, each as the ``--set`` values that do it.

Each method is one configuration field (or one surgery in ``model.surgeries``) with the value
the ablation tries when it adds the method and the value that turns it off. A recipe has the
method when its field is not at the off value; the ablation then removes it rather than adds it.

    >>> from training.recipes import get_recipe
    >>> METHODS["cutout"].toggle(get_recipe("cifar_baseline"))
    ('added', ('methods.cutout={}',))
    >>> METHODS["blurpool"].toggle(get_recipe("cifar_mild"))
    ('removed', ("model.surgeries=['channels_last']",))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from training.config import TrainConfig

SURGERIES = "model.surgeries"


@dataclass(frozen=True)
class MethodSwitch:
    """How to add one method to a configuration and how to remove it.

    field: the dotted configuration field, or ``model.surgeries`` for a surgery named ``surgery``.
    on: the --set values that add the method (a field first; companions such as SAM's interval after).
    off: the value of ``field`` that means off.
    task: the one task the method applies to (``TrainConfig.task``), or None for every task.
    """

    field: str
    on: tuple[str, ...] = ()
    off: object = None
    surgery: tuple[str, dict] | str | None = None
    task: str | None = None

    def applies_to(self, config: TrainConfig) -> bool:
        """Whether the method can be added to or removed from ``config``'s task."""
        return self.task in (None, config.task)

    def present(self, config: TrainConfig) -> bool:
        """Whether ``config`` uses the method."""
        if self.surgery is not None:
            return config.model.has_surgery(self._surgery_name)
        return functools.reduce(getattr, self.field.split("."), config) != self.off

    @property
    def _surgery_name(self) -> str:
        return self.surgery if isinstance(self.surgery, str) else self.surgery[0]

    def toggle(self, config: TrainConfig) -> tuple[str, tuple[str, ...]]:
        """("added" or "removed", the --set values that do it) for ``config``."""
        if self.surgery is None:
            # --set takes a str field's text as it is, any other field's value as a Python literal.
            off = self.off if isinstance(self.off, str) else repr(self.off)
            return ("removed", (f"{self.field}={off}",)) if self.present(config) else ("added", self.on)
        surgeries = list(config.model.surgeries)
        if self.present(config):
            kept = [entry for entry in surgeries if entry != self._surgery_name
                    and not (isinstance(entry, tuple) and entry[0] == self._surgery_name)]
            return "removed", (f"{SURGERIES}={kept!r}",)
        return "added", (f"{SURGERIES}={[*surgeries, self.surgery]!r}",)


IMAGES, TEXT = "image_classification", "language_model"


def _field(field: str, on: str, off: object, *companions: str, task: str | None = None) -> MethodSwitch:
    return MethodSwitch(field, (f"{field}={on}", *companions), off, task=task)


def _surgery(entry: tuple[str, dict] | str, task: str) -> MethodSwitch:
    return MethodSwitch(SURGERIES, surgery=entry, task=task)


# The value each method is tried at: the CIFAR and GPT recipes' own where they have one, else the
# method's usual default (its card in docs/methods/ says why).
METHODS: dict[str, MethodSwitch] = {
    "bce_loss": _field("methods.loss", "bce", "ce", task=IMAGES),
    "label_smoothing": _field("methods.label_smoothing", "0.1", 0.0),
    "mixup": _field("methods.mixup_alpha", "0.2", 0.0, task=IMAGES),
    "cutmix": _field("methods.cutmix_alpha", "1.0", 0.0, task=IMAGES),
    "cutout": _field("methods.cutout", "{}", None, task=IMAGES),
    "augmix": _field("methods.augmix", "{}", None, task=IMAGES),
    "randaugment": _field("data.randaugment", "{}", None, task=IMAGES),
    "colout": _field("data.colout", "{}", None, task=IMAGES),
    "padded_crop": _field("data.padded_crop", "{}", None, task=IMAGES),  # CIFAR's 4 px at 32 px, zero fill
    # cifar_mild's schedule: the defaults
    "progressive_resize": _field("data.progressive_resize", "{}", None, task=IMAGES),
    "sam": _field("methods.sam_rho", "0.05", 0.0, "methods.sam_interval=10"),
    "ema": _field("methods.ema_half_life_steps", "25", 0),
    "swa": _field("methods.swa", "True", False),
    "layer_freezing": _field("methods.freeze_level", "0.5", 0.0, "methods.freeze_start=0.5"),
    "selective_backprop": _field("methods.selective_backprop", "{}", None),
    "patch_whitening": _field("methods.patch_whitening", "{}", None, task=IMAGES),
    "seq_length_warmup": _field("methods.seq_length_warmup", "{}", None, task=TEXT),  # gpt_alibi's: from 8 over 30%
    "blurpool": _surgery("blurpool", IMAGES),
    # ResNet-20's convolutions have 16 to 64 channels: at the default min_channels (128, for ImageNet
    # ResNets) the surgery would gate none of them.
    "squeeze_excite": _surgery(("squeeze_excite", {"min_channels": 16}), IMAGES),
    "stochastic_depth": _surgery(("stochastic_depth", {"drop_rate": 0.05}), IMAGES),
    "channels_last": _surgery("channels_last", IMAGES),
    "alibi": _surgery("alibi", TEXT),
}
