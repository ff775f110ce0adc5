"""Steal: the share of this machine's CPU the hypervisor gives other guests, probed, and a wait for it to pass.

    Gate(say, stop).note(record)     a finished pair's record: spoiled while steal was worth naming -> held
    Gate.held                        the engine starts no pair while held
    Gate.wait()                      with nothing running: probes until quiet, the budget's end or MAX_WAIT_S
    probe(seconds) -> (steal, busy)  every core busy for `seconds`; the stolen share of it, and the least busy core's

Why wait: on this cloud VM steal comes in spells of minutes (2026-12-03: three of four study runs met 5-31 %
within 6-10 minutes of a quiet start). A pair run then is spoiled (its delay line late, its machine limited) and
so is its lone rerun: under 5-31 % steal **0 of 85** lone reruns stood (study 000 runs Q and R), at 5 % 30 of 39
did (run J). Each spent attempt costs budget, and after 1 + RERUNS the point is given up. So when a pair comes
back spoiled with steal named, the engine admits nothing more, lets the running pairs end, and probes.

Why a probe that burns: steal is only counted while a guest wants the CPU, so an idle machine reads 0 % whatever
its neighbours do (run N's host: 0 % at rest, 12-62 % with both cores busy). The probe keeps every core busy
(one spinning process per core) for PROBE_S and reads /proc/stat's steal column over it; it also reads how busy
each core was, so a probe that did not load the machine (a core left idle) is said, not trusted.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Callable

from ccrig.analysis import samples
from ccrig.experiments.run import fidelity, signals

PROBE_S = 3.0        # a probe's burn: 300 jiffies a core, steal read to about 0.3 %
WAIT_S = 30.0        # between probes: spells last minutes, a probe's load is one tenth of the time
MAX_WAIT_S = 300.0   # a wait without a budget ends here (the run goes on; its reruns' limit decides)
QUIET = fidelity.STEAL_NOTED   # below it the machine is quiet enough: run J's lone reruns stood at 5 %
LOADED = 0.8         # a probe whose least busy core was busy less than this did not load the machine


def _spin(deadline: float) -> None:
    """One core busy until the deadline (a forked child: the run's signal handlers are not its)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C goes to the run, which ends the probe
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signals.unblock()   # started with them blocked: one that came before the lines above waited for them
    while time.monotonic() < deadline:
        pass
    os._exit(0)


def probe(seconds: float = PROBE_S) -> tuple[float, float]:
    """(steal, busy): every core busy for `seconds`, the share of that time the hypervisor stole, and the busy
    share of the least busy core (the probe's own check that it loaded every core)."""
    ctx = multiprocessing.get_context("fork")
    before = fidelity.cpu_times()
    deadline = time.monotonic() + seconds
    spinners = [ctx.Process(target=_spin, args=(deadline,), name="ccrig-steal-probe")
                for _ in range(os.cpu_count() or 1)]
    try:
        with signals.blocked():   # a spinner meets no signal before its own handlers are in place
            for p in spinners:
                p.start()
        for p in spinners:
            p.join()
    finally:   # a Ctrl-C during the probe: no spinner outlives it
        for p in spinners:
            if p.is_alive():
                p.terminate()
            p.join()
    after = fidelity.cpu_times()
    busy = fidelity.busy_between(before, after)   # stolen time counts busy: the guest wanted it
    return fidelity.busy_between(before, after, 3)["cpu"], min(v for c, v in busy.items() if c != "cpu")


def stolen(record: dict | None) -> float | None:
    """The steal share a finished pair's record names, when the record is spoiled and it is worth naming."""
    if not record or samples.spoiled_by(record) is None:
        return None
    steal = (record.get("fidelity") or {}).get("cpu_steal") or 0.0
    return steal if steal >= QUIET else None


class Gate:
    """Held by a pair spoiled under steal; wait() probes until the machine is quiet. `waits` records each wait
    (when, how long, every probe's reading, how it ended) and `waited` their seconds, which a round's time per
    pair leaves out (the budget's cost per pair is the machine's, not the hypervisor's)."""

    def __init__(self, say: Callable[[str], None], stop: Callable[[], bool] = lambda: False,
                 bounded: bool = False, probe: Callable[[], tuple[float, float]] = probe,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        """bounded: stop() ends every wait (a study's --budget); else a wait ends after MAX_WAIT_S too."""
        self.say, self.stop, self.bounded = say, stop, bounded
        self.probe, self.sleep, self.clock = probe, sleep, clock
        self.held = False
        self.cause: str = ""
        self.waits: list[dict] = []
        self.waited = 0.0

    def note(self, record: dict | None, name: str = "") -> None:
        steal = stolen(record)
        if steal is not None and not self.held:
            self.held = True
            self.cause = f"{name + ' was ' if name else ''}spoiled while the hypervisor took {steal:.0%}"

    def wait(self) -> None:
        """Probes (nothing of the run running) until one reads under QUIET; between probes, WAIT_S. Ends early
        when stop() is true or, unbounded, after MAX_WAIT_S: the run then goes on and its reruns' limit decides."""
        start, probes, ended = self.clock(), [], "quiet"
        self.say(f"{self.cause}: no pair starts until the machine is quiet (a probe of {PROBE_S:g} s with every "
                 f"core busy reads steal under {QUIET:.0%}); probing every {WAIT_S:g} s")
        while True:
            steal, busy = self.probe()
            probes.append({"at_s": round(self.clock() - start, 1), "steal": round(steal, 4), "busy": round(busy, 3)})
            if busy < LOADED:
                self.say(f"warning: the steal probe kept its least busy core only {busy:.0%} busy: its reading "
                         f"({steal:.0%}) is not trusted")
            elif steal < QUIET:
                break
            if self.stop():
                ended = "the budget ended"
                break
            if not self.bounded and self.clock() - start >= MAX_WAIT_S:
                ended = f"steal stayed after {MAX_WAIT_S:g} s: going on"
                break
            self.sleep(WAIT_S)
        seconds = self.clock() - start
        self.waits.append({"cause": self.cause, "seconds": round(seconds, 1), "probes": probes, "ended": ended})
        self.waited += seconds
        self.held = False
        self.say(f"waited {seconds:.0f} s for steal to pass ({len(probes)} probe(s), last {probes[-1]['steal']:.0%}): "
                 f"{ended}")
