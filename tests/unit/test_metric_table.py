"""The metric table (analysis/metric_table.py) is the one place the metrics are declared: every metric in it comes
out of every reader — a Prometheus series with its HELP text (served by the exporter over HTTP), a column of
intervals.csv (written and read back), a heading in the terminal's table — and no other module keeps a list of
its own (the source tree scanned)."""
from __future__ import annotations

import csv
import re
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from ccrig.analysis import metric_table
from ccrig.experiments.cli import tables
from ccrig.experiments.run.archive import RepetitionTables
from ccrig.experiments.telemetry.exporter import Exporter
from ccrig.experiments.telemetry.sinks import interval_samples, point_samples

ROOT = Path(__file__).resolve().parents[2]
# the four metrics whose hand-written lists had drifted apart; a file naming all four keeps a list of its own
WORDS = ("goodput_bps", "eee", "uar", "loss")
MOST_FILES = 3   # the table, the formulas' rows (analysis/intervals.py) and this test, which must name them


def python_files() -> list[Path]:
    """Every Python file of the repository: the packages, the tests, the studies (not the virtualenv)."""
    return [p for d in sorted(ROOT.iterdir()) if d.is_dir() and not d.name.startswith(".")
            and not d.name.endswith(".egg-info") for p in sorted(d.rglob("*.py"))]


def test_at_most_three_files_spell_out_the_metrics():
    spelled = [str(p.relative_to(ROOT)) for p in python_files()
               if all(re.search(rf"\b{w}\b", p.read_text(errors="replace")) for w in WORDS)]
    assert "analysis/metric_table.py" in spelled   # the scan finds what it looks for
    assert len(spelled) <= MOST_FILES, f"these files each list the metrics; read them from the table: {spelled}"


def values() -> tuple[dict, dict]:
    """A flow's row and the system's row with a distinct value for every metric of their scope."""
    flow = {m.name: 0.001 * (i + 1) for i, m in enumerate(metric_table.TABLE) if m.has("flow")}
    system = {m.name: 0.5 + 0.001 * (i + 1) for i, m in enumerate(metric_table.TABLE) if m.has("system")}
    return flow, system


FLOW = SimpleNamespace(index=0, label="cubic")   # what the archive and the sinks read of a flow


def test_every_metric_is_a_column_of_intervals_csv(tmp_path):
    flow, system = values()
    t = RepetitionTables(tmp_path)
    t.interval(1, 0.0, 1.0, [FLOW], [flow], system)
    t.close()
    with open(tmp_path / "intervals.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    by = {r["flow"]: r for r in rows}
    for m in metric_table.TABLE:
        assert m.column in rows[0], m.name
        for scope, who, row in (("flow", "0", flow), ("system", "all", system)):
            want = f"{row[m.name]:.6g}" if m.has(scope) else ""
            assert by[who][m.column] == want, (m.name, scope)


def scrape(exporter: Exporter) -> dict:
    """The exporter's page as a scraper other than Prometheus sees it: family name -> family."""
    with urllib.request.urlopen(f"http://{exporter.address}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_every_metric_is_a_prometheus_series_with_its_help():
    flow, system = values()
    exporter = Exporter()
    try:
        exporter.publish(interval_samples({"run": "ccmt"}, [FLOW], [flow], system, [], time.time()))
        families = scrape(exporter)
    finally:
        exporter.close()
    for m in metric_table.TABLE:
        assert m.has("flow") or m.has("system"), m.name
        for scope, row in (("flow", flow), ("system", system)):
            name = f"ccrig_{scope}_{m.series}"
            if not m.has(scope):
                assert name not in families, name
                continue
            fam = families.get(name)
            assert fam is not None, f"{m.name}: no series {name}"
            assert fam.documentation == m.help(scope) and m.help(scope), name
            assert [s.value for s in fam.samples] == [row[m.name] * m.factor], name


def test_every_summarised_metric_is_a_point_result():
    stat = {"mean": 2.0, "std": 1.0, "n": 3, "ci95": [1.0, 3.0]}
    point = {"system": {m: stat for m in metric_table.names("system")},
             "flows": [{"flow": 0, "cc": "cubic", **{m: stat for m in metric_table.names("flow")}}]}
    got = {(s.labels["scope"], s.labels["series"]) for s in point_samples({"run": "ccmt"}, point)}
    for m in metric_table.of(ci=True):
        for scope in ("flow", "system"):
            assert ((scope, f"ccrig_{scope}_{m.series}") in got) == m.has(scope), (m.name, scope)


def test_every_metric_has_a_heading_and_the_terminal_shows_its_own():
    headings = [m.heading for m in metric_table.TABLE]
    assert all(headings) and len(set(headings)) == len(headings)
    stat = {"mean": 0.25, "std": 0.0, "n": 4, "ci95": [0.2, 0.3], "ci": {"method": "batches"}}
    summary = {"experiment": "e", "run": "r", "kernel": "k", "intervals": 5, "interval_s": 1.0, "warmup": 1,
               "repetitions": 1, "points": [{"index": 0, "params": {}, "t_max_bps": 9e6, "fair_share_bps": 9e6,
                                             "system": {m: stat for m in metric_table.names("system")},
                                             "flows": [{"flow": 0, "cc": "cubic",
                                                        **{m: stat for m in metric_table.names("flow")}}]}]}
    with tables.console.capture() as out:
        tables.print_summary(summary)
    text = out.get()
    shown = [m for m in metric_table.TABLE if m.terminal]
    assert shown
    for m in shown:
        assert m.short_heading in text, m.name


# Prometheus' base units (a series says its unit in its name): the value's SI unit -> (name ends, factor)
BASE_UNITS = {"bit/s": ("_bytes_per_second", 1 / 8), "s": ("_seconds", 1), "segments": ("_segments", 1),
              "1": ("", 1)}


def test_every_series_is_in_prometheus_base_units():
    for m in metric_table.TABLE:
        assert m.unit in BASE_UNITS, f"{m.name}: unit {m.unit!r} has no Prometheus base unit here"
        ending, factor = BASE_UNITS[m.unit]
        assert m.series.endswith(ending) and m.factor == factor, m.name
