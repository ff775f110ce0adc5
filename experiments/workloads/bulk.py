"""The bulk workload: an always-backlogged TCP flow, one iperf3 client -> server pair with its own congestion
control (`-C`), its data connection pinned to the flow's client port. The client's JSON (which carries the
receiver's totals too) is kept in the archive as iperf3-<flow>.json.

    flows: [{cc: cubic}]          # bulk is the default workload; `workload: bulk` says it
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

from ccrig.errors import PathError, RunError
from ccrig.experiments.workloads.base import Flow, Workload


class Bulk(Workload):
    """An always-backlogged TCP flow (iperf3)."""
    kind: Literal["bulk"] = "bulk"

    program = "iperf3"
    output = "iperf3-{index}.json"
    report_optional = True   # its goodput, loss and windows are the sockets'; the JSON's bytes cross-check them

    def server_argv(self, flow: Flow, bind: str) -> list[str]:
        return ["iperf3", "--server", "--one-off", "--bind", bind, "--port", str(flow.server_port)]

    def client_argv(self, flow: Flow, server: str) -> list[str]:
        return ["iperf3", "--client", server, "--port", str(flow.server_port), "--cport", str(flow.client_port),
                "--time", str(math.ceil(flow.duration)), "--congestion", flow.cc, "--json", "--interval", "1"]

    def result(self, flow: Flow, out_dir: Path) -> dict:
        """The client's iperf3 JSON; a client that failed raises with iperf3's own error."""
        text = (out_dir / flow.output_name).read_text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise RunError(f"iperf3 client of flow {flow.index} wrote no JSON: {text.strip()[:200]}") from None
        if "error" in data:
            # the data connection's handshake timed out: its SYNs met the path's loss (the control connection is
            # exempt, topologies/loss/loss.bpf.c), so the path refused this repetition, not the rig
            kind = PathError if "unable to connect stream" in data["error"] and "timed out" in data["error"] \
                else RunError
            raise kind(f"iperf3 flow {flow.index} ({flow.sender} -> {flow.receiver}, cc {flow.cc}): "
                           f"{data['error']}")
        return data

    def received_bytes(self, flow: Flow, result: dict) -> int:
        return result["end"]["sum_received"]["bytes"]
