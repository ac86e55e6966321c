"""What a run under torchrun can train: the strategy (:data:`~fastcore_ops.training.parallel.STRATEGIES`) must
shard the task's model where it is ``fsdp``, and every method that is on must work with several processes and
with the strategy. The training command refuses the rest before any work.

    >>> check_distributed_support(TrainConfig(), task_named(TrainConfig().task), "ddp")  # one process: fine
"""

from __future__ import annotations

from fastcore_ops.training.assemble import world_size_from_environment
from fastcore_ops.training.config import TrainConfig
from fastcore_ops.training.methods.registry import active
from fastcore_ops.training.parallel import STRATEGIES
from fastcore_ops.training.tasks.base import Task
from fastcore_ops.training.tasks.registry import all_tasks, task_named


def check_distributed_support(config: TrainConfig, task: type[Task], strategy: str = "ddp") -> None:
    """Refuse, before any work, what the distributed strategy cannot train (``task``: ``config``'s).

        >>> check_distributed_support(TrainConfig(), task_named(TrainConfig().task), "fsdp")
        Traceback (most recent call last):
        ...
        ValueError: --strategy fsdp shards the models of the tasks ...
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if strategy == "fsdp" and not task.shards_model:
        raise ValueError(f"--strategy fsdp shards the models of the tasks "
                         f"{', '.join(t.name for t in all_tasks() if t.shards_model)}; task {task.name!r} trains with "
                         f"--strategy ddp")
    for method, _ in active(config.methods):
        if world_size_from_environment() > 1 and not method.ddp:
            raise ValueError(f"methods.{method.name} does not work with several processes (DistributedDataParallel); "
                             f"train with one process or set methods.{method.name}=None")
        if strategy == "fsdp" and not method.fsdp:
            raise ValueError(f"methods.{method.name} does not work with --strategy fsdp; set methods.{method.name}=None "
                             f"or use --strategy ddp")
