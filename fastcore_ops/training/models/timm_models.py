"""timm's classifiers by name: ``model.name=timm:resnet18`` builds ``timm.create_model("resnet18", pretrained=False, ...)``.

timm is optional (the ``optim`` extra, which ``make`` installs): it is imported only when a
``timm:`` name is asked for.

    >>> build_timm_model("timm:resnet18", num_classes=10).fc.out_features
    10
"""

from __future__ import annotations

from torch import nn

from fastcore_ops.cli import nearest

PREFIX = "timm:"


def is_timm_name(name: str) -> bool:
    """Whether ``name`` asks for a timm model; :func:`check_timm_name` says whether timm has it."""
    return name.startswith(PREFIX)


def check_timm_name(name: str) -> str:
    """timm's own name in ``name`` ("timm:resnet18" -> "resnet18"); ValueError naming the fix when timm is not
    installed or has no such model.

        >>> check_timm_name("timm:resnet5O")
        Traceback (most recent call last):
        ...
        ValueError: model.name 'timm:resnet5O': timm has no model 'resnet5O'; did you mean timm:resnet50, ...
    """
    architecture = name[len(PREFIX):]
    try:
        import timm
    except ImportError:
        raise ValueError(f"model.name {name!r} is a timm model, and timm is not installed; install it with "
                         f"pip install timm (or pip install 'fastcore_ops[optim]')") from None
    if not timm.is_model(architecture):
        close = nearest(architecture, timm.list_models())
        hint = f"did you mean {', '.join(PREFIX + n for n in close)}?" if close else "timm.list_models() lists its models"
        raise ValueError(f"model.name {name!r}: timm has no model {architecture!r}; {hint}")
    return architecture


def build_timm_model(name: str, num_classes: int) -> nn.Module:
    """timm's model ``name`` ("timm:resnet18"), randomly initialized, with ``num_classes`` outputs."""
    import timm

    return timm.create_model(check_timm_name(name), pretrained=False, num_classes=num_classes)
