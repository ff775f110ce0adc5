"""What the UDP sources (cbr.py, poisson.py, onoff.py, flood.py) share: packets of `size` bytes from sources.py's
udp-send to its udp-recv, no flow control, measured at the receiver.

A UDP flow has no TCP socket for the TCP_INFO sampler: its receiver prints the sampler's line format itself
(sources.py), with delivered bytes as `bytes_acked` (goodput: unique payload delivered per second) and the
payload the sender had sent by then, read from the packets' headers, as `bytes_sent` (throughput). The runner
reads that log instead of a sampler (collectors.ReceiverLog) and its interval rows come from interval() below:
loss is the packets missing from the sequence, retransmissions are none, and there is no RTT.

    flows:
      - {workload: {kind: poisson, rate: 1000pps, size: 1472b}}
      - {workload: {kind: cbr, rate: 5mbit}}
      - {workload: {kind: onoff, rate: 5mbit, on: 300s, off: 300s, periods: exponential}}
      - {workload: {kind: flood}}

A rate in bits per second counts whole Ethernet frames, as a link's rate does: payload + 42 bytes (UDP 8, IP 20,
Ethernet 14); `5mbit` of 1472-byte packets is 412.8 packets/s. `100pps` is packets per second.

The program is ours, not iperf3 -u: measured here (2 cores, kernel 6.18, namespaces over one veth pair, 1000
packets/s of 1472 bytes for 10 s, gaps from the receiver's kernel timestamps) sources.py's cbr gave 1000.0
packets/s, gaps p1/p50/p99 356/1000/1133 us, CV 0.27; iperf3 -u -b 11.776M gave 1000.1 packets/s, gaps
14/1000/1336 us, CV 0.28 (the same wake-up noise of a busy VM, plus iperf3's bursts: two packets 14 us apart
where one pacing tick ran late). Only ours has a Poisson schedule: 10098 packets in 10 s (1009.9/s, the
expected 1000 +- 100), interarrival CV 0.999. So one program serves every pattern and logs every packet with
its send time for the one-way delay. Its paced senders run at the lowest real-time priority where allowed
(sources.py: _fine_timers): with the other cores busy (load 4.5) a 2000 packets/s Poisson stream otherwise
reached the receiver with CV 1.65, the sender stalled for up to 24 ms at a time; with it 1.14, from one 35 ms
stall of the whole VM at 0.5 ms mean gaps, and at 1000 packets/s CV 1.014 and 995.7 packets/s over 15 s
(tests/host/test_sources.py). A stall of S seconds adds about (S/gap)^2 / n to CV^2 over n gaps: expect a
CV above 1 on a loaded machine, and measure long at low rates.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import field_validator

from ccrig.analysis import metric_table, metrics
from ccrig.analysis.intervals import FlowSeries, flow_interval
from ccrig.fields import SizeField
from ccrig.units import Size
from ccrig.experiments.workloads import packets as pk
from ccrig.experiments import nodes
from ccrig.experiments.workloads.base import Flow, Workload

SOURCES = nodes.SOURCES
HEADERS = 42            # bytes around a UDP payload on the wire: UDP 8 + IPv4 20 + Ethernet 14
MAX_PAYLOAD = 1472      # the most a 1500-byte MTU carries unfragmented
MIN_PAYLOAD = 24        # sources.py's header: sequence, send time, bytes sent


class Datagrams(Workload):
    """The UDP sources' common part; a kind module names the pattern."""
    size: SizeField = Size(bytes=MAX_PAYLOAD)

    program = "sources"
    output = "sender-{index}.json"
    server_output = "receiver-{index}.jsonl"
    script = True
    tcp_info = False
    congestion_control = False
    wait_go = ("--wait-go",)   # a Python start takes seconds in a guest under TCG (vm): parked ahead
    pattern: ClassVar[str] = ""

    @field_validator("size")
    @classmethod
    def _payload(cls, v):
        if v.bytes is None or not MIN_PAYLOAD <= v.bytes <= MAX_PAYLOAD:
            raise ValueError(f"expected a UDP payload from {MIN_PAYLOAD}b (the sources' header) to "
                             f"{MAX_PAYLOAD}b (one 1500-byte frame), in bytes such as \"1472b\"")
        return v

    def pps(self) -> float:
        """Packets per second of the pattern (0: as fast as the sender can)."""
        rate = getattr(self, "rate", None)
        if rate is None:
            return 0.0
        return rate.packets_per_s if rate.packets_per_s is not None else rate.bits_per_s / (8 * self.frame)

    @property
    def frame(self) -> int:
        return self.size.bytes + HEADERS

    def pattern_argv(self) -> list[str]:
        """The sender's words for the pattern besides --pattern and --pps."""
        return []

    # --- programs -------------------------------------------------------------------------------------------
    def server_argv(self, flow: Flow, bind: str) -> list[str]:
        return [str(SOURCES), "udp-recv", "--bind", bind, "--port", str(flow.server_port), "--key", flow.receiver_key]

    def client_argv(self, flow: Flow, server: str) -> list[str]:
        return [str(SOURCES), "udp-send", "--to", server, "--port", str(flow.server_port),
                "--cport", str(flow.client_port), "--size", str(self.size.bytes), "--duration", f"{flow.duration:g}",
                "--pattern", self.pattern, "--pps", f"{self.pps():.6g}", *self.pattern_argv(), *flow.seed_argv]

    transport = "u"

    # --- measurement -------------------------------------------------------------------------------------------
    def interval(self, series: FlowSeries, a: float, b: float, share: float) -> dict:
        row = flow_interval(series, a, b, share)
        offered = series.delta("data_segs_out", a, b)
        lost = max(0.0, offered - series.delta("data_segs_in", a, b))
        # what only TCP measures (RTT, cwnd) a datagram flow has not: none, not flow_interval's zeros
        row.update({m.name: None for m in metric_table.TABLE if m.tcp_only})
        row.update(loss=metrics.ratio(lost, offered), retrans_rate=0.0, segs_sent=offered, segs_retrans=0.0,
                   segs_lost=lost)
        return row

    def result(self, flow: Flow, out_dir: Path) -> dict[str, Any]:
        return {"sender": pk.read_sender(out_dir / flow.output_name,
                                         f"{self.kind} sender of flow {flow.index} ({flow.sender} -> {flow.receiver})"),
                "receiver": pk.read_log(out_dir / self.server_output.format(index=flow.index), flow.receiver_key)}

    def received_bytes(self, flow: Flow, result: dict) -> int:
        return result["receiver"].counters.get("bytes_received", 0)

    def measured(self, result: dict) -> dict:
        """One flow's entry in summary.json under its kind: the sender's counts against the receiver's (packets
        the sender says it sent, and the ones the receiver saw numbered), delivered rate and loss, one-way delay,
        jitter and interarrival times, all from the receiver's log."""
        snd, log = result["sender"], result["receiver"]
        got = log.packets
        gaps = pk.interarrivals(got)
        span = sum(gaps)
        mean_gap = span / len(gaps) if gaps else None
        sd = (sum((g - mean_gap) ** 2 for g in gaps) / len(gaps)) ** 0.5 if gaps else None
        offered = log.counters.get("data_segs_out", 0)
        return {
            "kind": self.kind, "size_bytes": self.size.bytes, "scheduled_pps": self.pps() or None,
            "sender_packets": snd["sent"], "sender_errors": snd["errors"], "receiver_packets": len(got),
            "receiver_numbered": offered,
            # the sender's count against what the receiver saw numbered (the last packets lost would be missing)
            "sender_vs_receiver": offered / snd["sent"] - 1 if snd["sent"] else None,
            "loss": 1 - len(got) / snd["sent"] if snd["sent"] else None,
            "delivered_pps": len(gaps) / span if span > 0 else None,
            "delivered_bps": 8 * sum(p.size for p in got[1:]) / span if span > 0 else None,
            "delivered_wire_bps": 8 * (len(got) - 1) * self.frame / span if span > 0 else None,
            "one_way_delay_s": pk.distribution([p.delay for p in got]),
            "jitter_s": pk.jitter(got),
            "interarrival_s": {"mean": mean_gap, "cv": sd / mean_gap if mean_gap else None},
        }

    @classmethod
    def summary(cls, flows: list[Flow], results: dict[int, Any]) -> dict:
        """Under the kind's name (`poisson`, `cbr`, ...): one entry per flow of that kind (measured())."""
        return {flows[0].workload.kind: [{"flow": f.index, **f.workload.measured(results[f.index])} for f in flows]}
