"""Pure: link events (validation, schedule), the loss plan (netem or BPF), fair shares of the active
flows, the senders' TCP settings and the new spec fields' errors."""
import pytest
from pydantic import TypeAdapter, ValidationError

from ccrig.analysis.intervals import active, fair_shares
from ccrig.errors import InputError
from ccrig.jsondoc import values as _json_values
from ccrig.experiments import events, spec as specmod
from ccrig.experiments.run.sender_tcp import SenderTcp, TcpSettings, route_options
from ccrig.topologies import loss
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.loss import GilbertElliott, LossModel
from ccrig.topologies.loss.program import ONE, attach_argv, threshold

EVENTS = TypeAdapter(list[events.event_union()])


def _topo(flows=2, loss_=0.01):
    return DumbbellSpec(bottleneck={"rate": "10mbit"}, loss=loss_).build(flows)


def test_every_kind_is_found():
    assert events.kinds() == ["delay", "down", "loss", "rate"]


def test_periodic_outage_schedule():
    (e,) = EVENTS.validate_python([{"kind": "down", "link": "r1-r2", "at": "5s", "for": "0.2s", "every": "5s"}])
    steps = events.schedule([e], 20.0)
    assert [(round(s.t, 3), s.begins) for s in steps] == [(5, True), (5.2, False), (10, True), (10.2, False),
                                                          (15, True), (15.2, False)]
    assert e.directions() == [("r1", "r2"), ("r2", "r1")]
    assert events.dropper_directions([e]) == {("r1", "r2", "ingress"), ("r2", "r1", "ingress")}


def test_an_end_comes_before_a_beginning_at_the_same_time():
    evs = EVENTS.validate_python([{"kind": "loss", "link": "r2-d1", "at": "2s", "loss": 0.1},
                                  {"kind": "down", "link": "r1-r2", "at": "1s", "for": "1s"}])
    steps = events.schedule(evs, 10.0)
    assert [(s.t, s.begins, s.index) for s in steps] == [(1.0, True, 1), (2.0, False, 1), (2.0, True, 0)]


@pytest.mark.parametrize("entry,word", [
    ({"kind": "down", "link": "r1-r2", "at": "1s", "for": "5s", "every": "5s"}, "for"),
    ({"kind": "down", "link": "r1-r2", "at": "1s", "every": "0s"}, "every"),
    ({"kind": "loss", "link": "r1-r2", "at": "1s", "loss": 1.5}, "loss"),
    ({"kind": "rate", "link": "r1 r2", "at": "1s", "rate": "5mbit"}, "link"),
    ({"kind": "teleport", "link": "r1-r2"}, "kind"),
])
def test_bad_events_are_refused(entry, word):
    with pytest.raises(ValidationError) as e:
        EVENTS.validate_python([entry])
    assert word in str(e.value)


def test_events_on_links_the_topology_lacks_or_cannot_change():
    topo = _topo()
    evs = EVENTS.validate_python([{"kind": "down", "link": "r1-r9", "at": "1s"},
                                  {"kind": "rate", "link": "s1-r1", "at": "1s", "rate": "5mbit"},
                                  {"kind": "delay", "link": "r2-d1", "at": "1s", "delay": "5ms"},
                                  {"kind": "down", "link": "r1-r2", "at": "30s"}])
    got = events.problems(evs, topo, False, 20.0)
    assert got[0].startswith("events[0].link: got 'r1-r9'; expected a link of the topology: r1-r2")
    assert "events[1] (rate)" in got[1] and "no rate" in got[1]
    assert "events[2] (delay)" in got[2] and "netem" in got[2]
    assert got[3].startswith("events[3].at: got 30s")


def test_loss_goes_to_bpf_only_without_netem():
    topo = _topo()
    same, points = loss.plan(topo, netem=True)
    assert points == [] and same.egress_of("r2", "d1").egress.loss == 0.01
    built, points = loss.plan(topo, netem=False)
    assert [(p.name, p.loss) for p in points] == [("r2->d1", 0.01), ("r2->d2", 0.01)]
    assert built.egress_of("r2", "d1").egress.loss == 0 and built.egress_of("r2", "d1").egress.delay == 0
    # an event's directions carry the program too: an outage at the far end's ingress, a loss event's on the
    # egress, where the link's own loss moves too
    _, points = loss.plan(topo, netem=True, also={("r1", "r2", "ingress"), ("r2", "d1", "egress")})
    assert [(p.name, p.at, p.loss) for p in points] == [("r1->r2 (ingress)", "r2", 0.0), ("r2->d1", "r2", 0.01)]


def test_drops_before_the_bottleneck_add_to_what_it_was_offered():
    topo = _topo()
    assert loss.upstream(topo, loss.DropPoint("s1", "r1"))
    assert loss.upstream(topo, loss.DropPoint("r1", "r2"))
    assert not loss.upstream(topo, loss.DropPoint("r2", "d1"))
    assert not loss.upstream(topo, loss.DropPoint("r1", "r2", hook="ingress"))   # after the bottleneck's queue


def test_probability_thresholds_and_argv():
    assert threshold(0) == 0 and threshold(1) == ONE and threshold(0.01) == round(0.01 * 2 ** 32)
    assert attach_argv("eth1", "/x/loss.bpf.o") == [
        ["tc", "qdisc", "replace", "dev", "eth1", "clsact"],
        ["tc", "filter", "add", "dev", "eth1", "egress", "bpf", "da", "obj", "/x/loss.bpf.o", "sec", "tc"]]


def test_gilbert_elliott_mean_and_one_of_two():
    ge = GilbertElliott(p=0.01, r=0.09, loss_bad=1.0)
    assert ge.mean == pytest.approx(0.1)
    with pytest.raises(ValidationError):
        LossModel(rate=0.1, gilbert=ge)
    with pytest.raises(ValidationError):
        LossModel()


def test_fair_share_counts_only_the_active_flows():
    spans = [(0, 30), (0, 10), (5, 30)]
    assert fair_shares(12.0, spans, 1, 2) == [6.0, 6.0, None]
    assert fair_shares(12.0, spans, 6, 7) == [4.0, 4.0, 4.0]
    assert fair_shares(12.0, spans, 10, 11) == [6.0, None, 6.0]
    assert active((0, 10), 9.5, 10.5) and not active((0, 10), 10, 11)


def test_sender_tcp_sysctls_and_route_options():
    t = TcpSettings(sack=False, recovery="none", frto=False, ecn=True, initcwnd=2, rto_min="50ms")
    assert t.sysctls() == {"net.ipv4.tcp_sack": "0", "net.ipv4.tcp_ecn": "1", "net.ipv4.tcp_frto": "0",
                           "net.ipv4.tcp_recovery": "0"}
    assert route_options(t, 5) == ["initcwnd", "2", "rto_min", "50ms", "cwnd", "lock", "5"]


def test_route_lookups_read_from_ip_batch_json_however_printed():
    # `ip -j -batch` prints an array per command: on a line each here (iproute2 6.x); read as a stream either way
    got = '[{"dst":"10.0.0.2","gateway":"10.0.1.1","dev":"v0"}]\n[{"dst":"10.0.0.3","dev":"v1"}]\n'
    assert [r["dst"] for r in _json_values(got)] == ["10.0.0.2", "10.0.0.3"]
    assert _json_values(got.replace("\n", "")) == _json_values(got)
    assert _json_values("\n") == []


def test_flows_sharing_a_sender_must_agree():
    a = specmod.Flow(tcp={"sack": False})
    b = specmod.Flow(tcp={"sack": True})
    with pytest.raises(InputError, match="flow 1's tcp .* differs from flow 0's .* on sender s1"):
        SenderTcp(None, [(0, a, "s1", "d1"), (1, b, "s1", "d1")])
    plan = SenderTcp(None, [(0, a, "s1", "d1"), (1, b, "s2", "d2")])
    assert plan.describe_plan() == ["s1: sysctl -w net.ipv4.tcp_sack=0", "s2: sysctl -w net.ipv4.tcp_sack=1"]


def _spec(**flow):
    return {"name": "t", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit"}},
            "flows": [{"cc": "reno", **flow}], "duration": "10s"}


@pytest.mark.parametrize("flow,field", [({"start": "2s", "stop": "1s"}, "flows[0].stop"),
                                        ({"stop": "11s"}, "flows[0].stop"),
                                        ({"max_window": 0}, "flows[0].max_window"),
                                        ({"tcp": {"recovery": "newreno"}}, "flows[0].tcp.recovery")])
def test_bad_flow_fields_name_the_field(flow, field):
    with pytest.raises(InputError) as e:
        specmod.validate(_spec(**flow), "spec")
    assert f"spec: {field}" in str(e.value)


def test_an_event_on_a_missing_link_names_the_field():
    raw = {**_spec(), "events": [{"kind": "down", "link": "r1-r9", "at": "1s"}]}
    with pytest.raises(InputError, match=r"^spec: events\[0\]\.link: got 'r1-r9'"):
        specmod.validate(raw, "spec")


def test_a_drop_points_fixed_bernoulli_loss_is_recorded_beside_its_counts_and_a_changed_one_is_not():
    # analysis/readings.loss_drawn reads p: only where every packet of the repetition met the same p
    from types import SimpleNamespace
    from ccrig.experiments.events.conditions import LinkConditions

    class Dropper:
        def counts(self):
            return {"dropped": 10, "passed": 990, "down_dropped": 0, "exempt": 3}

    def drops(evs):
        cond = LinkConditions(SimpleNamespace(events=EVENTS.validate_python(evs), duration=10.0), _topo(), False)
        cond.state = SimpleNamespace(droppers={p.key: Dropper() for p in cond.points})
        return cond.drops()[2]

    assert drops([]) == {"r2->d1": {"dropped": 10, "passed": 990, "down_dropped": 0, "exempt": 3, "p": 0.01},
                         "r2->d2": {"dropped": 10, "passed": 990, "down_dropped": 0, "exempt": 3, "p": 0.01}}
    got = drops([{"kind": "loss", "link": "r2-d1", "at": "2s", "loss": 0.1},
                 {"kind": "down", "link": "r1-r2", "at": "1s", "for": "1s"}])
    assert "p" not in got["r2->d1"] and got["r2->d2"]["p"] == 0.01
    assert not any("p" in c for name, c in got.items() if name.endswith("(ingress)"))
