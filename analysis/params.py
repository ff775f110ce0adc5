"""A point named by its swept parameters: a claim's `at` against a summary point's `params` (analysis/verdicts.py
reads points by them)."""
from __future__ import annotations

import re


def same_param(given, wanted) -> bool:
    """A sweep parameter's value in the archive against the one a claim names: equal as written, or as numbers."""
    if given == wanted or str(given) == str(wanted):
        return True
    try:
        return float(given) == float(wanted)
    except (TypeError, ValueError):
        return False


_MISSING = object()


def within(params: dict, path: str, wanted) -> bool:
    """Whether a point's swept value at path is wanted: a swept path itself, or a path inside a swept value (a
    spec sweeping whole flow lists is matched by `flows[0].cc: reno`)."""
    if path in params:
        return same_param(params[path], wanted)
    for key, value in params.items():
        if path.startswith(key) and path[len(key):len(key) + 1] in (".", "["):
            for token in re.findall(r"\[(\d+)\]|\.?([^.\[]+)", path[len(key):]):
                index, name = token
                if index and isinstance(value, list) and int(index) < len(value):
                    value = value[int(index)]
                elif name and isinstance(value, dict):
                    value = value.get(name, _MISSING)
                else:
                    return False
            return value is not _MISSING and same_param(value, wanted)
    return False


def matches(params: dict, at: dict) -> bool:
    """Whether a point (its swept parameters) is one a claim's `at` names: every path of at within it."""
    return all(within(params, k, v) for k, v in at.items())
