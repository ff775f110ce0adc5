"""A study directory's record, study.json: the shared state of a study run (experiments/run/study.py), its
loop of looks (experiments/run/budget.py) and the share of it that runs elsewhere (the vm guest's `ccrig study
run --resume DIR --specs ...` writes the same file), and which part of the study a run is (part_of). Written
atomically: a reader or a kill never sees half."""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
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


@contextmanager
def guest_deadline(study_dir: Path, specs: list[str], within_s: float | None):
    """While a guest runs its share of a --budget round: study.json's guest_round says when the round must end
    (by the host's clock, so the guest's boot comes out of it); gone after, so a --resume by hand has none."""
    state = read_state(study_dir)
    state.pop("guest_round", None)
    if within_s is not None:
        state["guest_round"] = {"specs": specs, "within_s": within_s, "ends_at": time.time() + within_s}
    write_state(study_dir, state)
    try:
        yield
    finally:
        state = read_state(study_dir)
        state.pop("guest_round", None)
        write_state(study_dir, state)


def guest_within(state: dict, only: list[str]) -> float | None:
    """The seconds the guest's share may take (guest_deadline), or None (no --budget, or another share); a guest
    clock behind the host's cannot buy more than the round was given."""
    at = state.get("guest_round") or {}
    if sorted(at.get("specs") or []) != sorted(only):
        return None
    return max(0.0, min(at["within_s"], at["ends_at"] - time.time()))
