"""The pause_chain spec: the Fig. 3 topology it builds, its scaling, and every bad input as a clear error."""
import copy

import pytest
from pydantic import ValidationError

from ccrig.errors import InputError
from ccrig.units import Rate
from ccrig.qdiscs.fifo import Pfifo
from ccrig.topologies import SPECS
from ccrig.topologies.named.pause_chain import PauseChainSpec

PAPER = {"name": "pause_chain", "link_a": {"rate": "25pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
         "link_c": {"rate": "15pps", "buffer": "20pkt"}, "pause": {"high": 16, "low": 12, "paused_rate": "2pps"},
         "rtt": "100ms"}


def spec(**changes):
    raw = copy.deepcopy(PAPER)
    for path, value in changes.items():
        cur = raw
        *parents, last = path.split("__")
        for p in parents:
            cur = cur.setdefault(p, {})
        if value is None:
            cur.pop(last, None)
        else:
            cur[last] = value
    return PauseChainSpec.model_validate(raw)


def test_registered():
    assert PauseChainSpec in SPECS


def test_fig3_chain_one_pair():
    s = spec()
    topo = s.build(flows=8)
    wire = 1514 * 8
    assert [n.name for n in topo.nodes] == ["n1", "n2", "s1", "d1"]
    a, b, c = topo.links
    assert (a.a, a.b, a.a_to_b.rate) == ("s1", "n1", Rate(bits_per_s=25 * wire))
    assert (b.a, b.b, b.a_to_b.rate, b.a_to_b.buffer.packets) == ("n1", "n2", Rate(bits_per_s=100 * wire), 10)
    assert isinstance(b.a_to_b.qdisc, Pfifo)
    assert (c.a, c.b, c.a_to_b.rate, c.a_to_b.buffer.packets) == ("n2", "d1", Rate(bits_per_s=15 * wire), 20)
    # the RTT is on the ACK path, never on a link with a buffer of the study
    assert c.b_to_a.delay == pytest.approx(0.1) and not a.a_to_b.needs_netem and not b.a_to_b.needs_netem
    assert topo.pairs == [("s1", "d1")] and topo.bottleneck == ("n2", "d1")
    assert s.pause_nodes(topo) == (("n1", "n2"), ("n2", "d1"))
    routes = topo.routes()
    assert routes["s1"] and routes["d1"]


def test_scale_keeps_ratios_and_divides_rtt():
    s = spec(scale=20)
    topo = s.build(flows=1)
    wire = 1514 * 8
    rates = [l.a_to_b.rate.bits_per_s for l in topo.links]
    assert rates == pytest.approx([25 * wire * 20, 100 * wire * 20, 15 * wire * 20])
    assert topo.links[2].b_to_a.delay == pytest.approx(0.005)
    info = s.scaling()
    assert info["scale"] == 20 and info["rtt_s"] == pytest.approx(0.005)
    assert info["paused_bps"] == pytest.approx(2 * wire * 20) and info["link_b_bps"] == pytest.approx(100 * wire * 20)


def test_several_pairs_aggregate_before_link_a():
    topo = spec(pairs=3).build(flows=8)
    names = [n.name for n in topo.nodes]
    assert {"a", "c", "s1", "s3", "d1", "d3"} <= set(names)
    link_a = next(l for l in topo.links if (l.a, l.b) == ("a", "n1"))
    assert link_a.a_to_b.rate.bits_per_s == pytest.approx(25 * 1514 * 8)
    assert link_a.a_to_b.buffer.packets == 1000   # not a drop point of its own
    assert topo.bottleneck == ("n2", "c") and len(topo.pairs) == 3


@pytest.mark.parametrize("value,expected", [(0, 0), ("0", 0), ("0pps", 0), ("2pps", Rate(packets_per_s=2)),
                                            ("24kbit", Rate(bits_per_s=24000))])
def test_paused_rate(value, expected):
    assert spec(pause__paused_rate=value).pause.paused_rate == expected


def test_defaults():
    s = spec(pause={"high": 14})
    assert s.pause.t2 == 14 and s.pause.paused_rate == 0 and s.pause.mode == "emulated"
    assert s.scaling()["paused_bps"] == 0.0


def test_no_pause_is_allowed():
    assert spec(pause=None).build(flows=1).links


@pytest.mark.parametrize("changes,message", [
    (dict(pause__low=17), "topology.pause.low: got 17; expected T2 at most the high threshold T1 = 16"),
    (dict(pause__high=21), "topology.pause.high: got 21; expected T1 at most node 2's buffer B2 = 20"),
    (dict(link_c__buffer=None), "topology.link_c.buffer: got None; expected node 2's buffer B2 in packets"),
    (dict(link_b__buffer=None), "topology.link_b.buffer: got None; expected node 1's buffer B1"),
    (dict(pause__paused_rate="100pps"), "topology.pause.paused_rate: got '100pps'; expected 0 (stop) or a rate below"),
    (dict(scale=0), "topology.scale: got 0"),
    (dict(pause__quanta=100, pause__refresh="10s"), "topology.pause.refresh: got '10s'; expected shorter than the pause"),
])
def test_bad_input_is_a_clear_error(changes, message):
    with pytest.raises(InputError) as e:
        spec(**changes)
    assert message in str(e.value)


@pytest.mark.parametrize("changes,field,text", [
    (dict(link_b__rate="0pps"), "rate", "a rate must be positive"),
    (dict(link_c__rate="-5pps"), "rate", "a rate must be positive"),
    (dict(pause__quanta=0), "quanta", "expected 1..65535 pause quanta"),
    (dict(pause__quanta=65536), "quanta", "expected 1..65535 pause quanta"),
    (dict(pause__low=0), "low", "at least 1 packet"),
    (dict(pause__paused_rate="-1pps"), "paused_rate", "a rate must be positive"),
    (dict(link_c__buffer="30kb"), "buffer", "in packets"),
    (dict(pause__mode="magic"), "mode", "emulated"),
])
def test_bad_fields(changes, field, text):
    with pytest.raises(ValidationError) as e:
        spec(**changes)
    err = e.value.errors()[0]
    assert err["loc"][-1] == field and text in str(e.value)
