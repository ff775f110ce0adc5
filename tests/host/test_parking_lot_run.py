"""A parking lot on this kernel: the long flow's packets cross every hop and each short flow's one (each hop's
qdisc counted them, against the senders' own TCP_INFO), and the fair shares are the max-min ones."""
import csv
import json

import pytest

from support.archive import sent_between

from ccrig.analysis.metrics import payload_capacity

C = payload_capacity(10e6 * 1514 / 1514, 1500)   # one hop's payload capacity at 10 Mbit/s


def test_three_hops_one_long_flow_and_a_short_one_per_hop(ccrig):
    spec = {"name": "lot", "testbed": "netns", "duration": "8s", "interval": "1s", "warmup": 1,
            "topology": {"name": "parking_lot", "hops": 3, "link": {"rate": "10mbit", "buffer": "50pkt"},
                         "pairs": {"long": 1, "short": 1}},
            "flows": [{"cc": "reno"}, {"count": 3, "cc": "reno"}]}
    p = ccrig.run(spec, timeout=180)
    assert p.returncode == 0, p.stderr
    run = ccrig.run_dirs()[-1]
    rep = run / "points/000/rep0"
    point = json.loads((run / "summary.json").read_text())["points"][0]
    # the network carries three hops' worth at most (the long flow idle); each flow's share is half a hop
    assert point["t_max_bps"] == pytest.approx(3 * C, rel=1e-6)
    with open(rep / "intervals.csv") as f:
        rows = list(csv.DictReader(f))
    assert all(float(r["fair_share_bps"]) == pytest.approx(C / 2, rel=1e-6) for r in rows if r["flow"] != "all")
    # each hop's qdisc sent what its flows' senders put on the wire: the long flow on all three, short i on hop i
    with open(rep / "trace.csv") as f:
        trace = list(csv.DictReader(f))
    with open(rep / "qdisc.csv") as f:
        q = [r for r in csv.DictReader(f) if r["parent"] == "root"]
    for hop, short in ((("r0", "eth0"), "1"), (("r1", "eth1"), "2"), (("r2", "eth1"), "3")):
        rows_hop = [r for r in q if (r["node"], r["dev"]) == hop]
        assert rows_hop, (hop, {(r["node"], r["dev"]) for r in q})
        through = int(rows_hop[-1]["sent_bytes"]) - int(rows_hop[0]["sent_bytes"])
        t0, t1 = float(rows_hop[0]["t"]), float(rows_hop[-1]["t"])
        sent = {fl: sent_between(trace, fl, t0, t1) for fl in "0123"}
        payload = sent["0"] + sent[short]
        # the qdisc counts frames (payload + 66 bytes of headers per 1448): within 5 % of the payload's share
        assert payload * 0.95 <= through * 1448 / 1514 <= payload * 1.05, (hop, through, payload)
