"""A third task, defined here and nowhere else: regression of a linear function on synthetic tensors.

The task and its recipe register as this module loads, as a user's own package would register
them; the commands load it with ``--import tests.training.tasks.toy_task`` (test_toy_task.py runs
them). It is a module of its own, not a test file, so that the test session never imports it: the
registries of the process running the suite keep the project's own tasks and recipes.
"""

import hashlib

import torch
from torch import nn
from torch.nn import functional as F

from fastcore_ops.training.config import DataConfig, ModelConfig, OptimizerConfig, ScheduleConfig, TrainConfig
from fastcore_ops.training.recipes import register_recipe
from fastcore_ops.training.tasks.base import Task
from fastcore_ops.training.tasks.registry import register_task

SAMPLES, TRAINING, FEATURES = 96, 64, 4


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
        cls.check_inputs(data, subset)
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
