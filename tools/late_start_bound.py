#!/usr/bin/env python3
"""What a collective's late start could cost, read off a `meshsim train --trace` file.

meshsim does not simulate a collective that starts late because the compute kernels running
beside it hold every SM (software-stacks.md §2.2 names the effect; no source quantifies it). This
bounds its first-order cost: for each collective that becomes ready while a compute segment of its
rank is running, the rest of that segment is the longest it could wait for SMs. The sum over a
rank's collectives is a bound on the waits, not a simulation (a wait could also shift what
follows). The README's interference section quotes it for the main job and two Megatron-Core rows.

Usage: tools/late_start_bound.py TRACE.json [--rank PID]
"""
import argparse
import bisect
import collections
import json
import sys


def late_start_waits(trace, rank=None):
    """Per simulated rank (trace pid): (step µs, {collective name: (count, µs waited)})."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    by_rank = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and (rank is None or e["pid"] == rank):
            by_rank[e["pid"]].append(e)
    out = {}
    for pid, evs in sorted(by_rank.items()):
        compute = sorted((e for e in evs if threads.get((pid, e["tid"])) == "compute"),
                         key=lambda e: e["ts"])
        starts = [e["ts"] for e in compute]
        waits = collections.defaultdict(lambda: [0, 0.0])
        for c in evs:
            if c.get("cat") != "comm":
                continue
            i = bisect.bisect_right(starts, c["ts"]) - 1
            if i < 0:
                continue
            seg = compute[i]
            rest = seg["ts"] + seg["dur"] - c["ts"]
            # Ready inside the segment (not at its end, up to the trace's µs rounding).
            if seg["ts"] < c["ts"] and rest > 1.0:
                waits[c["name"]][0] += 1
                waits[c["name"]][1] += rest
        step = max(e["ts"] + e["dur"] for e in evs) - min(e["ts"] for e in evs)
        out[pid] = (step, {k: tuple(v) for k, v in waits.items()})
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--rank", type=int, default=None, help="one trace pid (default: every rank)")
    a = ap.parse_args(argv)
    try:
        with open(a.trace) as f:
            trace = json.load(f)
        result = late_start_waits(trace, a.rank)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {a.trace}: {e}", file=sys.stderr)
        return 2
    for pid, (step, waits) in result.items():
        total = sum(w for _, w in waits.values())
        count = sum(n for n, _ in waits.values())
        print(f"rank {pid}: {count} collectives ready mid-segment, at most {total / 1e3:.1f} ms "
              f"waited ({100 * total / step:.2f} % of the {step / 1e3:.1f} ms step)")
        for name, (n, w) in sorted(waits.items(), key=lambda kv: -kv[1][1]):
            print(f"  {name:28s} {n:6d}  {w / 1e3:9.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
