"""One study on several kernels, claim by claim (`ccrig study run NAME --by-kernel`): does a verdict hold on
another kernel?

    table(columns) -> {"kernels": [...], "claims": [...], "differ": [...]}
    markdown(doc)  -> kernels.md

columns: one per kernel group, each {"label", "kernel", "testbed", "study_dir"} with its claims.json's document
("claims") or why it could not run ("error"). A claim differs when two kernels decided it (holds, fails,
no-difference) in different words; a kernel that left it undecided or could not run it says nothing either way,
and is shown as such.
"""
from __future__ import annotations

from ccrig.experiments.report.study_compare import DECIDED


def table(columns: list[dict]) -> dict:
    ids: list[str] = []
    for col in columns:
        ids += [c["id"] for c in (col.get("claims") or {}).get("claims", []) if c["id"] not in ids]
    rows = []
    for cid in ids:
        verdicts = {}
        for col in columns:
            claims = {c["id"]: c for c in (col.get("claims") or {}).get("claims", [])}
            verdicts[col["label"]] = claims[cid]["verdict"] if cid in claims else \
                ("not run" if col.get("error") else "absent")
        decided = {v for v in verdicts.values() if v in DECIDED}
        rows.append({"id": cid, "verdicts": verdicts, "differs": len(decided) > 1})
    return {"kernels": [{k: col.get(k) for k in ("label", "kernel", "testbed", "study_dir", "error")}
                        for col in columns],
            "claims": rows, "differ": [r["id"] for r in rows if r["differs"]]}


def markdown(doc: dict, study: str) -> str:
    labels = [k["label"] for k in doc["kernels"]]
    out = [f"# Study {study} by kernel", "",
           "One column per kernel group; **differs** marks a claim two kernels decided in different words "
           "(undecided and not-run say nothing either way).", ""]
    if doc.get("specs"):
        out += [f"Only the specs {', '.join(doc['specs'])} ran (--specs), on each kernel: a claim on another spec is "
                "not applicable.", ""]
    for k in doc["kernels"]:
        where = f"`{k['study_dir']}`" if k.get("study_dir") else "not run"
        out.append(f"- {k['label']}: kernel {k.get('kernel') or '?'}, testbed {k.get('testbed')}, {where}"
                   + (f" ({k['error']})" if k.get("error") else ""))
    out += ["", "| claim | " + " | ".join(labels) + " | |", "|---|" + "---|" * len(labels) + "---|"]
    for r in doc["claims"]:
        out.append(f"| {r['id']} | " + " | ".join(r["verdicts"][lab] for lab in labels)
                   + f" | {'**differs**' if r['differs'] else ''} |")
    out += ["", f"{len(doc['differ'])} of {len(doc['claims'])} claims decided differently on two kernels"
            + (": " + ", ".join(doc["differ"]) if doc["differ"] else "") + "."]
    return "\n".join(out) + "\n"
