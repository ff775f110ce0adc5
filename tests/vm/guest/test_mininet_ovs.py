"""The mininet testbed on a distribution kernel: Open vSwitch's kernel datapath and TCLink's netem delay, which the
host's kernel lacks. Runs inside the vm guest (tests/vm/test_vm_tier.py).

* the testbed itself: the bridges are on the kernel datapath (ovs-system), TCLink put 10 ms of netem on each
  router's host side, a ping crosses both (>= 20 ms), and nothing is left afterwards;
* the default spec with 20 ms of RTT (2 alike cubic flows, shortened) runs end to end through `ccrig run` on
  mininet: both flows carry data (iperf3's count, at least a fifth of the link under TCG), ccrig's goodput
  agrees with iperf3's, and no measured RTT is below the configured one.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ccrig.experiments import spec as specmod
from ccrig.commands import Commands
from ccrig.topologies.testbeds.mininet import MininetTestbed, leftovers, switches

ROOT = Path(__file__).resolve().parents[3]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.app import main; main()"]


def default_spec(**changes) -> dict:
    raw = yaml.safe_load((ROOT / "experiments/specs/default.yaml").read_text())
    raw.update(changes)
    return raw


def ovs_running() -> bool:
    return subprocess.run([switches.OVS_CTL, "status"], capture_output=True).returncode == 0


def test_kernel_datapath_and_tclink_delay(tier_modules):
    raw = default_spec(testbed="mininet", mininet={"switch": "ovs"}, flows=[{"count": 2}])
    raw["topology"]["rtt"] = "20ms"
    exp = specmod.validate(raw, "test")
    topo = exp.topology.build(exp.n_flows)
    prefix = f"ccrig-vmmn{os.getpid()}"
    was_running = ovs_running()
    tb = MininetTestbed(topo, Commands(None), prefix, exp.mininet)
    try:
        tb.up()
        assert tb.switch == "ovs"
        dps = subprocess.run(["ovs-dpctl", "dump-dps"], capture_output=True, text=True).stdout
        assert "system@ovs-system" in dps, dps
        dp = subprocess.run(["ovs-vsctl", "get", "bridge", tb.names.switch(0), "datapath_type"],
                            capture_output=True, text=True).stdout.strip().strip('"')
        assert dp in ("", "system"), dp
        # TCLink carries the added delay: netem on the routers' egress toward the hosts, half the RTT each
        for router, host in (("r1", "s1"), ("r2", "d1")):
            shown = tb.run(router, ["tc", "qdisc", "show", "dev", tb.egress_device(router, host)]).stdout
            assert re.search(r"netem .*delay 10(\.0)?ms", shown), shown
        # the bottleneck is ours: htb + pfifo on r1 toward r2
        shown = tb.run("r1", ["tc", "qdisc", "show", "dev", tb.egress_device("r1", "r2")]).stdout
        assert "htb 1:" in shown and "pfifo 10:" in shown, shown
        out = tb.run("s1", ["ping", "-c", "4", "-i", "0.3", "-W", "5", tb.address("d1")], timeout=30).stdout
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
        assert len(rtts) == 4 and min(rtts) >= 20.0, out
    finally:
        tb.down()
    assert leftovers(prefix) == []
    assert not [n for n in os.listdir("/sys/class/net") if n.startswith(tb.names.switch(0)[:-2])]
    if not was_running:
        assert not ovs_running()


def _run(tmp_path: Path, testbed: str, *extra: str) -> tuple[Path, dict]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(default_spec()))
    out = tmp_path / testbed
    p = subprocess.run([*CCRIG, "run", str(spec), "--out", str(out), "--no-progress", "--prometheus", "off",
                        "--set", f"testbed={testbed}", "--set", "topology.rtt=20ms",
                        "--set", "flows=[{count: 2, cc: cubic}]", "--set", "duration=10s",
                        "--set", "repetitions=1",   # the default spec's four: four times the TCG time
                        # no reruns: under TCG the fidelity monitor spoils every attempt (min RTT 21.6-23.6 ms
                        # against 21.4 allowed, goodput 0.78 of T_max: the emulated CPU), and the two reruns alone
                        # tripled this test's time (316 s of the guest tier's 892); the spoiled attempt is kept
                        # as the pair's record, which is all the mechanics asserted here need
                        "--reruns", "0", *extra],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    run = next(out.iterdir())
    return run, json.loads((run / "summary.json").read_text())


def _diagnose(run: Path) -> str:
    """What to look at when a run measured nothing: the guest's archive is gone once the guest powers off."""
    rep = run / "points/000/rep0"
    parts = [f"intervals.csv:\n{(rep / 'intervals.csv').read_text()[:600]}"]
    for f in sorted(rep.glob("iperf3-*.json")):
        data = json.loads(f.read_text() or "{}")
        parts.append(f"{f.name}: error={data.get('error')} end={json.dumps(data.get('end', {}).get('sum_received'))}")
    log = (run / "commands.log").read_text().splitlines()
    parts.append("commands.log (iperf3, sampler):\n" + "\n".join(l[:200] for l in log if "iperf3" in l or "sampler" in l))
    return "\n".join(parts)


def _iperf3_bytes(summary: dict) -> list[int]:
    return [c["iperf3_bytes_received"] for c in summary["points"][0]["repetitions"][0]["cross_check"]]


@pytest.mark.timeout(900)  # a run on an emulated CPU
def test_default_spec_runs_with_kernel_ovs_and_delay(tier_modules, tmp_path):
    """The default spec on mininet (kernel OVS, TCLink delay) in this guest: an emulated CPU, not the link, sets
    what the flows get, so they are held to a floor well under the link rate (the same spec on netns here is
    the host tier's and keshav's), and ccrig's own measurement against iperf3's count."""
    run, summary = _run(tmp_path, "mininet", "--set", "mininet.switch=ovs")
    assert summary["testbed"] == "mininet" and summary["complete"]
    assert "mnexec -a" in (run / "commands.log").read_text()
    assert leftovers(f"ccrig-{run.name.rsplit('-', 1)[1]}") == []
    # what each flow delivered, by iperf3's own count: under TCG the CPU limits both (seen: 6.2 MB on mininet,
    # 5.0 MB on netns in 10 s of a 10 Mbit/s link, 12.5 MB), so the floor is a fifth of the link: the emulated
    # network is whole and carries both flows
    got = _iperf3_bytes(summary)
    link_bytes = 10e6 / 8 * summary["intervals"] * summary["interval_s"]
    assert len(got) == 2 and sum(got) >= 0.2 * link_bytes, f"mininet {got} of {link_bytes:.0f}\n" + _diagnose(run)
    assert all(g > 0.25 * sum(got) for g in got), got
    # ccrig's own measurement (the TCP_INFO sampler) agrees with iperf3
    point = summary["points"][0]
    seconds = summary["intervals"] * summary["interval_s"]
    assert point["system"]["goodput_bps"]["mean"] >= 0.8 * 8 * sum(got) / seconds, \
        f"the sampler measured {point['system']['goodput_bps']} while iperf3 received {got} bytes\n" + _diagnose(run)
    with open(run / "points/000/rep0/trace.csv") as f:
        srtt = [float(r["srtt_s"]) for r in csv.DictReader(f) if r["srtt_s"] not in ("", "0", "0.0")]
    assert srtt and min(srtt) >= 0.020, srtt[:5]
