"""PyTorch counterpart of `cutrain bench`: the same models, batch, data and optimizer in PyTorch,
so that cutrain's figures on a GPU are always read next to PyTorch's, measured in the same run.

Runs one configuration on the first GPU and prints one JSON line: training images/s (forward,
loss, backward, SGD-momentum step with lr 0.01, momentum 0.9), milliseconds per step, mean NVML
GPU utilization in the timed window (needs pynvml, else null), and peak memory. 15 untimed
warm-up steps come first; then steps are timed for --seconds. Data lives on the GPU (the real
Fashion-MNIST from its four IDX .gz files, or random CIFAR-shaped tensors), except with
--pipeline N, where a DataLoader with N workers feeds per-sample numpy augmentation (pad 2 +
random crop, flip, normalize) from the CPU: the naive input pipeline that cutrain's
`pipeline = sync` reproduces and its parallel pipeline is measured against.

--precision fp16 | bf16 is PyTorch's mixed precision as documented (AMP): the forward and the loss
under torch.autocast in that type, the loss taken in fp32, weights and SGD state in fp32; fp16
with torch.amp.GradScaler (dynamic loss scaling, default settings), bf16 without one; and for the
convolutional models (fmnist_cnn, cifar_resnet18) channels_last weights and inputs, the layout
tensor cores want. --precision fp32 (the default) is plain fp32 with no autocast, no scaler and
NCHW, as before. --channels-last / --no-channels-last override the layout either way.

tools/device_check.sh runs it beside `cutrain bench`; by hand, from a clone (Python with PyTorch,
torchvision for cifar_resnet18, and a CUDA GPU):

  python3 tools/torch_peer.py --model fmnist_cnn --batch 256 --precision fp32 --data DIR
  python3 tools/torch_peer.py --model fmnist_cnn --batch 32 --pipeline 0 --data DIR   # 0 workers
  python3 tools/torch_peer.py --model fmnist_cnn --batch 256 --precision fp16 --data DIR     # AMP
  python3 tools/torch_peer.py --model cifar_resnet18 --batch 512 --precision bf16
  python3 tools/torch_peer.py --model fmnist_cnn --batch 256 --precision fp16 --compile --data DIR

DIR holds the four Fashion-MNIST .gz files (default /usr/share/datasets/fashion-mnist, Debian's
dataset-fashion-mnist). Models, as in models/*.ini: fmnist_mlp (784-256-128-100-10),
fmnist_mlp_wide (784-1024-1024-1024-10), fmnist_cnn (conv 32 3x3, pool, conv 64 3x3, pool,
dense 128, dense 10), tiny_layers (784-64, 16 x dense 64, 10), cifar_resnet18 (torchvision
ResNet-18, 3x3 stem, no max-pool, 32x32x3).
"""
import argparse, gzip, json, threading, time
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--batch", type=int, required=True)
ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"],
                help="fp16: autocast + GradScaler; bf16: autocast, no scaler; both channels_last for conv models")
ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                help="default: on for conv models in fp16/bf16, off otherwise")
ap.add_argument("--compile", action="store_true", help="torch.compile(mode='reduce-overhead')")
ap.add_argument("--pipeline", type=int, default=-1, help="DataLoader workers; -1 = data on GPU")
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--seconds", type=float, default=2.0)
a = ap.parse_args()

torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
amp = a.precision != "fp32"
AMP_DTYPE = torch.bfloat16 if a.precision == "bf16" else torch.float16
CONV_MODELS = ("fmnist_cnn", "cifar_resnet18")
if a.channels_last is None:
    a.channels_last = amp and a.model in CONV_MODELS

try:
    import pynvml
    pynvml.nvmlInit()
    NV = pynvml.nvmlDeviceGetHandleByIndex(0)
except Exception:
    NV = None


class Util:
    """Samples NVML GPU utilization every 50 ms while active."""
    def __enter__(self):
        self.s, self.on = [], True
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        return self

    def _run(self):
        while self.on:
            if NV is not None:
                self.s.append(pynvml.nvmlDeviceGetUtilizationRates(NV).gpu)
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.on = False
        self.t.join()

    def mean(self):
        return round(float(np.mean(self.s)), 1) if self.s else None


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def model():
    if a.model == "fmnist_mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 100), nn.ReLU(), nn.Linear(100, 10))
    if a.model == "fmnist_mlp_wide":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if a.model == "fmnist_cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))
    if a.model == "tiny_layers":
        layers = [nn.Flatten(), nn.Linear(784, 64), nn.ReLU()]
        for _ in range(16):
            layers += [nn.Linear(64, 64), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(64, 10))
    if a.model == "cifar_resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m
    raise SystemExit(f"unknown model {a.model}")


torch.manual_seed(0)
m = model().to(dev)
if a.channels_last:
    m = m.to(memory_format=torch.channels_last)
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
# bf16 has fp32's exponent range: no loss scaling (PyTorch's AMP recipe)
scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")
fwd = torch.compile(m, mode="reduce-overhead") if a.compile else m


def train_step(x, y):
    if a.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=AMP_DTYPE, enabled=amp):
        loss = F.cross_entropy(fwd(x).float(), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


if a.model.startswith("cifar"):
    X = torch.randn(50000, 3, 32, 32, device=dev)
    Y = torch.randint(0, 10, (50000,), device=dev)
    xtr = ytr = None
else:
    xtr = idx(f"{a.data}/train-images-idx3-ubyte.gz")
    ytr = idx(f"{a.data}/train-labels-idx1-ubyte.gz")
    X = torch.tensor(xtr, device=dev).float().div_(255).sub_(0.286).div_(0.353).unsqueeze(1)
    Y = torch.tensor(ytr, device=dev).long()

if a.pipeline < 0:
    def batches():
        while True:
            i = torch.randint(0, X.shape[0], (a.batch,), device=dev)
            yield X[i], Y[i]
else:
    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(xtr)

        def __getitem__(self, k):
            img = np.pad(xtr[k].astype(np.float32) / 255.0, 2)
            dy, dx = np.random.randint(0, 5, 2)
            img = img[dy:dy + 28, dx:dx + 28]
            if np.random.rand() < 0.5:
                img = img[:, ::-1]
            img = (img - 0.286) / 0.353
            return torch.from_numpy(np.ascontiguousarray(img))[None], int(ytr[k])

    w = a.pipeline
    dl = torch.utils.data.DataLoader(DS(), batch_size=a.batch, shuffle=True, num_workers=w, pin_memory=w > 0,
                                     persistent_workers=w > 0, prefetch_factor=4 if w else None, drop_last=True)

    def batches():
        while True:
            for x, y in dl:
                yield x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)

it = batches()
t0 = time.time()
for _ in range(15):
    train_step(*next(it))
torch.cuda.synchronize()
warm = time.time() - t0
n, t0 = 0, time.time()
with Util() as u:
    while time.time() - t0 < a.seconds:
        for _ in range(10):
            train_step(*next(it))
        n += 10
        torch.cuda.synchronize()
dt = time.time() - t0
print(json.dumps(dict(peer="pytorch " + torch.__version__, model=a.model, batch=a.batch, precision=a.precision,
                      channels_last=a.channels_last, compile=a.compile, pipeline_workers=a.pipeline,
                      img_s=round(n * a.batch / dt), step_ms=round(1000 * dt / n, 3), gpu_util=u.mean(),
                      warmup_s=round(warm, 1), peak_mem_mib=round(torch.cuda.max_memory_allocated() / 2**20),
                      loss_scale=scaler.get_scale() if scaler.is_enabled() else None)))
