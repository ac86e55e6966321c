"""ResNet-20 (BlurPool + channels last) bf16 training step with each CPU BlurPool path: none, strided, current.

python reports/cifar-mild-speed-20261124/probes/blurpool_paths.py {none|strided|current} SIZE
"""
import sys, time, torch, torch.nn.functional as F
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import fastcore_ops.kernels.blurpool as kb
from training.models.cifar_resnet import cifar_resnet20
from fastcore_ops.surgery import apply_surgery
variant, size = sys.argv[1], int(sys.argv[2])
if variant == "strided":  # the path before: one strided depthwise convolution
    kb._blurpool2d_eager = kb.blurpool2d_reference
torch.manual_seed(0)
model = cifar_resnet20(num_classes=10)
apply_surgery(model, ["channels_last"] if variant == "none" else ["blurpool", "channels_last"])
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(128, 3, size, size).contiguous(memory_format=torch.channels_last); y = torch.randint(0, 10, (128,))
def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward(); opt.step()
for _ in range(3): step()
t0 = time.perf_counter(); n = 15
for _ in range(n): step()
print(f"{variant:10s} {size} px: {1000*(time.perf_counter()-t0)/n:.1f} ms/step")
