"""A study directory's record, study.json: the shared state of a study run (experiments/run/study.py), its
loop of looks (experiments/run/budget.py) and the share of it that runs elsewhere (the vm guest's `ccrig study
run --resume DIR --specs ...` writes the same file). Written atomically: a reader or a kill never sees half."""
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
