"""The spec's validation errors in its own words: pydantic's errors, each as one line that names the field (as the
spec spells it, union tags and validator names left out), the value and what is accepted (an unknown field:
the fields allowed there)."""
from __future__ import annotations

import typing

from pydantic import BaseModel, ValidationError

from ccrig import qdiscs, topologies
from ccrig.errors import InputError
from ccrig.experiments import workloads


def _path_str(loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _union_tags() -> set[str]:
    return ({m.model_fields["name"].default for m in topologies.SPECS} | set(qdiscs.kinds())
            | set(workloads.kinds()))


def _strip_tags(loc: tuple) -> tuple:
    """Drops the union-tag and validator parts pydantic puts in an error's location."""
    tags = _union_tags()
    return tuple(p for p in loc if not (isinstance(p, str) and (p in tags or "[" in p
                                                                  or p.startswith("function-"))))


def _allowed(model, loc) -> list[str]:
    """The field names accepted where loc (pydantic's raw location, union tags included) points."""
    cur = [model]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        tagged = [m for m in cur if _tag(m) == part]
        if tagged:  # a union member chosen by its tag
            cur = tagged
            continue
        fields = getattr(cur[0], "model_fields", {})
        if part not in fields:
            return []
        cur = _models_in(fields[part].annotation)
        if not cur:
            return []
    return sorted(getattr(cur[0], "model_fields", {}))


def _tag(model) -> str | None:
    for key in ("name", "kind"):
        f = getattr(model, "model_fields", {}).get(key)
        if f is not None and isinstance(f.default, str):
            return f.default
    return None


def _models_in(ann) -> list:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    return [m for arg in typing.get_args(ann) for m in _models_in(arg)]


def format_errors(source: str, err: ValidationError, model: type[BaseModel]) -> InputError:
    """Every error pydantic found, each as `field: got VALUE; expected ...`, on one line for the source."""
    lines = []
    for e in err.errors():
        loc = _strip_tags(e["loc"])
        path = _path_str(loc) or "(top level)"
        value = e.get("input")
        if e["type"] == "extra_forbidden":
            allowed = _allowed(model, e["loc"])
            lines.append(f"{path}: unknown field; expected one of: {', '.join(allowed)}" if allowed
                         else f"{path}: unknown field")
        elif e["type"] == "missing":
            lines.append(f"{path}: missing; this field is required")
        elif e["type"] == "too_short":   # pydantic's own words ("List should have ...") say nothing accepted
            n = e.get("ctx", {}).get("min_length", 1)
            lines.append(f"{path}: got {value!r}; expected a list of at least {n} {'entry' if n == 1 else 'entries'}")
        elif e["type"] == "union_tag_invalid" or e["type"] == "literal_error":
            lines.append(f"{path}: got {value!r}; {e['msg'].replace('Input should be', 'expected')}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if "got " not in msg:
                lines.append(f"{path}: got {value!r}; {msg}")
            else:   # the check named the field itself (a cross-field check on the whole experiment)
                lines.append(msg if not loc else f"{path}: {msg}")
    return InputError(f"{source}: " + "; ".join(lines))
