"""tools/late_start_bound.py: the late-start bound the README quotes, on a hand-made trace and on a
real one from `meshsim train --trace`."""
import importlib.util
import json
import os
import subprocess

from conftest import CLI, SOURCE

_spec = importlib.util.spec_from_file_location(
    "late_start_bound", os.path.join(SOURCE, "tools", "late_start_bound.py"))
bound = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bound)


def _thread(tid, name):
    return {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}


def _op(tid, cat, name, ts, dur):
    return {"name": name, "cat": cat, "ph": "X", "pid": 0, "tid": tid, "ts": ts, "dur": dur}


def test_hand_made_trace():
    # Compute segments [0, 10) and [10, 30) µs. A reduce-scatter ready at 5 would wait 5 µs, an
    # all-gather ready at 10 (a segment's end) none, an all-reduce ready at 15 would wait 15 µs,
    # and one ready at 29.5 (within the trace's µs rounding of the end) none.
    trace = {"traceEvents": [
        _thread(0, "compute"), _thread(1, "dp"),
        _op(0, "compute", "a", 0, 10), _op(0, "compute", "b", 10, 20),
        _op(1, "comm", "reduce_scatter", 5, 3), _op(1, "comm", "all_gather", 10, 2),
        _op(1, "comm", "all_reduce", 15, 4), _op(1, "comm", "all_reduce", 29.5, 1)]}
    step, waits = bound.late_start_waits(trace)[0]
    assert step == 30.5
    assert waits == {"reduce_scatter": (1, 5), "all_reduce": (1, 15)}


def test_real_trace(tmp_path):
    # The main job's winner layout at 8 nodes: the HSDP replica all-reduces queue behind the shard
    # reduce-scatter, so some collectives become ready mid-segment; the bound stays below the step.
    trace = tmp_path / "t.json"
    subprocess.run([CLI, "train", "--topology",
                    os.path.join(SOURCE, "topologies", "dgx-h100-superpod.json"), "--nodes", "8",
                    "--workload", os.path.join(SOURCE, "workloads", "models", "llama3.1-8b.json"),
                    "--seq", "8192", "--gbs", "64", "--mesh", "tp=4,dp=16,fsdp=4", "--zero", "3",
                    "--trace", str(trace), "--quiet"], check=True, capture_output=True)
    result = bound.late_start_waits(json.loads(trace.read_text()))
    step, waits = result[0]
    total = sum(w for _, w in waits.values())
    assert 0 < total < step
    assert all(n > 0 for n, _ in waits.values())


def test_bad_file_is_one_error_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert bound.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: " + str(bad) + ": ") and err.count("\n") == 1
