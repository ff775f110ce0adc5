"""The mininet testbed's pure parts: names, which egress TCLink carries, the Topo generated from a Topology, the
spec's `mininet:` section. (Building a Topo is data: no root, no network.)"""
from __future__ import annotations

import pytest

from ccrig.experiments import spec as specmod
from ccrig.errors import InputError
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.testbeds.mininet import Names, TopologyTopo, mn_topo, node_setup, node_setup_argv, \
    queue_by_ccrig, tclink_params
from ccrig.topologies.topology import Egress
from ccrig.units import Rate, Size

DUMBBELL = {"bottleneck": {"rate": "10mbit", "buffer": "100pkt", "qdisc": {"kind": "pfifo"}}, "rtt": "20ms"}


def test_names_fit_linux_and_differ_between_runs():
    a, b = Names("ccrig-4194304"), Names("ccrig-4194303")
    for n in (a, b):
        ports = [n.port(i, e) for i in range(999) for e in "ab"]
        assert max(map(len, ports)) <= 15 and len(set(ports)) == len(ports)
        assert all(len(n.switch(i)) <= 15 for i in range(999))
        assert len({n.dpid(i) for i in range(999)}) == 999 and all(len(n.dpid(i)) == 16 for i in range(3))
        assert 0 < n.group() < 2 ** 31  # a device group of the run's own, never the default 0
    assert a.switch(0) != b.switch(0) and a.group() != b.group() and Names().group() == 0
    assert a.node("s1") == "ccrig-4194304-s1" and Names().node("s1") == "s1" and Names().switch(3) == "w3"


def test_queues_are_ours_impairments_and_plain_rates_tclinks():
    mtu = 1500
    bottleneck = Egress(rate=Rate(10e6), buffer=Size(packets=100))
    assert queue_by_ccrig(bottleneck, mtu) and tclink_params(bottleneck, mtu) == {}
    assert queue_by_ccrig(Egress(rate=Rate(10e9)), mtu)  # beyond TCLink's 1000 Mbit/s
    assert tclink_params(Egress(delay=0.01), mtu) == {"delay": "10000us", "max_queue_size": 100000}
    assert tclink_params(Egress(rate=Rate(20e6), delay=0.005, loss=0.01), mtu) == {
        "bw": 20.0, "delay": "5000us", "loss": 1.0, "max_queue_size": 100000}
    assert tclink_params(Egress(rate=Rate(20e6)), mtu) == {"bw": 20.0}
    assert tclink_params(Egress(), mtu) == {}


def test_topo_has_every_link_through_a_switch_with_the_topologys_addresses():
    topology = DumbbellSpec.model_validate(DUMBBELL).build(2)
    names = Names("ccrig-77")
    topo = TopologyTopo(topology, names=names, setup=False)
    assert sorted(topo.hosts()) == sorted(names.node(n.name) for n in topology.nodes)
    assert len(topo.switches()) == len(topology.links) == 5
    ifs = topology.interfaces()
    seen = set()
    for a, sw, info in topo.links(withInfo=True):
        node = a.removeprefix("ccrig-77-")
        x = next(i for i in ifs[node] if i.name == info["intfName1"])
        assert info["params1"]["ip"] == f"{x.address}/24" and info["intfName2"].startswith(sw)
        seen.add((node, x.name))
        # netem delay rides on TCLink; the bottleneck's queue does not
        assert ("delay" in info["params1"]) == (x.egress.delay > 0)
        assert "cls" in info if x.egress.delay > 0 else "cls" not in info
    assert seen == {(n, x.name) for n, lst in ifs.items() for x in lst}
    # the testbed brings the switch ports up itself (in one batch); standalone, Mininet brings them up
    assert all(info["params2"] == {"up": None} for _, _, info in topo.links(withInfo=True))
    alone = TopologyTopo(topology, names=names)
    assert all(info["params2"] == {} for _, _, info in alone.links(withInfo=True))


def test_node_setup_is_the_bottleneck_routes_and_wire_sized_packets():
    topology = DumbbellSpec.model_validate(DUMBBELL).build(2)
    r1 = [" ".join(a) for a in node_setup_argv(topology, "r1")]
    assert "sysctl -q -w net.ipv4.ip_forward=1" in r1
    assert any(a.startswith("tc qdisc add dev eth0 root handle 1: htb") for a in r1)
    assert "tc qdisc add dev eth0 parent 1:1 handle 10: pfifo limit 100" in r1
    assert not any("netem" in a for a in r1)  # TCLink's
    assert all(f"ip link set dev eth{i} mtu 1500 gso_max_segs 1 gso_max_size 1514 gro_max_size 1514" in r1
               for i in range(3))
    s1 = [" ".join(a) for a in node_setup_argv(topology, "s1")]
    assert "ethtool -K eth0 tso off gso off gro off tx off" in s1 and not any(a.startswith("tc") for a in s1)
    # a host's one interface: one default route toward its neighbour, as on netns; a router: one per subnet
    via = topology.interfaces()["s1"][0].peer_address
    assert [a for a in s1 if a.startswith("ip route add")] == [f"ip route add default via {via}"]
    assert sum(a.startswith("ip route add") for a in r1) == len(topology.routes()["r1"]) > 0
    # routes worked out once by the caller give the same setup
    assert node_setup_argv(topology, "r1") == [argv for group in node_setup(
        topology, "r1", topology.routes(), topology.interfaces()).values() for argv in group]


def test_mn_topo_overrides_and_errors():
    make = mn_topo("dumbbell", {"bottleneck": {"rate": "10mbit", "buffer": "100pkt", "qdisc": "pfifo"}})
    topo = make(3, **{"bottleneck.rate": "20mbit"})
    assert len(topo.hosts()) == 8 and "s3" in topo.hosts()
    assert topo.topology.egress_of("r1", "r2").egress.rate.bits_per_s == 20e6
    with pytest.raises(InputError, match="bottleneck.rate"):
        make(2, **{"bottleneck.rate": "fast"})


def test_spec_mininet_section():
    base = {"name": "x", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit"}},
            "flows": [{"cc": "cubic"}], "duration": "5s"}
    assert specmod.validate(base, "s").mininet.switch == "auto"
    assert specmod.validate({**base, "mininet": {"switch": "ovs-user"}}, "s").mininet.switch == "ovs-user"
    with pytest.raises(InputError, match=r"mininet.switch: got 'ovsk'; expected 'auto', 'lxbr', 'ovs' or 'ovs-user'"):
        specmod.validate({**base, "mininet": {"switch": "ovsk"}}, "s")
    with pytest.raises(InputError, match=r"mininet.datapath: unknown field; expected one of: switch"):
        specmod.validate({**base, "mininet": {"datapath": "user"}}, "s")
