"""The training command's threads: the cores other work leaves idle, unless the user chose; and its decoding
workers: on a CPU, the CPUs those threads leave."""

import subprocess
import sys

import pytest
import torch

from fastcore_ops.training import compute_threads
from fastcore_ops.training.compute_threads import busy_cores, choose_threads, cpu_ticks, cpus_left_over, use_threads
from fastcore_ops.training.config import TrainConfig, override
from fastcore_ops.training.methods.registry import plan_methods
from fastcore_ops.training.tasks import classification

STAT = """cpu  20 0 10 100 5 0 0 0 0 0
cpu0 10 0 5 50 5 0 0 2 7 0
cpu1 10 0 5 50 0 0 0 0 0 0
intr 12345 0 0
"""


def test_ticks_count_only_the_named_cpus_and_leave_idle_and_io_wait_out():
    assert cpu_ticks(STAT, {0}) == (17, 72)  # busy: user, system and steal; the guest column is not added again
    assert cpu_ticks(STAT, {0, 1}) == (32, 137)
    assert cpu_ticks(STAT, {7}) == (0, 0)


def test_a_spinning_process_counts_as_a_busy_core():
    # Measured once the spinner says it spins: a fixed wait lost the race to a slow start on a busy box.
    spinner = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline() == "spinning\n"
        assert busy_cores(0.5) >= 0.7
    finally:
        spinner.kill()
        spinner.wait()


@pytest.mark.parametrize(("cpus", "default", "busy", "threads"),
                         [(2, 2, 0.2, 2), (2, 2, 0.9, 1), (2, 2, 1.6, 1), (2, 2, 2.0, 1),
                          (8, 4, 4.0, 2), (8, 4, 0.5, 4)])  # 8 CPUs, 4 cores: PyTorch's default is 4
def test_the_idle_share_of_pytorchs_threads_is_used(monkeypatch, cpus, default, busy, threads):
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(compute_threads.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    monkeypatch.setattr(compute_threads.torch, "get_num_threads", lambda: default)
    monkeypatch.setattr(compute_threads, "busy_cores", lambda: busy)
    choice = choose_threads()
    assert choice.threads == threads
    assert ("busy at start" in choice.reason) == (threads < default)


def test_the_users_choice_wins(monkeypatch):
    monkeypatch.setattr(compute_threads, "busy_cores", lambda: pytest.fail("nothing to measure when the user chose"))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert choose_threads().reason == "OMP_NUM_THREADS"
    assert choose_threads(1) == compute_threads.ThreadChoice(1, "--threads")


def test_without_proc_stat_pytorch_keeps_its_default(monkeypatch, tmp_path):
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(compute_threads, "PROC_STAT", tmp_path / "missing")
    assert "default" in choose_threads().reason


def test_without_cpu_affinity_pytorch_keeps_its_default(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delattr(compute_threads.os, "sched_getaffinity")
    assert choose_threads() == compute_threads.ThreadChoice(
        compute_threads.torch.get_num_threads(), "PyTorch's default: no /proc/stat to see other work in")


def test_use_threads_sets_pytorchs_count():
    before = torch.get_num_threads()
    try:
        assert use_threads(1).describe() == "computing with 1 thread (--threads)"
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(("cpus", "threads", "left"), [(2, 2, 0), (2, 1, 1), (8, 4, 4), (2, 4, 0)])
def test_the_cpus_left_over_are_those_beyond_pytorchs_threads(monkeypatch, cpus, threads, left):
    monkeypatch.setattr(compute_threads.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    monkeypatch.setattr(compute_threads.torch, "get_num_threads", lambda: threads)
    assert cpus_left_over() == left


def test_a_cpu_run_decodes_on_the_cpus_its_threads_leave_unless_the_config_says(monkeypatch):
    monkeypatch.setattr(classification, "cpus_left_over", lambda: 3)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")

    def workers(device, **data):
        config = override(TrainConfig(), [f"data.{key}={value}" for key, value in data.items()])
        return classification._loader_settings(config, plan_methods(config), device)["num_workers"]

    assert workers(cpu) == workers(cpu, backend="pil") == 3
    assert workers(cpu, backend="dali") is None and workers(cuda) is None  # build_loader's default: one per core
    assert workers(cpu, num_workers=0) == 0 and workers(cuda, num_workers=5) == 5
