"""Every discipline's tc argv for its parameter sets, and the parameters each one refuses."""
import pytest

from ccrig.errors import InputError
from ccrig.experiments.spec import validate
from ccrig.units import Size
from ccrig import qdiscs
from ccrig.qdiscs import from_spec
from ccrig.qdiscs.codel import Codel, FqCodel
from ccrig.qdiscs.drr import Drr
from ccrig.qdiscs.fifo import Bfifo, Pfifo
from ccrig.qdiscs.fq import Fq, Sfq
from ccrig.qdiscs.pie import Pie
from ccrig.qdiscs.red import Red
from ccrig.qdiscs.shaper import shaped_argv

MTU = 1500
WIRE = 1514
PKT100 = Size(packets=100)


def args(q, buffer=PKT100, rate=10e6):
    return q.qdisc_args(buffer, rate, MTU)


def test_every_kind_is_registered_with_its_module():
    kinds = qdiscs.available()
    assert set(kinds) == {"pfifo", "bfifo", "red", "fq", "sfq", "drr", "fq_codel", "codel", "pie"}
    for kind, cls in kinds.items():
        assert cls().kind == kind
        assert cls.module.startswith("sch_") and cls.kconfig.startswith("NET_SCH")
    assert kinds["fq_codel"].module == "sch_fq_codel" and kinds["red"].module == "sch_red"


# --- drop-tail ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("q,buffer,want", [
    (Pfifo(), PKT100, ["pfifo", "limit", "100"]),
    (Pfifo(), Size(bytes=15140), ["pfifo", "limit", "10"]),
    (Pfifo(), None, ["pfifo", "limit", "1000"]),
    (Pfifo(limit=7), PKT100, ["pfifo", "limit", "7"]),
    (Bfifo(), PKT100, ["bfifo", "limit", "151400"]),
    (Bfifo(), Size(bytes=64000), ["bfifo", "limit", "64000"]),
    (Bfifo(limit="30kb"), PKT100, ["bfifo", "limit", "30000"]),
    (Bfifo(limit=4000), None, ["bfifo", "limit", "4000"]),
])
def test_fifo(q, buffer, want):
    assert args(q, buffer) == want


# --- RED ---------------------------------------------------------------------------------------------

def test_red_defaults_follow_tc_red_from_the_link():
    # limit = buffer; max = limit/4; min = max/3; avpkt = wire packet; burst = (2min+max)/(3avpkt), rounded up
    assert args(Red()) == ["red", "limit", "151400", "min", "12616", "max", "37850", "avpkt", "1514",
                           "burst", "14", "probability", "0.02", "bandwidth", "10000000bit"]


def test_red_byte_buffer_and_explicit_parameters():
    q = Red(limit="200kb", min=20000, max=60000, avpkt=1000, burst=30, probability=0.1, bandwidth="100mbit",
            ecn=True, harddrop=True, adaptive=True)
    assert args(q, Size(bytes=64000), rate=10e6) == [
        "red", "limit", "200000", "min", "20000", "max", "60000", "avpkt", "1000", "burst", "30",
        "probability", "0.1", "bandwidth", "100000000bit", "ecn", "harddrop", "adaptive"]


def test_red_min_only_and_max_only():
    assert args(Red(max=30000))[3:7] == ["min", "10000", "max", "30000"]
    assert args(Red(min=3000))[3:7] == ["min", "3000", "max", "37850"]


def test_red_without_link_rate_leaves_bandwidth_to_tc():
    assert "bandwidth" not in args(Red(), rate=None)


def test_red_thresholds_are_reported():
    t = Red().thresholds(Size(packets=40), MTU)
    assert t == {"limit": 40 * WIRE, "min": 40 * WIRE // 4 // 3, "max": 40 * WIRE // 4, "avpkt": WIRE,
                 "burst": 6}


@pytest.mark.parametrize("raw,field,value", [
    ({"min": 90000, "max": 30000}, "min", "90000"),
    ({"min": 30000, "max": 30000}, "min", "30000"),
    ({"max": 40000, "limit": 40000}, "max", "40000"),
    ({"limit": -5}, "limit", "-5"),
    ({"probability": 0}, "probability", "0"),
    ({"probability": 1.5}, "probability", "1.5"),
    ({"burst": 0}, "burst", "0"),
    ({"avpkt": "10pkt"}, "avpkt", "10pkt"),
    ({"bandwidth": "fast"}, "bandwidth", "fast"),
])
def test_red_rejects(raw, field, value):
    with pytest.raises(InputError) as e:
        from_spec({"kind": "red", **raw})
    msg = str(e.value)
    assert f"qdisc.{field}" in msg and value in msg, msg


def test_red_rejects_thresholds_that_do_not_fit_the_link():
    # min given above the max derived from a small buffer: found when the link's buffer is known
    with pytest.raises(InputError, match=r"qdisc\.min: got 20000; expected less than max \(3785 bytes\)"):
        args(Red(min=20000), Size(packets=10))
    with pytest.raises(InputError, match=r"qdisc\.max: got 50000; expected less than limit \(15140"):
        args(Red(max=50000), Size(packets=10))
    with pytest.raises(InputError, match=r"qdisc\.burst: got 1; expected at least min/avpkt = 9"):
        args(Red(burst=1))
    with pytest.raises(InputError, match=r"qdisc\.min: got 1000; expected more than avpkt \(1514 bytes\)"):
        args(Red(min=1000, max=3000), Size(packets=10))


def test_red_min_is_more_than_a_packet_on_small_buffers():
    # 10 packets: max = limit / 4 = 3785; max / 3 = 1261 is below one packet, where tc finds no EWMA weight
    t = Red().thresholds(Size(packets=10), MTU)
    assert t["min"] == 1515 and t["max"] == 3785 and t["burst"] == 2


# --- fair queueing -------------------------------------------------------------------------------------

def test_fq():
    assert args(Fq()) == ["fq", "limit", "100", "flow_limit", "100", "pacing"]
    # each flow may hold its share of the buffer, so one flow cannot fill fq's whole limit
    assert Fq().setup_argv("eth0", "1:1", "10:", PKT100, 10e6, MTU, 3)[0][-5:] == [
        "limit", "100", "flow_limit", "34", "pacing"]
    assert args(Fq(limit=500, flow_limit=50, quantum="3kb", initial_quantum=15140, buckets=256,
                   maxrate="5mbit", ce_threshold="2ms", pacing=False), None) == [
        "fq", "limit", "500", "flow_limit", "50", "quantum", "3000", "initial_quantum", "15140", "buckets",
        "256", "maxrate", "5000000bit", "ce_threshold", "2000us", "nopacing"]


def test_sfq():
    assert args(Sfq()) == ["sfq", "limit", "100"]
    assert args(Sfq(limit=300, depth=64, divisor=2048, quantum=1514, perturb=10, headdrop=True)) == [
        "sfq", "limit", "300", "depth", "64", "divisor", "2048", "quantum", "1514", "perturb", "10", "headdrop"]
    with pytest.raises(InputError, match=r"buffer: got '1pkt'; expected 2 to 65535 packets for sfq"):
        args(Sfq(), Size(packets=1))


@pytest.mark.parametrize("kind,raw,field,value", [
    ("fq", {"limit": 0}, "limit", "0"),
    ("fq", {"flow_limit": -1}, "flow_limit", "-1"),
    ("fq", {"buckets": 1000}, "buckets", "1000"),
    ("fq", {"quantum": 0}, "quantum", "0"),
    ("sfq", {"limit": 1}, "limit", "1"),
    ("sfq", {"limit": 70000}, "limit", "70000"),
    ("sfq", {"divisor": 100}, "divisor", "100"),
    ("sfq", {"perturb": -1}, "perturb", "-1"),
])
def test_fair_queueing_rejects(kind, raw, field, value):
    with pytest.raises(InputError) as e:
        from_spec({"kind": kind, **raw})
    assert f"qdisc.{field}: got" in str(e.value) and value in str(e.value)


# --- DRR ---------------------------------------------------------------------------------------------

def test_drr_one_class_per_flow_source_with_exact_filters():
    cmds = Drr().setup_argv("eth0", "1:1", "10:", Size(packets=30), 10e6, MTU, 3,
                            flow_sources=["198.18.1.1", "198.18.3.1", "198.18.5.1"])
    text = [" ".join(c) for c in cmds]
    assert text == [
        "tc qdisc add dev eth0 parent 1:1 handle 10: drr",
        "tc class add dev eth0 parent 10: classid 10:1 drr quantum 1514",
        "tc qdisc add dev eth0 parent 10:1 pfifo limit 10",
        "tc class add dev eth0 parent 10: classid 10:2 drr quantum 1514",
        "tc qdisc add dev eth0 parent 10:2 pfifo limit 10",
        "tc class add dev eth0 parent 10: classid 10:3 drr quantum 1514",
        "tc qdisc add dev eth0 parent 10:3 pfifo limit 10",
        "tc filter add dev eth0 parent 10: protocol ip prio 1 u32 match ip src 198.18.1.1/32 flowid 10:1",
        "tc filter add dev eth0 parent 10: protocol ip prio 1 u32 match ip src 198.18.3.1/32 flowid 10:2",
        "tc filter add dev eth0 parent 10: protocol ip prio 1 u32 match ip src 198.18.5.1/32 flowid 10:3",
        # ARP and anything else unmatched must not be dropped by drr
        "tc filter add dev eth0 parent 10: protocol all prio 2 u32 match u32 0 0 flowid 10:3",
    ]


def test_drr_without_sources_hashes_flows_into_classes():
    cmds = Drr(quantum="3kb", class_limit=20).setup_argv("eth0", "1:1", "10:", PKT100, 10e6, MTU, 12)
    text = [" ".join(c) for c in cmds]
    assert "tc class add dev eth0 parent 10: classid 10:c drr quantum 3000" in text  # minors are hex
    assert "tc qdisc add dev eth0 parent 10:c pfifo limit 20" in text
    assert ("tc filter add dev eth0 parent 10: protocol all prio 1 handle 1 flow hash keys "
            "src,dst,proto,proto-src,proto-dst divisor 12 baseclass 10:1") in text
    assert sum(1 for t in text if " class add " in t) == 12


def test_drr_through_the_shaper():
    cmds = shaped_argv("eth0", 10e6, Drr(), PKT100, MTU, flows=2, flow_sources=["10.0.0.1", "10.0.0.2"])
    assert cmds[0] == ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"]
    assert cmds[2] == ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "drr"]
    assert ["tc", "qdisc", "add", "dev", "eth0", "parent", "10:1", "pfifo", "limit", "50"] in cmds


@pytest.mark.parametrize("raw,field,value", [
    ({"quantum": 0}, "quantum", "0"), ({"quantum": -1514}, "quantum", "-1514"),
    ({"class_limit": 0}, "class_limit", "0")])
def test_drr_rejects(raw, field, value):
    with pytest.raises(InputError) as e:
        from_spec({"kind": "drr", **raw})
    assert f"qdisc.{field}: got {value}" in str(e.value)


def test_drr_needs_a_flow():
    with pytest.raises(InputError, match="flows: got 0"):
        Drr().setup_argv("eth0", "1:1", "10:", PKT100, 10e6, MTU, 0)


# --- AQM: CoDel, FQ-CoDel, PIE -----------------------------------------------------------------------------

def test_codel_and_fq_codel():
    assert args(Codel()) == ["codel", "limit", "100"]
    assert args(Codel(limit=200, target="5ms", interval="100ms", ce_threshold="1ms", ecn=True)) == [
        "codel", "limit", "200", "target", "5000us", "interval", "100000us", "ce_threshold", "1000us", "ecn"]
    assert args(FqCodel()) == ["fq_codel", "limit", "100"]
    assert args(FqCodel(target="2ms", ecn=False, flows=64, quantum=300, memory_limit="4mb")) == [
        "fq_codel", "limit", "100", "target", "2000us", "noecn", "flows", "64", "quantum", "300",
        "memory_limit", "4000000"]


def test_pie():
    assert args(Pie()) == ["pie", "limit", "100"]
    assert args(Pie(limit=50, target="20ms", tupdate="30ms", alpha=4, beta=16, ecn=True, bytemode=True,
                    dq_rate_estimator=True)) == [
        "pie", "limit", "50", "target", "20000us", "tupdate", "30000us", "alpha", "4", "beta", "16", "ecn",
        "bytemode", "dq_rate_estimator"]


@pytest.mark.parametrize("kind,raw,field,value", [
    ("codel", {"target": "0ms"}, "target", "0s"),
    ("codel", {"interval": 5}, "interval", "5"),
    ("codel", {"limit": -3}, "limit", "-3"),
    ("fq_codel", {"flows": 0}, "flows", "0"),
    ("fq_codel", {"quantum": "1pkt"}, "quantum", "1pkt"),
    ("pie", {"alpha": 40}, "alpha", "40"),
    ("pie", {"tupdate": "0ms"}, "tupdate", "0s"),
    ("pie", {"limit": 0}, "limit", "0"),
])
def test_aqm_rejects(kind, raw, field, value):
    with pytest.raises(InputError) as e:
        from_spec({"kind": kind, **raw})
    assert f"qdisc.{field}: got" in str(e.value) and value in str(e.value), str(e.value)


# --- the spec's view ------------------------------------------------------------------------------------

def test_unknown_kind_and_unknown_field():
    with pytest.raises(InputError, match=r"qdisc\.kind: got 'wfq'; expected one of bfifo, codel, drr, fq, fq_codel, pfifo, pie, red, sfq"):
        from_spec("wfq")
    with pytest.raises(InputError, match=r"qdisc\.thresh: unknown field for red; expected one of: limit"):
        from_spec({"kind": "red", "thresh": 3})


def _spec(qdisc, **extra):
    return {"name": "q", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt",
                                                                        "qdisc": qdisc}},
            "flows": [{"count": 2}], "duration": "5s", **extra}


@pytest.mark.parametrize("kind", qdiscs.kinds())
def test_spec_short_form_names_every_kind(kind):
    exp = validate(_spec(kind), "spec")
    assert exp.topology.bottleneck.qdisc == qdiscs.get(kind)()


def test_spec_long_form_and_errors():
    exp = validate(_spec({"kind": "red", "ecn": True, "probability": 0.05}), "spec")
    assert exp.topology.bottleneck.qdisc == Red(ecn=True, probability=0.05)
    with pytest.raises(InputError, match=r"min: got 9000; expected less than max \(3000 bytes\)"):
        validate(_spec({"kind": "red", "min": 9000, "max": 3000}), "spec")
    with pytest.raises(InputError, match=r"quantum.*got 0"):
        validate(_spec({"kind": "drr", "quantum": 0}), "spec")
    with pytest.raises(InputError, match=r"'nope'"):
        validate(_spec("nope"), "spec")


def test_sweep_over_disciplines_and_buffers():
    from ccrig.experiments.spec import points
    raw = _spec("pfifo", sweep={"topology.bottleneck.buffer": [f"{n}pkt" for n in range(10, 101, 10)],
                                "topology.bottleneck.qdisc": ["pfifo", "red"]})
    pts = points(raw, validate(raw, "spec"))
    assert len(pts) == 20
    rendered = {(p.params["topology.bottleneck.buffer"], p.params["topology.bottleneck.qdisc"]):
                p.experiment.topology.bottleneck.qdisc.qdisc_args(p.experiment.topology.bottleneck.buffer,
                                                                   10e6, MTU)
                for p in pts}
    assert rendered[("10pkt", "pfifo")] == ["pfifo", "limit", "10"]
    assert rendered[("100pkt", "red")][:3] == ["red", "limit", "151400"]
    # every RED point fits its buffer (min < max < limit) down to 10 packets
    for (buf, kind), a in rendered.items():
        if kind == "red":
            lim, lo, hi = int(a[2]), int(a[4]), int(a[6])
            assert 0 < lo < hi < lim
