"""Pairs side by side: repetitions at once on this machine, each a process of its own, admitted by cost.

    side_by_side(pairs, slots, unit_of, prefix, lent_of, finished, cost, capacity)
      pairs are started in the order given (the run's seeded order) while a slot is free and the sum of the
      running pairs' costs plus the next one's fits `capacity` (the next waits otherwise: the order is kept);
      slot k's pair gets the name prefix <run prefix>-j<k>, so its namespaces, devices and BPF pins never meet
      another's, and `ccrig clean` still finds them by the run's prefix; each pair's samples and progress come
      back over a pipe to its run's sinks and bar (lent_of(pair): a study's specs share one queue, each with
      its own run); its record (or its failure) to `finished` as it ends, in
      whatever order they end, with whether another pair ran beside it at any time. finished() may ask for the
      pair again (a spoiled repetition, runner.py): as any pair it is queued first, alone (nothing beside it)
      last.

A child is forked from the run, so it shares the laws the run loaded (by name) and imports nothing again. It
traps SIGINT and SIGTERM itself and tears its repetition down on either: Ctrl-C in a terminal reaches every
process of the group at once, and a SIGTERM to the run alone is passed on to the children. The run waits for
every child's teardown before it goes on (or out).

A pair's cost (`--jobs auto`, pair_cost()): the wire packets per second it pushes through this machine (the
bottleneck's rate in frames, or what random loss leaves TCP flows, every hop counted) plus its flows' samplers
and programs; the capacity is what
calibration.py measured on this machine. A pair costlier than the capacity runs alone. A testbed that cannot
run two pairs side by side (a vm's guest takes both cores) gets one slot.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import time
from multiprocessing.connection import wait
from typing import Callable

from ccrig.commands import Commands
from ccrig.errors import CcrigError, InputError, PathError, RunError
from ccrig.units import wire_bytes
from ccrig.topologies import testbeds
from ccrig.experiments.run import repetition, signals
from ccrig.experiments.run.repetition import Lent, Unit
from ccrig.experiments.run.steal import Gate

# pairs at once at most, whatever the capacity holds: each is a process with its programs. Four per core: eight
# 10 Mbit/s pairs of the default spec side by side on these 2 cores all read fidelity ok, their goodput
# 9.569 +-0.021 Mbit/s against 9.547 +-0.028 one at a time (twice the study throughput of four at once)
MAX_JOBS = 4 * (os.cpu_count() or 1)
# a flow's own cost beside its packets, in packets/s of the same path: its sampler's TCP_INFO poll every 20 ms,
# iperf3's two processes and their timers. An estimate (a few per cent of a core per flow here), small beside a
# 10 Mbit/s pair's 3.3k packets/s; the interference bench checks the sum
FLOW_PPS = 300.0


def parse_jobs(value: str) -> int | str:
    """--jobs: auto or a whole number of pairs from 1 to 64."""
    if value == "auto":
        return value
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise InputError(f"--jobs: got {value!r}; expected auto or a whole number from 1 to 64")
    return int(value)


def bottleneck_bps(exp) -> float | None:
    """The bottleneck's configured rate in wire bits per second (None: unshaped)."""
    topo = exp.topology.build(exp.n_flows)
    rate = topo.egress_of(*topo.bottleneck).egress.rate
    return None if rate is None else rate.bps(topo.wire)


def pair_pps(exp) -> float:
    """The most wire packets per second a point's pairs push through this machine: the bottleneck's rate in
    frames, or less where random loss holds TCP flows below it (loss_limited_pps), every hop counted once; inf
    when nothing limits them."""
    topo = exp.topology.build(exp.n_flows)
    bps = bottleneck_bps(exp)
    pps = min(float("inf") if bps is None else bps / (8 * wire_bytes(topo.mtu)), loss_limited_pps(exp, topo))
    return pps * max(1, len(topo.path(*topo.pairs[0])))   # unshaped and lossless: inf, so alone


# a TCP flow through random loss p carries about sqrt(3 / (2p)) segments per RTT on average (Mathis et al. 1997);
# measured here above it: 30 flows at PER 0.01 and 500 ms RTT carried 26.8 Mbit/s, 3.0 times the equation (SACK
# recovers several losses in one event). A pair's cost is an average, and an estimate too high only admits fewer
LOSS_HEADROOM = 6.0


def loss_limited_pps(exp, topo) -> float:
    """The most packets per second a point's flows carry through their paths' random loss: each flow
    LOSS_HEADROOM times the Mathis equation at the path's loss and configured RTT. inf where that bounds
    nothing: a flow not TCP, a path without loss or delay, a loss chain (Gilbert-Elliott)."""
    if not all(getattr(f.workload, "tcp_info", False) for f in exp.flows):
        return float("inf")
    worst = 0.0
    for sender, receiver in topo.pairs:
        losses = [topo.egress_of(a, b).egress.loss for a, b in topo.path(sender, receiver)]
        if not all(isinstance(p, float) for p in losses):
            return float("inf")
        p, rtt = 1 - math.prod(1 - x for x in losses), topo.rtt(sender, receiver)
        if p <= 0 or rtt <= 0:
            return float("inf")
        worst = max(worst, LOSS_HEADROOM * math.sqrt(1.5 / p) / rtt)
    return exp.n_flows * worst


def pair_cost(exp) -> float:
    """What a pair of this point costs the machine, in calibration.py's unit (packets/s, hops counted)."""
    return pair_pps(exp) + FLOW_PPS * exp.n_flows


def slots(points, able: bool, capacity: float | None) -> int:
    """How many pairs may run at once under --jobs auto: 1 where the testbed cannot run two side by side (a vm's
    guest takes both cores; a remote testbed's hosts are shared by every pair; Mininet names devices in the root
    namespace), else as many of the cheapest point's pairs as the capacity holds (at most MAX_JOBS: each pair
    is a process and its programs; the costs decide which pairs go together)."""
    if not able or capacity is None:
        return 1
    cheapest = min(pair_cost(p.experiment) for p in points)
    return max(1, min(MAX_JOBS, int(capacity // cheapest)))


def _child(unit: Unit, conn) -> None:
    """A pair in a process of its own: its record, failure or interruption over conn, then out without running
    what the run registered to run at its exit (its sinks are the run's, not the child's)."""
    def send(*msg):
        try:
            conn.send(msg)
        except (BrokenPipeError, OSError):
            pass
    try:
        with signals.trapped():
            signals.unblock()   # forked with them blocked (side_by_side): a signal that came in the bootstrap is here
            lent = Lent(Commands(unit.out / "commands.log"), publish=lambda s: send("samples", s),
                        tick=lambda: send("tick"))
            entry = repetition.run(unit, lent)
        send("done", entry)
    except signals.Interrupted as e:
        send("interrupted", str(e))
    except PathError as e:   # its kind crosses the pipe: the run reruns the pair instead of failing it
        send("path", str(e))
    except CcrigError as e:
        send("failed", str(e))
    except BaseException as e:  # noqa: BLE001 - the run reports it with the pair; nothing escapes the child
        send("failed", f"{type(e).__name__}: {e}")
    finally:
        conn.close()
        os._exit(0)


ALONE, AGAIN = "alone", "again"   # what finished() may answer: the pair once more, alone or as any other


class _Queue:
    """The pairs still to start, in order, each with whether it must run alone; and the ones running."""

    def __init__(self, pairs, cost: Callable[[tuple], float], capacity: float, gate: Gate | None = None):
        self.waiting = [(p, False) for p in pairs]
        self.cost, self.capacity, self.gate = cost, capacity, gate
        self.running: dict = {}   # the pipe's end -> [pair, process, slot, cost, alone, beside, unit]

    def next_fits(self, free: list[int]) -> bool:
        """Whether the first waiting pair may start now: a free slot, the gate not held (a pair came back spoiled
        under steal), and alone (nothing running) when it or a running pair must be, or its cost fits beside the
        running pairs'. Nothing running: it starts, whatever it costs (a pair the machine cannot carry beside
        others runs alone)."""
        if not self.waiting or not free or (self.gate is not None and self.gate.held):
            return False
        if not self.running:
            return True
        pair, alone = self.waiting[0]
        load = sum(r[3] for r in self.running.values())
        return not alone and not any(r[4] for r in self.running.values()) and \
            load + self.cost(pair) <= self.capacity

    def again(self, pair: tuple, how: str) -> None:
        """A pair to run once more: as any pair, first in line; alone, last in line, so the others are not held
        back while the machine drains for it, and the lone reruns of a run follow one another at its end (each
        drain cost the run its slots: one 001 spec spent 40 % of its wall time with one pair running)."""
        if how == ALONE:
            self.waiting.append((pair, True))
        else:
            self.waiting.insert(0, (pair, False))


def named(pair: tuple) -> str:
    """A pair as a line names it: (point, repetition[, variant]), or a study's (spec, point, repetition[, ...])."""
    spec, (point, rep, *_) = (pair[0], pair[1:]) if isinstance(pair[0], str) else ("", pair)
    return f"{spec + ' ' if spec else ''}point {point} repetition {rep}"


def sweep(unit: Unit) -> None:
    """Removes what a pair's process left under its names once the process has ended (nothing, when its own teardown
    ran), by its testbed's clean, logged in the pair's commands.log; says what it removed: a leftover is a teardown
    that did not run or did not finish."""
    bed = testbeds.get(unit.point.experiment.testbed)
    said = bed.clean(Commands(unit.out / "commands.log"), f"{unit.prefix}-", lambda name: False)
    if said:
        sys.stderr.write(f"warning: {named((unit.point.index, unit.rep))} left behind what its slot's next pair "
                         f"needs: {'; '.join(said)}\n")


class Until:
    """A study's --budget in a round (runner.py's Options.until): no pair starts that could not end by `ends`
    (time.monotonic()), a pair taken to last as long as the longest attempt the round has seen end, and at least
    its specs' longest experiment. An experiment's duration alone let a pair end past the budget by its set-up and
    teardown: study 001's 26-32 s pairs took 31-52 s from their first command to their last (run AT)."""

    def __init__(self, ends: float, duration: float):
        self.ends, self.longest = ends, duration

    def took(self, seconds: float) -> None:
        self.longest = max(self.longest, seconds)

    def passed(self) -> bool:
        return time.monotonic() + self.longest >= self.ends


def one_at_a_time(pairs: list[tuple], unit_of: Callable[[tuple], Unit], lent_of: Callable[[tuple], Lent],
                  finished: Callable[[tuple, dict | None, RunError | None, bool], str | None],
                  running: Callable[[tuple | None], None] = lambda pair: None,
                  stop: Callable[[], bool] = lambda: False, gate: Gate | None = None) -> None:
    """The pairs one after another in this process (no fork: in a TCG guest a forked child's copy-on-write faults
    are emulated one by one); a pair finished() asks for again runs next. running(pair) says which is running
    (None between), for a second Ctrl-C's line. None starts once stop() is true (a study's --budget has ended):
    the ones left are the caller's to count. gate: a pair spoiled under steal holds the next until it passes."""
    queue = list(pairs)
    while queue and not stop():
        if gate is not None and gate.held:
            gate.wait()
            continue
        pair = queue.pop(0)
        running(pair)
        try:
            entry, error = repetition.run(unit_of(pair), lent_of(pair)), None
        except RunError as e:
            entry, error = None, e
        finally:
            running(None)
        if gate is not None:
            gate.note(entry, named(pair))
        if finished(pair, entry, error, False):
            queue.insert(0, pair)


def side_by_side(pairs: list[tuple], slots: int, unit_of: Callable[[tuple, str], Unit], prefix: str,
                 lent_of: Callable[[tuple], Lent], finished: Callable[[tuple, dict | None, RunError | None, bool], str | None],
                 cost: Callable[[tuple], float] = lambda pair: 0.0, capacity: float = math.inf,
                 stop: Callable[[], bool] = lambda: False, gate: Gate | None = None) -> None:
    """Runs the pairs, at most `slots` at once and within `capacity`; finished(pair, record, None, beside) or
    finished(pair, None, error, beside) as each ends, which may answer ALONE or AGAIN to have it run once more.
    Once stop() is true (a study's --budget has ended) none starts: the running ones finish, and the ones left
    are the caller's to count. gate (steal.py): once a pair comes back spoiled under steal, none starts until
    the running ones have ended and the gate's wait is over. Raises signals.Interrupted once every child has
    torn down, after Ctrl-C or SIGTERM."""
    ctx = multiprocessing.get_context("fork")
    q = _Queue(pairs, cost, capacity, gate)
    free = list(range(slots))
    running = q.running
    interrupted: str | None = None

    def remaining() -> str:
        return ", ".join(named(r[0]) for r in running.values())
    try:
        while (q.waiting and not stop()) or running:
            if gate is not None and gate.held and not running:
                gate.wait()
                continue
            while not stop() and q.next_fits(free):
                (pair, alone), slot = q.waiting.pop(0), free.pop(0)
                unit = unit_of(pair, f"{prefix}-j{slot}")
                ours, theirs = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(unit, theirs), name=f"ccrig-pair-{'-'.join(map(str, pair))}")
                for r in running.values():
                    r[5] = True   # one more beside each running pair
                # a Ctrl-C now waits until the child is running and known, so the teardown below stops it
                with signals.blocked():
                    proc.start()
                    running[ours] = [pair, proc, slot, cost(pair), alone, bool(running), unit]
                theirs.close()
            for conn in wait(list(running)):
                try:
                    msg = conn.recv()
                except EOFError:
                    proc = running[conn][1]
                    proc.join()
                    msg = ("failed", f"its process ended (exit status {proc.exitcode}) without a record")
                if msg[0] == "samples":
                    lent_of(running[conn][0]).publish(msg[1])
                elif msg[0] == "tick":
                    lent_of(running[conn][0]).tick()
                else:
                    pair, proc, slot, _, _, beside, unit = running.pop(conn)
                    proc.join()
                    with signals.deferred(lambda: named(pair)):   # a Ctrl-C waits for the slot to be clean
                        sweep(unit)
                    free.append(slot)
                    if msg[0] == "interrupted":   # so is the run (the others are stopped below)
                        raise signals.Interrupted(msg[1])
                    if gate is not None and msg[0] == "done":
                        gate.note(msg[1], named(pair))
                    how = finished(pair, msg[1], None, beside) if msg[0] == "done" else \
                        finished(pair, None, (PathError if msg[0] == "path" else RunError)(msg[1]), beside)
                    if how:
                        q.again(pair, how)
    except signals.Interrupted as e:
        interrupted = str(e)
    finally:
        if running:
            with signals.deferred(remaining):
                for r in running.values():
                    if r[1].is_alive():
                        os.kill(r[1].pid, signal.SIGTERM)
                for r in running.values():
                    r[1].join()
                    sweep(r[6])
    if interrupted is not None:
        raise signals.Interrupted(interrupted)
