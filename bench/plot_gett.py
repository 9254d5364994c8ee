#!/usr/bin/env python3
"""Plots tjgett's TCCG rows like the GETT paper's figure: one group of bars
per contraction (GFLOP/s of the model's choice, GETT, TTGT with its own
GEMM, with OpenBLAS,
TTGT with MKL when present, LoG, and an OpenBLAS GEMM of the same sizes),
contractions sorted by arithmetic intensity, one figure per thread count
and dtype.

    bench/plot_gett.py results/gett.txt results/   -> results/gett-<dtype>-<t>t.png
"""
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = ["model", "untimed", "gett", "ttgt", "ttgt+blas", "ttgt+mkl", "log", "blas-gemm"]
ROW = re.compile(r"^(\S+)\s+th=(\d) ai\s+([\d.]+) model\((\w+)\s*\)\s+([\d.]+)(.*?) GFLOP/s")


def parse(path):
    """{(dtype, threads): [(name, ai, {series: GFLOP/s})]} from tjgett output."""
    out, dtype = {}, "f64"
    with open(path) as f:
        for line in f:
            if line.startswith("# tjgett tccg"):
                dtype = "f32" if " f32" in line else "f64"
            m = ROW.match(line)
            if not m:
                continue
            rates = {"model": float(m.group(5))}
            for name, val in re.findall(r"([a-z+-]+)(?:\(\w+\s*\))?\s+([\d.]+)", m.group(6)):
                if name in SERIES:
                    rates[name] = float(val)
            out.setdefault((dtype, int(m.group(2))), []).append(
                (m.group(1), float(m.group(3)), rates))
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "results/gett.txt"
    outdir = sys.argv[2] if len(sys.argv) > 2 else "results"
    for (dtype, th), rows in sorted(parse(path).items()):
        rows.sort(key=lambda r: r[1])
        present = [s for s in SERIES if any(s in r[2] for r in rows)]
        width = 0.8 / len(present)
        fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) * len(present) / 3), 4.5))
        for k, s in enumerate(present):
            xs = [i + k * width for i in range(len(rows))]
            ax.bar(xs, [r[2].get(s, 0) for r in rows], width, label=s)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
        ax.set_xticklabels(["%s\n%.0f" % (r[0], r[1]) for r in rows], rotation=90, fontsize=6)
        ax.set_ylabel("GFLOP/s")
        ax.set_title("TCCG contractions, %s, %d thread%s (sorted by flops/byte)"
                     % (dtype, th, "" if th == 1 else "s"))
        ax.legend(fontsize=7, ncol=len(present))
        fig.tight_layout()
        name = "%s/gett-%s-%dt.png" % (outdir, dtype, th)
        fig.savefig(name, dpi=120)
        print("wrote", name)


if __name__ == "__main__":
    main()
