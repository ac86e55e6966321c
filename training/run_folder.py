"""A run's folder: what defines the run (``config.json``, ``run.json``), and the rules for reusing a folder.

A new run needs a folder holding no earlier run; ``--resume`` needs a checkpoint and continues
exactly the run saved there: every setting that changes its result (the configuration and the
training subset, the evaluation interval) must match, except a longer ``schedule.epochs``,
which extends an unfinished run.

    >>> saved = TrainConfig()
    >>> resume_differences(saved, dataclasses.replace(saved, seed=3))
    [('seed', 0, 3)]
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fastcore_ops.checks import check_int
from training import checkpoint
from training.config import TrainConfig, to_dict

CONFIG_NAME = "config.json"
SETTINGS_NAME = "run.json"
SUMMARY_NAME = "summary.json"
# Files a run writes before its first checkpoint: a folder holding any of them holds a run.
RUN_FILES = (CONFIG_NAME, SETTINGS_NAME, "metrics.jsonl", SUMMARY_NAME)
EXTENDABLE = "schedule.epochs"


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The command-line settings besides the configuration that define a run's result.

    subset: images per class trained on (None: all). eval_every: epochs between evaluations.
    The data folder is not one of them: a data set may move between machines.
    """

    subset: int | None = None
    eval_every: int = 1

    def __post_init__(self):
        if self.subset is not None:
            check_int("subset", self.subset, low=1)
        check_int("eval_every", self.eval_every, low=0)

    def save(self, out: Path) -> None:
        (out / SETTINGS_NAME).write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, out: Path) -> RunSettings | None:
        """The settings saved in ``out``, or None for a run saved before they were (nothing to compare)."""
        path = out / SETTINGS_NAME
        if not path.is_file():
            return None
        try:
            values = json.loads(path.read_text())
            return cls(**values)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError) as error:
            raise ValueError(f"the run settings {path} are not valid: {error}") from None


def _differences(before: dict, after: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    """(dotted name, before, after) of each differing value, field by field within the dicts both sides hold.

    Sections and option groups that are on in both configs are dicts with the same fields;
    a group on in one only (a dict against None), or model.options with other names, differs as a whole.
    """
    found = []
    for name, old in before.items():
        new = after[name]
        if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
            found += _differences(old, new, f"{prefix}{name}.")
        elif old != new:
            found.append((f"{prefix}{name}", old, new))
    return found


def resume_differences(saved: TrainConfig, requested: TrainConfig) -> list[tuple[str, object, object]]:
    """Every field whose value differs, as (dotted name, saved value, requested value), in field order.

        >>> from training.config import override
        >>> saved = override(TrainConfig(), ["data.colout={}"])
        >>> resume_differences(saved, override(saved, ["data.colout.p_row=0.1", "data.randaugment={}"]))
        [('data.randaugment', None, {'depth': 1, 'severity': 9.0}), ('data.colout.p_row', 0.15, 0.1)]
    """
    return _differences(to_dict(saved), to_dict(requested))


def check_resume(saved: TrainConfig, requested: TrainConfig, out: Path, *, finished: bool) -> None:
    """Refuse a resume that would change the run, naming the field and both values.

    The one change allowed is a longer ``schedule.epochs`` on an unfinished run. The cosine then
    follows the new length from the resumed step on: its learning rate steps up to where a run
    of the new length would be, and decays to the new end; fractions of the run (progressive
    resizing, SWA, freezing) stretch with it.
    """
    for name, before, after in resume_differences(saved, requested):
        if name == EXTENDABLE and after > before and not finished:
            continue
        if name == EXTENDABLE and after > before:
            raise ValueError(f"--resume: the run in {out} has finished; it cannot be extended to {after} epochs "
                             f"(its last checkpoint follows the end-of-run methods); start a new run instead")
        hint = "; --epochs may only grow, to extend the run" if name == EXTENDABLE else ""
        raise ValueError(f"--resume: {name} differs from the run in {out}: it was {before!r}, this command gives "
                         f"{after!r}{hint}; resume without changing it, or start a new run with another --out")


def check_settings(saved: RunSettings | None, requested: RunSettings, out: Path) -> None:
    """Refuse run settings that differ from the saved ones (``--subset``, ``--eval-every``)."""
    if saved is None:
        return
    for field in dataclasses.fields(RunSettings):
        before, after = getattr(saved, field.name), getattr(requested, field.name)
        if before != after:
            flag = "--" + field.name.replace("_", "-")
            raise ValueError(f"--resume: {flag} differs from the run in {out}: it was {before!r}, this command "
                             f"gives {after!r}; resume without {flag}, or start a new run with another --out")


def check_run_folder(out: Path, resume: bool) -> None:
    """Refuse to overwrite a run (with or without a checkpoint), and to resume one that is not there."""
    has_checkpoint = bool(checkpoint.existing(out / checkpoint.CHECKPOINT_NAME))
    if resume and not has_checkpoint:
        raise ValueError(f"--resume: no {checkpoint.CHECKPOINT_NAME} in {out}; start the run without --resume")
    if resume:
        return
    if has_checkpoint:
        raise ValueError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
    leftovers = [name for name in RUN_FILES if (out / name).exists()]
    if leftovers:
        raise ValueError(f"{out} already holds a run ({', '.join(leftovers)}) with no checkpoint to resume; "
                         f"choose another --out, or delete that folder to start over")
