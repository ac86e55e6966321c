"""A third task, defined here and nowhere else, trains, sweeps and resumes through the unchanged commands.

Regression of a linear function on synthetic tensors: the task, its model and its recipe are
registered as this module loads, as a user's own package would register them; the commands
load it with ``--import tests.training.tasks.test_toy_task``, the sweep's training runs too.
"""

import hashlib
import json
import shutil

import torch
from torch import nn
from torch.nn import functional as F

from training import checkpoint
from training.config import DataConfig, ModelConfig, OptimizerConfig, ScheduleConfig, TrainConfig
from training.recipes import register_recipe
from training.tasks.base import Task
from training.tasks.registry import register_task
from training.tradeoff.cli import main as tradeoff
from training.train import main as train

SAMPLES, TRAINING, FEATURES = 96, 64, 4
IMPORT = ["--import", __name__]


class SyntheticBatches:
    """The training rows in batches, reshuffled each epoch from the seed (so a resumed epoch repeats its order)."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, batch_size: int, seed: int):
        self.inputs, self.targets, self.batch_size, self.seed = inputs, targets, batch_size, seed
        self.epoch = self.first_batch = 0

    def set_epoch(self, epoch: int, first_batch: int = 0) -> None:
        self.epoch, self.first_batch = epoch, first_batch

    def __len__(self) -> int:
        return len(self.inputs) // self.batch_size

    def __iter__(self):
        order = torch.randperm(len(self.inputs), generator=torch.Generator().manual_seed(self.seed * 1000 + self.epoch))
        for batch in range(self.first_batch, len(self)):
            rows = order[batch * self.batch_size:(batch + 1) * self.batch_size]
            yield self.inputs[rows], self.targets[rows]

    def close(self) -> None:
        pass


@register_task("toy_regression")
class ToyRegression(Task):
    """y = x . (1, 2, 3, 4) + noise from x ~ N(0, 1), fitted by a linear model; judged by the mean squared error."""

    metric = "mse"
    higher_is_better = False
    metric_label = "mean squared error"
    sample_unit = "samples"

    @classmethod
    def model_names(cls):
        return ["linear"]

    @classmethod
    def check_data(cls, config, data, *, subset, world_size, progress=True):
        cls.check_subset(subset)
        if data is not None:
            raise ValueError(f"--data {data}: task toy_regression makes its own data; leave --data out")
        return None, None

    @classmethod
    def data_fingerprint(cls, config, data, found):
        shape = f"{SAMPLES}x{FEATURES} from seed {config.seed}".encode()
        return {"synthetic": {"files": 0, "bytes": 0, "sha256": hashlib.sha256(shape).hexdigest()}}

    @classmethod
    def build(cls, config, plan, *, data, device, subset=None, found=None, strategy="ddp"):
        generator = torch.Generator().manual_seed(config.seed)
        inputs = torch.randn(SAMPLES, FEATURES, generator=generator)
        targets = inputs @ torch.arange(1.0, FEATURES + 1) + 0.1 * torch.randn(SAMPLES, generator=generator)
        batches = SyntheticBatches(inputs[:TRAINING], targets[:TRAINING], config.data.batch_size, config.seed)
        return nn.Linear(FEATURES, 1), batches, cls(inputs[TRAINING:], targets[TRAINING:])

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor):
        self.inputs, self.targets = inputs, targets

    def forward(self, model, inputs):
        return model(inputs).squeeze(1)

    def loss(self, outputs, targets):
        return F.mse_loss(outputs, targets)

    def sample_losses(self, outputs, targets):
        return (outputs - targets).square()

    def samples(self, targets):
        return len(targets)

    def evaluation_sums(self, model, autocast, batches=lambda loader, name: loader):
        with autocast():
            errors = model(self.inputs).squeeze(1) - self.targets
        return torch.tensor([errors.square().sum().item(), len(errors)], dtype=torch.float64)

    def metrics(self, sums):
        squared, count = sums.tolist()
        return {"mse": squared / count, "eval_loss": squared / count}


register_recipe("toy_regression", TrainConfig(
    name="toy_regression", task="toy_regression", model=ModelConfig(name="linear"), precision="fp32",
    optimizer=OptimizerConfig(lr=0.05, reference_batch=16, weight_decay=0.0),
    schedule=ScheduleConfig(epochs=4.0, final_lr_fraction=1.0), data=DataConfig(batch_size=16)))


def _weights(out):
    return checkpoint.load(out / checkpoint.CHECKPOINT_NAME)["model"]


def test_the_toy_task_trains_through_the_train_command(tmp_path):
    out = tmp_path / "run"
    assert train([*IMPORT, "--recipe", "toy_regression", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["metric"], summary["sample_unit"], summary["steps"]) == ("mse", "samples", 16)
    assert summary["metrics"]["mse"] < 5.0, "4 epochs of SGD fit most of y's variance (30)"


def test_a_resumed_toy_run_ends_as_the_uninterrupted_one(tmp_path):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert train([*IMPORT, "--recipe", "toy_regression", "--out", str(whole), "--no-progress",
                  "--keep-checkpoints", "3"]) == 0
    # As a run stopped after its second epoch's checkpoint (step 8 of 16) leaves its folder.
    shutil.copytree(whole, stopped)
    for name in ("summary.json", "checkpoint.pt", "checkpoint.1.pt"):
        (stopped / name).unlink()
    (stopped / "checkpoint.2.pt").rename(stopped / "checkpoint.pt")
    assert checkpoint.load(stopped / checkpoint.CHECKPOINT_NAME)["step"] == 8
    assert train([*IMPORT, "--resume", "--out", str(stopped), "--no-progress"]) == 0
    for name, tensor in _weights(whole).items():
        assert torch.equal(tensor, _weights(stopped)[name]), name


def test_a_resume_without_the_import_names_the_unknown_task(tmp_path, capsys):
    out = tmp_path / "run"
    assert train([*IMPORT, "--recipe", "toy_regression", "--epochs", "1", "--out", str(out), "--no-progress"]) == 0
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(config | {"task": "toy_regression_elsewhere"}))
    assert train(["--resume", "--out", str(out), "--no-progress"]) == 2
    assert "task must be one of 'image_classification', 'language_model', 'toy_regression'" in capsys.readouterr().err


def test_a_two_point_tradeoff_sweeps_the_toy_task(tmp_path, capsys):
    out = tmp_path / "report"
    code = tradeoff([*IMPORT, "--recipes", "toy_regression", "--budgets", "0.5,1", "--device", "cpu",
                     "--no-progress", "--out", str(out)])
    assert code == 0, capsys.readouterr().err[-3000:]
    rows = json.loads((out / "results.json").read_text())
    runs = rows["runs"] if isinstance(rows, dict) else rows
    assert sorted((run["budget"], run["metric"], run["steps"]) for run in runs) == [(0.5, "mse", 8), (1.0, "mse", 16)]
