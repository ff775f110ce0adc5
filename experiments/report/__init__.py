"""`ccrig report DIR`: tables and plots for one run directory (the archive format of experiments/run/archive.py).

Writes, into DIR/report (or out_dir): report.md (images as files beside it), report.html (self-contained: the
same content with every PNG embedded as base64), and each plot as PNG and SVG:
- sweep_<param>.png: every swept parameter against goodput, throughput, EEE, UAR, loss and Jain (system), the
  mean of interval means with its 95 % confidence interval as error bars (as summary.json gives them);
- utility.png: Keshav's utility diagram: per flow, goodput against mean RTT, one colour per setup (sweep point),
  the flow's number written at the mean and a box spanning both 95 % confidence intervals;
- timeseries_p<NNN>.png: cwnd, smoothed RTT and queue occupancy against time for the chosen repetition;
- model.png: measured goodput of each flow against the GAIMD (α/β laws, Reno, AIMD-shaped polynomial laws) and
  Mathis predictions from its own measured loss and RTT;
- pause_gain.png: for runs with `pause_gain` on a pause_chain, the measured PAUSE goodput gain (with its 95 %
  CI) against the Markov model's gain (analysis/pause_markov.py) for the same λ1, μ1, μ2, ν, B1, B2, T1, T2.
Every number in the tables is read from summary.json, not recomputed.

The rooms: summary.py reads summary.json and writes its numbers as text, plots.py draws the figures, models.py
sets the measurements beside the analytical models, doc.py assembles report.md and report.html.
"""
from ccrig.experiments.report.doc import report

__all__ = ["report"]
