"""`--json` on the commands that print a table and need no root (`ccrig model pause|gaimd`, `ccrig compare`): stdout
is one JSON document, and it carries the numbers the table shows (the table's rounding of the JSON's values).
preflight, cc list and run: tests/host/test_json_output.py."""
from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from ccrig.analysis import model_cli
from ccrig.experiments.cli import app as cli

runner = CliRunner()


def table_rows(output: str) -> list[list[str]]:
    """The cells of a rich table's body rows."""
    return [[c.strip() for c in line.strip("│").split("│")] for line in output.splitlines() if line.startswith("│")]


def test_model_pause_json_holds_the_table():
    args = ["pause", "--lam", "25,1", "--t1", "14,15", "--rtt", "0.5,1"]
    table = runner.invoke(model_cli.app, args)
    doc = runner.invoke(model_cli.app, [*args, "--json"])
    assert table.exit_code == 0 and doc.exit_code == 0, table.output + doc.output
    d = json.loads(doc.output)
    assert d["model"] == "pause" and d["parameters"]["lam"] == [25.0, 1.0] and len(d["rows"]) == 4
    for cells, row in zip(table_rows(table.output), d["rows"]):
        expected = [str(row["T1"]), str(row["T2"]), model_cli._fmt(row["rtt_s"]),
                    f"{row['recurrent_states']}/{row['states']}",
                    *[model_cli._fmt(row[key]) for _, key in model_cli.MEASURE_COLUMNS], f"{row['gain_percent']:+.3f}"]
        assert cells == expected


def test_model_pause_figure_json_holds_the_curves():
    table = runner.invoke(model_cli.app, ["pause", "--figure", "fig5"])
    d = json.loads(runner.invoke(model_cli.app, ["pause", "--figure", "fig5", "--json"]).output)
    fig = d["figures"][0]
    assert fig["figure"] == "fig5" and fig["x"] == "T2"
    gains = fig["curves"]["T1=15"]["gain_percent"]
    assert [c[1] for c in table_rows(table.output)] == [f"{g:+.3f}" for g in gains]
    assert [int(c[0]) for c in table_rows(table.output)] == fig["values"]


def test_model_gaimd_json_holds_the_table():
    args = ["gaimd", "--p", "0.01,0.02", "--rtt", "0.1", "--beta", "0.875", "--friendly"]
    table = runner.invoke(model_cli.app, args)
    d = json.loads(runner.invoke(model_cli.app, [*args, "--json"]).output)
    assert d["model"] == "gaimd" and d["parameters"]["friendly"] is True and len(d["rows"]) == 2
    f = model_cli._fmt
    for cells, r in zip(table_rows(table.output), d["rows"]):
        assert cells == [f(r["p"]), f(r["rtt_s"]), f(r["alpha"]), f(r["beta"]), f(r["gaimd_pps"]),
                         f(r["gaimd_bps"] / 1e6), f(r["padhye_pps"]), f(r["padhye_bps"] / 1e6), f(r["mathis_pps"]),
                         f(r["mathis_bps"] / 1e6)]


SPEC = {"name": "cmp", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit"}},
        "flows": [{"cc": "reno"}, {"count": 2, "cc": "cubic"}], "duration": "30s"}


def run_dir(tmp_path, name, goodputs):
    d = tmp_path / name
    d.mkdir()
    (d / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    flows = [{"flow": i, "cc": "x", "goodput_bps": {"mean": g}} for i, g in enumerate(goodputs)]
    (d / "summary.json").write_text(json.dumps(
        {"points": [{"index": 0, "system": {"goodput_bps": {"mean": sum(goodputs)}}, "flows": flows}]}))
    return d


def test_compare_json_holds_the_table(tmp_path):
    a, b = run_dir(tmp_path, "a", [1e6, 2e6, 3e6]), run_dir(tmp_path, "b", [2e6, 2e6, 2e6])
    table = runner.invoke(cli.app, ["compare", str(a), str(b)])
    doc = runner.invoke(cli.app, ["compare", str(a), str(b), "--json"])
    assert table.exit_code == 0 and doc.exit_code == 0, table.output + doc.output
    d = json.loads(doc.output)
    assert d["run_a"] == str(a) and d["run_b"] == str(b) and d["outside"] == []
    cells = table_rows(table.output)
    assert len(cells) == len(d["rows"]) == 3
    for c, r in zip(cells, d["rows"]):
        assert c[1] == r["class"] and c[3] == f"{r['a_bps'] / 1e6:.3f}" and c[4] == f"{r['b_bps'] / 1e6:.3f}"
        assert c[5] == f"{r['ratio']:.3f}"
    assert {r["class"]: r["ratio"] for r in d["rows"]}["reno, bulk"] == 2.0


def test_compare_json_beyond_tolerance_still_prints_the_document_and_fails(tmp_path):
    a, b = run_dir(tmp_path, "a", [1e6, 2e6, 3e6]), run_dir(tmp_path, "b", [2e6, 2e6, 2e6])
    r = runner.invoke(cli.app, ["compare", str(a), str(b), "--json", "--tolerance", "0.1"])
    assert r.exit_code != 0 and "differ by more than 0.1" in str(r.exception)
    d = json.loads(r.stdout)
    assert [0, "reno, bulk"] in d["outside"]
