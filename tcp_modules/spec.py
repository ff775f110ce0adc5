"""A flow's `cc` in a spec: a kernel congestion control, a preset of the two laws, or a parameterisation.

    cc: cubic                                          # what the kernel offers (tcp_available_congestion_control)
    cc: ab_smooth                                      # a preset (tcp_modules/laws.py PRESETS)
    cc: {law: alphabeta, alpha: 1.25, beta: 0.25}      # TCP(alpha, beta): beta is the fraction kept
    cc: {law: alphabeta, beta: 0.875, friendly: true}  # alpha = 4 (1 - beta^2) / 3
    cc: {law: poly, k: 1, l: 1, terms: 2, alpha: 1, beta: 0.5, per_ack: false}   # beta is the fraction removed
    cc: {law: poly, k: 1, l: 1, terms: 2, alpha: 20, beta: 0.1, halve_first: true}   # = poly_pipd_paper

`CcField` is the pydantic type; `cc_key()` gives the canonical text of any value (the key `CcManager.prepare`
returns kernel names under); `law_of()` the law a value stands for (None for a kernel name).
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict

from ccrig.errors import InputError, field_error
from . import laws

NAME_MAX = 15   # TCP_CA_NAME_MAX is 16 with the terminating NUL
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
LAWS = ("alphabeta", "poly")
_AB_FIELDS = ("law", "alpha", "beta", "friendly")
_POLY_FIELDS = ("law", *(f.name for f in dataclasses.fields(laws.Poly) if f.init))

ACCEPTED = (f"a kernel congestion control name (at most {NAME_MAX} characters of letters, digits, '_', '-', "
            f"'.'), a preset ({', '.join(laws.PRESETS)}), or a mapping {{law: alphabeta, alpha, beta}} / "
            f"{{law: alphabeta, beta, friendly: true}} / {{law: poly, k, l, terms, alpha, beta, per_ack, halve_first}}")


class AlphaBetaCc(BaseModel):
    """TCP(alpha, beta): alpha segments per RTT, beta the fraction of the window kept on a loss."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    law: Literal["alphabeta"] = "alphabeta"
    alpha: float
    beta: float
    friendly: bool = False

    def to_law(self) -> laws.AlphaBeta:
        return laws.AlphaBeta(self.alpha, self.beta)


# Polynomial rules: k, l exponents, `terms` terms, beta the fraction removed on a loss. A spec's value has no
# field beyond the law's, so the law itself (a frozen dataclass pydantic validates as it is) is the value.
PolyCc = laws.Poly


Cc = Union[str, AlphaBetaCc, PolyCc]


def _number(path: str, d: dict, name: str, default=None) -> float:
    v = d.get(name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise field_error(f"{path}.{name}", v, "a number")
    return float(v)


def _integer(path: str, d: dict, name: str, lo: int, hi: int, default=None) -> int:
    v = d.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise field_error(f"{path}.{name}", v, f"an integer from {lo} to {hi}")
    return v


def _alpha(path: str, d: dict, default=None) -> float:
    a = _number(path, d, "alpha", default)
    if not 0 < a <= laws.ALPHA_MAX or laws.quantize(a) == 0:
        raise field_error(f"{path}.alpha", d.get("alpha", default),
                          f"a number > 0 (at least 2^-20) and at most {laws.ALPHA_MAX:g}")
    return a


def _beta(path: str, d: dict, default=None, meaning: str = "") -> float:
    b = _number(path, d, "beta", default)
    if not 0 < b < 1 or laws.quantize(b) in (0, laws.ONE):
        raise field_error(f"{path}.beta", d.get("beta", default), f"a number strictly between 0 and 1{meaning}")
    return b


def parse_cc(value: Any, path: str = "cc") -> Cc:
    """Validates one cc value; raises InputError naming the field, the value and what is accepted."""
    if isinstance(value, (AlphaBetaCc, PolyCc)):
        return value
    if isinstance(value, str):
        name = value.strip()
        if not name or len(name) > NAME_MAX or not _NAME_RE.match(name):
            raise field_error(path, value, ACCEPTED)
        return name
    if not isinstance(value, dict):
        raise field_error(path, value, ACCEPTED)
    law = value.get("law")
    if law not in LAWS:
        raise field_error(f"{path}.law", law, f"one of {', '.join(LAWS)}")
    fields = _AB_FIELDS if law == "alphabeta" else _POLY_FIELDS
    for key in value:
        if key not in fields:
            raise field_error(f"{path}.{key}", value[key], f"no such field for law {law}; "
                              f"its fields are {', '.join(fields)}")
    if law == "alphabeta":
        beta = _beta(path, value, meaning=" (the fraction of the window kept on a loss)")
        friendly = value.get("friendly", False)
        if not isinstance(friendly, bool):
            raise field_error(f"{path}.friendly", friendly, "true or false")
        if friendly:
            alpha = laws.friendly_alpha(beta)
            if "alpha" in value and abs(_number(path, value, "alpha") - alpha) > 1e-9:
                raise field_error(f"{path}.alpha", value["alpha"],
                                  f"no alpha with friendly: true (it is derived: 4(1-beta^2)/3 = {alpha:g})")
        elif "alpha" not in value:
            raise field_error(f"{path}.alpha", None, "a number > 0, or friendly: true to derive it from beta")
        else:
            alpha = _alpha(path, value)
        return AlphaBetaCc(alpha=alpha, beta=beta, friendly=friendly)
    for name in ("k", "l"):
        if name not in value:
            raise field_error(f"{path}.{name}", None, f"an integer from {laws.EXP_MIN} to {laws.EXP_MAX}")
    flags = {}
    for name in ("per_ack", "halve_first"):
        flags[name] = value.get(name, False)
        if not isinstance(flags[name], bool):
            raise field_error(f"{path}.{name}", flags[name], "true or false")
    return PolyCc(k=_integer(path, value, "k", laws.EXP_MIN, laws.EXP_MAX),
                  l=_integer(path, value, "l", laws.EXP_MIN, laws.EXP_MAX),
                  terms=_integer(path, value, "terms", 1, laws.TERMS_MAX, 1),
                  alpha=_alpha(path, value, 1.0),
                  beta=_beta(path, value, 0.5, " (the fraction of the window removed, as (beta W)^l)"),
                  **flags)


def _validate(value):
    # pydantic puts the flow's path in front; the message names the sub-field itself
    try:
        return parse_cc(value, "cc")
    except InputError as e:
        raise ValueError(str(e).removeprefix("cc: ").removeprefix("cc.")) from None


CcField = Annotated[Cc, BeforeValidator(_validate)]


def _num(x: float) -> str:
    return f"{x:.10g}"


def cc_key(cc: Cc) -> str:
    """The canonical text of a cc value: a name as given, a parameterisation as law(field=value,...)."""
    cc = parse_cc(cc)
    if isinstance(cc, str):
        return cc
    if isinstance(cc, AlphaBetaCc):
        return f"alphabeta(alpha={_num(cc.alpha)},beta={_num(cc.beta)})"
    return (f"poly(k={cc.k},l={cc.l},terms={cc.terms},alpha={_num(cc.alpha)},beta={_num(cc.beta)}"
            + (",per_ack" if cc.per_ack else "") + (",halve_first" if cc.halve_first else "") + ")")


def law_of(cc: Cc) -> laws.Law | None:
    """The law a cc value stands for: a preset's or a parameterisation's; None for a kernel name."""
    cc = parse_cc(cc)
    if isinstance(cc, str):
        return laws.PRESETS.get(cc)
    return cc if isinstance(cc, PolyCc) else cc.to_law()


def preset_of(law: laws.Law) -> str | None:
    """The preset with exactly these parameters, if any (so a kernel module's preset can serve it)."""
    for name, p in laws.PRESETS.items():
        if p == law:
            return name
    return None
