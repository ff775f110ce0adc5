"""Pydantic field types for quantities written with units in a spec ("10mbit", "20ms", "100pkt").

Each is parsed once, when the spec is validated; the model then holds SI numbers (see experiments/units.py).
"""
from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

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
    if t < 0:
        raise ValueError(f"a time cannot be negative; expected {units.TIME_HELP}")
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
