"""The files workload (the PAUSE study): each flow sends a file of `size` bytes, waits `idle`, and repeats, over
one connection (filexfer.py, next to this module), and every transfer's completion time is kept in the archive
as transfers-<flow>.csv; summary.json's `transfers` has their count and completion times per flow.

    flows: [{count: 8, cc: reno, workload: {kind: files, size: 80kb, idle: 1s}}]
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Literal

from pydantic import field_validator

from ccrig.errors import RunError
from ccrig.fields import SizeField, TimeField
from ccrig.experiments.workloads.base import Flow, Workload
from ccrig.experiments import nodes
from ccrig.experiments.nodes.filexfer import FIELDS, Transfer, read_csv

FILEXFER = nodes.FILEXFER


class Files(Workload):
    """Finite files (the PAUSE study): each flow sends `size`, waits `idle`, and repeats (filexfer.py)."""
    kind: Literal["files"] = "files"
    size: SizeField
    idle: TimeField = 0.0

    program = "filexfer"
    output = "transfers-{index}.csv"
    script = True
    # a Python start takes seconds in a guest under TCG (vm), 8 of them at once over 10 s: started at its start
    # time a sender would begin late, past the measured intervals, so it connects ahead and waits
    wait_go = ("--wait-go",)

    @field_validator("size")
    @classmethod
    def _bytes(cls, v):
        if v.bytes is None or v.bytes < 1:
            raise ValueError('expected a file size in bytes such as "80kb"')
        return v

    def server_argv(self, flow: Flow, bind: str) -> list[str]:
        return [str(FILEXFER), "serve", "--bind", bind, "--port", str(flow.server_port)]

    def client_argv(self, flow: Flow, server: str) -> list[str]:
        return [str(FILEXFER), "send", "--to", server, "--port", str(flow.server_port),
                "--cport", str(flow.client_port), "--flows", "1", "--first-flow", str(flow.index),
                "--size", f"{self.size.bytes}b", "--idle", f"{self.idle:g}s", "--duration", f"{flow.duration:g}s",
                "--cc", flow.cc, "--out", "-"]

    def result(self, flow: Flow, out_dir: Path) -> list[Transfer]:
        """Every transfer of the flow, complete or not; a sender that failed raises with its own words."""
        path = out_dir / flow.output_name
        text = path.read_text()
        if not text.startswith(",".join(FIELDS)):
            raise RunError(f"files flow {flow.index} ({flow.sender} -> {flow.receiver}) failed: {text.strip()[:200]}")
        return read_csv(path)

    @classmethod
    def summary(cls, flows: list[Flow], results: dict[int, list[Transfer]]) -> dict:
        """`transfers`: per flow the count, the completed ones and their completion times (mean, median, max)."""
        out = []
        for f in flows:
            done = [t.completion_s for t in results[f.index] if t.completion_s is not None]
            out.append({"flow": f.index, "size_bytes": f.workload.size.bytes, "idle_s": f.workload.idle,
                        "transfers": len(results[f.index]), "completed": len(done),
                        "completion_s": {"mean": statistics.fmean(done) if done else None,
                                         "median": statistics.median(done) if done else None,
                                         "max": max(done, default=None)}})
        return {"transfers": {"flows": out, "completed": sum(e["completed"] for e in out),
                              "transfers": sum(e["transfers"] for e in out)}}
