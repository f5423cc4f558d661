"""The Python API's overhead and its threads (issue 20), run by `tools/dev bench`:
  - 1,000 `train` calls on one loaded cluster through `meshsim.train` against the same 1,000 runs
    with no Python in the loop (`_meshsim.time_runs`: the library and command code alone);
  - two threads calling `train` on one cluster against the same calls one after the other.
Prints the figures; the targets are <= 1.2x and <= 0.65x (two cores)."""
import os
import sys
import threading
import time

SOURCE = os.environ.get("MESHSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.environ.get("MESHSIM_PYTHON_DIR",
                                  os.path.join(SOURCE, "build", "release", "python")))
import meshsim  # noqa: E402
from meshsim import _meshsim  # noqa: E402

NODE = os.path.join(SOURCE, "topologies", "dgx-h100-superpod.json")
MODEL = os.path.join(SOURCE, "workloads", "models", "llama3.1-8b.json")
OPTS = dict(mesh="dp=8,tp=2", seq=2048, gbs=16, zero=1)
N = 1000

cluster = meshsim.Cluster(NODE, nodes=2)
meshsim.train(cluster, MODEL, **OPTS)  # warm: routes and prices built once
args = ["train"] + cluster._flags() + ["--workload", MODEL, "--mesh", OPTS["mesh"], "--seq", "2048",
                                       "--gbs", "16", "--zero", "1", "--json", "--quiet"]
library_s = _meshsim.time_runs(args, cluster._c, N)
start = time.perf_counter()
for _ in range(N):
    meshsim.train(cluster, MODEL, **OPTS)
api_s = time.perf_counter() - start
print(f"{N} train calls: API {api_s:.3f} s, library alone {library_s:.3f} s: "
      f"{api_s / library_s:.3f}x (target <= 1.2x)")

M = 200
start = time.perf_counter()
for _ in range(2 * M):
    meshsim.train(cluster, MODEL, **OPTS)
serial_s = time.perf_counter() - start


def work():
    for _ in range(M):
        meshsim.train(cluster, MODEL, **OPTS)


threads = [threading.Thread(target=work) for _ in range(2)]
start = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
parallel_s = time.perf_counter() - start
print(f"{2 * M} train calls: two threads {parallel_s:.3f} s, one {serial_s:.3f} s: "
      f"{parallel_s / serial_s:.3f}x (target <= 0.65x on two cores)")
