"""What a part of the GPU check is, the mode it runs in, and how it records what it finds.

Each part is a module with ``run(mode: Mode, record: Recorder) -> None``; the check runs each
in a process of its own (``python -m benchmarks.gpu_check.part``), so a part that crashes,
hangs or overruns its budget costs only itself. The recorder writes its file after every row,
so a part stopped at its budget still reports the rows it finished.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it runs: the check's command line parses without it
    import torch


@dataclass(frozen=True)
class Mode:
    """Where the parts run: ``small`` is the CPU mode (Triton's interpreter, tiny sizes), else a CUDA GPU."""

    small: bool

    @property
    def device(self) -> torch.device:
        import torch

        return torch.device("cpu" if self.small else "cuda")

    @property
    def dtypes(self) -> tuple[torch.dtype, ...]:
        """The storage dtypes the kernels are checked in: no bf16 in small mode (the interpreter gets it wrong)."""
        import torch

        return (torch.float32, torch.float16) if self.small else (torch.float32, torch.float16, torch.bfloat16)


# In small mode a part's budget is what it takes on two idle cores, and it may run this many times longer
# (a slow CPU, a busy machine) before it is stopped as hung: there its figures say nothing about speed,
# so only a hang may cut it short.
SMALL_MODE_HEADROOM = 10


@dataclass(frozen=True)
class Part:
    """One part of the check: its module (``run(mode, record)``), what it answers, and its time budgets in seconds.

    On a GPU the budget is the part's limit, since a lent GPU's time is: a part still running at it is stopped,
    keeping the rows it wrote. In small mode the budget is only what the part takes on two idle cores, and
    the limit ``SMALL_MODE_HEADROOM`` times that:

        >>> part = Part("kernels", "Each kernel", "benchmarks.gpu_check.kernel_speed", budget_s=120, small_budget_s=30)
        >>> part.limit(Mode(small=False)), part.limit(Mode(small=True))
        (120, 300)
    """

    name: str
    title: str
    module: str
    budget_s: float  # on a GPU
    small_budget_s: float  # in small mode, on 2 idle CPU cores
    # In small mode, whether the kernels run through Triton's interpreter; the parts that time whole
    # models run the kernels' PyTorch references there instead, which the interpreter would take minutes over.
    interpreted: bool = True

    def budget(self, mode: Mode) -> float:
        """The seconds the part should take."""
        return self.small_budget_s if mode.small else self.budget_s

    def limit(self, mode: Mode) -> float:
        """The seconds after which the part is stopped."""
        return self.small_budget_s * SMALL_MODE_HEADROOM if mode.small else self.budget_s


@dataclass
class Recorder:
    """A part's findings: table rows and notes, written to ``path`` as JSON after each change.

        >>> record = Recorder(Path("part.json"))  # doctest: +SKIP
        >>> record.row(kernel="blurpool2d", passed=True)  # doctest: +SKIP
    """

    path: Path
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self, **values) -> None:
        """Add one row of the part's table (numbers, strings, booleans or None)."""
        self.rows.append({key: _plain(value) for key, value in values.items()})
        self.save()

    def note(self, text: str) -> None:
        """Add one sentence the report prints under the part's table."""
        self.notes.append(text)
        self.save()

    def save(self) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps({"rows": self.rows, "notes": self.notes}, indent=1) + "\n")
        partial.replace(self.path)  # whole or absent, even when the part is killed mid-write


def _plain(value):
    """``value`` as JSON holds it: a tensor's number, a dtype's name; a float that is not finite as None."""
    import torch

    if isinstance(value, torch.Tensor):
        value = value.item()
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# On a GPU the budgets add up to 330 s: with start-up, the check ends within 6 minutes.
PARTS = (
    Part("correctness", "Every Triton kernel against its reference, forward and backward",
         "benchmarks.gpu_check.correctness", budget_s=60, small_budget_s=30),
    Part("kernels", "Each kernel against the PyTorch ops it replaces: time, bandwidth, memory",
         "benchmarks.gpu_check.kernel_speed", budget_s=120, small_budget_s=30),
    Part("surgery", "ResNet-50 and GPT-2 small: training steps per second before and after each surgery",
         "benchmarks.gpu_check.surgery_speed", budget_s=60, small_budget_s=30, interpreted=False),
    Part("loader", "The loader with its batch stage on the device, against torchvision's DataLoader",
         "benchmarks.gpu_check.loader_speed", budget_s=50, small_budget_s=30, interpreted=False),
    Part("training", "The recipes' training steps: ResNet-50 baseline against Mild, GPT against GPT with ALiBi",
         "benchmarks.gpu_check.training_steps", budget_s=40, small_budget_s=30, interpreted=False),
)
