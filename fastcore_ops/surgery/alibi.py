"""ALiBi surgery (Press et al., 2022, "Train Short, Test Long") for GPT models.

Learned position embeddings go, and attention adds the ALiBi bias -slope_h * (i - j)
instead, computed by the fastcore_ops kernel; the model then runs on sequences longer
than it was built for. Two kinds of model are operated:

- Hugging Face transformers GPT-2 (``GPT2Model``, alone or inside ``GPT2LMHeadModel`` and
  friends). Through transformers' own extension points, no private method is patched:
  our attention function is registered in ``AttentionInterface`` and a matching mask
  function in ``AttentionMaskInterface`` under the name ``"fastcore_alibi"``, and
  ``model.set_attn_implementation("fastcore_alibi")`` selects it. ``wpe`` becomes a
  :class:`ZeroPositionEmbedding` (no parameters, zeros for any position), and
  ``config.n_positions`` is raised.
- Any other model class registered with :func:`register_alibi_model`: its own planner says
  what changes (the project's GPT in ``fastcore_ops/training/models/gpt.py`` registers itself this way;
  the library never imports ``training``).

transformers is not imported here: a model can only hold a GPT-2 if transformers' GPT-2
module has already been imported, so the plan looks it up in ``sys.modules``.

Method card
    What: learned position embeddings are removed and attention adds a per-head linear
        penalty on distance, so the model runs on sequences longer than it was trained on.
    When it helps: language models trained short and evaluated or used long; with
        sequence-length warmup it trains faster to the same loss (``gpt_alibi``).
    Cost: the bias is computed inside the attention kernel; no parameters (the position
        table's are removed).
    Options: ``max_sequence_length`` 8192 (what the operated model's config declares).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from ..checks import check_int
from ..kernels.alibi import alibi_attention, check_kernel_head_dim
from .core import Plan, Replacement, Site, Step, apply_surgery, count_modules, find_sites, register_surgery

ATTENTION_NAME = "fastcore_alibi"  # the name under which transformers' interfaces know our functions

_GPT2_MODULE = "transformers.models.gpt2.modeling_gpt2"


@dataclass
class ALiBiOptions:
    # The longest sequence the operated model is declared to take (GPT-2's n_positions, the
    # GPT's max_sequence_length); raised to this, never lowered. ALiBi itself has no limit:
    # this is what generation utilities and data pipelines read from the config.
    max_sequence_length: int = 8192

    def validate(self):
        check_int("max_sequence_length", self.max_sequence_length, low=1)


# ----------------------------------------------------------------------------------------
# transformers GPT-2: the module standing in for wpe, the attention and mask functions
# ----------------------------------------------------------------------------------------


class ZeroPositionEmbedding(nn.Module):
    """Stands where GPT-2's ``wpe`` was: no parameters, zeros for any position ids.

    GPT2Model always adds ``wpe(position_ids)`` to the token embeddings, so something must
    answer that call; zeros add nothing, for positions past the old table too. The zeros
    are one expanded scalar, not an allocated (B, T, C) tensor. The scalar is a
    non-persistent buffer so that it follows ``.to()`` and ``.half()`` while the state_dict
    holds nothing for it.
    """

    def __init__(self, embedding_dim: int, like: torch.Tensor):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.register_buffer("zero", torch.zeros((), dtype=like.dtype, device=like.device), persistent=False)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return self.zero.expand(*position_ids.shape, self.embedding_dim)

    def extra_repr(self) -> str:
        return f"embedding_dim={self.embedding_dim}"


_warned_about_dropout = False


def transformers_alibi_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: causal ALiBi attention through the fastcore_ops kernel.

    Called by transformers' attention layers once ``"fastcore_alibi"`` is the model's attention
    implementation. ``query`` is (B, H, Tq, D), ``key``/``value`` (B, H, Tk, D), with queries
    aligned to the end of the keys (a growing cache decodes correctly). Returns the output as
    (B, Tq, H, D) and no attention weights.
    """
    if attention_mask is not None:
        raise ValueError(
            f"ALiBi attention (attn_implementation={ATTENTION_NAME!r}) computes plain causal attention only, but "
            f"received an attention mask of shape {tuple(attention_mask.shape)} (padding, packed sequences, a "
            f"custom 4-D mask or a static cache); pass unpadded batches without attention_mask, or an "
            f"attention_mask of all ones"
        )
    if not getattr(module, "is_causal", True):
        raise ValueError(
            f"ALiBi attention (attn_implementation={ATTENTION_NAME!r}) is causal self-attention; "
            f"{type(module).__name__} is cross-attention, which it does not compute"
        )
    # Not while compiling: dynamo cannot trace warnings.warn, and fullgraph=True would fail on it.
    if dropout > 0 and module.training and not torch.compiler.is_compiling():
        _warn_dropout_once(dropout)
    # The default slopes, alibi_slopes(heads), computed in the kernel: nothing copied from the host per call.
    out = alibi_attention(query, key, value, is_causal=True, scale=None if scaling is None else float(scaling))
    return out.transpose(1, 2), None


def _warn_dropout_once(dropout: float) -> None:
    global _warned_about_dropout
    if not _warned_about_dropout:
        _warned_about_dropout = True
        warnings.warn(
            f"ALiBi attention does not apply attention dropout (attn_pdrop={dropout}): the kernel never stores "
            f"the attention probabilities; residual and embedding dropout still apply",
            stacklevel=3,
        )


_MASK_MESSAGE = (
    f"ALiBi attention (attn_implementation={ATTENTION_NAME!r}) computes plain causal attention only, but the "
    f"attention mask is more than causal (padding, packed sequences or a static cache); pass unpadded batches "
    f"without attention_mask, or an attention_mask of all ones"
)


def transformers_alibi_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                            attention_mask=None, device="cpu", **kwargs):
    """transformers mask function for ``"fastcore_alibi"``: None when the mask is plain causal.

    The kernel computes causal attention with queries aligned to the end of the keys and
    nothing else, so None ("plain causal") is the only mask it can honour. Anything more
    (a padding mask with zeros, packed sequences, a static cache's unfilled slots) is
    returned as the full boolean mask, which the attention function refuses with a clear
    error. While compiling or exporting, mask values cannot steer Python, so the check
    becomes a run-time assertion in the graph and None is returned. (While tracing,
    transformers always wraps the causal function for packed-sequence detection, so a
    compiled forward builds and compares the boolean mask once, for all layers.)

    Registering a name in ``AttentionInterface`` alone is not enough: transformers then
    drops a padding mask silently (its mask creation returns None for unknown names).
    """
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    mask_function = mask_function or causal_mask_function

    def full_mask():
        return sdpa_mask(
            batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset, kv_offset=kv_offset,
            mask_function=mask_function, attention_mask=attention_mask, allow_is_causal_skip=False,
            use_vmap=kwargs.get("use_vmap", False), device=device,
        )

    aligned = kv_offset == 0 and not isinstance(q_offset, torch.Tensor) and q_offset == kv_length - q_length
    full = plain = None
    if aligned and mask_function is causal_mask_function:
        if attention_mask is None:
            return None
        if attention_mask.shape[-1] >= kv_length:
            # Only padding can differ from causal: O(B * Tk), no (Tq, Tk) mask needed.
            plain = attention_mask[:, :kv_length].all()
    if plain is None:
        full = full_mask()
        keys = torch.arange(kv_length, device=device)
        queries = torch.arange(q_length, device=device) + (kv_length - q_length)
        plain = (full == (keys[None, :] <= queries[:, None])).all()
    if torch.compiler.is_compiling():
        torch._assert_async(plain, _MASK_MESSAGE)
        return None
    if bool(plain):
        return None
    return full if full is not None else full_mask()


def _register_with_transformers() -> None:
    """Make ``"fastcore_alibi"`` a valid attention implementation (idempotent).

    Never undone: a name in transformers' registries changes no model until a model's
    config selects it, and another operated model may be using it.
    """
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, transformers_alibi_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, transformers_alibi_mask)


# ----------------------------------------------------------------------------------------
# The plan
# ----------------------------------------------------------------------------------------


def _check_kernel_accepts(path: str, head_dim: int, dtype: torch.dtype) -> None:
    """Refuse, before anything changes, a model whose heads the kernel cannot compute.

    Asks the kernel itself: its head sizes (wherever the model will run), and its public function
    on empty inputs (which launch nothing) for the rest, so its limits stay in one place.
    """
    empty = torch.empty(1, 1, 0, head_dim, dtype=dtype)
    try:
        check_kernel_head_dim(head_dim)
        alibi_attention(empty, empty, empty)
    except (TypeError, ValueError) as error:
        raise type(error)(f"the alibi surgery cannot operate on {path or 'the model'}: {error}") from error


def _set_attribute_step(description: str, target, name: str, value) -> Step:
    old = getattr(target, name)
    return Step(description, lambda: setattr(target, name, value), lambda: setattr(target, name, old))


def _plan_gpt2(gpt2, path: str, planning: ALiBiPlanning) -> None:
    config, plan, options = gpt2.config, planning.plan, planning.options
    prefix = f"{path}." if path else ""
    if config.add_cross_attention:
        raise ValueError(
            f"the alibi surgery operates on decoder-only GPT-2; {path or 'the model'} has add_cross_attention=True, "
            f"and ALiBi attention computes causal self-attention only"
        )
    _check_kernel_accepts(path, config.n_embd // config.n_head, gpt2.wte.weight.dtype)
    if not isinstance(gpt2.wpe, ZeroPositionEmbedding):
        site = Site(f"{prefix}wpe", gpt2, "wpe", gpt2.wpe)
        plan.replacements.append(Replacement(site, ZeroPositionEmbedding(config.n_embd, like=gpt2.wpe.weight)))
    if not planning.first_visit(config):
        return
    if config._attn_implementation != ATTENTION_NAME:
        # The public setter validates the name against the registry and reaches every
        # submodel; undo writes back the exact value it replaced (the attribute the setter
        # writes), which cannot fail halfway the way re-validating "sdpa" might.
        previous = config._attn_implementation_internal

        def select():
            _register_with_transformers()
            gpt2.set_attn_implementation(ATTENTION_NAME)
            if config._attn_implementation != ATTENTION_NAME:
                # transformers only logs when a model class cannot switch (custom code it cannot
                # inspect); running on with zero positions and the old attention would be silent.
                raise RuntimeError(
                    f"{type(gpt2).__name__} at {path or 'the root'} did not accept attn_implementation="
                    f"{ATTENTION_NAME!r} (transformers cannot switch its attention); nothing was changed"
                )

        def restore():
            config._attn_implementation_internal = previous

        plan.steps.append(Step(f"{prefix}config: attention implementation {previous!r} -> {ATTENTION_NAME!r}",
                               select, restore))
    if config.n_positions < options.max_sequence_length:
        planning.set_attribute(f"{prefix}config: n_positions {config.n_positions} -> {options.max_sequence_length}",
                               config, "n_positions", options.max_sequence_length)


@dataclass
class ALiBiPlanning:
    """What a registered model's planner works with: the surgery's plan and options.

    The planner adds to ``plan`` (module replacements, steps with their undo, removed
    parameters); nothing changes until the whole plan has been validated.
    """

    plan: Plan
    options: ALiBiOptions
    _configs_seen: set[int] = field(default_factory=set)

    def first_visit(self, config) -> bool:
        """True the first time ``config`` is seen: models sharing one config change it once."""
        if id(config) in self._configs_seen:
            return False
        self._configs_seen.add(id(config))
        return True

    def set_attribute(self, description: str, target, name: str, value) -> None:
        """Plan ``target.name = value``, undone by writing back today's value."""
        self.plan.steps.append(_set_attribute_step(description, target, name, value))

    def replace_modules(self, root: nn.Module, path: str, match: Callable[[nn.Module], bool],
                        make: Callable[[nn.Module], nn.Module], skip: tuple[type, ...] = ()) -> None:
        """Plan replacing each module under ``root`` (at ``path``) that ``match``es with ``make(module)``."""
        prefix = f"{path}." if path else ""
        for site in find_sites(root, match, skip=skip):
            site = Site(prefix + site.path, site.parent, site.name, site.module)  # paths from the root model
            self.plan.replacements.append(Replacement(site, make(site.module)))

    def remove_module(self, description: str, parent: nn.Module, name: str) -> None:
        """Plan ``parent.name = None``, reporting the module's parameters as removed."""
        self.plan.removed_parameters.extend(getattr(parent, name).parameters())
        self.set_attribute(description, parent, name, None)

    def check_heads(self, path: str, head_dim: int, dtype: torch.dtype) -> None:
        """Refuse, before anything changes, heads the ALiBi kernel cannot compute."""
        _check_kernel_accepts(path, head_dim, dtype)


ALiBiPlanner = Callable[[nn.Module, str, ALiBiPlanning], None]


@dataclass(frozen=True)
class _Registration:
    planner: ALiBiPlanner
    made: tuple[type, ...]  # modules the planner puts in: finding them means the surgery was applied


_REGISTERED: dict[type, _Registration] = {}


def register_alibi_model(model_class: type, planner: ALiBiPlanner, made: tuple[type, ...] = ()) -> None:
    """Teach the ``alibi`` surgery a model class: ``planner(module, path, planning)`` plans its change.

    ``made``: the module classes the planner puts in, so a second application is recognized
    as a no-op. Registering a class again replaces its planner.

        >>> class Toy(nn.Module):
        ...     position = "learned"
        >>> def plan_toy(toy, path, planning):
        ...     planning.set_attribute(f"{path or 'model'}: position -> alibi", toy, "position", "alibi")
        >>> register_alibi_model(Toy, plan_toy)
        >>> toy = Toy()
        >>> _ = apply_surgery(toy, ["alibi"])
        >>> toy.position
        'alibi'
    """
    if not (isinstance(model_class, type) and issubclass(model_class, nn.Module)):
        raise TypeError(f"model_class must be an nn.Module subclass, got {model_class!r}")
    if not callable(planner):
        raise TypeError(f"planner must be callable as planner(module, path, planning), got {planner!r}")
    if not all(isinstance(kind, type) for kind in made):
        raise TypeError(f"made must be a tuple of module classes, got {made!r}")
    _REGISTERED[model_class] = _Registration(planner, tuple(made))


def _registration_for(module: nn.Module) -> _Registration | None:
    for model_class, registration in _REGISTERED.items():
        if isinstance(module, model_class):
            return registration
    return None


@register_surgery(
    "alibi",
    "replace learned position embeddings of GPT models (transformers GPT-2, classes registered with "
    "register_alibi_model) with ALiBi "
    "attention biases, so they run on sequences up to max_sequence_length and beyond",
    ALiBiOptions,
    order=10,
    inputs="tokens",
)
def plan_alibi(model: nn.Module, options: ALiBiOptions) -> Plan:
    planning = ALiBiPlanning(Plan(), options)
    paths = {id(m): name for name, m in model.named_modules()}
    gpt2_module = sys.modules.get(_GPT2_MODULE)
    made: tuple[type, ...] = (ZeroPositionEmbedding,)
    for registration in _REGISTERED.values():
        made += registration.made
    for module in model.modules():  # the root too: a bare GPT2Model or GPT is a model to operate
        if gpt2_module is not None and isinstance(module, gpt2_module.GPT2Model):
            _plan_gpt2(module, paths[id(module)], planning)
        elif (registration := _registration_for(module)) is not None:
            registration.planner(module, paths[id(module)], planning)
    planning.plan.already_applied = count_modules(model, made)
    return planning.plan


def apply_alibi(model: nn.Module, optimizers=None, **options):
    """Apply the ``alibi`` surgery alone; see :func:`apply_surgery`.

    Example:
        >>> import transformers
        >>> config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=16)
        >>> model = transformers.GPT2LMHeadModel(config).eval()
        >>> report = apply_alibi(model, max_sequence_length=8192)
        >>> model(torch.randint(0, 100, (1, 40))).logits.shape  # 40 tokens: longer than the 16 it was built for
        torch.Size([1, 40, 100])
    """
    return apply_surgery(model, [("alibi", options)], optimizers)
