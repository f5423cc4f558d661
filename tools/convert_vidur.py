#!/usr/bin/env python3
"""Convert Vidur's published per-operator GPU measurements into meshsim calibration raw files.

    tools/convert_vidur.py [MEASUREMENTS_DIR] [OUT_DIR]

reads ../shared/measurements/vidur-forward-ops-{h100,a100}.csv and vidur-attention-a100.csv
(Microsoft Vidur, MIT licence; provenance in that folder's README) and writes
validation/kernels/vidur-{h100,a100}.raw.json in the format of tools/calibrate's raw output, so
`meshsim calibrate fit` turns them into the bundled profiles and the kernel accuracy test holds
one model out at a time. Nothing is fitted here: every row is one Vidur median, converted to
microseconds, with the kernel shape meshsim's op catalogue gives the same op (sim/model/
op_catalogue.cpp). Each row carries `group` (the model), `layer` (model, TP and tokens: one
transformer block's forward on one GPU) and `op` (the catalogue's name).
It also writes validation/collectives/vidur-nccl.json from vidur-network.csv: Vidur's NCCL
all-reduce and send/recv kernel times on DGX H100 and DGX A100 nodes, each row with the bundled
topology, node count and ranks meshsim prices it on (tests/network/measured_collectives_test.cpp).
Standard library only; the output is deterministic (rows in file order, fixed formatting).
"""
import csv
import json
import os
import sys

ACT = 2  # bytes per fp16 element

SOURCE = ("Microsoft Vidur (https://github.com/microsoft/vidur, commit 7d47513363ec, MIT licence, "
          "copyright (c) Microsoft Corporation): data/profiling/compute/{gpu}/*/mlp.csv{attn}; "
          "curated copy and provenance in ../shared/measurements/README.md. float16, PyTorch "
          "profiler sums of GPU kernel durations, medians of 20 (forward ops) or 5 (attention) "
          "samples, 1 us resolution. Converted by tools/convert_vidur.py.")

GPU_NAMES = {"h100": "NVIDIA H100 80GB HBM3", "a100": "NVIDIA A100-SXM4-80GB"}

# Vidur op -> (meshsim catalogue op, kernel class)
OPS = {
    "emb": ("embedding", "gather"),
    "input_layernorm": ("input_norm", "norm"),
    "attn_pre_proj": ("qkv_proj", "gemm"),
    "attn_rope": ("rope", "rotary"),
    "attn_post_proj": ("out_proj", "gemm"),
    "post_attention_layernorm": ("post_attention_norm", "norm"),
    "mlp_up_proj": ("mlp_up", "gemm"),
    "mlp_act": ("mlp_activation", "activation"),
    "mlp_down_proj": ("mlp_down", "gemm"),
    "add": ("mlp_residual", "elementwise"),
}


def model_name(hf_id):
    return hf_id.split("/")[-1]


def forward_rows(path):
    gemm, memory = [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["op"] not in OPS:
                continue
            op, cls = OPS[r["op"]]
            h, heads, kv = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
            ffn, t, tokens = int(r["n_expanded_embd"]), int(r["tensor_parallel"]), int(r["tokens"])
            gated = r["use_gated_mlp"] == "True"
            hd = h // heads
            a, kvr = heads // t, max(kv // t, 1)
            us = round(float(r["median_ms"]) * 1000.0, 4)
            tag = {"group": model_name(r["model"]), "layer": f"{model_name(r['model'])} tp{t} T{tokens}",
                   "op": op, "tokens": tokens}
            if cls == "gemm":
                if op == "qkv_proj":
                    n, k = (a + 2 * kvr) * hd, h
                elif op == "out_proj":
                    n, k = h, a * hd
                elif op == "mlp_up":
                    n, k = (2 if gated else 1) * ffn // t, h
                else:
                    n, k = h, ffn // t
                gemm.append({"dtype": "fp16", "m": tokens, "n": n, "k": k, "time_us": us, **tag})
                continue
            # Bytes as the op catalogue counts them (read + write, 16-bit).
            if cls == "norm":
                b = 2 * ACT * tokens * h
            elif cls == "rotary":
                # phi-2 rotates 40 % of each head (partial rotary); Q and K of this rank.
                frac = 0.4 if "phi" in r["model"] else 1.0
                b = 2 * ACT * tokens * (a + kvr) * hd * frac
            elif cls == "activation":
                f_rank = ffn // t
                b = ACT * tokens * ((2 * f_rank if gated else f_rank) + f_rank)
            elif cls == "elementwise":
                b = 3 * ACT * tokens * h
            else:  # gather: read one row per token, write it (vocabulary-parallel when t > 1)
                b = 2 * ACT * tokens * h
            memory.append({"class": cls, "bytes": b, "time_us": us, **tag})
    return gemm, memory


def attention_rows(path):
    attention, memory = [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            t = int(r["tensor_parallel"])
            heads, kv, hd = int(r["n_q_head"]) // t, int(r["n_kv_head"]) // t, int(r["head_dim"])
            chunk, ctx, batch = int(r["prefill_chunk_size"]), int(r["kv_cache_size"]), int(r["batch_size"])
            name = model_name(r["model"])
            decode = r["sweep"] == "decode"
            row = {"dtype": "fp16", "batch": batch, "seq_q": 1 if decode else chunk,
                   "seq_kv": ctx if decode else ctx + chunk, "heads": heads, "kv_heads": kv,
                   "head_dim": hd, "causal": True, "direction": "forward",
                   "time_us": round(float(r["median_ms"]) * 1000.0, 4), "group": name,
                   "layer": f"{name} tp{t} {r['sweep']} b{batch} q{chunk} kv{ctx}",
                   "op": "attention_decode" if decode else "attention_core"}
            attention.append(row)
            # Only the decode steps' appends are kept: a prefill chunk's append in Vidur's
            # sarathi-serve FlashInfer wrapper takes ~0.55 us per token (2.3 ms for 4,096 tokens,
            # 7 GB/s), which no copy kernel does (vLLM's reshape_and_cache is one kernel
            # streaming at HBM rate). Assumption named in validation/kernels.md.
            if not decode:
                continue
            new_tokens = batch
            # Append of the new tokens' K and V into the paged cache: read and write once.
            memory.append({"class": "kv_append", "bytes": 2 * 2 * ACT * new_tokens * kv * hd,
                           "time_us": round(float(r["kv_cache_save_median_ms"]) * 1000.0, 4),
                           "group": name, "layer": row["layer"], "op": "kv_append"})
    return attention, memory


# Single-GPU microbenchmarks of the Azure AI-benchmarking-guide as listed in
# ../shared/validation/hardware.md C2 (TFLOP/s): cuBLASLt GEMMs, FP16 on A100 and FP8 on H100,
# and FlashAttention-2 on H100 (batch 2, sequence 8192, head dim 128; read as a non-causal
# forward pass with 16 heads, the guide gives batch, sequence and head dim only).
AZURE_GEMM = {"a100": ("fp16", [(8192, 8192, 8192, 253.7), (16384, 16384, 16384, 256.5),
                                 (4096, 4096, 4096, 228.0), (1024, 1024, 1024, 119.4),
                                 (802816, 192, 768, 157.8)]),
              "h100": ("fp8", [(8192, 8192, 8192, 1290.1), (16384, 16384, 16384, 1377.3),
                                (4096, 4096, 4096, 1216.9), (1024, 1024, 1024, 274.1),
                                (802816, 192, 768, 663.8)])}
AZURE_FA2_H100_TFLOPS = 327.9


def azure_rows(gpu):
    dtype, points = AZURE_GEMM[gpu]
    tag = {"group": "azure-microbenchmarks", "op": "gemm"}
    gemm = [{"dtype": dtype, "m": m, "n": n, "k": k,
             "time_us": round(2 * m * n * k / (tf * 1e12) * 1e6, 4), "layer": f"azure gemm {m}x{n}x{k}", **tag}
            for m, n, k, tf in points]
    attention = []
    if gpu == "h100":
        b, s, heads, hd = 2, 8192, 16, 128
        flops = 4 * b * s * s * heads * hd
        attention.append({"dtype": "bf16", "batch": b, "seq_q": s, "seq_kv": s, "heads": heads,
                          "kv_heads": heads, "head_dim": hd, "causal": False, "direction": "forward",
                          "time_us": round(flops / (AZURE_FA2_H100_TFLOPS * 1e12) * 1e6, 4),
                          "group": "azure-microbenchmarks", "layer": "azure flash-attention-2",
                          "op": "attention_core"})
    return gemm, attention


NET_SOURCE = ("Microsoft Vidur (https://github.com/microsoft/vidur, commit 7d47513363ec, MIT licence, "
              "copyright (c) Microsoft Corporation): data/profiling/network/{h100_dgx,a100_dgx}/"
              "{all_reduce,send_recv}.csv; curated copy and provenance in "
              "../shared/measurements/README.md. torch.distributed (NCCL) on fp16 buffers after "
              "cuda.synchronize and a barrier, 11 back-to-back launches; a sample is the median NCCL "
              "kernel duration of those launches (PyTorch profiler), measured_us the median of three "
              "samples on rank 0. Converted by tools/convert_vidur.py.")

# Vidur's node types -> the bundled cluster file of one node and of several.
NET_TOPOLOGIES = {"h100_dgx": ("dgx-h100.json", "dgx-h100-superpod.json"),
                  "a100_dgx": ("dgx-a100.json", "dgx-a100-superpod.json")}
GPUS_PER_NODE = 8


def network_rows(path):
    """Rows of the DGX node types: the pairwise-NVLink 4-GPU VMs have no bundled cluster file."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["system"] not in NET_TOPOLOGIES:
                continue
            workers, per_node = int(r["num_workers"]), int(r["devices_per_node"])
            nodes = workers // per_node
            one, several = NET_TOPOLOGIES[r["system"]]
            # Assumption (README, assumptions table): the first `per_node` GPUs of each node; Vidur's
            # files do not say which GPUs of a node its ranks ran on.
            ranks = [n * GPUS_PER_NODE + g for n in range(nodes) for g in range(per_node)]
            rows.append({"system": r["system"], "op": r["collective"],
                         "topology": one if nodes == 1 else several, "nodes": nodes,
                         "ranks": ranks, "bytes": int(r["size"]),
                         "measured_us": round(float(r["median_ms"]) * 1000, 3),
                         "std_us": round(float(r["std_ms"]) * 1000, 3)})
    return rows


def write_network(src, out):
    rows = network_rows(os.path.join(src, "vidur-network.csv"))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "vidur-nccl.json")
    notes = [NET_SOURCE,
             "Licence: MIT (see ../shared/measurements/LICENSE-vidur); the measured values are "
             "Vidur's, unchanged except ms -> us.",
             "Ranks: the first devices_per_node GPUs of each node. Clusters: one node is the bundled "
             "DGX file, several nodes the SuperPOD file rebuilt with that many nodes (Vidur does not "
             "describe its inter-node network).",
             "Left out: the 4-GPU pairwise-NVLink VMs (h100/a100_pairwise_nvlink), which no bundled "
             "cluster file describes."]
    with open(path, "w") as f:
        f.write("{\n")
        f.write(f'  "notes": {json.dumps(notes)},\n')
        f.write('  "rows": [\n')
        for j, row in enumerate(rows):
            f.write("    " + json.dumps(row, separators=(",", ":")) + ("," if j + 1 < len(rows) else "") + "\n")
        f.write("  ]\n}\n")
    print(f"{path}: {len(rows)} collective rows")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "shared", "measurements")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "validation", "kernels")
    os.makedirs(out, exist_ok=True)
    for gpu in ("h100", "a100"):
        gemm, memory = forward_rows(os.path.join(src, f"vidur-forward-ops-{gpu}.csv"))
        azure_gemm, attention = azure_rows(gpu)
        gemm += azure_gemm
        attn_src = ""
        if gpu == "a100":
            attention, kv = attention_rows(os.path.join(src, "vidur-attention-a100.csv"))
            memory += kv
            attn_src = " and Meta-Llama-3-8B/attention.csv (FlashInfer)"
        doc = {
            "harness": "vidur (converted by tools/convert_vidur.py)",
            "environment": {"gpus": [{"name": GPU_NAMES[gpu]}]},
            "notes": [SOURCE.format(gpu=gpu, attn=attn_src),
                      "Licence: MIT (see ../shared/measurements/LICENSE-vidur); the measured values are "
                      "Vidur's, unchanged except ms -> us.",
                      "Rows of group azure-microbenchmarks: the Azure AI-benchmarking-guide figures of "
                      "../shared/validation/hardware.md C2, time = FLOPs / reported TFLOP/s.",
                      "kv_append rows: decode steps only (prefill-chunk appends of the sarathi-serve "
                      "wrapper run at ~7 GB/s and are left out, see tools/convert_vidur.py).",
                      "attention rows: seq_kv counts the cached context plus the chunk; decode rows have "
                      "seq_q 1 and seq_kv the context of each of `batch` sequences."],
            "gemm": gemm,
            "memory_ops": memory,
        }
        if attention:
            doc["attention"] = attention
        path = os.path.join(out, f"vidur-{gpu}.raw.json")
        with open(path, "w") as f:
            f.write("{\n")
            keys = list(doc.keys())
            for i, key in enumerate(keys):
                value = doc[key]
                sep = "," if i + 1 < len(keys) else ""
                if isinstance(value, list) and value and isinstance(value[0], dict):
                    f.write(f'  "{key}": [\n')
                    for j, row in enumerate(value):
                        f.write("    " + json.dumps(row, separators=(",", ":")) + ("," if j + 1 < len(value) else "") + "\n")
                    f.write(f"  ]{sep}\n")
                else:
                    f.write(f'  "{key}": {json.dumps(value)}{sep}\n')
            f.write("}\n")
        print(f"{path}: {len(gemm)} gemm, {len(memory)} memory, {len(attention)} attention rows")
    write_network(src, os.path.normpath(os.path.join(out, "..", "collectives")))


if __name__ == "__main__":
    main()
