#!/usr/bin/env python3
"""Image-folder input pipelines of other frameworks, on the same folder as cutrain's, for the
images/s and images per CPU-second beside `cutrain bench --input-only`.

Each peer reads a folder of class folders (as tools/make_image_sets.py writes), crops a random
area (8%-100%, aspect 3/4-4/3, as ImageNet training does), resizes it to --size, flips half of the
images and delivers batches of --batch, with --workers decoding threads or processes:
    torchvision  ImageFolder + RandomResizedCrop + RandomHorizontalFlip + PILToTensor (uint8) and a
                 DataLoader(num_workers=W, persistent_workers) (worker processes: PIL decodes)
    dali         DALI's CPU pipeline (device_id=None, num_threads=W): readers.file,
                 decoders.image_random_crop(device='cpu'), resize, flip (uint8)
    tfdata       tf.data written for speed: file list, read_file, sample_distorted_bounding_box +
                 decode_and_crop_jpeg (decodes only the crop), resize, flip, batch, AUTOTUNE, in a
                 private thread pool of W threads (uint8)
    keras        image_dataset_from_directory as its tutorial writes it (resizes the whole image:
                 no random crop; float32) + RandomFlip, in a private pool of W threads
After --warmup batches it times --batches, and prints one JSON line: images/s, the CPU seconds
(user + system) of the process and its worker processes over the timed part, images per
CPU-second, and MB/s of files (images x the folder's mean file size: what each image costs to
read; the peers do not count their reads).

--compare runs `cutrain bench --input-only` and the peers in turn (each a fresh process),
--rounds times for each of --workers, and prints per runner the median and range of images/s and
images per CPU-second and the ratio cutrain / peer of the medians. The runner cutrain-libjpeg in
--peers is cutrain with libjpeg-turbo's own Huffman decoder ([data] jpeg_huffman = libjpeg): what
cutrain's decoder saves, measured in the same rotation.

Install (outside the repository; Debian 12, Python 3.11):
    apt-get install python3-pil python3-torchvision      # torchvision runs with /usr/bin/python3
    python3 -m venv ~/venv-peers
    ~/venv-peers/bin/pip install tensorflow-cpu nvidia-dali-cuda130 pillow
                                                         # dali, tfdata, keras run with that venv
Examples:
    /usr/bin/python3 tools/image_peers.py --peer torchvision --dir imgsets/imagenet/train --workers 2
    ~/venv-peers/bin/python tools/image_peers.py --peer dali --dir imgsets/imagenet/train --workers 2
    python3 tools/image_peers.py --compare --dir imgsets/imagenet/train \\
        --cutrain build/cutrain --config models/imagefolder_input.ini
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

PEERS = ["torchvision", "dali", "tfdata", "keras"]
IMAGE_EXT = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG")


# ---- measuring ----

def _proc_ticks(pid):
    """utime + stime of one process from /proc (clock ticks), None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])      # fields 14 and 15, counted from 1 before ')'


def _descendants(root):
    """The pids of root's live descendants (from every /proc/PID/stat's parent)."""
    parent = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                text = f.read()
        except OSError:
            continue
        parent[int(name)] = int(text[text.rfind(")") + 2:].split()[1])
    out, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        frontier += kids
    return out


def cpu_seconds():
    """User + system seconds of this process, its reaped children and its live descendants
    (DataLoader's worker processes stay alive while timed: persistent_workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime
    hz = os.sysconf("SC_CLK_TCK")
    for pid in _descendants(os.getpid()):
        t = _proc_ticks(pid)
        if t is not None:
            total += t / hz
    return total


def folder_files(root):
    """(paths, labels, class names) of a folder of class folders, sorted as ImageFolder sorts."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    paths, labels = [], []
    for i, c in enumerate(classes):
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c))):
            for n in sorted(names):
                if n.endswith(IMAGE_EXT):
                    paths.append(os.path.join(dirpath, n))
                    labels.append(i)
    if not paths:
        sys.exit("image_peers.py: no images in class folders under %s" % root)
    return paths, labels, classes


def time_batches(batches, warmup, count, describe):
    """Consume warmup batches, then time count; returns the measurements (describe(batch) says
    the batch's shape and type, read once)."""
    it = iter(batches)
    for _ in range(warmup):
        next(it)
    first = None
    c0, t0 = cpu_seconds(), time.perf_counter()
    images = 0
    for _ in range(count):
        b = next(it)
        if first is None:
            first = b
        images += b[1]
    t1 = time.perf_counter()
    c1 = cpu_seconds()
    return {"images": images, "seconds": t1 - t0, "cpu_seconds": c1 - c0, "output": describe(first[0])}


def forever(make_epoch):
    """Batches over as many epochs as asked for, each as (batch, images in it)."""
    while True:
        for b in make_epoch():
            yield b


# ---- the peers ----

def run_torchvision(a):
    import torch
    import torchvision
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(a.size), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    ds = datasets.ImageFolder(a.dir, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                     persistent_workers=a.workers > 0, drop_last=True)
    batches = forever(lambda: ((x, x.shape[0]) for x, _ in dl))
    r = time_batches(batches, a.warmup, a.batches, lambda x: "%s %s" % (str(x.dtype).replace("torch.", ""),
                                                                            list(x.shape)))
    r["versions"] = {"torch": torch.__version__, "torchvision": torchvision.__version__}
    return r


def run_dali(a):
    import nvidia.dali as dali
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types

    @dali.pipeline_def(batch_size=a.batch, num_threads=a.workers, device_id=None, seed=a.seed)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=a.dir, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3])
        images = fn.resize(images, resize_x=a.size, resize_y=a.size)
        images = fn.flip(images, horizontal=fn.random.coin_flip())
        return images, labels

    p = pipe()
    p.build()

    def gen():
        while True:
            images, _ = p.run()
            yield images.as_tensor(), len(images)

    r = time_batches(gen(), a.warmup, a.batches,
                     lambda x: "%s %s" % (str(x.dtype).split(".")[-1].lower(), list(x.shape())))
    r["versions"] = {"dali": dali.__version__}
    return r


def _tf_limited(tf, a):
    """tf.data's options for W threads: a private pool of W, one thread inside each op, and
    AUTOTUNE's CPU budget W."""
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = a.workers
    opts.threading.max_intra_op_parallelism = 1
    opts.autotune.enabled = True
    opts.autotune.cpu_budget = a.workers
    return opts


def _tf_threads(tf, a):
    tf.config.threading.set_inter_op_parallelism_threads(a.workers)
    tf.config.threading.set_intra_op_parallelism_threads(a.workers)


def run_tfdata(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    _tf_threads(tf, a)
    tf.random.set_seed(a.seed)
    paths, labels, _ = folder_files(a.dir)
    size = a.size
    png = paths[0].lower().endswith(".png")

    def load(path, label):
        data = tf.io.read_file(path)
        if png:
            img = tf.io.decode_png(data, channels=3)
            shape = tf.shape(img)
        else:
            shape = tf.io.extract_jpeg_shape(data)
        begin, extent, _ = tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
            area_range=(0.08, 1.0), aspect_ratio_range=(3 / 4, 4 / 3), max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        y, x, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(extent)
        if png:
            img = tf.image.crop_to_bounding_box(img, y, x, h, w)
        else:
            img = tf.image.decode_and_crop_jpeg(data, tf.stack([y, x, h, w]), channels=3)
        img = tf.image.resize(img, [size, size], method="bilinear")
        img = tf.image.random_flip_left_right(tf.cast(tf.clip_by_value(img + 0.5, 0, 255), tf.uint8))
        return img, label

    ds = (tf.data.Dataset.from_tensor_slices((paths, labels)).shuffle(len(paths), seed=a.seed)
          .repeat().map(load, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(a.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
          .with_options(_tf_limited(tf, a)))
    batches = ((x, int(x.shape[0])) for x, _ in ds)
    r = time_batches(batches, a.warmup, a.batches, lambda x: "%s %s" % (x.dtype.name, list(x.shape)))
    r["versions"] = {"tensorflow": tf.__version__}
    return r


def run_keras(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import keras
    _tf_threads(tf, a)
    ds = keras.utils.image_dataset_from_directory(a.dir, image_size=(a.size, a.size), batch_size=a.batch,
                                                  shuffle=True, seed=a.seed, verbose=False)
    flip = keras.layers.RandomFlip("horizontal", seed=a.seed)
    ds = (ds.map(lambda x, y: (flip(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE).with_options(_tf_limited(tf, a)))
    # the last batch of an epoch is short: every batch counts its own images
    batches = forever(lambda: ((x, int(x.shape[0])) for x, _ in ds))
    r = time_batches(batches, a.warmup, a.batches, lambda x: "%s %s" % (x.dtype.name, list(x.shape)))
    r["versions"] = {"tensorflow": tf.__version__, "keras": keras.__version__}
    return r


RUNNERS = {"torchvision": run_torchvision, "dali": run_dali, "tfdata": run_tfdata, "keras": run_keras}


def mean_file_bytes(root):
    paths, _, _ = folder_files(root)
    return sum(os.path.getsize(p) for p in paths) / len(paths)


def run_peer(a):
    r = RUNNERS[a.peer](a)
    r["images_per_s"] = r["images"] / r["seconds"]
    r["images_per_cpu_s"] = r["images"] / r["cpu_seconds"] if r["cpu_seconds"] > 0 else None
    r["mb_per_s"] = r["images_per_s"] * mean_file_bytes(a.dir) / 1e6
    out = {"peer": a.peer, "dir": a.dir, "workers": a.workers, "batch": a.batch, "warmup": a.warmup,
           "batches": a.batches}
    out.update(r)
    for k in ("seconds", "cpu_seconds", "images_per_s", "images_per_cpu_s", "mb_per_s"):
        if out[k] is not None:
            out[k] = round(out[k], 3 if "seconds" in k else 1)
    print(json.dumps(out), flush=True)


# ---- --compare ----

def run_json(cmd, env=None):
    """The last JSON line a command prints, or {'error': ...}."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    tail = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return {"error": tail[:200]}


def cutrain_cmd(a, workers):
    d = os.path.abspath(a.dir)
    # the test set is opened too: the folder's sibling test/ where there is one, else the folder
    test = os.path.join(os.path.dirname(d), "test")
    test = test if os.path.isdir(test) and test != d else d
    cmd = [a.cutrain, "bench", "--input-only", "--config", a.config, "--warmup", str(a.warmup), "--steps",
           str(a.batches), "--batch", str(a.batch), "--set", "data.workers=%d" % workers,
           "--set", "data.train=" + d, "--set", "data.test=" + test, "--set", "data.image_size=%d" % a.size,
           "--set", "data.augment=random_resized_crop, flip", "--set", "data.cache=none",
           # uint8 batches, as the peers deliver them (and as cutrain ships them to a GPU)
           "--set", "data.augment_on=gpu"]
    return cmd


def peer_cmd(a, peer, workers):
    python = a.python_torch if peer == "torchvision" else os.path.expanduser(a.python_venv)
    return [python, os.path.abspath(__file__), "--peer", peer, "--dir", a.dir, "--workers", str(workers),
            "--batch", str(a.batch), "--batches", str(a.batches), "--warmup", str(a.warmup),
            "--size", str(a.size), "--seed", str(a.seed)]


def compare(a):
    runners = ["cutrain"] + [p for p in a.peers.split(",") if p]
    workers = [int(w) for w in a.workers_list.split(",")]
    results = {(r, w): [] for r in runners for w in workers}
    errors = {}
    for rnd in range(a.rounds):
        for w in workers:
            for r in runners:
                if (r, w) in errors:
                    continue
                cmd = cutrain_cmd(a, w) if r == "cutrain" else \
                    cutrain_cmd(a, w) + ["--set", "data.jpeg_huffman=libjpeg"] if r == "cutrain-libjpeg" else \
                    peer_cmd(a, r, w)
                res = run_json(cmd)
                if "error" in res:
                    errors[(r, w)] = res["error"]
                    print("round %d workers %d %s: failed: %s" % (rnd + 1, w, r, res["error"]), file=sys.stderr)
                    continue
                if r.startswith("cutrain") and res.get("images_per_cpu_s") is None and res.get("cpu_seconds"):
                    res["images_per_cpu_s"] = res["batches"] * res["batch"] / res["cpu_seconds"]
                results[(r, w)].append(res)
                print("round %d workers %d %-11s %8.1f images/s %8s images/cpu-s" % (
                    rnd + 1, w, r, res["images_per_s"],
                    "%.1f" % res["images_per_cpu_s"] if res.get("images_per_cpu_s") else "-"), file=sys.stderr)

    def stat(rows, key):
        v = [x[key] for x in rows if x.get(key) is not None]
        return (statistics.median(v), min(v), max(v)) if v else None

    print("folder: %s, batch %d, %d timed batches after %d, %d rounds, size %d" % (
        a.dir, a.batch, a.batches, a.warmup, a.rounds, a.size))
    print("| workers | runner | images/s median (range) | images/CPU-s median (range) | MB/s | "
          "cutrain/runner images/s | cutrain/runner images/CPU-s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for w in workers:
        base = results[("cutrain", w)]
        b_ips, b_cpu = stat(base, "images_per_s"), stat(base, "images_per_cpu_s")
        for r in runners:
            rows = results[(r, w)]
            if not rows:
                print("| %d | %s | failed: %s | | | | |" % (w, r, errors.get((r, w), "no result")))
                continue
            ips, cpu, mb = stat(rows, "images_per_s"), stat(rows, "images_per_cpu_s"), stat(rows, "mb_per_s")
            fmt = lambda s: "%.0f (%.0f-%.0f)" % s if s else "-"
            ratio = lambda b, p: "%.2f" % (b[0] / p[0]) if b and p and p[0] > 0 else "-"
            print("| %d | %s | %s | %s | %s | %s | %s |" % (
                w, r, fmt(ips), fmt(cpu), "%.1f" % mb[0] if mb else "-",
                ratio(b_ips, ips) if r != "cutrain" else "", ratio(b_cpu, cpu) if r != "cutrain" else ""))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"%s/%d" % k: v for k, v in results.items()}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--peer", choices=PEERS, help="run one peer and print its JSON line")
    ap.add_argument("--compare", action="store_true", help="cutrain and the peers in turn: the table")
    ap.add_argument("--dir", required=True, help="the folder of class folders")
    ap.add_argument("--workers", type=int, default=1, help="--peer: decoding threads or processes")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=10, help="timed batches (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed batches first (default 2)")
    ap.add_argument("--size", type=int, default=224, help="the crop's side (default 224)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="--compare: rounds (default 3)")
    ap.add_argument("--workers-list", default="1,2", help="--compare: the worker counts (default 1,2)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="--compare: which peers (default all; cutrain-libjpeg is cutrain with libjpeg-turbo's "
                         "Huffman decoder)")
    ap.add_argument("--cutrain", default="build/cutrain", help="--compare: the cutrain command")
    ap.add_argument("--config", default="models/imagefolder_input.ini",
                    help="--compare: the config cutrain opens (data.train, image_size, augment, workers "
                         "and cache are set on its command line)")
    ap.add_argument("--python-torch", default="/usr/bin/python3", help="--compare: Python with torchvision")
    ap.add_argument("--python-venv", default="~/venv-peers/bin/python",
                    help="--compare: Python with tensorflow and DALI")
    ap.add_argument("--json-out", help="--compare: also write every run's line here")
    a = ap.parse_args()
    if bool(a.peer) == a.compare:
        ap.error("give one of --peer NAME or --compare")
    if a.workers < 1 or a.batches < 1 or a.warmup < 0:
        ap.error("--workers and --batches need at least 1, --warmup at least 0")
    if a.compare:
        compare(a)
    else:
        run_peer(a)


if __name__ == "__main__":
    main()
