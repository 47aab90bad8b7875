#!/usr/bin/env python3
"""Plot `sluice bench pool --csv` output: time per op and peak RSS per strategy.

usage: python3 docs/perf/pool_plot.py docs/perf/pool-default.csv docs/perf/pool.png [goroutines] [cpus]

Each strategy gets two bars where the published report has a figure for it
(report: its 2-CPU, 4000-goroutine row) and one otherwise. Time per op is the
measured wall time (see docs/pool.md for how much of the machine the run had).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The report's figures at 2 CPUs, 4000 goroutines (ms/op, RSS MB).
REPORT = {
    "none": (0.175, 1.82 * 1024),
    "variable": (0.0779, 1.08 * 1024),
    "core1000+unlimited": (0.0467, 883),
    "core2000+unlimited": (0.0460, 962),
    "core1000+block": (0.0484, 326),
    "core2000+block": (0.0473, 652),
    "core1000+max2000+block": (0.0488, 682),
}


def main():
    src, out = sys.argv[1], sys.argv[2]
    goroutines = sys.argv[3] if len(sys.argv) > 3 else "4000"
    cpus = sys.argv[4] if len(sys.argv) > 4 else "2"
    rows = [r for r in csv.DictReader(open(src))
            if r["goroutines"] == goroutines and r["cpus"] == cpus and r["mode"] == "hot"
            and not r["ns/op"].startswith("error")]
    names = [r["strategy"] for r in rows]
    ms = [float(r["ns/op"]) / 1e6 for r in rows]
    rss = [float(r["peak RSS MB"]) for r in rows]
    rep_ms = [REPORT.get(n, (0, 0))[0] for n in names]
    rep_rss = [REPORT.get(n, (0, 0))[1] for n in names]

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 8), sharex=True)
    x = range(len(names))
    w = 0.4
    ax1.bar([i - w / 2 for i in x], ms, w, label="sluice (measured wall time)", color="tab:blue")
    ax1.bar([i + w / 2 for i in x], rep_ms, w, label="published report", color="tab:gray")
    ax1.set_yscale("log")
    ax1.set_ylabel("ms/op (log)")
    ax1.axhline(250e-6, color="tab:red", linestyle="--", linewidth=1, label="target 250 ns/op")
    ax1.legend(fontsize=8)
    ax1.set_title(f"Lua VM pool, report's script, {goroutines} goroutines, {cpus} CPUs")
    ax2.bar([i - w / 2 for i in x], rss, w, label="sluice (measured)", color="tab:green")
    ax2.bar([i + w / 2 for i in x], rep_rss, w, label="published report", color="tab:gray")
    ax2.set_yscale("log")
    ax2.set_ylabel("peak RSS MB (log)")
    ax2.axhline(48, color="tab:red", linestyle="--", linewidth=1, label="target 48 MB")
    ax2.legend(fontsize=8)
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
