"""A flow's `cc` in a spec: a kernel congestion control, a preset of a law family, or a parameterisation.

    cc: cubic                                          # what the kernel offers (tcp_available_congestion_control)
    cc: ab_smooth                                      # a preset (declared by its family, families/)
    cc: {law: alphabeta, alpha: 1.25, beta: 0.25}      # TCP(alpha, beta): beta is the fraction kept
    cc: {law: alphabeta, beta: 0.875, friendly: true}  # alpha = 4 (1 - beta^2) / 3
    cc: {law: poly, k: 1, l: 1, terms: 2, alpha: 1, beta: 0.5, per_ack: false}   # beta is the fraction removed
    cc: {law: poly, k: 1, l: 1, terms: 2, alpha: 20, beta: 0.1, halve_first: true}   # = poly_pipd_paper
    cc: {law: generic, window: 40}                     # Keshav's Generic: a constant window, kept through a timeout

A mapping is checked against the parameters its family declares (families/NAME.py). `CcField` is the pydantic
type; `cc_key()` gives the canonical text of any value (the key `CcManager.prepare`
returns kernel names under); `law_of()` the law a value stands for (None for a kernel name).
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Union

from pydantic import BeforeValidator

from ccrig.errors import InputError, field_error
from . import laws
from .families import FAMILIES, PRESETS
from .families._family import FieldError

NAME_MAX = 15   # TCP_CA_NAME_MAX is 16 with the terminating NUL
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
LAWS = tuple(FAMILIES)


def fields_of(law: str) -> tuple[str, ...]:
    """The keys a {law: NAME, ...} mapping may hold: law, the family's parameters, then its spec options."""
    fam = FAMILIES[law]
    return ("law", *(p.name for p in fam.params), *fam.options)


ACCEPTED = (f"a kernel congestion control name (at most {NAME_MAX} characters of letters, digits, '_', '-', "
            f"'.'), a preset ({', '.join(PRESETS)}), or a mapping "
            + " / ".join("{law: " + ", ".join((n, *fields_of(n)[1:])) + "}" for n in FAMILIES))

# A spec's parameterisation is its family's law itself (a frozen dataclass pydantic validates as it is):
# TCP(alpha, beta) (alpha segments per RTT, beta the fraction kept), polynomial rules (beta the fraction removed)
AlphaBetaCc = laws.AlphaBeta
PolyCc = laws.Poly

Cc = Union[(str, *(fam.law for fam in FAMILIES.values()))]


def _mapping(value: dict, path: str) -> laws.Law:
    """A {law: NAME, ...} mapping checked against its family's declared parameters."""
    law = value.get("law")
    if law not in FAMILIES:
        raise field_error(f"{path}.law", law, f"one of {', '.join(LAWS)}")
    fam, fields = FAMILIES[law], fields_of(law)
    for key in value:
        if key not in fields:
            raise field_error(f"{path}.{key}", value[key], f"no such field for law {law}; "
                              f"its fields are {', '.join(fields)}")
    declared = {p.name: p for p in fam.params}

    def check(name: str):
        p = declared[name]
        if name not in value:
            if p.required:
                raise FieldError(name, None, p.accepted())
            return p.default
        return p.check(value[name])
    try:
        if fam.prepare is not None:
            value = fam.prepare(value, check)
        return fam.law(**{name: check(name) for name in declared},
                       **{o: value[o] for o in fam.options if o in value})
    except FieldError as e:
        raise field_error(f"{path}.{e.name}", e.value, e.accepted) from None


def parse_cc(value: Any, path: str = "cc") -> Cc:
    """Validates one cc value; raises InputError naming the field, the value and what is accepted."""
    if isinstance(value, tuple(fam.law for fam in FAMILIES.values())):
        return value
    if isinstance(value, str):
        name = value.strip()
        if not name or len(name) > NAME_MAX or not _NAME_RE.match(name):
            raise field_error(path, value, ACCEPTED)
        return name
    if not isinstance(value, dict):
        raise field_error(path, value, ACCEPTED)
    return _mapping(value, path)


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
    """The canonical text of a cc value: a name as given, a parameterisation as law(field=value,...) in its
    family's declared order, a flag by its name when set."""
    cc = parse_cc(cc)
    if isinstance(cc, str):
        return cc
    parts = []
    for p in FAMILIES[cc.law].params:
        v = getattr(cc, p.name)
        if p.kind == "flag":
            parts += [p.name] if v else []
        else:
            parts.append(f"{p.name}={_num(v) if p.kind == 'real' else v}")
    return f"{cc.law}({','.join(parts)})"


def law_of(cc: Cc) -> laws.Law | None:
    """The law a cc value stands for: a preset's or a parameterisation's; None for a kernel name."""
    cc = parse_cc(cc)
    return PRESETS.get(cc) if isinstance(cc, str) else cc


def preset_of(law: laws.Law) -> str | None:
    """The preset with exactly these parameters, if any (so a kernel module's preset can serve it)."""
    for name, p in PRESETS.items():
        if p == law:
            return name
    return None
