"""Looking inside a repetition: the packet capture (capture.py) and the queue monitor (qdiscs/sojourn/), which
both run beside the traffic, as the runner sees them — started before the flows, read each interval, stopped with
the flows and, on any failure, in the teardown.

    inside = Inside.of(exp, topo, testbed, commands, out)   None when the spec asks for neither
    inside.start()                          before the flows' servers start: every packet of theirs is seen
    inside.interval(k, a, b) -> (system columns, samples)   the bottleneck's into intervals.csv; all in queues.csv
    inside.stop(flows, sampler_of) -> {"capture": ..., "queue_monitor": ...}   for repetition.json
    inside.close()                          the teardown's: stops whatever still runs
"""
from __future__ import annotations

import csv
from pathlib import Path

from ccrig.analysis import pcap
from ccrig.qdiscs import sojourn
from ccrig.samples import Sample
from ccrig.experiments.run.capture import Capture

# the bottleneck's queue in intervals.csv (system rows), from the monitor's per-interval summary
SYSTEM_COLUMNS = {"queue_sojourn_mean_s": "sojourn_mean_s", "queue_sojourn_p50_s": "sojourn_p50_s",
                  "queue_sojourn_p99_s": "sojourn_p99_s", "queue_occupancy_mean_packets": "occupancy_mean_packets",
                  "queue_occupancy_max_packets": "occupancy_max_packets"}
# summary key -> Prometheus series (base units: seconds, packets, bytes)
SERIES = {"sojourn_mean_s": "queue_sojourn_mean_seconds", "sojourn_p50_s": "queue_sojourn_p50_seconds",
          "sojourn_p99_s": "queue_sojourn_p99_seconds", "sojourn_max_s": "queue_sojourn_max_seconds",
          "occupancy_mean_packets": "queue_occupancy_mean_packets",
          "occupancy_max_packets": "queue_occupancy_max_packets",
          "occupancy_mean_bytes": "queue_occupancy_mean_bytes", "occupancy_max_bytes": "queue_occupancy_max_bytes"}
QUEUE_COLUMNS = ["interval", "t_start", "t_end", "node", "dev", "enqueued", "dequeued", *SERIES]


class Inside:
    def __init__(self, exp, topo, testbed, commands, out: Path):
        self.exp, self.topo, self.testbed, self.commands, self.out = exp, topo, testbed, commands, Path(out)
        self.capture = Capture(testbed, exp.capture, topo, out) if exp.capture is not None else None
        self.monitor: sojourn.QueueMonitor | None = None
        self.main = ""
        self.t0 = 0.0   # the traffic clock's start (epoch seconds): the raw events' times are epoch seconds
        self.table = None
        self._file = None

    @classmethod
    def of(cls, exp, topo, testbed, commands, out: Path) -> "Inside | None":
        if exp.capture is None and not exp.queue_monitor:
            return None
        return cls(exp, topo, testbed, commands, out)

    def start(self) -> None:
        if self.capture is not None:
            self.capture.start()
        if self.exp.queue_monitor:
            watched = []
            for a, b in self.topo.queues()[:sojourn.MAX_WATCHED]:
                dev = self.testbed.egress_device(a, b)
                # the kernel names a device by its namespace's inode and its ifindex there: asked on the node
                ns, ifindex = self.testbed.run(a, ["sh", "-c", f"stat -L -c %i /proc/self/ns/net; "
                                                              f"cat /sys/class/net/{dev}/ifindex"]).stdout.split()
                rate = self.topo.egress_of(a, b).egress.rate
                watched.append(sojourn.Watched(a, dev, int(ns), int(ifindex),
                                               rate.bps(self.topo.wire) if rate is not None else None))
            self.main = watched[0].label
            self.monitor = sojourn.QueueMonitor(self.commands, watched, self.out)
            self.monitor.start()
            self._file = open(self.out / "queues.csv", "w", newline="")
            self.table = csv.DictWriter(self._file, QUEUE_COLUMNS, extrasaction="ignore")
            self.table.writeheader()

    def interval(self, k: int, a: float, b: float, t0: float, labels: dict) -> tuple[dict, list[Sample]]:
        """Interval k = [a, b] seconds after t0: the bottleneck's summary as intervals.csv columns, and every
        watched queue's as Prometheus samples (labels node, dev)."""
        if self.monitor is None:
            return {}, []
        self.t0 = t0
        per = self.monitor.interval(t0 + a, t0 + b)
        samples = []
        for label, q in per.items():
            node, dev = label.split(":", 1)
            self.table.writerow({"interval": k, "t_start": a, "t_end": b, "node": node, "dev": dev, **q})
            samples += [Sample(name, {**labels, "node": node, "dev": dev}, float(q[key]), t0 + b)
                        for key, name in SERIES.items() if q[key] is not None]
        self._file.flush()
        main = per[self.main]
        return {col: main[key] for col, key in SYSTEM_COLUMNS.items()}, samples

    def stop(self, flows, sampler_of) -> dict:
        out = {}
        if self.monitor is not None:
            out["queue_monitor"] = {**self.monitor.stop(), "t0_epoch_s": self.t0}
            self.monitor = None
            self._file.close()
        if self.capture is not None:
            out["capture"] = self.capture.stop()
            out["capture"]["flows"] = self._flows(out["capture"], flows, sampler_of)
            self.capture = None
        return out

    def _flows(self, cap: dict, flows, sampler_of) -> list[dict]:
        """Per TCP flow: its data packets in each capture (its data connection's ports) beside what TCP_INFO says
        the receiver got (tcpi_data_segs_in) and the sender sent (tcpi_data_segs_out): the capture's check."""
        counts = {l["link"]: pcap.data_packets(self.out / l["file"]) for l in cap["links"]}
        out = []
        for f in flows:
            if not f.workload.tcp_info:
                continue
            last = {}
            for key, name in ((f.receiver_key, "receiver_data_segs_in"), (f.sender_key, "sender_data_segs_out")):
                s = sampler_of.get(key)
                series = s.snapshot(key) if s is not None else []
                field = "data_segs_in" if name.startswith("receiver") else "data_segs_out"
                last[name] = series[-1][1].get(field) if series else None
            packets = {link: sum(n for (_, sport, _, dport), n in c.items()
                                 if sport == f.client_port and dport == f.server_port)
                       for link, c in counts.items()}
            out.append({"flow": f.index, "data_packets": packets, **last})
        return out

    def close(self) -> None:
        """The teardown's: stops what still runs, and never raises, so the rest of the teardown (the testbed's
        namespaces) always follows; what failed is said."""
        for what, stop in (("the queue monitor", self.monitor and self.monitor.stop),
                           ("the capture", self.capture and self.capture.stop)):
            if stop:
                try:
                    stop()
                except Exception as e:  # noqa: BLE001 - teardown reports, never raises
                    print(f"warning: stopping {what} failed: {type(e).__name__}: {e}")
        self.monitor = self.capture = None
        if self._file is not None and not self._file.closed:
            self._file.close()
