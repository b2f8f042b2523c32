#!/usr/bin/env python3
"""Draws cutrain experiment's chart: images/s per rung as bars, GPU and CPU utilization as lines.

usage: plot_experiment.py DIR/experiment.json DIR/experiment.png [--quiet]

Exits 3 when matplotlib cannot be imported (the command then says how to draw the chart), 2 on
bad arguments or input.
"""
import json
import sys


def main(argv):
    args = [a for a in argv[1:] if a != "--quiet"]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_experiment.py: matplotlib is missing ({e})", file=sys.stderr)
        return 3
    try:
        with open(args[0], encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot_experiment.py: cannot read {args[0]}: {e}", file=sys.stderr)
        return 2
    rungs = report["rungs"]
    labels = [f"{r['rung']}\n{r['name']}" for r in rungs]
    xs = list(range(len(rungs)))
    speeds = [r["images_per_s"] if r["status"] == "ran" and r["images_per_s"] else 0 for r in rungs]

    fig, ax = plt.subplots(figsize=(max(6.5, 1.35 * len(rungs) + 2), 4.8), dpi=120)
    bars = ax.bar(xs, speeds, color="#4c72b0", width=0.6, label="images/s (bars)")
    top = max(speeds) if any(speeds) else 1
    for x, r, b in zip(xs, rungs, bars):
        if r["status"] == "ran":
            text = f"{r['images_per_s']:.0f}"
            if r.get("speedup_0"):
                text += f"\n{r['speedup_0']:.2f}x"
            ax.text(x, b.get_height() + top * 0.01, text, ha="center", va="bottom", fontsize=8)
        else:
            ax.text(x, top * 0.04, r["status"], ha="center", va="bottom", fontsize=8, rotation=90, color="#777777")
    ax.set_ylim(0, top * 1.25)
    ax.set_ylabel("training images/s")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=8)

    util = ax.twinx()
    util.set_ylim(0, 105)
    util.set_ylabel("utilization (%)")
    cores = report.get("cores") or 1
    lines = [
        ("GPU utilization (%)", [r.get("gpu_util") for r in rungs], "#c44e52", "o"),
        ("CPU, this process (% of all cores)",
         [None if r.get("cpu_util") is None else 100.0 * r["cpu_util"] / cores for r in rungs], "#55a868", "s"),
        ("CPU, whole machine (%)", [r.get("cpu_util_machine") for r in rungs], "#8172b2", "^"),
    ]
    for name, ys, color, marker in lines:
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if not pts:
            name += ": not measured"
            util.plot([], [], color=color, marker=marker, label=name)
            continue
        util.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, label=name)

    handles = [bars] + util.get_legend_handles_labels()[0]
    names = ["images/s (bars)"] + util.get_legend_handles_labels()[1]
    # below the axes: the utilization lines often run along the top
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    device = report.get("device") or ""
    ax.set_title(f"cutrain experiment: {report.get('config', '')}\n{device}"[:160], fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(args[1])
    if "--quiet" not in argv:
        print(f"wrote {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
