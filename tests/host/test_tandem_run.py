"""A tandem on this kernel through the real `ccrig run`: the flows sit on the pairs in the documented order, each
hop's qdisc sent what its flows' senders put on the wire (the through flow on all three hops, cross flow i on hop i
alone, against the senders' own TCP_INFO), and the fair shares in the archive are the max-min ones (C/2 each)."""
import csv
import json

import pytest

from support.archive import sent_between

from ccrig.analysis.metrics import payload_capacity
from ccrig.topologies.named.tandem import TandemSpec

C = payload_capacity(10e6, 1500)   # one hop's payload capacity at 10 Mbit/s
TOPOLOGY = {"name": "tandem", "hops": 3, "link": {"rate": "10mbit", "buffer": "50pkt", "qdisc": {"kind": "pfifo"}},
            "pairs": {"through": 1, "cross": 1}}


def test_three_hops_one_through_flow_and_one_cross_flow_per_hop(ccrig):
    spec = {"name": "tandem", "testbed": "netns", "duration": "8s", "interval": "1s", "warmup": 1,
            "topology": TOPOLOGY, "flows": [{"cc": "reno"}, {"count": 3, "cc": "reno"}]}
    p = ccrig.run(spec, timeout=180)
    assert p.returncode == 0, p.stderr
    run = ccrig.run_dirs()[-1]
    rep = run / "points/000/rep0"
    point = json.loads((run / "summary.json").read_text())["points"][0]
    # flows on the pairs in the docstring's order: the through pair first, then hop 1's, 2's, 3's cross pairs
    assert [(f["sender"], f["receiver"]) for f in point["flows"]] == [("t1", "t1d"), ("c1_1", "c1_1d"),
                                                                       ("c2_1", "c2_1d"), ("c3_1", "c3_1d")]
    # the network carries three hops' worth at most (the through flow idle); every flow's max-min share is half
    # a hop, the through flow's included, in the summary and in every interval
    assert point["t_max_bps"] == pytest.approx(3 * C, rel=1e-6)
    assert point["fair_share_bps"] == pytest.approx(C / 2, rel=1e-6)
    shares = point["repetitions"][0]["flows"]
    assert shares[0]["fair_share_bps"]["mean"] == pytest.approx(C / 2, rel=1e-6)
    with open(rep / "intervals.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["flow"] != "all"]
    assert rows and all(float(r["fair_share_bps"]) == pytest.approx(C / 2, rel=1e-6) for r in rows)
    # each hop's qdisc sent what its flows' senders put on the wire
    with open(rep / "trace.csv") as f:
        trace = list(csv.DictReader(f))
    with open(rep / "qdisc.csv") as f:
        q = [r for r in csv.DictReader(f) if r["parent"] == "root"]
    topo = TandemSpec.model_validate(TOPOLOGY).build(4)
    for (a, b), cross in zip(topo.queues(), "123"):
        hop = (a, topo.egress_of(a, b).name)
        rows_hop = [r for r in q if (r["node"], r["dev"]) == hop]
        assert rows_hop, (hop, {(r["node"], r["dev"]) for r in q})
        through = int(rows_hop[-1]["sent_bytes"]) - int(rows_hop[0]["sent_bytes"])
        t0, t1 = float(rows_hop[0]["t"]), float(rows_hop[-1]["t"])
        sent = {fl: sent_between(trace, fl, t0, t1) for fl in "0123"}
        payload = sent["0"] + sent[cross]
        # the qdisc counts frames (payload + 66 bytes of headers per 1448): within 5 % of the payload's share
        assert payload * 0.95 <= through * 1448 / 1514 <= payload * 1.05, (hop, through, payload)
