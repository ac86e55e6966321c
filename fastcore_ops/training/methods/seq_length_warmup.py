"""Sequence-length warmup: train a language model on short sequences first, then longer ones.

Early in training a model learns mostly local statistics, which short contexts teach as well
and for less attention work; short sequences also steady the first steps at a high learning
rate (Li et al., 2022, "The stability-efficiency dilemma"; Composer's SeqLengthWarmup). The
length grows linearly from ``start_length`` to the full length over the first ``duration`` of
training, in multiples of ``multiple_of`` (few distinct shapes: kernels tile them well and a
compiled model recompiles seldom). The loader keeps yielding full-length windows; this method
cuts each batch after the dataloader. With ``keep_tokens`` the batch is re-cut into more,
shorter rows so every step still trains on the same number of tokens; without it, each row is
truncated and the rest of its tokens dropped.

Method card
    What: a language model trains on short sequences first; the length grows from
        ``start_length`` to the full length over the first ``duration`` of the run.
    When it helps: GPT pretraining at high learning rates: fewer early loss spikes and cheaper
        early steps (``gpt_alibi`` and ``gpt_alibi_long_warmup`` use it). On the project's
        0.86M-parameter GPT at LR 4e-3 on a CPU it changes neither the loss nor the time per step
        measurably: ``gpt_alibi``'s gain is ALiBi's (``reports/gpt-ablation-20261126/``).
    Cost: negative early on (attention over shorter rows); no effect after ``duration``.
    Options (``SeqLengthWarmupOptions``): ``start_length`` 8, ``duration`` 0.3, ``multiple_of`` 8,
        ``keep_tokens`` True.

    >>> warmup = SequenceLengthWarmup(full_length=256, start_length=8, duration=0.5)
    >>> [warmup.length(p) for p in (0.0, 0.1, 0.25, 0.5, 1.0)]
    [8, 56, 128, 256, 256]
    >>> inputs, targets = shorten_batch(torch.arange(32).view(2, 16), torch.arange(1, 33).view(2, 16), 8)
    >>> inputs.tolist()
    [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 22, 23], [24, 25, 26, 27, 28, 29, 30, 31]]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fastcore_ops.checks import check_bool, check_int, check_number
from fastcore_ops.training.methods.base import Method, TrainState
from fastcore_ops.training.methods.registry import TEXT, register_method


def _check_start_length(options: SeqLengthWarmupOptions, config) -> None:
    if options.start_length > config.text.sequence_length:
        raise ValueError(f"methods.seq_length_warmup.start_length must be <= text.sequence_length="
                         f"{config.text.sequence_length}, got {options.start_length}")


@register_method("seq_length_warmup", stage="step", order=190, tasks=TEXT, check=_check_start_length)
@dataclass(frozen=True)
class SeqLengthWarmupOptions:
    """Sequence-length warmup settings (the full length is the run's ``text.sequence_length``); the start
    length is a whole number of ``multiple_of`` tokens:

        >>> SeqLengthWarmupOptions(start_length=12)
        Traceback (most recent call last):
        ...
        ValueError: start_length must be a multiple of multiple_of=8, got 12
    """

    start_length: int = 8  # Composer's default minimum
    duration: float = 0.3  # fraction of training over which the length grows to the full length
    multiple_of: int = 8
    keep_tokens: bool = True  # more, shorter rows (same tokens per step) rather than truncated rows

    def __post_init__(self) -> None:
        check_int("start_length", self.start_length, low=1)
        check_number("duration", self.duration, low=0, high=1, low_open=True)
        check_int("multiple_of", self.multiple_of, low=1)
        if self.start_length % self.multiple_of:
            raise ValueError(f"start_length must be a multiple of multiple_of={self.multiple_of}, "
                             f"got {self.start_length}")
        check_bool("keep_tokens", self.keep_tokens)

    def attach(self, config) -> Method:
        return SequenceLengthWarmup.from_options(config.text.sequence_length, self)


def shorten_batch(inputs: torch.Tensor, targets: torch.Tensor, length: int,
                  keep_tokens: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of (N, T) token ids cut to rows of ``length`` tokens.

    keep_tokens: re-cut the N * T tokens into rows of ``length`` (the last partial row dropped);
    else keep each row's first ``length`` tokens. Each target stays paired with its input.
    """
    if inputs.shape != targets.shape or inputs.dim() != 2:
        raise ValueError(f"inputs and targets must be (N, T) token ids of one shape, got {tuple(inputs.shape)} "
                         f"and {tuple(targets.shape)}")
    check_int("length", length, low=1)
    if length >= inputs.shape[1]:
        return inputs, targets
    if not keep_tokens:
        return inputs[:, :length], targets[:, :length]
    rows = inputs.numel() // length
    return (inputs.reshape(-1)[:rows * length].view(rows, length),
            targets.reshape(-1)[:rows * length].view(rows, length))


class SequenceLengthWarmup(Method):
    """Shortens each training batch to :meth:`length` of the run's progress; see the module's docstring."""

    def __init__(self, full_length: int, start_length: int = 8, duration: float = 0.3, multiple_of: int = 8,
                 keep_tokens: bool = True):
        SeqLengthWarmupOptions(start_length, duration, multiple_of, keep_tokens)  # checks the values
        check_int("full_length", full_length, low=start_length)
        self.full_length, self.start_length, self.duration = full_length, start_length, duration
        self.multiple_of, self.keep_tokens = multiple_of, keep_tokens

    @classmethod
    def from_options(cls, full_length: int, options: SeqLengthWarmupOptions) -> SequenceLengthWarmup:
        return cls(full_length, options.start_length, options.duration, options.multiple_of, options.keep_tokens)

    def length(self, progress: float) -> int:
        """The training length at ``progress`` (fraction of training done)."""
        grown = self.start_length + (self.full_length - self.start_length) * min(1.0, progress / self.duration)
        rounded = int(grown) // self.multiple_of * self.multiple_of
        return min(self.full_length, max(self.start_length, rounded))

    def cost_state(self, step: int, progress: float) -> str | None:
        length = self.length(progress)
        return f"sequences of {length}" if length < self.full_length else None

    def on_after_dataloader(self, state: TrainState) -> None:
        state.inputs, state.targets = shorten_batch(state.inputs, state.targets, self.length(state.progress),
                                                    self.keep_tokens)
