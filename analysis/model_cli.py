"""`ccrig model`: the analytical models on their own (the lead mounts this app as `ccrig model`).

  ccrig model pause --lam 25,1 --rtt 0.1,0.5,1 --t1 15 --t2 15     the Markov PAUSE model, measures and gain
  ccrig model pause --figure fig4                                   the model curves of the paper's Figs. 4–7
  ccrig model gaimd --p 0.01 --rtt 0.1 --beta 0.875 --friendly      GAIMD / Padhye / Mathis predictions

Each prints a table, or with --json one JSON document holding the same numbers (the rows, unrounded).
Numbers given as a single value, a comma list (0.1,0.5,1) or an inclusive range start:stop:step (0.1:1:0.1).
"""
from __future__ import annotations

import itertools
import math
import sys
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from ccrig import jsondoc
from ccrig.errors import CcrigError, InputError

from . import throughput as tp

# pause_markov (numpy, scipy) is imported by the commands that solve the model, not here: every `ccrig` command
# line loads this module, and a usage error or a spec check should answer without waiting for scipy.

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Analytical models: the Markov PAUSE model and the throughput equations.")
console = Console(width=None if sys.stdout.isatty() else 200)

VALUES_HELP = "a value, a comma list (a,b,c) or an inclusive range start:stop:step"
JSON_HELP = "print one JSON document (the same numbers, unrounded) instead of a table"


def parse_values(option: str, text: str, integer: bool = False) -> list:
    """'1' | '0.1,0.5,1' | '0.1:1:0.1' -> list of numbers; InputError naming the option otherwise."""
    kind = "integers" if integer else "numbers"
    accepted = f"{kind} as {VALUES_HELP}"
    conv = int if integer else float
    try:
        if ":" in text:
            parts = [conv(x) for x in text.split(":")]
            if len(parts) != 3 or parts[2] <= 0 or parts[1] < parts[0]:
                raise ValueError
            start, stop, step = parts
            n = int(math.floor((stop - start) / step + 1e-9)) + 1
            if n > 10_000:
                raise ValueError
            values = [start + k * step for k in range(n)]
            if not integer:
                values = [round(v, 12) for v in values]
        else:
            values = [conv(x) for x in text.split(",") if x.strip() != ""]
        if not values or any(not math.isfinite(v) for v in values):
            raise ValueError
    except ValueError:
        raise InputError(f"{option}: got {text!r}; expected {accepted}") from None
    return values


def _fmt(x: float) -> str:
    return f"{x:.6g}"


MEASURE_COLUMNS = [("E[Q1]", "EQ1"), ("E[Q2]", "EQ2"), ("EW1 s", "EW1"), ("EW2 s", "EW2"),
                   ("λeff1", "lambda_effec_1"), ("λloss1", "lambda_loss_1"), ("P1", "P1"),
                   ("λeff2", "lambda_effec_2"), ("λloss2", "lambda_loss_2"), ("P2", "P2"),
                   ("thr=λeff2", "throughput"), ("thr=λeff1(1−P2)", "throughput_via_queue1"),
                   ("thr=ν·P(j>0)", "throughput_via_departures")]


@app.command()
def pause(lam: str = typer.Option("25,1", help="the TCP rate levels λ1 > … > λN in packets/s, comma separated"),
          mu1: float = typer.Option(100.0, help="queue 1 service rate while queue 2 is up, packets/s"),
          mu2: float = typer.Option(2.0, help="queue 1 service rate while PAUSE is in force, packets/s"),
          nu: float = typer.Option(15.0, help="queue 2 service rate, packets/s"),
          b1: int = typer.Option(10, help="queue 1 buffer, packets"),
          b2: int = typer.Option(20, help="queue 2 buffer, packets"),
          t1: str = typer.Option("15", help=f"high threshold T1 (1..B2; B2 = no PAUSE): {VALUES_HELP}"),
          t2: str = typer.Option("", help=f"low threshold T2 (1..T1), default = T1: {VALUES_HELP}"),
          rtt: str = typer.Option("1", help=f"round-trip time in s (rate level steps back at 1/RTT): {VALUES_HELP}"),
          figure: Optional[str] = typer.Option(None, help="print the model curves of a paper figure instead: "
                                               "fig4, fig5, fig6, fig7 or all"),
          increase_when_down: bool = typer.Option(False, help="apply transition 13 (rate increase) also while "
                                                  "queue 2 is down; as printed it applies only while up"),
          gain: bool = typer.Option(True, help="also solve with T1 = B2 and print the PAUSE gain in %"),
          method: str = typer.Option("auto", help="stationary solver: auto, direct or iterative"),
          as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """The Markov model of 802.3x PAUSE with TCP: performance measures and the gain of hop-by-hop control."""
    from . import pause_markov as pm  # lazy: scipy
    if method not in ("auto", "direct", "iterative"):
        raise InputError(f"--method: got {method!r}; expected auto, direct or iterative")
    if figure is not None:
        names = list(pm.FIGURES) if figure == "all" else [figure]
        if any(name not in pm.FIGURES for name in names):
            raise InputError(f"--figure: got {figure!r}; expected one of {', '.join(pm.FIGURES)} or all")
        figures = [_figure(name, increase_when_down) for name in names]
        if as_json:
            jsondoc.emit({"model": "pause", "figures": figures})
        for fig in [] if as_json else figures:
            _print_figure(fig)
        return
    levels = parse_values("--lam", lam)
    t1s = parse_values("--t1", t1, integer=True)
    t2s = parse_values("--t2", t2, integer=True) if t2 else [None]
    rtts = parse_values("--rtt", rtt)
    rows = []
    for T1, T2, R in itertools.product(t1s, t2s, rtts):
        p = _params(levels, mu1, mu2, nu, b1, b2, T1, T1 if T2 is None else T2, R, increase_when_down)
        m = pm.solve(p, method=method)
        row = {"T1": p.T1, "T2": p.T2, "rtt_s": R, "recurrent_states": m.n_recurrent, "states": m.n_states,
               **{key: getattr(m, key) for _, key in MEASURE_COLUMNS}}
        if gain:
            off = pm.solve(p.without_pause(), method=method)
            row["gain_percent"] = 100.0 * (m.throughput - off.throughput) / off.throughput
        rows.append(row)
    if as_json:
        jsondoc.emit({"model": "pause", "parameters": {"lam": levels, "mu1": mu1, "mu2": mu2, "nu": nu, "B1": b1,
                                                       "B2": b2, "increase_when_down": increase_when_down,
                                                       "method": method},
                      "rows": rows})
        return
    table = Table(title="PAUSE Markov model (rates in packets/s; states: recurrent/all)",
                  caption=f"λ = {tuple(levels)}, μ1 = {mu1:g}, μ2 = {mu2:g}, ν = {nu:g}, B1 = {b1}, B2 = {b2}"
                          + (", transition 13 also while down" if increase_when_down else ""))
    for head in ["T1", "T2", "RTT s", "states", *[h for h, _ in MEASURE_COLUMNS]] + (["gain %"] if gain else []):
        table.add_column(head, justify="right")
    for row in rows:
        table.add_row(str(row["T1"]), str(row["T2"]), _fmt(row["rtt_s"]),
                      f"{row['recurrent_states']}/{row['states']}",
                      *[_fmt(row[key]) for _, key in MEASURE_COLUMNS],
                      *([f"{row['gain_percent']:+.3f}"] if gain else []))
    console.print(table)


def _params(levels, mu1, mu2, nu, b1, b2, T1, T2, rtt, increase_when_down):
    """PauseParams with its field errors re-worded as the command line's options."""
    from . import pause_markov as pm  # lazy: scipy
    try:
        return pm.PauseParams(lam=tuple(levels), mu1=mu1, mu2=mu2, nu=nu, B1=b1, B2=b2, T1=T1, T2=T2, rtt=rtt,
                              increase_when_down=increase_when_down).validate()
    except InputError as e:
        name, _, rest = str(e).partition(":")
        raise InputError(f"--{name.lower()}:{rest}") from None


def _figure(name: str, increase_when_down: bool) -> dict:
    """A paper figure's model curves: {figure, x, values, curves: {label: {parameters, gain_percent}}}."""
    from . import pause_markov as pm  # lazy: scipy
    fig = pm.FIGURES[name]
    curves = pm.figure_curves(name, increase_when_down)
    return {"figure": name, "x": fig["x"], "values": list(fig["values"]),
            "curves": {label: {"parameters": fig["curves"][label], "gain_percent": [g for _, g in points]}
                       for label, points in curves.items()}}


def _print_figure(fig: dict) -> None:
    base = ", ".join(f"{label}: λ={c['parameters']['lam']}"
                     + "".join(f", {k}={v}" for k, v in c["parameters"].items() if k != "lam")
                     for label, c in fig["curves"].items())
    table = Table(title=f"{fig['figure']}: PAUSE gain % against {fig['x']}",
                  caption=f"μ1=100, μ2=2, ν=15, B1=10, B2=20; {base}")
    table.add_column(fig["x"], justify="right")
    for label in fig["curves"]:
        table.add_column(label, justify="right")
    for k, x in enumerate(fig["values"]):
        table.add_row(_fmt(x), *[f"{c['gain_percent'][k]:+.3f}" for c in fig["curves"].values()])
    console.print(table)


@app.command()
def gaimd(p: str = typer.Option(..., "--p", help=f"loss event rate in (0, 1]: {VALUES_HELP}"),
          rtt: str = typer.Option(..., help=f"round-trip time in s: {VALUES_HELP}"),
          t0: float = typer.Option(1.0, help="retransmission timeout T0 in s"),
          b: float = typer.Option(1.0, help="packets acknowledged per ACK"),
          alpha: str = typer.Option("1", help=f"additive increase α, packets per RTT: {VALUES_HELP}"),
          beta: str = typer.Option("0.5", help=f"multiplicative decrease factor β in (0, 1): {VALUES_HELP}"),
          friendly: bool = typer.Option(False, help="take α = 4(1−β²)/3 (TCP-friendly) instead of --alpha"),
          segment: int = typer.Option(1448, help="segment payload in bytes, for the bit rates"),
          c: float = typer.Option(tp.MATHIS_C, help="Mathis' constant c (√(3/2) ≈ 1.22)"),
          as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """GAIMD (Yang–Lam), Padhye and Mathis throughput predictions in packets/s and bit/s."""
    ps, rtts = parse_values("--p", p), parse_values("--rtt", rtt)
    alphas, betas = parse_values("--alpha", alpha), parse_values("--beta", beta)
    if segment <= 0:
        raise InputError(f"--segment: got {segment!r}; expected a positive number of bytes")
    rows = []
    for P, R, A, B in itertools.product(ps, rtts, [None] if friendly else alphas, betas):
        try:
            a = tp.tcp_friendly_alpha(B) if friendly else A
            g = tp.gaimd(P, R, t0, b, a, B)
            pad = tp.padhye(P, R, t0, b)
            mat = tp.mathis(P, R, c=c)
        except InputError as e:
            name, _, rest = str(e).partition(":")
            raise InputError(f"--{name}:{rest}") from None
        bits = 8.0 * segment
        rows.append({"p": P, "rtt_s": R, "alpha": a, "beta": B, "gaimd_pps": g, "gaimd_bps": g * bits,
                     "padhye_pps": pad, "padhye_bps": pad * bits, "mathis_pps": mat, "mathis_bps": mat * bits})
    if as_json:
        jsondoc.emit({"model": "gaimd", "parameters": {"t0_s": t0, "b": b, "segment_bytes": segment, "c": c,
                                                       "friendly": friendly},
                      "rows": rows})
        return
    table = Table(title=f"Throughput equations (T0 = {t0:g} s, b = {b:g}, segment = {segment} B, c = {c:.4g})")
    for head in ["p", "RTT s", "α", "β", "GAIMD pkt/s", "GAIMD Mbit/s", "Padhye pkt/s", "Padhye Mbit/s",
                 "Mathis pkt/s", "Mathis Mbit/s"]:
        table.add_column(head, justify="right")
    for r in rows:
        table.add_row(*[_fmt(r[k]) for k in ("p", "rtt_s", "alpha", "beta", "gaimd_pps")], _fmt(r["gaimd_bps"] / 1e6),
                      _fmt(r["padhye_pps"]), _fmt(r["padhye_bps"] / 1e6), _fmt(r["mathis_pps"]),
                      _fmt(r["mathis_bps"] / 1e6))
    console.print(table)


def main() -> None:  # for running this module on its own; `ccrig model` goes through experiments.cli
    try:
        app(standalone_mode=False)
    except CcrigError as e:
        sys.stderr.write(f"ccrig: error: {e}\n")
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
