#!/usr/bin/env python3
"""Plot docs/perf/compute-bench.svg from compute's interleaved benchmark.

    go test -run XXX -bench Interleaved -benchtime 60x -count 3 ./compute/ > /tmp/bench-inter.txt
    python3 docs/perf/compute_plot.py /tmp/bench-inter.txt docs/perf/compute-bench.svg

Left: each variant's best ns per row (log scale) per workload, sluice beside the Talaria post's figures.
Right: ratio to native Go of the same workload (1.5x and 1.1x targets drawn).
"""
import re
import sys
from collections import defaultdict

import matplotlib
matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a small, diffable SVG
import matplotlib.pyplot as plt

src, out = sys.argv[1], sys.argv[2]
best = defaultdict(lambda: float("inf"))
for line in open(src):
    m = re.match(r"BenchmarkInterleaved/(\w+)", line)
    if not m:
        continue
    bench = {"trim": "Trim", "json": "JSON"}[m.group(1)]
    for value, name in re.findall(r"([\d.]+) ([\w-]+)-ns/row", line):
        best[(bench, name)] = min(best[(bench, name)], float(value))

variants = ["native", "plugin", "builtin", "lua-pool-hostapi-batch", "lua-pool-batch", "lua-pool", "lua-vm-per-call"]
labels = {"native": "native Go", "plugin": "Go plugin", "builtin": "built-in (no VM)",
          "lua-pool-hostapi-batch": "Lua pool, batch, require('sluice')", "lua-pool-batch": "Lua pool, batch",
          "lua-pool": "Lua pool, VM per row acquisition", "lua-vm-per-call": "Lua, new VM per call"}
seed = {"trim": {"native": 2258, "lua-vm-per-call": 2105506},
        "trim (cached VMs)": {"native": 4995, "lua-pool": 12108},
        "plugin call": {"native": 401.7, "plugin": 447.1}}

fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 6.5), gridspec_kw={"width_ratios": [3, 2]})
groups = [("Trim", "sluice: trim"), ("JSON", "sluice: json.encode(row)")]
y, ticks, ticklabels = 0, [], []
colors = {"sluice": "#1f77b4", "seed": "#ff7f0e"}
for bench, title in groups:
    for v in variants:
        ns = best.get((bench, v))
        if ns is None or ns == float("inf"):
            continue
        ax.barh(y, ns, color=colors["sluice"])
        ax.text(ns * 1.1, y, f"{ns:,.0f} ns", va="center", fontsize=8)
        ticks.append(y); ticklabels.append(f"{title}: {labels[v]}")
        y += 1
    y += 0.7
for group, vals in seed.items():
    for v, ns in vals.items():
        ax.barh(y, ns, color=colors["seed"])
        ax.text(ns * 1.1, y, f"{ns:,.0f} ns", va="center", fontsize=8)
        ticks.append(y); ticklabels.append(f"Talaria post, {group}: {labels.get(v, v)}")
        y += 1
    y += 0.4
ax.set_yticks(ticks, ticklabels, fontsize=8)
ax.invert_yaxis()
ax.set_xscale("log")
ax.set_xlabel("ns per row (log scale; best of runs; sluice blue, Talaria post orange)")
ax.set_xlim(100, 2e7)

# Ratios to native.
rows = []
for bench, title in groups:
    nat = best.get((bench, "native"))
    for v in variants[1:6]:
        ns = best.get((bench, v))
        if nat and ns and ns != float("inf"):
            rows.append((f"{bench.lower()}: {labels[v]}", ns / nat))
rows.append(("Talaria: trim, cached Lua VMs", 12108 / 4995))
rows.append(("Talaria: plugin call", 447.1 / 401.7))
ax2.barh(range(len(rows)), [r[1] for r in rows], color=["#ff7f0e" if r[0].startswith("Talaria") else "#1f77b4" for r in rows])
for i, (_, r) in enumerate(rows):
    ax2.text(r + 0.03, i, f"{r:.2f}x", va="center", fontsize=8)
ax2.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
ax2.invert_yaxis()
ax2.axvline(1.5, color="red", linestyle="--", linewidth=1, label="Lua target 1.5x")
ax2.axvline(1.1, color="green", linestyle=":", linewidth=1, label="plugin target 1.1x")
ax2.set_xlabel("time / native Go, same workload")
ax2.legend(fontsize=8, loc="center right")
fig.suptitle("compute: one row through each loader (go test -bench . ./compute/)")
fig.tight_layout()
fig.savefig(out)
