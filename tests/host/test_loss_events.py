"""Random loss and link events on this kernel (no netem): random loss by the BPF program, link events, per-sender TCP
settings, max_window, a flow's stop, and bad input refused before anything is set up. Physics is checked against our
own measurement: the program's counters and the receiver's count, the senders' 20 ms trace, the namespaces' sysctls."""
import csv
import json
import math
import subprocess
import time

import pytest
from conftest import ROOT, dumbbell, leftovers

from ccrig.ports import CLIENT_PORT, SERVER_PORT
from ccrig.topologies.loss import program
from ccrig.topologies.testbeds.netns import NetnsTestbed
from support import udp

PACKETS = 25000
OVERDISPERSION = 1.25   # the drop count's spread over the binomial's, measured (below)
PORT = 9000


def _udp_through(bed: NetnsTestbed, n: int) -> int:
    """Sends n UDP datagrams a -> b (100 bytes, a 2 ms pause every 200); returns how many b received."""
    rx = udp.receive(bed, "b", PORT)
    udp.send(bed, "a", bed.address("b"), PORT, n, 100, pause_every=200)
    return len(udp.received(rx))


def test_bpf_random_loss_is_binomial_and_counted(two_nodes):
    drop = program.LinkDropper(two_nodes, "a", "b", two_nodes.egress_device("a", "b"))
    drop.attach(program.build(two_nodes.commands))
    # 0 %: nothing dropped
    drop.set_loss(0.0)
    got = _udp_through(two_nodes, 2000)
    c0 = drop.counts()
    assert c0["dropped"] == 0 and got == 2000
    # 1 %: the measured ratio lies in the binomial 99 % interval, and the receiver got exactly what passed
    drop.set_loss(0.01)
    got = _udp_through(two_nodes, PACKETS)
    c = drop.counts()
    dropped, passed = c["dropped"], c["passed"] - c0["passed"]
    n = dropped + passed
    assert n >= PACKETS and got == passed
    # a 99.9 % binomial interval, widened by the spread measured here: 40 trials of 25000 packets dropped
    # 251.2 on average (binomial: 250) with a standard deviation of 18.8 (binomial: 15.7), as the kernel's
    # per-CPU bpf_get_prandom_u32 gives it; CI once saw 189 (3.9 binomial sds) with the machine fully busy
    half = 3.29 * OVERDISPERSION * math.sqrt(0.01 * 0.99 / n)
    assert abs(dropped / n - 0.01) <= half, (dropped, n)


def _events(run):
    with open(run / "points/000/rep0/events.csv") as f:
        return list(csv.DictReader(f))


def _rows(run, name):
    with open(run / "points/000/rep0" / name) as f:
        return list(csv.DictReader(f))


def test_outage_loss_stop_window_and_tcp_settings(ccrig):
    spec = dumbbell([{"cc": "reno", "tcp": {"sack": False}, "max_window": 5},
                     {"cc": "reno", "stop": "6s"}, {"cc": "reno"}], duration="9s",
                    events=[{"kind": "down", "link": "r1-r2", "at": "1.5s", "for": "0.2s", "every": "3s"}])
    spec["topology"]["loss"] = 0.01   # no rtt: this kernel has no netem for a delay
    path = ccrig.write(spec)
    p = subprocess.Popen(ccrig.argv(path), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # while it runs: sack off in s1's namespace only
    seen = {}
    deadline = time.time() + 60
    while time.time() < deadline and len(seen) < 2 and p.poll() is None:
        for node in ("s1", "s2"):
            r = subprocess.run(["ip", "netns", "exec", f"ccrig-{p.pid}-{node}", "sysctl", "-n",
                                "net.ipv4.tcp_sack"], capture_output=True, text=True)
            if r.returncode == 0 and (node != "s1" or r.stdout.strip() == "0"):
                seen[node] = r.stdout.strip()
        time.sleep(0.2)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert seen == {"s1": "0", "s2": "1"}
    run = ccrig.run_dirs()[-1]
    env = json.loads((run / "env.json").read_text())
    assert env["sender_tcp"]["0"]["s1"]["sysctls"]["net.ipv4.tcp_sack"] == {"before": "1", "after": "0"}
    assert "s2" not in env["sender_tcp"]["0"]
    assert env["links"]["0"]["loss"]["r2->d1"]["realised_by"].startswith("bpf")

    # one line per outage edge, at its time
    events = _events(run)
    assert [(e["action"], float(e["planned_t"])) for e in events] == [
        ("down", 1.5), ("up", 1.7), ("down", 4.5), ("up", 4.7), ("down", 7.5), ("up", 7.7)]
    trace = _rows(run, "trace.csv")
    # from when each outage was in force (its commands done) to when its end was asked for: on a busy machine
    # the commands can take most of the 0.2 s, and a window shorter than two trace periods shows nothing
    windows = [(float(down["t"]) + 0.02, float(up["asked_t"])) for down, up in zip(events[::2], events[1::2])]
    windows = [(a, b) for a, b in windows if b - a >= 0.04]
    assert windows, events
    for a, b in windows:
        for flow in "012":
            acked = {int(r["bytes_acked"]) for r in trace if r["flow"] == flow and a <= float(r["t"]) <= b}
            # sampled throughout (flow 1 only until it stops), and nothing acknowledged meanwhile
            assert len(acked) == (1 if flow != "1" or b < 6 else len(acked)), (flow, a, sorted(acked))

    # max_window: flow 0's cwnd never above 5 once connected (a socket still in SYN_SENT shows the kernel's
    # initial 10: the route's clamp reaches it at establishment, before it can send a byte)
    assert max(int(r["cwnd"]) for r in trace if r["flow"] == "0" and int(r["bytes_sent"]) > 0) <= 5
    # stop: flow 1 sends for its 6 s and nothing after. Its 6 s count from its first data (iperf3's clock starts
    # once it has connected), and its end takes iperf3's timer and its closing exchange, which a busy machine
    # delays (official CI on 4219937: still sending at 6.5 s of the run). One second allowed past them; a flow that
    # did not stop would send to the run's end at 9 s.
    f1 = [r for r in trace if r["flow"] == "1"]
    began = min(float(r["t"]) for r in f1 if int(r["bytes_sent"]) > 0)
    assert began < 1.5, began   # a later start would leave no time after its stop to see it stopped
    sent = [(float(r["t"]), int(r["bytes_sent"])) for r in f1]
    last = max(t for (t, b), (_, before) in zip(sent[1:], sent) if b > before)
    assert last <= began + 7, (began, last)
    # the others' fair share rises once it has left; flow 1's metrics cover its active intervals only
    rows = _rows(run, "intervals.csv")
    share = {(r["interval"], r["flow"]): r["fair_share_bps"] for r in rows}
    assert float(share[("8", "0")]) == pytest.approx(1.5 * float(share[("2", "0")]))
    assert share[("8", "1")] == ""
    summary = json.loads((run / "summary.json").read_text())
    rep = summary["points"][0]["repetitions"][0]
    assert rep["flows"][1]["goodput_bps"]["n"] == 5   # intervals 1..5 of 0..8 (0 is warm-up)
    # every drop counted: the links' drops are in the system's loss
    links = rep["links"]
    assert links["r2->d1"]["dropped"] > 0 and links["r1->r2 (ingress)"]["down_dropped"] > 0
    system = [r for r in rows if r["flow"] == "all"]
    assert sum(float(r["link_dropped"]) for r in system) > 0
    assert all(float(r["loss"]) > 0 for r in system if float(r["link_dropped"]) > 0)


@pytest.mark.parametrize("field,value,named", [
    ("topology.loss", "1.5", "topology.loss"),
    ("events", "[{kind: down, link: r1-r9, at: 1s}]", "events[0].link"),
    ("flows[0].stop", "0s", "flows[0].stop"),
    ("flows[0].max_window", "0", "flows[0].max_window"),
])
def test_bad_input_is_one_line_exit_2_nothing_set_up(ccrig, field, value, named):
    path = ccrig.write(dumbbell([{"cc": "reno", "start": "1s"}], duration="4s"))
    p = subprocess.Popen([*ccrig.argv(path), "--set", f"{field}={value}"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2
    line = err.strip()
    assert "\n" not in line and named in line, line
    assert not ccrig.run_dirs() and not leftovers(p.pid)


def test_a_connection_whose_retransmissions_are_lost_is_seen_backing_off(two_nodes):
    """The kernel's word for a flow the path stalls (Socket.backoff): none while iperf3's data flows, then,
    with every packet a -> b dropped, ss's backoff with TCP's own RTO and bytes acked, also after the client
    closed its end."""
    from types import SimpleNamespace
    from ccrig.experiments.workloads.bulk import Bulk
    from support.wait import listening, until
    # a flow's own ports (ccrig/ports.py): the loss program spares every other connection to a server port
    port, cport = SERVER_PORT + 300, CLIENT_PORT + 300
    flow = SimpleNamespace(sender="a", client_port=cport, server_port=port)
    server = two_nodes.popen("b", ["iperf3", "--server", "--one-off", "--port", str(port)])
    client = None
    try:
        listening(lambda argv: two_nodes.run("b", argv, check=False), port, 30)
        client = two_nodes.popen("a", ["iperf3", "--client", two_nodes.address("b"), "--port", str(port),
                                       "--cport", str(cport), "--time", "120"])
        acked = lambda: two_nodes.run("a", ["ss", "-Htni", "sport", "=", f":{cport}"], check=False).stdout
        until(lambda: "bytes_acked" in acked(), 30, "iperf3's data connection carrying data")
        assert _backoff(two_nodes, flow) is None and Bulk().connection(two_nodes, flow).state == "ESTAB"
        # at b's ingress, as a router's loss is: dropped on a's own egress, TCP sees the local drop and never
        # times out (it sends again when the qdisc takes packets)
        drop = program.LinkDropper(two_nodes, "a", "b", two_nodes.egress_device("b", "a"), hook="ingress")
        drop.attach(program.build(two_nodes.commands))
        drop.set_loss(1.0)
        said = until(lambda: _backoff(two_nodes, flow), 60, "the connection backing off")
        # Linux's RTO floor; data had flowed (more than the SYN's byte)
        assert said.backoff >= 1 and said.rto_ms >= 200 and said.bytes_acked > 1, said
        assert str(said) == f"backoff {said.backoff}, rto {said.rto_ms:g} ms, {said.bytes_acked} bytes acked"
        # iperf3 still writes while its data is lost: its socket holds data it has not sent (traffic._starved)
        assert Bulk().connection(two_nodes, flow).notsent > 0, Bulk().connection(two_nodes, flow)
        # both of the client's connections to the server's port, each with its own port: the data's backing off,
        # the control's (spared by the loss program) not
        both = dict(c.split(" ", 2)[1:] for c in Bulk().client_connections(two_nodes, flow).split("; "))
        assert len(both) == 2 and "backoff:" in both[f":{cport}"], both
        assert "backoff:" not in [v for k, v in both.items() if k != f":{cport}"][0], both
        # the client closes with its data unacked (its time is up): the socket backs off in FIN-WAIT-1 (CLOSING once
        # the server, its control connection gone, closes too), and is still the path's to refuse
        client.kill()
        client.wait(10)
        closed = lambda: [ln for ln in two_nodes.run("a", ["ss", "-Htna", "sport", "=", f":{cport}"], check=False)
                          .stdout.splitlines() if ln.split()[0] in ("FIN-WAIT-1", "CLOSING", "LAST-ACK")]
        until(closed, 30, "the data connection closed by the client, its FIN unacknowledged")
        assert until(lambda: _backoff(two_nodes, flow), 30, "the closing connection backing off")
        assert Bulk().connection(two_nodes, flow).state in ("FIN-WAIT-1", "CLOSING", "LAST-ACK")
    finally:
        for p in (client, server):
            if p is not None:
                p.kill()
                p.wait(10)


def _backoff(testbed, flow):
    """The flow's connection's backoff as ss says it (None: not backing off, or no connection)."""
    from ccrig.experiments.workloads.bulk import Bulk
    conn = Bulk().connection(testbed, flow)
    return conn.backoff if conn is not None else None
