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


# the mark of each confidence interval's method (summary.json's `ci`)
CI_MARKS = {"runs": "r", "batches": "b"}


def fmt_stat(stat: dict | None, scale: float = 1.0) -> str:
    """'mean ± half-width' of the confidence interval (as in summary.json), marked with its method (r: across
    repetitions, b: batch means within a run), 'mean (no CI)' when the method is none, '–' when absent."""
    if not stat or stat.get("mean") is None:
        return "–"
    m = stat["mean"] * scale
    ci = stat.get("ci") or {}
    lo, hi = stat.get("ci95") or [None, None]
    if lo is None or hi is None:
        return f"{m:.4g} (no CI)" if ci.get("method") == "none" else f"{m:.4g}"
    mark = f" {CI_MARKS[ci['method']]}" if ci.get("method") in CI_MARKS else ""
    if hi == lo:
        return f"{m:.4g}{mark}" if mark else f"{m:.4g}"
    return f"{m:.4g} ± {(hi - lo) / 2 * scale:.2g}{mark}"


def ci_rows(points: list[dict], metrics: list[tuple[str, str, float]]) -> list[list[str]]:
    """Per point and system metric: how its interval was made (method, n, n_eff, batch length) or why not."""
    rows = []
    for p in points:
        for key, label, _ in metrics:
            ci = ((p.get("system") or {}).get(key) or {}).get("ci")
            if not ci:
                continue
            rows.append([str(p["index"]), label, ci.get("method", "?"), str(ci.get("n", "–")),
                         "–" if ci.get("n_eff") is None else f"{ci['n_eff']:.3g}",
                         "–" if ci.get("batch_len") is None else str(ci["batch_len"]), ci.get("reason") or ""])
    return rows


def fmt_param(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def flow_label(flow: dict) -> str:
    """A flow as a reader knows it: its spec's `label` or else its congestion control, then its number to tell two
    of a kind apart ("cubic #1", "Generic #0"); the number alone when the summary names neither."""
    name = flow.get("label") or flow.get("cc")
    return f"{name} #{flow['flow']}" if name else f"flow {flow['flow']}"
