#!/usr/bin/env python3
"""--tensorboard read back by TensorBoard's own reader: trains fmnist_mlp on a small subset of
Fashion-MNIST for 2 epochs (fp32, then fp16 for the loss scaler's tags) with --log and
--tensorboard, reads the event files with tensorboard.backend.event_processing (not cutrain's
code) and checks that every scalar equals its --log record's value for every epoch (within the
float32 rounding and the log's printed digits), that a figure the log has as null is not written,
and that nothing else is.

Exit 0 passed, 1 failed, 77 skipped (this Python has no tensorboard, and --require is not given).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

# tag -> (--log field, half a unit of the log's last printed digit; "rel" for %g formats)
TAGS = {
    "train/loss": ("loss", 5e-7),
    "train/accuracy": ("train_accuracy", 5e-7),
    "train/learning_rate": ("learning_rate", ("rel", 5e-8)),
    "test/loss": ("test_loss", 5e-7),
    "test/accuracy": ("test_accuracy", 5e-7),
    "perf/images_per_s": ("images_per_s", 0.05),
    "perf/epoch_seconds": ("seconds", 5e-4),
    "time/input_wait": ("time_split.input_wait", 5e-5),
    "time/copy": ("time_split.copy", 5e-5),
    "time/compute": ("time_split.compute", 5e-5),
    "time/comm": ("time_split.comm", 5e-5),
    "time/device_busy": ("time_split.device_busy", 5e-5),
    "util/gpu": ("gpu_util", 0.05),
    "util/gpu_mem_mib": ("gpu_mem_mib", 0.05),
    "util/power_w": ("power_w", 0.05),
    "util/sm_clock_mhz": ("sm_clock_mhz", 0.5),
    "util/cpu": ("cpu_util", 5e-4),
    "util/cpu_machine": ("cpu_util_machine", 0.05),
    "amp/loss_scale": ("loss_scale", ("rel", 5e-9)),
    "amp/skipped_steps": ("skipped_steps", 0.0),
}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED: " + what)


def field(record, dotted):
    for part in dotted.split("."):
        record = record.get(part) if isinstance(record, dict) else None
    return record


def tolerance(value, printed):
    log_digits = abs(value) * printed[1] if isinstance(printed, tuple) else printed
    return log_digits + abs(value) * 2.0 ** -23  # float32 keeps 24 bits


def train(args, work, name, extra):
    log = os.path.join(work, name + ".jsonl")
    tb = os.path.join(work, "tb", name)
    fm = args.fmnist
    cmd = [args.cli, "train", "--config", args.config, "--log", log, "--tensorboard", tb,
           "--set", "data.train=%s/train-images-idx3-ubyte.gz" % fm,
           "--set", "data.train_labels=%s/train-labels-idx1-ubyte.gz" % fm,
           "--set", "data.test=%s/t10k-images-idx3-ubyte.gz" % fm,
           "--set", "data.test_labels=%s/t10k-labels-idx1-ubyte.gz" % fm,
           "--set", "data.train_limit=4096", "--set", "data.test_limit=500",
           "--set", "train.epochs=2", "--set", "train.devices=cpu", "--set", "train.threads=1"] + extra
    started = time.time()
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finished = time.time()
    print(run.stdout, end="")
    if run.returncode != 0:
        check(False, "%s: cutrain exited %d" % (name, run.returncode))
        return None
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return records, tb, started, finished


def compare(name, records, tb, started, finished):
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader

    files = glob.glob(os.path.join(tb, "events.out.tfevents.*"))
    check(len(files) == 1, "%s: one event file, found %s" % (name, files))
    if not files:
        return
    events = list(event_file_loader.EventFileLoader(files[0]).Load())
    check(events and events[0].file_version == "brain.Event:2",
          "%s: the first event names the version" % name)
    check(len(events) == 1 + len(records), "%s: %d events for %d epochs" % (name, len(events), len(records)))
    for e in events:
        check(started - 1 <= e.wall_time <= finished + 1, "%s: wall time %f within the run" % (name, e.wall_time))

    acc = event_accumulator.EventAccumulator(tb, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    check(tags <= set(TAGS), "%s: unexpected tags %s" % (name, sorted(tags - set(TAGS))))
    check(len(records) == 2, "%s: two epochs logged" % name)
    print("%s: read back by TensorBoard's EventAccumulator from %s" % (name, os.path.basename(files[0])))
    print("  %-22s %6s %16s %16s" % ("tag", "step", "--log", "TensorBoard"))
    for tag, (key, printed) in TAGS.items():
        read = {e.step: e.value for e in acc.Scalars(tag)} if tag in tags else {}
        expected_steps = set()
        for r in records:
            want = field(r, key)
            if want is None:  # null in the log: absent from the events
                check(r["step"] not in read, "%s: %s written at step %d where the log has null" % (name, tag, r["step"]))
                continue
            expected_steps.add(r["step"])
            got = read.get(r["step"])
            if got is None:
                check(False, "%s: %s missing at step %d (log %s)" % (name, tag, r["step"], want))
                continue
            ok = abs(got - want) <= tolerance(want, printed)
            check(ok, "%s: %s at step %d: TensorBoard %r, log %r" % (name, tag, r["step"], got, want))
            print("  %-22s %6d %16.9g %16.9g%s" % (tag, r["step"], want, got, "" if ok else "  MISMATCH"))
        check(set(read) == expected_steps, "%s: %s at steps %s, the log has %s" % (name, tag, sorted(read),
                                                                                 sorted(expected_steps)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--fmnist", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--require", action="store_true", help="fail instead of skipping without tensorboard")
    args = ap.parse_args()
    try:
        import tensorboard.backend.event_processing.event_accumulator  # noqa: F401
    except ImportError as e:
        print("%s: %s has no tensorboard (%s); configure with -DCUTRAIN_TEST_PYTHON=<a python with it>"
              % ("FAILED" if args.require else "skipped", sys.executable, e))
        return 1 if args.require else 77
    with tempfile.TemporaryDirectory(prefix="ct_tensorboard_") as work:
        runs = [("fp32", []), ("fp16", ["--precision", "fp16"])]
        cpu_measured = 0
        for name, extra in runs:
            result = train(args, work, name, extra)
            if result is None:
                continue
            records = result[0]
            # the figures this run must have, so that the comparison cannot pass on nothing (the
            # CPU use is null in an epoch too short to measure: 4096 images take enough CPU time)
            check(all(r.get("test_accuracy") is not None for r in records), "%s: the log has test accuracy" % name)
            cpu_measured += sum(r.get("cpu_util") is not None for r in records)
            if name == "fp16":
                check(all(r.get("loss_scale") is not None for r in records), "fp16: the log has the loss scale")
            else:
                check(all(r.get("loss_scale") is None for r in records), "fp32: no loss scale in the log")
            compare(name, *result)
        check(cpu_measured > 0, "the CPU use measured in some epoch")
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
