"""Shared test vectors: what the floating-point reference (laws.py) says, for the C core to be checked against.

    .venv/bin/python -m tcp_modules.vectors        # rewrites tcp_modules/vectors.json

Every preset and a seeded set of random parameterisations of both families (k, l over their whole range,
1..4 terms, per-ACK and per-RTT increase) give: I(W) and the post-loss window for windows from 1 to 10^5,
and a trajectory of ACK and loss steps. Each step records its input state, so the C harness replays it from
the reference's state (no drift from earlier steps) and compares the resulting real-valued window.

Tolerance, applied to every compared value v (an increase, a post-loss window, a window after a step):
|c - v| <= REL * |v| + ABS. REL covers alpha and beta rounded to 20 fractional bits (relative error
<= 2^-21 / beta, raised to the exponent) and ABS the truncation of each fixed-point product (2^-20 each).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from . import laws

PATH = Path(__file__).with_name("vectors.json")
REL = 1e-4
ABS = 2e-5
WINDOWS = [1, 2, 3, 4, 5, 7, 10, 16, 25, 40, 64, 100, 160, 250, 400, 1000, 4000, 10000, 100000]
SEED = 3


def _params(law) -> dict:
    d = law.params()
    d["alpha_q"] = laws.quantize(d["alpha"])
    d["beta_q"] = laws.quantize(d["beta"])
    return d


def _trajectory(law, rng: random.Random, steps: int = 60) -> list:
    s = laws.State(cwnd=rng.choice([2, 4, 10, 30]), acc=0.0)
    out = []
    for _ in range(steps):
        if rng.random() < 0.12:
            n = laws.on_loss(law, s)
            out.append(["loss", s.cwnd, s.acc, 0, n.window])
        else:
            acked = rng.choice([1, 1, 2, 3, max(1, s.cwnd // 2), s.cwnd])
            acked = min(acked, 1 << 16)
            n = laws.on_ack(law, s, acked)
            out.append(["ack", s.cwnd, s.acc, acked, n.window])
        s = n
        if s.cwnd > 1 << 20:
            # past any real window (and the range where the core's saturation matches the reference's):
            # restart from a small window so the rest of the trajectory still tests something
            s = laws.State(cwnd=rng.choice([2, 10]), acc=0.0)
    return out


def _case(name: str, law, rng: random.Random) -> dict:
    return {
        "name": name,
        "params": _params(law),
        "increase": [[w, law.increase(w)] for w in WINDOWS],
        "loss": [[w, law.loss_window(w)] for w in WINDOWS],
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


def generate(n_random: int = 60) -> dict:
    rng = random.Random(SEED)
    cases = [_case(name, law, rng) for name, law in laws.PRESETS.items()]
    cases += [_case("poly_aimd_per_ack", laws.Poly(0, 1, 1, per_ack=True), rng)]
    cases += [_case(f"random{i:02d}", _random_law(rng), rng) for i in range(n_random)]
    return {
        "about": "reference values of tcp_modules/laws.py for the C core (see tcp_modules/vectors.py)",
        "fp": laws.FP,
        "cap_segments": laws.CAP,
        "tolerance": {"rel": REL, "abs": ABS},
        "step_format": ["op", "cwnd_in", "acc_in (segments x window)", "acked", "window_out (cwnd + acc/cwnd)"],
        "cases": cases,
    }


def main() -> None:
    PATH.write_text(json.dumps(generate(), indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
