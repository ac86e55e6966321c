"""One ResNet-20 training step (batch 128, SGD) in a mode: eager, cl (channels last), bf16, compile, compile_bf16...

python reports/cifar-mild-speed-20261124/probes/step_time.py MODE [SIZE]
"""
import sys, time, torch
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))

torch.manual_seed(0)
mode = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 else 32
from training.models.cifar_resnet import cifar_resnet20
model = cifar_resnet20(num_classes=10)
cl = "cl" in mode
if cl: model = model.to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
x = torch.randn(128, 3, size, size); y = torch.randint(0, 10, (128,))
if cl: x = x.contiguous(memory_format=torch.channels_last)
fwd = torch.compile(model) if "compile" in mode else model
bf16 = "bf16" in mode
def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
    loss.backward(); opt.step()
t0 = time.perf_counter()
for _ in range(3): step()
warm = time.perf_counter() - t0
t0 = time.perf_counter()
n = 20
for _ in range(n): step()
print(f"{mode:20s} size {size}: {1000*(time.perf_counter()-t0)/n:.1f} ms/step (warmup {warm:.1f}s)")
