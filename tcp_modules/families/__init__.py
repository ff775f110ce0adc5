"""The congestion-control law families, found by their descriptors: every module here not starting with `_`
(and not gen.py) is one family and defines FAMILY (see _family.py). FAMILIES is keyed by the family's name
(what `law:` says in a spec), in name order; PRESETS holds every family's presets.

Adding a family is three files here: NAME.py (the descriptor and the floating-point reference), NAME.h (the C
law) and NAME.vectors.json (`python -m ccrig.tcp_modules.vectors` writes it). See tcp_modules/README.md.
"""
from __future__ import annotations

import importlib
import pkgutil

from ._family import Family

NOT_FAMILIES = {"gen"}


def _discover() -> dict[str, Family]:
    found: dict[str, Family] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in NOT_FAMILIES:
            continue
        fam = importlib.import_module(f"{__name__}.{info.name}").FAMILY
        if fam.name != info.name:
            raise ImportError(f"{info.name}.py declares family {fam.name!r}: a descriptor is named after its family")
        found[fam.name] = fam
    problems = [p for fam in found.values() for p in fam.problems()]
    for attr in ("letter", "code", "tunable"):
        seen: dict = {}
        for fam in found.values():
            v = getattr(fam, attr)
            if v in seen:
                problems.append(f"families {seen[v]} and {fam.name} share {attr} {v!r}")
            seen[v] = fam.name
    names = [n for fam in found.values() for n in (*fam.presets, fam.tunable)]
    problems += [f"kernel name {n!r} is declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
    if problems:
        raise ImportError("; ".join(problems))
    return found


FAMILIES: dict[str, Family] = _discover()
PRESETS = {name: law for fam in FAMILIES.values() for name, law in fam.presets.items()}
