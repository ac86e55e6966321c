#!/usr/bin/env bash
# The GPU work for a lent GPU machine (Python 3.12, torch and Triton installed, no network, no dataset, nothing of
# this project installed), prepared here and run there in one call of the device tool.
#
#   tools/lent_gpu.sh prepare [--cache FILE | --compile]
#                                             # here: .gpu-carry/ with the wheels the suite needs beyond that
#                                             # machine's packages, a subset of ../shared/datasets and, with
#                                             # --cache, the compile cache the last run brought back; with
#                                             # --compile, the kernels of this checkout compiled here for it
#   tools/lent_gpu.sh plan                    # anywhere: the steps of `run`, their budgets and output files
#   tools/lent_gpu.sh run OUT                 # there, from the repository root, with .gpu-carry carried
#
# `run` prints the plan, then runs its steps in the order of their value per second, each stopped at its budget:
# setup, the GPU check's correctness part, retune (every autotune config alone, one kernel at a time: the table
# for fastcore_ops/kernels/tuned_configs.json), timing (python -m benchmarks.kernels, kernel by kernel, with the
# retuned table in use), pytest -m gpu in the time left, and the compile cache packed for the next lease. Each
# step's console goes to OUT as it comes and each measurement as it finishes, so a run cut short keeps what it
# did. It writes at most 7 files, as the device tool brings back at most 8 (`plan` names them), and ends within
# RUN_SECONDS (default 585, at least 120) of its start: give the device tool a timeout_s 10 s above it.
#
# RETUNE_KERNELS=a,b (default: every kernel, in benchmarks/kernels/registry.py's order) retunes those kernels
# alone, in that order: the table's other entries stay, so leases can share the retuning. Only the keys the table
# lacks are tuned (retune --only-new); RETUNE_ALL=1 tunes every key met, for a kernel whose code changed under keys
# the table holds. Here, `python -m
# benchmarks.kernels.retune --missing --out fastcore_ops/kernels/tuned_configs.json` names the kernels whose
# benchmark keys the table lacks. TIME_KERNELS=a,b times
# those alone, each then with a larger share of the timing step (the goals command merges rows across runs).
#
# Then, here: `python -m benchmarks.kernels.goals OUT/kernels.jsonl --out DIR` judges every kernel's goals on the
# rows, on eager and on device time (reports/lent-gpu-h200-20261204), and `python -m benchmarks.kernels.faster_rivals
# OUT/kernels.jsonl --out fastcore_ops/kernels/faster_rivals.json` sends the public functions to their rivals where
# those were faster on the device.
#
# Between leases: the compile cache comes back as OUT/compile-cache.tar.xz (.tar.gz where there is no xz);
# `prepare --cache PATH/compile-cache.tar.xz` puts it in .gpu-carry, and `run` unpacks it where Triton and
# Inductor look, so the next lease starts warm. Triton finds a kernel there only if its source is unchanged:
# `prepare --compile` instead compiles this checkout's kernels here, with the lease's Python and Triton
# (`make .venv-lent-compile/.installed`; LENT_GPU_PYTHON names another), for every call the run makes
# (`python -m benchmarks.kernels.precompile`, about half an hour on 2 cores), and carries that. `run` says whether
# the carried cache was made by its Triton build and ptxas and how many kernels it still compiled, and brings back
# those alone (with Inductor's cache), as the carried ones are made again here.
#
# What it may replace (a refusal is one `error:` line and exit 2, before anything is changed): `run` takes an OUT
# that is new, empty, or taken by an earlier `run` (an empty folder .fastcore_ops-lent_gpu in it marks it), and in
# that one replaces only the files a run writes. `prepare` replaces a .gpu-carry only when it is empty or holds
# nothing but what an earlier prepare wrote, unchanged, as its .written-by-lent_gpu lists it (each file by path and
# SHA-256, each folder by path). `prepare --compile` replaces the compile folder ($cache_root below) only when it
# is absent or holds the .written-by-lent_gpu an earlier prepare --compile left in it.
set -euo pipefail
carry=.gpu-carry
# The list of what prepare wrote in .gpu-carry: this line, then `sha256sum`'s line for each file and
# "folder  PATH" for each folder.
marker_name=.written-by-lent_gpu
marker=$carry/$marker_name
carry_header="# written by tools/lent_gpu.sh prepare, which replaces these and nothing else (SHA-256 or folder, path)"
# OUT's mark that `run` took it: an empty folder, so that OUT's files stay the 7 that come back (see `plan`).
out_marker=.fastcore_ops-lent_gpu
# xz where there is one: half gzip's size on Triton's cubins (202 kernels built for sm_90 here: 2.0 MB, gzip 4.7).
if command -v xz > /dev/null; then
    cache_name=compile-cache.tar.xz compress=-J
else
    cache_name=compile-cache.tar.gz compress=-z
fi
# As carried, compressed as it came back: tar tells xz from gzip when it reads it.
carried_cache=$carry/compile-cache.tar
# The device tool brings back files of at most 16 MiB; 1 MiB spare.
cache_limit=$((15 * 1024 * 1024))
# And carries 64 MiB, this checkout's tracked files (14 MiB) and the images (11 MiB) with it.
compiled_limit=$((32 * 1024 * 1024))
# The lease's Python and Triton (docs/benchmarks.md): Triton keys a compiled kernel on its own build, which differs
# from one Python version to the next, so prepare --compile refuses any other.
lease_python=3.12 lease_triton=3.6.0
compile_python=${LENT_GPU_PYTHON:-.venv-lent-compile/bin/python}
# A digest of the Triton build's own key and of the version of the ptxas it compiles sm_90 with, both part of every
# compiled kernel's: carried with them, and compared by run.
triton_key='import hashlib, triton.runtime.cache as c, triton.backends.nvidia.compiler as n
print(hashlib.sha256((c.triton_key() + n.get_ptxas_version(90)).encode()).hexdigest())'
carried_key=$carry/triton-key
# Where Triton and Inductor keep what they compile during `run`. A fixed path, not a temporary folder: Triton's
# cache entries name their files by absolute path, so a carried cache is found only where it was made.
# LENT_GPU_CACHE moves it (the tests do).
cache_root=${LENT_GPU_CACHE:-/tmp/fastcore_ops-lent_gpu-cache}
table=fastcore_ops/kernels/tuned_configs.json
usage="usage: tools/lent_gpu.sh prepare [--cache FILE | --compile] | plan | run OUT"

refuse() {
    echo "error: $*" >&2
    exit 2
}

# The steps, in the order they run, with their budgets in seconds from RUN_SECONDS. Setup and packing the cache
# cost about the same whatever the total; the rest goes by value per second: correctness first (cheap, and it
# says whether anything else is worth reading), retune next (the table only a GPU can make), then the timing that
# needs the table, then pytest, which also takes whatever the steps before it leave.
steps=(setup correctness retune timing pytest cache)
declare -A budget outputs what
outputs=([setup]=run.log [correctness]=correctness.json [retune]=tuned_configs.json [timing]=kernels.jsonl
         [pytest]=pytest.log [cache]=$cache_name)
# The files a run may leave in OUT, and so replace in an OUT an earlier run took: its outputs (the cache by either
# name), and the temporary files a run cut short can leave beside them.
out_files=()
for name in run.log steps.jsonl correctness.json tuned_configs.json kernels.jsonl pytest.log \
        compile-cache.tar.xz compile-cache.tar.gz; do
    out_files+=("$name" ".$name.tmp" "$name.partial")
done
what=([setup]="the machine, the carried wheels and test images, the carried compile cache unpacked"
      [correctness]="the GPU check's correctness part: every kernel against its reference (fp32, fp16, bf16)"
      [retune]="python -m benchmarks.kernels.retune --only-new, one kernel at a time (the table written after each)"
      [timing]="python -m benchmarks.kernels with the retuned table, kernel by kernel (device-time columns)"
      [pytest]="pytest -m gpu, in the budget and whatever the steps before it left"
      [cache]="Triton's and Inductor's compile caches for the next lease (prepare --cache)")
plan_budgets() {
    local seconds=${RUN_SECONDS:-585}
    [[ $seconds =~ ^[0-9]{1,6}$ ]] && (( 10#$seconds >= 120 )) \
        || refuse "RUN_SECONDS=$seconds: give a whole number of seconds, at least 120"
    total=$((10#$seconds))
    local rest=$((total - 45))
    budget=([setup]=20 [correctness]=$((rest * 12 / 100)) [retune]=$((rest * 33 / 100))
            [timing]=$((rest * 30 / 100)) [cache]=25)
    budget[pytest]=$((rest - budget[correctness] - budget[retune] - budget[timing]))
}

print_plan() {
    echo "plan: ${#steps[@]} steps in at most $total s (RUN_SECONDS), each stopped at its budget (setup's commands at"
    echo "      theirs, up to 60 s each); what a step leaves or overruns goes to or comes out of pytest's time"
    local i=1 step
    for step in "${steps[@]}"; do
        printf '%3d. %-12s %4d s  -> %-22s %s\n' "$i" "$step" "${budget[$step]}" "${outputs[$step]}" "${what[$step]}"
        i=$((i + 1))
    done
    echo "     every step -> run.log (its console, as it comes) and steps.jsonl (one line as each command ends)"
}

# Log lines of `run`: on the console and in OUT/run.log.
say() {
    echo "$*" | tee -a "$out/run.log"
}

# One line of steps.jsonl: what ran, how it ended, its time and its limit.
record() {  # record STEP WHAT STATUS EXIT SECONDS LIMIT
    printf '{"step": "%s", "what": "%s", "status": "%s", "exit": %d, "seconds": %d, "limit_s": %d, "at_s": %d}\n' \
        "$@" "$SECONDS" >> "$out/steps.jsonl"
}

# One command of a step within LIMIT seconds, its console appended line by line to LOG (and shown), its end a
# line of steps.jsonl. It never fails the script: the next command runs whatever this one did. Sets `ended`.
attempt() {  # attempt STEP WHAT LIMIT LOG COMMAND...
    local step=$1 name=$2 limit=$3 log=$4 started=$SECONDS rc=0
    shift 4
    if ((limit < 5)); then
        say "-- $step $name: skipped, $limit s left for it"
        record "$step" "$name" skipped 0 0 "$limit"
        ended=skipped
        return 0
    fi
    say "-- $step $name: at most $limit s, from $SECONDS s"
    # -k: a command that outlives its TERM by 5 s is killed, so no step runs on into the next one's time.
    timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$log" || rc=$?
    case $rc in
        0) ended=ok ;;
        124 | 137) ended="stopped at its budget" ;;
        *) ended=failed ;;
    esac
    say "-- $step $name: $ended (exit $rc) in $((SECONDS - started)) s"
    record "$step" "$name" "$ended" "$rc" "$((SECONDS - started))" "$limit"
}

# The seconds STEP may take now: its budget, but never the cache's time at the end. Sets `limit`.
limit_for() {
    local left=$((total - SECONDS - budget[cache]))
    limit=$((budget[$1] < left ? budget[$1] : left))
}

# FILE copied into OUT as NAME whole or not at all: a run cut short mid-copy leaves the last whole version.
install() {  # install FILE NAME
    cp "$1" "$out/.$2.tmp" && mv -f "$out/.$2.tmp" "$out/$2"
}

# How many kernels Triton's cache folder holds: one group file each.
kernels_cached() {
    find "$TRITON_CACHE_DIR" -name '__grp__*' 2> /dev/null | wc -l
}

# A name for the refusals: one line, odd characters shown as '?'.
shown() {
    echo "${1//[^[:print:]]/?}"
}

# Refuses unless .gpu-carry is absent, empty, or holds nothing but what an earlier prepare wrote, unchanged, as its
# marker lists it: the one folder prepare may delete. Changes nothing.
check_carry() {
    [ -e "$carry" ] || [ -L "$carry" ] || return 0
    local not_ours="$carry exists and was not written by tools/lent_gpu.sh" fix="move it away and run prepare again"
    local line path entry name='[A-Za-z0-9_+-][A-Za-z0-9_.+-]*' lines entries hashes files=0
    local -A listed=() folders=()
    [ ! -L "$carry" ] || refuse "$not_ours (it is a link); $fix"
    [ -d "$carry" ] || refuse "$not_ours (it is not a folder); $fix"
    [ -n "$(find "$carry" -mindepth 1 -maxdepth 1 -print -quit)" ] || return 0
    { [ -f "$marker" ] && [ ! -L "$marker" ] && [ -r "$marker" ]; } || refuse "$not_ours (it has no $marker_name); $fix"
    mapfile -t lines < "$marker"
    [ "${lines[0]:-}" = "$carry_header" ] || refuse "$not_ours (its $marker_name is not one prepare wrote); $fix"
    for line in "${lines[@]:1}"; do
        # A path under the folder, in plain characters: no absolute path, no '..', nothing sha256sum escapes.
        [[ $line =~ ^([0-9a-f]{64}|folder)\ \ ($name(/$name)*)$ ]] && [ "${BASH_REMATCH[2]}" != "$marker_name" ] \
            || refuse "$not_ours (its $marker_name is not one prepare wrote); $fix"
        if [ "${BASH_REMATCH[1]}" = folder ]; then
            folders[${BASH_REMATCH[2]}]=1
        else
            listed[${BASH_REMATCH[2]}]=${BASH_REMATCH[1]}
        fi
    done
    # The files and folders it lists, nothing else: no link, no file or folder of someone else's.
    mapfile -d '' entries < <(find "$carry" -mindepth 1 -printf '%y %P\0' 2> /dev/null)
    for entry in "${entries[@]}"; do
        path=${entry:2}
        case ${entry:0:1} in
        f) [ "$path" = "$marker_name" ] || { [ -n "${listed[$path]+listed}" ] && files=$((files + 1)); } ;;
        d) [ -n "${folders[$path]+listed}" ] ;;
        *) false ;;
        esac || refuse "$carry holds $(shown "$path"), which tools/lent_gpu.sh prepare did not write; $fix"
    done
    # Each as prepare wrote it: one changed since is someone's work.
    mapfile -t hashes < <(cd "$carry" && find . -type f ! -path "./$marker_name" -printf '%P\0' 2> /dev/null \
                          | xargs -0 -r sha256sum -- 2> /dev/null)
    ((${#hashes[@]} == files)) || refuse "$carry: not every file in it can be read; $fix"
    for line in "${hashes[@]}"; do
        path=${line#*  }
        [ "${listed[$path]}" = "${line%%  *}" ] \
            || refuse "$carry/$path changed since tools/lent_gpu.sh prepare wrote it; $fix"
    done
}

# The marker of .gpu-carry: its header, then every file in it (all written by this prepare) with its SHA-256, and
# every folder.
list_carry() {
    local listing
    listing=$(cd "$carry" || exit 1
              find . -type f ! -path "./$marker_name" -printf '%P\0' | sort -z | xargs -0 -r sha256sum --
              find . -mindepth 1 -type d -printf 'folder  %P\n' | sort)
    { echo "$carry_header"; [ -z "$listing" ] || echo "$listing"; } > "$marker"
}

# Refuses unless OUT is new, empty, or taken by an earlier run (its marker) with only files where a run's files go.
# Changes nothing.
check_out() {
    local name
    if [ -L "$out" ] && [ ! -e "$out" ]; then
        refuse "$out is a link to nothing; pass an empty or new folder"
    fi
    [ -e "$out" ] || return 0
    [ -d "$out" ] || refuse "$out is a file, not a folder; pass an empty or new folder"
    [ -r "$out" ] && [ -w "$out" ] && [ -x "$out" ] \
        || refuse "$out: this script may not read and write in it; pass an empty or new folder"
    if [ -d "$out/$out_marker" ] && [ ! -L "$out/$out_marker" ]; then
        for name in "${out_files[@]}"; do
            if [ -L "$out/$name" ] || { [ -e "$out/$name" ] && [ ! -f "$out/$name" ]; }; then
                refuse "$out/$name is not a file a run wrote; move it away, or pass an empty or new folder"
            fi
        done
        return 0
    fi
    if [ -n "$(find "$out/" -mindepth 1 -maxdepth 1 -print -quit)" ]; then
        refuse "$out holds files that tools/lent_gpu.sh run did not write (it has no $out_marker);" \
            "pass an empty or new folder"
    fi
}

case "${1:-}" in
prepare)
    cache="" compile=""
    if [ $# -eq 3 ] && [ "$2" = --cache ]; then
        cache=$3
    elif [ $# -eq 2 ] && [ "$2" = --compile ]; then
        compile=yes
    elif [ $# -ne 1 ]; then
        refuse "usage: tools/lent_gpu.sh prepare [--cache FILE | --compile]"
    fi
    # Everything is checked before anything changes: a refused prepare leaves the checkout as it was.
    exclude=$(git rev-parse --git-path info/exclude 2> /dev/null) && [ -f "$table" ] \
        || refuse "not the root of this project's git checkout; run prepare there"
    datasets=../shared/datasets
    [ -d "$datasets/cifar10-jpeg/train" ] && [ -d "$datasets/cifar10-jpeg/test" ] \
        && [ -d "$datasets/imagenet-sample" ] && [ -f "$datasets/README.md" ] \
        || refuse "$datasets is missing; prepare runs beside the project's ../shared"
    if [ -n "$cache" ]; then
        [ -f "$cache" ] && [ -r "$cache" ] \
            || refuse "--cache $cache: not a file this script can read; pass the $cache_name a run brought back"
        size=$(stat -c %s "$cache")
        ((size <= cache_limit)) || refuse "--cache $cache: $size bytes, more than a run brings back ($cache_limit)"
        listing=$(tar -tf "$cache" 2>/dev/null) \
            || refuse "--cache $cache: not a tar file; pass the $cache_name a run brought back"
        # run unpacks it into the compile cache's folder: nothing else may come in with it.
        if grep -qvE '^(triton|inductor)(/|$)' <<< "$listing" || grep -qE '(^|/)\.\.(/|$)' <<< "$listing"; then
            refuse "--cache $cache: holds more than triton/ and inductor/; pass the $cache_name a run brought back"
        fi
    fi
    if [ -n "$compile" ]; then
        versions=$("$compile_python" -c 'import sys, triton; print(*sys.version_info[:2], triton.__version__)' \
                   2> /dev/null) \
            || refuse "no Python with Triton at $compile_python; make .venv-lent-compile/.installed"
        [ "$versions" = "${lease_python/./ } $lease_triton" ] || refuse "$compile_python runs Python and Triton" \
            "$versions, the lease $lease_python and $lease_triton: its kernels would not be found there"
        # The folder the run unpacks into, here: replaced only where an earlier prepare --compile made it.
        if [ -e "$cache_root" ] && [ ! -f "$cache_root/$marker_name" ]; then
            refuse "$cache_root exists and was not made by tools/lent_gpu.sh prepare --compile; move it away"
        fi
    fi
    # Replace only a folder this script wrote, never one of the same name made otherwise or added to since.
    check_carry
    mkdir -p "$(dirname "$exclude")"
    grep -qx "/$carry/" "$exclude" 2> /dev/null || echo "/$carry/" >> "$exclude"
    rm -rf "$carry" && mkdir -p "$carry/wheels" "$carry/datasets"
    # Whatever happens next, the marker lists what this prepare wrote, so the next one may replace it.
    list_carry
    trap list_carry EXIT
    # simplejpeg and webdataset: the suite imports them; that machine has neither.
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$carry/wheels" simplejpeg webdataset braceexpand
    # The suite's images, 40 CIFAR-10 images per class and split and 60 ImageNet photos (about 11 MB).
    cp "$datasets/README.md" "$carry/datasets/"
    for split in train test; do
        for folder in "$datasets/cifar10-jpeg/$split"/*/; do
            target="$carry/datasets/cifar10-jpeg/$split/$(basename "$folder")"
            mkdir -p "$target"
            mapfile -t images < <(find "$folder" -maxdepth 1 -type f | sort)
            cp -t "$target" "${images[@]:0:40}"
        done
    done
    mkdir -p "$carry/datasets/imagenet-sample"
    mapfile -t classes < <(find "$datasets/imagenet-sample" -mindepth 1 -maxdepth 1 -type d | sort)
    cp -r -t "$carry/datasets/imagenet-sample" "${classes[@]:0:60}"
    if [ -n "$cache" ]; then
        cp "$cache" "$carried_cache"
    fi
    if [ -n "$compile" ]; then
        rm -rf "$cache_root" && mkdir -p "$cache_root" && touch "$cache_root/$marker_name"
        "$compile_python" -m benchmarks.kernels.precompile --cache "$cache_root/triton"
        tar "$compress" -cf "$carried_cache" -C "$cache_root" triton
        size=$(stat -c %s "$carried_cache")
        if ((size > compiled_limit)); then
            rm "$carried_cache"
            echo "error: the compiled kernels take $size bytes, over the $compiled_limit the device tool may carry" \
                "beside the rest; not carried" >&2
            exit 1
        fi
        "$compile_python" -c "$triton_key" > "$carried_key"
    fi
    # The device tool carries at most 64 MiB: this folder and the working tree together.
    du -sh "$carry"
    ;;
plan)
    [ $# -eq 1 ] || refuse "usage: tools/lent_gpu.sh plan"
    plan_budgets
    print_plan
    ;;
run)
    [ $# -eq 2 ] || refuse "usage: tools/lent_gpu.sh run OUT"
    plan_budgets
    for variable in RETUNE_KERNELS TIME_KERNELS; do
        [[ -z ${!variable:-} || ${!variable} =~ ^[a-z0-9_]+(,[a-z0-9_]+)*$ ]] \
            || refuse "$variable=${!variable}: kernel names and commas alone, e.g. blurpool2d,alibi_attention"
    done
    case ${RETUNE_ALL:-0} in
        0) only_new=--only-new ;;
        1) only_new="" ;;
        *) refuse "RETUNE_ALL=$RETUNE_ALL: 1 (tune every key met) or 0 (only the keys the table lacks; the default)" ;;
    esac
    out=$2
    [ -n "$out" ] || refuse "run '': name the folder for the results"
    [[ $out != -* ]] || out=./$out  # not an option to the commands below
    [ -d "$carry/wheels" ] || refuse "no $carry/wheels; run tools/lent_gpu.sh prepare here and carry $carry"
    [ -f "$table" ] || refuse "no $table; run from the repository root"
    # Its files are what comes back, at most 8: a folder with others in it would spill over, or mix two runs.
    check_out
    made=$(mkdir -p "$out" 2>&1) || refuse "$out: cannot be made (${made##*: }); pass a folder you may write in"
    # In an OUT an earlier run took, that run's files go, so that the two do not mix; nothing else is touched.
    for name in "${out_files[@]}"; do
        rm -f "$out/$name"
    done
    mkdir -p "$out/$out_marker"
    print_plan | tee "$out/run.log"

    export PYTHONUNBUFFERED=1 FASTCORE_OPS_INTERPRET=0
    export TRITON_CACHE_DIR="$cache_root/triton" TORCHINDUCTOR_CACHE_DIR="$cache_root/inductor"
    # Triton's cache keeps each kernel's cubin and metadata alone, without the IRs that were 85% of it (120 MB for
    # 202 kernels here): what comes back must fit 16 MiB, and nothing here reads a cached kernel's IR.
    export TRITON_STORE_BINARY_ONLY=1 XZ_OPT="-T0 -6"
    # The compiled kernels, and the table's configs unless tuning (retune refuses FASTCORE_OPS_AUTOTUNE=0).
    unset TRITON_INTERPRET FASTCORE_OPS_AUTOTUNE
    work=$(mktemp -d)
    export PYTHONPATH=".:$work/site"
    # The timing and the tests run with the retuned table in place of the committed one; put back at the end,
    # so the tree is left as it was found.
    trap 'if [ -f "$work/replaced" ]; then cp "$work/committed.json" "$table"; fi; rm -rf "$work"' EXIT
    cp "$table" "$work/committed.json"

    say "== 1. setup: at most ${budget[setup]} s"
    started=$SECONDS
    { timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
      echo "cores: $(nproc)"; } 2>&1 | tee -a "$out/run.log"
    # The versions on stderr, into run.log; the kernels' names, in the registry's order, on stdout.
    kernels=$(timeout 60 python3 -c 'import sys, torch, triton
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, file=sys.stderr)
from benchmarks.kernels.registry import KERNELS
print(",".join(spec.name for spec in KERNELS))' 2>> "$out/run.log") || kernels=""
    say "kernels: ${kernels:-unknown (the registry did not import: each step then runs every kernel at once)}"
    timeout 60 python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$work/site" \
        "$carry"/wheels/*.whl >> "$out/run.log" 2>&1 || say "the carried wheels did not install: exit $?"
    if [ ! -e ../shared/datasets ]; then mkdir -p ../shared && cp -r "$carry/datasets" ../shared/; fi
    mkdir -p "$TRITON_CACHE_DIR" "$TORCHINDUCTOR_CACHE_DIR"
    if [ -f "$carried_cache" ]; then
        if timeout 60 tar -xf "$carried_cache" -C "$cache_root" >> "$out/run.log" 2>&1; then
            say "compile cache: $(find "$cache_root" -type f | wc -l) files unpacked into $cache_root"
        else
            say "compile cache: $carried_cache did not unpack (exit $?); everything compiles afresh"
        fi
    else
        say "compile cache: none carried; everything compiles afresh (prepare --cache carries the last run's)"
    fi
    # What prepare --compile carried is made again for the next lease: the cache step leaves it out.
    carried_here=$work/carried-by-prepare-compile
    : > "$carried_here"
    if [ -f "$carried_key" ]; then
        (cd "$cache_root" && find triton -mindepth 1 -maxdepth 1 2> /dev/null || true) > "$carried_here"
        key=$(timeout 60 python3 -c "$triton_key" 2>> "$out/run.log") || key="unknown"
        if [ "$key" = "$(head -c 64 "$carried_key")" ]; then
            say "compile cache: compiled by this Triton build and ptxas ($key)"
        else
            say "compile cache: compiled by another Triton build or ptxas than this ($key): none of it will be found"
        fi
    fi
    carried_kernels=$(kernels_cached)
    record setup "machine, wheels, images, cache" ok 0 "$((SECONDS - started))" "${budget[setup]}"

    # The part writes its rows to OUT/correctness.json after each one (benchmarks/gpu_check/parts.py's Recorder).
    limit_for correctness
    say "== 2. correctness: at most $limit s"
    attempt correctness "every kernel" "$limit" "$out/run.log" \
        python3 -m benchmarks.gpu_check.part benchmarks.gpu_check.correctness "$out/correctness.json"

    # One process per kernel, the table copied to OUT after each: retune writes only when it ends, so a kernel
    # stopped at the budget loses its own tuning alone. Each gets all the time the step has left, so that kernels
    # finish rather than all being stopped midway.
    limit_for retune
    say "== 3. retune: at most $limit s"
    deadline=$((SECONDS + limit))
    cp "$table" "$work/tuned_configs.json"
    IFS=, read -r -a chosen <<< "${RETUNE_KERNELS:-$kernels}"
    ((${#chosen[@]})) || chosen=("")
    tuned=""
    for kernel in "${chosen[@]}"; do
        attempt retune "${kernel:-every kernel}" "$((deadline - SECONDS))" "$out/run.log" \
            python3 -m benchmarks.kernels.retune ${kernel:+--kernels "$kernel"} $only_new \
            --out "$work/tuned_configs.json"
        if [ "$ended" = ok ]; then
            install "$work/tuned_configs.json" tuned_configs.json || say "the table could not be copied to $out"
            tuned=yes
        fi
    done
    if [ -n "$tuned" ]; then
        cp "$work/tuned_configs.json" "$table"
        touch "$work/replaced"
        say "the retuned table replaces $table for the timing and the tests (the committed one is put back at the end)"
    fi

    # Kernel by kernel, each a fair share of what the step has left (what one leaves goes to the next), so every
    # kernel is timed; --jsonl appends each row as it is measured, so a kernel stopped midway keeps its rows.
    limit_for timing
    say "== 4. timing: at most $limit s"
    deadline=$((SECONDS + limit))
    IFS=, read -r -a chosen <<< "${TIME_KERNELS:-$kernels}"
    ((${#chosen[@]})) || chosen=("")
    for i in "${!chosen[@]}"; do
        kernel=${chosen[$i]}
        attempt timing "${kernel:-every kernel}" "$(((deadline - SECONDS) / (${#chosen[@]} - i)))" "$out/run.log" \
            python3 -m benchmarks.kernels ${kernel:+--kernels "$kernel"} --out "$work/bench" \
            --jsonl "$out/kernels.jsonl"
    done

    # Whatever is left before the cache's time: pytest -v writes a line per test as it ends.
    limit=$((total - SECONDS - budget[cache]))
    # Four test processes where pytest-xdist is installed: the tests' time there is mostly Triton compiling.
    workers=$(python3 -c "import xdist" 2> /dev/null && echo "-n 4" || true)
    say "== 5. pytest: at most $limit s${workers:+ (pytest-xdist: $workers)}"
    # shellcheck disable=SC2086  # $workers: two words or none
    FASTCORE_OPS_TRACEBACKS_AT_ONCE=1 attempt pytest "pytest -m gpu" "$limit" "$out/pytest.log" \
        python3 -m pytest -m gpu $workers -v -p no:cacheprovider --durations=20

    # Compressed, one file: the device tool brings back 8 files at most, of 16 MiB each. Triton's part first, the
    # kernels' own (less those prepare --compile carried); then, in the time left, with Inductor's (the compiled
    # rivals') if the two still fit. (Packing both first once took 17 of the 20 s left and came to 20.5 MB, and then
    # nothing came back.)
    # 5 s short of the end: the kill that follows a TERM unheeded comes 5 s after it.
    limit=$((total - SECONDS - 5 < budget[cache] ? total - SECONDS - 5 : budget[cache]))
    say "== 6. cache: at most $limit s"
    deadline=$((SECONDS + limit))
    packed=""
    for parts in "triton" "triton inductor"; do
        # shellcheck disable=SC2086  # $parts: the folders to pack
        attempt cache "$parts" "$((deadline - SECONDS))" "$out/run.log" \
            tar "$compress" -cf "$work/$cache_name" -C "$cache_root" --exclude-from "$carried_here" $parts
        [ "$ended" = ok ] || break
        size=$(stat -c %s "$work/$cache_name")
        if ((size > cache_limit)); then
            say "-- cache $parts: $size bytes, over the $cache_limit a file may have to come back"
            break
        fi
        install "$work/$cache_name" "$cache_name" && packed="$parts, $size bytes"
    done
    say "compile cache: ${packed:-not brought back}; kernels: $carried_kernels carried," \
        "$(($(kernels_cached) - carried_kernels)) compiled by this run"

    # A command stopped mid-write can leave its temporary file (a part's .partial, ours .tmp): not a result.
    for name in "${out_files[@]}"; do
        case $name in *.tmp | *.partial) rm -f "$out/$name" ;; esac
    done
    say "== done in $SECONDS s; in $out: $(cd "$out" && ls | tr '\n' ' ')"
    cat "$out/steps.jsonl"
    ;;
*)
    refuse "$usage"
    ;;
esac
