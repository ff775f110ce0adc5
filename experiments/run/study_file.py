"""A study's file, experiments/studies/<name>/study.yaml (experiments/studies/README.md is the format): its schema,
and finding and loading it with every error named by its field (experiments/run/study.py runs it).

    find()          every study: name -> folder
    load(name)      (Study, folder), validated: its specs' files exist, its claims read only its specs
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ccrig.analysis.claims import Claim, quantities
from ccrig.analysis.params import matches
from ccrig.errors import InputError

FOLDER = Path(__file__).resolve().parents[1] / "studies"   # experiments/studies


class SpecEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    answers: str
    quick: dict[str, Any] = {}     # this spec's own --quick settings, over the study's


class Absent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    what: str
    why: str
    nearest: str = ""


class Study(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    title: str
    seed: str = ""
    k0: int | None = Field(None, ge=1, le=100)   # the first pass's repetitions per point (None: budget.K0)
    # metrics whose values are adjusted for the random loss each repetition drew (analysis/samples.py)
    adjust_for_loss: list[str] = []
    quick: dict[str, Any] = {"duration": "4s"}
    specs: list[SpecEntry] = Field(min_length=1)
    claims: list[Claim] = []
    absent: list[Absent] = []

    @model_validator(mode="after")
    def _references(self):
        names = [s.spec for s in self.specs]
        ids = [c.id for c in self.claims]
        for what, seen in (("specs", names), ("claims", ids)):
            dup = next((x for x in seen if seen.count(x) > 1), None)
            if dup is not None:
                raise ValueError(f"{what}: {dup!r} appears twice; expected each once")
        for i, c in enumerate(self.claims):
            for q in quantities(c.test):
                if q.spec not in names:
                    raise ValueError(f"claims[{i}] ({c.id}): spec {q.spec!r} is not among the study's specs "
                                     f"({', '.join(names)})")
                problem = q.problem()
                if problem:
                    raise ValueError(f"claims[{i}] ({c.id}): metric {q.metric!r}: {problem}")
        read = sorted({q.metric for c in self.claims for q in quantities(c.test)})
        for m in self.adjust_for_loss:
            if m not in read:
                raise ValueError(f"adjust_for_loss: {m!r} is no metric a claim reads; expected some of "
                                 f"{', '.join(read) or 'none (no claims)'}")
        return self

    def reads(self, points: dict[str, dict[int, dict]]) -> set[tuple[str, int]]:
        """The points some claim reads, of points (spec -> {index: the point's swept parameters}): a quantity
        reads every point of its spec its `at` matches (a trend's `at` leaves out the axis: its whole series)."""
        return {(q.spec, i) for c in self.claims for q in quantities(c.test)
                for i, params in points.get(q.spec, {}).items() if matches(params, q.at)}


def find() -> dict[str, Path]:
    """Every study: its name -> its folder (a folder of experiments/studies/ holding study.yaml)."""
    return {p.parent.name: p.parent for p in sorted(FOLDER.glob("*/study.yaml"))}


def load(name: str) -> tuple[Study, Path]:
    """A study by its name, or by the path of a folder holding a study.yaml (a researcher's own study)."""
    folders = find()
    if Path(name, "study.yaml").is_file():
        path = Path(name).resolve() / "study.yaml"
        name = path.parent.name
    elif name in folders:
        path = folders[name] / "study.yaml"
    else:
        raise InputError(f"NAME: got {name!r}; expected one of {', '.join(folders) or '(none found)'} "
                         f"(ccrig study list), or a folder holding a study.yaml")
    try:
        raw = yaml.safe_load(path.read_text())
        study = Study.model_validate(raw)
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-")) or "(top level)"
        raise InputError(f"{path}: {where}: {err['msg'].removeprefix('Value error, ')}") from None
    if study.name != name:
        raise InputError(f"{path}: name: got {study.name!r}; expected the folder's name {name!r}")
    for s in study.specs:
        if not spec_path(path.parent, s.spec).is_file():
            raise InputError(f"{path}: specs: {s.spec!r} has no file {spec_path(path.parent, s.spec)}")
    return study, path.parent


def spec_path(folder: Path, spec: str) -> Path:
    return folder / "specs" / f"{spec}.yaml"


