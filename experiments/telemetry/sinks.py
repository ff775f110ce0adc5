"""Where a run's samples go while it runs: its sample log in the archive, always, and unless Prometheus is off a
live exporter that Prometheus scrapes (the local server, started or reused, or one given by URL).

The log lets every run be backfilled into any Prometheus later (experiments/telemetry/backfill.py); the vm testbed's guest
has no Prometheus of its own. Each interval's values go out as one batch stamped with the interval's end; each
point's results (mean, std, CI of every metric) as `point_result` once the point is done.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ccrig.analysis import metric_table
from ccrig.commands import Commands
from ccrig.samples import Sample
from ccrig.experiments.telemetry.backfill import LOG_NAME, SampleLog, backfill
from ccrig.experiments.telemetry.exporter import Exporter, qdisc_samples, series_sample
from ccrig.experiments.telemetry.prometheus_server import PrometheusServer, job_name


class Sinks:
    def __init__(self, run_dir: Path, run_id: str, interval: float, commands: Commands):
        self.run_dir, self.run_id, self.interval, self.commands = run_dir, run_id, interval, commands
        # a resumed run's log already holds what the killed run measured (read before this run appends to it)
        self.earlier = (run_dir / LOG_NAME).is_file() and (run_dir / LOG_NAME).stat().st_size > 0
        self.log = SampleLog(run_dir / LOG_NAME)
        self.exporter: Exporter | None = None
        self.url: str | None = None       # the Prometheus that scrapes the exporter
        self.target: Path | None = None   # the exporter's file-based service discovery entry, removed at the end
        self.backfilled: list[str] = []   # TSDB blocks made from a resumed run's earlier samples

    def open(self, info: list[Sample], prometheus: str, prometheus_root: Path) -> dict | None:
        """Starts publishing: info is served with every batch. prometheus: auto (start or reuse the local server
        under prometheus_root), off, or the URL of a server already scraping ccrig (it finds the exporter through
        $CCRIG_PROMETHEUS_TARGETS, a file_sd folder, where that is set). Returns what env.json keeps of the
        exporter (None: off)."""
        self.log.set_info(info)
        if prometheus == "off":
            return None
        self.exporter = Exporter()
        if prometheus == "auto":
            server = PrometheusServer(prometheus_root, self.commands)
            self.url = server.ensure(self.interval)
            if self.earlier:
                # a killed run's last batches were served but maybe never scraped: the log has them all, and
                # Prometheus keeps one copy of a sample that is both scraped and backfilled (same time, value)
                self.backfilled = [str(b) for b in backfill(self.run_dir, server.root / "data", self.commands,
                                                            {"job": job_name(self.interval),
                                                             "instance": self.run_id})]
            # instance is the run, not the exporter's port, so a resumed run's series are the same series
            self.target = server.add_target(self.interval, self.run_id, self.exporter.address,
                                            {"instance": self.run_id})
        else:
            self.url = prometheus.rstrip("/")
            sd = os.environ.get("CCRIG_PROMETHEUS_TARGETS")
            if sd:
                self.target = Path(sd) / f"{self.run_id}.json"
                self.target.write_text(f'[{{"targets": ["{self.exporter.address}"]}}]\n')
        self.exporter.set_info(info)
        return {"url": self.url, "exporter": self.exporter.address,
                **({"backfilled_blocks": self.backfilled} if self.backfilled else {})}

    def publish(self, samples: list[Sample]) -> None:
        self.log.publish(samples)
        if self.exporter is not None:
            self.exporter.publish(samples)

    def close(self) -> None:
        self.log.close()
        if self.exporter is None:
            return
        # Prometheus must take the last batches before the exporter goes away
        if not self.exporter.drain(timeout=4 * self.interval + 5):
            print(f"warning: Prometheus did not scrape the run's last samples; they are in {self.run_dir}")
        if self.target is not None:
            self.target.unlink(missing_ok=True)
        self.exporter.close()


def interval_samples(labels: dict, flows, rows: list[dict], system: dict, qdisc_rows: list[dict],
                     ts: float) -> list[Sample]:
    """One interval's batch: each flow's metrics (rows in the order of flows), the system's, and the bottleneck's
    qdisc statistics; a metric without a value in the interval (no RTT of a UDP flow) has no sample."""
    out = []
    for f, row in zip(flows, rows):
        fl = {**labels, "flow": str(f.index), "cc": f.label}
        out += [series_sample("flow", m.name, fl, row[m.name], ts) for m in metric_table.of("flow")
                if row.get(m.name) is not None]
    out += [series_sample("system", m.name, labels, system[m.name], ts) for m in metric_table.of("system")
            if system.get(m.name) is not None]
    out += qdisc_samples(qdisc_rows, {k: v for k, v in labels.items() if k != "qdisc"}, ts)
    return out


def point_samples(labels: dict, point: dict) -> list[Sample]:
    """A point's summary.json entry as `point_result` samples: per scope (system, each flow) and metric, its
    mean, std and CI bounds, in the units of the series the metric has (labels: experiment, run, point)."""
    ts = time.time()
    out = []
    for scope, entries in (("system", [point["system"]]), ("flow", point["flows"])):
        for e in entries:
            lab = {**labels, "scope": scope, "flow": str(e.get("flow", "all")), "cc": e.get("cc", "")}
            # a point archived before a metric was added has no entry for it
            for m in [m for m in metric_table.of(scope, ci=True) if e.get(m.name)]:
                s = e[m.name]
                ci = s["ci95"] or (None, None)   # null when the interval's method is none
                for stat_name, v in (("mean", s["mean"]), ("std", s["std"]), ("ci95_low", ci[0]),
                                     ("ci95_high", ci[1])):
                    if v is not None:
                        out.append(Sample("point_result", {**lab, "series": f"ccrig_{m.prometheus(scope)}",
                                                           "stat": stat_name}, v * m.factor, ts))
    # the point's fidelity verdict, 1 when the testbed (not the configured link) limited it
    fid = point.get("fidelity")
    if fid is not None:
        out.append(Sample("point_fidelity", {**labels, "verdict": fid["verdict"]},
                          1.0 if fid["verdict"] != "ok" else 0.0, ts))
    return out


# what the packet sources (UDP kinds, interactive) measure per flow, as Prometheus series: field -> (series, factor);
# a field holding a distribution (mean, p50, p99, min, max) becomes one series with a `stat` label
SOURCE_SERIES = {"one_way_delay_s": ("source_one_way_delay_seconds", 1), "latency_s": ("source_latency_seconds", 1),
                 "jitter_s": ("source_jitter_seconds", 1), "loss": ("source_loss_ratio", 1),
                 "delivered_bps": ("source_delivered_bytes_per_second", 1 / 8),
                 "goodput_bps": ("source_goodput_bytes_per_second", 1 / 8)}


def source_samples(labels: dict, entry: dict, flows, ts: float) -> list[Sample]:
    """A repetition's per-source measurements (summary.json, under each kind's name) as samples, one per flow and
    field, labelled with the flow, its kind and (for a distribution) the statistic."""
    kinds = {f.workload.kind for f in flows}
    out = []
    for kind in kinds:
        for item in entry.get(kind) or []:
            if not isinstance(item, dict) or "flow" not in item:
                continue
            fl = {**labels, "flow": str(item["flow"]), "kind": kind}
            for field, (name, factor) in SOURCE_SERIES.items():
                v = item.get(field)
                if isinstance(v, dict):
                    out += [Sample(name, {**fl, "stat": k}, x * factor, ts) for k, x in v.items()
                            if isinstance(x, (int, float))]
                elif isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.append(Sample(name, fl, v * factor, ts))
    return out


def link_drop_samples(labels: dict, per_point: dict, ts: float) -> list[Sample]:
    """Each link drop point's counters so far (the BPF program's, or netem's): a series per drop point."""
    return [Sample(f"link_{key}_packets", {**labels, "point": name}, float(c[key]), ts)
            for name, c in per_point.items() for key in ("dropped", "passed", "down_dropped") if key in c]
