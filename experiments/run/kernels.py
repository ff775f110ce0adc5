"""A study on each kernel group (`ccrig study run NAME --by-kernel`): does a verdict hold on another kernel?

    run(name, out_root, seed, run_study, write_report, say, **options) -> the parent directory

Kernel groups: with --fleet, its members grouped by their kernel release (each group dealt the study as a fleet of
its own); without, this machine's kernel (the netns testbed) and the vm testbed's distribution kernel (its
default, the newest installed). Each group's study is a study directory of its own under the parent, run with
the same seed; a group whose kernel cannot run the study (preflight: a feature it lacks) is a column saying why,
and the others still run. The parent holds kernels.json and kernels.md (report/study_kernels.py): one column per
kernel, a claim decided differently on two kernels flagged.
"""
from __future__ import annotations

import json
import os
import platform
import random
import time
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.topologies import testbeds
from ccrig.experiments.report import study_kernels
from ccrig.experiments.run.fleet import FLEET_ENV, MEMBERS_ENV, Fleet


def groups(prefix: str) -> list[dict]:
    """The kernel groups this study runs on, each {"label", "kernel", "testbed", "members"}."""
    inventory = os.environ.get(FLEET_ENV)
    if not inventory:   # the testbed of this machine's kernel that runs pairs side by side, and each that runs
        beds = testbeds.available()   # a whole run elsewhere (on a kernel of its own: the vm's)
        here = [k for k, b in beds.items() if not b.remote and not b.elsewhere and b.side_by_side][:1]
        return [{"label": k, "kernel": None if beds[k].elsewhere else platform.release(), "testbed": k,
                 "members": None} for k in here + [k for k, b in beds.items() if b.elsewhere]]
    fleet = Fleet(Path(inventory), prefix, Commands(None))
    fleet.check(None, agree=False)   # their facts only: each group's own check runs with its study
    by: dict[str, list[str]] = {}
    for name, m in fleet.members.items():
        by.setdefault(m.facts["kernel"], []).append(name)
    return [{"label": f"fleet {k}", "kernel": k, "testbed": None, "members": names} for k, names in sorted(by.items())]


def run(name: str, out_root: Path, seed: int | None, run_study, write_report, say, prefix: str,
        only: list[str] | None = None, **options) -> Path:
    """Runs the study once per kernel group (run_study: study.run; write_report: study.report) into one parent
    directory; returns it, kernels.md written. With `only`, those specs on each kernel (a part of the study)."""
    kinds = groups(prefix)
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed   # one seed for every kernel
    parent = Path(out_root) / f"{Path(name).name}-bykernel-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    parent.mkdir(parents=True)
    columns = []
    for g in kinds:
        col = {k: g[k] for k in ("label", "kernel", "testbed")}
        say(f"--by-kernel: {g['label']} ({g['kernel'] or 'its default kernel'})")
        if g["members"]:
            os.environ[MEMBERS_ENV] = ",".join(g["members"])
        study_dir = None
        try:
            study_dir = run_study(name, parent / g["label"].replace(" ", "-"), testbed=g["testbed"], seed=seed,
                                  only=only, **options)
        except InputError as e:   # this kernel lacks what the study needs: said in its column, the others run
            col["error"] = str(e)
        except RunError as e:   # some specs failed: the others' claims are judged all the same
            col["error"], study_dir = str(e), getattr(e, "study_dir", None)
        finally:
            os.environ.pop(MEMBERS_ENV, None)
        if study_dir is not None:
            write_report(study_dir)
            col["study_dir"] = os.path.relpath(study_dir, parent)
            col["claims"] = json.loads((study_dir / "claims.json").read_text())
            kernels = sorted({json.loads(s.read_text()).get("kernel") for s in study_dir.glob("runs/*/summary.json")})
            col["kernel"] = ", ".join(k for k in kernels if k) or col["kernel"]
        columns.append(col)
    doc = {"study": Path(name).name, "seed": seed, "specs": only, **study_kernels.table(columns)}
    (parent / "kernels.json").write_text(json.dumps(doc, indent=1) + "\n")
    (parent / "kernels.md").write_text(study_kernels.markdown(doc, Path(name).name))
    return parent
