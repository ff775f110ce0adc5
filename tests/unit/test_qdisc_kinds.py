"""A queue discipline is one module: dropped among qdiscs/'s modules, it is known to the spec, the tc argv, the
probe, the statistics and the collectors without a line changed anywhere else."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccrig import qdiscs
from ccrig.qdiscs import stats
from ccrig.qdiscs.shaper import LEAF, shaped_argv
from ccrig.units import Size

# a discipline of its own, with a parameter, classes and a gauge, as a new module of qdiscs/ would be
MODULE = '''
from typing import ClassVar, Literal

from ccrig.qdiscs.base import Count, Qdisc, packet_limit


class Tstq(Qdisc):
    kind: Literal["tstq"] = "tstq"
    module: ClassVar[str] = "sch_tstq"
    kconfig: ClassVar[str] = "NET_SCH_TSTQ"
    gauges: ClassVar[frozenset[str]] = frozenset({"level"})
    limit: Count = None

    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["tstq", "limit", str(packet_limit(self.limit, buffer, mtu))]

    def classes_under(self, handle):
        return handle
'''

# asks every part of ccrig that handles disciplines about it, in a process whose qdiscs/ holds the module
PROGRAM = '''
import json, sys
from ccrig import qdiscs
qdiscs.__path__.append(sys.argv[1])
from ccrig.errors import InputError
from ccrig.experiments.run.preflight import qdisc_kinds
from ccrig.experiments.spec import validate
from ccrig.qdiscs import probe, stats
from ccrig.qdiscs.shaper import shaped_argv
from ccrig.units import Size

spec = {"name": "t", "duration": "5s", "flows": [{"count": 2}],
        "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "40pkt",
                                                        "qdisc": {"kind": "tstq", "limit": 7}}}}
exp = validate(spec, "spec")
q = exp.topology.bottleneck.qdisc
try:
    validate({**spec, "topology": {**spec["topology"], "bottleneck": {"rate": "10mbit", "qdisc": {"kind": "tstq",
                                                                                             "limit": 0}}}}, "spec")
    refused = ""
except InputError as e:
    refused = str(e)
print(json.dumps({
    "kinds": qdiscs.kinds(), "type": type(q).__name__, "limit": q.limit,
    "argv": shaped_argv("eth0", 10e6, q, Size(packets=40), 1500)[-1],
    "short": validate({**spec, "topology": {**spec["topology"], "bottleneck": {"rate": "10mbit",
                                                                              "qdisc": "tstq"}}},
                      "spec").topology.bottleneck.qdisc.kind,
    "refused": refused, "classes_under": qdiscs.classes_under(q),
    "probe": probe.probes()["tstq"], "module_of": probe.module_of("tstq"),
    "gauge": stats.is_counter("tstq_level"), "counter": stats.is_counter("tstq_drops"),
    "needed": qdisc_kinds(exp.topology.build(exp.n_flows)),
}))
'''


def test_a_new_discipline_is_one_module(tmp_path):
    (tmp_path / "tstq.py").write_text(MODULE)
    p = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert "tstq" in got["kinds"] and set(qdiscs.kinds()) < set(got["kinds"])
    assert got["type"] == "Tstq" and got["limit"] == 7 and got["short"] == "tstq"
    assert got["argv"] == ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", LEAF, "tstq", "limit", "7"]
    assert got["refused"] == "spec: topology.bottleneck.qdisc.limit: got 0; expected at least 1", got["refused"]
    assert got["classes_under"] == LEAF
    assert got["probe"] == ["sch_tstq", ["tstq", "limit", "100"]] and got["module_of"] == "sch_tstq"
    assert got["gauge"] is False and got["counter"] is True
    assert got["needed"]["r1"]["tstq"] == "the r1->r2 link's qdisc"
    # the module came from the temporary folder alone: this process's registry never saw it
    assert "tstq" not in qdiscs.kinds()


@pytest.mark.parametrize("kind", qdiscs.kinds())
def test_classes_are_read_where_the_argv_makes_them(kind):
    """A discipline that adds classes says where they are (the collectors read them there); one that adds none
    says it has none."""
    q = qdiscs.get(kind)()
    argv = shaped_argv("eth0", 10e6, q, Size(packets=40), 1500, flows=3, flow_sources=["10.0.0.1", "10.0.0.2"])
    parents = {a[a.index("parent") + 1] for a in argv if a[:3] == ["tc", "class", "add"] and a[a.index("parent")
                                                                                              + 1] != "1:"}
    if parents:
        assert parents == {qdiscs.classes_under(q)}
    else:
        assert qdiscs.classes_under(q) is None


def test_no_discipline_no_classes():
    assert qdiscs.classes_under(None) is None
    assert qdiscs.classes_under(qdiscs.from_spec("drr")) == LEAF
    assert qdiscs.classes_under(qdiscs.from_spec("pfifo")) is None


def test_gauges_are_declared_by_their_modules():
    assert not stats.is_counter("drr_deficit") and not stats.is_counter("fq_flows")
    assert not stats.is_counter("htb_tokens") and stats.is_counter("fq_gc") and stats.is_counter("red_early")
    for kind, cls in qdiscs.available().items():
        assert all(not stats.is_counter(f"{kind}_{g}") for g in cls.gauges)


ROOT = Path(__file__).resolve().parents[2]
# the runner until the repetition code that replaces it asks qdiscs.classes_under; the PAUSE agent, a program
# shipped to hosts that imports nothing of ccrig, renders its own tc argv
NAMED_ELSEWHERE = {ROOT / "topologies" / "pause" / "agent" / "config.py"}


def test_no_module_but_the_disciplines_own_spells_a_kind():
    """A discipline's kind as a string in code (prose aside) outside the disciplines' modules is a decision made
    by name, which a new discipline would have to be added to."""
    kinds = set(qdiscs.kinds())
    own = {Path(sys.modules[cls.__module__].__file__) for cls in qdiscs.available().values()}
    bad = []
    for folder in ("ccrig", "qdiscs", "topologies", "tcp_modules", "analysis", "experiments"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in own or path in NAMED_ELSEWHERE:
                continue
            tree = ast.parse(path.read_text())
            prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
            bad += [f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and n.value in kinds and id(n) not in prose]
    assert not bad, bad
