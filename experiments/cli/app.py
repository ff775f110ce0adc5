"""The `ccrig` command line: the one entry point (docs/architecture.md, "Command line")."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ccrig import jsondoc
from ccrig.analysis import model_cli
from ccrig.commands import Commands
from ccrig.errors import CcrigError, InputError, RunError
from ccrig.tcp_modules import cli as cc_cli
from ccrig.topologies import testbeds
from ccrig.experiments import spec as specmod
from ccrig.experiments.provision import playbooks as provision
from ccrig.experiments.cli import study as study_cli
from ccrig.experiments.telemetry.backfill import backfill
from ccrig.experiments.run.cleanup import clean_all
from ccrig.experiments.telemetry.prometheus_server import PrometheusServer
from ccrig.experiments.run.signals import EXIT_CODES, Interrupted, ignore as ignore_signals, raise_on_interrupt, trapped
from ccrig.experiments.cli.tables import console, show_summary

# The commands import the runner, the spec and the report when they are called, not here: `ccrig --help` and a
# usage error then answer in a fraction of a second instead of the second numpy, scipy and matplotlib take.

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="ccrig: congestion-control experiments on real Linux kernels. "
                       "A spec (YAML) describes topology, queues, congestion control and traffic; "
                       "`ccrig run SPEC` runs it, archives it and exports it to Prometheus.")
JSON_HELP = "print one JSON document on stdout instead of the table (everything else goes to stderr)"


@contextlib.contextmanager
def json_stdout(as_json: bool):
    """With --json, stdout is the JSON document's alone: while the command works, whatever else it (or the
    runner, a testbed, a warning) prints goes to stderr; yields the stream the document goes to."""
    if not as_json:
        yield sys.stdout
        return
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        yield out


@app.command()
def run(spec: Path = typer.Argument(..., help="the experiment spec (YAML)"),
        set_: list[str] = typer.Option([], "--set", help="override a spec field: path=value, e.g. "
                                       "topology.bottleneck.rate=20mbit (repeatable)"),
        out: Path = typer.Option(Path("results/runs"), "--out", help="folder that receives the run directory"),
        prometheus: str = typer.Option("auto", help="auto: start or reuse the local Prometheus server; off; "
                                       "or the URL of a server already scraping ccrig"),
        prometheus_dir: Path = typer.Option(Path("results/prometheus"), help="the local Prometheus server's "
                                            "folder (config, storage, log)"),
        inventory: Optional[Path] = typer.Option(None, help="the hosts testbed's Ansible inventory (mapping "
                                                 "topology nodes to hosts; default $CCRIG_INVENTORY)"),
        kernel: Optional[str] = typer.Option(None, help="the vm testbed's guest kernel: a release such as "
                                             "6.1.0-56-amd64 or an image path (default: the newest installed)"),
        progress: bool = typer.Option(True, help="show a progress bar"),
        as_json: bool = typer.Option(False, "--json", help="print the run's summary.json document on stdout "
                                     "instead of the table (the run directory and everything else on stderr)"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue this run directory (interrupted "
                                              "or killed): run only the (point, repetition) pairs not complete "
                                              "in it; SPEC and --set must be the ones it was run with"),
        sigma: Optional[float] = typer.Option(None, "--sigma", help="confidence intervals of ±SIGMA standard "
                                              "deviations of a normal, e.g. 3 for Keshav's 3σ (0.9973); the "
                                              "same as --set ci=LEVEL"),
        jobs: str = typer.Option("auto", "--jobs", envvar="CCRIG_JOBS",
                                 help="how many (point, repetition) pairs run side by side on "
                                 "this machine, each under names of its own: a number, or auto (pairs admitted "
                                 "while their packet rates fit this machine's capacity, measured once and cached in "
                                 "~/.cache/ccrig/calibration; netns only, other testbeds run one at a time). A pair "
                                 "spoiled beside others runs again alone. A vm guest sets CCRIG_JOBS=1"),
        fleet: Optional[Path] = typer.Option(None, "--fleet", help="deal the pairs to the hosts of this Ansible "
                                             "inventory's group `fleet` (each runs its share on its own kernel, "
                                             "its --jobs the host's ccrig_jobs; see README, The fleet)"),
        pairs: Optional[str] = typer.Option(None, "--pairs", hidden=True, help="only these pairs, P:R[:variant],... "
                                            "in this order (a fleet member's batch)"),
        prefix: Optional[str] = typer.Option(None, "--prefix", hidden=True, help="the name prefix of everything "
                                             "the run makes (a fleet member's: ccrig-PID-mK)"),
        reruns: Optional[int] = typer.Option(None, "--reruns", hidden=True, min=0, max=5, help="how often a spoiled "
                                             "repetition runs again (a fleet member's: 0, its controller judges)")):
    """Run an experiment: every sweep point and repetition; print a summary and the run directory.

    testbed auto runs on netns when this kernel has everything the spec needs, else in a vm."""
    with json_stdout(as_json) as stream:
        _run(spec, set_, out, prometheus, prometheus_dir, inventory, kernel, progress, stream if as_json else None,
             resume, sigma, jobs, fleet, pairs, prefix, reruns)


def _run(spec, set_, out, prometheus, prometheus_dir, inventory, kernel, progress, json_out, resume=None,
         sigma=None, jobs: int | str = 1, fleet=None, pairs=None, prefix=None, reruns=None) -> None:
    if kernel is not None:
        set_ = [*set_, f"vm.kernel={kernel}"]
    if sigma is not None:   # the level of ±sigma of a normal, as the spec's `ci`
        if not 0.7 <= sigma <= 5:
            raise InputError(f"--sigma: got {sigma:g}; expected a number of standard deviations from 0.7 to 5, "
                             f"e.g. 3 (Keshav's 3σ)")
        from ccrig.analysis.stats import sigma_level  # lazy: numpy and scipy
        set_ = [*set_, f"ci={sigma_level(sigma)!r}"]
    _use_inventory(inventory)
    raw, exp = specmod.load(spec, set_)
    if prometheus not in ("auto", "off") and not prometheus.startswith(("http://", "https://")):
        raise InputError(f"--prometheus: got {prometheus!r}; expected auto, off or a URL such as http://127.0.0.1:9090")
    # the runner's modules after the spec's check: a third of a refused spec's time
    from ccrig.experiments.run.runner import Options, Runner, run_prefix  # lazy: numpy and scipy
    from ccrig.experiments.run.engine import parse_jobs  # lazy: numpy and scipy
    from ccrig.experiments.run.fleet import parse_pairs, use_fleet  # lazy: the runner's
    jobs = parse_jobs(str(jobs))
    use_fleet(fleet)
    pairs = parse_pairs(pairs) if pairs is not None else None
    testbed = choose_testbed(spec, raw, exp)
    if testbeds.get(testbed).elsewhere and resume is not None:
        raise InputError(f"--resume: not on the {testbed} testbed (the run happens inside it); run the spec "
                         f"again, or on a testbed of this machine")
    if testbeds.get(testbed).elsewhere and (fleet is not None or pairs is not None):
        raise InputError(f"--{'fleet' if fleet is not None else 'pairs'}: not on the {testbed} testbed (the whole "
                         f"run happens inside it); give the spec a testbed the members run pairs on (netns)")
    if testbeds.get(testbed).elsewhere:
        return run_elsewhere(testbeds.get(testbed), spec, set_, exp, out, prometheus, prometheus_dir, json_out)
    if testbed != exp.testbed:
        raw, exp = specmod.load(spec, [*set_, f"testbed={testbed}"])
    runner = Runner(spec, raw, exp, Options(out_root=out, prometheus=prometheus, prometheus_root=prometheus_dir,
                                               progress=progress, resume=resume, jobs=jobs, pairs=pairs,
                                               prefix=prefix or run_prefix(),
                                               **({} if reruns is None else {"reruns": reruns})))
    try:
        result = runner.run()
        ignore_signals()   # everything is torn down; a late Ctrl-C must not kill the exit mid-way
    except Interrupted as e:
        ignore_signals()   # torn down; more Ctrl-C must not make the exit a traceback
        path = runner.archive.path if runner.archive is not None else None
        sys.stderr.write(f"ccrig: interrupted ({e}); everything was torn down"
                         + (f"; finished points are in {path}" if path else "") + "\n")
        raise typer.Exit(EXIT_CODES.get(str(e), 130))   # 143 after SIGTERM
    except CcrigError as e:
        path = runner.archive.path if runner.archive is not None else None
        if path is not None:
            e.args = (f"{e}; everything was torn down; finished points are in {path}",)
        raise
    show_summary(result.summary, json_out)
    console.print(f"run directory: {result.path}")
    if result.prometheus_url:
        console.print(f"Prometheus: {result.prometheus_url}  e.g. "
                      f"ccrig_flow_goodput_bytes_per_second{{run=\"{result.summary['run']}\"}}")
    if result.summary.get("failed"):   # the run went on past failed repetitions; the exit code says so
        raise RunError(f"{result.summary['failed']} repetition(s) failed (their reasons are in "
                       f"{result.path / 'summary.json'})")


def choose_testbed(spec: Path, raw: dict, exp) -> str:
    """`auto`: netns when the running kernel has every feature the spec needs, else vm (and say why)."""
    if exp.testbed != "auto":
        return exp.testbed
    from ccrig.experiments.run.preflight import auto_testbed  # lazy: numpy and scipy
    from ccrig.experiments.run.runner import run_prefix  # lazy: numpy and scipy
    testbed, why = auto_testbed(specmod.points(raw, exp, str(spec)), run_prefix())
    console.print(f"testbed auto: {testbed}, {why}")
    return testbed


def run_elsewhere(bed, spec: Path, set_: list[str], exp, out: Path, prometheus: str, prometheus_dir: Path,
                  json_out=None) -> None:
    """A testbed that runs the whole spec elsewhere (vm: the same `ccrig run` on netns inside a distribution
    kernel under virtme-ng): the run directory lands in OUT here, and its samples are backfilled into this
    machine's Prometheus."""
    import json
    from ccrig.experiments.run.runner import run_prefix  # lazy: numpy and scipy
    from ccrig.experiments.run.collectors import native_sampler
    missing = [n for n in bed.needs(exp) if not n.ok]
    if missing:
        raise InputError(f"preflight ({bed.kind} testbed): " + "; ".join(n.problem() for n in missing))
    if exp.queue_monitor:   # the guest's file system is this machine's, read-only: its monitor is built here
        from ccrig.qdiscs import sojourn  # lazy: only runs that watch their queues
        sojourn.build(Commands(None))
    native_sampler(Commands(None))   # and the C sampler (the guest finds both in this machine's cache)
    # trapped: a second Ctrl-C or SIGTERM while run_in_guest stops the guest is only said, not raised into it (a
    # guest left running its run without us ran on for minutes, 2026-12-07)
    try:
        with trapped():
            r = bed.run_spec(spec, set_, exp, out, name=run_prefix())
    except Interrupted as e:
        ignore_signals()
        sys.stderr.write(f"ccrig: interrupted ({e}); the guest was stopped; what it finished is in {out}\n")
        raise typer.Exit(EXIT_CODES.get(str(e), 130)) from None
    summary = json.loads((r.run_dir / "summary.json").read_text())
    if summary["points"] or json_out is not None:
        show_summary(summary, json_out)
    console.print(f"run directory: {r.run_dir}")
    if prometheus == "auto":
        server = PrometheusServer(prometheus_dir)
        url = server.ensure(exp.interval)
        backfill(r.run_dir, server.root / "data")
        console.print(f"Prometheus: {url}  (the backfilled series are queryable within about a minute) e.g. "
                      f"ccrig_flow_goodput_bytes_per_second{{run=\"{r.run_dir.name}\"}}")
    if r.status != 0:
        raise typer.Exit(r.status)


# every CI printed says how it was made (summary.json's `ci`: method, n, n_eff, batch length)
def _use_inventory(inventory: Optional[Path]) -> None:
    """--inventory: the hosts testbed's inventory for this process (as $CCRIG_INVENTORY would name it)."""
    if inventory is None:
        return
    if not inventory.is_file():
        raise InputError(f"--inventory: got {str(inventory)!r}; expected an Ansible inventory file "
                         f"(see ansible/inventories/)")
    os.environ["CCRIG_INVENTORY"] = str(inventory.resolve())


@app.command("member-facts", hidden=True)
def member_facts():
    """What this machine is as a fleet member (JSON): kernel, CPUs, ccrig's revision, the laws' sources."""
    from ccrig.experiments.run.members import facts  # lazy: nothing else
    print(jsondoc.dumps(facts()))


@app.command()
def preflight(spec: Path = typer.Argument(..., help="the experiment spec (YAML)"),
              set_: list[str] = typer.Option([], "--set", help="override a spec field: path=value"),
              inventory: Optional[Path] = typer.Option(None, help="the hosts testbed's Ansible inventory (default "
                                                       "$CCRIG_INVENTORY): its hosts are checked over SSH"),
              as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Say what the spec needs and whether this machine has it (on the hosts testbed: each host, over SSH,
    changing nothing), and how to get what is missing. Exit 2 when something is missing."""
    from ccrig.experiments.run.preflight import needs  # lazy: numpy and scipy
    from ccrig.experiments.run.runner import run_prefix  # lazy: numpy and scipy
    _use_inventory(inventory)
    raw, exp = specmod.load(spec, set_)
    with json_stdout(as_json) as out:
        result = needs(specmod.points(raw, exp, str(spec)), Commands(None), run_prefix())
    if as_json:
        jsondoc.emit({"spec": str(spec), "testbed": exp.testbed, "ok": all(n.ok for n in result),
                      "needs": [{"feature": n.feature, "needed_by": n.needed_by, "ok": n.ok,
                                 "how": "" if n.ok else n.how} for n in result]}, out)
    else:
        t = Table(title=f"preflight: {spec}")
        for c in ("feature", "needed by", "here", "how to get it"):
            t.add_column(c)
        for n in result:
            t.add_row(n.feature, n.needed_by, "yes" if n.ok else "[red]NO[/]", "" if n.ok else n.how)
        console.print(t)
    missing = [n for n in result if not n.ok]
    if missing:
        raise InputError(f"preflight: {len(missing)} missing: " + "; ".join(n.problem() for n in missing))


@app.command()
def clean(prefix: str = typer.Option("ccrig-", help="remove only what carries this name prefix"),
          prometheus: bool = typer.Option(False, "--prometheus", help="also stop the local Prometheus server"),
          inventory: Optional[Path] = typer.Option(None, "--inventory", "-i", help="also clean the experiment "
                                                   "hosts of this Ansible inventory over SSH")):
    """Remove everything ccrig may have left: namespaces (and their processes, veths and qdiscs; processes
    started into a namespace that has lost its name too),
    congestion-control variants, stale Prometheus targets, SSH connections of hosts runs, vm guests of killed
    runs and their command files; with -i, on the
    inventory's hosts too: processes and directories of hosts runs, their congestion-control variants, the
    settings each run recorded in its undo.sh there (addresses, routes, qdiscs, MTU, offloads, forwarding,
    PAUSE), and any experiment addresses, routes and root qdiscs still on the mapped interfaces."""
    for line in clean_all(prefix, stop_prometheus=prometheus, inventory=inventory):
        console.print(line)


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a run directory (results/runs/...)"),
           out: Optional[Path] = typer.Option(None, help="where to write the report (default: RUN_DIR/report)"),
           repetition: int = typer.Option(0, help="the repetition whose time series are plotted")):
    """Tables and plots (Markdown + HTML + PNG/SVG) for a run directory."""
    if not (run_dir / "summary.json").is_file():
        raise InputError(f"RUN_DIR: got {str(run_dir)!r}; expected a run directory holding summary.json")
    from ccrig.experiments.report import report as make_report  # lazy: matplotlib
    path = make_report(run_dir, out, repetition)
    console.print(f"report: {path}")


@app.command()
def compare(run_a: Path = typer.Argument(..., help="the reference run directory"),
            run_b: Path = typer.Argument(..., help="the run to compare with it (same spec, e.g. another testbed)"),
            tolerance: Optional[float] = typer.Option(
                None, help="exit 1 if a class of alike flows or the system differs by more than this fraction"),
            as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Goodput of two runs of one spec side by side, flows alike (same cc, workload, start) pooled, each ratio
    with its confidence interval where the runs' repetitions (or batch means within a run) give one, and the
    method that made it."""
    from ccrig.analysis.compare import outside  # lazy: numpy and scipy
    from ccrig.experiments.cli.compare import compare as compare_runs  # lazy: numpy and scipy
    if tolerance is not None and not 0 < tolerance < 1:
        raise InputError(f"--tolerance: got {tolerance!r}; expected a fraction between 0 and 1, e.g. 0.1")
    rows = compare_runs(run_a, run_b)
    bad = outside(rows, tolerance) if tolerance is not None else []
    if as_json:
        jsondoc.emit({"run_a": str(run_a), "run_b": str(run_b), "metric": "goodput_bps", "rows": rows,
                      "tolerance": tolerance, "outside": [[r["point"], r["class"]] for r in bad]})
    else:
        _compare_table(run_a, run_b, rows)
    if bad:
        raise RunError(f"compare: {len(bad)} of {len(rows)} rows differ by more than {tolerance:g}: "
                       + "; ".join(f"point {r['point']} {r['class']}: B/A {r['ratio']}" for r in bad))
    if tolerance is not None and not as_json:
        console.print(f"every row within {tolerance:g} of RUN_A")


def _compare_table(run_a: Path, run_b: Path, rows: list[dict]) -> None:
    table = Table(title=f"{run_b.name} against {run_a.name} (goodput, Mbit/s)")
    level = next((r.get("ci_level") for r in rows if r.get("ci_level")), 0.95)
    for col in ("point", "flows alike", "flows", "A", "B", "B/A", f"{level * 100:.4g} % CI of B/A", "CI method"):
        table.add_column(col, justify="left" if col in ("flows alike", "CI method") else "right")
    for r in rows:
        ci = r["ratio_ci95"]
        table.add_row(str(r["point"]), r["class"], ",".join(map(str, r["flows"])),
                      *[("–" if v is None else f"{v / 1e6:.3f}") for v in (r["a_bps"], r["b_bps"])],
                      "–" if r["ratio"] is None else f"{r['ratio']:.3f}",
                      "–" if ci is None else f"{ci[0]:.3f} .. {ci[1]:.3f}",
                      # how the interval was made (the reason for none is in --json's ci_reason)
                      (r.get("ci_method") or "").removeprefix("delta method over ") if ci is not None else "none")
    console.print(table)
    console.print("CI method: the delta method on A's and B's own intervals, each over repetitions (runs) or by "
                  "batch means within a run (batches); none: a mean without an interval (--json says why)",
                  markup=False)


# sub-command groups live with their domain
app.add_typer(cc_cli.app, name="cc", help="Congestion-control laws: list what the kernel offers, load or unload a variant.")
app.add_typer(model_cli.app, name="model", help="Analytical models: the Markov PAUSE model and the throughput equations.")
app.add_typer(provision.app, name="provision", help="Provision hosts with Ansible.")
app.add_typer(study_cli.app, name="study", help="The seed studies: list them, run one (--quick: mechanics only), "
              "report its claims table.")


def _usage_error(e: Exception) -> int | None:
    """A command-line mistake (missing argument, unknown option or command): one line naming it and the usage
    line, exit 2. Typer bundles its own click, so its errors are recognised by shape, not by click's class."""
    if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
        return None
    if type(e).__name__ == "NoArgsIsHelpError":   # `ccrig` or `ccrig model` alone: the help is the answer
        sys.stderr.write(e.format_message() + "\n")
        return 2
    ctx = getattr(e, "ctx", None)
    usage = ctx.get_usage().strip() if ctx is not None else "Usage: ccrig [OPTIONS] COMMAND [ARGS]..."
    sys.stderr.write(f"ccrig: error: {e.format_message()}\n{usage}\n")
    code = getattr(e, "exit_code", 2)
    return 2 if code in (None, 1) else code


def main() -> None:
    # CCRIG_DEBUG=1 shows the traceback of an unexpected failure; otherwise every failure is one line
    debug = os.environ.get("CCRIG_DEBUG") == "1"
    command = typer.main.get_command(app)
    raise_on_interrupt()
    try:
        rc = command.main(args=sys.argv[1:], prog_name="ccrig", standalone_mode=False)
    except Interrupted as e:   # before or after a run (a run says more, and exits through typer.Exit)
        sys.stderr.write("ccrig: interrupted\n")
        sys.exit(EXIT_CODES.get(str(e), 130))
    except CcrigError as e:
        # one line, never wrapped: the message is the manual
        sys.stderr.write(f"ccrig: error: {e}\n")
        sys.exit(e.exit_code)
    except (typer.Exit, SystemExit) as e:
        sys.exit(getattr(e, "exit_code", getattr(e, "code", 0)))
    except KeyboardInterrupt:
        sys.stderr.write("ccrig: interrupted\n")
        sys.exit(130)
    except Exception as e:
        if type(e).__name__ == "Abort":
            sys.stderr.write("ccrig: interrupted\n")
            sys.exit(130)
        code = _usage_error(e)
        if code is not None:
            sys.exit(code)
        if debug:
            raise
        sys.stderr.write(f"ccrig: internal error: {type(e).__name__}: {e} (CCRIG_DEBUG=1 shows where)\n")
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)
