#!/usr/bin/env python3
"""`cutrain export` checked by the real readers, against `cutrain predict` on the same checkpoint.

For every network of models/ and the test networks that reach every layer type (the every-layer
compatibility fixture and tests/export/every_layer_flat.ini): train it briefly on a train_limit
subset (so batch-norm statistics are real), export the checkpoint to ONNX and safetensors, then
- onnx.checker.check_model (full_check) accepts the model;
- onnxruntime on Fashion-MNIST test images (the first --images of them, resized and replicated to
  the network's input shape for the CIFAR- and ImageNet-shaped networks) gives, for every image, the
  class `cutrain predict --probs` gives, and every probability within 1e-5 of predict's;
- the safetensors file, read by the safetensors package, holds one tensor per parameter and
  batch-norm statistic, named <layer>.weight / .bias / .running_mean / .running_var, each exactly
  the checkpoint's bytes in the documented shape.
A network trained in fp16 exports its fp32 masters (compared with predict in fp32), and its
--precision fp16 export runs in onnxruntime close to them. Then the bad inputs: a checkpoint of
another network, an opset cutrain does not write, an unknown format, an output folder that does not
exist; each fails with its message and leaves the output file as it was.

Networks whose input is not 28x28x1 (CIFAR, image folders) are trained on [data] format = synthetic
of their input shape and normalisation: the exported graph is the same, and the images they are
compared on are Fashion-MNIST's. The ImageNet-sized ResNet-18 is compared on fewer images
(--big-images) to keep CI's time: it is the one slow network on a CPU.

Exit 0 passed, 1 failed, 77 skipped (a package is missing and --require is not given).
"""
import argparse
import gzip
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

failures = []
report = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)
    return cond


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def write_idx4(path, images):
    """(n, h, w, c) uint8 as an IDX file of magic 0x00000804, which predict reads."""
    n, h, w, c = images.shape
    with open(path, "wb") as f:
        f.write(struct.pack(">I4I", 0x804, n, h, w, c))
        f.write(images.tobytes())


def ini_sections(text):
    """[(name, [lines])] in order; lines without the header."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*\[([^\]]+)\]", line)
        if m:
            out.append((m.group(1), []))
        elif out:
            out[-1][1].append(line)
    return out


def key_of(lines, key):
    for line in lines:
        m = re.match(r"\s*%s\s*=\s*([^;#]*)" % re.escape(key), line)
        if m:
            return m.group(1).strip()
    return None


def input_shape(sections):
    """The network's (h, w, c) as its [data] says: 28x28x1 for Fashion-MNIST files."""
    data = dict(sections)["data"]
    fmt = key_of(data, "format") or "idx"
    if fmt == "synthetic":
        h, w, c = [int(v) for v in key_of(data, "shape").split(",")]
        return h, w, c
    if fmt == "imagefolder":
        size = [int(v) for v in key_of(data, "image_size").split(",")]
        return size[0], size[-1], int(key_of(data, "channels") or 3)
    return 28, 28, 1


def test_config(src, fmnist, work):
    """src with its [data] on Fashion-MNIST (28x28x1) or synthetic data of its shape, and a short
    [train]; the layers as they are."""
    with open(src) as f:
        sections = ini_sections(f.read())
    h, w, c = input_shape(sections)
    norm = key_of(dict(sections)["data"], "normalize")
    if (h, w, c) == (28, 28, 1):
        data = ["format = idx",
                "train = %s/train-images-idx3-ubyte.gz" % fmnist, "train_labels = %s/train-labels-idx1-ubyte.gz" % fmnist,
                "test = %s/t10k-images-idx3-ubyte.gz" % fmnist, "test_labels = %s/t10k-labels-idx1-ubyte.gz" % fmnist]
    else:
        classes = key_of(sections[-1][1], "units") or "10"   # the output layer's
        data = ["format = synthetic", "shape = %d, %d, %d" % (h, w, c), "classes = " + classes, "count = 64",
                "test_count = 16"]
    if norm:
        data.append("normalize = " + norm)
    text = "[data]\n" + "\n".join(data) + "\n"
    for name, lines in sections:
        if name != "data":
            text += "[%s]\n%s\n" % (name, "\n".join(lines))
    path = os.path.join(work, os.path.basename(src))
    with open(path, "w") as f:
        f.write(text)
    return path, (h, w, c)


def run(cmd, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect is not None and p.returncode != expect:
        check(False, "%s exited %d (expected %d): %s" % (" ".join(cmd), p.returncode, expect, p.stderr.strip()))
    return p


def train(cli, config, work, sets, train_limit):
    ckdir = os.path.join(work, "ck-" + os.path.basename(config))
    # a small learning rate: a few steps move every weight and statistic without saturating the
    # softmax (ResNet-18 at the zoo's 0.1 ends one-hot, where every runtime agrees trivially)
    sets = ["--set", "train.epochs=1", "--set", "train.batch=16", "--set", "train.devices=cpu",
            "--set", "train.learning_rate=0.001", "--set", "data.train_limit=%d" % train_limit] + sets
    if "format = idx" in open(config).read():
        sets += ["--set", "data.test_limit=32"]
    run([cli, "train", "--config", config, "--checkpoint", ckdir, "-q"] + sets)
    cks = sorted(f for f in os.listdir(ckdir) if f.startswith("ckpt-")) if os.path.isdir(ckdir) else []
    return os.path.join(ckdir, cks[-1]) if cks else None


def predict_probs(cli, config, ckpt, idx, work):
    out = os.path.join(work, "predict.csv")
    run([cli, "predict", "--config", config, "--weights", ckpt, "--images", idx, "--out", out, "--probs",
         "--set", "train.precision=fp32", "--set", "train.batch=64", "--set", "train.devices=cpu", "-q"])
    import numpy as np
    rows = open(out).read().splitlines()
    header = rows[0].split(",")
    k = sum(1 for h in header if h.startswith("p_"))
    classes = np.array([int(r.split(",")[1]) for r in rows[1:]])
    probs = np.array([[float(v) for v in r.split(",")[3:3 + k]] for r in rows[1:]], dtype=np.float64)
    return classes, probs


def parse_checkpoint(path):
    """The layers (name, w, b, state counts), parameters and state of a checkpoint, as
    docs/checkpoint-format.md lays them out."""
    data = open(path, "rb").read()
    assert data[:8] == b"CUTRAIN\x1a"
    version, header_bytes, n_layers = struct.unpack_from("<3I", data, 8)
    pos, layers = 20, []
    for _ in range(n_layers):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        _, h, w, c, wc, bc, sc = struct.unpack_from("<I3i3Q", data, pos)
        pos += 4 + 12 + 24
        layers.append((name, wc, bc, sc))
    _, n_params, n_state, has_m, has_v = struct.unpack_from("<IQQII", data, pos)
    params = data[header_bytes:header_bytes + 4 * n_params]
    state_at = header_bytes + 4 * n_params * (1 + has_m + has_v)
    state = data[state_at:state_at + 4 * n_state]
    return layers, params, state


def check_safetensors(path, ckpt, name):
    from safetensors.numpy import load_file
    import numpy as np
    tensors = load_file(path)
    layers, params, state = parse_checkpoint(ckpt)
    want = {}
    p = s = 0
    for lname, wc, bc, sc in layers:
        if wc:
            want[lname + ".weight"] = params[4 * p:4 * (p + wc)]
        if bc:
            want[lname + ".bias"] = params[4 * (p + wc):4 * (p + wc + bc)]
        p += wc + bc
        if sc:
            half = sc // 2
            want[lname + ".running_mean"] = state[4 * s:4 * (s + half)]
            want[lname + ".running_var"] = state[4 * (s + half):4 * (s + sc)]
            s += sc
    check(sorted(tensors) == sorted(want), "%s: safetensors names %s, checkpoint's %s" % (name, sorted(tensors),
                                                                                            sorted(want)))
    same = sum(1 for k in want if k in tensors and tensors[k].dtype == np.float32 and tensors[k].tobytes() == want[k])
    check(same == len(want), "%s: %d of %d safetensors tensors are the checkpoint's bytes" % (name, same, len(want)))
    return len(want)


def onnx_probs(model_path, pixels):
    """pixels: (n, h, w, c) uint8 -> onnxruntime's probabilities, the input as NCHW floats."""
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    x = pixels.transpose(0, 3, 1, 2).astype(np.float32)
    out = []
    step = 100 if sess.get_inputs()[0].shape[0] == "N" else sess.get_inputs()[0].shape[0]
    for i in range(0, len(x), step):
        out.append(sess.run(["probabilities"], {"pixels": x[i:i + step]})[0])
    return np.concatenate(out).astype(np.float64)


def images_for(fmnist, shape, count):
    """The first `count` Fashion-MNIST test images, resized (nearest) and replicated to shape."""
    import numpy as np
    (n, h0, w0), pix = read_idx(os.path.join(fmnist, "t10k-images-idx3-ubyte.gz"))
    imgs = np.frombuffer(pix, dtype=np.uint8).reshape(n, h0, w0)[:count]
    h, w, c = shape
    ys = (np.arange(h) * h0) // h
    xs = (np.arange(w) * w0) // w
    imgs = imgs[:, ys][:, :, xs]
    return np.ascontiguousarray(np.repeat(imgs[:, :, :, None], c, axis=3))


def check_network(cli, src, fmnist, work, n_images, sets=(), label=None, fp16_run=False):
    import numpy as np
    import onnx
    name = label or os.path.splitext(os.path.basename(src))[0]
    work = os.path.join(work, name)   # each run its own config, checkpoints and files
    os.makedirs(work)
    config, shape = test_config(src, fmnist, work)
    big = shape[0] * shape[1] * shape[2] > 32 * 32 * 3
    ckpt = train(cli, config, work, list(sets), 16 if big else 256)
    if not check(ckpt is not None, "%s: training wrote no checkpoint" % name):
        return
    pixels = images_for(fmnist, shape, n_images)
    idx = os.path.join(work, "images-%dx%dx%d.idx" % shape)
    write_idx4(idx, pixels)
    classes, probs = predict_probs(cli, config, ckpt, idx, work)
    out = os.path.join(work, name + ".onnx")
    t0 = time.time()
    p = run([cli, "export", "--config", config, "--weights", ckpt, "--out", out])
    seconds = time.time() - t0
    if p.returncode:
        return
    model = onnx.load(out)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # the checker's own message
        check(False, "%s: onnx.checker: %s" % (name, e))
    got = onnx_probs(out, pixels)
    agree = int((got.argmax(1) == classes).sum())
    diff = float(np.abs(got - probs).max())
    check(agree == len(classes), "%s: onnxruntime's class is predict's for %d of %d images" % (name, agree, len(classes)))
    check(probs.max(1).min() < 0.99, "%s: every image's top probability is at least 0.99: a saturated softmax, whose "
          "agreement says little" % name)
    check(diff <= 1e-5, "%s: largest probability difference against predict %.3g (> 1e-5)" % (name, diff))
    meta = {e.key: e.value for e in model.metadata_props}
    check(meta.get("classes") == str(probs.shape[1]) and "[data]" in meta.get("config", ""),
          "%s: metadata holds the class count and the config: %s" % (name, sorted(meta)))
    opset = model.opset_import[0].version
    st = os.path.join(work, name + ".safetensors")
    run([cli, "export", "--config", config, "--weights", ckpt, "--out", st, "--format", "safetensors"])
    n_tensors = check_safetensors(st, ckpt, name) if os.path.exists(st) else 0
    line = ("%s: opset %d, %d bytes, exported in %.2f s; %d images: class agreement %d/%d, largest probability "
            "difference %.2g (predict's: %d distinct classes, top probability %.3f to %.3f); safetensors %d tensors"
            % (name, opset, os.path.getsize(out), seconds, len(classes), agree, len(classes), diff,
               len(set(classes.tolist())), probs.max(1).min(), probs.max(1).max(), n_tensors))
    report.append(line)
    print(line, flush=True)
    if fp16_run:
        half = os.path.join(work, name + "-fp16.onnx")
        run([cli, "export", "--config", config, "--weights", ckpt, "--out", half, "--precision", "fp16"])
        onnx.checker.check_model(onnx.load(half), full_check=True)
        hp = onnx_probs(half, pixels)
        hdiff = float(np.abs(hp - probs).max())
        hagree = int((hp.argmax(1) == classes).sum())
        check(hdiff < 0.05, "%s: the fp16 export's probabilities are within %.3g of predict's" % (name, hdiff))
        line = "%s --precision fp16: class agreement %d/%d, largest probability difference %.2g" % (
            name, hagree, len(classes), hdiff)
        report.append(line)
        print(line, flush=True)
    return config, ckpt, pixels, probs


def check_bad_inputs(cli, work, good, other):
    """Each bad input fails with its message, and a file already at --out is left as it was."""
    config, ckpt, pixels, probs = good
    out = os.path.join(work, "kept.onnx")
    with open(out, "wb") as f:
        f.write(b"before")
    # a dense layer (not the output) one unit wider than the checkpoint's
    sections = ini_sections(open(config).read())
    dense = [(n, int(key_of(ls, "units"))) for n, ls in sections[:-1] if key_of(ls, "type") == "dense"]
    layer, units = dense[0]
    cases = [
        ("a checkpoint of another network", ["--weights", other[1]], 1, r"holds \d+ layers but the config has \d+"),
        ("a layer changed since the checkpoint", ["--weights", ckpt, "--set", "%s.units=%d" % (layer, units + 4)], 1,
         r"layer \[%s\] expects output %d with \d+ weights and %d biases, the checkpoint has %d with \d+ and %d"
         % (layer, units + 4, units + 4, units, units)),
        ("opset 12", ["--weights", ckpt, "--opset", "12"], 2, r"opset 12 is not one cutrain writes \(13 to 21\)"),
        ("format foo", ["--weights", ckpt, "--format", "foo"], 2, r"--format foo: expected onnx or safetensors"),
        ("batch 0", ["--weights", ckpt, "--batch", "0"], 2, r"--batch 0"),
        ("a missing checkpoint", ["--weights", os.path.join(work, "none.ckpt")], 1, r"none\.ckpt"),
    ]
    for what, args, code, pattern in cases:
        p = run([cli, "export", "--config", config, "--out", out] + args, expect=code)
        check(re.search(pattern, p.stderr) is not None, "%s: message %r lacks %r" % (what, p.stderr, pattern))
        check(open(out, "rb").read() == b"before", "%s: the existing --out file changed" % what)
        report.append("bad input, %s: exit %d, %s" % (what, p.returncode, p.stderr.strip()))
    missing = os.path.join(work, "no-such-folder", "m.onnx")
    p = run([cli, "export", "--config", config, "--weights", ckpt, "--out", missing], expect=1)
    check("no-such-folder" in p.stderr and not os.path.exists(missing), "an output folder that does not exist: %r"
          % p.stderr)
    report.append("bad input, an output folder that does not exist: exit %d, %s" % (p.returncode, p.stderr.strip()))
    leftovers = [f for _, _, files in os.walk(work) for f in files if ".tmp." in f]
    check(not leftovers, "temporary files left behind: %s" % leftovers)
    # a dynamic batch and a fixed one both hold
    fixed = os.path.join(work, "fixed.onnx")
    run([cli, "export", "--config", config, "--weights", ckpt, "--out", fixed, "--batch", "8", "--opset", "21"])
    import onnx
    m = onnx.load(fixed)
    dim = m.graph.input[0].type.tensor_type.shape.dim[0]
    check(dim.dim_value == 8 and m.opset_import[0].version == 21, "--batch 8 --opset 21: batch %s, opset %d"
          % (dim, m.opset_import[0].version))
    onnx.checker.check_model(m, full_check=True)
    # opset 21 writes gelu as ONNX's Gelu, not spelt out: the same probabilities
    import numpy as np
    got = onnx_probs(fixed, pixels[:8])
    diff = float(np.abs(got - probs[:8]).max())
    check(diff <= 1e-5, "--opset 21 (Gelu): largest probability difference against predict %.3g" % diff)
    report.append("opset 21, batch 8: %d bytes, largest probability difference against predict on 8 images %.2g"
                  % (os.path.getsize(fixed), diff))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--fmnist", required=True)
    ap.add_argument("--models", required=True, help="the models/ folder")
    ap.add_argument("--nets", nargs="+", required=True, help="test networks reaching every layer type")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--big-images", type=int, default=100, help="for networks above 32x32x3 inputs")
    ap.add_argument("--only", help="a regular expression: only the networks whose file name matches")
    ap.add_argument("--require", action="store_true", help="fail, not skip, when a package is missing")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        print("%s: %s" % ("FAIL" if args.require else "skipped", e))
        return 1 if args.require else 77
    nets = list(args.nets) + sorted(os.path.join(args.models, f) for f in os.listdir(args.models)
                                    if f.endswith(".ini"))
    if args.only:
        nets = [n for n in nets if re.search(args.only, os.path.basename(n))]
    with tempfile.TemporaryDirectory() as work:
        done = {}
        for src in nets:
            shape = input_shape(ini_sections(open(src).read()))
            n = args.images if shape[0] * shape[1] * shape[2] <= 32 * 32 * 3 else args.big_images
            done[src] = check_network(args.cli, src, args.fmnist, work, n)
        # trained in fp16: the fp32 masters are exported; --precision fp16 halves them
        check_network(args.cli, args.nets[-1], args.fmnist, work, args.images, sets=["--set", "train.precision=fp16"],
                      label="every_layer_flat-trained-fp16", fp16_run=True)
        ok = [v for v in done.values() if v]
        if len(ok) >= 2:
            check_bad_inputs(args.cli, work, ok[0], ok[1])
    print("\n".join(report))
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
