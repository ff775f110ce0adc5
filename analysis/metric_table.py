"""The metric table: every per-interval metric of a run declared once, and everything that names a metric reads
it from here, so a metric added here appears in all of them together.

A metric's `name` is the key of its value in the interval rows analysis/intervals.py computes, the key of its
statistics in summary.json and its column in intervals.csv. Its `scope` says whom it describes: each flow, the
system (all flows together), or both. Values are in SI units (`unit`); Prometheus gets them as
ccrig_<scope>_<series>, multiplied by `factor` (Prometheus' base unit for data is the byte, so bits per second
go out as bytes per second). The terminal and the report show `heading`, the value times `scale`; `ci` says
whether summary.json holds the metric's mean and confidence interval (cwnd is exported and archived per
interval, not summarised).

Which readers show a metric is declared here too (`terminal`, `sweep`), so that no reader keeps a list of its own.
The formulas themselves are analysis/metrics.py's; their definitions are in its docstring.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["flow", "system"]


@dataclass(frozen=True)
class Metric:
    name: str                                   # row key, summary.json key, intervals.csv column
    scope: Literal["both", "flow", "system"]
    unit: str                                   # SI unit of the value ("1": a ratio or an index)
    series: str                                 # Prometheus name after ccrig_<scope>_
    factor: float                               # Prometheus value = value * factor
    help_flow: str                              # Prometheus HELP of the flow series ("" without one)
    help_system: str                            # ... and of the system series
    label: str                                  # what tables and figures call it
    display_unit: str = ""                      # the unit shown beside the label, value * scale
    scale: float = 1.0
    digits: int = 3                             # decimals in the terminal's table
    better: Literal["higher", "lower"] | None = None   # None: neither is better in itself
    ci: bool = True                             # summarised in summary.json with a confidence interval
    terminal: bool = False                      # a column of `ccrig run`'s table
    sweep: bool = False                         # a panel of the report's figure against the swept parameter
    tcp_only: bool = False                      # measured by TCP itself: a UDP flow has none
    short: str = ""                             # the terminal's heading where the report's is too wide
    axis_label: str = ""                        # a figure's axis label where it says more than the heading
    # what one repetition's mean can be (None: unbounded): when every repetition of a point reads the same, this
    # range is all that bounds the point's mean (analysis/flat.py)
    bounds: tuple[float | None, float | None] = (None, None)

    @property
    def column(self) -> str:
        """Its column in intervals.csv: the rows' key, so the CSV reads back into the rows."""
        return self.name

    @property
    def heading(self) -> str:
        """Its heading in the report's tables (and the terminal's, unless `short` is given)."""
        return f"{self.label} {self.display_unit}".strip()

    @property
    def short_heading(self) -> str:
        return self.short or self.heading

    @property
    def axis(self) -> str:
        """Its label on a figure's axis."""
        if self.axis_label:
            return self.axis_label
        return f"{self.label} ({self.display_unit})" if self.display_unit else self.label

    def has(self, scope: Scope) -> bool:
        return self.scope in ("both", scope)

    def prometheus(self, scope: Scope) -> str:
        """Its Prometheus series for the scope, without the ccrig_ prefix (the exporter's HELP keys)."""
        if not self.has(scope):
            raise KeyError(f"{self.name} has no {scope} series (scope {self.scope})")
        return f"{scope}_{self.series}"

    def help(self, scope: Scope) -> str:
        return self.help_flow if scope == "flow" else self.help_system


TABLE: tuple[Metric, ...] = (
    Metric("goodput_bps", "both", "bit/s", "goodput_bytes_per_second", 1 / 8,
           "Unique payload delivered per second (tcpi_bytes_acked at the sender)", "Sum of the flows' goodput",
           "goodput", "Mbit/s", 1e-6, better="higher", terminal=True, sweep=True, bounds=(0.0, None)),
    Metric("throughput_bps", "both", "bit/s", "throughput_bytes_per_second", 1 / 8,
           "Payload put on the wire per second, retransmissions included", "Sum of the flows' throughput",
           "throughput", "Mbit/s", 1e-6, terminal=True, sweep=True, bounds=(0.0, None)),
    Metric("eee", "both", "1", "eee", 1,
           "Extra Energy Expenditure: (T-G)/Tmax + 0.3 (Tmax-T)/Tmax, Tmax the fair share",
           "EEE of the system, Tmax the bottleneck's payload capacity",
           "EEE", better="lower", terminal=True, sweep=True),
    Metric("uar", "both", "1", "uar", 1,
           "Unexploited Available Resources: 1 - [0.5 T/Tmax + 0.5 G/T]",
           "UAR of the system, Tmax the bottleneck's payload capacity",
           "UAR", better="lower", terminal=True, sweep=True),
    Metric("loss", "both", "1", "loss_ratio", 1,
           "Segments lost / sent (non-spurious retransmissions)", "Packets dropped / offered at the bottleneck",
           "loss", better="lower", terminal=True, sweep=True, bounds=(0.0, 1.0)),
    Metric("retrans_rate", "both", "1", "retrans_ratio", 1,
           "Segments retransmitted / sent", "Segments retransmitted / sent, all flows",
           "retrans", better="lower", bounds=(0.0, 1.0)),
    Metric("rtt_s", "both", "s", "rtt_seconds", 1,
           "Smoothed RTT from TCP_INFO, mean over the interval", "Mean of the flows' smoothed RTT",
           "RTT", "ms", 1e3, 1, better="lower", terminal=True, tcp_only=True, bounds=(0.0, None)),
    # the path's base RTT as TCP sees it: a property of the path, not better or worse for a law
    Metric("min_rtt_s", "both", "s", "min_rtt_seconds", 1,
           "Smallest RTT TCP measured in the interval (tcpi_min_rtt): the path without queueing",
           "Smallest of the flows' min RTT", "min RTT", "ms", 1e3, 1, tcp_only=True, bounds=(0.0, None)),
    Metric("cwnd", "flow", "segments", "cwnd_segments", 1,
           "Congestion window, mean over the interval", "", "cwnd", "segments", ci=False, tcp_only=True),
    Metric("jain", "system", "1", "jain_fairness", 1,
           "", "Jain's fairness index over the flows' goodput",
           "Jain", better="higher", terminal=True, sweep=True, axis_label="Jain fairness", bounds=(0.0, 1.0)),
    # study 001 defines fairness over throughput, not goodput
    Metric("jain_throughput", "system", "1", "throughput_jain_fairness", 1,
           "", "Jain's fairness index over the flows' throughput (study 001's definition)",
           "Jain (throughput)", better="higher", terminal=True, short="Jain (T)", bounds=(0.0, 1.0)),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in TABLE}

# the bounds of a workload's own record (a claim's KIND.KEY[.STAT], experiments/workloads/), as `Metric.bounds`:
# an interactive flow's messages received / sent - 1 (TCP delivers each message once: 0 when all arrived)
RECORD_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "interactive.sender_vs_receiver": (-1.0, 0.0),
    "interactive.latency_s.mean": (0.0, None),
}


def bounds(metric: str) -> tuple[float | None, float | None]:
    """What one repetition's value of a metric (a table's or a workload record's) can be; (None, None) unknown."""
    if metric in BY_NAME:
        return BY_NAME[metric].bounds
    return RECORD_BOUNDS.get(metric, (None, None))


def of(scope: Scope | None = None, ci: bool | None = None) -> list[Metric]:
    """The metrics with a value for scope (None: any), and with (True) or without (False) a summary's confidence
    interval (None: either), in the table's order."""
    return [m for m in TABLE if (scope is None or m.has(scope)) and (ci is None or m.ci == ci)]


def names(scope: Scope | None = None, ci: bool | None = True) -> list[str]:
    """The names of of(scope, ci): by default the metrics summary.json holds for the scope."""
    return [m.name for m in of(scope, ci)]
