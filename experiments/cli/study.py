"""`ccrig study list / run NAME / report DIR / keep DIR / compare A B [C ...]`: the seed studies
(experiments/studies/, experiments/run/study.py)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ccrig import jsondoc
from ccrig.errors import InputError, RunError
from ccrig.experiments.run.signals import EXIT_CODES, Interrupted, ignore as ignore_signals
from ccrig.experiments.cli.tables import console

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="print one JSON document on stdout")):
    """The studies: name, the paper, specs, claims, and what Linux cannot express."""
    from ccrig.experiments.run.study_file import find, load  # lazy: pydantic models of the claims
    rows = []
    for name in find():
        study, _ = load(name)
        rows.append({"name": name, "title": study.title, "seed": study.seed, "specs": [s.spec for s in study.specs],
                     "claims": len(study.claims), "absent": len(study.absent)})
    if as_json:
        jsondoc.emit({"studies": rows})
        return
    table = Table(title="studies (ccrig study run NAME [--quick])")
    for col in ("name", "the paper", "specs", "claims", "absent"):
        table.add_column(col, justify="right" if col in ("claims", "absent") else "left")
    for r in rows:
        table.add_row(r["name"], r["title"], str(len(r["specs"])), str(r["claims"]), str(r["absent"]))
    console.print(table)


def _specs(value: Optional[str]) -> list[str] | None:
    return [s.strip() for s in value.split(",") if s.strip()] if value else None


@app.command()
def run(name: str = typer.Argument(..., help="the study (ccrig study list), or a folder holding a study.yaml"),
        quick: bool = typer.Option(False, "--quick", help="every spec at its first sweep point, one repetition, "
                                   "the study's short duration, no reruns (but of a pair the path refused): "
                                   "checks the mechanics, never the claims"),
        out: Path = typer.Option(Path("results/studies"), "--out", help="folder that receives the study directory"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue this study directory: finished "
                                              "specs are kept, an unfinished run continues, and so does the "
                                              "--budget loop (its budget as recorded, or a new --budget total)"),
        specs: Optional[str] = typer.Option(None, "--specs", help="only these specs, comma-separated: a part of the study, "
                                            "judged by its own loop (the other specs' claims: not applicable)"),
        testbed: Optional[str] = typer.Option(None, "--testbed", help="run every spec on this testbed instead "
                                              "of its own (e.g. mininet)"),
        prometheus: str = typer.Option("auto", help="auto: start or reuse the local Prometheus server; off; or the "
                                       "URL of a server already scraping ccrig"),
        prometheus_dir: Path = typer.Option(Path("results/prometheus"), help="the local Prometheus server's folder"),
        progress: bool = typer.Option(True, help="show the live status: pairs, claims, budget left, time to go"),
        report: bool = typer.Option(True, help="write the claims table and the runs' reports at the end"),
        jobs: str = typer.Option("auto", "--jobs", envvar="CCRIG_JOBS",
                                 help="how many (point, repetition) pairs of a spec run side by "
                                 "side on this machine: a number, or auto (as ccrig run --jobs)"),
        budget: Optional[str] = typer.Option(None, "--budget", help="wall time for the study (900, 30m, 1h, "
                                             "1h30m): after the first pass, more repetitions where claims are "
                                             "undecided, look after look, until every claim is decided, the "
                                             "budget is spent or the last look (3) is taken; the error rate "
                                             "stays 5 % per claim over the looks; no pair starts, first pass "
                                             "included, that could not end within it"),
        fleet: Optional[Path] = typer.Option(None, "--fleet", help="deal every spec's pairs to the hosts of this "
                                             "Ansible inventory's group `fleet` (as ccrig run --fleet)"),
        by_kernel: bool = typer.Option(False, "--by-kernel", help="run the study on each kernel (with --fleet: "
                                       "its members grouped by kernel; else this machine's on netns and the vm "
                                       "testbed's) and write kernels.md: one column per kernel, a claim decided "
                                       "differently on two flagged"),
        seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**31 - 1,
                                           help="every spec's seed (the order of its pairs, a workload's random "
                                           "times) instead of the spec's own: a second run of a study with "
                                           "another (the kernel's random losses are never the same twice)")):
    """Run a study: all its specs (those that need the vm testbed in one guest), k0 repetitions of every point a
    claim reads (the study's k0, else 3; a point only a figure shows: its spec's own), then its claims table; with
    --budget, more repetitions where claims are undecided."""
    from ccrig.experiments.run.study import report as write_report, run as run_study  # lazy: the runner (numpy, scipy)
    from ccrig.experiments.run.engine import parse_jobs  # lazy: the runner (numpy, scipy)
    from ccrig.experiments.run.budget import parse_budget  # lazy: as above
    from ccrig.experiments.run.fleet import use_fleet  # lazy: as above
    from ccrig.experiments.run.study_state import guest_share  # lazy: as above
    use_fleet(fleet)
    if prometheus not in ("auto", "off") and not prometheus.startswith(("http://", "https://")):
        raise InputError(f"--prometheus: got {prometheus!r}; expected auto, off or a URL such as http://127.0.0.1:9090")
    say = lambda line: console.print(line, markup=False)
    options = dict(quick=quick, prometheus=prometheus, prometheus_root=prometheus_dir, progress=progress, say=say,
                   jobs=parse_jobs(jobs), budget=None if budget is None else parse_budget(budget))
    if by_kernel:
        return _by_kernel(name, out, seed, resume, specs, testbed, options)
    # the claims table is the whole study's or a part's; a guest's share of a study is reported by the whole
    report = report and not guest_share(_specs(specs), budget, resume is not None)
    try:
        study_dir = run_study(name, out, resume=resume, only=_specs(specs), testbed=testbed, seed=seed,
                              report=report, **options)
    except RunError as e:
        # a failed spec leaves the others' results: their claims are judged all the same (the failed spec's
        # claims are not applicable), then the failure is said
        if report and getattr(e, "study_dir", None) is not None:
            console.print(f"claims: {write_report(e.study_dir)}")
        raise
    except Interrupted as e:
        ignore_signals()   # everything is torn down; a late Ctrl-C must not make the exit a traceback
        sys.stderr.write(f"ccrig: interrupted ({e}); everything was torn down; the study directory keeps the "
                         f"finished specs (--resume it)\n")
        raise typer.Exit(EXIT_CODES.get(str(e), 130))
    if report:
        console.print(f"claims: {write_report(study_dir)}")
    console.print(f"study directory: {study_dir}")


def _by_kernel(name, out, seed, resume, specs, testbed, options) -> None:
    from ccrig.experiments.run import kernels  # lazy: the runner (numpy, scipy)
    from ccrig.experiments.run.runner import run_prefix  # lazy: as above
    from ccrig.experiments.run.study import report as write_report, run as run_study  # lazy: as above
    for flag, value in (("--resume", resume), ("--testbed", testbed)):
        if value is not None:
            raise InputError(f"--by-kernel: not with {flag}; expected the study on each kernel's own testbed, new "
                             f"(each kernel's study directory can be resumed or reported on its own)")
    if specs is not None and options["budget"] is not None:
        raise InputError("--budget: not with --specs; expected a whole study's run (the loop judges all its claims)")
    # --specs: a part of the study on each kernel (the vm's guest is slow); the other specs' claims are not applicable
    parent = kernels.run(name, out, seed, run_study, write_report, prefix=run_prefix(), only=_specs(specs),
                         **options)
    console.print((parent / "kernels.md").read_text(), markup=False)
    console.print(f"by kernel: {parent / 'kernels.md'}")


@app.command("report")
def report_(study_dir: Path = typer.Argument(..., help="a study directory (results/studies/...)"),
            runs: bool = typer.Option(True, help="also write each run's own report (tables and figures)")):
    """The claims table (claims.md, claims.json) and the figures for a study directory."""
    from ccrig.experiments.run.study import report as write_report  # lazy: the runner (numpy, scipy)
    path = write_report(study_dir, runs)
    console.print(f"claims: {path}")
    console.print(path.read_text().split("## Specs")[0], markup=False)


@app.command("keep")
def keep_(study_dir: Path = typer.Argument(..., help="a full run's study directory (results/studies/...)"),
          into: Optional[Path] = typer.Option(None, help="where to keep it (default: the study's own "
                                                         "runs/<YYYYMMDD-HHMM of its start>)")):
    """A full run's claims.json, study.json, claims.md and summary figures, kept beside its study to commit (never
    the raw archive; claims.md's links made true there). A --by-kernel directory is kept whole: kernels.md and each
    kernel's study."""
    from ccrig.experiments.report.study_keep import keep  # lazy: as the other commands, none of it at startup
    console.print(f"kept: {keep(study_dir, into)}")


@app.command("compare")
def compare_(runs: list[Path] = typer.Argument(..., help="two or more runs of one study: study directories, or "
                                                        "their claims.json"),
             json_out: bool = typer.Option(False, "--json", help="print the comparison as JSON")):
    """Runs of one study claim by claim: which verdicts agree, how many stay undecided, any decided without an
    interval over repetitions, which differ without contradiction (holds or fails beside no difference, the
    intervals sharing a difference within the margin). Three or more: every pair's agreement, each claim's
    verdict in every run, and the quantities whose run means differ beyond their repetitions' spread (a one-way
    ANOVA). Each claim's difference over the runs pooled (inverse variance, 95 % t interval): what all their
    repetitions read together, beside the runs' verdicts."""
    from ccrig.experiments.report import study_compare  # lazy: as above, only this command needs it
    if len(runs) < 2:
        raise InputError(f"RUNS: got {len(runs)} run; expected two or more study directories (or claims.json)")
    docs = [study_compare.load(r) for r in runs]
    if len(docs) == 2:
        doc, text = study_compare.compare(*docs), study_compare.markdown
    else:
        doc, text = study_compare.compare_many(docs, [_label(r) for r in runs]), study_compare.markdown_many
    if json_out:
        jsondoc.emit(doc)
    else:
        console.print(text(doc), markup=False)


def _label(run: Path) -> str:
    """A run's name in the table: its directory (runs/20261202-0700), the one holding it if given its claims.json."""
    run = Path(run)
    return (run.parent if run.name == "claims.json" else run).resolve().name
