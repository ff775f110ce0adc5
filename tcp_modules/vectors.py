"""Shared test vectors: what the floating-point reference (laws.py) says, for the C core to be checked against.

    .venv/bin/python -m tcp_modules.vectors        # rewrites tcp_modules/vectors.json

Every preset and a seeded set of random parameterisations of both families (k, l over their whole range,
1..4 terms, per-ACK and per-RTT increase, with and without the halving at the first loss) give: I(W), the
window after a connection's first loss and after a later one for windows from 1 to 10^5, and a trajectory of
ACK and loss steps from a connection's start. Each step records its input state (window, accumulator, whether
a loss came before), so the C harness replays it from the reference's state (no drift from earlier steps) and
compares the resulting real-valued window.

Tolerance, applied to every compared value v (an increase, a post-loss window, a window after a step):
|c - v| <= REL * |v| + ABS. REL covers alpha and beta rounded to 20 fractional bits (relative error
<= 2^-21 / beta, raised to the exponent) and ABS the truncation of each fixed-point product (2^-20 each).
"""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from . import laws

PATH = Path(__file__).with_name("vectors.json")
REL = 1e-4
ABS = 2e-5
WINDOWS = [1, 2, 3, 4, 5, 7, 10, 16, 25, 40, 64, 100, 160, 250, 400, 1000, 4000, 10000, 100000]
SEED = 3
# the cases with the first-loss halving draw from their own generator, so every case that existed before the
# option keeps its parameters and trajectory
SEED_HALVE_FIRST = 4


def _params(law) -> dict:
    d = law.params()
    d.setdefault("halve_first", False)
    d["alpha_q"] = laws.quantize(d["alpha"])
    d["beta_q"] = laws.quantize(d["beta"])
    return d


def _trajectory(law, rng: random.Random, steps: int = 60) -> list:
    s = laws.State(cwnd=rng.choice([2, 4, 10, 30]), acc=0.0)
    out = []
    for _ in range(steps):
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


def _random_law(rng: random.Random):
    alpha = round(10 ** rng.uniform(-1.3, 1.3), 6)
    beta = round(rng.uniform(0.02, 0.98), 6)
    if rng.random() < 0.3:
        return laws.AlphaBeta(alpha, beta)
    return laws.Poly(k=rng.randint(laws.EXP_MIN, laws.EXP_MAX), l=rng.randint(laws.EXP_MIN, laws.EXP_MAX),
                     terms=rng.randint(1, laws.TERMS_MAX), alpha=alpha, beta=beta,
                     per_ack=rng.random() < 0.2)


def _random_halving_law(rng: random.Random) -> laws.Poly:
    law = _random_law(rng)
    while not isinstance(law, laws.Poly):
        law = _random_law(rng)
    return dataclasses.replace(law, halve_first=True)


def generate(n_random: int = 60, n_halving: int = 12) -> dict:
    rng, rng_h = random.Random(SEED), random.Random(SEED_HALVE_FIRST)
    cases = [_case(name, law, rng_h if getattr(law, "halve_first", False) else rng)
             for name, law in laws.PRESETS.items()]
    cases += [_case("poly_aimd_per_ack", laws.Poly(0, 1, 1, per_ack=True), rng)]
    cases += [_case(f"random{i:02d}", _random_law(rng), rng) for i in range(n_random)]
    # Table 1's PIPD row as it stands (alpha 1, beta 1/2) with the paper's first-loss halving, then random ones
    cases += [_case("poly_pipd_halve_first", laws.Poly(1, 1, 2, halve_first=True), rng_h)]
    cases += [_case(f"halving{i:02d}", _random_halving_law(rng_h), rng_h) for i in range(n_halving)]
    return {
        "about": "reference values of tcp_modules/laws.py for the C core (see tcp_modules/vectors.py)",
        "fp": laws.FP,
        "cap_segments": laws.CAP,
        "tolerance": {"rel": REL, "abs": ABS},
        "step_format": ["op", "cwnd_in", "acc_in (segments x window)", "acked", "window_out (cwnd + acc/cwnd)",
                        "seen_loss_in (1: a loss came before, a halve_first law's halving is spent)"],
        "cases": cases,
    }


def main() -> None:
    PATH.write_text(json.dumps(generate(), indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
