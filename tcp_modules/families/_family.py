"""What a congestion-control law family declares, once, for every reader: its parameters (kind, range, default,
the slot of the C core's parameter block they travel in), its presets, its kernel names and its reference.

A family is a frozen dataclass (the floating-point reference: increase(w), loss_window(w)) whose parameters are
its fields made with `param()`, plus a `Family` descriptor naming the rest. Readers derive from them: the spec's
validation and canonical keys (spec.py), the BPF loader's parameter block and names (bpfobj.py, bpf.py), the
kernel modules' sources and their tunable parameters (gen.py, kmod.py), the test vectors (vectors.py).

Standard library only: the Makefile runs gen.py with the system's python3 wherever the modules are built
(a provisioned host has no ccrig installed), so nothing here may import pydantic or ccrig.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FP = 20                      # fractional bits of the C core
ONE = 1 << FP
CAP = float(1 << 24)         # saturation, in segments
MIN_CWND = 2
REAL_MAX = 1000.0            # the modules' decimal parser reads at most 1000 (kmod/ccrig_kmod.h)

# The C core's parameter block (include/ccrig_law.h struct ccrig_params): every family's parameters travel in
# these slots, with these values when a family leaves a slot unused. Kinds: real (Q20, >= 0), int (s32;
# terms: u32), flag.
SLOTS = {"alpha": "real", "beta": "real", "k": "int", "l": "int", "terms": "int", "per_ack": "flag",
         "halve_first": "flag"}
SLOT_DEFAULTS = {"alpha": 1.0, "beta": 0.5, "k": 0, "l": 1, "terms": 1, "per_ack": False, "halve_first": False}
HERE = Path(__file__).resolve().parent
REQUIRED = object()          # a Param's default when it has none (dataclasses.MISSING cannot be a field default)


def quantize(x: float) -> int:
    """A parameter as the C core holds it: Q20, rounded to nearest."""
    return int(round(x * ONE))


class FieldError(ValueError):
    """A bad value of one field: spec.py turns it into ccrig's one-line InputError."""

    def __init__(self, name: str, value, accepted: str):
        super().__init__(f"{name}: got {value!r}; expected {accepted}")
        self.name, self.value, self.accepted = name, value, accepted


@dataclass(frozen=True)
class Param:
    """One declared parameter. lo/hi bound a real or an int (a real's may be open: excluded); `meaning` ends
    the accepted-values text; `when_set`: a flag that appears in params() only when true (so laws declared
    before it keep their parameters, and with them their generated BPF names)."""
    kind: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    doc: str = ""
    meaning: str = ""
    slot: str = ""
    when_set: bool = False
    name: str = ""
    default: object = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def tunable_default(self):
        """The kernel module's tunable instance starts with this value."""
        return SLOT_DEFAULTS[self.slot] if self.required else self.default

    def accepted(self) -> str:
        if self.kind == "flag":
            return "true or false"
        if self.kind == "int":
            return f"an integer from {self.lo:g} to {self.hi:g}"
        if self.lo_open and self.hi_open:
            text = f"a number strictly between {self.lo:g} and {self.hi:g}"
        else:
            low = (f"> {self.lo:g}" + (" (at least 2^-20)" if self.lo == 0 else "")) if self.lo_open \
                else f">= {self.lo:g}"
            text = f"a number {low} and {'below' if self.hi_open else 'at most'} {self.hi:g}"
        return text + self.meaning

    def check(self, value):
        """value if it is one of this parameter's, else FieldError (a real is checked as the core will hold it)."""
        bad = FieldError(self.name, value, self.accepted())
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise bad
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if self.kind == "int":
            if not isinstance(value, int) or not self.lo <= value <= self.hi:
                raise bad
            return value
        if not math.isfinite(value):
            raise bad
        q, lo, hi = quantize(value), quantize(self.lo), quantize(self.hi)
        if (q <= lo if self.lo_open else q < lo) or (q >= hi if self.hi_open else q > hi) or \
                not self.lo <= value <= self.hi:
            raise bad
        return float(value)


def param(kind: str, default=dataclasses.MISSING, **declared):
    """A law dataclass field that is a declared parameter (see Param); without a default it is required."""
    assert kind in ("real", "int", "flag"), kind
    declared["default"] = REQUIRED if default is dataclasses.MISSING else default
    return field(default=default, metadata={"ccrig_param": Param(kind, **declared)})


def params_of(law_class) -> list[Param]:
    """A law class's declared parameters, in field order, named and slotted."""
    out = []
    for f in dataclasses.fields(law_class):
        p = f.metadata.get("ccrig_param")
        if p is not None:
            out.append(dataclasses.replace(p, name=f.name, slot=p.slot or f.name))
    return out


class LawBase:
    """What every family's reference has besides increase(w) and loss_window(w): its parameters as a dict (the
    loader's and the archive's form, and the input of a generated BPF name) and the core's two options."""
    per_ack = False
    halve_first = False

    def params(self) -> dict:
        out = {"law": self.law}
        for p in params_of(type(self)):
            v = getattr(self, p.name)
            if not (p.when_set and not v):
                out[p.name] = v
        return out


@dataclass(frozen=True)
class Family:
    """A law family. Its files, by convention: families/NAME.py (this descriptor and the reference), NAME.h
    (the C law: ccrig_law_increase and ccrig_law_loss_window) and NAME.vectors.json (the reference's values for
    the C law); its kernel module tcp_NAME (presets under their own names, `tunable` with writable parameters)
    and its BPF object build/tcp_NAME.bpf.o, whose variants are named cr<letter>_<prefix tag>_<parameter tag>.

    prepare(value, check) may rewrite a spec mapping before its parameters are checked (check(name) validates
    one); sample(rng) draws a random parameterisation for the vectors, which also hold every preset and
    `vector_cases`."""
    law: type
    letter: str
    code: int
    tunable: str
    summary: str
    presets: dict
    sample: Callable
    n_random: int = 40
    vector_cases: dict = field(default_factory=dict)
    prepare: Callable | None = None

    @property
    def name(self) -> str:
        return self.law.law

    @property
    def params(self) -> list[Param]:
        return params_of(self.law)

    @property
    def options(self) -> list[str]:
        """Spec-only fields of the law (not parameters, e.g. alphabeta's friendly)."""
        declared = {p.name for p in self.params}
        return [f.name for f in dataclasses.fields(self.law) if f.init and f.name not in declared]

    @property
    def module(self) -> str:
        return f"tcp_{self.name}"

    @property
    def bpf_object(self) -> str:
        return f"tcp_{self.name}.bpf.o"

    @property
    def c_file(self) -> Path:
        return HERE / f"{self.name}.h"

    @property
    def vectors(self) -> Path:
        return HERE / f"{self.name}.vectors.json"

    def problems(self) -> list[str]:
        """What is wrong with the declaration itself (empty: nothing)."""
        out, slots = [], set()
        for p in self.params:
            where = f"family {self.name}: parameter {p.name}"
            if SLOTS.get(p.slot) != p.kind:
                out.append(f"{where}: slot {p.slot!r} is not a {p.kind} slot (slots: {SLOTS})")
            if p.slot in slots:
                out.append(f"{where}: slot {p.slot} used twice")
            slots.add(p.slot)
            if p.kind == "real" and not (0 <= p.lo < p.hi <= REAL_MAX):
                out.append(f"{where}: a real's range must lie within 0..{REAL_MAX:g}")
            if p.kind == "int" and (p.lo is None or p.hi is None or (p.slot == "terms" and p.lo < 0)):
                out.append(f"{where}: an int needs lo and hi (terms: lo >= 0)")
        if not (len(self.letter) == 1 and self.letter.isascii() and self.letter.isalnum() and self.letter.islower()):
            out.append(f"family {self.name}: letter {self.letter!r} must be one lower-case letter or digit")
        # it names C identifiers and the module, whose name the kernel holds in 56 bytes (MODULE_NAME_LEN)
        if not self.name.isidentifier() or len(self.module) > 55:
            out.append(f"family {self.name}: the name must be an identifier of at most 51 characters "
                       f"(it names module tcp_{self.name})")
        for n in [*self.presets, self.tunable]:
            if len(n) > 15:
                out.append(f"family {self.name}: name {n!r} is longer than 15 characters (TCP_CA_NAME_MAX)")
        for n, law in self.presets.items():
            if type(law) is not self.law:
                out.append(f"family {self.name}: preset {n} is not a {self.law.__name__}")
        if not self.c_file.exists():
            out.append(f"family {self.name}: its C law {self.c_file} is missing")
        return out
