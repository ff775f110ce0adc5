"""A study's report: the claims table (paper / measured with its interval / verdict / basis and note), what
each spec answers and where its run is, what Linux cannot express, and each run's own report (tables, the
utility diagram, time series, the model overlays) linked beside it. Written as claims.md and claims.json in the
study directory; RESULTS.md in a study's folder is this file from the full run."""
from __future__ import annotations

import json
import os
import platform
from collections import Counter
from pathlib import Path

from ccrig.experiments.report.doc import report as run_report

STEAL_SAID = 0.005   # a share of the CPU stolen worth a word in claims.md (the run's or a round's)
QUICK = "**quick mode: mechanics only, the verdicts say nothing of the claims**"
MARK = {"holds": "holds", "fails": "**fails**", "no-difference": "no difference", "undecided": "undecided",
        "not-applicable": "n/a"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _duration(state: dict) -> str:
    seconds = sum(float(r.get("seconds") or 0) for r in state["specs"].values())
    return f"{seconds / 60:.1f} min of runs"


def _loop_lines(loop: dict) -> list[str]:
    """The loop of looks (experiments/run/budget.py): its budget, each look, what it added, why it stopped."""
    if not loop.get("looks"):
        return []
    budget = f"budget {loop['budget_s'] / 60:.1f} min, " if loop.get("budget_s") else "no budget, "
    looks = "; ".join(f"look {e['look']}{' (final)' if e.get('final') else ''}: {e['decided']} decided, "
                      f"{e['undecided']} undecided at {e['spent_s'] / 60:.1f} min"
                      + (f" (steal {e['steal']:.0%} in the round before it)"
                         if (e.get("steal") or 0) >= STEAL_SAID else "")
                      + (f", its round cut: {sum(e['cut'].values())} pair(s) left to run when the budget ended"
                         if e.get("cut") else "")
                      + (f", then {sum(e['added'].values())} more repetition(s) at {len(e['added'])} point(s)"
                         if e.get("added") else "") for e in loop["looks"])
    return [f"- looks: {budget}{loop.get('spent_s', 0) / 60:.1f} min spent; {looks}; stopped: "
            f"{loop.get('stopped', 'not yet (--resume the study directory)')}"]


def fleet_of(study_dir: Path, state: dict) -> dict | None:
    """Where a study's specs ran when dealt to a fleet (`--fleet`): each spec's members (by the repetitions each
    served) and every member lost, with the spec it was lost in, when (the controller's clock) and why. None when
    no spec ran on a fleet."""
    specs, lost = {}, []
    for spec, rec in state["specs"].items():
        run_dir = Path(study_dir, rec["run_dir"]) if rec.get("run_dir") else None
        try:
            fleet = json.loads((run_dir / "summary.json").read_text()).get("fleet") if run_dir else None
        except (OSError, ValueError):
            fleet = None
        if not fleet:
            continue
        # member.json: experiments/run/fleet.py's MEMBER_RECORD (not imported: the runner imports this report)
        served = Counter(json.loads(m.read_text())["member"] for m in run_dir.glob("points/*/rep*/member.json"))
        specs[spec] = {"inventory": fleet.get("inventory"), "served": dict(sorted(served.items()))}
        lost += [{"spec": spec, **x} for x in fleet.get("lost") or []]
    return {"specs": specs, "lost": lost} if specs else None


def _excluded_lines(results: list[dict]) -> list[str]:
    excluded = [(r["id"], e) for r in results for e in r.get("excluded") or []]
    if not excluded:
        return []
    return ["", "## Repetitions left out", "", "| claim | point | repetition | why |", "|---|---|---|---|",
            *(f"| {cid} | {e['point']} | {e['rep']} | {_cell(e['reason'])} |" for cid, e in excluded)]


def _fleet_lines(fleet: dict | None) -> list[str]:
    if not fleet:
        return []
    lines = ["", "## Fleet", "", "| spec | repetitions each member ran |", "|---|---|"]
    lines += [f"| {spec} | {', '.join(f'{m}: {n}' for m, n in r['served'].items()) or '–'} |"
              for spec, r in fleet["specs"].items()]
    if fleet["lost"]:
        lines += ["", "Members lost (their pairs dealt to the others):", ""]
        lines += [f"- {x['member']}, in spec {x['spec']} at {x['at']}: {x['why']}"
                  f" ({len(x.get('pairs_dealt_again') or [])} pair(s) dealt again)" for x in fleet["lost"]]
    return lines


def _kind(state: dict) -> str:
    """What the run was: a quick or a full one, of the whole study or of a part (ccrig study run --specs)."""
    part = state.get("part")
    return (QUICK if state.get("quick") else "full run") + (
        f" of a part: {', '.join(part)} (the other specs' claims are not applicable: not run)" if part else "")


def _steal(state: dict) -> str:
    """The hypervisor's share of the machine's CPU time over the run, when there was any to speak of, and the
    run's waits for it to pass (experiments/run/steal.py)."""
    steal = state.get("host_cpu_steal") or 0.0
    waits = state.get("steal_waits") or []
    return (f"; the hypervisor took {steal:.0%} of its CPU time during the run (steal: other guests on its host)"
            if steal >= STEAL_SAID else "") + \
        (f"; the run waited {sum(w['seconds'] for w in waits) / 60:.1f} min for steal to pass ({len(waits)} "
         f"wait(s), {sum(len(w['probes']) for w in waits)} probe(s))" if waits else "")


def write(study_dir: Path, study: dict, state: dict, results: list[dict], runs: bool = True,
          error: dict | None = None) -> Path:
    """error: the design's error rate and method (analysis.sequential.Design.describe)."""
    study_dir = Path(study_dir)
    loop = state.get("loop") or {}
    for r in results:   # each claim's verdict at every look the loop took
        r["looks"] = [{"look": e["look"], "verdict": e["verdicts"].get(r["id"])} for e in loop.get("looks", [])]
    counts = {v: sum(r["verdict"] == v for r in results) for v in ("holds", "fails", "no-difference", "undecided",
                                                                  "not-applicable")}
    lines = [f"# {study['title']}", "",
             f"Study `{study['name']}` (seed text {study.get('seed') or '–'}), {_kind(state)}.",
             "",
             f"- run: {state.get('started', '?')} to {state.get('finished', '?')}, {_duration(state)}; "
             f"archive `{study_dir.resolve()}`",
             f"- this machine's kernel: {state.get('host_kernel', platform.release())}{_steal(state)}",
             f"- verdicts: {counts['holds']} hold, {counts['fails']} fail, {counts['no-difference']} no difference, "
             f"{counts['undecided']} undecided, {counts['not-applicable']} not applicable",
             *([f"- error rate: {error['error_rate']} ({error['method']})"] if error else []),
             *_loop_lines(loop),
             *([f"- **study.yaml changed since the run started** (sha256 {state['study_sha256'][:16]} then, "
                f"{state['judged_study_sha256'][:16]} now): the claims and margins judged are today's"]
               if state.get("study_sha256") and state.get("judged_study_sha256")
               and state["study_sha256"] != state["judged_study_sha256"] else []), "",
             "## Claims", "",
             "| claim | the paper | measured | verdict | basis | note |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['id']} | {_cell(r['paper'])} | {_cell(r['measured'])} | {MARK[r['verdict']]} | "
                     f"{_cell(r['basis'])} | {_cell(r['note'])} |")
    lines += ["", "Each basis gives the claim's interval: Student's t over the independent repetitions' means "
              "(never batch means within one run), a difference of points by Welch-Satterthwaite, a ratio of "
              "points by the delta method, two quantities of one point repetition by repetition; with a margin, "
              "no difference means the interval lies inside ±margin. A claim without two usable repetitions at "
              "every point it reads is undecided and says how many more it needs."]
    fleet = fleet_of(study_dir, state)
    lines += _excluded_lines(results) + _fleet_lines(fleet)
    lines += ["", "## Specs", "", "| spec | answers | testbed | status | time | run | sha256 |",
              "|---|---|---|---|---|---|---|"]
    for spec, rec in state["specs"].items():
        link = "–"
        if rec.get("run_dir"):
            rel = os.path.relpath(Path(study_dir, rec["run_dir"]), study_dir)
            link = f"[{Path(rec['run_dir']).name}]({rel}/report/report.md)"
        lines.append(f"| {spec} | {_cell(rec.get('answers', ''))} | {rec.get('testbed', '–')} | {rec['status']} | "
                     f"{float(rec.get('seconds') or 0):.0f} s | {link} | `{rec.get('sha256', '')[:16]}` |")
    if study.get("absent"):
        lines += ["", "## What Linux cannot express", "", "| the paper's | why not | the nearest real thing |",
                  "|---|---|---|"]
        lines += [f"| {_cell(a['what'])} | {_cell(a['why'])} | {_cell(a.get('nearest') or '–')} |"
                  for a in study["absent"]]
    figures = []
    for spec, rec in state["specs"].items():   # each run's report: made now, or (runs False) as made before
        run_dir = Path(study_dir, rec["run_dir"]) if rec.get("run_dir") else None
        if run_dir is None or not (run_dir / "summary.json").is_file():
            continue
        path = run_report(run_dir, None, 0) if runs else run_dir / "report" / "report.html"
        if path.is_file():
            rel = os.path.relpath(path.parent, study_dir)
            pictures = [p.name for p in sorted(path.parent.glob("*.png"))
                        if p.name.startswith(("utility", "pause_gain", "model", "sweep_"))]
            figures.append(f"- {spec}: [report]({rel}/report.md)"
                           + "".join(f", [{n[:-4]}]({rel}/{n})" for n in pictures))
    if figures:
        lines += ["", "## Figures", "", "Each run's report (tables, the utility diagram: goodput against delay per "
                  "flow named by its congestion control, a 95 % box where its repetitions give intervals, every "
                  "setup in one picture; sweeps; time series; model overlays):", "",
                  *figures]
    out = study_dir / "claims.md"
    out.write_text("\n".join(lines) + "\n")
    (study_dir / "claims.json").write_text(json.dumps({
        "study": study["name"], **{k: state.get(k) for k in ("started", "seed", "host_kernel", "host_cpu_steal",
                                                           "study_sha256", "judged_study_sha256")},
        "quick": bool(state.get("quick")),
        "part": state.get("part"),
        "error_rate": error, "counts": counts, "claims": results, "loop": loop, "fleet": fleet,
        # every repetition some claim left out, once, with its reason: the ones the engine runs again
        "excluded": [dict(t) for t in dict.fromkeys(tuple(e.items()) for r in results
                                                     for e in r.get("excluded") or [])]},
        indent=2) + "\n")
    return out
