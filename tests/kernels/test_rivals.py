"""Where the table of faster rivals lists a call's cell on its GPU, the public function runs its reference;
elsewhere, and inside ``kernels_always()``, the kernel (fastcore_ops/kernels/rivals.py). The table is written
from a GPU run's rows by ``python -m benchmarks.kernels.faster_rivals``, whose rows learn their cells from the
calls they time (``benchmarks.kernels.runner.call_cell``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from benchmarks.kernels import faster_rivals
from benchmarks.kernels.registry import KERNELS
from benchmarks.kernels.runner import all_cases, call_cell
from fastcore_ops.kernels import blurpool2d, rivals
from fastcore_ops.kernels.launches import LaunchRecorder

ROOT = Path(__file__).resolve().parents[2]
SPECS = [pytest.param(spec, id=spec.name) for spec in KERNELS]
GPU = "Test GPU"
MEASURED = {"size": "a benchmark size", "kernel_ms": 2.0, "rival_ms": 1.0}


def _forward_on_fake_gpu(spec, table, monkeypatch):
    """The cells ``spec``'s forward called its kernel in, and what it launched, with ``table`` on a GPU named GPU."""
    monkeypatch.setattr(rivals, "FASTER_RIVALS", table)
    monkeypatch.setattr(rivals, "device_name", lambda device: GPU)
    with FakeTensorMode():
        inputs = spec.inputs("cuda", torch.bfloat16, False)
        with rivals.recorded_cells() as calls, LaunchRecorder(stub_triton=True) as recorder:
            with recorder.phase("forward"):
                spec.ours(*inputs)
    return calls, recorder.phases["forward"]


@pytest.mark.parametrize("spec", SPECS)
def test_a_call_runs_the_rival_only_at_a_cell_measured_faster_on_its_gpu(spec, monkeypatch):
    [(kernel, cell)], phase = _forward_on_fake_gpu(spec, {}, monkeypatch)
    assert kernel == spec.name and phase.triton_launches
    _, phase = _forward_on_fake_gpu(spec, {kernel: {GPU: {cell: MEASURED}}}, monkeypatch)
    assert phase.launches and not phase.triton_launches  # the reference's ATen ops
    for elsewhere in ({kernel: {"Another GPU": {cell: MEASURED}}}, {kernel: {GPU: {"another cell": MEASURED}}}):
        _, phase = _forward_on_fake_gpu(spec, elsewhere, monkeypatch)
        assert phase.triton_launches, elsewhere


@pytest.mark.parametrize("spec", SPECS)
def test_the_kernel_stays_an_option_where_its_rival_was_faster(spec, monkeypatch):
    [(kernel, cell)], _ = _forward_on_fake_gpu(spec, {}, monkeypatch)
    with rivals.kernels_always():
        _, phase = _forward_on_fake_gpu(spec, {kernel: {GPU: {cell: MEASURED}}}, monkeypatch)
    assert phase.triton_launches


def _graphs(fn, *inputs) -> list[str]:
    """The FX graphs torch.compile makes of ``fn(*inputs)`` in one graph (fullgraph: a break fails)."""
    graphs = []

    def capture(graph_module, example_inputs):
        graphs.append(str(graph_module.graph))
        return graph_module.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=capture, fullgraph=True)(*inputs)
    return graphs


@pytest.mark.parametrize("spec", SPECS)
def test_the_rival_path_compiles_in_one_graph(spec, monkeypatch):
    """What a call that runs its rival traces (on a CPU without the interpreter, the reference too)."""
    monkeypatch.setattr(rivals, "kernel_runs", lambda kernel, tensor, **arguments: False)
    [graph] = _graphs(spec.ours, *spec.inputs("cpu", torch.float32, True))
    assert "ops.fastcore_ops" not in graph  # none of our custom ops (its cached filter may be named after us)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the table is consulted for CUDA tensors only")
def test_a_compiled_call_takes_the_rival_at_a_measured_cell_in_one_graph(monkeypatch):
    x = torch.randn(2, 8, 16, 16, device="cuda", dtype=torch.float16)
    monkeypatch.setattr(rivals, "FASTER_RIVALS", {
        "blurpool2d": {rivals.device_name(x.device): {rivals.cell(x, stride=1): MEASURED}}})
    [graph] = _graphs(blurpool2d, x, 1)
    assert "conv2d" in graph and "ops.fastcore_ops" not in graph


def test_cpu_tensors_never_consult_the_table(monkeypatch):
    monkeypatch.setattr(rivals, "FASTER_RIVALS", {"blurpool2d": {GPU: {"nchw float32 1x4x8x8 stride=2": MEASURED}}})
    monkeypatch.setattr(rivals, "device_name", lambda device: pytest.fail("a CPU tensor asked for a GPU's name"))
    assert not rivals.runs_rival("blurpool2d", torch.empty(1, 3, 8, 8), stride=2)


def test_a_cell_is_the_layout_dtype_bucketed_shape_and_code_path():
    x = torch.empty(3, 5, 7, 9, dtype=torch.float16)
    assert rivals.cell(x, stride=2) == "nchw float16 4x8x8x16 stride=2"
    assert rivals.cell(x.contiguous(memory_format=torch.channels_last), stride=1) == "nhwc float16 4x8x8x16 stride=1"
    assert rivals.cell(x[..., ::2]).startswith("strided ")
    assert rivals.cell(torch.empty(6, 1000)[:, :10], target="labels") == "strided float32 8x16 target=labels"


@pytest.mark.parametrize("spec", SPECS)
def test_each_benchmark_row_learns_the_cell_of_the_calls_it_times(spec):
    for case in all_cases(1, torch.float32, torch.device("cpu"), {spec.name}, tiny=True):
        cell = call_cell(case, case.make_inputs())
        assert cell.split()[1] == "float32", cell


def test_the_committed_table_holds_declared_kernels_and_measured_sizes():
    table = rivals.load_faster_rivals(rivals.TABLE)
    kernels = {spec.name: spec for spec in KERNELS}
    for kernel, devices in table.items():
        assert kernel in kernels
        sizes = {case.size for case in all_cases(256, torch.float16, torch.device("meta"), {kernel})}
        assert all(entry["size"] in sizes for cells in devices.values() for entry in cells.values())


@pytest.mark.parametrize("text, problem", [
    ("[]", "must be a JSON object of kernel names"),
    ('{"blurpool2d": []}', "must be a JSON object of device names"),
    ('{"blurpool2d": {"GPU": ["cell"]}}', "must be a JSON object of cells"),
    ('{"blurpool2d": {"GPU": {"c": {"size": "s", "kernel_ms": 2}}}}', 'exactly "size", "kernel_ms" and "rival_ms"'),
    ('{"blurpool2d": {"GPU": {"c": {"size": 1, "kernel_ms": 2, "rival_ms": 1}}}}', '"size" must be'),
    ('{"blurpool2d": {"GPU": {"c": {"size": "s", "kernel_ms": true, "rival_ms": 1}}}}', "positive numbers"),
    ('{"blurpool2d": {"GPU": {"c": {"size": "s", "kernel_ms": 2, "rival_ms": -1}}}}', "positive numbers"),
    ('{"blurpool2d": {"GPU": {"c": {"size": "s", "kernel_ms": NaN, "rival_ms": 1}}}}', "not a JSON table"),
    ('{"blurpool2d": {"GPU": {"c": {"size": "s", "kernel_ms": 1, "rival_ms": 2}}}}', "is not faster than the kernel"),
    ("{", "not a JSON table"),
])
def test_a_table_that_is_not_one_is_refused_naming_the_file(text, problem, tmp_path):
    path = tmp_path / "faster_rivals.json"
    path.write_text(text)
    with pytest.raises(rivals.FasterRivalsError, match="faster_rivals.json") as raised:
        rivals.load_faster_rivals(path)
    assert problem in str(raised.value)


def test_an_unknown_mode_is_refused_at_import():
    result = subprocess.run([sys.executable, "-c", "import fastcore_ops.kernels"], cwd=ROOT, capture_output=True,
                            text=True, env={"PATH": "", "FASTCORE_OPS_RIVALS": "sometimes"})
    assert result.returncode != 0 and "FASTCORE_OPS_RIVALS='sometimes': must be one of measured, never" in result.stderr


def _row(size, cell, kernel_ms, rival_ms, device=GPU):
    return {"kernel": "blurpool2d", "size": size, "dtype": "torch.float16", "batch": 256, "device": device,
            "cell": cell, "ours_fwd_bwd_ms": 9.0, "ref_fwd_bwd_ms": 9.0, "ours_fwd_bwd_graph_ms": kernel_ms,
            "ref_fwd_bwd_graph_ms": rival_ms}


def _rows_file(path, *rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_table_takes_the_cells_where_the_rival_was_faster_and_the_later_row_counts(tmp_path, capsys):
    out = tmp_path / "faster_rivals.json"
    first = _rows_file(tmp_path / "first.jsonl", _row("a", "cell a", 0.4, 0.3), _row("b", "cell b", 0.2, 0.3),
                       _row("c", "cell c", 0.5, 0.1))
    assert faster_rivals.main([str(first), "--out", str(out)]) == 0
    assert set(json.loads(out.read_text())["blurpool2d"][GPU]) == {"cell a", "cell c"}
    assert "blurpool2d on Test GPU: the rival faster in 2 of 3 cells measured: a; c" in capsys.readouterr().out
    # A later run: the kernel now wins at cell a, cell c was not measured again and stays.
    later = _rows_file(tmp_path / "later.jsonl", _row("a", "cell a", 0.25, 0.3), _row("d", "cell d", 0.6, 0.5))
    assert faster_rivals.main([str(later), "--out", str(out)]) == 0
    table = rivals.load_faster_rivals(out)
    assert table["blurpool2d"][GPU] == {"cell c": {"size": "c", "kernel_ms": 0.5, "rival_ms": 0.1},
                                        "cell d": {"size": "d", "kernel_ms": 0.6, "rival_ms": 0.5}}
    faster_rivals.main([str(_rows_file(tmp_path / "last.jsonl", _row("c", "cell c", 0.1, 0.2),
                                       _row("d", "cell d", 0.4, 0.5))), "--out", str(out)])
    assert json.loads(out.read_text()) == {}  # no kernel left with a faster rival


@pytest.mark.parametrize("row, message", [
    ({**_row("a", "cell a", 0.4, 0.3), "kernel": "nope"}, "not a declared kernel"),
    ({key: value for key, value in _row("a", "cell a", 0.4, 0.3).items() if key != "cell"}, "no cell or device"),
    (_row("a", "cell a", None, 0.3), "no device time for the kernel and its rival"),
])
def test_rows_that_cannot_say_are_refused_and_the_table_is_left(row, message, tmp_path, capsys):
    out = tmp_path / "faster_rivals.json"
    out.write_text("{}\n")
    assert faster_rivals.main([str(_rows_file(tmp_path / "rows.jsonl", row)), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and message in error and error.count("\n") == 1
    assert out.read_text() == "{}\n"
