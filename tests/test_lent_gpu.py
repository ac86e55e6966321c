"""tools/lent_gpu.sh: its plan, its refusals (one ``error:`` line, exit 2, nothing of the user's touched), and a whole
``run`` on this CPU with ``python3`` and ``nvidia-smi`` stubbed: the steps in the plan's order, what OUT holds, the
compile cache's round trip, and nothing written outside OUT and .gpu-carry."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD_S

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "lent_gpu.sh"
STEPS = ["setup", "correctness", "retune", "timing", "pytest", "cache"]
CACHE = "compile-cache.tar.xz" if shutil.which("xz") else "compile-cache.tar.gz"  # xz where there is one
OUTPUTS = {"run.log", "steps.jsonl", "correctness.json", "tuned_configs.json", "kernels.jsonl", "pytest.log", CACHE}
OUT_MARKER = ".fastcore_ops-lent_gpu"  # an empty folder: OUT's files stay the 7 above

# python3 for `run` and `prepare`: logs each call and does at once what the script needs of it.
STUB_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
value() { local flag=$1; shift; while [ $# -gt 0 ]; do [ "$1" = "$flag" ] && { echo "$2"; return; }; shift; done; }
case "$1 ${2:-}" in
"-c "*)
    case "$2" in
    *xdist*) exit 1 ;;
    *KERNELS*) echo "python 3.12 torch stub triton stub" >&2; echo "$STUB_KERNELS" ;;
    *triton_key*) echo "$STUB_TRITON_KEY" ;;
    esac ;;
"-m pip")
    [ "$3" != download ] || touch "$(value -d "$@")/stub-1.0-py3-none-any.whl" ;;
"-m benchmarks.gpu_check.part")
    touch "$TRITON_CACHE_DIR/compiled-by-correctness"
    mkdir "$TRITON_CACHE_DIR/new" && echo "{}" > "$TRITON_CACHE_DIR/new/__grp__kernel.json"
    echo "binary only: $TRITON_STORE_BINARY_ONLY" >> "$STUB_LOG"
    echo '{"rows": [{"kernel": "stub", "passed": true}], "notes": []}' > "$4" ;;
"-m benchmarks.kernels.retune")
    echo "{\"retuned\": {\"$(value --kernels "$@")\": {}}}" > "$(value --out "$@")" ;;
"-m benchmarks.kernels")
    echo "table in use: $(cat fastcore_ops/kernels/tuned_configs.json)" >> "$STUB_LOG"
    echo "{\"kernel\": \"$(value --kernels "$@")\"}" >> "$(value --jsonl "$@")" ;;
"-m pytest")
    echo "1 passed" ;;
esac
"""

# The lease's Python for prepare --compile (LENT_GPU_PYTHON): its versions, the compiled kernel, the Triton key.
STUB_COMPILE_PYTHON = r"""#!/usr/bin/env bash
echo "compile $*" >> "$STUB_LOG"
case "$1 ${2:-}" in
"-c "*)
    case "$2" in
    *version_info*) echo "$STUB_VERSIONS" ;;
    *triton_key*) echo "$STUB_TRITON_KEY" ;;
    esac ;;
"-m benchmarks.kernels.precompile")
    mkdir -p "$4/k" && echo "{}" > "$4/k/__grp__kernel.json" ;;
esac
"""


def _run(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=HANG_GUARD_S,
                          env={**os.environ, **(env or {})})


def _refused(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr, result.stderr


def _snapshot(root: Path, leave_out: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``root`` but those under the folders ``leave_out``, by path, with its bytes."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and not any(path.is_relative_to(root / folder) for folder in leave_out)}


def _tree(root: Path) -> dict[str, bytes | str]:
    """Everything under ``root``, links not followed: a file's bytes, a link's target, "folder" for a folder."""
    def what(path: Path) -> bytes | str:
        if path.is_symlink():
            return f"link to {os.readlink(path)}"
        return "folder" if path.is_dir() else path.read_bytes()
    return {str(path.relative_to(root)): what(path) for path in sorted(root.rglob("*"))}


class _AnyBytes(bytes):
    """Equal to any bytes: a file whose content a test does not judge."""

    def __eq__(self, other):
        return isinstance(other, bytes)

    __hash__ = bytes.__hash__


ANY_BYTES = _AnyBytes()


def _cache_tarball(path: Path, names: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:xz" if path.suffix == ".xz" else "w:gz") as tar:
        for name, data in names.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository with the committed table, beside a ../shared/datasets with the folders prepare looks for."""
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "fastcore_ops" / "kernels").mkdir(parents=True)
    (repo / "fastcore_ops" / "kernels" / "tuned_configs.json").write_text("{}\n")
    for folder in ("cifar10-jpeg/train", "cifar10-jpeg/test", "imagenet-sample"):
        (tmp_path / "shared" / "datasets" / folder).mkdir(parents=True)
    (tmp_path / "shared" / "datasets" / "README.md").write_text("the images")
    return repo


@pytest.fixture
def stubs(tmp_path: Path) -> dict[str, str]:
    """The environment of a run with python3 and nvidia-smi stubbed, its compile cache and temporary files kept
    under tmp_path."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "python3").write_text(STUB_PYTHON)
    (bin_folder / "nvidia-smi").write_text("#!/bin/sh\necho 'Stub GPU, 1.0, 1 MiB'\n")
    (bin_folder / "python3.12").write_text(STUB_COMPILE_PYTHON)
    for stub in bin_folder.iterdir():
        stub.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    return {"PATH": f"{bin_folder}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "calls.log"),
            "STUB_KERNELS": "blurpool2d,bce_with_logits", "LENT_GPU_CACHE": str(tmp_path / "cache"),
            "TMPDIR": str(tmp_path / "tmp"), "RUN_SECONDS": "585", "LENT_GPU_PYTHON": str(bin_folder / "python3.12"),
            "STUB_VERSIONS": "3 12 3.6.0", "STUB_TRITON_KEY": "stubkey"}


def _plan(result: subprocess.CompletedProcess) -> list[tuple[str, int, str]]:
    return [(name, int(seconds), output) for name, seconds, output
            in re.findall(r"^ +\d+\. (\w+) +(\d+) s  -> (\S+)", result.stdout, re.MULTILINE)]


@pytest.mark.parametrize("seconds", [None, "120", "300", "585", "0900"])
def test_the_plan_lists_every_step_in_order_within_run_seconds(checkout: Path, seconds: str | None):
    result = _run(checkout, "plan", env={"RUN_SECONDS": seconds} if seconds else None)
    assert result.returncode == 0, result.stderr
    plan = _plan(result)
    assert [name for name, _, _ in plan] == STEPS
    assert all(budget > 0 for _, budget, _ in plan)
    assert sum(budget for _, budget, _ in plan) <= int(seconds or 585)
    assert {output for _, _, output in plan} | {"steps.jsonl"} == OUTPUTS


@pytest.mark.parametrize("command", [("plan",), ("run", "out")])
@pytest.mark.parametrize("seconds", ["abc", "119", "-5", "1.5"])
def test_a_bad_run_seconds_is_refused(checkout: Path, command: tuple[str, ...], seconds: str):
    _refused(_run(checkout, *command, env={"RUN_SECONDS": seconds}), f"RUN_SECONDS={seconds}: give a whole number")
    assert not (checkout / "out").exists()


def test_prepare_refuses_to_replace_a_carry_folder_it_did_not_write(checkout: Path):
    theirs = checkout / ".gpu-carry" / "notes.txt"
    theirs.parent.mkdir()
    theirs.write_text("someone's notes")
    before = _snapshot(checkout)
    result = _run(checkout, "prepare")
    _refused(result, "error: .gpu-carry exists and was not written by tools/lent_gpu.sh")
    assert _snapshot(checkout) == before


@pytest.mark.parametrize("args", [(), ("prepare", "extra"), ("prepare", "--cache"), ("prepare", "--cach", "x"),
                                  ("plan", "extra"), ("run",), ("run", "a", "b"), ("unknown",)])
def test_bad_usage_is_one_error_line_and_exit_2(checkout: Path, args: tuple[str, ...]):
    before = _snapshot(checkout)
    _refused(_run(checkout, *args), "error: usage: tools/lent_gpu.sh")
    assert _snapshot(checkout) == before


def test_run_without_prepared_wheels_says_what_to_do(checkout: Path):
    out = checkout / "out"
    result = _run(checkout, "run", str(out))
    _refused(result, "run tools/lent_gpu.sh prepare here and carry .gpu-carry")
    assert not out.exists()


def test_run_refuses_an_out_folder_with_files_and_bad_kernel_lists(checkout: Path, tmp_path: Path):
    (checkout / ".gpu-carry" / "wheels").mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    _refused(_run(checkout, "run", str(out)), "holds files that tools/lent_gpu.sh run did not write")
    _refused(_run(checkout, "run", str(out / "mine.txt")), "is a file, not a folder")
    assert [p.name for p in out.iterdir()] == ["mine.txt"] and (out / "mine.txt").read_text() == "mine"
    _refused(_run(checkout, "run", str(tmp_path / "new"), env={"RETUNE_KERNELS": "blurpool2d;rm"}),
             "RETUNE_KERNELS=blurpool2d;rm: kernel names and commas alone")
    _refused(_run(checkout, "run", str(tmp_path / "new"), env={"TIME_KERNELS": "ghost_batch_norm,"}),
             "TIME_KERNELS=ghost_batch_norm,: kernel names and commas alone")
    _refused(_run(checkout, "run", str(tmp_path / "new"), env={"RETUNE_ALL": "yes"}),
             "RETUNE_ALL=yes: 1 (tune every key met) or 0")
    assert not (tmp_path / "new").exists()


def _not_a_cache(tmp_path: Path, which: str) -> Path:
    if which == "missing":
        return tmp_path / "missing.tar.xz"
    if which == "folder":
        return tmp_path
    if which == "others":
        return _cache_tarball(tmp_path / "others.tar.gz", {"triton/a": b"", "home/.bashrc": b""})
    path = tmp_path / f"{which}.tar.xz"
    if which == "big":  # more than run ever brings back (sparse: no time spent writing it)
        with open(path, "wb") as f:
            f.truncate(15 * 1024 * 1024 + 1)
    else:
        path.write_text("not a tarball")
        if which == "unreadable":
            path.chmod(0)
    return path


@pytest.mark.parametrize("which, message", [
    ("missing", "not a file this script can read"), ("folder", "not a file this script can read"),
    pytest.param("unreadable", "not a file this script can read",
                  marks=pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")),
    ("text", "not a tar file"), ("big", "15728641 bytes, more than a run brings back"),
    ("others", "holds more than triton/ and inductor/")])
def test_prepare_refuses_a_cache_it_cannot_carry_and_writes_nothing(checkout: Path, tmp_path: Path, which: str,
                                                                    message: str):
    cache = _not_a_cache(tmp_path, which)
    before = _snapshot(checkout)
    _refused(_run(checkout, "prepare", "--cache", str(cache)), f"--cache {cache}: {message}")
    assert _snapshot(checkout) == before


def test_prepare_carries_the_cache_beside_the_wheels_and_images(checkout: Path, tmp_path: Path, stubs: dict):
    datasets = tmp_path / "shared" / "datasets"
    (datasets / "README.md").write_text("the images")
    for folder in ("cifar10-jpeg/train/cat", "cifar10-jpeg/test/cat", "imagenet-sample/n01"):
        (datasets / folder).mkdir(parents=True)
        (datasets / folder / "1.jpg").write_bytes(b"jpeg")
    cache = _cache_tarball(tmp_path / CACHE, {"triton/k/kernel.cubin": b"sass"})
    result = _run(checkout, "prepare", "--cache", str(cache), env=stubs)
    assert result.returncode == 0, result.stderr
    carry = checkout / ".gpu-carry"
    assert (carry / "compile-cache.tar").read_bytes() == cache.read_bytes()
    assert (carry / "wheels" / "stub-1.0-py3-none-any.whl").exists()
    assert (carry / "datasets" / "cifar10-jpeg" / "test" / "cat" / "1.jpg").exists()
    # Again without --cache: the folder it wrote is replaced, the cache with it.
    assert _run(checkout, "prepare", env=stubs).returncode == 0
    assert not (carry / "compile-cache.tar").exists() and (carry / ".written-by-lent_gpu").exists()
    # Its marker lists every file it wrote (by SHA-256) and every folder, and nothing else.
    listed = (carry / ".written-by-lent_gpu").read_text().splitlines()[1:]
    assert sorted(line.split("  ", 1)[1] for line in listed) == sorted(
        str(path.relative_to(carry)) for path in carry.rglob("*") if path.name != ".written-by-lent_gpu")


def _prepared(checkout: Path, tmp_path: Path, stubs: dict, *args: str) -> Path:
    """The .gpu-carry a prepare (with ``args``) wrote, from a ../shared/datasets of one image a split and class."""
    datasets = tmp_path / "shared" / "datasets"
    for folder in ("cifar10-jpeg/train/cat", "cifar10-jpeg/test/cat", "imagenet-sample/n01"):
        (datasets / folder).mkdir(parents=True, exist_ok=True)
        (datasets / folder / "1.jpg").write_bytes(b"jpeg")
    result = _run(checkout, "prepare", *args, env=stubs)
    assert result.returncode == 0, result.stderr
    return checkout / ".gpu-carry"


def _foreign_carry(carry: Path, how: str) -> None:
    """``carry``, as prepare wrote it or made by hand, with someone's file or change in it."""
    if how == "their-marker":  # made by hand, marked as a guess at the script's marker
        shutil.rmtree(carry)
        (carry / "wheels").mkdir(parents=True)
        (carry / "wheels" / "mine.whl").write_bytes(b"my wheel")
        (carry / ".written-by-lent_gpu").touch()
    elif how == "a-marker-listing-their-file":
        (carry / "notes.txt").write_text("someone's notes")
        with open(carry / ".written-by-lent_gpu", "a") as marker:  # listed, but not in prepare's own form
            marker.write("0" * 64 + "  ../notes.txt\n")
    elif how == "their-file-beside":
        (carry / "datasets" / "notes.txt").write_text("someone's notes")
    elif how == "their-folder-beside":
        (carry / "mine").mkdir()
    elif how == "a-file-changed":
        (carry / "datasets" / "cifar10-jpeg" / "test" / "cat" / "1.jpg").write_bytes(b"edited")
    elif how == "a-link":
        (carry / "wheels" / "elsewhere").symlink_to(carry.parent.parent / "shared")
    elif how == "a-link-to-it":
        carry.rename(carry.parent.parent / "theirs")
        carry.symlink_to(carry.parent.parent / "theirs")


@pytest.mark.parametrize("how", ["their-marker", "a-marker-listing-their-file", "their-file-beside",
                                 "their-folder-beside", "a-file-changed", "a-link", "a-link-to-it"])
def test_prepare_replaces_only_a_carry_holding_nothing_but_what_it_wrote(checkout: Path, tmp_path: Path,
                                                                         stubs: dict, how: str):
    """A .gpu-carry with anything prepare did not write in it, or changed since, is refused: one error line, and
    nothing anywhere changed (no file deleted, and not the checkout's .git/info/exclude either)."""
    carry = _prepared(checkout, tmp_path, stubs)
    _foreign_carry(carry, how)
    before = _tree(tmp_path)
    result = _run(checkout, "prepare", env=stubs)
    _refused(result, "error: .gpu-carry")
    assert "move it away and run prepare again" in result.stderr
    assert _tree(tmp_path) == before


def test_prepare_compile_carries_this_checkouts_kernels_and_the_triton_build_that_made_them(
        checkout: Path, tmp_path: Path, stubs: dict):
    for _ in range(2):  # the second time, the compile cache's folder is the one the first made
        carry = _prepared(checkout, tmp_path, stubs, "--compile")
        with tarfile.open(carry / "compile-cache.tar") as tar:
            assert tar.getnames() == ["triton", "triton/k", "triton/k/__grp__kernel.json"]
        assert (carry / "triton-key").read_text() == "stubkey\n"
        listed = (carry / ".written-by-lent_gpu").read_text()
        assert "  compile-cache.tar\n" in listed and "  triton-key\n" in listed
    assert f"compile -m benchmarks.kernels.precompile --cache {tmp_path}/cache/triton" in (
        tmp_path / "calls.log").read_text()


@pytest.mark.parametrize("how, message", [
    ("another-python", "runs Python and Triton 3 11 3.6.0, the lease 3.12 and 3.6.0"),
    ("no-python", "no Python with Triton at"),
    ("their-cache-folder", "cache exists and was not made by tools/lent_gpu.sh prepare --compile"),
])
def test_prepare_compile_refuses_another_python_and_a_cache_folder_it_did_not_make(
        checkout: Path, tmp_path: Path, stubs: dict, how: str, message: str):
    if how == "another-python":
        stubs = stubs | {"STUB_VERSIONS": "3 11 3.6.0"}
    elif how == "no-python":
        stubs = stubs | {"LENT_GPU_PYTHON": str(tmp_path / "none")}
    else:
        (tmp_path / "cache").mkdir()
        (tmp_path / "cache" / "notes.txt").write_text("someone's")
    before = _tree(tmp_path)
    _refused(_run(checkout, "prepare", "--compile", env=stubs), message)
    assert {**_tree(tmp_path), "calls.log": ANY_BYTES} == {**before, "calls.log": ANY_BYTES}  # the stub's log aside


def test_prepare_takes_an_empty_carry_folder(checkout: Path, tmp_path: Path, stubs: dict):
    (checkout / ".gpu-carry").mkdir()
    assert _prepared(checkout, tmp_path, stubs) / "wheels" / "stub-1.0-py3-none-any.whl"


@pytest.mark.parametrize("how", ["their-file", "hidden-file", "their-marker-file", "link-to-nothing", "dash-name",
                                 "run.log-a-folder", "run.log-a-link"])
def test_run_refuses_an_out_it_did_not_take_and_touches_nothing(checkout: Path, tmp_path: Path, stubs: dict,
                                                                how: str):
    """OUT may be new, empty, or one an earlier run marked; anything else is one error line and nothing touched."""
    (checkout / ".gpu-carry" / "wheels").mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    if how == "their-file":
        (out / "machine.txt").write_text("my machine")
    elif how == "hidden-file":
        (out / ".run.log.tmp").write_text("mine")
    elif how == "their-marker-file":  # the marker is a folder: a file of that name is someone else's
        (out / OUT_MARKER).write_text("")
        (out / "run.log").write_text("my log")
    elif how == "link-to-nothing":
        out.rmdir()
        out.symlink_to(tmp_path / "nowhere")
    elif how == "dash-name":
        out = checkout / "-out"
        out.mkdir()
        (out / "machine.txt").write_text("my machine")
    else:  # in an OUT a run took, a link or folder where a run's file goes is not that run's
        (out / OUT_MARKER).mkdir()
        if how == "run.log-a-folder":
            (out / "run.log").mkdir()
            (out / "run.log" / "mine.txt").write_text("mine")
        else:
            (out / "run.log").symlink_to(tmp_path / "shared" / "datasets" / "README.md")
    before = _tree(tmp_path)
    result = _run(checkout, "run", out.name if how == "dash-name" else str(out), env=stubs)
    _refused(result, "pass an empty or new folder")
    assert _tree(tmp_path) == before


def test_run_again_in_its_own_out_replaces_its_files_alone(checkout: Path, tmp_path: Path, stubs: dict):
    """A second run into the OUT of the first replaces that run's files (no two runs mixed in one file) and keeps
    every other file there."""
    (checkout / ".gpu-carry" / "wheels").mkdir(parents=True)
    out = tmp_path / "out"
    assert _run(checkout, "run", str(out), env=stubs).returncode == 0
    (out / "notes.txt").write_text("my notes on the first run")
    (out / "ubuntu.iso.partial").write_text("a download of mine")
    (out / "correctness.json.partial").write_text("a part stopped mid-write")
    result = _run(checkout, "run", str(out), env=stubs | {"TIME_KERNELS": "bce_with_logits"})
    assert result.returncode == 0, result.stderr
    assert (out / "notes.txt").read_text() == "my notes on the first run"
    assert (out / "ubuntu.iso.partial").read_text() == "a download of mine"
    assert {path.name for path in out.iterdir() if path.is_file()} == OUTPUTS | {"notes.txt", "ubuntu.iso.partial"}
    steps = [json.loads(line)["step"] for line in (out / "steps.jsonl").read_text().splitlines()]
    assert steps.count("setup") == 1
    # TIME_KERNELS: the second run timed that kernel alone.
    assert [json.loads(line)["kernel"] for line in (out / "kernels.jsonl").read_text().splitlines()] == [
        "bce_with_logits"]


@pytest.mark.parametrize("compiled_here", [False, True], ids=["cache-from-the-last-lease", "prepare-compile"])
def test_run_follows_its_plan_and_writes_only_out_and_the_compile_cache(checkout: Path, tmp_path: Path, stubs: dict,
                                                                         compiled_here: bool):
    carry = checkout / ".gpu-carry"
    (carry / "wheels").mkdir(parents=True)
    (carry / ".written-by-lent_gpu").touch()
    _cache_tarball(carry / "compile-cache.tar", {"triton/carried": b"from the last lease",  # gzipped
                                                 "triton/old/__grp__kernel.json": b"{}"})
    if compiled_here:
        (carry / "triton-key").write_text("stubkey\n")
    before = _snapshot(tmp_path, leave_out=("cache", "tmp"))
    out = tmp_path / "out"
    result = _run(checkout, "run", str(out), env=stubs)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(_run(checkout, "plan").stdout)  # the plan first

    calls = [line.split()[1] + (" " + line.split("--kernels ")[1].split()[0] if "--kernels" in line else "")
             for line in (tmp_path / "calls.log").read_text().splitlines() if line.startswith("-m ")]
    assert calls == ["pip", "benchmarks.gpu_check.part",
                     "benchmarks.kernels.retune blurpool2d", "benchmarks.kernels.retune bce_with_logits",
                     "benchmarks.kernels blurpool2d", "benchmarks.kernels bce_with_logits", "pytest"]
    retunes = [line for line in (tmp_path / "calls.log").read_text().splitlines() if "kernels.retune" in line]
    assert all("--only-new" in line for line in retunes)  # the keys the table lacks (RETUNE_ALL=1: every key)
    table = json.loads((out / "tuned_configs.json").read_text())
    assert table == {"retuned": {"bce_with_logits": {}}}  # the stub's retune writes its kernel's alone
    assert (tmp_path / "calls.log").read_text().count(f"table in use: {json.dumps(table)}") == 2
    assert "binary only: 1" in (tmp_path / "calls.log").read_text()  # the cache without the kernels' IRs

    # At most 8 files come back from the device tool; the folder marking OUT as this script's is empty.
    assert {path.name for path in out.iterdir() if path.is_file()} == OUTPUTS
    assert [path.name for path in out.iterdir() if not path.is_file()] == [OUT_MARKER]
    assert not list((out / OUT_MARKER).iterdir())
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [(step["step"], step["what"]) for step in steps][-2:] == [("cache", "triton"), ("cache", "triton inductor")]
    assert [step["step"] for step in steps][:-2] == ["setup", "correctness", "retune", "retune", "timing", "timing",
                                                     "pytest"]
    assert all(step["status"] == "ok" and step["at_s"] <= 585 for step in steps)
    assert [json.loads(line)["kernel"] for line in (out / "kernels.jsonl").read_text().splitlines()] == [
        "blurpool2d", "bce_with_logits"]
    assert json.loads((out / "correctness.json").read_text())["rows"][0]["passed"] is True
    assert "1 passed" in (out / "pytest.log").read_text()
    log = (out / "run.log").read_text()
    assert ("compiled by this Triton build and ptxas (stubkey)" in log) == compiled_here
    assert "kernels: 1 carried, 1 compiled by this run" in log
    with tarfile.open(out / CACHE) as tar:  # what this run compiled, and the carried cache unless made here
        names = set(tar.getnames())
    carried = {"triton/carried", "triton/old", "triton/old/__grp__kernel.json"}
    assert {"triton/compiled-by-correctness", "triton/new/__grp__kernel.json"} <= names
    assert names & carried == (set() if compiled_here else carried)

    # The committed table is back, .gpu-carry untouched, the temporary folder gone; only OUT and the cache are new.
    assert _snapshot(tmp_path, leave_out=("cache", "tmp", "out")) == {**before, "calls.log": ANY_BYTES}
    assert not list((tmp_path / "tmp").iterdir())


def _late_run(checkout: Path, tmp_path: Path, stubs: dict, started_at: int) -> dict[str, dict]:
    """A run of 120 s that starts ``started_at`` s late (bash takes SECONDS from the environment), its pytest stub
    sleeping 30 s; its steps.jsonl by step (the last line of each)."""
    (checkout / ".gpu-carry" / "wheels").mkdir(parents=True)
    python3 = Path(stubs["PATH"].split(":")[0]) / "python3"
    python3.write_text(python3.read_text().replace('echo "1 passed" ;;', 'echo started; sleep 30 ;;'))
    out = tmp_path / "out"
    result = _run(checkout, "run", str(out), env=stubs | {"RUN_SECONDS": "120", "SECONDS": str(started_at)})
    assert result.returncode == 0, result.stderr
    assert (out / CACHE).exists()  # packed in the time kept for it
    return {step["step"]: step for step in map(json.loads, (out / "steps.jsonl").read_text().splitlines())}


def test_a_run_short_of_time_skips_steps_but_still_packs_the_cache(checkout: Path, tmp_path: Path, stubs: dict):
    steps = _late_run(checkout, tmp_path, stubs, started_at=92)  # 3 s left before the cache's 25
    assert all(steps[name]["status"] == "skipped" for name in ("correctness", "retune", "timing", "pytest"))
    assert steps["cache"]["status"] == "ok" and steps["cache"]["at_s"] <= 120
    assert not (tmp_path / "out" / "tuned_configs.json").exists()


def test_a_step_that_outlives_its_limit_is_stopped_and_the_run_goes_on(checkout: Path, tmp_path: Path, stubs: dict):
    steps = _late_run(checkout, tmp_path, stubs, started_at=88)  # 7 s left before the cache's 25
    assert steps["retune"]["status"] == "ok" and steps["pytest"]["status"] == "stopped at its budget"
    assert steps["pytest"]["limit_s"] <= 7 and steps["cache"]["status"] == "ok" and steps["cache"]["at_s"] <= 120
    assert "started" in (tmp_path / "out" / "pytest.log").read_text()


def test_benchmark_appends_each_row_as_it_is_measured(tmp_path: Path, monkeypatch):
    """--jsonl: one line per case, written before the next case is measured."""
    from benchmarks.kernels import __main__ as kernels
    from benchmarks.kernels import runner

    jsonl = tmp_path / "rows.jsonl"
    lines_seen = []

    def measure(case, device, time_ours):
        lines_seen.append(len(jsonl.read_text().splitlines()) if jsonl.exists() else 0)
        return {"kernel": case.kernel, "size": case.size, "fwd_bwd_traffic_ratio": 2.0}

    monkeypatch.setattr(runner, "measure", measure)
    monkeypatch.setattr(runner, "plot_speedups", lambda rows, on_gpu, path: None)
    assert kernels.main(["--device", "cpu", "--batch-size", "1", "--kernels", "blur_maxpool2d",
                         "--out", str(tmp_path / "out"), "--jsonl", str(jsonl)]) == 0
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert lines_seen == list(range(len(rows))) and len(rows) >= 2
    assert all(row["kernel"] == "blur_maxpool2d" and row["dtype"] == "torch.float32" for row in rows)


def test_benchmark_refuses_a_jsonl_it_cannot_append_to(tmp_path: Path, capsys):
    from benchmarks.kernels.__main__ import main

    assert main(["--device", "cpu", "--kernels", "bce_with_logits", "--out", str(tmp_path / "out"),
                 "--jsonl", str(tmp_path / "missing" / "rows.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --jsonl ") and err.count("\n") == 1 and "must be a file in an existing folder" in err
    assert not (tmp_path / "out").exists()


def test_failures_print_their_traceback_as_they_happen_when_asked():
    """tools/lent_gpu.sh's pytest step may be stopped at its budget before pytest's summary: each failure's
    traceback then comes as it happens (the root conftest's _TracebacksAtOnce)."""
    from types import SimpleNamespace

    import conftest

    lines = []
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: SimpleNamespace(
        write_line=lines.append)))
    plugin = conftest._TracebacksAtOnce(config)
    plugin.pytest_runtest_logreport(SimpleNamespace(failed=True, nodeid="t.py::x", when="call", longreprtext="E boom"))
    plugin.pytest_runtest_logreport(SimpleNamespace(failed=False, nodeid="t.py::y", when="call", longreprtext=""))
    assert lines == ["--- t.py::x failed (call):\nE boom"]
    assert "FASTCORE_OPS_TRACEBACKS_AT_ONCE=1 attempt pytest" in SCRIPT.read_text()


def test_the_lease_s_pytest_m_gpu_leaves_out_the_kernel_tests_that_run_on_the_cpu_alone():
    """Its minutes go to the tests a GPU runs: the modules marked cpu_alone (fake GPUs and targets, host costs) are
    not marked gpu (tests/conftest.py), while the kernels' own tests are."""
    modules = ["tests/kernels/test_signatures.py", "tests/kernels/test_launches.py", "tests/kernels/test_bce.py"]
    result = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p",
                             "no:cacheprovider", *modules], cwd=SCRIPT.parents[1], capture_output=True, text=True)
    collected = {line.split("::")[0] for line in result.stdout.splitlines() if "::" in line}
    assert collected == {"tests/kernels/test_bce.py"}, result.stdout[-2000:]
