"""A real dumbbell for qdisc tests: sender/receiver pairs through r1 ==(rate, discipline)==> r2 on the netns
testbed, with TCP flows and the bottleneck's counters. Shared by the host tier (tests/host/test_qdisc_bottleneck.py)
and the vm tier (tests/vm/guest/test_qdiscs.py), which runs every other discipline the same way on a distribution
kernel."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from ccrig.commands import Commands
from ccrig.units import parse_size
from ccrig.qdiscs import from_spec, stats
from ccrig.qdiscs.shaper import shaped_argv
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.testbeds.netns import NetnsTestbed

# names of everything a test makes start with this (ccrig's own prefix, so `ccrig clean` finds leftovers)
PREFIX = os.environ.get("CCRIG_TEST_PREFIX", "ccrig-t")


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces and tc)")


class Dumbbell:
    """pairs sender/receiver pairs through r1 ==(rate, discipline)==> r2, realised by the netns testbed.

    install() swaps the bottleneck's discipline in place, so one testbed serves many disciplines."""

    def __init__(self, name: str, rate: str = "10mbit", buffer: str = "50pkt", qdisc="pfifo", pairs: int = 1,
                 rtt: str = "0ms", access: str | None = None):
        spec = DumbbellSpec.model_validate({"name": "dumbbell", "bottleneck": {"rate": rate, "buffer": buffer,
                                            "qdisc": from_spec(qdisc)}, "pairs": pairs, "rtt": rtt,
                                            "access": {"rate": access}})
        self.spec = spec
        self.topo = spec.build(pairs)
        self.commands = Commands()
        self.tb = NetnsTestbed(self.topo, self.commands, f"{PREFIX}{name}{os.getpid()}")
        self.procs: list[subprocess.Popen] = []
        self.server_of: dict[int, subprocess.Popen] = {}
        self.dev = self.tb.egress_device("r1", "r2")
        self.rate_bps = spec.bottleneck.rate.bps(self.topo.wire)

    def __enter__(self):
        try:
            self.tb.up()
        except BaseException:
            self.tb.down()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
            p.wait()
        self.tb.down()

    @property
    def router_ns(self) -> str:
        return self.tb.ns("r1")

    def sources(self) -> list[str]:
        return [self.tb.address(s) for s, _ in self.topo.pairs]

    def install(self, qdisc, buffer: str | None = None) -> None:
        """Replaces the bottleneck's tree: htb at the rate, the discipline under it (one drr class per pair)."""
        self.commands.run(["tc", "qdisc", "del", "dev", self.dev, "root"], ns=self.router_ns)
        size = parse_size(buffer) if buffer else self.spec.bottleneck.buffer
        for argv in shaped_argv(self.dev, self.rate_bps, from_spec(qdisc), size, self.topo.mtu,
                                flows=len(self.topo.pairs), flow_sources=self.sources()):
            self.commands.run(argv, ns=self.router_ns)

    def rows(self) -> list[dict]:
        return stats.read(self.commands, self.router_ns, self.dev)

    def leaf(self) -> dict:
        """The discipline under the shaper (handle 10:)."""
        return next(r for r in self.rows() if r["handle"] == "10:")

    def samples(self, seconds: float, every: float = 0.05) -> list[dict]:
        """The discipline's row (handle 10:) every `every` s for `seconds`. One `tc -batch` on the router
        answers every sample: starting a process per sample costs over a second in an emulated guest whose
        root file system is shared over 9p (the VM tier)."""
        script = ("import subprocess, sys, time\n"
                  "tc = subprocess.Popen(['tc', '-s', '-j', '-batch', '-'], stdin=subprocess.PIPE, text=True)\n"
                  f"end = time.monotonic() + {seconds}\n"
                  "while time.monotonic() < end:\n"
                  f"    tc.stdin.write('qdisc show dev {self.dev}\\n'); tc.stdin.flush(); time.sleep({every})\n"
                  "tc.stdin.close(); sys.exit(tc.wait())\n")
        proc = self.tb.popen("r1", [*self.tb.python("r1"), "-c", script], stdout=subprocess.PIPE)
        self.procs.append(proc)
        out, _ = proc.communicate(timeout=seconds + 120)
        rows = [next(r for r in stats.parse(line) if r["handle"] == "10:")
                for line in out.decode().splitlines() if line.startswith("[")]
        assert rows, f"no sample of {self.dev} in {seconds:g} s; the sampler printed {out[:300]!r}"
        return rows

    def start(self, pair: int, seconds: float, port: int, udp_bps: float | None = None,
              omit: int = 0, parallel: int = 1) -> subprocess.Popen:
        """An iperf3 flow (or `parallel` flows) from sender to receiver of pair (0-based): TCP, or UDP at
        udp_bps (unresponsive); the first `omit` seconds are left out of iperf3's totals."""
        s, d = self.topo.pairs[pair]
        server = self.tb.popen(d, ["iperf3", "-s", "-1", "-B", self.tb.address(d), "-p", str(port)])
        self.procs.append(server)
        argv = ["iperf3", "-c", self.tb.address(d), "-p", str(port), "-t", f"{seconds:g}", "-O", str(omit),
                "-P", str(parallel), "-J"]
        if udp_bps:
            argv += ["-u", "-b", f"{round(udp_bps)}", "-l", "1400"]
        for _ in range(50):  # until the server listens
            if self.tb.run(d, ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip():
                break
            time.sleep(0.1)
        client = self.tb.popen(s, argv, stdout=subprocess.PIPE)
        self.procs.append(client)
        self.server_of[client.pid] = server
        return client

    def rx_bytes(self, node: str) -> int:
        """Bytes (Ethernet frames) the node's first interface has received."""
        out = self.tb.run(node, ["ip", "-j", "-s", "link", "show", "dev", "eth0"]).stdout
        return json.loads(out)[0]["stats64"]["rx"]["bytes"]

    def stop(self, client: subprocess.Popen) -> None:
        """Ends a flow early (its client and its server); its results are given up."""
        for p in (client, self.server_of.pop(client.pid)):
            if p.poll() is None:
                os.killpg(p.pid, 9)
            p.wait()

    @staticmethod
    def result(client: subprocess.Popen, timeout: float = 60) -> dict:
        out, _ = client.communicate(timeout=timeout)
        data = json.loads(out)
        assert "error" not in data, data.get("error")
        return data

    @staticmethod
    def goodput_bps(result: dict) -> float:
        """Payload the receiver got per second (TCP and UDP alike)."""
        return result["end"]["sum_received"]["bits_per_second"]

    @staticmethod
    def offered_bps(result: dict) -> float:
        """Payload the sender put on its way per second."""
        return result["end"]["sum_sent"]["bits_per_second"]
