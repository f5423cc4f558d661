#!/usr/bin/env python3
"""Fits the per-iteration CPU overhead of the vllm engine profile (workloads/engines/vllm.json,
"cpu_overhead") to ../shared/measurements/vidur-cpu-overheads.csv: schedule + sampler +
prepare-inputs + process-outputs medians per iteration (Vidur's CPU-overhead model, without its
Ray-communication term, which vLLM on one node does not have), a straight line in the batch's
sequence count per (model, TP). The slope is the mean of the three lines' slopes; the fixed cost
the mean of the TP 1 intercepts; the multi-GPU extra the TP 4 intercept above it (the only TP > 1
point measured). Standard library only. Usage: tools/fit_cpu_overheads.py [CSV]"""
import csv
import json
import sys
from collections import defaultdict

PARTS = ("schedule_median_ms", "sampler_e2e_median_ms", "prepare_inputs_e2e_median_ms",
         "process_model_outputs_median_ms")


def line(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/measurements/vidur-cpu-overheads.csv"
    groups = defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            groups[(r["model"], int(r["tensor_parallel"]))].append(r)
    fits = {}
    for key, rows in sorted(groups.items()):
        xs = [float(r["batch_size"]) for r in rows]
        ys = [sum(float(r[p]) for p in PARTS) for r in rows]
        fits[key] = line(xs, ys)
        worst = max(abs(fits[key][0] + fits[key][1] * x - y) / y for x, y in zip(xs, ys))
        print(f"{key[0]} TP {key[1]}: {fits[key][0]:.3f} ms + {fits[key][1]:.4f} ms/seq "
              f"(worst {100 * worst:.1f} %)", file=sys.stderr)
    slope = sum(s for _, s in fits.values()) / len(fits)
    tp1 = [a for (m, tp), (a, _) in fits.items() if tp == 1]
    fixed = sum(tp1) / len(tp1)
    multi = [a for (m, tp), (a, _) in fits.items() if tp > 1]
    extra = sum(multi) / len(multi) - fixed
    print(json.dumps({"fixed_ms": round(fixed, 3), "multi_gpu_extra_ms": round(extra, 3),
                      "per_sequence_ms": round(slope, 4)}))


if __name__ == "__main__":
    main()
