"""Flipping half of a uint8 batch of 64 images at 176 px on a CPU, one thread, ms per image (median of 30).

Run: .venv/bin/python reports/dataloader-memory-20261124/probes/flip_time.py
cur: the batch indexed with a tensor of rows (flip_batch before efeec4c; still its path on a GPU);
v2: the same through 2-d views; v3: sample by sample (flip_batch on a CPU since efeec4c);
v4: sample by sample into an empty batch. The second column checks each gives cur's result.
"""
import time, torch
torch.set_num_threads(1)
x = torch.randint(0, 256, (64, 3, 176, 176), dtype=torch.uint8)
g = torch.Generator().manual_seed(0)
def t(fn, reps=30):
    fn(); ts=[]
    for _ in range(reps):
        s=time.perf_counter(); fn(); ts.append(time.perf_counter()-s)
    ts.sort(); return 1e3*ts[len(ts)//2]/64
rows = (torch.rand(64, generator=g) < 0.5).nonzero().flatten()
def cur():
    out = x.clone(); out[rows] = x[rows].flip(-1); return out
def v2():
    out = x.clone()
    flat = out.view(64, -1)
    picked = x.view(64, -1).index_select(0, rows).view(-1, *x.shape[1:]).flip(-1)
    flat.index_copy_(0, rows, picked.reshape(len(rows), -1)); return out
def v3():
    out = x.clone()
    for r in rows.tolist(): out[r] = x[r].flip(-1)
    return out
def v4():
    out = torch.empty_like(x)
    mask = torch.zeros(64, dtype=torch.bool); mask[rows] = True
    for r, m in enumerate(mask.tolist()):
        if m: torch.flip(x[r], (-1,), out=out[r]) if False else out[r].copy_(x[r].flip(-1))
        else: out[r].copy_(x[r])
    return out
for f in (cur, v2, v3, v4): print(f.__name__, t(f), torch.equal(f(), cur()))
