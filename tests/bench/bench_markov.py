"""Markov PAUSE solver: time and peak memory on the paper's sizes and on about a million states.

Goals: the paper's instances (B1 = 10, B2 = 20, N = 2 or 3: 924 / 1386 states) well under 0.1 s each;
about a million states (B1, B2 in the hundreds, N = 16) in under a minute on 2 cores. Each large case runs in
a child process so that its peak RSS is its own (ru_maxrss of the child), and the figures of the machine's
load at the time are recorded beside them (the 2 cores are shared; timings are noisy).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ccrig.analysis import pause_markov as pm
B1, B2, N, method = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
T = int(0.75 * B2)
p = pm.PauseParams(lam=pm.linear_rates(50.0, 1.0, N), B1=B1, B2=B2, T1=T, T2=T, rtt=1.0).validate()
t0 = time.perf_counter(); Q = pm.generator(p)
t1 = time.perf_counter(); rec = pm.recurrent_states(p, Q)
t2 = time.perf_counter(); pi = pm.stationary(Q, rec, blocks=pm._states(p)[3][rec], method=method)
t3 = time.perf_counter(); m = pm.measures(p, pi)
t4 = time.perf_counter()
print(json.dumps({"B1": B1, "B2": B2, "N": N, "T1": T, "T2": T, "method": method,
                  "states": p.n_states, "recurrent_states": int(rec.size), "nnz": int(Q.nnz),
                  "generator_s": t1 - t0, "closed_class_s": t2 - t1, "solve_s": t3 - t2, "measures_s": t4 - t3,
                  "total_s": t4 - t0, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "throughput": m.throughput,
                  "throughput_disagreement": max(abs(m.throughput - m.throughput_via_queue1),
                                                 abs(m.throughput - m.throughput_via_departures))}))
"""


def _paper() -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from ccrig.analysis import pause_markov as pm

    out = []
    for lam in ((25.0, 1.0), (50.0, 1.0), (50.0, 25.0, 1.0)):
        p = pm.PauseParams(lam=lam, T1=15, T2=15, rtt=1.0)
        pm.solve(p)  # warm imports and caches
        times = []
        for _ in range(20):
            t = time.perf_counter()
            m = pm.solve(p)
            times.append(time.perf_counter() - t)
        times.sort()
        out.append({"lam": list(lam), "states": m.n_states, "recurrent_states": m.n_recurrent,
                    "median_s": times[len(times) // 2], "min_s": times[0], "max_s": times[-1],
                    "goal_s": 0.1, "met": times[len(times) // 2] < 0.1})
    return out


def _large(B1: int, B2: int, N: int, method: str = "auto") -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(B1), str(B2), str(N), method],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"B1": B1, "B2": B2, "N": N, "error": r.stderr.strip().splitlines()[-1:]}
    return json.loads(r.stdout)


def run() -> dict:
    load_before = os.getloadavg()
    paper = _paper()
    large = [_large(100, 100, 16), _large(250, 250, 16)]
    big = large[-1]
    return {
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "paper_sizes": paper,
        "large": large,
        "million_states_goal_s": 60.0,
        "million_states_met": "total_s" in big and big["total_s"] < 60.0,
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
