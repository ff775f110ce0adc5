"""A full study run kept beside its study, as the studies' rule asks: claims.json, study.json, claims.md and the
summary figures a reader needs (each spec's sweep figures and utility diagram), never the raw archive.

    keep(study_dir, into=None) -> the folder   (default: experiments/studies/<name>/runs/<YYYYMMDD-HHMM of its start>)

A `--by-kernel` directory (kernels.json) is kept whole: kernels.json and kernels.md, and each kernel's study kept
as above in a folder named after its column (default: runs/<YYYYMMDD-HHMM>-bykernel).

claims.md links into the archive (runs/<spec run>/report/...); the kept copy links its own figures instead, and
says "in the archive" (its header names it) for everything else.
"""
from __future__ import annotations

import json
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from ccrig.errors import InputError
from ccrig.experiments.report import study_kernels

FIGURES = ("sweep_*.png", "utility.png")
SINGLE = {"sweep_point.png"}   # a spec of one point has no axis to sweep: its figure says nothing the table does not
KEPT = ("claims.json", "study.json", "claims.md")


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{path.parent}: no readable {path.name} ({e}); expected a study directory that "
                         f"`ccrig study run` finished (results/studies/...)") from None


def keep(study_dir: Path, into: Path | None = None) -> Path:
    study_dir = Path(study_dir)
    if (study_dir / "kernels.json").is_file():
        return _keep_by_kernel(study_dir, into)
    claims, state = _read(study_dir / "claims.json"), _read(study_dir / "study.json")
    if claims.get("quick") or state.get("quick"):
        raise InputError(f"{study_dir}: a quick run checks the mechanics only and is not kept; expected a full run "
                         f"(ccrig study run {state.get('study', 'NAME')})")
    started = state.get("started", "")
    if into is None:
        stamp = re.sub(r"[-:]", "", started[:16]).replace("T", "-")
        into = Path(state["folder"]) / "runs" / stamp
    if into.exists():
        raise InputError(f"--into {into}: already exists; expected a new folder (a kept run is never overwritten)")
    with _made(into):
        _copy(study_dir, state, into)
    return into


@contextmanager
def _made(into: Path):
    """A kept folder is whole or absent: whatever fails while it is written takes it away again."""
    try:
        yield
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise


def _copy(study_dir: Path, state: dict, into: Path) -> None:
    (into / "figures").mkdir(parents=True)
    for name in KEPT[:2]:
        shutil.copy2(study_dir / name, into / name)
    kept: dict[str, str] = {}   # the figure's path in the archive -> its name in the kept folder
    for spec, rec in sorted(state.get("specs", {}).items()):
        if not rec.get("run_dir"):   # a spec the run left out (--specs) or never reached
            continue
        for pattern in FIGURES:
            for fig in sorted(f for f in (study_dir / rec["run_dir"] / "report").glob(pattern) if f.name not in SINGLE):
                kept[f"{rec['run_dir']}/report/{fig.name}"] = f"figures/{spec}_{fig.name}"
                shutil.copy2(fig, into / kept[f"{rec['run_dir']}/report/{fig.name}"])
    (into / "claims.md").write_text(relink((study_dir / "claims.md").read_text(), kept))


def _keep_by_kernel(parent: Path, into: Path | None) -> Path:
    doc = _read(parent / "kernels.json")
    ran = [k for k in doc["kernels"] if k.get("study_dir")]
    if not ran:
        raise InputError(f"{parent}: no kernel's study ran; expected a `ccrig study run --by-kernel` directory with "
                         f"at least one column that ran")
    first = _read(parent / ran[0]["study_dir"] / "study.json")
    if into is None:
        into = Path(first["folder"]) / "runs" / (re.sub(r"[-:]", "", first.get("started", "")[:16]).replace("T", "-")
                                                 + "-bykernel")
    if into.exists():
        raise InputError(f"--into {into}: already exists; expected a new folder (a kept run is never overwritten)")
    quick = [k["label"] for k in ran if _read(parent / k["study_dir"] / "claims.json").get("quick")]
    if quick:   # said before anything is made
        raise InputError(f"{parent}: the {', '.join(quick)} column ran a quick study, which checks the mechanics only "
                         f"and is not kept; expected a full run (ccrig study run {doc['study']} --by-kernel)")
    with _made(into):
        for k in ran:
            keep(parent / k["study_dir"], into / _folder(k["label"]))
            k["study_dir"] = _folder(k["label"])
        (into / "kernels.json").write_text(json.dumps(doc, indent=1) + "\n")
        (into / "kernels.md").write_text(study_kernels.markdown(doc, doc["study"]))
    return into


def _folder(label: str) -> str:
    return label.replace(" ", "-")


def relink(md: str, kept: dict[str, str]) -> str:
    """claims.md's links made true in the kept folder: a kept figure's to its copy, any other into the archive
    (which claims.md's header names, on the machine that ran the study) as plain text."""
    def one(m: re.Match) -> str:
        bang, text, target = m.groups()
        if target in kept:
            return f"{bang}[{text}]({kept[target]})"
        if target.startswith("runs/"):   # the header names the archive once
            return f"{text} (in the archive)"
        return m.group(0)
    # link text may hold one level of brackets (a figure named sweep_flows[0]_cc)
    return re.sub(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(([^)]+)\)", one, md)
