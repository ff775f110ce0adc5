"""A study directory's record, study.json: the shared state of a study run (experiments/run/study.py), its
loop of looks (experiments/run/budget.py) and the share of it that runs elsewhere (the vm guest's `ccrig study
run --resume DIR --specs ...` writes the same file), and which part of the study a run is (part_of). Written
atomically: a reader or a kill never sees half."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ccrig.errors import InputError

STATE = "study.json"


def read_state(study_dir: Path) -> dict:
    path = study_dir / STATE
    if not path.is_file():
        raise InputError(f"DIR: got {str(study_dir)!r}; expected a study directory holding {STATE}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None


def write_state(study_dir: Path, state: dict) -> None:
    tmp = study_dir / f".{STATE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, study_dir / STATE)


def run_dir_of(study_dir: Path, rec: dict) -> Path | None:
    """A spec's run directory. study.json holds it relative to the study directory, so a study directory can be
    moved or copied whole (an older absolute path still works)."""
    return Path(study_dir, rec["run_dir"]) if rec.get("run_dir") else None


def guest_share(only: list[str] | None, budget: float | None, resumed: bool) -> bool:
    """Whether a `study run` is the share of a study a guest runs for the host's loop: --resume with --specs and no
    --budget (no loop of its own, no claims table: the whole study judges it)."""
    return bool(only) and resumed and budget is None


def part_of(state: dict, only: list[str] | None, budget: float | None, resumed: bool, study_dir: Path | None
          ) -> tuple[list[str] | None, list[str] | None]:
    """(the part of the study its loop runs, the specs to run). A new run with --specs is a part: its own loop
    (one look, or with --budget more), its other specs' claims not applicable (not run), recorded in study.json;
    resumed, it stays that part. --resume with --specs and no --budget is the share a guest runs for the host's
    loop (no loop here): always within the host's part, so specs outside it are refused (another part is a new run)."""
    held = state.get("part")
    if not resumed:
        if only:
            state["part"] = only
        return only, only
    if only and held and not set(only) <= set(held):
        raise InputError(f"--specs: got {','.join(only)}; {study_dir} is the part {','.join(held)} (expected "
                         f"those, or none; another part is a study run of its own: --specs without --resume)")
    if guest_share(only, budget, resumed):
        return None, only
    if only and not held:
        raise InputError(f"--specs: got {','.join(only)} with --budget; {study_dir} is the whole study's run "
                         f"(expected --resume without --specs)")
    if only and sorted(only) != sorted(held):
        raise InputError(f"--specs: got {','.join(only)} with --budget; {study_dir} is the part {','.join(held)} "
                         f"(expected those, or none)")
    return held, held
