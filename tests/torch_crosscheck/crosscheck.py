#!/usr/bin/env python3
"""cutrain's CPU backend against PyTorch in float64: one training step, forward and backward.

For each network given (dense_chain.ini, conv_geometry.ini and branches.ini beside this script reach
every layer type: dense, conv2d with padding valid and same at strides 1 and 2, max and average
pooling windowed and global, batch norm in training mode, dropout with its mask, flatten, add,
concat, every activation fused and as a layer, the softmax cross-entropy loss; sparse_grad.ini, the
sparse backward of a convolution whose gradient is mostly zeros), and for each
convolution path the build has (oneDNN, then the im2col + GEMM fallback), dump_step runs one
training step of the network on the CPU backend on the first 16 Fashion-MNIST training images and
writes what it read and computed. This script builds the same network in PyTorch from the same
config, in float64, from the same fp32 weights, input, labels and dropout masks (exactly
representable in float64), and compares:

- forward: every layer's output, the batch's mean loss, and the logits of an evaluation-mode
  forward after the step (batch norm on the running statistics the step moved, dropout off);
- backward: the gradient of every parameter, and the loss's gradient at every layer's output;
- the batch-norm running mean and variance the training forward left.

Each tensor must agree within 1e-5 relative, norm-wise. The data has no gradient in cutrain (its
first layer computes none), so the gradient at the input is not compared. Nor is the gradient at
the output of a layer with no parameter at or before it (a flatten of the data): cutrain computes
none there, as nothing would read it, and the check is that it dumped none.

The network here is not tools/torch_cpu_peer.py's: that one is PyTorch as its users write it, for
speed (symmetric `same` padding, NCHW flattening, its own initialisation and dropout draws); this
one repeats cutrain's arithmetic exactly (TensorFlow's padding split, NHWC flattening, cutrain's
weights and masks), for correctness.

Exit 0 passed, 1 failed, 77 skipped (PyTorch missing and --require not given).
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

TOLERANCE = 1e-5
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what, flush=True)


def read_safetensors(path, torch):
    """{name: float64 tensor} and the metadata of a safetensors file of F32 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    meta = header.pop("__metadata__", {})
    body = data[8 + size:]
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            raise ValueError("%s: %s is %s, expected F32" % (path, name, t["dtype"]))
        begin, end = t["data_offsets"]
        values = torch.frombuffer(bytearray(body[begin:end]), dtype=torch.float32) if end > begin else \
            torch.zeros(0, dtype=torch.float32)
        out[name] = values.reshape(t["shape"]).double()
    return out, meta


def read_config(path):
    """The layer sections in order, each (name, {key: value}); [data] and [train] left out."""
    layers = []
    with open(path) as f:
        for line in f:
            line = re.split(r"[;#]", line, maxsplit=1)[0].strip()
            m = re.match(r"\[([^\]]+)\]$", line)
            if m:
                layers.append((m.group(1), {}))
            elif "=" in line and layers:
                key, value = line.split("=", 1)
                layers[-1][1][key.strip()] = value.strip()
    return [(name, keys) for name, keys in layers if name not in ("data", "train")]


def on(value):
    """A boolean key's value as the config reads it."""
    return value.strip().lower() in ("on", "1", "true", "yes")


def window(size, k, stride, same):
    """Output size and (before, after) padding of one spatial dimension: same is ceil(size /
    stride) with TensorFlow's split, the odd pixel after (bottom, right); valid pads nothing."""
    if not same:
        return (size - k) // stride + 1, (0, 0)
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, (total // 2, total - total // 2)


class Net:
    """The config's network in PyTorch, float64, tensors kept NCHW (flat values as (n, c, 1, 1)).
    cutrain's tensors are NHWC: its flatten orders the values (h, w, c), which the flatten below
    keeps, so its dense weights are used as they are; its conv2d weights are OHWI, permuted here
    for conv2d, so that their gradients come back in cutrain's layout."""

    def __init__(self, torch, layers, params, dumped):
        self.torch, self.F = torch, torch.nn.functional
        self.layers, self.dumped = layers, dumped
        # leaf tensors in cutrain's layouts: their .grad is comparable as it is
        self.params = {k: v.clone().requires_grad_(not k.endswith(("running_mean", "running_var")))
                       for k, v in params.items()}

    def act(self, name, z):
        F = self.F
        return {"linear": lambda v: v, "relu": F.relu, "leaky": lambda v: F.leaky_relu(v, 0.1),
                "sigmoid": self.torch.sigmoid, "tanh": self.torch.tanh,
                "gelu": lambda v: F.gelu(v)}[name](z)   # gelu: the exact erf form, as cutrain's

    def pads(self, x, keys, k, stride):
        same = keys.get("padding", "valid") == "same"
        _, (top, bottom) = window(x.shape[2], k, stride, same)
        _, (left, right) = window(x.shape[3], k, stride, same)
        return left, right, top, bottom

    def pool(self, x, keys, kind):
        F = self.F
        if on(keys.get("global", "off")):
            k, stride, pads = (x.shape[2], x.shape[3]), 1, (0, 0, 0, 0)
        else:
            size = int(keys.get("size", "2"))
            stride = int(keys.get("stride", "0")) or size
            k, pads = (size, size), self.pads(x, keys, size, stride)
        if kind == "max":
            # padding never wins: -inf; max_pool2d keeps the first maximum of a tie, as cutrain does
            return F.max_pool2d(F.pad(x, pads, value=-math.inf), k, stride)
        # padding never counts: the window's sum over the cells it covers
        sums = F.avg_pool2d(F.pad(x, pads), k, stride, divisor_override=1)
        ones = self.torch.ones_like(x[:1, :1])
        counts = F.avg_pool2d(F.pad(ones, pads), k, stride, divisor_override=1)
        return sums / counts

    def layer(self, name, keys, xs, training):
        F, torch, p = self.F, self.torch, self.params
        kind = keys["type"]
        x = xs[0]
        n = x.shape[0]
        if kind == "dense":
            z = F.linear(x.reshape(n, -1), p[name + ".weight"], p.get(name + ".bias"))
            return self.act(keys.get("activation", "linear"), z).reshape(n, -1, 1, 1)
        if kind == "conv2d":
            size, stride = int(keys["size"]), int(keys.get("stride", "1"))
            w = p[name + ".weight"].permute(0, 3, 1, 2)   # OHWI to OIHW
            z = F.conv2d(F.pad(x, self.pads(x, keys, size, stride)), w, p.get(name + ".bias"), stride)
            return self.act(keys.get("activation", "linear"), z)
        if kind in ("maxpool", "avgpool"):
            return self.pool(x, keys, kind[:3])
        if kind == "batchnorm":
            # in place on the running statistics, as cutrain's forward moves its own (unbiased variance)
            z = F.batch_norm(x, p[name + ".running_mean"], p[name + ".running_var"], p[name + ".weight"],
                             p[name + ".bias"], training, float(keys.get("momentum", "0.1")),
                             float(keys.get("epsilon", "1e-5")))
            return self.act(keys.get("activation", "linear"), z)
        if kind == "dropout":
            if not training:
                return x
            mask = self.dumped[name + ".mask"].permute(0, 3, 1, 2)   # cutrain's draw, NHWC to NCHW
            return x * mask / (1.0 - float(keys["rate"]))
        if kind == "flatten":
            return x.permute(0, 2, 3, 1).reshape(n, -1, 1, 1)   # cutrain's (h, w, c) order
        if kind == "activation":
            return self.act(keys["activation"], x)
        if kind == "add":
            return self.act(keys.get("activation", "linear"), xs[0] + xs[1])
        if kind == "concat":
            return torch.cat(xs, dim=1)
        raise ValueError("layer [%s]: type %s is not known to the crosscheck" % (name, kind))

    def forward(self, x, training):
        """{layer: output} (NCHW) of a forward from x (NCHW)."""
        out, last = {}, None
        for name, keys in self.layers:
            if "inputs" in keys:
                srcs = [s.strip() for s in keys["inputs"].split(",")]
            else:
                srcs = [keys["input"]] if "input" in keys else [last]
            xs = [x if s is None else out[s] for s in srcs]
            out[name] = self.layer(name, keys, xs, training)
            last = name
        return out


def rel_err(torch, got, want):
    """||got - want|| / ||want|| over the whole tensor. Norm-wise, not element by element: an fp32
    sum of many terms is off by about its length times 6e-8 of the terms' size, not of the sum's, so
    an element that cancels to near zero (a gradient whose terms nearly balance, an output beside
    an activation's kink) has an element-wise error no fp32 code could meet, while an element that is
    wrong still moves the norm by its own size. A tensor with a NaN, or of another shape, is inf."""
    if tuple(got.shape) != tuple(want.shape) or not bool(torch.isfinite(got).all()):
        return math.inf
    den, num = float(want.norm()), float((got - want).norm())
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def nhwc(t):
    return t.permute(0, 2, 3, 1)


# The convolutions each network holds whose gradient is sparse enough for the CPU's sparse
# backward (cpu/conv_sparse.c): it must have run there, or its check would be the dense path's again.
SPARSE_BACKWARD = {"sparse_grad.ini": {"c_sparse", "c_s2"}}


def crosscheck(torch, config, folder, path, worst):
    """Compares one dump with PyTorch; records the largest errors per layer type in worst,
    {kind: [forward, backward]}. Returns the dump's convolution paths."""
    layers = read_config(config)
    params, _ = read_safetensors(os.path.join(folder, "params.safetensors"), torch)
    grads, _ = read_safetensors(os.path.join(folder, "grads.safetensors"), torch)
    dumped, meta = read_safetensors(os.path.join(folder, "tensors.safetensors"), torch)
    net = Net(torch, layers, params, dumped)
    # the input takes part in autograd so that every layer's output, a parameterless first layer's
    # too, has a gradient to compare
    x = dumped["input"].permute(0, 3, 1, 2).clone().requires_grad_(True)
    labels = dumped["labels"].reshape(-1).long()
    outs = net.forward(x, True)
    for y in outs.values():
        y.retain_grad()
    logits = outs[layers[-1][0]].reshape(x.shape[0], -1)
    loss = torch.nn.functional.cross_entropy(logits, labels)   # mean over the batch, as cutrain's
    loss.backward()
    with torch.no_grad():
        eval_logits = net.forward(x, False)[layers[-1][0]].reshape(x.shape[0], -1)

    tag = "%s (%s)" % (os.path.basename(config), path)
    rows = []

    def compare(what, kind, got, want, backward=False):
        err = rel_err(torch, got, want)
        rows.append((what, err))
        pair = worst.setdefault(kind, [None, None])
        pair[backward] = err if pair[backward] is None else max(pair[backward], err)
        if not err <= TOLERANCE:
            fail("%s: %s differs from PyTorch float64 by %.3g relative (tolerance %g)" % (tag, what, err, TOLERANCE))

    compare("loss", "softmax cross-entropy", dumped["loss"].reshape(-1), loss.detach().reshape(-1))
    compare("evaluation logits", "evaluation forward", dumped["eval_logits"].reshape(logits.shape), eval_logits)
    learns, last = {}, None   # a parameter at or before the layer: cutrain computes its gradient
    ran = dict(e.split("=") for e in filter(None, meta.get("conv_paths", "").split(",")))
    sparse = set(filter(None, meta.get("sparse_backward", "").split(",")))
    for name, keys in layers:
        kind = keys["type"]
        if kind in ("dense", "conv2d", "add", "activation"):
            kind += " " + keys.get("activation", "linear")
        if ran.get(name) == "winograd":
            kind += " (winograd)"   # its error apart from the direct kernels'
        if name in sparse:
            kind += " (sparse backward)"
        srcs = [s.strip() for s in keys["inputs"].split(",")] if "inputs" in keys else \
            [keys["input"]] if "input" in keys else [last]
        learns[name] = any(key.startswith(name + ".") for key in params) or \
            any(s is not None and learns[s] for s in srcs)
        last = name
        y = outs[name]
        compare("[%s] output" % name, kind, dumped[name + ".y"], nhwc(y.detach()))
        if not learns[name]:
            if name + ".dy" in dumped or name + ".dz" in dumped:
                fail("%s: [%s] has no parameter at or before it, yet a gradient at its output was dumped" % (tag, name))
            continue
        dy = y.grad if y.grad is not None else torch.zeros_like(y)
        if name + ".dz" in dumped:
            # a relu read only by a max pool, which applied relu's gradient (y > 0) as it routed
            if keys.get("activation") != "relu":
                fail("%s: [%s] dumped a pre-activation gradient, but its activation is not relu" % (tag, name))
            compare("[%s] gradient at the pre-activation" % name, kind, dumped[name + ".dz"],
                    nhwc(torch.where(y.detach() > 0, dy, torch.zeros_like(dy))), True)
        elif name + ".dy" in dumped:
            compare("[%s] gradient at the output" % name, kind, dumped[name + ".dy"], nhwc(dy), True)
        else:
            fail("%s: [%s] learns, but no gradient at its output was dumped" % (tag, name))
            continue
        for suffix in ("weight", "bias"):
            key = "%s.%s" % (name, suffix)
            if key in params:
                compare("[%s] %s gradient" % (name, suffix), kind, grads[key], net.params[key].grad, True)
        for suffix in ("running_mean", "running_var"):
            key = "%s.%s" % (name, suffix)
            if key in params:
                compare("[%s] %s after the step" % (name, suffix), kind, grads[key], net.params[key])
    print("%s: loss %.6f, convolutions %s, sparse backward %s" % (tag, float(loss), meta.get("conv_paths") or "none",
                                                                   ",".join(sorted(sparse)) or "none"))
    for what, err in rows:
        print("    %-44s %.2e" % (what, err))
    want = SPARSE_BACKWARD.get(os.path.basename(config), set())
    if not want <= sparse:
        fail("%s: [%s] should have run the sparse backward, and did not" % (tag, ", ".join(sorted(want - sparse))))
    return meta.get("conv_paths", "")


def check_paths(config, path, conv_paths):
    """Every convolution of a run ran on the path it was meant to: a oneDNN run that fell back to
    im2col for some layer would check im2col twice and oneDNN never. oneDNN's Winograd kernels
    (a 3x3 stride-1 convolution of channels in sixteens, on AVX-512) are its path too."""
    for entry in filter(None, conv_paths.split(",")):
        layer, ran = entry.split("=")
        if ran != path and not (path == "onednn" and ran == "winograd"):
            fail("%s: [%s] ran on %s in the %s run" % (os.path.basename(config), layer, ran, path))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="the dump_step program")
    ap.add_argument("--fmnist", required=True, help="Fashion-MNIST's .gz folder")
    ap.add_argument("--nets", nargs="+", required=True, help="the networks' configs")
    ap.add_argument("--require", action="store_true", help="fail, not skip, without PyTorch")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        msg = "PyTorch is not installed for %s (%s): Debian's python3-torch gives it to /usr/bin/python3; " \
              "CMake's CUTRAIN_TORCH_PYTHON names the Python to use" % (sys.executable, e)
        if args.require:
            print("FAIL: " + msg)
            return 1
        print("skipped: " + msg)
        return 77
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    worst = {}
    env = dict(os.environ, CT_FMNIST_DIR=args.fmnist)
    with tempfile.TemporaryDirectory(prefix="ct_crosscheck_") as work:
        for config in args.nets:
            for path in ("onednn", "im2col"):
                folder = os.path.join(work, "%s-%s" % (os.path.basename(config), path))
                os.makedirs(folder)
                p = subprocess.run([args.dump, config, folder, path], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env)
                if p.returncode == 77:
                    print("%s: %s" % (os.path.basename(config), p.stdout.strip()))
                    continue
                if p.returncode != 0:
                    fail("dump_step %s %s exited %d: %s" % (config, path, p.returncode, p.stderr.strip()))
                    continue
                conv_paths = crosscheck(torch, config, folder, path, worst)
                check_paths(config, path, conv_paths)
                if not conv_paths:
                    break   # no convolution: the paths do not differ
    print("largest relative error per layer type: forward (outputs, running statistics), backward "
          "(gradients at the outputs and of the parameters)")
    for kind in sorted(worst):
        print("    %-24s %s" % (kind, "  ".join("   -    " if e is None else "%.2e" % e for e in worst[kind])))
    if failures:
        print("%d tensors or runs failed" % len(failures))
        return 1
    print("every tensor within %g of PyTorch float64" % TOLERANCE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
