#!/usr/bin/env python3
"""PyTorch profiler traces of eager (or compiled) training steps of a few Llama 3.1 8B blocks.

Runs on a lent GPU machine (tools/calibrate/device/README.md) and writes, into --out:
  kineto-MODE.json.gz   torch.profiler Chrome trace of --active steps (CPU and CUDA activities,
                        shapes recorded), for `meshsim calibrate kineto --trace` (gunzip first):
                        its host time per kernel launch (the number issue 15's bundled stacks
                        lack), its GEMM shapes and its per-op kernel times
  block-model.json      the model it ran, as a Hugging Face config (--workload for that command)

The model is torchtitan's Llama 3 as written in torchtitan/models/llama3/model.py (separate wq, wk,
wv, wo and w1, w2, w3 linears, nn.RMSNorm, RoPE as a complex multiply in fp32, repeat_kv, SDPA with
is_causal, SwiGLU as silu then mul), with the embedding, final norm, output projection and an fp32
cross entropy (torchtitan/components/loss.py), and fused AdamW, on one GPU in bf16. What it does
not do: FSDP (one GPU: no all-gathers, no fp32 reduce-scatter, parameters held in bf16 rather than
fp32 with a bf16 compute copy) and activation checkpointing; the kernels it launches per block are
otherwise torchtitan's eager (or, with --mode compile, torch.compile per block, fullgraph) path.
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["eager", "compile"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--active", type=int, default=3, help="profiled steps")
    a = ap.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, schedule

    if not torch.cuda.is_available():
        print("error: no CUDA device visible", file=sys.stderr)
        return 3
    dev = torch.device("cuda")
    # Llama 3.1 8B (workloads/models/llama3.1-8b.json).
    dim, n_heads, n_kv, ffn, vocab, theta, eps = 4096, 32, 8, 14336, 128256, 500000.0, 1e-5
    hd = dim // n_heads

    def precompute_freqs_cis(end: int) -> torch.Tensor:
        freqs = 1.0 / (theta ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
        t = torch.arange(end, dtype=torch.float32)
        return torch.polar(torch.ones(end, hd // 2), torch.outer(t, freqs))

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        f = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        return (torch.view_as_real(xq_ * f).flatten(3).type_as(xq),
                torch.view_as_real(xk_ * f).flatten(3).type_as(xk))

    def repeat_kv(x, n_rep):
        bs, slen, kv, d = x.shape
        return x[:, :, :, None, :].expand(bs, slen, kv, n_rep, d).reshape(bs, slen, kv * n_rep, d)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(dim, n_heads * hd, bias=False)
            self.wk = nn.Linear(dim, n_kv * hd, bias=False)
            self.wv = nn.Linear(dim, n_kv * hd, bias=False)
            self.wo = nn.Linear(n_heads * hd, dim, bias=False)

        def forward(self, x, freqs_cis):
            bs, seqlen, _ = x.shape
            xq = self.wq(x).view(bs, seqlen, -1, hd)
            xk = self.wk(x).view(bs, seqlen, -1, hd)
            xv = self.wv(x).view(bs, seqlen, -1, hd)
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
            keys, values = repeat_kv(xk, n_heads // n_kv), repeat_kv(xv, n_heads // n_kv)
            o = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2),
                                               values.transpose(1, 2), is_causal=True)
            return self.wo(o.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(dim, ffn, bias=False)
            self.w2 = nn.Linear(ffn, dim, bias=False)
            self.w3 = nn.Linear(dim, ffn, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.feed_forward = FeedForward()
            self.attention_norm = nn.RMSNorm(dim, eps=eps)
            self.ffn_norm = nn.RMSNorm(dim, eps=eps)

        def forward(self, x, freqs_cis):
            h = x + self.attention(self.attention_norm(x), freqs_cis)
            return h + self.feed_forward(self.ffn_norm(h))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList(Block() for _ in range(a.layers))
            self.norm = nn.RMSNorm(dim, eps=eps)
            self.output = nn.Linear(dim, vocab, bias=False)

        def forward(self, tokens, freqs_cis):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h, freqs_cis)
            return self.output(self.norm(h))

    torch.manual_seed(0)
    model = Model().to(device=dev, dtype=torch.bfloat16)
    if a.mode == "compile":
        for i, layer in enumerate(model.layers):  # torchtitan's per-block compile
            model.layers[i] = torch.compile(layer, fullgraph=True)
    freqs = precompute_freqs_cis(a.seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, vocab, (a.batch, a.seq), device=dev)
    labels = torch.randint(0, vocab, (a.batch, a.seq), device=dev)

    def train_step():
        logits = model(tokens, freqs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.time()
    for _ in range(2):  # compiles (compile mode), autotunes cuBLAS, fills the caching allocator
        train_step()
    torch.cuda.synchronize()
    warm_s = time.time() - t0

    path = os.path.join(a.out, f"kineto-{a.mode}.json")
    written = []

    def export(p):  # called once the active steps are collected
        p.export_chrome_trace(path)
        written.append(path)

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=a.active, repeat=1),
                 on_trace_ready=export) as prof:
        for _ in range(1 + a.active):
            train_step()
            prof.step()
    torch.cuda.synchronize()
    if not written:
        print("error: the profiler collected no trace", file=sys.stderr)
        return 1
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)

    t0 = time.time()
    for _ in range(3):
        train_step()
    torch.cuda.synchronize()
    step_s = (time.time() - t0) / 3

    config = {
        "_name_or_path": f"meta-llama/Llama-3.1-8B, first {a.layers} layers "
                         "(tools/calibrate/device/profile_block.py)",
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim,
        "intermediate_size": ffn, "num_hidden_layers": a.layers, "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv, "head_dim": hd, "vocab_size": vocab,
        "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": eps,
        "rope_theta": theta, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    with open(os.path.join(a.out, "block-model.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"profile_block {a.mode}: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{a.layers} layers, batch {a.batch} x seq {a.seq}: warm-up {warm_s:.1f} s, "
          f"step {step_s * 1e3:.1f} ms unprofiled; trace {path}.gz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
