"""A what-if sweep from Python: Llama 3.1 70B on 8, 16 and 32 DGX H100 nodes × TP 1, 2, 4, 8
(ZeRO-3, the rest data-parallel, 8K sequences, 512 per step). One loaded cluster per size; each
`train` call reuses its routes and collective prices. Prints a table and, when matplotlib is
installed, writes sweep_nodes_tp.png.

  PYTHONPATH=build/release/python python3 examples/sweep_nodes_tp.py
"""
import os

import meshsim

HERE = os.path.dirname(os.path.abspath(__file__))
POD = os.path.join(HERE, "..", "topologies", "dgx-h100-superpod.json")

rows = []
for nodes in (8, 16, 32):
    cluster = meshsim.Cluster(POD, nodes=nodes)
    for tp in (1, 2, 4, 8):
        r = meshsim.train(cluster, "llama3.1-70b", mesh=f"tp={tp}", zero=3, seq=8192, gbs=512,
                          allow_oom=True)
        rows.append({"nodes": nodes, "gpus": cluster.gpus, "tp": tp,
                     "tokens_per_s_per_gpu": r["tokens_per_s_per_gpu"], "mfu": r["mfu"],
                     "exposed_tp_s": r["exposed_comm_s"]["tp"], "step_s": r["step_time_s"],
                     "fits": r.get("fits", True)})

print(f"{'nodes':>5} {'tp':>3} {'tok/s/GPU':>10} {'MFU':>6} {'exp tp s':>9} {'step s':>7} fits")
for row in rows:
    print(f"{row['nodes']:>5} {row['tp']:>3} {row['tokens_per_s_per_gpu']:>10.1f} "
          f"{row['mfu']:>6.1%} {row['exposed_tp_s']:>9.3f} {row['step_s']:>7.3f} {row['fits']}")

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: no plot")
else:
    fig, ax = plt.subplots(figsize=(6, 4))
    for tp in (1, 2, 4, 8):
        pts = [(r["gpus"], r["tokens_per_s_per_gpu"]) for r in rows if r["tp"] == tp]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"TP {tp}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title("Llama 3.1 70B, ZeRO-3, seq 8192, 512 sequences per step")
    ax.legend()
    fig.tight_layout()
    fig.savefig("sweep_nodes_tp.png", dpi=120)
    print("wrote sweep_nodes_tp.png")
