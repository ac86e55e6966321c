"""Which of a GPT training step's ops compute other bits on another CPU, in the fingerprint test's pinned numerics.

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
        python reports/cpu-numerics-20261128/compare_ops.py > xeon-amx.json
    (the same, with qemu-x86_64 -cpu EPYC-Rome before python) > epyc-rome-emulated.json

Prints one JSON object: each op's name and 10 hex digits of the sha256 of its output (or of its
gradients, for the backward passes and optimizer steps), from fixed random inputs. Two machines
agree on an op when the digits agree. oneDNN is off, as in tests/training/recipe_fingerprint.py.
"""

import hashlib
import json
import sys

import torch
import torch.nn.functional as F


def digest(*tensors: torch.Tensor) -> str:
    sha = hashlib.sha256()
    for tensor in tensors:
        sha.update(tensor.detach().contiguous().numpy().tobytes())
    return sha.hexdigest()[:10]


def gradients(function, *inputs: torch.Tensor) -> str:
    """The digest of the gradients of ``function(*inputs).square().sum()`` with respect to ``inputs``."""
    leaves = [tensor.clone().requires_grad_() for tensor in inputs]
    function(*leaves).square().sum().backward()
    return digest(*(leaf.grad for leaf in leaves))


def adamw_steps(**options) -> str:
    """The digest of two parameters after three AdamW steps on fixed gradients."""
    generator = torch.Generator().manual_seed(1)
    parameters = [torch.randn(32, 32, generator=generator).requires_grad_(), torch.randn(96, generator=generator)]
    parameters[1].requires_grad_()
    optimizer = torch.optim.AdamW(parameters, lr=1e-3, weight_decay=0.1, **options)
    for _ in range(3):
        for parameter in parameters:
            parameter.grad = 0.3 + 0.01 * parameter.detach()
        optimizer.step()
    return digest(*parameters)


def compare() -> dict[str, str]:
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    a, b, x, w, bias = randn(128, 32), randn(32, 96), randn(8, 16, 32), randn(96, 32), randn(96)
    q, k, v = randn(2, 2, 16, 16), randn(2, 2, 16, 16), randn(2, 2, 16, 16)
    norm_weight, norm_bias, logits = randn(32), randn(32), randn(64, 256)
    targets = torch.randint(0, 256, (64,), generator=generator)
    table, tokens = randn(256, 32), torch.randint(0, 256, (8, 16), generator=generator)
    positive = x.abs() + 0.01
    return {
        "matmul": digest(a @ b), "bmm": digest(torch.bmm(randn(4, 16, 8), randn(4, 8, 16))),
        "linear": digest(F.linear(x, w, bias)), "addmm": digest(torch.addmm(bias, a, b)),
        "layer_norm": digest(F.layer_norm(x, (32,), norm_weight, norm_bias)),
        "gelu": digest(F.gelu(x)), "gelu_tanh": digest(F.gelu(x, approximate="tanh")),
        "softmax": digest(F.softmax(x, -1)), "log_softmax": digest(F.log_softmax(x, -1)),
        "sdpa_causal": digest(F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "exp": digest(torch.exp(x)), "tanh": digest(torch.tanh(x)), "erf": digest(torch.erf(x)),
        "sqrt": digest(torch.sqrt(positive)), "rsqrt": digest(torch.rsqrt(positive)),
        "pow_0.7": digest(positive ** 0.7), "sum": digest(x.sum(-1)), "mean": digest(x.mean((0, 1))),
        "cross_entropy": digest(F.cross_entropy(logits, targets)),
        "linear_backward": gradients(lambda x_, w_: F.linear(x_, w_, bias), x, w),
        "layer_norm_backward": gradients(lambda x_, g_, b_: F.layer_norm(x_, (32,), g_, b_), x, norm_weight, norm_bias),
        "gelu_backward": gradients(F.gelu, x),
        "sdpa_backward": gradients(lambda *qkv: F.scaled_dot_product_attention(*qkv, is_causal=True), q, k, v),
        "embedding_backward": gradients(lambda t: F.embedding(tokens, t), table),
        "cross_entropy_backward": gradients(lambda l_: F.cross_entropy(l_, targets).reshape(1), logits),
        "adamw_single_tensor": adamw_steps(foreach=False), "adamw_foreach": adamw_steps(foreach=True),
        "adamw_fused": adamw_steps(fused=True),
    }


def main(argv: list[str]) -> None:
    enabled, torch.backends.mkldnn.enabled = torch.backends.mkldnn.enabled, False
    try:
        print(json.dumps(compare(), indent=1))
    finally:
        torch.backends.mkldnn.enabled = enabled


if __name__ == "__main__":
    main(sys.argv[1:])
