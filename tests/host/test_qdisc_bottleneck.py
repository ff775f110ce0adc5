"""Drop-tail and htb shaping on the running kernel: a real dumbbell (the netns testbed), TCP through the
bottleneck on router r1, the qdisc's own counters read back.

The `Dumbbell` helper (tests/support/dumbbell.py) is shared with the VM tier (tests/vm/guest/test_qdiscs.py),
which runs every other discipline the same way on a distribution kernel.
"""
from __future__ import annotations

import json
import time

import pytest

from ccrig.qdiscs import stats
from support.dumbbell import Dumbbell, need_root

pytestmark = pytest.mark.host

@pytest.fixture(scope="module")
def dumbbell():
    need_root()
    with Dumbbell("q", rate="10mbit", buffer="20pkt", qdisc="pfifo") as d:
        yield d


def test_testbed_installs_the_spec_discipline_under_htb(dumbbell):
    rows = dumbbell.rows()
    assert [(r["kind"], r["handle"], r["parent"]) for r in rows] == [("htb", "1:", "root"),
                                                                     ("pfifo", "10:", "1:1")]
    out = dumbbell.commands.run(["tc", "-j", "qdisc", "show", "dev", dumbbell.dev], ns=dumbbell.router_ns).stdout
    assert json.loads(out)[1]["options"]["limit"] == 20


@pytest.mark.parametrize("qdisc,buffer", [("pfifo", "20pkt"), ("bfifo", "30280b")])
def test_drop_tail_bottleneck_shapes_and_drops(dumbbell, qdisc, buffer):
    dumbbell.install(qdisc, buffer)
    before = dumbbell.leaf()
    assert before["kind"] == qdisc and before["sent_packets"] == 0
    client = dumbbell.start(0, 3, 5301)
    peak = 0
    while client.poll() is None:
        peak = max(peak, dumbbell.leaf()["backlog_packets"])
        time.sleep(0.1)
    goodput = dumbbell.goodput_bps(dumbbell.result(client))
    leaf = dumbbell.leaf()
    # htb holds the flow to the link rate (payload is 1448 of every 1514 bytes), and TCP fills it
    assert 0.4 * dumbbell.rate_bps < goodput < 0.97 * dumbbell.rate_bps
    # a full drop-tail queue: TCP overflowed it, and it never held more than its limit (20 wire packets)
    assert leaf["dropped"] > 0 and leaf["sent_packets"] > 1000
    assert 0 < peak <= 20
    # packets at the bottleneck are wire-sized: no GSO super-packets slip past the limit (docs/architecture.md)
    assert leaf["sent_bytes"] / leaf["sent_packets"] <= 1514


def test_stats_read_the_root_shaper(dumbbell):
    htb = dumbbell.rows()[0]
    assert htb["kind"] == "htb" and htb["parent"] == "root" and htb["sent_packets"] > 0
    (cls,) = stats.read_classes(dumbbell.commands, dumbbell.router_ns, dumbbell.dev)
    assert cls["kind"] == "htb" and cls["handle"] == "1:1" and cls["leaf"] == "10:"
    assert cls["sent_packets"] == htb["sent_packets"]
