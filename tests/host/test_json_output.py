"""`--json` on the commands that need root or the running kernel (`ccrig preflight`, `ccrig cc list`, `ccrig run`):
stdout is one JSON document carrying what the table shows. model and compare: tests/unit/test_json_output.py."""
from __future__ import annotations

import json
import subprocess

from conftest import CCRIG, ROOT, dumbbell

DEFAULT = ROOT / "experiments/specs/default.yaml"


def cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([*CCRIG, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def table_rows(output: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│").split("│")] for line in output.splitlines() if line.startswith("│")]


def test_preflight_json_holds_the_table():
    table, doc = cli("preflight", str(DEFAULT)), cli("preflight", str(DEFAULT), "--json")
    assert table.returncode == doc.returncode == 0, table.stderr + doc.stderr
    d = json.loads(doc.stdout)
    assert d["spec"] == str(DEFAULT) and d["ok"] is True and d["testbed"] == "netns"
    rows = [r for r in table_rows(table.stdout) if r[0]]   # a wrapped cell continues on a row with no feature
    assert [r[0] for r in rows] == [n["feature"][:len(r[0])] for r, n in zip(rows, d["needs"])]
    assert len(rows) == len(d["needs"]) and all(r[2] == "yes" for r in rows) and all(n["ok"] for n in d["needs"])


def test_preflight_json_names_what_is_missing_and_exits_2():
    p = cli("preflight", str(DEFAULT), "--json", "--set", "flows=[{cc: nosuch_cc}]")   # a law no kernel offers
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    d = json.loads(p.stdout)
    missing = [n for n in d["needs"] if not n["ok"]]
    assert d["ok"] is False and missing and "nosuch_cc" in missing[0]["how"]
    assert "nosuch_cc" in p.stderr


def test_preflight_of_the_vm_testbed_asks_nothing_of_this_kernels_disciplines_or_laws():
    # study 001's spec: 500 ms of delay (netem in a distribution kernel, absent from some) and BPF-or-module laws;
    # the guest brings its own kernel, and its run's own preflight checks that kernel's
    spec = ROOT / "experiments/studies/alphabeta/specs/per_10mbit.yaml"
    p = cli("preflight", str(spec), "--json", "--set", "testbed=vm")
    d = json.loads(p.stdout)
    assert p.returncode == 0 and d["ok"] is True, p.stderr + p.stdout
    features = [n["feature"] for n in d["needs"]]
    assert not [f for f in features if "queue discipline" in f or "congestion control" in f], features
    assert any("vng" in f for f in features), features   # what the vm testbed needs here is still asked


def test_cc_list_json_holds_the_table():
    table, doc = cli("cc", "list"), cli("cc", "list", "--json")
    assert table.returncode == doc.returncode == 0, table.stderr + doc.stderr
    d = json.loads(doc.stdout)
    lines = table.stdout.splitlines()
    listed = [line.split()[:2] for line in lines[1:lines.index("")]]
    assert listed == [[r["name"], r["form"]] for r in d["available"]]
    assert {"reno", "cubic"} <= {r["name"] for r in d["available"]}
    presets = [line.split()[0] for line in lines[lines.index("") + 2:] if line.strip()]
    assert presets == list(d["presets"])


def test_run_json_prints_the_summary_document(ccrig):
    p = ccrig.run(dumbbell([{"cc": "reno"}, {"cc": "cubic"}], duration="4s"), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)   # the one document: the run directory and the rest went to stderr
    run_dir = ccrig.run_dirs()[-1]
    assert d == json.loads((run_dir / "summary.json").read_text())
    assert f"run directory: {run_dir}" in " ".join(p.stderr.split())
    assert [f["cc"] for f in d["points"][0]["flows"]] == ["reno", "cubic"]
    assert d["points"][0]["system"]["goodput_bps"]["mean"] > 0
