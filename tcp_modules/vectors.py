"""Shared test vectors: what a family's floating-point reference says, for its C law (with the core) to be
checked against. One file per family, beside its descriptor: families/NAME.vectors.json.

    .venv/bin/python -m ccrig.tcp_modules.vectors            # rewrites every family's vectors
    .venv/bin/python -m ccrig.tcp_modules.vectors NAME       # one family's

Every preset, the family's extra cases and a seeded set of its random parameterisations (the descriptor's
sample(): for poly k, l over their whole range, 1..4 terms, per-ACK and per-RTT increase, with and without the
halving at the first loss) give: I(W), the window after a connection's first loss and after a later one for
windows from 1 to 10^5, and a trajectory of ACK and loss steps from a connection's start. Each step records its
input state (window, accumulator, whether a loss came before), so the C harness replays it from the
reference's state (no drift from earlier steps; the accumulator rounded to what the core holds, 2^-20) and
compares the resulting real-valued window.

Tolerance, applied to every compared value v (an increase, a post-loss window, a window after a step):
|c - v| <= REL * |v| + ABS. REL covers alpha and beta rounded to 20 fractional bits (relative error
<= 2^-21 / beta, raised to the exponent) and ABS the truncation of each fixed-point product (2^-20 each).
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from . import laws
from .families import FAMILIES
from .families._family import SLOT_DEFAULTS, Family

REL = 1e-4
ABS = 2e-5
WINDOWS = [1, 2, 3, 4, 5, 7, 10, 16, 25, 40, 64, 100, 160, 250, 400, 1000, 4000, 10000, 100000]
SEED = 3


def _params(law) -> dict:
    """The law's parameters, and its parameter block's slots as the harness feeds them to the core."""
    slots = dict(SLOT_DEFAULTS)
    for p in FAMILIES[law.law].params:
        slots[p.slot] = getattr(law, p.name)
    return {**law.params(), "slots": {**slots, "alpha": laws.quantize(slots["alpha"]),
                                      "beta": laws.quantize(slots["beta"]), "code": FAMILIES[law.law].code}}


def _trajectory(law, rng: random.Random, steps: int = 60) -> list:
    s = laws.State(cwnd=rng.choice([2, 4, 10, 30]), acc=0.0)
    out = []
    for _ in range(steps):
        # the input state as the core can hold it (acc in units of 2^-20): a float that missed a boundary by
        # 1e-14 (116.99999999999999 for 117) would otherwise sit a whole segment from the core's exact one
        s = laws.State(s.cwnd, round(s.acc * laws.ONE) / laws.ONE, s.seen_loss)
        if rng.random() < 0.12:
            n = laws.on_loss(law, s)
            out.append(["loss", s.cwnd, s.acc, 0, n.window, int(s.seen_loss)])
        else:
            acked = rng.choice([1, 1, 2, 3, max(1, s.cwnd // 2), s.cwnd])
            acked = min(acked, 1 << 16)
            n = laws.on_ack(law, s, acked)
            out.append(["ack", s.cwnd, s.acc, acked, n.window, int(s.seen_loss)])
        s = n
        if s.cwnd > 1 << 20:
            # past any real window (and the range where the core's saturation matches the reference's):
            # restart from a small window so the rest of the trajectory still tests something
            s = laws.State(cwnd=rng.choice([2, 10]), acc=0.0, seen_loss=s.seen_loss)
    return out


def _case(name: str, law, rng: random.Random) -> dict:
    return {
        "name": name,
        "params": _params(law),
        "increase": [[w, law.increase(w)] for w in WINDOWS],
        "loss": [[w, laws.loss_window_at(law, w, True)] for w in WINDOWS],
        "first": [[w, laws.loss_window_at(law, w, False)] for w in WINDOWS],
        "steps": _trajectory(law, rng),
    }


def generate(fam: Family) -> dict:
    rng = random.Random(f"{SEED}-{fam.name}")
    cases = [_case(name, law, rng) for name, law in (*fam.presets.items(), *fam.vector_cases.items())]
    cases += [_case(f"random{i:02d}", fam.sample(rng), rng) for i in range(fam.n_random)]
    return {
        "about": f"reference values of tcp_modules/families/{fam.name}.py for its C law (see tcp_modules/vectors.py)",
        "fp": laws.FP,
        "cap_segments": laws.CAP,
        "tolerance": {"rel": REL, "abs": ABS},
        "step_format": ["op", "cwnd_in", "acc_in (segments x window)", "acked", "window_out (cwnd + acc/cwnd)",
                        "seen_loss_in (1: a loss came before, a halve_first law's halving is spent)"],
        "cases": cases,
    }


def write(fam: Family) -> Path:
    fam.vectors.write_text(json.dumps(generate(fam), indent=None, separators=(",", ":")) + "\n")
    return fam.vectors


def main(names: list[str]) -> None:
    for name in names or FAMILIES:
        if name not in FAMILIES:
            raise SystemExit(f"family: got {name!r}; expected one of {', '.join(FAMILIES)}")
        print(f"wrote {write(FAMILIES[name])}")


if __name__ == "__main__":
    main(sys.argv[1:])
