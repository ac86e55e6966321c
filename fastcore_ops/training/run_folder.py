"""A run's folder: what defines the run (``config.json``, ``run.json``), and the rules for reusing a folder.

A new run needs a folder holding none of the files a run writes (other files are left alone);
``--resume`` needs a checkpoint and continues exactly the run saved there: every setting that
changes its result (the configuration, the training subset, the evaluation interval, the
number of processes and the data itself) must match, except a longer ``schedule.epochs``,
which extends an unfinished run. A new run that fails before its first checkpoint removes
what it wrote (:class:`NewRunFiles`), so the corrected command finds the folder as it was.

    >>> saved = TrainConfig()
    >>> resume_differences(saved, dataclasses.replace(saved, seed=3))
    [('seed', 0, 3)]
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from enum import Enum
from pathlib import Path

from fastcore_ops.checks import check_int
from fastcore_ops.data.shards import parse_json
from fastcore_ops.training import checkpoint
from fastcore_ops.training.config import TrainConfig, load_config, to_dict
from fastcore_ops.training.data_identity import describe_changes, same_data

CONFIG_NAME = "config.json"
SETTINGS_NAME = "run.json"
SUMMARY_NAME = "summary.json"
# Every file a run writes besides its checkpoints (the tokenizer's two for language models): a
# folder holding any of them holds a run, and a new run writes only names it did not find.
RUN_FILES = (CONFIG_NAME, SETTINGS_NAME, "metrics.jsonl", SUMMARY_NAME, "curves.png", "tokens.json",
             "tokenizer.json")
_CHECKPOINT_FILE = re.compile(rf"{re.escape(checkpoint.CHECKPOINT_NAME[:-3])}(\.\d+)?\.pt(\.tmp)?")
EXTENDABLE = "schedule.epochs"


class RunState(Enum):
    FINISHED = "finished"
    RESUMABLE = "resumable"
    NEW = "new"


def run_state(folder: Path) -> RunState:
    """Whether the run in ``folder`` is finished (it wrote its summary), can be resumed, or has to start.

    Example:
        >>> run_state(Path("/nonexistent"))
        <RunState.NEW: 'new'>
    """
    if (folder / SUMMARY_NAME).is_file():
        return RunState.FINISHED
    if checkpoint.existing(folder / checkpoint.CHECKPOINT_NAME):
        return RunState.RESUMABLE
    return RunState.NEW


def _is_part(part) -> bool:
    """Whether ``part`` is one part's fingerprint (``contents`` and ``written`` are absent from older runs')."""
    if not (isinstance(part, dict) and isinstance(part.get("sha256"), str)):
        return False
    written = part.get("written", [0, 0])
    return isinstance(part.get("contents", ""), str) and isinstance(written, list) and len(written) == 2 and all(
        isinstance(time, int) and not isinstance(time, bool) for time in written)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The command-line settings besides the configuration that define a run's result.

    subset: images per class trained on (None: all). eval_every: epochs between evaluations.
    world_size: the processes that train it (the global batch, the LR and the step count follow).
    data: the data's fingerprint (:mod:`fastcore_ops.training.data_identity`), not its folder: a data set may
    move between machines. world_size and data are None in runs saved before they were recorded.
    """

    subset: int | None = None
    eval_every: int = 1
    world_size: int | None = None
    data: dict | None = None

    def __post_init__(self):
        if self.subset is not None:
            check_int("subset", self.subset, low=1)
        check_int("eval_every", self.eval_every, low=0)
        if self.world_size is not None:
            check_int("world_size", self.world_size, low=1)
        if self.data is not None and not (isinstance(self.data, dict) and all(map(_is_part, self.data.values()))):
            raise ValueError(f"data must map each part of the data to its fingerprint, got {self.data!r}")

    def save(self, out: Path) -> None:
        (out / SETTINGS_NAME).write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    @classmethod
    def requested(cls, subset: int | None, eval_every: int | None, *, saved: RunSettings | None) -> RunSettings:
        """The settings a command line asks for: a flag left out (None) keeps the ``saved`` run's value, or the default.

            >>> RunSettings.requested(None, 2, saved=RunSettings(subset=20))
            RunSettings(subset=20, eval_every=2, world_size=None, data=None)
        """
        base = saved or cls()
        return cls(subset=base.subset if subset is None else subset,
                   eval_every=base.eval_every if eval_every is None else eval_every)

    @classmethod
    def load(cls, out: Path) -> RunSettings | None:
        """The settings saved in ``out``, or None for a run saved before they were (nothing to compare)."""
        path = out / SETTINGS_NAME
        if not path.is_file():
            return None
        try:
            return cls(**parse_json(path.read_text()))
        except (TypeError, ValueError) as error:  # UnicodeDecodeError and nesting past the stack are ValueErrors
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

        >>> from fastcore_ops.training.config import override
        >>> saved = override(TrainConfig(), ["methods.colout={}"])
        >>> resume_differences(saved, override(saved, ["methods.colout.p_row=0.1", "methods.randaugment={}"]))
        [('methods.colout.p_row', 0.15, 0.1), ('methods.randaugment', None, {'depth': 1, 'severity': 9.0})]
    """
    return _differences(to_dict(saved), to_dict(requested))


@dataclasses.dataclass(frozen=True)
class SavedRun:
    """The run in ``out`` that ``--resume`` continues, as :func:`check_run_folder` read it.

    settings: None for a run saved before they were recorded (nothing to compare). finished: it wrote its summary.
    """

    out: Path
    config: TrainConfig
    settings: RunSettings | None
    finished: bool

    def check_same_settings(self, config: TrainConfig, settings: RunSettings) -> None:
        """Refuse a requested ``config`` or ``settings`` (``--subset``, ``--eval-every``) that would change the run,
        naming the field and both values.

        The one change allowed is a longer ``schedule.epochs`` on an unfinished run. The cosine then
        follows the new length from the resumed step on: its learning rate steps up to where a run
        of the new length would be, and decays to the new end; fractions of the run (progressive
        resizing, SWA, freezing) stretch with it.

            >>> saved = SavedRun(Path("runs/a"), TrainConfig(), RunSettings(subset=20), finished=False)
            >>> saved.check_same_settings(TrainConfig(), RunSettings(subset=10))
            Traceback (most recent call last):
            ...
            ValueError: --resume: --subset differs from the run in runs/a: it was 20, this command gives 10; ...
        """
        out = self.out
        for name, before, after in resume_differences(self.config, config):
            if name == EXTENDABLE and after > before and not self.finished:
                continue
            if name == EXTENDABLE and after > before:
                raise ValueError(f"--resume: the run in {out} has finished; it cannot be extended to {after} epochs "
                                 f"(its last checkpoint follows the end-of-run methods); start a new run instead")
            hint = "; --epochs may only grow, to extend the run" if name == EXTENDABLE else ""
            raise ValueError(f"--resume: {name} differs from the run in {out}: it was {before!r}, this command "
                             f"gives {after!r}{hint}; resume without changing it, or start a new run with another --out")
        if self.settings is None:
            return
        for name in ("subset", "eval_every"):
            before, after = getattr(self.settings, name), getattr(settings, name)
            if before != after:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"--resume: {flag} differs from the run in {out}: it was {before!r}, this command "
                                 f"gives {after!r}; resume without {flag}, or start a new run with another --out")

    def check_same_inputs(self, settings: RunSettings) -> None:
        """Refuse a resume with another number of processes or other data, where the saved run recorded them."""
        saved, out = self.settings, self.out
        if saved is None:
            return
        if saved.world_size is not None and saved.world_size != settings.world_size:
            raise ValueError(f"--resume: the run in {out} was trained by {saved.world_size} process(es), this "
                             f"command starts {settings.world_size}; its global batch, LR and step count follow the "
                             f"number of processes, so resume it with {saved.world_size} (torchrun --nproc_per_node="
                             f"{saved.world_size}, or no torchrun for 1), or start a new run with another --out")
        if saved.data is not None and not same_data(saved.data, settings.data):
            raise ValueError(f"--resume: the data of the run in {out} changed since it started "
                             f"({describe_changes(saved.data, settings.data)}); resume on the data it trained on, or "
                             f"start a new run with another --out")


def run_files_in(out: Path) -> list[str]:
    """The names in ``out`` that a run writes: its files and checkpoints."""
    if not out.is_dir():
        return []
    return sorted(path.name for path in out.iterdir() if path.name in RUN_FILES or _CHECKPOINT_FILE.fullmatch(path.name))


def check_out_outside_data(out: Path, data: Path | None) -> None:
    """Refuse an ``--out`` that is ``--data`` or inside it (links resolved).

    The run's folder would become part of the data: under ``train/`` a class of its own, in a text
    folder more text, so the next run on that data (this one resumed, too) trains on something
    else. A ``--data`` inside ``--out`` is harmless: a run writes only its own names at the top of
    ``--out`` (:data:`RUN_FILES`, its checkpoints), never into a folder there.
    """
    # os.path.realpath, not Path.resolve, which raises RuntimeError on a link loop.
    if data is not None and Path(os.path.realpath(out)).is_relative_to(os.path.realpath(data)):
        raise ValueError(f"--out {out} is inside --data {data}: the run's files would become part of the data it "
                         f"reads (under train/, a class of images); choose an --out outside {data}")


def check_run_folder(out: Path, data: Path | None, *, resume: bool) -> SavedRun | None:
    """The run in ``out`` that ``--resume`` continues (None for a new run), once ``out`` passed the rules for a folder.

    Refused: an ``out`` that is ``data`` or inside it (:func:`check_out_outside_data`), a new run
    where a run (with or without a checkpoint) or any file with a name a run writes is, and a resume
    where no checkpoint is, or whose saved configuration or settings cannot be read.

        >>> check_run_folder(Path("/nonexistent/run"), Path("/nonexistent/data"), resume=False) is None
        True
    """
    check_out_outside_data(out, data)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; pass a folder for the run (it is created if missing)")
    leftovers = run_files_in(out)
    newest = out / checkpoint.CHECKPOINT_NAME
    has_checkpoint = bool(checkpoint.existing(newest))
    if resume and not has_checkpoint and newest.is_dir():
        raise ValueError(f"--resume: {newest} is a directory, not a checkpoint file, so {out} holds no checkpoint "
                         f"to resume; move that directory out of {out}, then start the run without --resume")
    if resume and not has_checkpoint:
        raise ValueError(f"--resume: no {checkpoint.CHECKPOINT_NAME} in {out}; start the run without --resume")
    if resume:
        return SavedRun(out, load_config(out / CONFIG_NAME), RunSettings.load(out),
                        finished=(out / SUMMARY_NAME).is_file())
    if has_checkpoint:
        raise ValueError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
    if leftovers:
        raise ValueError(f"{out} already holds files a run writes ({', '.join(leftovers)}) and no checkpoint to "
                         f"resume; choose another --out, or move those files away")
    return None


def write_run(out: Path, config: TrainConfig, settings: RunSettings) -> None:
    """Write what defines the run into ``out`` (created if missing): ``config.json`` and ``run.json``.

        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "run"
        >>> write_run(out, TrainConfig(), RunSettings(subset=20))
        >>> RunSettings.load(out).subset, load_config(out / CONFIG_NAME) == TrainConfig()
        (20, True)
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_NAME).write_text(json.dumps(to_dict(config), indent=2) + "\n")
    settings.save(out)


class NewRunFiles:
    """What a new run wrote into its folder, removed again if the run fails before its first checkpoint.

    :func:`check_run_folder` made sure the folder held no file with a name a run writes, so every
    such file found after a failed start is this run's own; other files are never touched, and
    folders are removed only if this run created them and they are empty again. As a context, it
    undoes the run's files when its block raises.

        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "new" / "run"
        >>> started = NewRunFiles(out)
        >>> out.mkdir(parents=True); _ = (out / CONFIG_NAME).write_text("{}")
        >>> started.undo_unless_checkpointed(), out.parent.exists()
        (True, False)
    """

    def __init__(self, out: Path):
        self.out = out
        self.created = [folder for folder in (out, *out.parents) if not folder.exists()]

    def __enter__(self) -> NewRunFiles:
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None:
            self.undo_unless_checkpointed()

    def undo_unless_checkpointed(self) -> bool:
        """Remove this run's files and created folders, unless it saved a checkpoint; whether it did remove them."""
        if checkpoint.existing(self.out / checkpoint.CHECKPOINT_NAME):
            return False
        for name in run_files_in(self.out):
            (self.out / name).unlink(missing_ok=True)
        for folder in self.created:  # innermost first
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return True
