"""What ``python -m fastcore_ops.training.alibi_extrapolation`` and its experiment (alibi_experiment.py) share:
the experiment's configuration, its models, its files and its table; light, so the command parses with it.

    >>> ExtrapolationConfig(train_length=64).eval_lengths
    [64, 128, 256, 512]
"""

from __future__ import annotations

from dataclasses import dataclass

from fastcore_ops import cli

MODELS = ("learned", "alibi")
CANNOT_RUN = "cannot run"
RESULT_FILES = ("results.json", "results.csv", "extrapolation.png")
TOOL = "alibi_extrapolation"  # the owner's name on its output folder (fastcore_ops.owned_folder)


@dataclass
class ExtrapolationConfig:
    train_length: int = 128  # L: training windows; evaluation at L * each of length_multiples
    # Sized so the whole command takes about 10 minutes on a 2-core CPU shared with other jobs
    # (about 4 with both cores to itself); train longer for lower losses, the comparison holds.
    steps: int = 350
    batch_size: int = 32
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    lr: float = 2e-3  # peak; small byte-level models train well this high (nanoGPT's char model: 1e-3)
    weight_decay: float = 0.1
    warmup_fraction: float = 0.05  # of steps, then cosine down to final_lr_fraction of the peak
    final_lr_fraction: float = 0.1
    grad_clip: float = 1.0
    length_multiples: tuple[int, ...] = (1, 2, 4, 8)
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        self.length_multiples = tuple(self.length_multiples)
        self.validate()

    @property
    def eval_lengths(self) -> list[int]:
        return [self.train_length * multiple for multiple in self.length_multiples]

    def validate(self) -> None:
        from fastcore_ops.checks import check_int, check_number  # torch: once a configuration is made

        minimums = dict(train_length=2, steps=1, batch_size=1, n_layer=1, n_head=1, n_embd=1, seed=0)
        for name, minimum in minimums.items():
            check_int(name, getattr(self, name), low=minimum)
        for name in ("lr", "grad_clip"):
            check_number(name, getattr(self, name), low=0, low_open=True)
        for name in ("weight_decay", "warmup_fraction", "final_lr_fraction"):
            check_number(name, getattr(self, name), low=0, high=1)
        multiples = self.length_multiples
        for index, multiple in enumerate(multiples):
            check_int(f"length_multiples[{index}]", multiple, low=1)
        if not multiples or list(multiples) != sorted(set(multiples)) or multiples[0] != 1:
            raise ValueError(f"length_multiples must be increasing positive ints starting at 1, got {multiples!r}")
        cli.check_device(self.device)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd={self.n_embd}, n_head={self.n_head}")


def format_table(results: dict) -> str:
    """The rows as an aligned text table."""
    header = f"{'model':<8} {'length':>6} {'x L':>4} {'loss':>8} {'bits/byte':>9}"
    lines = [header, "-" * len(header)]
    for row in results["rows"]:
        if row["status"] == "ok":
            numbers = f"{row['loss']:>8.4f} {row['bits_per_byte']:>9.4f}"
        else:
            numbers = f"{CANNOT_RUN:>8}"
        lines.append(f"{row['model']:<8} {row['length']:>6} {row['multiple']:>4} {numbers}")
    return "\n".join(lines)
