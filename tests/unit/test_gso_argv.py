"""topology.gso: the shaper becomes a tbf whose peak bucket is one wire packet (shorter than any super-packet),
the discipline (or netem) sits under it as under htb, and what cannot honour it says so."""
import pytest

from ccrig.errors import InputError
from ccrig.experiments.spec import validate
from ccrig.qdiscs.fifo import Pfifo
from ccrig.qdiscs.shaper import gso_mtu, shaped_argv
from ccrig.topologies.links import egress_argv
from ccrig.topologies.topology import Egress
from ccrig.units import Rate, Size


def spec(testbed: str, **extra) -> dict:
    return {"name": "g", "testbed": testbed, "flows": [{"cc": "cubic"}], "duration": "5s",
            "topology": {"name": "dumbbell", "gso": True, "bottleneck": {"rate": "1gbit", "buffer": "15pkt"}},
            **extra}


@pytest.mark.parametrize("mtu", [576, 1500, 9000])
def test_the_peak_bucket_passes_a_frame_and_cuts_every_super_packet(mtu):
    # the shortest super-packet of two segments is a frame and one byte (its second segment a byte long)
    assert gso_mtu(mtu) == mtu + 14


def test_tbf_replaces_htb_and_the_discipline_sits_under_it():
    argv = shaped_argv("eth0", 1e9, Pfifo(), Size(packets=15), 1500, gso=True)
    # a bucket of 1 ms at 1 Gbit/s; the peak bucket (one frame at 1 Tbit/s) only marks what is cut
    assert argv == [["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "tbf", "rate", "1000000000bit",
                     "burst", "125000", "peakrate", "1000000000000bit", "mtu", "1514", "limit", "1514"],
                    ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "pfifo", "limit", "15"]]
    assert shaped_argv("eth0", 1e9, Pfifo(), Size(packets=15), 1500)[0][8] == "htb"


def test_a_shaped_delay_goes_under_tbf():
    argv = egress_argv("eth1", Egress(rate=Rate(bits_per_s=100e6), delay=0.01), 1500, gso=True)
    assert argv[0][8] == "tbf" and argv[1][5:10] == ["parent", "1:1", "handle", "10:", "netem"]


def test_the_testbeds_that_send_wire_packets_everywhere_refuse_it():
    for testbed in ("netns", "vm", "auto"):
        assert validate(spec(testbed), "s.yaml").topology.gso
    with pytest.raises(InputError, match=r"topology.gso: got true on testbed 'mininet'; expected testbed netns "
                                         r"or vm"):
        validate(spec("mininet"), "s.yaml")


def test_a_rate_event_needs_htb():
    events = [{"kind": "rate", "link": "r1-r2", "at": "1s", "rate": "500mbit"}]
    with pytest.raises(InputError, match=r"link r1-r2: a rate event needs htb's class, and topology.gso shapes "
                                         r"with tbf"):
        validate(spec("netns", events=events), "s.yaml")
