"""The training loop: steps, events for the methods, evaluation, timing, checkpoints and resume.

The trainer knows nothing about any particular method or task: MixUp, SAM, EMA, SWA and the
others attach to the events of :mod:`fastcore_ops.training.methods.base` and change the run through its
TrainState; a :mod:`fastcore_ops.training.tasks` task (image classification, causal language modelling)
supplies the forward pass's outputs, the loss, the samples a batch counts and the evaluation.
Time is kept the way the methodology measures cost: ``train_seconds`` counts the training steps
(waiting for data included) and the methods' own work, never evaluation or checkpointing.

    >>> trainer = Trainer(model=model, optimizer=optimizer, task=task, train_loader=train,
    ...                   total_steps=10 * len(train), warmup_steps=len(train),
    ...                   device=torch.device("cpu"), out=Path("runs/demo"))   # doctest: +SKIP
    >>> result = trainer.fit()                                                  # doctest: +SKIP
    >>> result.metrics["top1"], result.train_seconds                            # doctest: +SKIP
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from fastcore_ops.checks import check_int, check_number
from fastcore_ops.training import checkpoint, parallel
from fastcore_ops.training.methods.base import Event, Method, TrainState
from fastcore_ops.training.metrics import MetricsLog
from fastcore_ops.training.precision import choose_precision
from fastcore_ops.training.schedule import warmup_cosine
from fastcore_ops.training.tasks import Task
from fastcore_ops.training.tasks.base import metric_phrase

CHECKPOINT_NAME = checkpoint.CHECKPOINT_NAME
PHASES = ("data", "forward", "backward", "optimizer", "methods")


class TrainingInterrupted(Exception):
    """A stop signal arrived; the run was checkpointed and can be resumed with ``--resume``."""

    def __init__(self, signal_number: int, message: str):
        super().__init__(message)
        self.signal_number = signal_number


@dataclass
class FitResult:
    """A finished run, as ``summary.json`` records it."""

    metrics: dict[str, float]  # the final evaluation: the task's metric and its companions
    metric: str  # the task's headline metric (top1, eval_loss): what the tradeoff tool compares
    higher_is_better: bool
    metric_label: str  # how plots and tables name the metric
    steps: int
    epochs_seen: int
    train_seconds: float
    first_epoch_seconds: float  # the first epoch's share of train_seconds (start-up and warm-up costs)
    samples_per_second: float  # training samples per second of train_seconds, over all processes
    sample_unit: str  # what a sample is: images, tokens
    phase_seconds: dict[str, float] = field(default_factory=dict)  # where train_seconds went
    # torch.compile's tracing and code generation (forward and backward graphs), left out of train_seconds.
    compile_seconds: float = 0.0
    precision: str = "fp32"  # what the steps computed in here (Precision.name): "amp" resolves per machine
    eval_seconds: float = 0.0  # the final evaluation's time: the inference cost of evaluation methods such as TTA
    # On a CPU, the steps computed at each count of PyTorch's threads: the count changes a run's arithmetic (the
    # order its sums are taken in), so runs compare alike only at one count. A resumed run may hold several.
    steps_by_threads: dict[str, int] = field(default_factory=dict)


def compile_clock() -> float:
    """Seconds torch.compile has spent compiling in this process so far (forward and backward graphs)."""
    # Dynamo's own running totals: the only record of compile time that covers graphs compiled
    # lazily inside a step (the backward graph compiles during the first backward pass).
    return torch._dynamo.utils.calculate_time_spent()["total_wall_time"]


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _share_rank0_buffers(model: torch.nn.Module) -> None:
    """Give every rank rank 0's buffers, so that all evaluate the model rank 0 saves.

    DDP keeps the parameters equal, but BatchNorm statistics drift apart: each rank's last
    forward pass (and SWA's BatchNorm pass) updates them from its own shard only.
    """
    for buffer in model.buffers():
        dist.broadcast(buffer, src=0)


class Trainer:
    """Trains ``model`` for ``total_steps`` optimizer steps, firing events for ``methods``.

    model: the module to train; ``forward_module`` what the training forward pass goes through
        when training with several processes (:func:`fastcore_ops.training.parallel.wrap`: a DDP wrapper, or
        the FSDP-sharded model itself); methods see ``model``.
    task: what the batches are and how outputs are scored (it holds the evaluation data).
    train_loader: batches of (inputs, targets) on the device, with ``set_epoch(epoch, first_batch)``
        and ``len`` (fastcore_ops.data loaders, fastcore_ops.training.text loaders).
    grad_clip_norm: clip the gradients' global norm to this before each optimizer step; 0: never.
    out: folder for ``checkpoint.pt``, ``metrics.jsonl`` and ``curves.png``; None keeps nothing.
    phase_timing: time data/forward/backward/optimizer separately; on CUDA this synchronizes
        the device at each boundary, which costs a little speed.
    eval_every: evaluate after every this many epochs; 0 evaluates only at the end of training.
    checkpoint_policy: when to checkpoint within an epoch and how many checkpoints to keep.
    compiled: ``forward_module`` is a ``torch.compile`` module: the steps' compile time is counted
        apart (``compile_seconds``), out of ``train_seconds`` and the phases.
    tensorboard: also write every evaluation as TensorBoard event files in ``out``.
    """

    def __init__(self, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, task: Task,
                 train_loader, total_steps: int, warmup_steps: int = 0, final_lr_fraction: float = 0.0,
                 warmup_start_fraction: float = 0.0, lr_decay: str = "cosine",
                 methods: Sequence[Method] = (), precision: str = "fp32", device: torch.device,
                 out: Path | None = None, forward_module: torch.nn.Module | None = None,
                 progress: bool = True, phase_timing: bool = True, eval_every: int = 1, grad_clip_norm: float = 0.0,
                 checkpoint_policy: checkpoint.CheckpointPolicy = checkpoint.CheckpointPolicy(),
                 compiled: bool = False, tensorboard: bool = False):
        self.precision = choose_precision(precision, device)
        check_int("total_steps", total_steps, low=1)
        check_int("eval_every", eval_every, low=0)
        check_number("grad_clip_norm", grad_clip_norm, low=0)
        self.checkpoint_policy, self.grad_clip_norm = checkpoint_policy, grad_clip_norm
        self.model, self.task, self.methods = model, task, list(methods)
        self.train_loader = train_loader
        self.device, self.out = device, out
        self.forward_module = forward_module if forward_module is not None else model
        self.is_main = not _distributed() or dist.get_rank() == 0
        self.progress, self.phase_timing, self.eval_every = progress and self.is_main, phase_timing, eval_every
        scaler = torch.amp.GradScaler(device.type, enabled=self.precision.dtype == torch.float16)
        self.scheduler = warmup_cosine(optimizer, warmup_steps=warmup_steps, total_steps=total_steps,
                                       final_fraction=final_lr_fraction, warmup_start=warmup_start_fraction,
                                       decay=lr_decay)
        self.state = TrainState(model=model, optimizer=optimizer, scaler=scaler, device=device,
                                num_classes=task.num_classes, steps_per_epoch=len(train_loader), total_steps=total_steps,
                                train_loader=train_loader, forward_backward=self._forward_backward,
                                score_samples=self._score_samples)
        self.batch_in_epoch = 0
        # The epoch's summed training loss so far: saved mid-epoch, so a resumed epoch reports the same mean.
        self.epoch_loss_sum, self.epoch_losses = torch.zeros((), device=device), 0
        self.last_checkpoint_time = time.monotonic()
        # Training work done while the task was built (patch whitening's pass over images) counts as the
        # methods' time; a resumed run's checkpoint replaces these with its own totals.
        self.train_seconds = self.first_epoch_seconds = task.setup_seconds
        self.phase_seconds = dict.fromkeys(PHASES, 0.0) | {"methods": task.setup_seconds}
        self.samples_seen = 0
        self.compiled, self.compile_seconds = compiled, 0.0
        self.eval_seconds = 0.0  # the final evaluation's
        self.steps_by_threads: dict[str, int] = {}  # FitResult.steps_by_threads
        self.log = (MetricsLog(out, metric=task.metric, metric_label=task.metric_label, tensorboard=tensorboard)
                    if out is not None and self.is_main else None)

    # -- events and phases -------------------------------------------------------------------

    def _fire(self, event: Event) -> None:
        started = time.perf_counter()
        for method in self.methods:
            method.run(event, self.state)
        self.phase_seconds["methods"] += time.perf_counter() - started

    def _autocast(self):
        return self.precision.autocast(self.device)

    def _sync(self) -> float:
        if self.phase_timing and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _compile_clock(self) -> float:
        return compile_clock() if self.compiled else 0.0

    def _forward_backward(self) -> torch.Tensor:
        """Loss and backward on the current batch at the current weights (SAM's second pass)."""
        with self._autocast():
            outputs = self.task.forward(self.forward_module, self.state.inputs)
        loss = self.task.loss(outputs, self.state.targets)
        self.state.scaler.scale(loss).backward()
        return loss.detach()

    @torch.no_grad()
    def _score_samples(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each sample's loss at the current weights, without gradients (selective backprop's scoring).

        Through ``model``, not the DDP wrapper: a pass that is never back-propagated must not
        take part in DDP's gradient synchronization.
        """
        with self._autocast():
            outputs = self.task.forward(self.model, inputs)
        return self.task.sample_losses(outputs, targets)

    # -- one step ----------------------------------------------------------------------------

    def _train_step(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        state = self.state
        state.inputs, state.targets = inputs, targets
        self._fire(Event.AFTER_DATALOADER)
        started, compiled_before = self._sync(), self._compile_clock()
        with self._autocast():
            state.outputs = self.task.forward(self.forward_module, state.inputs)
        self._fire(Event.BEFORE_LOSS)
        state.loss = self.task.loss(state.outputs, state.targets)
        self._fire(Event.AFTER_LOSS)
        forward_done, compiled_forward = self._sync(), self._compile_clock()
        state.scaler.scale(state.loss).backward()
        backward_done, compiled_backward = self._sync(), self._compile_clock()
        self.phase_seconds["forward"] += forward_done - started - (compiled_forward - compiled_before)
        self.phase_seconds["backward"] += backward_done - forward_done - (compiled_backward - compiled_forward)
        self._fire(Event.AFTER_BACKWARD)
        started = self._sync()
        if self.grad_clip_norm:
            state.scaler.unscale_(state.optimizer)  # clip the true gradients, not fp16's scaled ones
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip_norm)
        state.scaler.step(state.optimizer)
        state.scaler.update()
        state.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        state.step += 1
        if self.device.type == "cpu":
            threads = str(torch.get_num_threads())
            self.steps_by_threads[threads] = self.steps_by_threads.get(threads, 0) + 1
        self.phase_seconds["optimizer"] += self._sync() - started
        self._fire(Event.STEP_END)
        return state.loss.detach()

    # -- evaluation --------------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """The task's metrics of the evaluation model, over every rank's share of the evaluation data.

        Under DDP each rank evaluates its own unpadded shard (the shards may differ by a batch),
        so the only collectives are a broadcast of the buffers before the loop and one sum after it.
        A sharded model's every forward pass is collective, so there each rank evaluates all the
        evaluation data (the task's loaders are built unsharded for it) and nothing is summed.
        """
        model = self.state.eval_model or self.model
        if _distributed():
            _share_rank0_buffers(model)
        was_training = model.training
        model.eval()
        sums = self.task.evaluation_sums(model, self._autocast, self._evaluation_bar)
        model.train(was_training)
        if _distributed() and not parallel.is_sharded(model):
            dist.all_reduce(sums)
        return self.task.metrics(sums)

    # -- checkpoints -------------------------------------------------------------------------

    def _checkpoint_payload(self, final: dict[str, float] | None) -> dict:
        state = self.state
        return {
            "model": parallel.model_state(self.model),
            "optimizer": parallel.optimizer_state(self.model, state.optimizer),
            "scheduler": self.scheduler.state_dict(), "scaler": state.scaler.state_dict(),
            "methods": {type(m).__name__: m.state_dict() for m in self.methods},
            "step": state.step, "epoch": state.epoch, "batch_in_epoch": self.batch_in_epoch,
            "epoch_loss_sum": self.epoch_loss_sum, "epoch_losses": self.epoch_losses,
            "train_seconds": self.train_seconds, "first_epoch_seconds": self.first_epoch_seconds,
            "phase_seconds": dict(self.phase_seconds), "samples_seen": self.samples_seen,
            "compile_seconds": self.compile_seconds, "eval_seconds": self.eval_seconds,
            "steps_by_threads": dict(self.steps_by_threads),
            "method_seconds": dict(state.method_seconds), "rng": checkpoint.rng_states(), "final": final,
        }

    def save_checkpoint(self, final: dict[str, float] | None = None) -> None:
        """Save the run; ``final`` (the final evaluation's metrics) marks it finished."""
        # A sharded model's state is gathered by every rank together; only rank 0 writes it.
        if self.out is not None and (self.is_main or parallel.is_sharded(self.model)):
            payload = self._checkpoint_payload(final)
            if self.is_main:
                checkpoint.save_keeping(payload, self.out / CHECKPOINT_NAME, self.checkpoint_policy.keep)
        self.last_checkpoint_time = time.monotonic()

    def _checkpoint_due(self) -> bool:
        """Whether to checkpoint now, mid-epoch (an epoch's end and the run's end save anyway)."""
        state = self.state
        if self.batch_in_epoch >= state.steps_per_epoch or state.step >= state.total_steps:
            return False
        policy = self.checkpoint_policy
        if policy.every_steps is not None:
            return state.step % policy.every_steps == 0
        return time.monotonic() - self.last_checkpoint_time >= policy.every_seconds

    def _resume(self) -> dict:
        """Restore what a fit needs before FIT_START; returns the payload for the rest."""
        payload = checkpoint.load_newest(self.out / CHECKPOINT_NAME, checkpoint.RUN_LAYOUT)
        parallel.load_model_state(self.model, payload["model"])
        state = self.state
        state.step, state.epoch = payload["step"], payload["epoch"]
        if payload["final"] is None and state.step >= state.total_steps:  # an unfinished run stops short of its end
            raise ValueError(f"--resume: the checkpoint in {self.out} is at step {state.step}, at or past this run's "
                             f"{state.total_steps} steps: its data or number of processes changed since it was saved; "
                             f"resume with the data and processes it was trained with")
        self.batch_in_epoch = payload["batch_in_epoch"]
        self.epoch_loss_sum = payload["epoch_loss_sum"].to(self.device)
        self.epoch_losses = payload["epoch_losses"]
        self.train_seconds, self.first_epoch_seconds = payload["train_seconds"], payload["first_epoch_seconds"]
        self.phase_seconds.update(payload["phase_seconds"])
        self.samples_seen = payload["samples_seen"]
        self.compile_seconds = payload.get("compile_seconds", 0.0)  # absent from checkpoints before it
        self.eval_seconds = payload.get("eval_seconds", 0.0)  # likewise
        self.steps_by_threads = dict(payload.get("steps_by_threads", {}))  # likewise: its steps are then uncounted
        state.method_seconds.update(payload["method_seconds"])
        if self.log is not None:
            self.log.truncate_after(state.step)
        return payload

    def _restore_after_fit_start(self, payload: dict) -> None:
        # After FIT_START: methods have rebuilt their structure (EMA copies, frozen layers leaving
        # the optimizer) from the restored step, so the saved states fit them again.
        saved_methods = payload["methods"]
        for method in self.methods:
            method.load_state_dict(saved_methods.get(type(method).__name__, {}))
        parallel.load_optimizer_state(self.model, self.state.optimizer, payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        self.state.scaler.load_state_dict(payload["scaler"])
        checkpoint.restore_rng_states(payload["rng"])

    # -- the run -----------------------------------------------------------------------------

    def _stop_and_checkpoint(self, stops: checkpoint.StopRequests) -> tuple[bool, bool]:
        """Whether to stop now, and whether to checkpoint now: the same on every rank, whichever rank's signal
        or clock says so (each rank's clock passes ``every_seconds`` at a step of its own, and a sharded model's
        checkpoint is gathered by all ranks together: one that began it alone would wait for the others)."""
        flags = torch.tensor([stops.requested is not None, self._checkpoint_due()], dtype=torch.int32)
        if _distributed():
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return bool(flags[0]), bool(flags[1])

    def _train_epoch(self, stops: checkpoint.StopRequests) -> None:
        """Train from ``batch_in_epoch`` to the end of the epoch or of the run."""
        state = self.state
        self.train_loader.set_epoch(state.epoch, self.batch_in_epoch)
        if self.batch_in_epoch == 0:
            self.epoch_loss_sum, self.epoch_losses = torch.zeros((), device=self.device), 0
        # Over the whole run, so that its ETA is the run's (evaluation not included).
        epochs = math.ceil(state.total_steps / state.steps_per_epoch)
        bar = tqdm(total=state.total_steps, initial=state.step, disable=not self.progress,
                   desc=f"epoch {state.epoch + 1}/{epochs}", unit="step", dynamic_ncols=True, leave=False)
        epoch_started = time.perf_counter()
        batches = iter(self.train_loader)
        while state.step < state.total_steps:
            if self.next_step(batches) is None:
                break
            bar.update()
            if self.epoch_losses % 10 == 0:  # .item() waits for the device: not every step
                bar.set_postfix({"loss": f"{(self.epoch_loss_sum / self.epoch_losses).item():.3f}",
                                 f"{self.task.sample_unit}/s": f"{self._samples_per_second():.0f}"})
            stop, checkpoint_due = self._stop_and_checkpoint(stops)
            if stop:
                bar.close()
                self.save_checkpoint()
                number = stops.requested or signal.SIGTERM  # another rank's signal, in DDP
                raise TrainingInterrupted(number, f"stopped by signal {number} at step {state.step}; checkpoint "
                                                  f"in {self.out}; rerun with --resume to continue")
            if checkpoint_due:
                self.save_checkpoint()
        bar.close()
        self.epoch_train_loss = (self.epoch_loss_sum / max(self.epoch_losses, 1)).item()
        self.epoch_seconds = time.perf_counter() - epoch_started

    def next_step(self, batches) -> float | None:
        """Take the next batch of ``batches`` and train on it; the step's seconds as ``train_seconds`` counts them
        (waiting for data included, compilation not), or None when the epoch has no batch left."""
        state = self.state
        started, compiled_before = time.perf_counter(), self._compile_clock()
        try:
            inputs, targets = next(batches)
        except StopIteration:
            return None
        self.phase_seconds["data"] += time.perf_counter() - started
        # Counted before the step: methods may reshape the batch (sequence-length warmup), not its samples.
        samples = self.task.samples(targets) * (dist.get_world_size() if _distributed() else 1)
        self.epoch_loss_sum += self._train_step(inputs, targets)
        self.epoch_losses += 1
        self.batch_in_epoch += 1
        self.samples_seen += samples
        compiling = self._compile_clock() - compiled_before  # SAM's second pass may compile too
        self.compile_seconds += compiling
        elapsed = time.perf_counter() - started - compiling
        self.train_seconds += elapsed
        if state.epoch == 0:
            self.first_epoch_seconds += elapsed
        return elapsed

    def time_steps(self, first_step: int, count: int) -> list[float]:
        """Train ``count`` steps (fewer at the run's end) from step ``first_step`` on, as the run would train them
        there; each step's seconds (what the tradeoff tool's cost pass measures).

        The model is put where a run resumed at ``first_step`` would be (methods restart from that step,
        the loader at that batch), not trained there: the weights are whatever this trainer holds.
        Calling it again with the same ``first_step`` repeats the same batches, augmentations included.

            >>> trainer.time_steps(first_step=390, count=20)  # doctest: +SKIP
            [0.31, 0.12, 0.11, ...]
        """
        state = self.state
        check_int("first_step", first_step, low=0, high=state.total_steps - 1)
        check_int("count", count, low=1)
        state.step, self.batch_in_epoch = first_step, first_step % state.steps_per_epoch
        state.epoch = first_step // state.steps_per_epoch
        self.model.train()
        self._fire(Event.FIT_START)
        seconds: list[float] = []
        while len(seconds) < count and state.step < state.total_steps:
            if seconds:  # the window goes on into the next epoch
                self._fire(Event.EPOCH_END)
                state.epoch, self.batch_in_epoch = state.epoch + 1, 0
            self._fire(Event.EPOCH_START)
            self.train_loader.set_epoch(state.epoch, self.batch_in_epoch)
            batches, taken = iter(self.train_loader), len(seconds)
            while len(seconds) < count and state.step < state.total_steps:
                elapsed = self.next_step(batches)
                if elapsed is None:
                    break
                seconds.append(elapsed)
            close = getattr(batches, "close", None)
            if close is not None:  # a generator: end its epoch now (the loader names skipped files there)
                close()
            if len(seconds) == taken:  # an epoch without a batch: nothing more to time
                break
        return seconds

    def _evaluation_bar(self, loader: Iterable, name: str) -> Iterable:
        """``loader`` with a progress bar named ``name`` (none without progress, or off the main process)."""
        total = len(loader) if hasattr(loader, "__len__") else None
        return tqdm(loader, desc=name, total=total, unit="batch", disable=not self.progress, dynamic_ncols=True,
                    leave=False)

    def _samples_per_second(self) -> float:
        return self.samples_seen / max(self.train_seconds, 1e-9)

    def _say_epoch(self, evaluation: str = "") -> None:
        """The line an epoch's end prints, with its ``evaluation`` where it has one: a log or a console whose
        progress bars cleared themselves keeps the run's history."""
        state = self.state
        epochs = math.ceil(state.total_steps / state.steps_per_epoch)
        print(f"epoch {state.epoch + 1}/{epochs}: {evaluation}training loss {self.epoch_train_loss:.4f}, "
              f"{self.train_seconds:.1f} s of training", flush=True)

    def _record(self, metrics: dict[str, float]) -> None:
        """Say an evaluation's result in a line (the progress bars clear themselves) and log it with the run's."""
        if self.is_main:
            headline = metric_phrase(self.task.metric_label, metrics[self.task.metric])
            evaluation_loss = f", evaluation loss {metrics['eval_loss']:.4f}" if "eval_loss" in metrics else ""
            self._say_epoch(f"{headline}{evaluation_loss}, ")
        if self.log is None:
            return
        self.log.append({
            "epoch": self.state.epoch + 1, "step": self.state.step, "train_loss": self.epoch_train_loss,
            **metrics, "train_seconds": self.train_seconds, "samples_per_second": self._samples_per_second(),
            "lr": self.state.optimizer.param_groups[0]["lr"], "phase_seconds": dict(self.phase_seconds),
        })
        self.log.plot()  # only here: drawn before a run's first evaluation, its axes would be empty

    def fit(self, resume: bool = False) -> FitResult:
        """Train to ``total_steps`` (from the checkpoint in ``out`` if ``resume``) and evaluate."""
        payload = self._resume() if resume else None
        if payload is not None and self.is_main:
            state = self.state
            print(f"resuming from step {state.step} of {state.total_steps} (epoch {state.epoch + 1}, batch "
                  f"{self.batch_in_epoch})" if payload["final"] is None else
                  f"the run had finished (step {state.step} of {state.total_steps}): its summary is written again",
                  flush=True)
        if payload is not None and payload["final"] is not None:
            return self._result(payload["final"])  # nothing left to train
        self.model.train()
        self.last_checkpoint_time = time.monotonic()
        with checkpoint.StopRequests() as stops:
            self._fire(Event.FIT_START)
            if payload is not None:
                self._restore_after_fit_start(payload)
            while self.state.step < self.state.total_steps:
                if self.batch_in_epoch == 0:
                    self._fire(Event.EPOCH_START)
                self._train_epoch(stops)
                self._fire(Event.EPOCH_END)
                if self.state.step >= self.state.total_steps:
                    break
                if self.eval_every and (self.state.epoch + 1) % self.eval_every == 0:
                    self._record(self.evaluate())
                elif self.is_main:
                    self._say_epoch()
                self.state.epoch += 1
                self.batch_in_epoch = 0
                self.save_checkpoint()
            started = time.perf_counter()
            self._fire(Event.FIT_END)  # SWA's BatchNorm pass is training cost
            self.train_seconds += time.perf_counter() - started
            started = time.perf_counter()
            metrics = self.evaluate()
            self.eval_seconds = time.perf_counter() - started
            self._record(metrics)
            self.save_checkpoint(final=metrics)
        if self.log is not None:
            self.log.close()
        return self._result(metrics)

    def _result(self, metrics: dict[str, float]) -> FitResult:
        phases = dict(self.phase_seconds)
        for name, seconds in self.state.method_seconds.items():
            phases[f"methods.{name}"] = seconds
        task = self.task
        return FitResult(metrics=dict(metrics), metric=task.metric, higher_is_better=task.higher_is_better,
                         metric_label=task.metric_label, steps=self.state.step, epochs_seen=self.state.epoch + 1,
                         train_seconds=self.train_seconds, first_epoch_seconds=self.first_epoch_seconds,
                         samples_per_second=self._samples_per_second(), sample_unit=task.sample_unit,
                         phase_seconds=phases, compile_seconds=self.compile_seconds,
                         precision=self.precision.name, eval_seconds=self.eval_seconds,
                         steps_by_threads=dict(self.steps_by_threads))

