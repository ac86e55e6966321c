"""Each public kernel function takes its closest PyTorch counterpart's arguments: names, order, defaults.

A call ported from PyTorch then means the same thing, or fails loudly; arguments PyTorch
does not have are keyword-only, after PyTorch's.
"""

import inspect
import re

import pytest
import torch.nn.functional as F

from fastcore_ops.kernels import alibi_attention, bce_with_logits, blur_maxpool2d, blurpool2d, ghost_batch_norm

pytestmark = pytest.mark.cpu_alone  # the functions' signatures alone


def _documented_signature(function, name: str) -> inspect.Signature:
    """The signature PyTorch's docstring gives a function that ``inspect`` cannot read (a builtin, a dispatcher)."""
    match = re.search(rf"{name}\((.*?)\)", function.__doc__, re.S)
    namespace = {}
    exec(f"def documented({' '.join(match.group(1).split())}): pass", namespace)
    return inspect.signature(namespace["documented"])


def _shape(parameters) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in parameters]


def _assert_ports(ours, theirs: inspect.Signature, shared: int) -> None:
    """Our first ``shared`` parameters are theirs (names, order, defaults); the rest are keyword-only."""
    parameters = list(inspect.signature(ours).parameters.values())
    assert _shape(parameters[:shared]) == _shape(list(theirs.parameters.values())[:shared])
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters[:shared])
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters[shared:])


@pytest.mark.parametrize("ours,theirs,shared,extra", [
    pytest.param(ghost_batch_norm, inspect.signature(F.batch_norm), 8, ["ghost_batch_size"], id="ghost_batch_norm"),
    pytest.param(alibi_attention, _documented_signature(F.scaled_dot_product_attention, "scaled_dot_product_attention"),
                 7, ["slopes"], id="alibi_attention"),
    pytest.param(blur_maxpool2d, _documented_signature(F.max_pool2d, "max_pool2d"), 4, [], id="blur_maxpool2d"),
    pytest.param(bce_with_logits, inspect.signature(F.binary_cross_entropy_with_logits), 2, ["label_smoothing"],
                 id="bce_with_logits"),
])
def test_arguments_follow_the_pytorch_counterpart(ours, theirs, shared, extra):
    _assert_ports(ours, theirs, shared)
    assert list(inspect.signature(ours).parameters)[shared:] == extra


def test_blurpool2d_takes_the_pooling_ops_input_and_stride():
    # No PyTorch op blurs with a fixed filter; the pooling ops' names are the closest.
    assert list(inspect.signature(blurpool2d).parameters) == ["input", "stride"]
    assert {"input", "stride"} <= set(_documented_signature(F.max_pool2d, "max_pool2d").parameters)


def test_documented_signatures_are_read_right():
    sdpa = _documented_signature(F.scaled_dot_product_attention, "scaled_dot_product_attention")
    assert list(sdpa.parameters)[:7] == ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"]
    assert sdpa.parameters["is_causal"].default is False
    assert _documented_signature(F.max_pool2d, "max_pool2d").parameters["stride"].default is None
