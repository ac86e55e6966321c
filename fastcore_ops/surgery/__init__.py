"""Model surgery: rewrite a model in place, before training, with one call.

    >>> import torch, torchvision
    >>> from fastcore_ops import apply_surgery
    >>> model = torchvision.models.resnet18(num_classes=10)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    >>> print(apply_surgery(model, ["blurpool", "squeeze_excite"], optimizers=opt))
    blurpool: 7 modules replaced, +0 / -0 parameters
      maxpool                MaxPool2d -> BlurMaxPool2d
    ...
    squeeze_excite: 13 modules replaced, +545,728 / -0 parameters
    ...

Each surgery lives in its own module with the modules it adds and the policy that finds
where they go; :mod:`.core` holds what they share.
"""

from .alibi import ALiBiPlanning, apply_alibi, register_alibi_model
from .blurpool import apply_blurpool
from .channels_last import apply_channels_last
from .core import apply_surgery, check_surgeries, list_surgeries
from .ghost_batchnorm import apply_ghost_batchnorm
from .report import SurgeryReport
from .squeeze_excite import apply_squeeze_excite
from .stochastic_depth import apply_stochastic_depth

__all__ = [
    "ALiBiPlanning",
    "SurgeryReport",
    "apply_alibi",
    "apply_blurpool",
    "apply_channels_last",
    "apply_ghost_batchnorm",
    "apply_squeeze_excite",
    "apply_stochastic_depth",
    "apply_surgery",
    "check_surgeries",
    "list_surgeries",
    "register_alibi_model",
]
