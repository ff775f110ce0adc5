"""A run's summary.json as the report reads it, and its numbers as the report writes them."""
from __future__ import annotations

import json
from pathlib import Path

from ccrig.errors import InputError


def load_summary(run_dir: Path) -> dict:
    path = run_dir / "summary.json"
    if not path.is_file():
        raise InputError(f"RUN_DIR: got {str(run_dir)!r}; expected a run directory holding summary.json")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"RUN_DIR: got {str(path)!r}, which is not valid JSON ({e}); expected a summary.json "
                         f"written by ccrig run") from None


def swept_params(points: list[dict]) -> list[str]:
    """Parameters whose value differs between points, in the order the spec gives them."""
    keys = []
    for p in points:
        for k in p.get("params", {}):
            if k not in keys:
                keys.append(k)
    return [k for k in keys if len({json.dumps(p.get("params", {}).get(k), sort_keys=True) for p in points}) > 1]


def fmt_stat(stat: dict | None, scale: float = 1.0) -> str:
    """'mean ± half-width' of the 95 % CI (as in summary.json), or '–' when absent."""
    if not stat or stat.get("mean") is None:
        return "–"
    m = stat["mean"] * scale
    lo, hi = stat.get("ci95") or [None, None]
    if lo is None or hi is None or hi == lo:
        return f"{m:.4g}"
    return f"{m:.4g} ± {(hi - lo) / 2 * scale:.2g}"


def fmt_param(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
