#!/usr/bin/env python3
"""Writes the example raw harness output and the example Kineto trace in this folder. Both are
written to their formats' schemas for meshsim's importer tests, not measured:

- h100-raw-example.json: the harness's raw schema (tools/calibrate/README.md). GEMM rows are
  Azure's published H100 FP8 cuBLASLt points and the fused attention row Azure's FlashAttention-2
  figure (validation/hardware.md C2); the NCCL rows are NVIDIA's DGX H100 all_reduce sample
  (validation/collectives.md B2); the memory sweep is alpha + bytes/beta with alpha = 3 us and
  beta = Azure's STREAM triad 2.97 TB/s; the NVLink copy sweep is alpha + bytes/beta with
  alpha = 10 us, beta = 370 GB/s (illustrative). The unfused attention row is illustrative.
- kineto-step-example.json: a PyTorch profiler Chrome trace of two steps on device 0 with the
  kernel names cuBLAS, FlashAttention and NCCL use and aten::mm ops recorded with shapes; the
  host thread launches a kernel every 20 us (cudaLaunchKernel calls of 4 us, one of them blocked
  for 300 us as a full launch queue would), and synchronizes at the end of each step.
"""
import json

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def raw():
    gemm = [(8192, 8192, 8192, 1290.1), (16384, 16384, 16384, 1377.3), (4096, 4096, 4096, 1216.9),
            (1024, 1024, 1024, 274.1), (802816, 192, 768, 663.8)]
    rows = []
    for m, n, k, tf in gemm:
        t = 2 * m * n * k / (tf * 1e12)
        rows.append({"dtype": "fp8", "m": m, "n": n, "k": k, "time_us": round(t * 1e6, 3), "tflops": tf})
    # FlashAttention-2, batch 2, seq 8192, 16 heads of 128, forward, non-causal: 4·b·s²·h·d FLOPs.
    fa_flops = 4 * 2 * 8192 * 8192 * 16 * 128
    att = [{"dtype": "bf16", "batch": 2, "seq_q": 8192, "seq_kv": 8192, "heads": 16, "kv_heads": 16,
            "head_dim": 128, "causal": False, "direction": "forward",
            "time_us": round(fa_flops / 327.9e12 * 1e6, 3), "tflops": 327.9,
            "implementation": "flash-attention-2"},
           {"dtype": "bf16", "batch": 1, "seq_q": 4096, "seq_kv": 4096, "heads": 32, "kv_heads": 8,
            "head_dim": 128, "causal": True, "direction": "forward", "time_us": 1800.0,
            "tflops": 2 * 4096 * 4096 * 32 * 128 / 1800e-6 / 1e12, "implementation": "unfused"}]
    membw = []
    for e in range(20, 33):
        b = 2**e
        t = 3e-6 + b / 2.97e12
        membw.append({"kind": "triad", "bytes": b, "time_us": round(t * 1e6, 4), "GBps": round(b / t / 1e9, 2)})
    p2p = []
    for e in range(10, 31, 2):
        b = 2**e
        t = 10e-6 + b / 370e9
        p2p.append({"src": 0, "dst": 1, "link": "nvlink", "bytes": b, "time_us": round(t * 1e6, 4),
                    "GBps": round(b / t / 1e9, 2)})
    nccl = []
    for s, t in [(8, 13.67), (1048576, 27.37), (4194304, 54.19), (16777216, 123.8), (67108864, 324.7),
                 (134217728, 586.4), (268435456, 1112.5), (536870912, 2151.0), (1073741824, 4029.4),
                 (2147483648, 7939.1), (4294967296, 15749), (8589934592, 31307)]:
        alg = s / (t * 1e-6) / 1e9
        nccl.append({"op": "all_reduce", "ranks": 8, "nodes": 1, "bytes": s, "time_us": t,
                     "algbw_GBps": round(alg, 2), "busbw_GBps": round(alg * 1.75, 2)})
    topo = {"name": "example-node", "gpu": "H100-SXM5-80GB",
            "vertices": [{"name": "gpu0", "kind": "gpu", "node": 0}, {"name": "gpu1", "kind": "gpu", "node": 0},
                         {"name": "nvswitch0", "kind": "nvswitch", "node": 0}, {"name": "cpu0", "kind": "cpu", "node": 0}],
            "links": [{"a": "gpu0", "b": "nvswitch0", "kind": "nvlink", "bandwidth_GBps": 450, "latency_ns": 100},
                      {"a": "gpu1", "b": "nvswitch0", "kind": "nvlink", "bandwidth_GBps": 450, "latency_ns": 100},
                      {"a": "gpu0", "b": "cpu0", "kind": "pcie", "bandwidth_GBps": 63, "latency_ns": 250},
                      {"a": "gpu1", "b": "cpu0", "kind": "pcie", "bandwidth_GBps": 63, "latency_ns": 250}]}
    return {"harness": "meshsim-calibrate 1 (example)",
            "environment": {"example": "written by make_examples.py to the raw schema; not a measurement",
                            "driver": "550.54.15", "cuda_runtime": 12040, "nccl": "2.21.5",
                            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "sm_count": 132,
                                      "memory_bytes": 85520809984, "max_sm_clock_mhz": 1980,
                                      "compute_capability": "9.0"}]},
            "notes": ["example file: see make_examples.py for where each number comes from"],
            "gemm": rows, "attention": att, "membw": membw, "p2p": p2p, "nccl": nccl, "topology": topo}


def kineto():
    ev = []
    ext = 1000
    t = 0.0
    def launch(host, blocked=False):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": host + 6, "dur": 300.0 if blocked else 4.0, "args": {}})
        return host + (316.0 if blocked else 20.0)

    for step in range(2):
        start = t
        host = start
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": start, "dur": 1000000.0})
        # 32 layers: QKV, out, up, down GEMMs as aten::mm with shapes (8192 tokens, hidden 4096).
        for layer in range(32):
            for (m, k, n, us) in [(8192, 4096, 6144, 520.0), (8192, 4096, 4096, 350.0),
                                  (8192, 4096, 28672, 2400.0), (8192, 14336, 4096, 1200.0)]:
                ext += 1
                ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": host,
                           "dur": 12.0, "args": {"External id": ext, "Input Dims": [[m, k], [k, n]],
                                                   "Input type": ["c10::BFloat16", "c10::BFloat16"]}})
                host = launch(host, blocked=(layer == 16 and n == 6144))
                ev.append({"ph": "X", "cat": "kernel", "name": "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_TNN",
                           "pid": 0, "tid": 7, "ts": t + 5, "dur": us,
                           "args": {"device": 0, "stream": 7, "External id": ext, "correlation": ext}})
                t += us + 5
            ev.append({"ph": "X", "cat": "kernel", "name": "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
                       "pid": 0, "tid": 7, "ts": t, "dur": 900.0, "args": {"device": 0, "stream": 7}})
            t += 900
            host = launch(host)
            ev.append({"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>",
                       "pid": 0, "tid": 7, "ts": t, "dur": 150.0, "args": {"device": 0, "stream": 7}})
            t += 150
            host = launch(host)
        host = launch(host)
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1,
                   "ts": host, "dur": t + 60000.0 - host, "args": {}})
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   "pid": 0, "tid": 20, "ts": t, "dur": 60000.0, "args": {"device": 0, "stream": 20}})
        # A kernel of another device: ignored for device 0.
        ev.append({"ph": "X", "cat": "kernel", "name": "nvjet_other_device", "pid": 1, "tid": 7, "ts": t,
                   "dur": 5.0, "args": {"device": 1, "stream": 7}})
        t = start + 1000000.0
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": ev,
            "meshsim_example": "written by make_examples.py in the Kineto Chrome-trace format; not a measurement"}


if __name__ == "__main__":
    json.dump(raw(), open("h100-raw-example.json", "w"), indent=1)
    json.dump(kineto(), open("kineto-step-example.json", "w"))
