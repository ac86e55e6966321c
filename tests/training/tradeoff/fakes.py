"""Fake runs: a stand-in for the sweep's ``python -m fastcore_ops.training.train`` child, which writes what a real run
writes in no time, and run records of a made-up sweep.

Each run finishes, fails or ends badly as ``FakeTrain.fates`` says for its folder name, so the
sweep, its report and its exit code can be tested without training anything.
"""

import json
from pathlib import Path

from fastcore_ops.training.config import override, to_dict
from fastcore_ops.training.recipes import get_recipe
from fastcore_ops.training.tradeoff import sweep
from fastcore_ops.training.tradeoff.results import RunRecord

FINISH, FAIL, NAN, INF, ZERO, CORRUPT = "finish", "fail", "nan", "inf", "zero", "corrupt"


def record(recipe, budget, seconds, top1, seed=0, loss=1.0):
    """A finished top-1 run on machine m/cpu."""
    return RunRecord.made_up(recipe, budget, seed, quality=top1, seconds=seconds, machine="m/cpu", steps=10,
                             first_epoch_seconds=seconds / 4, samples_per_second=100.0, metrics={"eval_loss": loss},
                             phases={"forward": seconds / 3, "backward": seconds / 2})


# The fast recipe reaches each of the baseline's top-1s in half the time.
SWEEP = [record(recipe, budget, scale * 100 * budget, 0.4 + 0.2 * budget)
         for recipe, scale in (("base", 1.0), ("fast", 0.5)) for budget in (0.5, 1.0, 2.0)]


def flag(command: list[str], name: str) -> str:
    """The value after ``name`` in ``command``."""
    return command[command.index(name) + 1]


def summary(command: list[str], fate: str = FINISH) -> dict:
    """The summary.json of the run ``command`` trains: the "mild" recipes take half the time for the same top-1.

    fate: NAN gives NaN metrics, INF an infinite loss, ZERO no step in no time.
    """
    budget = float(flag(command, "--budget"))
    seconds = 0.0 if fate == ZERO else 100.0 * budget * (0.5 if "mild" in flag(command, "--recipe") else 1.0)
    top1, loss = {NAN: (float("nan"), float("nan")), INF: (0.1, float("inf"))}.get(fate, (0.4 + 0.2 * budget, 1.0))
    return {"metrics": {"top1": top1, "eval_loss": loss, "top1_tta": top1}, "metric": "top1",
            "higher_is_better": True, "metric_label": "top-1 (%)", "steps": 0 if fate == ZERO else 10,
            "epochs_seen": 1, "train_seconds": seconds, "first_epoch_seconds": seconds / 4,
            "samples_per_second": 100.0, "sample_unit": "images",
            "phase_seconds": {"data": seconds / 10, "forward": seconds / 3, "backward": seconds / 2}}


def write_run(command: list[str], fate: str = FINISH) -> None:
    """What a finished run of ``command`` leaves in its --out: config.json (as train builds it) and summary.json."""
    out = Path(flag(command, "--out"))
    flags = [f"seed={flag(command, '--seed')}", f"schedule.scale_schedule_ratio={flag(command, '--budget')}"]
    sets = [command[index + 1] for index, arg in enumerate(command) if arg == "--set"]
    config = override(get_recipe(flag(command, "--recipe")), [*flags, *sets])
    (out / "config.json").write_text(json.dumps(to_dict(config)))
    text = "{not json" if fate == CORRUPT else json.dumps(summary(command, fate))
    (out / "summary.json").write_text(text)


class FakeTrain:
    """Stands in for ``subprocess.Popen`` of the train command; records each command and each instance."""

    commands: list[list[str]] = []
    instances: list["FakeTrain"] = []
    fates: dict[str, str] = {}  # run folder name -> fate; FINISH when not named
    default = FINISH
    on_wait = None

    def __init__(self, command, *, stderr, env, **_):
        self.command, self.stderr, self.env, self.signals = command, stderr, env, []
        FakeTrain.commands.append(command)
        FakeTrain.instances.append(self)

    def wait(self):
        if FakeTrain.on_wait is not None:
            return FakeTrain.on_wait(self)
        fate = FakeTrain.fates.get(Path(flag(self.command, "--out")).name, FakeTrain.default)
        if fate == FAIL:  # as train after a crashed start: nothing of the run left, the error in stderr
            self.stderr.write("Traceback (most recent call last):\nRuntimeError: boom\n")
            return 1
        write_run(self.command, fate)
        return 0

    def poll(self):
        return None

    def send_signal(self, number):
        self.signals.append(number)


def install(monkeypatch) -> type[FakeTrain]:
    """Put FakeTrain in place of the sweep's subprocesses, with no command seen and every run finishing."""
    monkeypatch.setattr(sweep.subprocess, "Popen", FakeTrain)
    FakeTrain.commands, FakeTrain.instances, FakeTrain.fates = [], [], {}
    FakeTrain.default, FakeTrain.on_wait = FINISH, None
    return FakeTrain


def snapshot(folder: Path) -> dict[str, bytes | None] | None:
    """Every path under ``folder`` with its bytes (None for a folder); None when ``folder`` does not exist."""
    if not folder.exists():
        return None
    return {str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
            for path in sorted(folder.rglob("*"))}
