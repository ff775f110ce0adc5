"""A study's claims as data (experiments/studies/README.md): a quantity reads one number with its confidence
interval from one point of one spec's summary.json; an expression divides or subtracts two; a test (bound,
compare, within, trend, same_trend) compares them. analysis/verdicts.py judges them on measured summaries."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

# the metrics a quantity reads straight from a point's entry (experiments/summary.py METRICS and SYSTEM_ONLY)
FLOW_METRICS = ("goodput_bps", "throughput_bps", "eee", "uar", "loss", "retrans_rate", "rtt_s", "min_rtt_s")
SYSTEM_METRICS = FLOW_METRICS + ("jain", "jain_throughput")
PAUSE_METRICS = ("pause_gain", "pause_model_gain")
# Jain's index over the named flows only: over their mean goodput (jain) or throughput (jain_throughput)
JAIN = {"jain": "goodput_bps", "jain_throughput": "throughput_bps"}


class Quantity(BaseModel):
    """One number of one point: {spec, at, flows, metric, agg, share} (see the module's docstring).

    `metric` is a summary metric, a PAUSE gain, or a workload's own record as KIND.KEY[.STAT] (e.g.
    `interactive.latency_s.mean`: the per-message latency the interactive workload measures, averaged over the
    selected flows and the point's repetitions)."""
    model_config = ConfigDict(extra="forbid")
    spec: str
    at: dict[str, Any] = {}
    # flow indexes: at least one (an empty list would average over no flows)
    flows: Literal["system"] | Annotated[list[int], Field(min_length=1)] | dict[Literal["cc"], str] = "system"
    metric: str = "goodput_bps"
    agg: Literal["mean", "sum"] = "mean"
    share: bool = False

    def problem(self) -> str | None:
        """What is wrong with the metric for this selection, or None."""
        m = self.metric
        if "." in m:
            return None if self.flows != "system" else "a workload's record belongs to flows: name them"
        if m in PAUSE_METRICS:
            return None if self.flows == "system" else f"{m} is the system's: leave flows out"
        allowed = SYSTEM_METRICS if self.flows == "system" else FLOW_METRICS + tuple(JAIN)
        if m not in allowed:
            return f"expected one of {', '.join(allowed)}, {', '.join(PAUSE_METRICS)} or KIND.KEY (a workload's)"
        return None


class Ratio(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ratio: tuple["Expr", "Expr"]


class Diff(BaseModel):
    model_config = ConfigDict(extra="forbid")
    diff: tuple["Expr", "Expr"]


Expr = Union[Quantity, Ratio, Diff]
Ratio.model_rebuild()
Diff.model_rebuild()
Op = Literal[">", ">=", "<", "<="]


class Bound(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["bound"]
    q: Expr
    op: Op
    value: float


class Compare(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["compare"]
    a: Expr
    op: Op
    b: Expr


class Within(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["within"]
    q: Expr
    value: float
    tol: float = Field(gt=0)


class Trend(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["trend"]
    q: Expr
    along: str
    sign: Literal["rises", "falls"]


class SameTrend(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["same_trend"]
    a: Expr
    b: Expr
    along: str


Test = Annotated[Union[Bound, Compare, Within, Trend, SameTrend], Field(discriminator="kind")]


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    paper: str
    test: Test
    note: str = ""


def quantities(expr) -> list[Quantity]:
    """Every quantity an expression or test reads."""
    if isinstance(expr, Quantity):
        return [expr]
    if isinstance(expr, Ratio):
        return [q for e in expr.ratio for q in quantities(e)]
    if isinstance(expr, Diff):
        return [q for e in expr.diff for q in quantities(e)]
    return [q for name in ("q", "a", "b") if hasattr(expr, name) for q in quantities(getattr(expr, name))]
