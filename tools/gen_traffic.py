#!/usr/bin/env python3
"""Writes the bundled serving traces in workloads/traffic/ (fixed seeds, so reruns give the same
bytes). The shapes follow the public workload characterisations serving papers use:

- chat.csv: ShareGPT-like conversations (Vidur, Agrawal et al. 2024, Table 2: ShareGPT4 prompt
  median ~1K tokens, output median ~250): lognormal prompts of mean 1024 tokens (sigma 0.8),
  lognormal outputs of mean 256 (sigma 0.7), Poisson arrivals at 2 requests/s.
- summarization.csv: long-document summarization (Arxiv-Summarization in the same table: prompt
  median ~7K, output ~200): lognormal prompts of mean 6000 tokens (sigma 0.5), outputs of mean
  200 (sigma 0.4), bursty arrivals (gamma gaps, cv 2) at 0.5 requests/s.

Lengths are clipped to [1, 32768]. Usage: tools/gen_traffic.py [OUTDIR]
"""
import math
import random
import sys


def lognormal(rng, mean, sigma):
    mu = math.log(mean) - sigma * sigma / 2
    return max(1, min(32768, round(rng.lognormvariate(mu, sigma))))


def write(path, seed, n, rate, cv, prompt, output):
    rng = random.Random(seed)
    t = 0.0
    shape = 1.0 / (cv * cv)
    with open(path, "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens\n")
        for i in range(n):
            if i > 0:
                t += rng.gammavariate(shape, 1.0 / (shape * rate))
            f.write(f"{t:.6f},{lognormal(rng, *prompt)},{lognormal(rng, *output)}\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "workloads/traffic"
    write(f"{out}/chat.csv", 20261201, 1000, 2.0, 1.0, (1024, 0.8), (256, 0.7))
    write(f"{out}/summarization.csv", 20261202, 400, 0.5, 2.0, (6000, 0.5), (200, 0.4))


if __name__ == "__main__":
    main()
