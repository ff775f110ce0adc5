"""A run's seed fixes its workloads' random times (schedule.flow_seed -> sources.py --seed): every flow and
repetition its own, the same again for the same seed, so `ccrig run` with a spec's seed (or a study's --seed)
replays the same Poisson arrivals, on/off periods and think times. Checked at the receiver, real processes on
the loopback: the times the packets were sent, not the seed we passed."""
import signal
import socket
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

from ccrig.experiments import spec as specmod
from ccrig.experiments.nodes import SOURCES
from ccrig.experiments.run import schedule
from ccrig.experiments.run.repetition import flows_of
from ccrig.experiments.workloads.packets import read_log


def _exp():
    text = ("name: t\ntopology: {name: dumbbell, bottleneck: {rate: 10mbit}}\nduration: 5s\nflows:\n"
            "  - {workload: {kind: poisson, rate: 50pps, size: 100b}}\n"
            "  - {workload: {kind: interactive, think: 50ms}}\n"
            "  - {workload: {kind: onoff, rate: 100pps, size: 100b, on: 1s, off: 1s, periods: exponential}}\n")
    return specmod.validate(yaml.safe_load(text), "t")


def _seed_of(argv: list[str]) -> int | None:
    return int(argv[argv.index("--seed") + 1]) if "--seed" in argv else None


def test_each_flow_and_repetition_has_its_own_seed_and_the_run_seed_fixes_them():
    exp = _exp()
    topo = exp.topology.build(exp.n_flows)
    laws = {1: "reno"}
    a = [f.client_argv("198.18.0.2") for f in flows_of(exp, topo, laws, rep=0, seed=7, point=1)]
    again = [f.client_argv("198.18.0.2") for f in flows_of(exp, topo, laws, rep=0, seed=7, point=1)]
    other_rep = [f.client_argv("198.18.0.2") for f in flows_of(exp, topo, laws, rep=1, seed=7, point=1)]
    other_run = [f.client_argv("198.18.0.2") for f in flows_of(exp, topo, laws, rep=0, seed=8, point=1)]
    seeds = [_seed_of(c) for c in a]
    assert None not in seeds and len(set(seeds)) == 3
    assert seeds == [_seed_of(c) for c in again]
    assert seeds[0] == schedule.flow_seed(7, 1, 0, 0)
    assert not set(seeds) & {_seed_of(c) for c in other_rep + other_run}
    # no run seed (a unit run on its own): the sources draw their own, as before
    assert all("--seed" not in f.client_argv("198.18.0.2") for f in flows_of(exp, topo, laws))


def _send_times(tmp: Path, name: str, seed: int) -> list[float]:
    """The send times (from the first) of a Poisson source at 50 packets/s for 1 s, as its receiver logged them."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:   # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    recv = subprocess.Popen([sys.executable, str(SOURCES), "udp-recv", "--bind", "127.0.0.1", "--port", str(port),
                             "--key", "k"], stdout=subprocess.PIPE, text=True)
    try:
        lines = [recv.stdout.readline()]   # ready: its first line comes once its socket is bound
        subprocess.run([sys.executable, str(SOURCES), "udp-send", "--to", "127.0.0.1", "--port", str(port),
                        "--size", "100", "--duration", "1", "--pattern", "poisson", "--pps", "50",
                        "--seed", str(seed)], check=True, capture_output=True, timeout=30)
    finally:
        recv.send_signal(signal.SIGTERM)
        lines.append(recv.communicate(timeout=10)[0])
    log = tmp / f"{name}.jsonl"
    log.write_text("".join(lines))
    sent = sorted(p.t_send for p in read_log(log, "k").packets)
    return [t - sent[0] for t in sent]


def _apart(a: list[float], b: list[float]) -> float:
    """The median distance between the two sources' k-th send times (ms), over the packets both sent."""
    return 1e3 * statistics.median(abs(x - y) for x, y in zip(a, b))


def test_the_same_seed_sends_at_the_same_times_and_another_does_not(tmp_path):
    one, same, other = (_send_times(tmp_path, n, s) for n, s in (("one", 11), ("same", 11), ("other", 12)))
    assert len(one) >= 20 and len(other) >= 20, (len(one), len(other))
    # the same seed: apart by the timers' lateness only (a busy 2-core machine: a few ms); another seed: the
    # k-th of two Poisson processes at 50/s lie ~20 ms * sqrt(2k) apart
    assert _apart(one, same) < 10, _apart(one, same)
    assert _apart(one, other) > 30, _apart(one, other)
