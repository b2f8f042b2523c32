"""cutrain against PyTorch on the CPU, side by side in one run (docs/cpu-benchmarks.md).

Throughput (the default): for each model row, N rounds; each round runs `cutrain bench` and
tools/torch_cpu_peer.py on the same config, batch, threads and data, one after the other, the order
swapped every round so that a drift of the machine weighs on both. Prints each round's images/s and
the ratio cutrain / PyTorch, then per model the median ratio and its range, and both processes'
peak resident memory.

Time to accuracy (--time-to-accuracy): for each model and seed, `cutrain train` and the peer's
--train (per-epoch test evaluation in both), alternately; the figure is the wall-clock seconds from
the first training step to the end of the first epoch whose test accuracy reaches the target (the
data loading before it left out, the evaluations after each epoch counted), read by this script's
clock as each epoch's line arrives. Prints every run, then per model the median over the seeds and
the speed-up PyTorch / cutrain.

Python 3's standard library only; the peer needs PyTorch (Debian: apt-get install python3-torch).

  python3 tools/cpu_bench.py --rounds 3 --threads 2
  python3 tools/cpu_bench.py --models fmnist_cnn:256 --rounds 5
  python3 tools/cpu_bench.py --models cifar_resnet18 --set train.winograd=off
  python3 tools/cpu_bench.py --time-to-accuracy --seeds 1,2,3 --threads 2
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# model, batch, warmup steps, timed steps (sized for about 5 to 20 s a run on 2 cores)
ROWS = [("fmnist_mlp", 256, 20, 200), ("fmnist_cnn", 256, 5, 30), ("fmnist_convnet", 64, 5, 40),
        ("fmnist_cnn_bn", 128, 3, 20), ("cifar_resnet18", 128, 2, 5)]
TARGETS = [("fmnist_mlp", 0.883), ("fmnist_convnet", 0.91)]
FMNIST = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
          "t10k-labels-idx1-ubyte.gz"]


def parse_args():
    ap = argparse.ArgumentParser(description="cutrain against PyTorch on the CPU, alternating, same run")
    ap.add_argument("--cutrain", default=os.path.join(ROOT, "build", "cutrain"), help="the cutrain command")
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
                    help="the Python with PyTorch for the peer (default: Debian's, /usr/bin/python3)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both (default: every core)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST's four .gz files")
    ap.add_argument("--cifar", default="", help="CIFAR-10's binary batches (default: the config's synthetic "
                    "CIFAR-shaped data)")
    ap.add_argument("--models", default="", help="comma list of model[:batch] (throughput) or model[:target] "
                    "(--time-to-accuracy); default: every row")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: per row)")
    ap.add_argument("--warmup", type=int, default=-1, help="untimed steps (default: per row)")
    ap.add_argument("--time-to-accuracy", action="store_true")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=0, help="time to accuracy: instead of the config's")
    ap.add_argument("--train-limit", type=int, default=0, help="time to accuracy: the first N training images only")
    ap.add_argument("--test-limit", type=int, default=0, help="time to accuracy: the first N test images only")
    ap.add_argument("--json", default="", help="also write every figure to this file")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=V",
                    help="a config override for cutrain alone (repeatable), e.g. train.winograd=off for the "
                         "direct convolutions, PyTorch's arithmetic")
    return ap.parse_args()


def config_path(model):
    return os.path.join(ROOT, "models", model + ".ini")


def cifar_config(model, folder, tmp):
    """The model's .ini with its [data] reading CIFAR-10's binary files from folder."""
    drop = {"format", "shape", "classes", "count", "test_count", "train", "test"}
    out, section = [], ""
    with open(config_path(model)) as f:
        for line in f:
            m = re.match(r"\s*\[(\w+)\]", line)
            if m:
                section = m.group(1)
                out.append(line)
                if section == "data":
                    out.append(f"format = cifar10\ntrain = {folder}\ntest = {folder}\n")
                continue
            key = line.split("=", 1)[0].strip()
            if section == "data" and "=" in line and key in drop:
                continue
            out.append(line)
    path = os.path.join(tmp, model + ".ini")
    with open(path, "w") as f:
        f.writelines(out)
    return path


def is_idx(path):
    with open(path) as f:
        return not re.search(r"^\s*format\s*=\s*(synthetic|cifar10|imagefolder)", f.read(), re.M)


def cutrain_args(a, model, tmp):
    """`--config` and the --set options that give cutrain the data and threads the peer gets."""
    path = config_path(model)
    sets = ["--devices", "cpu", "--set", f"train.threads={a.threads}"]
    for kv in a.set:
        sets += ["--set", kv]
    if a.cifar and not is_idx(path):
        path = cifar_config(model, a.cifar, tmp)
    elif is_idx(path):
        for key, name in zip(("train", "train_labels", "test", "test_labels"), FMNIST):
            sets += ["--set", f"data.{key}={os.path.join(a.data, name)}"]
    return ["--config", path] + sets


def peer_args(a, model):
    path = config_path(model)
    args = [a.python, os.path.join(ROOT, "tools", "torch_cpu_peer.py"), "--config", path, "--threads",
            str(a.threads)]
    if is_idx(path):
        args += ["--data", a.data]
    elif a.cifar:
        args += ["--cifar", a.cifar]
    return args


def run(cmd, on_line=None):
    """Runs cmd; on_line(line, seconds since start) for each stdout line, True to stop it. Returns
    (exit code, stdout, peak resident MiB of the process, stderr)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        t0, lines, stopped = time.perf_counter(), [], False
        for line in p.stdout:
            lines.append(line)
            if on_line and not stopped and on_line(line, time.perf_counter() - t0):
                stopped = True
                p.terminate()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        rc = 0 if stopped else p.returncode
        return rc, "".join(lines), round(usage.ru_maxrss / 1024.0, 1), err.read().decode(errors="replace")


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def fail(what, cmd, rc, out, err):
    sys.exit(f"cpu_bench: {what} failed (exit {rc}): {' '.join(cmd)}\n{out[-2000:]}{err[-2000:]}")


def spread(values):
    return f"{statistics.median(values):.2f}x (range {min(values):.2f}-{max(values):.2f})"


def throughput(a, tmp):
    rows = []
    for spec in a.models.split(",") if a.models else [f"{m}:{b}" for m, b, _, _ in ROWS]:
        model, _, batch = spec.partition(":")
        known = {m: (b, w, s) for m, b, w, s in ROWS}.get(model, (64, 5, 20))
        rows.append((model, int(batch) if batch else known[0], a.warmup if a.warmup >= 0 else known[1],
                     a.steps or known[2]))
    results = []
    print(f"threads {a.threads}; cutrain {a.cutrain}{''.join(' --set ' + kv for kv in a.set)}; "
          f"peer {a.python} tools/torch_cpu_peer.py; CIFAR: {a.cifar or 'synthetic (the config)'}", flush=True)
    print(f"{'model':16} {'batch':>5} {'round':>5} {'cutrain img/s':>14} {'pytorch img/s':>14} {'ratio':>7} "
          f"{'cutrain MiB':>12} {'pytorch MiB':>12}", flush=True)
    for model, batch, warmup, steps in rows:
        ratios = []
        for r in range(1, a.rounds + 1):
            ct_cmd = [a.cutrain, "bench"] + cutrain_args(a, model, tmp) + [
                "--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup)]
            pt_cmd = peer_args(a, model) + ["--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup)]
            figures = {}
            order = [("cutrain", ct_cmd), ("pytorch", pt_cmd)]
            for who, cmd in order if r % 2 else order[::-1]:
                rc, out, rss, err = run(cmd)
                line = last_json(out) if rc == 0 else None
                if not line:
                    fail(who, cmd, rc, out, err)
                figures[who] = (float(line["images_per_s"]), rss)
            ratio = figures["cutrain"][0] / figures["pytorch"][0]
            ratios.append(ratio)
            results.append(dict(model=model, batch=batch, round=r, steps=steps, warmup=warmup,
                                cutrain_images_per_s=figures["cutrain"][0], pytorch_images_per_s=figures["pytorch"][0],
                                ratio=round(ratio, 3), cutrain_peak_rss_mib=figures["cutrain"][1],
                                pytorch_peak_rss_mib=figures["pytorch"][1]))
            print(f"{model:16} {batch:5} {r:5} {figures['cutrain'][0]:14.1f} {figures['pytorch'][0]:14.1f} "
                  f"{ratio:6.2f}x {figures['cutrain'][1]:12.0f} {figures['pytorch'][1]:12.0f}", flush=True)
        print(f"{model:16} {batch:5} cutrain / pytorch: {spread(ratios)} over {len(ratios)} rounds", flush=True)
    return results


def cutrain_epochs(a, model, seed, target, tmp):
    """Times from the first step to each epoch's line; stops at the target."""
    cmd = [a.cutrain, "train"] + cutrain_args(a, model, tmp) + ["--set", f"train.seed={seed}"]
    if a.epochs:
        cmd += ["--set", f"train.epochs={a.epochs}"]
    if a.train_limit:
        cmd += ["--set", f"data.train_limit={a.train_limit}"]
    if a.test_limit:
        cmd += ["--set", f"data.test_limit={a.test_limit}"]
    state = {"t0": None, "epochs": []}

    def on_line(line, t):
        if state["t0"] is None and re.search(r" training images, batch \d+", line):
            state["t0"] = t  # printed just before the first step
        m = re.match(r"epoch (\d+)/\d+: .* test_acc ([0-9.]+)", line)
        if m and state["t0"] is not None:
            state["epochs"].append((int(m.group(1)), float(m.group(2)), t - state["t0"]))
            return float(m.group(2)) >= target
        return False
    rc, out, rss, err = run(cmd, on_line)
    if rc != 0 or not state["epochs"]:
        fail("cutrain train", cmd, rc, out, err)
    return state["epochs"], rss


def peer_epochs(a, model, seed, target):
    cmd = peer_args(a, model) + ["--train", "--seed", str(seed), "--target", str(target)]
    for flag, v in (("--epochs", a.epochs), ("--train-limit", a.train_limit), ("--test-limit", a.test_limit)):
        if v:
            cmd += [flag, str(v)]
    state = {"t0": None, "epochs": []}

    def on_line(line, t):
        if not line.startswith("{"):
            return False
        ev = json.loads(line)
        if ev.get("event") == "start":
            state["t0"] = t
        elif ev.get("event") == "epoch" and state["t0"] is not None:
            state["epochs"].append((ev["epoch"], ev["test_accuracy"], t - state["t0"]))
        return False
    rc, out, rss, err = run(cmd, on_line)
    if rc != 0 or not state["epochs"]:
        fail("the peer", cmd, rc, out, err)
    return state["epochs"], rss


def reached(epochs, target):
    """(seconds, epoch) of the first epoch at or above target, or (None, None)."""
    for epoch, acc, t in epochs:
        if acc >= target:
            return t, epoch
    return None, None


def time_to_accuracy(a, tmp):
    specs = a.models.split(",") if a.models else [f"{m}:{t}" for m, t in TARGETS]
    seeds = [int(s) for s in a.seeds.split(",")]
    results = []
    print(f"threads {a.threads}; seeds {seeds}; seconds from the first step to the first epoch at the target "
          f"(evaluations included)", flush=True)
    for spec in specs:
        model, _, target = spec.partition(":")
        target = float(target) if target else dict(TARGETS)[model]
        times = {"cutrain": [], "pytorch": []}
        for k, seed in enumerate(seeds):
            runs = [("cutrain", lambda: cutrain_epochs(a, model, seed, target, tmp)),
                    ("pytorch", lambda: peer_epochs(a, model, seed, target))]
            for who, go in runs if k % 2 == 0 else runs[::-1]:
                epochs, rss = go()
                secs, epoch = reached(epochs, target)
                best = max(acc for _, acc, _ in epochs)
                times[who].append(secs)
                results.append(dict(model=model, target=target, seed=seed, who=who, seconds=secs, epoch=epoch,
                                    best_accuracy=best, epochs=epochs, peak_rss_mib=rss))
                said = f"{secs:.1f} s at epoch {epoch}" if secs is not None else f"not reached (best {best:.4f})"
                print(f"{model:16} target {target} seed {seed} {who:8} {said}  peak {rss:.0f} MiB", flush=True)
        med = {w: statistics.median(v) if all(x is not None for x in v) else None for w, v in times.items()}
        if med["cutrain"] and med["pytorch"]:
            print(f"{model:16} median cutrain {med['cutrain']:.1f} s, pytorch {med['pytorch']:.1f} s: "
                  f"cutrain {med['pytorch'] / med['cutrain']:.2f}x faster to {target}", flush=True)
        else:
            print(f"{model:16} a run did not reach {target}: no median", flush=True)
    return results


def main():
    a = parse_args()
    if not os.access(a.cutrain, os.X_OK):
        sys.exit(f"cpu_bench: no cutrain command at {a.cutrain} (build it, or give --cutrain)")
    with tempfile.TemporaryDirectory() as tmp:
        results = time_to_accuracy(a, tmp) if a.time_to_accuracy else throughput(a, tmp)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(threads=a.threads, cifar=a.cifar or "synthetic", cutrain_sets=a.set, results=results), f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
