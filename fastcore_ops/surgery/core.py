"""The machinery every surgery shares: registry, options, model walk, all-or-nothing apply, optimizers.

A surgery is a function ``plan(model, options) -> Plan`` registered under a name with a
dataclass of options. ``apply_surgery`` validates everything first, then applies each
surgery's plan in turn while keeping a journal, so that a failure anywhere puts back every
module it had changed; optimizers are updated only once the whole model has succeeded.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import torch
from torch import nn

from ..checks import check_bool, check_int, check_number, check_str
from ..discovery import import_package_modules
from .report import SurgeryRecord, SurgeryReport

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------
# Plans: what a surgery wants to change, computed before anything changes
# ----------------------------------------------------------------------------------------


@dataclass
class Site:
    """One place a module sits in the tree: ``getattr(parent, name) is module``.

    ``module`` is None for an empty slot that a block leaves for an optional module (timm's
    ``drop_path``): a replacement fills that one place.
    """

    path: str
    parent: nn.Module
    name: str
    module: nn.Module | None


@dataclass
class Replacement:
    """Put ``new`` where ``site.module`` is (at every place the same module object sits)."""

    site: Site
    new: nn.Module


@dataclass
class Step:
    """A model-wide change that is not a module swap (a layout or config change), with its undo."""

    description: str
    apply: Callable[[], None]
    undo: Callable[[], None]


@dataclass
class Plan:
    replacements: list[Replacement] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    already_applied: int = 0  # modules this surgery made in an earlier call
    removed_parameters: list[nn.Parameter] = field(default_factory=list)  # beyond those of swapped modules
    skipped: list[Site] = field(default_factory=list)  # found by the policy but left as they are
    skip_reason: str = ""  # why: what the model already has, where, and what to do instead


def skip_for_existing(sites: Sequence[Site], feature: str, holders: Sequence[str], fix: str,
                      already_applied: int = 0) -> Plan:
    """A plan that leaves every site as it is, because the model already has ``feature`` at ``holders`` (paths).

    A model built with the feature its authors placed (squeeze-excite gates, drop paths) would
    otherwise get it a second time; the report and a warning name where it is, and ``fix``.
    """
    named = ", ".join(holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")
    return Plan(skipped=list(sites), skip_reason=f"the model already has {feature}, at {named}; {fix}",
                already_applied=already_applied)


INPUTS = ("images", "tokens")  # what the models a surgery operates on take


@dataclass
class Surgery:
    """One registered surgery, with what it declares about itself (see :func:`register_surgery`)."""

    name: str
    description: str
    options: type  # a dataclass; its fields are the surgery's options
    plan: Callable[[nn.Module, object], Plan]
    order: int
    inputs: str
    leaves_parameters_unused: bool = False
    loader_switch: str | None = None
    tried_with: dict = field(default_factory=dict)


_REGISTRY: dict[str, Surgery] = {}


def register_surgery(name: str, description: str, options: type, *, order: int, inputs: str,
                     leaves_parameters_unused: bool = False, loader_switch: str | None = None,
                     tried_with: dict | None = None):
    """Register ``plan`` under ``name``; ``options`` is a dataclass whose fields are the options.

    order: its place among surgeries applied together, lower first (a training run applies them in it).
    inputs: what the models it operates on take, one of :data:`INPUTS` (a training run offers it to the tasks
        whose batches hold them).
    leaves_parameters_unused: a training step of the operated model may leave some parameters without a gradient.
    loader_switch: a keyword of :func:`fastcore_ops.data.build_loader` to turn on with it (its batches' layout).
    tried_with: the options, where not their defaults, that an ablation tries it with.

    A second surgery under a registered name is refused, as the method and model registries refuse one.
    """
    if inputs not in INPUTS:
        raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, got {inputs!r}")

    def decorator(plan: Callable[[nn.Module, object], Plan]):
        if name in _REGISTRY and _REGISTRY[name].plan is not plan:
            raise ValueError(f"surgery {name!r} is registered twice ({_REGISTRY[name].plan.__module__} and "
                             f"{plan.__module__}); give one of them another name")
        _REGISTRY[name] = Surgery(name, description, options, plan, order, inputs, leaves_parameters_unused,
                                  loader_switch, dict(tried_with or {}))
        return plan

    return decorator


def registered_surgeries() -> dict[str, Surgery]:
    """Every surgery by name, once each module of this package has registered its own (:mod:`fastcore_ops.discovery`).

        >>> registered_surgeries()["blurpool"].options.__name__
        'BlurPoolOptions'
    """
    import_package_modules(__package__)
    return _REGISTRY


# ----------------------------------------------------------------------------------------
# Walking the model
# ----------------------------------------------------------------------------------------


def find_sites(
    model: nn.Module, predicate: Callable[[nn.Module], bool], skip: tuple[type, ...] = ()
) -> list[Site]:
    """Every place in ``model`` holding a module that satisfies ``predicate``, in definition order.

    Modules of the ``skip`` types are not entered: a surgery passes the modules it makes,
    so a second application does not operate on their insides. The root is never a site.
    """
    sites: list[Site] = []

    def visit(module: nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            path = f"{prefix}.{name}" if prefix else name
            if predicate(child):
                sites.append(Site(path, module, name, child))
            elif not isinstance(child, skip):
                visit(child, path)

    visit(model, "")
    return sites


def count_modules(model: nn.Module, types: tuple[type, ...]) -> int:
    return sum(isinstance(m, types) for m in model.modules())


def imported_classes(names: Mapping[str, Sequence[str]]) -> tuple[type, ...]:
    """The classes ``names`` lists (module name -> class names), from those modules already imported.

    For another library's classes a surgery recognizes (timm's blocks): a model can only hold
    one if its module is imported, so nothing is imported here and a library that is not
    installed is no error.

    Example:
        >>> imported_classes({"torch.nn": ["ReLU"], "no_such_library.layers": ["Block"]})
        (<class 'torch.nn.modules.activation.ReLU'>,)
    """
    found = (getattr(sys.modules[module], name, None) for module, classes in names.items()
             if module in sys.modules for name in classes)
    return tuple(cls for cls in found if cls is not None)


def first_tensor(module: nn.Module) -> torch.Tensor | None:
    """A parameter or buffer of ``module``, to read its device and dtype from."""
    for tensor in module.parameters():
        return tensor
    return next(iter(module.buffers()), None)


def place_like(new: nn.Module, old: nn.Module) -> nn.Module:
    """Move ``new`` to the device and floating dtype of ``old``."""
    reference = first_tensor(old)
    if reference is None:
        return new
    new = new.to(device=reference.device)
    return new.to(dtype=reference.dtype) if reference.is_floating_point() else new


# ----------------------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------------------


# The type check of each annotation an options dataclass may use; ranges are its validate()'s.
_TYPE_CHECKS = {"int": check_int, "float": check_number, "bool": check_bool, "str": check_str}


def build_options(surgery: Surgery, given: Mapping[str, object] | None):
    """The surgery's options dataclass from ``given``, with unknown names and wrong types refused."""
    given = dict(given or {})
    fields = {f.name: f for f in dataclasses.fields(surgery.options)}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ValueError(
            f"surgery {surgery.name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options are: {', '.join(fields) or 'none'}"
        )
    for name, value in given.items():
        declared = fields[name].type
        annotation = declared if isinstance(declared, str) else declared.__name__
        _TYPE_CHECKS[annotation](f"option {name!r} of surgery {surgery.name!r}", value)
    options = surgery.options(**given)
    if hasattr(options, "validate"):
        options.validate()
    return options


def _normalize(surgeries) -> list[tuple[str, Mapping[str, object]]]:
    """Names, (name, options) pairs or a name -> options dict, as a list of pairs."""
    if isinstance(surgeries, str):
        raise TypeError(f"surgeries must be a list of names, got the string {surgeries!r}; write [{surgeries!r}]")
    if isinstance(surgeries, Mapping):
        return [(name, options) for name, options in surgeries.items()]
    pairs = []
    for item in surgeries:
        if isinstance(item, str):
            pairs.append((item, {}))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            pairs.append(item)
        else:
            raise TypeError(f"each surgery must be a name or a (name, options) pair, got {item!r}")
    return pairs


def _wrapper_types() -> tuple[type, ...]:
    wrappers: list[type] = [nn.DataParallel, nn.parallel.DistributedDataParallel]
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel

        wrappers.append(FullyShardedDataParallel)
    except ImportError:  # a torch built without distributed support
        pass
    return tuple(wrappers)


def find_wrapper(model: nn.Module) -> tuple[str, nn.Module] | None:
    """The path and module of the first DataParallel, DDP or FSDP wrapper in ``model`` (the root is ""), or None.

    FSDP2's ``fully_shard`` leaves no wrapper, only classes named FSDP<Module>.

    Example:
        >>> find_wrapper(nn.Sequential(nn.Linear(2, 2), nn.DataParallel(nn.Linear(2, 2))))[0]
        '1'
    """
    wrappers = _wrapper_types()
    for path, module in model.named_modules():
        if isinstance(module, wrappers) or type(module).__name__.startswith("FSDP"):
            return path, module
    return None


def _check_model(model) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    found = find_wrapper(model)
    if found is not None:
        path, wrapper = found
        # Surgery inside a wrapper would leave it holding stale parameter lists (DDP's buckets,
        # FSDP's flat parameters) and would not reach DataParallel's per-device replicas.
        where = "model is" if not path else f"model holds, at {path!r},"
        raise TypeError(
            f"{where} a {type(wrapper).__name__} (a parallel wrapper or an FSDP-sharded module); apply surgery to "
            f"the bare model before wrapping it, then wrap the operated model"
        )


def _check_optimizers(optimizers) -> list[torch.optim.Optimizer]:
    if optimizers is None:
        return []
    if isinstance(optimizers, torch.optim.Optimizer):
        return [optimizers]
    optimizers = list(optimizers)
    for optimizer in optimizers:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizers must be torch.optim.Optimizer instances, got {type(optimizer).__name__}")
    return optimizers


# ----------------------------------------------------------------------------------------
# Applying plans with a journal
# ----------------------------------------------------------------------------------------


def _all_places(model: nn.Module, target: nn.Module) -> Iterator[tuple[nn.Module, str]]:
    """Every (parent, name) where ``target`` sits, so a shared module is replaced everywhere."""
    for parent in model.modules():
        for name, child in parent._modules.items():  # named_children() would skip repeats
            if child is target:
                yield parent, name


def _places(model: nn.Module, site: Site) -> list[tuple[nn.Module, str]]:
    """Where a replacement goes: everywhere the module sits, or the site alone when it is an empty slot."""
    if site.module is None:
        return [(site.parent, site.name)]
    return list(_all_places(model, site.module))


def _inherit_mode(new: nn.Module, old: nn.Module) -> None:
    """Modules the surgery created take the train/eval mode of what they replace (of the block, for an
    empty slot); reused ones keep theirs."""
    reused = {id(m) for m in old.modules()}
    for module in new.modules():
        if id(module) not in reused:
            module.training = old.training


def _apply_plan(model: nn.Module, plan: Plan, journal: list[Callable[[], None]]) -> list[Replacement]:
    """Apply ``plan``; return the replacements done (shared modules once). Every change goes in the journal."""
    done: list[Replacement] = []
    seen: set[int] = set()
    for replacement in plan.replacements:
        site = replacement.site
        old = site.module
        if old is not None:
            if id(old) in seen:
                continue
            seen.add(id(old))
        _inherit_mode(replacement.new, site.parent if old is None else old)
        for parent, name in _places(model, site):
            setattr(parent, name, replacement.new)
            journal.append(lambda parent=parent, name=name, old=old: setattr(parent, name, old))
        done.append(replacement)
    for step in plan.steps:
        step.apply()
        journal.append(step.undo)
    return done


def _parameter_changes(done: Sequence[Replacement], plan: Plan):
    """Parameters the plan removed, and the new ones with the parameter whose group they join."""
    removed: dict[int, nn.Parameter] = {id(p): p for p in plan.removed_parameters}
    added: list[tuple[nn.Parameter, nn.Parameter | None]] = []
    for replacement in done:
        site = replacement.site
        old = {} if site.module is None else {id(p): p for p in site.module.parameters()}
        new = {id(p): p for p in replacement.new.parameters()}
        removed.update({k: p for k, p in old.items() if k not in new})
        # An empty slot's new parameters join the group of its block's.
        anchor = next((site.parent if site.module is None else site.module).parameters(), None)
        added.extend((p, anchor) for k, p in new.items() if k not in old)
    return list(removed.values()), added


def _update_optimizers(optimizers, removed, added) -> None:
    """Removed parameters leave their groups and state; new ones join their anchor's group.

    A new parameter whose anchor (a parameter of the module it replaces) is in no group of
    an optimizer, because that module had none (a pooling layer, say), joins the
    optimizer's first group.
    """
    removed_ids = {id(p) for p in removed}
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["params"] = [p for p in group["params"] if id(p) not in removed_ids]
        for p in removed:
            optimizer.state.pop(p, None)
        for parameter, anchor in added:
            if parameter.requires_grad:
                (_group_holding(optimizer, anchor) or optimizer.param_groups[0])["params"].append(parameter)


def _group_holding(optimizer, parameter) -> dict | None:
    for group in optimizer.param_groups:
        if any(p is parameter for p in group["params"]):
            return group
    return None


def _check_optimizer_holds_no_strangers(optimizers, model: nn.Module) -> None:
    """Refuse optimizers that hold parameters of another model: surgery would update the wrong one."""
    own = {id(p) for p in model.parameters()}
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            if any(id(p) not in own for p in group["params"]):
                raise ValueError(
                    "an optimizer holds parameters that are not the model's; pass the optimizers built on this model"
                )


# ----------------------------------------------------------------------------------------
# Public entry points
# ----------------------------------------------------------------------------------------


def check_surgeries(surgeries) -> list[tuple[Surgery, object]]:
    """Each surgery :func:`apply_surgery` would run, with its options checked, touching no model.

    For checking a configuration before building its model: the same errors as apply_surgery's.

    Example:
        >>> [surgery.name for surgery, _ in check_surgeries(["blurpool", ("stochastic_depth", {"drop_rate": 0.1})])]
        ['blurpool', 'stochastic_depth']
        >>> check_surgeries([("blurpool", {"min_chanels": 8})])
        Traceback (most recent call last):
        ...
        ValueError: surgery 'blurpool' has no option 'min_chanels'; its options are: min_channels, replace_convs, replace_maxpools
    """
    registry, requests = registered_surgeries(), []
    for name, given in _normalize(surgeries):
        if name not in registry:
            raise ValueError(f"unknown surgery {name!r}; choose from: {', '.join(sorted(registry))}")
        if not isinstance(given, Mapping):
            raise TypeError(f"options of surgery {name!r} must be a dict, got {type(given).__name__}")
        requests.append((registry[name], build_options(registry[name], given)))
    return requests


def apply_surgery(model: nn.Module, surgeries, optimizers=None) -> SurgeryReport:
    """Rewrite ``model`` in place with the named surgeries, in order; all or nothing.

    Args:
        surgeries: names (``["blurpool", "squeeze_excite"]``), (name, options) pairs, or a
            dict of name to options (``{"blurpool": {"min_channels": 32}}``).
        optimizers: an optimizer or several, already built on ``model``: removed parameters
            leave their param groups and state, new ones join the group of what they replace.

    Returns a :class:`SurgeryReport` (print it for a table). If anything fails, the model and
    the optimizers are left exactly as they were.

    Example:
        >>> import torchvision
        >>> model = torchvision.models.resnet18(num_classes=10)
        >>> print(apply_surgery(model, ["blurpool", ("stochastic_depth", {"drop_rate": 0.1})]))
        blurpool: 7 modules replaced, +0 / -0 parameters
          maxpool                MaxPool2d -> BlurMaxPool2d
        ...
        stochastic_depth: 8 modules replaced, +0 / -0 parameters
          layer1.0  BasicBlock -> StochasticDepthBlock
        ...
    """
    _check_model(model)
    optimizers = _check_optimizers(optimizers)
    _check_optimizer_holds_no_strangers(optimizers, model)
    requests = check_surgeries(surgeries)

    journal: list[Callable[[], None]] = []
    records, removed, added = [], [], []
    try:
        for surgery, options in requests:
            plan = surgery.plan(model, options)
            done = _apply_plan(model, plan, journal)
            plan_removed, plan_added = _parameter_changes(done, plan)
            removed += plan_removed
            added += plan_added
            records.append(SurgeryRecord.from_plan(surgery, done, plan, plan_removed, plan_added))
    except BaseException:
        for undo in reversed(journal):
            undo()
        raise
    _update_optimizers(optimizers, removed, added)

    report = SurgeryReport(records)
    for record in records:
        if record.nothing_found or record.skipped:
            warnings.warn(f"surgery {record.name!r}: {record.note}", stacklevel=2)
    log.info("%s", report)
    return report


def list_surgeries() -> list[dict]:
    """Every surgery: name, one-line description, and options with their defaults.

    Example:
        >>> [s["name"] for s in list_surgeries()]
        ['alibi', 'blurpool', 'channels_last', 'ghost_batchnorm', 'squeeze_excite', 'stochastic_depth']
    """
    return [
        {
            "name": s.name,
            "description": s.description,
            "options": {f.name: f.default for f in dataclasses.fields(s.options)},
        }
        for s in sorted(registered_surgeries().values(), key=lambda s: s.name)
    ]

