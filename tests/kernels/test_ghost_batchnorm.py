"""Ghost batch norm against its reference: values, gradients, running statistics, layouts, dtypes, errors."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fastcore_ops.kernels import backend, ghost_batch_norm, ghost_batchnorm
from fastcore_ops.kernels.ghost_batchnorm import ghost_batch_norm_reference
from tests.conftest import FLOAT_DTYPES, TOLERANCES

NCHW, NHWC = torch.contiguous_format, torch.channels_last


def _inputs(shape, dtype, device, layout=NCHW, seed=0, param_dtype=None, affine=True, running=True):
    """x (mean 0.5, std 2), weight, bias and running statistics (fp32, fp64 for fp64 x)."""
    g = torch.Generator().manual_seed(seed)
    C = shape[1]
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 0.5).to(device, dtype)
    if x.dim() == 4:
        x = x.contiguous(memory_format=layout)
    param_dtype = param_dtype or dtype
    weight = bias = running_mean = running_var = None
    if affine:
        weight = (torch.rand(C, generator=g) + 0.5).to(device, param_dtype).requires_grad_()
        bias = torch.randn(C, generator=g).to(device, param_dtype).requires_grad_()
    if running:
        stats_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        running_mean = torch.randn(C, generator=g).to(device, stats_dtype)
        running_var = (torch.rand(C, generator=g) + 0.5).to(device, stats_dtype)
    return x.requires_grad_(), weight, bias, running_mean, running_var


def _compare(x, weight, bias, running_mean, running_var, ghost_batch_size, training=True, momentum=0.1, eps=1e-5):
    """Output, gradients of x, weight and bias, and final running statistics against the
    reference run in fp32 (fp64 for fp64) on copies of the same inputs."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32

    def copy(t, grad=False):  # a copy even when t already has the compute dtype
        return None if t is None else t.detach().to(compute, copy=True).requires_grad_(grad)

    ref_x, ref_weight, ref_bias = copy(x, True), copy(weight, weight is not None), copy(bias, bias is not None)
    ref_mean, ref_var = copy(running_mean), copy(running_var)

    out = ghost_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps,
                           ghost_batch_size=ghost_batch_size)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device, out.dtype)
    out.backward(grad_out)
    ref = ghost_batch_norm_reference(ref_x, ref_mean, ref_var, ref_weight, ref_bias, training, momentum, eps,
                                     ghost_batch_size=ghost_batch_size)
    ref.backward(grad_out.to(compute))

    torch.testing.assert_close(out, ref.to(out.dtype), **TOLERANCES[out.dtype])
    torch.testing.assert_close(x.grad, ref_x.grad.to(x.dtype), **TOLERANCES[x.dtype])
    for ours, theirs in ((weight, ref_weight), (bias, ref_bias)):
        if ours is not None:
            torch.testing.assert_close(ours.grad, theirs.grad.to(ours.dtype), **TOLERANCES[ours.dtype])
    for ours, theirs in ((running_mean, ref_mean), (running_var, ref_var)):
        if ours is not None:
            torch.testing.assert_close(ours, theirs.to(ours.dtype), **TOLERANCES[ours.dtype])
    return out


def _case(shape, layout, ghost):
    name = "x".join(map(str, shape)) + ("-nhwc" if layout == NHWC else "") + f"-ghost{ghost}"
    return pytest.param(shape, layout, ghost, id=name)


CASES = [
    _case((12, 5), NCHW, 4),  # (N, C), N a multiple of the ghost size
    _case((12, 5), NCHW, 5),  # (N, C), last chunk of 2
    _case((12, 5), NCHW, 16),  # ghost size >= N: one chunk, ordinary batch norm
    _case((7, 3, 5, 6), NCHW, 3),  # last chunk of one sample (still 30 values per channel)
    _case((7, 3, 5, 6), NHWC, 3),
    _case((8, 6, 4, 3), NCHW, 4),
    _case((8, 6, 4, 3), NHWC, 4),
    _case((5, 4, 3, 3), NCHW, 8),
    _case((5, 4, 3, 3), NHWC, 8),
    _case((6, 4, 1, 1), NCHW, 4),  # 1x1 images: rows of channels, like (N, C)
    _case((5, 6, 17, 16), NCHW, 2),  # planes of more than 256 pixels: tiles of planes, not flat
    _case((4, 5, 16, 16), NCHW, 2),  # flat tiles that 4 planes fill to the last lane, then a block of 1 channel
]


@pytest.mark.parametrize("shape,layout,expected", [
    ((12, 5), NCHW, "rows"), ((6, 4, 1, 1), NCHW, "rows"), ((8, 6, 4, 3), NHWC, "rows"),
    ((8, 6, 4, 3), NCHW, "flat"), ((8, 6, 16, 16), NCHW, "flat"), ((5, 6, 17, 16), NCHW, "planes"),
], ids=str)
def test_layout_by_memory_and_plane_size(shape, layout, expected):
    x = torch.empty(shape, device="meta").contiguous(memory_format=layout)
    assert ghost_batchnorm._plan(x, 4).layout == expected


def test_the_first_flat_config_holds_every_flat_plane():
    """FASTCORE_OPS_AUTOTUNE=0 and the interpreter run the first config at every launch, unpruned."""
    largest = {"HW_BUCKET": backend.size_bucket(ghost_batchnorm._FLAT_MAX_PIXELS)}
    assert ghost_batchnorm._fits(ghost_batchnorm._FLAT_CONFIGS[0], largest)
    assert not all(ghost_batchnorm._fits(config, largest) for config in ghost_batchnorm._FLAT_CONFIGS), \
        "some configs hold only smaller planes: the autotuner must leave them out there"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,layout,ghost", CASES)
def test_matches_reference(shape, layout, ghost, dtype, device):
    x, weight, bias, running_mean, running_var = _inputs(shape, dtype, device, layout)
    out = _compare(x, weight, bias, running_mean, running_var, ghost)
    if layout == NHWC:
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert x.grad.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("shape,layout,ghost,splits", [
    pytest.param((13, 5), NCHW, 5, 4, id="13x5-ghost5"),
    pytest.param((7, 3, 5, 6), NCHW, 3, 2, id="7x3x5x6-ghost3"),
    # More splits than one tile of partials; the short last chunk has empty ones.
    pytest.param((3, 2, 2, 8), NHWC, 2, 32, id="3x2x2x8-nhwc-ghost2"),
])
def test_many_splits_per_chunk(shape, layout, ghost, splits, device, monkeypatch):
    # Small shapes get one split per chunk; let every value start a split.
    monkeypatch.setattr(ghost_batchnorm, "_MIN_VALUES_PER_SPLIT", 1)
    x, weight, bias, running_mean, running_var = _inputs(shape, torch.float32, device, layout, seed=3)
    assert ghost_batchnorm._plan(x, ghost).splits == splits
    _compare(x, weight, bias, running_mean, running_var, ghost)


@pytest.mark.parametrize("layout", [NCHW, NHWC], ids=["nchw", "nhwc"])
def test_eval_uses_running_statistics_like_f_batch_norm(layout, device):
    x, weight, bias, running_mean, running_var = _inputs((6, 4, 3, 5), torch.float32, device, layout)
    before = running_mean.clone(), running_var.clone()
    out = _compare(x, weight, bias, running_mean, running_var, 2, training=False)
    expected = F.batch_norm(x.detach(), before[0], before[1], weight.detach(), bias.detach(), False, 0.1, 1e-5)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(running_mean, before[0], rtol=0, atol=0)
    torch.testing.assert_close(running_var, before[1], rtol=0, atol=0)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("given", ["none", "weight", "bias"])
def test_optional_affine_and_no_running_statistics(given, training, device):
    x, weight, bias, _, _ = _inputs((7, 3, 4, 4), torch.float32, device, NHWC, running=False)
    weight = weight if given == "weight" else None
    bias = bias if given == "bias" else None
    out = _compare(x, weight, bias, None, None, 3, training=training)
    # Without running statistics, eval normalizes with the chunks' statistics, as in training.
    other = ghost_batch_norm(x.detach(), None, None, weight, bias, training=not training, ghost_batch_size=3)
    torch.testing.assert_close(out, other)


def test_fp16_activations_with_fp32_parameters(device):
    # Mixed precision: fp16 activations, fp32 weight, bias and running statistics.
    x, weight, bias, running_mean, running_var = _inputs((8, 6, 4, 3), torch.float16, device, NHWC,
                                                         param_dtype=torch.float32)
    _compare(x, weight, bias, running_mean, running_var, 3, momentum=0.3, eps=1e-3)


@pytest.mark.parametrize("shape,layout,ghost", [_case((6, 3), NCHW, 4), _case((5, 2, 2, 3), NCHW, 2),
                                                _case((5, 2, 2, 3), NHWC, 3)])
def test_fp64_gradcheck_and_exact_statistics(shape, layout, ghost, device):
    x, weight, bias, running_mean, running_var = _inputs(shape, torch.float64, device, layout)
    _compare(x, weight, bias, running_mean, running_var, ghost, momentum=0.3)
    inputs = [t.detach().requires_grad_() for t in (x, weight, bias)]
    assert torch.autograd.gradcheck(
        lambda x, w, b: ghost_batch_norm(x, None, None, w, b, True, ghost_batch_size=ghost), inputs, fast_mode=True)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 10), c=st.integers(1, 6), spatial=st.sampled_from([(), (1, 1), (2, 3), (4, 4)]),
    ghost=st.integers(1, 12), channels_last=st.booleans(), training=st.booleans(),
)
def test_random_shapes(n, c, spatial, ghost, channels_last, training):
    values = 1 if not spatial else spatial[0] * spatial[1]
    last = n - (n - 1) // ghost * ghost
    assume(values > 1 or min(ghost, last) > 1)  # a chunk of one value per channel is an error
    layout = NHWC if channels_last else NCHW
    x, weight, bias, running_mean, running_var = _inputs((n, c, *spatial), torch.float32, "cpu", layout,
                                                         seed=n * 100 + c)
    _compare(x, weight, bias, running_mean, running_var, ghost, training=training)


def test_non_contiguous_input_and_expanded_gradient(device):
    x, weight, bias, running_mean, running_var = _inputs((8, 6, 5, 7), torch.float32, device)
    sliced = x.detach()[:, ::2, 1:, :].requires_grad_()  # neither contiguous nor channels_last
    _compare(sliced, weight[:3].detach().requires_grad_(), bias[:3].detach().requires_grad_(),
             running_mean[:3].clone(), running_var[:3].clone(), 3)
    # out.sum() hands backward an expanded gradient (all strides 0).
    x.grad = None
    ref_x = x.detach().clone().requires_grad_()
    ghost_batch_norm(x, None, None, weight, bias, True, ghost_batch_size=3).sum().backward()
    reference = ghost_batch_norm_reference(ref_x, None, None, weight.detach(), bias.detach(), True, ghost_batch_size=3)
    reference.sum().backward()
    torch.testing.assert_close(x.grad, ref_x.grad)


def test_statistics_are_exact_far_from_zero(device):
    # Mean 1000 and std 1 in fp32: E[x^2] - E[x]^2 would lose most digits of the variance
    # (x^2 ~ 1e6 has an ulp of 0.06); sums of deviations from a value of the channel itself
    # (shifted sums) keep the deviations exact.
    g = torch.Generator().manual_seed(0)
    x = (1000 + torch.randn(64, 3, 4, 4, generator=g)).to(device)
    out = ghost_batch_norm(x, None, None, training=True, ghost_batch_size=16)
    expected = ghost_batch_norm_reference(x.double(), None, None, training=True, ghost_batch_size=16)
    torch.testing.assert_close(out, expected.float(), rtol=1e-4, atol=1e-4)


def test_constant_channel_normalizes_to_bias(device):
    # Variance 0: a variance formula that can go negative would give NaN here. The mean is
    # exact only to an ulp, which 1 / sqrt(eps) amplifies to ~1e-4.
    x = torch.full((6, 2, 3, 3), 3.7, device=device, requires_grad=True)
    weight = torch.tensor([2.0, -1.0], device=device, requires_grad=True)
    bias = torch.tensor([0.5, 0.25], device=device, requires_grad=True)
    out = ghost_batch_norm(x, None, None, weight, bias, training=True, ghost_batch_size=3)
    torch.testing.assert_close(out, bias.detach().view(1, 2, 1, 1).expand_as(out), rtol=0, atol=1e-3)
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(weight.grad).all()


def test_backward_without_gradient_of_out_returns_none():
    # Gradients are not materialized (tests/kernels/test_host_side.py: no zero-fills): an output
    # that got none arrives as None, not as zeros.
    assert ghost_batchnorm._ghost_batch_norm_backward(None, None, None, None) == (None,) * 5


@pytest.mark.parametrize("shape", [(0, 3), (0, 3, 4, 4), (4, 3, 0, 5)], ids=str)
def test_empty_batch_gives_empty_output(shape, device):
    x = torch.zeros(shape, device=device, requires_grad=True)
    weight = torch.ones(3, device=device, requires_grad=True)
    bias = torch.zeros(3, device=device, requires_grad=True)
    running_mean, running_var = torch.zeros(3, device=device), torch.ones(3, device=device)
    out = ghost_batch_norm(x, running_mean, running_var, weight, bias, training=True, ghost_batch_size=2)
    assert out.shape == x.shape
    out.sum().backward()
    assert x.grad.shape == x.shape
    torch.testing.assert_close(weight.grad, torch.zeros(3, device=device))
    torch.testing.assert_close(running_mean, torch.zeros(3, device=device))
    torch.testing.assert_close(running_var, torch.ones(3, device=device))


def _call(x=None, ghost=2, weight=None, bias=None, running_mean=None, running_var=None, training=True, **kwargs):
    x = torch.zeros(4, 3, 2, 2) if x is None else x
    return lambda: ghost_batch_norm(x, running_mean, running_var, weight, bias, training, ghost_batch_size=ghost,
                                    **kwargs)


@pytest.mark.parametrize(
    "call,error,match",
    [
        (_call(ghost=0), ValueError, "ghost_batch_size must be an int >= 1, got 0"),
        (_call(ghost=-3), ValueError, "ghost_batch_size must be an int >= 1, got -3"),
        (_call(ghost=2.0), TypeError, "ghost_batch_size must be an int >= 1, got float"),
        (_call(ghost=True), TypeError, "ghost_batch_size must be an int >= 1, got bool"),
        (_call(weight=torch.ones(4)), ValueError, r"weight must have shape \(C,\) = \(3,\) .* got \(4,\)"),
        (_call(bias=torch.ones(2)), ValueError, r"bias must have shape \(C,\) = \(3,\) .* got \(2,\)"),
        (_call(running_mean=torch.ones(5), running_var=torch.ones(3)), ValueError, r"running_mean must have shape"),
        (_call(running_mean=torch.ones(3), running_var=torch.ones(5)), ValueError, r"running_var must have shape"),
        (_call(weight=torch.ones(3, 1)), ValueError, "weight must have 1 dimensions"),
        (_call(running_mean=torch.zeros(3)), ValueError, "running_mean and running_var must be given together"),
        (_call(x=torch.zeros(5, 3), ghost=2), ValueError,
         r"ghost_batch_size 2 cuts input \(N = 5 .*\) into a chunk of 1 sample, whose variance is undefined; "
         r".*e\.g\. 3"),
        (_call(x=torch.zeros(4, 3, 1, 1), ghost=1), ValueError, r"ghost_batch_size 1 cuts input .* e\.g\. 2"),
        (_call(x=torch.zeros(1, 3), ghost=4), ValueError, "batches of at least 2 samples"),
        (_call(x=torch.zeros(4, 3, 5)), ValueError, "input must have 2 or 4 dimensions, got shape"),
        (_call(x=torch.zeros(4)), ValueError, "input must have 2 or 4 dimensions"),
        (_call(x=torch.zeros(4, 3, dtype=torch.int64)), TypeError, "input must be a floating tensor"),
        (_call(weight=torch.ones(3, dtype=torch.int32)), TypeError, "weight must be a floating tensor"),
        (_call(x=[[1.0, 2.0]]), TypeError, "input must be a torch.Tensor"),
        (_call(weight=torch.ones(3, device="meta")), ValueError, "one device"),
        (_call(momentum=1.5), ValueError, r"momentum must be a number in \[0, 1\], got 1.5"),
        (_call(momentum=None), TypeError, "momentum must be a number in .*, got NoneType None"),
        (_call(eps=-1e-5), ValueError, "eps must be a number >= 0, got -1e-05"),
        (_call(training="yes"), TypeError, "training must be a bool, got str 'yes'"),
        (_call(training=1), TypeError, "training must be a bool, got int 1"),
        (_call(eps=True), TypeError, "eps must be a number >= 0, got bool True"),
    ],
)
def test_bad_input_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_errors_leave_running_statistics_untouched():
    running_mean, running_var = torch.zeros(3), torch.ones(3)
    with pytest.raises(ValueError):
        ghost_batch_norm(torch.randn(5, 3), running_mean, running_var, None, torch.ones(4), True, ghost_batch_size=2)
    assert running_mean.eq(0).all() and running_var.eq(1).all()


def test_torch_compile_traces_through_the_custom_ops(device):
    x, weight, bias, running_mean, running_var = _inputs((8, 3, 4, 4), torch.float32, device, NHWC)
    ref_stats = running_mean.clone(), running_var.clone()

    def loss(x, weight, bias, running_mean, running_var):
        return ghost_batch_norm(x, running_mean, running_var, weight, bias, True, ghost_batch_size=3).square().mean()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    value = compiled(x, weight, bias, running_mean, running_var)
    grads = torch.autograd.grad(value, (x, weight, bias))

    ref_inputs = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    ref_value = ghost_batch_norm_reference(ref_inputs[0], *ref_stats, *ref_inputs[1:], True, ghost_batch_size=3)
    ref_value = ref_value.square().mean()
    ref_grads = torch.autograd.grad(ref_value, ref_inputs)
    torch.testing.assert_close(value, ref_value)
    for ours, theirs in zip(grads, ref_grads):
        torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(running_mean, ref_stats[0])
    torch.testing.assert_close(running_var, ref_stats[1])


class _GhostBatchNorm(torch.nn.Module):
    def __init__(self, channels, ghost_batch_size):
        super().__init__()
        self.ghost_batch_size = ghost_batch_size
        self.weight = torch.nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = torch.nn.Parameter(torch.randn(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x):
        return ghost_batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                                ghost_batch_size=self.ghost_batch_size)


def test_torch_export_keeps_the_custom_ops_and_the_running_statistics_update(device):
    torch.manual_seed(0)
    module = _GhostBatchNorm(3, 3).to(device)
    x = _inputs((7, 3, 4, 4), torch.float32, device)[0].detach()
    exported = torch.export.export(module, (x,))
    graph = str(exported.graph)
    assert "fastcore_ops.ghost_batch_norm.default" in graph
    assert "fastcore_ops.ghost_batch_norm_update_running_stats" in graph

    runnable = exported.module()
    out = runnable(x)
    ref_mean, ref_var = torch.zeros(3, device=device), torch.ones(3, device=device)
    expected = ghost_batch_norm_reference(x, ref_mean, ref_var, module.weight, module.bias, True, ghost_batch_size=3)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(runnable.running_mean, ref_mean)
    torch.testing.assert_close(runnable.running_var, ref_var)


@pytest.mark.parametrize("layout", [NCHW, NHWC], ids=["nchw", "nhwc"])
def test_custom_ops_pass_torch_library_opcheck(layout, device):
    x, weight, bias, running_mean, running_var = _inputs((5, 3, 2, 3), torch.float32, device, layout)
    ops = torch.ops.fastcore_ops
    torch.library.opcheck(ops.ghost_batch_norm, (x, weight, bias, 2, 1e-5))
    torch.library.opcheck(ops.ghost_batch_norm, (x, None, None, 8, 1e-5))
    out, mean, var = ops.ghost_batch_norm(x.detach(), weight.detach(), bias.detach(), 2, 1e-5)
    grad_out = torch.randn_like(out)
    torch.library.opcheck(ops.ghost_batch_norm_backward, (grad_out, x.detach(), weight.detach(), mean, var, 2, 1e-5))
    torch.library.opcheck(ops.ghost_batch_norm_update_running_stats,
                          (running_mean, running_var, mean, var, 0.05, 5, 2, 6))
