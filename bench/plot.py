#!/usr/bin/env python3
"""Plots tjbench results: bench/plot.py results/bench.json results/

speedup.png   tensorjit's speed-up over the best peer per kernel x input
              (1 and 2 threads; > 1 means tensorjit is faster).
roofline.png  every timed row as a point (arithmetic intensity, GFLOP/s)
              under the measured bandwidth and FMA-peak lines.
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "results/bench.json"
    out = sys.argv[2] if len(sys.argv) > 2 else "results"
    with open(path) as f:
        doc = json.load(f)
    rows = [r for r in doc["rows"] if r.get("timed")]
    lim = doc["limits"]

    # speed-up bars
    groups = {}
    for r in rows:
        if r["impl"] != "tensorjit" or r.get("best_peer_ms", -1) <= 0:
            continue
        key = "%s\n%s" % (r["kernel"], r["input"])
        groups.setdefault(key, {})[r["threads"]] = r["best_peer_ms"] / r["median_ms"]
    keys = list(groups)
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(keys)), 5))
    w = 0.4
    for t, off, col in ((1, -w / 2, "tab:blue"), (2, w / 2, "tab:orange")):
        ax.bar([i + off for i in range(len(keys))],
               [groups[k].get(t, 0) for k in keys], w, label="%d thread%s" % (t, "s" if t > 1 else ""),
               color=col)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(keys, rotation=90, fontsize=7)
    ax.set_ylabel("speed-up of tensorjit over the best peer")
    ax.set_title("tensorjit vs best peer (%s mode)" % doc.get("mode", "?"))
    ax.legend()
    fig.tight_layout()
    fig.savefig("%s/speedup.png" % out, dpi=120)

    # roofline
    fig, ax = plt.subplots(figsize=(8, 6))
    ais = [r["flops"] / r["bytes"] for r in rows if r["bytes"] > 0]
    lo, hi = min(ais + [0.05]) / 2, max(ais + [100]) * 2
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    for t, style in ((1, "-"), (2, "--")):
        bw, pk = lim["triad_gbs"][t - 1], lim["peak_gflops_f64"][t - 1]
        ax.plot(xs, [min(pk, x * bw) for x in xs], "k" + style, lw=1,
                label="f64 roof, %d thread%s (%.0f GB/s, %.0f GFLOP/s)" % (t, "s" if t > 1 else "", bw, pk))
    marks = {"tensorjit": "o", "hand-C": "s", "GraphBLAS": "^", "BLAS": "D", "BLAS-SkylakeX": "D",
             "tensorjit-C": "x"}
    for impl, m in marks.items():
        pts = [(r["flops"] / r["bytes"], r["gflops"]) for r in rows if r["impl"] == impl and r["bytes"] > 0]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=m, s=18, label=impl, alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop / byte of all arrays touched once)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline (measured limits)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig("%s/roofline.png" % out, dpi=120)
    print("plots: %s/speedup.png %s/roofline.png" % (out, out))


if __name__ == "__main__":
    main()
