"""PyTorch counterpart of cutrain on the CPU: the network, data, optimizer, schedule and threads of
a cutrain config, built from the same .ini, run with PyTorch's CPU path (oneDNN for convolutions).

Two modes, each printing JSON lines:

  bench (the default): training images/s at a batch, as `cutrain bench` measures it: four real
    training batches kept in memory and cycled, --warmup untimed steps, then --steps timed ones
    (forward, softmax cross-entropy, backward, the config's optimizer step). One line:
    {"peer", "model", "batch", "threads", "optimizer", "images_per_s", "ms_per_step",
    "ms_per_step_min", "peak_rss_mib"}.
  --train: trains for the config's epochs (or --epochs) with a per-epoch shuffle from --seed and the
    config's per-step schedule, evaluates the test set after every epoch and prints
    {"event": "start"} when the first step begins, then one {"event": "epoch", "epoch",
    "test_accuracy", "seconds"} per epoch (seconds since the start, evaluation included), and with
    --target stops after the first epoch at or above it.

tools/cpu_bench.py runs it alternately with `cutrain bench` and `cutrain train` and prints the
ratios; docs/cpu-benchmarks.md has the protocol. By hand, from a clone, with Debian's PyTorch
(apt-get install python3-torch):

  python3 tools/torch_cpu_peer.py --config models/fmnist_cnn.ini --batch 256 --threads 2
  python3 tools/torch_cpu_peer.py --config models/fmnist_mlp.ini --train --seed 1 --target 0.883

What is the same as cutrain: the layers of the .ini in order (conv2d, pool, dense, batchnorm with
its momentum, epsilon and activation, dropout, activation, add, concat, flatten), the data (the config's IDX or
CIFAR-10 files, normalize, train_limit and test_limit, flip and crop:N; --data DIR replaces the
folder of IDX files; synthetic data is random uint8 images of the config's shape and counts),
optimizer, learning rate and its schedule (warm-up, step, cosine, per step), weight decay, batch
and threads. What is PyTorch's own: the weight initialisation (PyTorch's defaults), the NCHW
layout, and `padding = same`, written as PyTorch users write it (symmetric, size // 2) where
TensorFlow's rule puts the odd pixel at the bottom and right (the shapes are the same).
"""
import argparse
import configparser
import gzip
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="a cutrain .ini (models/*.ini)")
    ap.add_argument("--batch", type=int, default=0, help="default: the config's [train] batch")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; default: the config's threads, "
                    "else every core")
    ap.add_argument("--data", default="", help="the folder of the four Fashion-MNIST .gz files (IDX configs)")
    ap.add_argument("--cifar", default="", help="the folder of CIFAR-10's binary batches, for a synthetic or "
                    "cifar10 config (default: the config's data)")
    ap.add_argument("--warmup", type=int, default=20, help="bench: untimed steps (cutrain bench's default)")
    ap.add_argument("--steps", type=int, default=100, help="bench: timed steps (cutrain bench's default)")
    ap.add_argument("--train", action="store_true", help="train with per-epoch test evaluation")
    ap.add_argument("--epochs", type=int, default=0, help="train: default the config's")
    ap.add_argument("--seed", type=int, default=42, help="train: weights, shuffle, dropout")
    ap.add_argument("--target", type=float, default=0.0, help="train: stop after the first epoch at or above")
    ap.add_argument("--train-limit", type=int, default=-1, help="as [data] train_limit (default the config's)")
    ap.add_argument("--test-limit", type=int, default=-1, help="as [data] test_limit (default the config's)")
    return ap.parse_args()


# ---- the config ----

def read_config(path):
    ini = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None,
                                    comment_prefixes=(";", "#"))
    ini.optionxform = str
    with open(path) as f:
        ini.read_file(f)
    data = dict(ini["data"]) if ini.has_section("data") else {}
    train = dict(ini["train"]) if ini.has_section("train") else {}
    layers = [(name, dict(ini[name])) for name in ini.sections() if name not in ("data", "train")]
    return data, train, layers


def floats(text):
    return [float(v) for v in text.replace(" ", "").split(",") if v]


def on(text):
    return text.strip().lower() in ("on", "1", "true", "yes")


ACTIVATIONS = {
    "linear": None, "relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh,
    "leaky": lambda: nn.LeakyReLU(0.1), "gelu": nn.GELU,
}


def activation(name):
    if name not in ACTIVATIONS:
        raise SystemExit(f"torch_cpu_peer: activation '{name}' has no counterpart here")
    make = ACTIVATIONS[name]
    return make() if make else nn.Identity()


def same_pad(size, stride, extent):
    """Symmetric padding giving TensorFlow's `same` output size ceil(extent / stride)."""
    out = -(-extent // stride)
    pad = size // 2
    if (extent + 2 * pad - size) // stride + 1 != out:
        raise SystemExit(f"torch_cpu_peer: padding = same with size {size}, stride {stride} on {extent} pixels "
                         "has no symmetric counterpart")
    return pad


class Net(nn.Module):
    """The .ini's layers in order; each reads the previous one unless input(s) name earlier ones."""

    def __init__(self, layers, in_shape, classes):
        super().__init__()
        self.mods = nn.ModuleDict()
        self.plan = []  # (name, kind, inputs)
        shapes = {"data": in_shape}  # (C, H, W) or (N,)
        prev = "data"
        for name, keys in layers:
            kind = keys["type"]
            if "inputs" in keys:
                inputs = [v.strip() for v in keys["inputs"].split(",")]
            else:
                inputs = [keys.get("input", prev).strip()]
            x = shapes[inputs[0]]
            if kind == "conv2d":
                filters, size = int(keys["filters"]), int(keys["size"])
                stride = int(keys.get("stride", "1"))
                pad = (same_pad(size, stride, x[1]) if keys.get("padding", "valid") == "same" else 0)
                conv = nn.Conv2d(x[0], filters, size, stride, pad, bias=on(keys.get("bias", "on")))
                mod = nn.Sequential(conv, activation(keys.get("activation", "linear")))
                h = (x[1] + 2 * pad - size) // stride + 1
                w = (x[2] + 2 * pad - size) // stride + 1
                shape = (filters, h, w)
            elif kind in ("maxpool", "avgpool"):
                if on(keys.get("global", "off")):
                    mod = nn.AdaptiveMaxPool2d(1) if kind == "maxpool" else nn.AdaptiveAvgPool2d(1)
                    shape = (x[0], 1, 1)
                else:
                    size = int(keys.get("size", "2"))
                    stride = int(keys.get("stride", "0")) or size
                    pad = same_pad(size, stride, x[1]) if keys.get("padding", "valid") == "same" else 0
                    if kind == "maxpool":
                        mod = nn.MaxPool2d(size, stride, pad)
                    else:
                        mod = nn.AvgPool2d(size, stride, pad, count_include_pad=False)
                    shape = (x[0], (x[1] + 2 * pad - size) // stride + 1, (x[2] + 2 * pad - size) // stride + 1)
            elif kind == "dense":
                units = int(keys["units"])
                fan_in = int(np.prod(x))
                mod = nn.Sequential(nn.Flatten() if len(x) > 1 else nn.Identity(),
                                    nn.Linear(fan_in, units, bias=on(keys.get("bias", "on"))),
                                    activation(keys.get("activation", "linear")))
                shape = (units,)
            elif kind == "batchnorm":
                bn = nn.BatchNorm2d if len(x) == 3 else nn.BatchNorm1d
                mod = bn(x[0], eps=float(keys.get("epsilon", "1e-5")), momentum=float(keys.get("momentum", "0.1")))
                if keys.get("activation", "linear") != "linear":
                    mod = nn.Sequential(mod, activation(keys["activation"]))
                shape = x
            elif kind == "dropout":
                mod = nn.Dropout(float(keys["rate"]))
                shape = x
            elif kind == "flatten":
                mod = nn.Flatten()
                shape = (int(np.prod(x)),)
            elif kind == "activation":
                mod = activation(keys["activation"])
                shape = x
            elif kind == "add":
                mod = activation(keys.get("activation", "linear"))
                shape = x
            elif kind == "concat":
                mod = nn.Identity()
                shape = (sum(shapes[i][0] for i in inputs),) + tuple(x[1:])
            else:
                raise SystemExit(f"torch_cpu_peer: layer type '{kind}' ([{name}]) has no counterpart here")
            self.mods[name] = mod
            self.plan.append((name, kind, inputs))
            shapes[name] = shape
            prev = name
        if shapes[prev] != (classes,):
            raise SystemExit(f"torch_cpu_peer: the last layer gives {shapes[prev]}, not {classes} classes")

    def forward(self, x):
        out = {"data": x}
        y = x
        for name, kind, inputs in self.plan:
            if kind == "add":
                y = self.mods[name](out[inputs[0]] + out[inputs[1]])
            elif kind == "concat":
                y = torch.cat([out[i] for i in inputs], 1)
            else:
                y = self.mods[name](out[inputs[0]])
            out[name] = y
        return y


# ---- the data ----

def idx_file(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def cifar_files(folder, names):
    recs = [np.fromfile(os.path.join(folder, n), np.uint8).reshape(-1, 3073) for n in names]
    r = np.concatenate(recs)
    return r[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), r[:, 0].astype(np.int64)


def load_data(data, args, config_dir):
    """(train images NHWC uint8, labels, test images, labels, classes)."""
    fmt = data.get("format", "idx")
    here = lambda p: p if os.path.isabs(p) else os.path.join(config_dir, p)
    if args.cifar or fmt == "cifar10":
        folder = args.cifar or here(data["train"])
        xtr, ytr = cifar_files(folder, [f"data_batch_{i}.bin" for i in range(1, 6)])
        test = args.cifar or here(data.get("test", ""))
        xte, yte = cifar_files(test, ["test_batch.bin"]) if test else (xtr[:0], ytr[:0])
        classes = 10
    elif fmt == "idx":
        def path(key):
            p = here(data[key])
            return os.path.join(args.data, os.path.basename(p)) if args.data else p
        xtr, ytr = idx_file(path("train")), idx_file(path("train_labels")).astype(np.int64)
        if "test" in data:
            xte, yte = idx_file(path("test")), idx_file(path("test_labels")).astype(np.int64)
        else:
            xte, yte = xtr[:0], ytr[:0]
        xtr, xte = xtr.reshape(*xtr.shape[:3], -1), xte.reshape(*xte.shape[:3], -1)
        classes = 10
    elif fmt == "synthetic":
        h, w, c = [int(v) for v in floats(data.get("shape", "28, 28, 1"))]
        classes = int(data.get("classes", "10"))
        count, test_count = int(data.get("count", "1000")), int(data.get("test_count", "200"))
        g = np.random.default_rng(0)
        xtr = g.integers(0, 256, (count, h, w, c), np.uint8)
        ytr = g.integers(0, classes, count).astype(np.int64)
        xte = g.integers(0, 256, (test_count, h, w, c), np.uint8)
        yte = g.integers(0, classes, test_count).astype(np.int64)
    else:
        raise SystemExit(f"torch_cpu_peer: format = {fmt} is not read here")
    limit = args.train_limit if args.train_limit >= 0 else int(data.get("train_limit", "0"))
    test_limit = args.test_limit if args.test_limit >= 0 else int(data.get("test_limit", "0"))
    if limit > 0:
        xtr, ytr = xtr[:limit], ytr[:limit]
    if test_limit > 0:
        xte, yte = xte[:test_limit], yte[:test_limit]
    return xtr, ytr, xte, yte, classes


def to_tensor(x, norm):
    """uint8 NHWC to float32 NCHW in [0, 1], normalised per channel."""
    t = torch.from_numpy(np.array(x)).permute(0, 3, 1, 2).float().div_(255.0)
    if norm:
        c = t.shape[1]
        mean, std = (norm[:1] * c, norm[1:] * c) if len(norm) == 2 else (norm[:c], norm[c:])
        t.sub_(torch.tensor(mean).view(1, c, 1, 1)).div_(torch.tensor(std).view(1, c, 1, 1))
    return t.contiguous()


def augmenter(data, gen):
    """The config's flip and crop:N on a batch (NCHW), drawn from gen."""
    items = [v.strip() for v in data.get("augment", "none").split(",")]
    crop = next((int(v[5:]) for v in items if v.startswith("crop:")), 0)
    flip = "flip" in items

    def apply(x):
        if crop:
            n, _, h, w = x.shape
            p = F.pad(x, (crop, crop, crop, crop))
            dy = torch.randint(0, 2 * crop + 1, (n,), generator=gen)
            dx = torch.randint(0, 2 * crop + 1, (n,), generator=gen)
            x = torch.stack([p[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])
        if flip:
            m = torch.rand(x.shape[0], generator=gen) < 0.5
            x = torch.where(m.view(-1, 1, 1, 1), x.flip(3), x)
        return x
    return apply if (crop or flip) else None


# ---- the optimizer and schedule ----

def optimizer(train, params):
    kind = train.get("optimizer", "adam")
    lr = float(train.get("learning_rate", "0.001"))
    wd = float(train.get("weight_decay", "0.01" if kind == "adamw" else "0"))
    betas = (float(train.get("beta1", "0.9")), float(train.get("beta2", "0.999")))
    eps = float(train.get("epsilon", "1e-8"))
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if kind == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=float(train.get("momentum", "0.9")),
                               nesterov=on(train.get("nesterov", "off")), weight_decay=wd)
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    raise SystemExit(f"torch_cpu_peer: optimizer = {kind} has no counterpart here")


def schedule(train, epochs, steps_per_epoch):
    """The learning rate at a step, as cutrain's schedule computes it (lr_scaling left out)."""
    peak = float(train.get("learning_rate", "0.001"))
    kind = train.get("schedule", "constant")
    warmup = float(train.get("warmup", "0"))
    min_lr = float(train.get("min_lr", "0"))
    step_size, gamma = float(train.get("step_size", "10")), float(train.get("gamma", "0.1"))

    def lr(step):
        epoch = step / steps_per_epoch
        if warmup > 0 and step < warmup * steps_per_epoch:
            return peak * (step + 1) / (warmup * steps_per_epoch)
        if kind == "step":
            return peak * gamma ** math.floor(epoch / step_size)
        if kind == "cosine":
            span = epochs - warmup
            progress = min((epoch - warmup) / span, 1.0) if span > 0 else 1.0
            return min_lr + (peak - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
        return peak
    return lr


# ---- the two modes ----

def peak_rss_mib():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def bench(args, model, opt, x, y, batch, name, optimizer_name):
    """Four real batches cycled, as cutrain bench does."""
    batches = [(x[i * batch:(i + 1) * batch].contiguous(), y[i * batch:(i + 1) * batch].contiguous())
               for i in range(4) if (i + 1) * batch <= x.shape[0]] or [(x[:batch], y[:batch])]
    model.train()

    def step(k):
        xb, yb = batches[k % len(batches)]
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for k in range(args.warmup):
        step(k)
    times = []
    t0 = time.perf_counter()
    for k in range(args.steps):
        s = time.perf_counter()
        step(k)
        times.append(time.perf_counter() - s)
    dt = time.perf_counter() - t0
    print(json.dumps(dict(peer="pytorch " + torch.__version__ + " cpu", model=name, batch=batch,
                          threads=torch.get_num_threads(), optimizer=optimizer_name,
                          images_per_s=round(args.steps * batch / dt, 1),
                          ms_per_step=round(1000 * dt / args.steps, 3), ms_per_step_min=round(1000 * min(times), 3),
                          peak_rss_mib=peak_rss_mib())), flush=True)


def train(args, model, opt, x, y, xt, yt, batch, epochs, lr_at, augment, gen):
    n = x.shape[0]
    steps_per_epoch = -(-n // batch)
    print(json.dumps(dict(event="start", images=n, batch=batch, epochs=epochs, steps_per_epoch=steps_per_epoch,
                          threads=torch.get_num_threads())), flush=True)
    t0 = time.perf_counter()
    step = 0
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(n, generator=gen)
        for k in range(0, n, batch):
            i = order[k:k + batch]
            xb = x[i]
            if augment:
                xb = augment(xb)
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = F.cross_entropy(model(xb), y[i])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        model.eval()
        correct = 0
        with torch.no_grad():
            for k in range(0, xt.shape[0], 1000):
                correct += (model(xt[k:k + 1000]).argmax(1) == yt[k:k + 1000]).sum().item()
        acc = correct / max(xt.shape[0], 1)
        print(json.dumps(dict(event="epoch", epoch=epoch, test_accuracy=round(acc, 4),
                              seconds=round(time.perf_counter() - t0, 3), peak_rss_mib=peak_rss_mib())), flush=True)
        if args.target and acc >= args.target:
            break


def main():
    args = parse_args()
    data, tr, layers = read_config(args.config)
    threads = args.threads or int(tr.get("threads", "0")) or os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    xtr, ytr, xte, yte, classes = load_data(data, args, os.path.dirname(os.path.abspath(args.config)))
    norm = floats(data["normalize"]) if data.get("normalize", "none") != "none" else []
    x, y = to_tensor(xtr, norm), torch.from_numpy(ytr)
    batch = args.batch or int(tr.get("batch", "64"))
    model = Net(layers, tuple(x.shape[1:]), classes)
    opt = optimizer(tr, model.parameters())
    name = os.path.splitext(os.path.basename(args.config))[0]
    if not args.train:
        bench(args, model, opt, x, y, batch, name, tr.get("optimizer", "adam"))
        return
    xt, yt = to_tensor(xte, norm), torch.from_numpy(yte)
    epochs = args.epochs or int(tr.get("epochs", "10"))
    lr_at = schedule(tr, epochs, -(-x.shape[0] // batch))
    train(args, model, opt, x, y, xt, yt, batch, epochs, lr_at, augmenter(data, gen), gen)


if __name__ == "__main__":
    sys.exit(main())
