#!/usr/bin/env bash
# Count the 2-process CPU runs of `python -m fastcore_ops.training.train` under torchrun whose processes abort at
# exit ("terminate called without an active exception"): PAIRS pairs of a tiny FSDP gpt_alibi run, each pair once
# from BEFORE (a checkout of the commit before rank_exit.py: git worktree add /tmp/before 0a9c541) and once from
# this checkout, in turn. From the repository root:
#     bash reports/torchrun-exit-abort-20261205/count_aborts.sh 20 /tmp/before
set -u
pairs=$1; before_tree=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/python -c "import sys; from pathlib import Path; sys.path.insert(0, '.'); \
from tests.training.conftest import micro_text_tree; (Path('$work/text')).mkdir(); micro_text_tree(Path('$work/text'))"
aborted() {  # one run from the checkout $1; prints 1 where a process aborted at exit
    rm -rf "$work/out"
    (cd "$1" && PYTHONPATH="$1" OMP_NUM_THREADS=1 "$OLDPWD/.venv/bin/python" -m torch.distributed.run --standalone \
        --nproc_per_node=2 -m fastcore_ops.training.train --recipe gpt_alibi --strategy fsdp --epochs 1 \
        --eval-every 0 --no-progress --set data.batch_size=44 --set text.sequence_length=16 \
        --set text.eval_batch_tokens=64 --set schedule.warmup_epochs=0 \
        --set "model.options={'n_layer': 1, 'n_head': 2, 'n_embd': 32}" --data "$work/text" --out "$work/out" \
        > /dev/null 2> "$work/err")
    if grep -q "terminate called" "$work/err"; then echo 1
    elif [ -f "$work/out/summary.json" ]; then echo 0
    else echo "a run failed otherwise: $(tail -n 3 "$work/err")" >&2; echo failed; fi
}
before=0; now=0
for pair in $(seq 1 "$pairs"); do
    one=$(aborted "$before_tree"); other=$(aborted "$PWD")
    [ "$one$other" = "${one//failed/}${other//failed/}" ] || exit 1
    before=$((before + one)); now=$((now + other))
    echo "pair $pair: runs that aborted at exit: before $before, now $now"
done
