"""Pairs side by side: up to `jobs` repetitions at once on this machine, each a process of its own.

    side_by_side(pairs, jobs, unit_of, lent, finished)
      pairs are started in the order given (the run's seeded order) while a slot is free; slot k's pair gets the
      name prefix <run prefix>-j<k>, so its namespaces, devices and BPF pins never meet another's, and `ccrig
      clean` still finds them by the run's prefix; each pair's samples and progress come back over a pipe to the
      run's sinks and bar; its record (or its failure) to `finished` as it ends, in whatever order they end

A child is forked from the run, so it shares the laws the run loaded (by name) and imports nothing again. It
traps SIGINT and SIGTERM itself and tears its repetition down on either: Ctrl-C in a terminal reaches every
process of the group at once, and a SIGTERM to the run alone is passed on to the children. The run waits for
every child's teardown before it goes on (or out).

How many pairs at once (`--jobs auto`): the pair's expected packet rate through this machine against what one
machine of this kind carries (admit()); a pair the machine cannot carry beside others runs alone.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
from multiprocessing.connection import wait
from typing import Callable

from ccrig.commands import Commands
from ccrig.errors import CcrigError, InputError, RunError
from ccrig.units import wire_bytes
from ccrig.experiments.run import repetition, signals
from ccrig.experiments.run.repetition import Lent, Unit

# wire packets per second this kind of machine forwards through namespaces with every hop's packets wire-sized
# (the one-flow ceiling measured by `make bench BENCH=ceiling`: ~500 Mbit/s of 1514-byte frames), halved so
# that side-by-side pairs stay clear of it; the samplers' and the programs' own cost rides in the half left
CAPACITY_PPS = 0.5 * 500e6 / (8 * 1514)
MAX_JOBS = 2 * (os.cpu_count() or 1)


def parse_jobs(value: str) -> int | str:
    """--jobs: auto or a whole number of pairs from 1 to 64."""
    if value == "auto":
        return value
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise InputError(f"--jobs: got {value!r}; expected auto or a whole number from 1 to 64")
    return int(value)


def pair_pps(exp) -> float:
    """The most wire packets per second a point's pairs push through this machine: the bottleneck's rate in
    frames (the flows cannot carry more), every hop counted once."""
    topo = exp.topology.build(exp.n_flows)
    rate = topo.egress_of(*topo.bottleneck).egress.rate
    if rate is None:
        return CAPACITY_PPS   # unshaped: as fast as the machine goes, so alone
    return rate.bps(topo.wire) / (8 * wire_bytes(topo.mtu)) * max(1, len(topo.path(*topo.pairs[0])))


def admit(points, able: bool) -> int:
    """How many pairs run at once under --jobs auto: 1 where the testbed cannot run two side by side (a vm's guest
    takes both cores; a remote testbed's hosts are shared by every pair; Mininet names devices in the root
    namespace), else as many as the costliest point's packet rate fits."""
    if not able:
        return 1
    cost = max(pair_pps(p.experiment) for p in points)
    return max(1, min(MAX_JOBS, int(CAPACITY_PPS // cost)))


def _child(unit: Unit, conn) -> None:
    """A pair in a process of its own: its record, failure or interruption over conn, then out without running
    what the run registered to run at its exit (its sinks are the run's, not the child's)."""
    def send(*msg):
        try:
            conn.send(msg)
        except (BrokenPipeError, OSError):
            pass
    try:
        lent = Lent(Commands(unit.out / "commands.log"), publish=lambda s: send("samples", s),
                    tick=lambda: send("tick"))
        with signals.trapped():
            entry = repetition.run(unit, lent)
        send("done", entry)
    except signals.Interrupted as e:
        send("interrupted", str(e))
    except CcrigError as e:
        send("failed", str(e))
    except BaseException as e:  # noqa: BLE001 - the run reports it with the pair; nothing escapes the child
        send("failed", f"{type(e).__name__}: {e}")
    finally:
        conn.close()
        os._exit(0)


def side_by_side(pairs: list[tuple], jobs: int, unit_of: Callable[[tuple, str], Unit], prefix: str, lent: Lent,
                 finished: Callable[[tuple, dict | None, RunError | None], None]) -> None:
    """Runs the pairs, at most `jobs` at once; finished(pair, record, None) or finished(pair, None, error) as
    each ends. Raises signals.Interrupted once every child has torn down, after Ctrl-C or SIGTERM."""
    ctx = multiprocessing.get_context("fork")
    queue = list(pairs)
    free = list(range(jobs))
    running: dict = {}   # the pipe's end -> (pair, process, slot)
    interrupted: str | None = None

    def remaining() -> str:
        return ", ".join(f"point {p[0]} repetition {p[1]}" for p, _, _ in running.values())
    try:
        while queue or running:
            while queue and free:
                pair, slot = queue.pop(0), free.pop(0)
                unit = unit_of(pair, f"{prefix}-j{slot}")
                ours, theirs = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(unit, theirs), name=f"ccrig-pair-{pair[0]}-{pair[1]}")
                proc.start()
                theirs.close()
                running[ours] = (pair, proc, slot)
            for conn in wait(list(running)):
                try:
                    msg = conn.recv()
                except EOFError:
                    pair, proc, _ = running[conn]
                    proc.join()
                    msg = ("failed", f"its process ended (exit status {proc.exitcode}) without a record")
                if msg[0] == "samples":
                    lent.publish(msg[1])
                elif msg[0] == "tick":
                    lent.tick()
                else:
                    pair, proc, slot = running.pop(conn)
                    proc.join()
                    free.append(slot)
                    if msg[0] == "done":
                        finished(pair, msg[1], None)
                    elif msg[0] == "failed":
                        finished(pair, None, RunError(msg[1]))
                    else:   # the child was interrupted: so is the run (the others are stopped below)
                        raise signals.Interrupted(msg[1])
    except signals.Interrupted as e:
        interrupted = str(e)
    finally:
        if running:
            with signals.deferred(remaining):
                for _, proc, _ in running.values():
                    if proc.is_alive():
                        os.kill(proc.pid, signal.SIGTERM)
                for _, proc, _ in running.values():
                    proc.join()
    if interrupted is not None:
        raise signals.Interrupted(interrupted)
