"""A study's claims as data (experiments/studies/README.md): a quantity reads one number per repetition from
one point of one spec's summary.json; an expression divides or subtracts two; a test (bound,
compare, within, trend, same_trend) compares them. analysis/verdicts.py judges them on measured summaries.

A bound, compare, trend or same_trend may state `margin`: the smallest difference that matters, committed in
study.yaml before the run, relative (`2%`: of the bound's value, of b's mean, of the trend's or a's first end) or
absolute in the quantity's unit (a number). Without one it is 0, and the verdict no-difference is impossible."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import metric_table

# the metrics a quantity reads straight from a point's entry: those summary.json holds per flow and for the system
FLOW_METRICS = tuple(metric_table.names("flow"))
SYSTEM_METRICS = tuple(metric_table.names("system"))
PAUSE_METRICS = ("pause_gain", "pause_model_gain")
# study 001's Eq. 1 for each named flow at the same repetition's measured loss (the system's, per packet offered)
# and the flow's own throughput and RTT (analysis/throughput.gaimd_bps), in bit/s like throughput_bps: the
# quantity names the law's (alpha, beta); study 002's Eq. 5 (Mathis' root-p law) for each named flow at its own
# loss rate over the repetition and its own RTT (analysis/throughput.mathis_flow_bps)
MODEL_METRICS = ("gaimd_bps", "mathis_bps")
LAW_METRICS = ("gaimd_bps",)   # the model quantities that name a law
# Jain's index over the named flows only: over their mean goodput (jain) or throughput (jain_throughput)
JAIN = {"jain": "goodput_bps", "jain_throughput": "throughput_bps"}


class Law(BaseModel):
    """A TCP(alpha, beta) law for the gaimd_bps model quantity."""
    model_config = ConfigDict(extra="forbid")
    alpha: float = Field(gt=0)
    beta: float = Field(gt=0, lt=1)


class Quantity(BaseModel):
    """One number of one point: {spec, at, flows, metric, agg, share, phase, exceeds} (see the module's
    docstring).

    `metric` is a summary metric, a PAUSE gain, a workload's own record as KIND.KEY[.STAT] (e.g.
    `interactive.latency_s.mean`: the per-message latency the interactive workload measures, averaged over the
    selected flows and the point's repetitions), `gaimd_bps` with `law` (Eq. 1 of study 001 per flow) or
    `mathis_bps` (Eq. 5 of study 002 per flow)."""
    model_config = ConfigDict(extra="forbid")
    spec: str
    at: dict[str, Any] = {}
    # flow indexes: at least one (an empty list would average over no flows)
    flows: Literal["system"] | Annotated[list[int], Field(min_length=1)] | dict[Literal["cc"], str] = "system"
    metric: str = "goodput_bps"
    agg: Literal["mean", "sum"] = "mean"
    share: bool = False
    law: Law | None = None   # gaimd_bps's (alpha, beta)
    # the intervals an on/off source was on (or off) throughout only (summary.json's `phases`); omitted: all
    phase: Literal["on", "off"] | None = None
    # 1 in a repetition whose reading exceeds this, else 0: the point's mean is then the share of its repetitions
    # that exceed it, judged by an exact binomial interval (analysis/binary.py). `loss` with `exceeds: 0`: how
    # often a repetition drops anything, where a bound on the mean loss near 0 needs more than 1000
    exceeds: float | None = None

    def problem(self) -> str | None:
        """What is wrong with the metric for this selection, or None."""
        m = self.metric
        if self.exceeds is not None and m in PAUSE_METRICS:
            return f"exceeds reads one value a repetition; {m} is not one (a gain over two sets, or a model's)"
        if self.phase is not None and ("." in m or m in PAUSE_METRICS or m in MODEL_METRICS):
            return (f"phase {self.phase} reads the summary metrics of the system and the flows only; {m} has no "
                    f"phases")
        if (m in LAW_METRICS) != (self.law is not None):
            return (f"{m} needs law: {{alpha, beta}}" if m in LAW_METRICS
                    else f"law belongs to {', '.join(LAW_METRICS)} only")
        if m in MODEL_METRICS:
            return None if self.flows != "system" else f"{m} is per flow: name the flows"
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


class Margined(BaseModel):
    """A test with a margin: a number >= 0 in the quantity's unit, or "N%" of a reference (see the module)."""
    model_config = ConfigDict(extra="forbid")
    margin: float | str = 0.0

    @field_validator("margin")
    @classmethod
    def _margin(cls, v):
        if isinstance(v, str):
            text = v.strip()
            try:
                number = float(text[:-1]) if text.endswith("%") else None
            except ValueError:
                number = None
            if number is None or number < 0:
                raise ValueError(f"got {v!r}; expected a number >= 0 (the quantity's unit) or a percentage "
                                 f"such as 2%")
            return text
        if v < 0:
            raise ValueError(f"got {v!r}; expected a number >= 0 (the quantity's unit) or a percentage such as 2%")
        return float(v)

    def margin_of(self, reference: float) -> float:
        """The margin in the quantity's unit; a relative one of |reference|."""
        if isinstance(self.margin, str):
            return float(self.margin[:-1]) / 100 * abs(reference)
        return float(self.margin)


class Bound(Margined):
    kind: Literal["bound"]
    q: Expr
    op: Op
    value: float

    @model_validator(mode="after")
    def _relative_of_zero(self):
        if isinstance(self.margin, str) and self.value == 0 and self.margin_of(1.0) > 0:
            raise ValueError(f"margin: got {self.margin!r} of value 0, which is 0; expected the margin in the "
                             f"quantity's unit (a number)")
        return self


class Compare(Margined):
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


class Trend(Margined):
    kind: Literal["trend"]
    q: Expr
    along: str
    sign: Literal["rises", "falls"]


class SameTrend(Margined):
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
