"""Two runs of one study, claim by claim: does a verdict survive a rerun?

    compare(a, b) -> {"claims": [...], "agree": n, "of": n, "undecided": {...}, "without_interval": {...}}
    markdown(doc) -> the table RESULTS.md quotes

Each run is its claims.json (or the study directory holding it). Two verdicts agree when they are the same word;
`undecided` and `not-applicable` agree with nothing but themselves, so a claim one run could not decide counts
against agreement. A claim not applicable in both runs (a part of a study leaves the other specs' claims so, or
a point neither run measured) is judged by neither: it is left out of the agreement and the undecided share, and
counted apart (`unjudged`); so is a claim only one run's study.yaml has (a claim retired or added between the
runs: `one_sided`), whatever its verdict there. A claim decided (holds, fails, no-difference) without an interval
over repetitions is named: the engine never gives one, so it marks a claims.json from before it.
"""
from __future__ import annotations

import json
from pathlib import Path

from ccrig.errors import InputError

DECIDED = ("holds", "fails", "no-difference")


def load(path: Path) -> dict:
    """A run's claims.json, given itself or its study directory."""
    path = Path(path)
    file = path / "claims.json" if path.is_dir() else path
    try:
        doc = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: got no readable claims.json ({e}); expected a study directory or its "
                         f"claims.json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise InputError(f"{file}: got no list of claims; expected a claims.json that ccrig study report wrote")
    return doc


def _header(doc: dict) -> dict:
    return {k: doc.get(k) for k in ("study", "started", "seed", "host_kernel", "quick", "study_sha256")}


def compare(a: dict, b: dict) -> dict:
    """Claim by claim, the two runs' verdicts and measures, and the counts the issue's goals read."""
    if a.get("study") != b.get("study"):
        raise InputError(f"the two runs are of studies {a.get('study')!r} and {b.get('study')!r}; expected one study")
    first, second = ({c["id"]: c for c in d["claims"]} for d in (a, b))
    rows = []
    for cid in [*first, *(c for c in second if c not in first)]:
        x, y = first.get(cid, {}), second.get(cid, {})
        rows.append({"id": cid, "a": x.get("verdict", "absent"), "b": y.get("verdict", "absent"),
                     "agree": x.get("verdict") == y.get("verdict") and cid in first and cid in second,
                     "a_measured": x.get("measured"), "b_measured": y.get("measured")})
    unjudged = [r for r in rows if r["a"] == r["b"] == "not-applicable"]
    one_sided = [r for r in rows if "absent" in (r["a"], r["b"])]
    judged = [r for r in rows if r not in unjudged and r not in one_sided]

    def without_interval(doc: dict) -> list[str]:
        return [c["id"] for c in doc["claims"] if c.get("verdict") in DECIDED and not c.get("interval")]

    return {"a": _header(a), "b": _header(b), "claims": rows, "agree": sum(r["agree"] for r in judged),
            "of": len(judged), "unjudged": len(unjudged), "one_sided": len(one_sided),
            "undecided": {side: sum(r[side] == "undecided" for r in judged) for side in ("a", "b")},
            "without_interval": {"a": without_interval(a), "b": without_interval(b)},
            "same_claims": a.get("study_sha256") == b.get("study_sha256")}


def markdown(doc: dict) -> str:
    n = doc["of"] or 1
    def seed(h: dict) -> str:
        return "each spec's own seed" if h["seed"] is None else f"seed {h['seed']}"

    lines = [f"Runs compared: A started {doc['a']['started']} ({seed(doc['a'])}), B started "
             f"{doc['b']['started']} ({seed(doc['b'])})"
             + ("" if doc["same_claims"] else "; **their study.yaml differ** (study_sha256)") + ".",
             f"Agreement: {doc['agree']} of {doc['of']} verdicts ({doc['agree'] / n:.0%})"
             + (f" ({doc['unjudged']} claim(s) not applicable in both, left out)" if doc.get("unjudged") else "")
             + (f" ({doc['one_sided']} claim(s) in one run's study.yaml only, left out)" if doc.get("one_sided")
                else "")
             + "; undecided: "
             f"{doc['undecided']['a']} in A, {doc['undecided']['b']} in B ({doc['undecided']['a'] / n:.0%}, "
             f"{doc['undecided']['b'] / n:.0%}); decided without an interval over repetitions: "
             f"{len(doc['without_interval']['a'])} in A, {len(doc['without_interval']['b'])} in B.", "",
             "| claim | A | B | A measured | B measured |", "|---|---|---|---|---|"]
    for r in doc["claims"]:
        mark = "" if r["agree"] else "**"
        lines.append(f"| {r['id']} | {mark}{r['a']}{mark} | {mark}{r['b']}{mark} | {r['a_measured'] or '–'} | "
                     f"{r['b_measured'] or '–'} |")
    return "\n".join(lines) + "\n"
