"""The Python API against the CLI's --json: same inputs, equal documents; errors as exceptions."""
import json
import os
import subprocess
import threading

import pytest

import meshsim
from conftest import CLI, SOURCE


def src(*parts):
    return os.path.join(SOURCE, *parts)


def cli_json(args):
    r = subprocess.run([CLI] + args + ["--json"], capture_output=True, text=True, check=False)
    assert r.returncode in (0, 3), r.stderr
    return json.loads(r.stdout)


NODE = src("topologies", "dgx-h100.json")
POD = src("topologies", "dgx-h100-superpod.json")
MODEL = src("workloads", "models", "llama3.1-8b.json")


def test_train_equals_cli_and_reuses_the_cluster():
    cluster = meshsim.Cluster(POD, nodes=2)
    assert cluster.gpus == 16
    opts = dict(mesh="dp=4,tp=2,pp=2", seq=4096, gbs=16, zero=1)
    expected = cli_json(["train", "--topology", POD, "--nodes", "2", "--workload", MODEL,
                         "--mesh", "dp=4,tp=2,pp=2", "--seq", "4096", "--gbs", "16", "--zero", "1"])
    first = meshsim.train(cluster, MODEL, **opts)
    assert first == expected
    # The second call on the loaded cluster reuses its routes and prices: the same document.
    assert meshsim.train(cluster, MODEL, **opts) == expected
    # A path instead of a Cluster loads it for the call: the same document again.
    assert meshsim.train(POD, MODEL, nodes=2, **opts) == expected
    assert first.to_dict() == expected


def test_search_equals_cli_and_gives_flat_records():
    args = dict(seq=2048, gbs=16, top=3)
    r = meshsim.search(NODE, MODEL, **args)
    expected = cli_json(["search", "--topology", NODE, "--workload", MODEL, "--seq", "2048",
                         "--gbs", "16", "--top", "3", "--quiet"])
    assert r == expected
    # One flat row per simulated layout, ranked first.
    rows = r.records()
    assert len(rows) == len(expected["results"]) >= 3
    for row in rows:
        assert not any(isinstance(v, dict) for v in row.values())
        assert row["step_time_s"] > 0 and "mesh.tp" in row
    ranked = [row for row in rows if row["rank"] <= 3]
    assert [row["rank"] for row in ranked] == [1, 2, 3]
    assert [row["step_time_s"] for row in ranked] == sorted(row["step_time_s"] for row in ranked)
    pandas = pytest.importorskip("pandas")
    assert len(pandas.DataFrame(rows)) == len(rows)


def test_serve_memory_collective_ops_topo_equal_cli():
    serve = meshsim.serve(NODE, MODEL, mesh="tp=2", replicas=2, rate=4, requests=40)
    assert serve == cli_json(["serve", "--topology", NODE, "--workload", MODEL, "--mesh", "tp=2",
                              "--replicas", "2", "--rate", "4", "--requests", "40", "--quiet"])
    assert len(serve.records()) >= 1
    mem = meshsim.memory(MODEL, gpu="H100-SXM5-80GB", mesh="dp=8", seq=4096, zero=3)
    assert mem == cli_json(["memory", "--workload", MODEL, "--gpu", "H100-SXM5-80GB",
                            "--mesh", "dp=8", "--seq", "4096", "--zero", "3"])
    coll = meshsim.collective(NODE, op="all_reduce", gpus=8, sizes="1M")
    assert coll == cli_json(["collective", "--topology", NODE, "--op", "all_reduce", "--gpus", "8",
                             "--sizes", "1M"])
    ops = meshsim.ops(MODEL, gpu="H100-SXM5-80GB", tokens=4096, tp=2)
    assert ops == cli_json(["ops", "--workload", MODEL, "--gpu", "H100-SXM5-80GB",
                            "--tokens", "4096", "--tp", "2"])
    assert [o["name"] for o in ops["ops"]][:2] == ["input_norm", "qkv_proj"]
    topo = meshsim.topo(NODE)
    assert topo == cli_json(["topo", "--topology", NODE])


def test_dicts_for_clusters_and_models():
    with open(NODE) as f:
        cluster = json.load(f)
    with open(MODEL) as f:
        model = json.load(f)
    a = meshsim.train(meshsim.Cluster(cluster), model, mesh="dp=8", seq=2048, gbs=8, zero=3)
    b = meshsim.train(NODE, MODEL, mesh="dp=8", seq=2048, gbs=8, zero=3)
    assert a["step_time_s"] == b["step_time_s"]


def test_a_stack_as_a_dict_is_its_file():
    with open(src("workloads", "stacks", "torchtitan.json")) as f:
        stack = json.load(f)
    by_dict = meshsim.train(NODE, MODEL, mesh="dp=8", seq=2048, gbs=8, zero=3, stack=stack)
    by_name = meshsim.train(NODE, MODEL, mesh="dp=8", seq=2048, gbs=8, zero=3, stack="torchtitan")
    assert by_dict["step_time_s"] == by_name["step_time_s"]
    stack["tp_overlap"]["method"] = "carrier-pigeon"
    with pytest.raises(meshsim.InputError) as e:
        meshsim.train(NODE, MODEL, mesh="dp=8", seq=2048, gbs=8, zero=3, stack=stack)
    assert e.value.path == "/tp_overlap/method"


def test_bad_input_raises_input_error_with_file_and_path():
    with pytest.raises(meshsim.InputError) as e:
        meshsim.train(NODE, MODEL, mesh="dp=4", seq=2048, gbs=8)
    assert e.value.path == "--mesh" and e.value.file is None
    assert str(e.value).startswith("--mesh: dp=4 tp=1 pp=1 cp=1 ep=1 has 4 ranks")
    with open(NODE) as f:
        cluster = json.load(f)
    cluster["node"]["links"][0]["bandwidth_GBps"] = -1
    with pytest.raises(meshsim.InputError) as e:
        meshsim.Cluster(cluster)
    assert e.value.file.endswith(".json") and e.value.path == "/node/links/0/bandwidth_GBps"
    with pytest.raises(meshsim.InputError) as e:
        meshsim.train(NODE, {"name": "x", "hidden_size": -4}, mesh="dp=8")
    assert e.value.file.endswith(".json") and e.value.path
    with pytest.raises(meshsim.InputError) as e:
        meshsim.train(NODE, "no-such-model", mesh="dp=8")
    assert e.value.file == "no-such-model" and "bundled" in e.value.message
    # Output that does not arrive is not the input's fault.
    with pytest.raises(meshsim.InternalError):
        meshsim.train(NODE, MODEL, mesh="dp=8", seq=2048, gbs=8, zero=3, trace="/dev/full")


def test_does_not_fit_is_a_verdict_not_an_error():
    r = meshsim.train(NODE, MODEL, mesh="dp=8", seq=2048, gbs=8)  # ZeRO-0: 18 B × 8 B params
    assert r["fits"] is False


def test_same_inputs_same_outputs():
    cluster = meshsim.Cluster(NODE)
    runs = [meshsim.train(cluster, MODEL, mesh="dp=4,tp=2", seq=2048, gbs=8, zero=1)
            for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert meshsim.search(NODE, MODEL, seq=2048, gbs=16, top=5) == \
        meshsim.search(NODE, MODEL, seq=2048, gbs=16, top=5)


def test_the_gil_is_released_while_simulating():
    # While a search runs in another thread, this thread keeps running Python: with the GIL
    # held it could not take a step until the search returned.
    done = threading.Event()
    result = {}

    def work():
        result["r"] = meshsim.search(POD, MODEL, nodes=4, seq=4096, gbs=64, top=3)
        done.set()

    t = threading.Thread(target=work)
    steps = 0
    t.start()
    while not done.is_set():
        steps += 1
    t.join()
    assert result["r"]["results"]
    assert steps > 1000


def test_threads_on_one_cluster_agree_with_serial_runs():
    cluster = meshsim.Cluster(POD, nodes=2)
    meshes = ["dp=16", "dp=8,tp=2", "dp=4,tp=4", "dp=2,tp=8"]
    serial = [meshsim.train(cluster, MODEL, mesh=m, seq=2048, gbs=16, zero=3) for m in meshes]
    out = [None] * len(meshes)

    def work(i):
        out[i] = meshsim.train(cluster, MODEL, mesh=meshes[i], seq=2048, gbs=16, zero=3)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(meshes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == serial
