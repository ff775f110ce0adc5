"""Which (point, repetition) pairs a run makes, and in what order.

Repetitions and sweep points run in a randomised order, seeded, so that slow drift of the machine (a warming
CPU, another tenant, a growing page cache) spreads over all points instead of masquerading as a trend along the
sweep. The seed is the spec's `seed`, or one derived from the run's name (so two runs differ); either way it is
recorded in summary.json with the order, and a resumed run (`ccrig run SPEC --resume RUN_DIR`) reads it back,
so the order is the same and only the pairs not yet complete are run.
"""
from __future__ import annotations

import hashlib
import random


def derived_seed(run_id: str) -> int:
    """A seed from the run's name (experiment-date-time-pid): different for every run, reproducible from it."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big")


def flow_seed(run_seed: int, point: int, rep: int, flow: int) -> int:
    """A flow's random times (Poisson arrivals, on/off periods, think times) in one repetition of a point: the
    run's seed fixes them all, every flow and repetition its own; a PAUSE point's baseline shares its point's
    (the same arrivals with and without PAUSE)."""
    return derived_seed(f"{run_seed}/{point}/{rep}/{flow}")


def order(reps_of: dict[int, int], seed: int, variants_of: dict[int, list[str]] | None = None) -> list[tuple]:
    """Every (point index, repetition) pair, shuffled by the seed. reps_of: point index -> its repetitions;
    variants_of: point index -> the variants it also runs (PAUSE's baseline), each a pair (point, rep, variant)
    of its own in the same shuffle, so the machine's drift spreads over the variants too."""
    pairs: list[tuple] = [(p, r) for p, n in sorted(reps_of.items()) for r in range(n)]
    pairs += [(p, r, v) for p, vs in sorted((variants_of or {}).items()) for v in vs for r in range(reps_of[p])]
    random.Random(seed).shuffle(pairs)
    return pairs


def extend(done: list[tuple], reps_of: dict[int, int], seed: int, variants_of: dict[int, list[str]] | None = None
           ) -> list[tuple]:
    """A recorded order with the pairs a raised repetition count adds (a study's --budget asks a finished run for
    more) appended in their own shuffle: the recorded pairs keep their places, so finished ones are never run
    again, and the same raise from the same order gives the same extension (seeded by the seed and how long the
    order was)."""
    have = set(done)
    new = [pair for pair in order(reps_of, seed, variants_of) if pair not in have]
    new.sort()
    random.Random(f"{seed}+{len(done)}").shuffle(new)
    return list(done) + new


def interleave(orders: dict[str, list[tuple]], seed: int) -> list[tuple]:
    """Several runs' pairs as one queue, (run, *pair): each run's own order kept, the runs drawn at random in
    proportion to the pairs each has left, so every interleaving of them is as likely (a study's specs in one
    queue: the machine's drift over time falls on every spec alike)."""
    rng, left = random.Random(seed), {k: list(v) for k, v in sorted(orders.items()) if v}
    out: list[tuple] = []
    while left:
        k = rng.choices(list(left), [len(v) for v in left.values()])[0]
        out.append((k, *left[k].pop(0)))
        if not left[k]:
            del left[k]
    return out
