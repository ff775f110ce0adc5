"""The interactive workload (Keshav 003's Telnet source): a message of `size` bytes (a keystroke: 40b) after each
think time, `think` seconds on average, exponential or fixed (`gaps`), over one TCP connection with the flow's
congestion control (sources.py msg-send / msg-recv). Each message is one segment (TCP_NODELAY) carrying its
send time; the receiver logs when it read the whole message. What matters is its delay: summary.json's
`interactive` has per flow the per-message latency from send to receipt at the far end (mean, p50, p99), the
messages sent and received, and the goodput they make; the TCP_INFO sampler measures the connection as any
TCP flow's (intervals.csv, Prometheus).

    flows: [{cc: cubic, workload: {kind: interactive, size: 40b, think: 5s, gaps: exponential}}]

On the hosts testbed the latency is off by the receiver's clock offset minus the sender's (packets.py).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from ccrig.fields import SizeField, TimeField
from ccrig.units import Size
from ccrig.experiments.workloads import packets as pk
from ccrig.experiments.workloads.base import Flow, Workload
from ccrig.experiments.workloads.udp import SOURCES, Datagrams

MIN_MESSAGE = 16     # sources.py's message header: sequence, send time


class Interactive(Workload):
    """Small TCP messages after think times (Telnet)."""
    kind: Literal["interactive"] = "interactive"
    size: SizeField = Size(bytes=40)
    think: TimeField = 5.0
    gaps: Literal["exponential", "fixed"] = "exponential"

    program = "sources"
    output = "sender-{index}.json"
    server_output = "receiver-{index}.jsonl"
    script = True
    wait_go = ("--wait-go",)   # a Python start takes seconds in a guest under TCG (vm): parked ahead

    @field_validator("size")
    @classmethod
    def _message(cls, v):
        if v.bytes is None or not MIN_MESSAGE <= v.bytes <= 65536:
            raise ValueError(f"expected a message size from {MIN_MESSAGE}b (the sources' header) to 64kib, "
                             f"in bytes such as \"40b\"")
        return v

    @field_validator("think")
    @classmethod
    def _think(cls, v):
        if v <= 0:
            raise ValueError('expected a positive mean think time such as "5s" or "50ms"')
        return v

    def server_argv(self, flow: Flow, bind: str) -> list[str]:
        return [str(SOURCES), "msg-recv", "--bind", bind, "--port", str(flow.server_port),
                "--key", flow.receiver_key, "--size", str(self.size.bytes)]

    def client_argv(self, flow: Flow, server: str) -> list[str]:
        return [str(SOURCES), "msg-send", "--to", server, "--port", str(flow.server_port),
                "--cport", str(flow.client_port), "--size", str(self.size.bytes), "--think", f"{self.think:g}",
                "--gaps", self.gaps, "--duration", f"{flow.duration:g}", "--cc", flow.cc, *flow.seed_argv]

    # the same sender report and receiver log as the UDP sources (sources.py writes both)
    result = Datagrams.result
    received_bytes = Datagrams.received_bytes

    @classmethod
    def summary(cls, flows: list[Flow], results: dict[int, Any]) -> dict:
        out = []
        for f in flows:
            snd, got = results[f.index]["sender"], results[f.index]["receiver"].packets
            span = snd["t_end"] - snd["t_start"]
            out.append({"flow": f.index, "size_bytes": f.workload.size.bytes, "think_s": f.workload.think,
                        "gaps": f.workload.gaps, "sender_messages": snd["sent"], "receiver_messages": len(got),
                        "sender_vs_receiver": len(got) / snd["sent"] - 1 if snd["sent"] else None,
                        "latency_s": pk.distribution([p.delay for p in got]),
                        "goodput_bps": 8 * sum(p.size for p in got) / span if span > 0 else None})
        return {"interactive": out}
