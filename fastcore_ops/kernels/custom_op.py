"""A kernel's ``torch.library`` op, and a cheaper way in for eager mode.

``torch.compile`` and ``torch.export`` must see each kernel as one opaque op with a fake
implementation, so every kernel is a ``torch.library`` custom op. In eager mode the custom-op
machinery is pure host cost: measured on a 2-core Xeon with launches stubbed, the fused BCE's
forward and backward took 77 µs through its two ops, 48 µs through a plain
``torch.autograd.Function`` around the same Python code, and PyTorch's own loss 60 µs
(reports/kernels-host-side-20261202/dispatch-cost.md). On a GPU those 29 µs outweigh a kernel that runs for 10. So :class:`KernelOp` calls the implementation
directly, under an ``autograd.Function``, on plain tensors in eager mode, and the registered op
wherever a compiler, an exporter, a fake-tensor mode or a tensor subclass is looking.

Example:
    >>> import torch
    >>> @kernel_op("fastcore_ops_example::double")
    ... def double(x: torch.Tensor) -> torch.Tensor:
    ...     return x * 2
    >>> _ = double.register_fake(lambda x: torch.empty_like(x))
    >>> double.register_autograd(lambda ctx, grad: grad * 2)
    >>> x = torch.ones(3, requires_grad=True)
    >>> double(x).sum().backward()
    >>> x.grad
    tensor([2., 2., 2.])
"""

from __future__ import annotations

from typing import Callable

import torch

_PLAIN = (torch.Tensor, torch.nn.Parameter)

# Every KernelOp by its op's qualified name ("fastcore_ops::bce_with_logits").
OPS: dict[str, "KernelOp"] = {}


def _eager(args) -> bool:
    """True when nothing traces this call: not compiling, and every tensor argument is a plain tensor."""
    return not torch.compiler.is_compiling() and all(type(a) in _PLAIN for a in args if isinstance(a, torch.Tensor))


def _no_setup(ctx, inputs, output) -> None:
    return None


def kernel_op(name: str, *, mutates_args=()) -> Callable[[Callable], "KernelOp"]:
    """Decorator: the function becomes the :class:`KernelOp` ``name``, as ``torch.library.custom_op`` would."""
    return lambda implementation: KernelOp(name, implementation, mutates_args=mutates_args)


class KernelOp:
    """A custom op ``name`` made of ``implementation`` (see the module); call it like the function."""

    def __init__(self, name: str, implementation: Callable, *, mutates_args=()):
        self.name = name
        self.implementation = implementation
        self.op = torch.library.custom_op(name, implementation, mutates_args=mutates_args)
        self._function: type[torch.autograd.Function] | None = None
        OPS[name] = self

    @property
    def output_count(self) -> int:
        """How many tensors the op returns (its schema's)."""
        namespace, op_name = self.name.split("::")
        return len(getattr(getattr(torch.ops, namespace), op_name).default._schema.returns)

    def register_fake(self, fake: Callable) -> Callable:
        """The op's output for tracers: shapes, dtypes and devices, no values (``torch.library``'s)."""
        return self.op.register_fake(fake)

    def register_autograd(self, backward: Callable, *, setup_context: Callable = _no_setup) -> None:
        """``backward(ctx, *grads)`` and ``setup_context(ctx, inputs, output)``, as torch.library takes them."""
        self.op.register_autograd(backward, setup_context=setup_context)

        class Eager(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                output = self.implementation(*inputs)
                setup_context(ctx, inputs, output)
                return output

            @staticmethod
            def backward(ctx, *grads):
                return backward(ctx, *grads)

        Eager.__name__ = Eager.__qualname__ = self.name.split("::")[-1] + "_eager"
        self._function = Eager

    def __call__(self, *args):
        if not _eager(args):
            return self.op(*args)
        if self._function is None or not torch.is_grad_enabled():
            return self.implementation(*args)
        return self._function.apply(*args)
