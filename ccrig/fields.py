"""Pydantic field types for quantities written with units in a spec ("10mbit", "20ms", "100pkt").

Each is parsed once, when the spec is validated; the model then holds SI numbers (see ccrig/units.py), and is
checked against the range it may take (units.py states them and why): rates tc can shape, positive sizes,
times from 0 to a day, counts of flows and host pairs a testbed can build.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, PlainSerializer

from . import units


def _wrap(parse):
    def validate(v):
        if isinstance(v, (units.Rate, units.Size)):
            return v
        try:
            return parse(v)
        except units.UnitError as e:
            raise ValueError(str(e)) from None
    return validate


def _time(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        raise ValueError(f"a time needs a unit; expected {units.TIME_HELP}")
    t = _wrap(units.parse_time)(v)
    if not 0 <= t <= units.MAX_TIME_S:
        raise ValueError(f"expected a time from 0 to 1 day ({units.MAX_TIME_S:g}s), {units.TIME_HELP}")
    return t


RateField = Annotated[units.Rate, BeforeValidator(_wrap(units.parse_rate)), PlainSerializer(str)]
SizeField = Annotated[units.Size, BeforeValidator(_wrap(units.parse_size)), PlainSerializer(str)]
# seconds, written with a unit; serialised back as seconds with "s"
TimeField = Annotated[float, BeforeValidator(_time), PlainSerializer(lambda t: f"{t:g}s")]


def _ratio(v):
    if isinstance(v, str) and v.strip().endswith("%"):
        v = float(v.strip()[:-1]) / 100
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
        raise ValueError('expected a ratio from 0 to 1 or a percentage such as "1%"')
    return float(v)


RatioField = Annotated[float, BeforeValidator(_ratio)]


# How many flows a spec may have in all. Every flow is an iperf3 server and client (ports 5201 + i and
# 20001 + i, ccrig/ports.py) with its sampler, started one command at a time; more than a thousand is never
# a congestion experiment on one machine but a typo. How many host pairs a topology builds is the topology's
# own limit (its address plan): topologies/named/dumbbell.py.
MAX_FLOWS = 1000


def count_range(what: str, most: int, why: str):
    """A validator body: an int from 1 to most, the message naming the range and why it ends there."""
    def check(v: int) -> int:
        if not 1 <= v <= most:
            raise ValueError(f"expected 1..{most} {what} ({why})")
        return v
    return check


FlowCount = Annotated[int, AfterValidator(count_range("flows", MAX_FLOWS, "the most one run starts"))]
