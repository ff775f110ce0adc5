"""Ethernet PAUSE in a run: what the runner does for a pause_chain point whose topology sets `pause`.

    preflight   needs():  the actuator's qdisc (tbf) is there; modes that need real NICs are refused on
                          testbeds made of veth pairs; pause_gain only on a pause_chain with pause (on the
                          hosts testbed, link B's NICs and node 1's tbf are checked over SSH in
                          experiments/preflight._hosts)
    per repetition        PauseRun.of(...) -> start() after testbed.up(), before the traffic
                          (NIC flow control through ethtool, on whichever machine the node is, restored at
                          stop; the XOFF/XON controller)
                          samples() every interval -> Prometheus (the controller's statistics, the NICs'
                          pause counters); summary() at the end -> summary.json, judge() its fidelity (an
                          emulated controller that went without looking at the queue); stop() in the
                          teardown, always
    per point   with `pause_gain` the point also runs without PAUSE (baseline(): T1 = T2 = B2, the study's own
                          definition, same controller and tbf on link B so only the thresholds differ): those
                          repetitions are pairs of their own in the run's seeded order (variant "baseline");
                          complete_point() gives the summary the goodput increase in percent with its 95 % CI

The archive of a repetition gets pause_events.csv (every XOFF/XON/refresh/expiry) and pause_latency.csv (the
reaction-latency distribution); the baseline's repetitions go to points/NNN/baseline/repR.
"""
from __future__ import annotations

import copy
import csv
import os
import platform
from dataclasses import asdict
from pathlib import Path

from ccrig.analysis.compare import ratio_ci
from ccrig.qdiscs import probe
from ccrig.topologies import testbeds
from ccrig.topologies.pause import chain_controller, chain_plan
from ccrig.topologies.pause.emulated import PAUSE_HELP, STATS, prometheus_samples
from ccrig.topologies.pause.ethtool import NIC_HELP, NicPause, nic_samples, wait_carrier
from ccrig.experiments.telemetry import exporter
from ccrig.experiments import spec as specmod
from ccrig.experiments.run import fidelity, summary
from ccrig.experiments.run.collectors import QdiscReader
from ccrig.errors import RunError, field_error
from ccrig.needs import Need

# the controller's series are the run's like any other: HELP and TYPE from the one table the exporter reads
exporter.HELP.update(PAUSE_HELP)
exporter.HELP.update(NIC_HELP)


# the emulated controller sleeps at most max_sleep (10 ms) between looks at node 2's queue; a longer gap is the
# CPU it did not get. A pause held that long idles the bottleneck once the queue drained (T2/ν: 0.1 s at study
# 000's T2 = 15 and scale 10) and a late XOFF overflows B2, so the repetition's goodput may move by up to the
# gap's share of the window: at most this one (1 %, the study's margins are a point of gain). Study 000's runs
# of 2026-12-04/05 (1580 repetitions with PAUSE on): the longest reaction (a gap's lower bound) 5-15 ms at the
# median, above 0.3 s in 16, whose goodput read 0.9 % below their points' medians on average (-9.7 % at worst)
CONTROLLER_GAP_SHARE = 0.01


def testbed_class(exp: specmod.Experiment):
    """The class of the testbed a spec names (auto: what auto chooses when it can)."""
    return testbeds.of(exp.testbed)


def applies(exp: specmod.Experiment) -> bool:
    return getattr(exp.topology, "name", None) == "pause_chain" and exp.topology.pause is not None


# --- preflight --------------------------------------------------------------------------------------------

def needs(points: list, commands, prefix: str) -> list:
    """The PAUSE needs of a run's points (experiments.preflight.Need); bad combinations raise InputError."""
    out = []
    for p in points:
        exp = p.experiment
        if exp.pause_gain and not applies(exp):
            raise field_error("pause_gain", True, "only with topology pause_chain and topology.pause set "
                                                  "(it reruns each point with T1 = T2 = B2)")
        if not applies(exp):
            continue
        mode = exp.topology.pause.mode
        bed = testbed_class(exp)
        if not (bed.emulated_pause or bed.real_nics):
            able = [k for k, c in testbeds.available().items() if c.emulated_pause or c.real_nics]
            raise field_error("testbed", exp.testbed,
                              f"{', '.join(able)} for topology.pause: the XOFF/XON controller reaches node 1 and "
                              f"node 2 as named network namespaces or as SSH hosts")
        if mode in ("ethtool", "frames") and not bed.real_nics:
            nics = [k for k, c in testbeds.available().items() if c.real_nics]
            raise field_error("topology.pause.mode", mode,
                              f"emulated or auto on the {exp.testbed} testbed, whose links are veth pairs "
                              f"(no Ethernet flow control); {mode} needs real NICs (testbed {' or '.join(nics)})")
    if any(applies(p.experiment) and p.experiment.topology.pause.mode != "ethtool"
           and not testbed_class(p.experiment).remote for p in points) and os.geteuid() == 0:
        have = probe.available(commands, prefix)
        out.append(Need("the tbf queue discipline", "topology.pause (the XOFF/XON controller shapes link B)",
                        "tbf" in have, probe.missing_message("tbf", platform.release())))
    return out


# --- one repetition ---------------------------------------------------------------------------------------

class PauseRun:
    """PAUSE on link B of one repetition: NIC settings, the controller, its statistics, the teardown."""

    def __init__(self, exp: specmod.Experiment, topo, testbed, commands, out: Path):
        self.spec, self.topo, self.testbed, self.commands, self.out = exp.topology, topo, testbed, commands, out
        self.nics = NicPause(commands)
        self.ctl = None
        self.plan = None
        self.final = None
        (n1, toward2), (n2, toward_c) = self.spec.pause_nodes(topo)
        self.queues = {"node1": (n1, testbed.egress_device(n1, toward2)),
                       "node2": (n2, testbed.egress_device(n2, toward_c))}
        self.at_start: dict[str, dict] = {}
        self.nic_record: dict[str, dict] = {}   # node -> its NIC on link B: settings, counters at start

    @classmethod
    def of(cls, exp, topo, testbed, commands, out: Path) -> PauseRun | None:
        return cls(exp, topo, testbed, commands, out) if applies(exp) else None

    def describe(self) -> dict:
        """For env.json and summary.json: the mode in force, auto's note, the scaling of the rates."""
        p = self.spec.pause
        out = {"mode": self.plan.mode if self.plan else p.mode, "note": self.plan.note if self.plan else None,
               "actuator": self.plan.actuator if self.plan else None, "high": p.high, "low": p.t2,
               "b2": self.spec.link_c.buffer.packets, "paused": p.high < self.spec.link_c.buffer.packets,
               "scaling": self.spec.scaling()}
        if self.nic_record:
            # the ethtool state of link B's NICs: where, driver, as found and as the run set it
            out["nics"] = {n: {"where": r["where"], "dev": r["dev"], "driver": r["driver"],
                               "before": asdict(r["before"]), "set": asdict(r["settings"])}
                           for n, r in self.nic_record.items()}
        return out

    def start(self) -> None:
        """After testbed.up() (the interfaces must exist), before the traffic."""
        self.plan = chain_plan(self.spec, self.topo, self.testbed, self.commands)
        for nic in self.plan.nic_settings:
            # restored by stop(), whatever happens next; by `ccrig clean` should this process die before
            # (hosts: the host's undo.sh)
            got = self.nics.enable(nic.tool, nic.dev, nic.want,
                                   undo=lambda argv, node=nic.node: self.testbed.remember_undo(node, argv))
            before = self.nics.saved[-1][2]
            self.nic_record[nic.node] = {"where": nic.tool.place, "dev": nic.dev, "driver": nic.tool.driver(nic.dev),
                                         "before": before, "settings": got}
        down = wait_carrier(self.nics.changed)
        if down:
            raise RunError(f"pause: no carrier on {', '.join(down)} 30 s after ethtool -A changed its flow "
                           f"control (the NICs renegotiate the link); check the cabling and the link partner")
        for n, r in self.nic_record.items():
            r["counters_start"] = self._nic_counters(n)
        if self.plan.actuator is not None:
            self.ctl = chain_controller(self.spec, self.topo, self.testbed, self.commands,
                                        events_csv=self.out / "pause_events.csv", actuator=self.plan.actuator,
                                        workdir=self.out)
            self.ctl.start()
        # after the controller put tbf on link B: the counters the repetition's drops are measured from
        self.at_start = {k: self._queue(k) for k in self.queues}

    def _queue(self, key: str) -> dict:
        node, dev = self.queues[key]
        rows = QdiscReader(self.testbed, node, dev).read()
        root = next((r for r in rows if r.get("parent") in ("root", None)), rows[0] if rows else {})
        return {"node": node, "dev": dev, "kind": root.get("kind"),
                "dropped": int(root.get("dropped", 0) or 0), "sent_packets": int(root.get("sent_packets", 0) or 0)}

    def _nic_counters(self, node: str) -> dict[str, int]:
        nic = next(x for x in self.plan.nic_settings if x.node == node)
        return nic.tool.counters(nic.dev)

    def labels(self) -> dict:
        """Told apart in Prometheus: a point's run with PAUSE and its baseline without (same point and rep)."""
        return {"pause": "on" if self.describe()["paused"] else "off"}

    def samples(self, labels: dict, ts: float) -> list:
        """The controller's live statistics and the NICs' PAUSE counters (ethtool -I -a, ethtool -S: two reads
        per NIC, on hosts two multiplexed SSH sessions) as Prometheus samples."""
        lab = {k: v for k, v in labels.items() if k != "qdisc"}
        out = []
        for n, r in self.nic_record.items():
            out += nic_samples(self._nic_counters(n), r["settings"], {**lab, "node": n, "dev": r["dev"]}, ts)
        if self.ctl is None:
            return out
        node, dev = self.queues["node2"]
        return out + prometheus_samples(self.ctl.stats(), {**lab, "node": node, "dev": dev}, ts)

    def summary(self) -> dict:
        """Stops the controller (the traffic is over) and returns the repetition's PAUSE record: XOFF/XON
        counts, time paused, reaction latency quantiles, and both queues' drops during the repetition."""
        queues = {}
        for k in self.queues:
            now = self._queue(k)
            was = self.at_start.get(k, {"dropped": 0, "sent_packets": 0})
            queues[k] = {**now, "dropped": now["dropped"] - was["dropped"],
                         "sent_packets": now["sent_packets"] - was["sent_packets"]}
        out = {**self.describe(), "queues": queues}
        if self.nic_record:
            # each NIC's PAUSE counters over the repetition (ethtool -I -a standard, driver_* from ethtool -S)
            for n, r in self.nic_record.items():
                end, start = self._nic_counters(n), r.get("counters_start", {})
                out["nics"][n].update({"counters_start": start, "counters_end": end,
                                       "counters": {k: v - start.get(k, 0) for k, v in end.items()}})
        if self.ctl is not None:
            s = self._stop_controller()
            lat = sorted(s.latency_s)
            out.update({"xoff": s.xoff, "xon": s.xon, "refreshes": s.refreshes, "expiries": s.expiries,
                        "paused_s": s.paused_s, "polls": s.polls, "max_occupancy": s.max_occupancy,
                        "controller": {"longest_gap_s": s.longest_gap_s, "cpu_s": s.cpu_s,
                                       "cpu_cores": s.cpu_s / s.elapsed_s if s.elapsed_s else None},
                        "reaction_s": {"n": len(lat), **{name: (lat[min(len(lat) - 1, int(q * len(lat)))]
                                                                if lat else None) for name, q in STATS}}})
            if s.agent_signals is not None:
                # node 1 on another machine: what its agent received and how long each change took there
                apply = sorted(s.agent_apply_s)
                out["agent"] = {"signals": s.agent_signals, "foreign": s.agent_foreign, "applied": len(apply),
                                "apply_p50_s": apply[len(apply) // 2] if apply else None,
                                "apply_max_s": apply[-1] if apply else None}
            with open(self.out / "pause_latency.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["latency_s", "actuate_s"])
                w.writerows(zip(s.latency_s, s.actuate_s))
        return out

    @staticmethod
    def judge(fid: dict, record: dict, window_s: float) -> None:
        """Turns a repetition's fidelity verdict testbed-limited when its emulated controller went longer than
        CONTROLLER_GAP_SHARE of the measured window without a look at node 2's queue (a pause held past the
        queue's draining idles the bottleneck; a late XOFF lets B2 overflow)."""
        gap = (record.get("controller") or {}).get("longest_gap_s")
        # a baseline's controller (T1 = T2 = B2) never pauses: its gaps change nothing
        if not record.get("paused") or gap is None or window_s <= 0 or gap <= CONTROLLER_GAP_SHARE * window_s:
            return
        fid["reasons"].append(f"the PAUSE controller went {gap:.3f} s without a look at node 2's queue (more than "
                              f"{CONTROLLER_GAP_SHARE:.0%} of the {window_s:g}-s measured window): it did not get "
                              f"the CPU, so its pauses were not the spec's")
        fid["verdict"] = "testbed-limited"
        fidelity.name_steal(fid)

    def _stop_controller(self):
        if self.final is None and self.ctl is not None:
            self.final = self.ctl.stop()
        return self.final

    def stop(self) -> list[str]:
        """Teardown: the controller stopped (link B back at μ1), every NIC as it was. Never raises."""
        problems = []
        try:
            self._stop_controller()
        except Exception as e:  # noqa: BLE001 - teardown reports, never raises
            problems.append(f"PAUSE controller: {e}")
        problems += self.nics.restore()
        for p in problems:
            print(f"warning: {p}")
        return problems


# --- the point: with and without PAUSE ----------------------------------------------------------------------

def baseline(point: specmod.Point) -> specmod.Point:
    """The point without PAUSE: T1 = T2 = B2, which the queue can never exceed, everything else equal."""
    raw = copy.deepcopy(point.raw)
    b2 = point.experiment.topology.link_c.buffer.packets
    specmod.set_path(raw, "topology.pause.high", b2)
    specmod.set_path(raw, "topology.pause.low", b2)
    exp = specmod.validate(raw, f"point {point.index} without PAUSE")
    return specmod.Point(index=point.index, params={**point.params, "pause": "off (T1 = T2 = B2)"},
                         experiment=exp, raw=raw)


def complete_point(point: specmod.Point, entry: dict, baseline_reps: list[dict]) -> None:
    """Adds the point's PAUSE record to its summary entry; with pause_gain, its baseline's repetitions (pairs of
    their own in the run's seeded order) become `without_pause` and the gain."""
    if not applies(point.experiment):
        return
    entry["pause"] = _over_reps([r.get("pause") for r in entry["repetitions"]])
    if not point.experiment.pause_gain or not baseline_reps:
        return
    without = summary.point(baseline(point), baseline_reps)
    without["pause"] = _over_reps([r.get("pause") for r in without["repetitions"]])
    entry["without_pause"] = without
    entry["pause_gain"] = gain(entry["system"]["goodput_bps"], without["system"]["goodput_bps"])


def _over_reps(records: list[dict | None]) -> dict | None:
    records = [r for r in records if r]
    if not records:
        return None
    out = {k: records[0][k] for k in ("mode", "note", "actuator", "high", "low", "b2", "paused", "scaling")}
    for k in ("xoff", "xon", "refreshes", "expiries", "paused_s"):
        if all(k in r for r in records):
            out[k] = sum(r[k] for r in records) / len(records)
    for q in ("node1", "node2"):
        out[f"{q}_dropped"] = sum(r["queues"][q]["dropped"] for r in records) / len(records)
    out["reaction_p50_s"] = max((r["reaction_s"]["p50"] for r in records
                                 if r.get("reaction_s", {}).get("p50") is not None), default=None)
    return out


def gain(with_pause: dict, without: dict) -> dict:
    """The goodput increase PAUSE brings, in percent: 100 (G_pause / G_without - 1), with a confidence interval by
    the delta method on the two means' own intervals (analysis.compare.ratio_ci: each over repetitions
    or by batch means within a run, saying its method; none, with the reason, when either has none)."""
    out = {"metric": "goodput_bps", "with_pause_bps": with_pause.get("mean"), "without_pause_bps":
           without.get("mean"), "percent": None, "ci95": [None, None],
           "method": "delta method, t with min(n) - 1 degrees of freedom"}
    r = ratio_ci(with_pause, without)
    out.update(level=r["level"], ci_method=r["method"], reason=r["reason"])
    if "ci" in with_pause and "ci" in without:
        out["method"] = "delta method on the two means' confidence intervals"
    if r["ratio"] is None:
        return out
    out["percent"] = 100 * (r["ratio"] - 1)
    half = r["half"]
    if half is None:
        # no interval: ci95 stays the point itself, as in summaries without `ci` (its readers expect two numbers);
        # ci_method "none" and the reason say that it is not an interval
        out["ci95"] = [out["percent"], out["percent"]]
        return out
    out["ci95"] = [100 * (r["ratio"] - half - 1), 100 * (r["ratio"] + half - 1)]
    return out
