"""The run's Prometheus exporter: per-flow, per-system and per-qdisc series, one sample per measurement interval.

Each interval's values are published as one batch stamped with the interval's end time. Prometheus is
handed the batches in order: a scrape by Prometheus takes every pending batch (one, when scrapes keep pace; a
series may carry several samples in one scrape, each with its timestamp), so no interval is lost or doubled when
scrape and interval phases drift (a repeated batch has the same timestamps and Prometheus drops it). Other
clients (a browser, promtool, curl) see the newest batch and take nothing. At the end of a point the runner waits
until Prometheus has taken everything (`drain`).

A scrape whose answer left late is not taken: Prometheus drops a scrape that outlives its timeout, batches and all
(an answer held 0.8 s against a 0.5 s timeout: 5 of 6 intervals stored; CI under 45 % steal lost intervals so in
three tries of test_run_lifecycle's Prometheus test). So the batches of an answer that took more than LATE_SHARE
of the scrape's timeout (Prometheus sends it, X-Prometheus-Scrape-Timeout-Seconds), or whose connection Prometheus
had closed, go back to the front of the line, and the next scrape serves them with the new ones; if the first got
through after all, the repeats are dropped as above.

Names start `ccrig_`, are in base units, counters end `_total`; labels: experiment, run, point, rep, flow,
cc, qdisc (and node, dev for qdisc series).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ccrig.analysis import metric_table
from ccrig.qdiscs.stats import is_counter
from ccrig.samples import Sample

# series name (without ccrig_) -> (type, help): each metric's flow and system series (analysis/metric_table.py),
# then the rest
HELP = {
    **{m.prometheus(scope): ("gauge", m.help(scope)) for scope in ("flow", "system") for m in metric_table.TABLE
       if m.has(scope)},
    "qdisc_sent_packets": ("counter", "Packets sent by the queue discipline"),
    "qdisc_sent_bytes": ("counter", "Bytes sent by the queue discipline"),
    "qdisc_dropped_packets": ("counter", "Packets dropped by the queue discipline"),
    "qdisc_overlimits": ("counter", "Overlimit events of the queue discipline"),
    "qdisc_backlog_packets": ("gauge", "Packets queued at the end of the interval"),
    "qdisc_backlog_bytes": ("gauge", "Bytes queued at the end of the interval"),
    "queue_sojourn_mean_seconds": ("gauge", "Mean time the packets dequeued in the interval spent in the qdisc tree"),
    "queue_sojourn_p50_seconds": ("gauge", "Median sojourn of the packets dequeued in the interval"),
    "queue_sojourn_p99_seconds": ("gauge", "99th percentile sojourn of the packets dequeued in the interval"),
    "queue_sojourn_max_seconds": ("gauge", "Longest sojourn of the packets dequeued in the interval"),
    "queue_occupancy_mean_packets": ("gauge", "Packets queued, time-averaged over the interval (every change seen)"),
    "queue_occupancy_max_packets": ("gauge", "Most packets queued at any moment of the interval"),
    "queue_occupancy_mean_bytes": ("gauge", "Bytes queued, time-averaged over the interval"),
    "queue_occupancy_max_bytes": ("gauge", "Most bytes queued at any moment of the interval"),
    "source_one_way_delay_seconds": ("gauge", "A packet source's one-way delay over the repetition (stat: mean, p50, "
                                     "p99, min, max), from the receiver's kernel timestamps"),
    "source_latency_seconds": ("gauge", "An interactive flow's message latency, send to receipt (stat as above)"),
    "source_jitter_seconds": ("gauge", "A packet source's jitter (RFC 3550 smoothed) over the repetition"),
    "source_loss_ratio": ("gauge", "Packets a source sent that its receiver never saw / packets sent"),
    "source_delivered_bytes_per_second": ("gauge", "Payload a packet source delivered per second"),
    "source_goodput_bytes_per_second": ("gauge", "Payload an interactive flow's messages delivered per second"),
    "link_dropped_packets": ("counter", "Packets a link drop point dropped (random loss: the BPF program or netem)"),
    "link_passed_packets": ("counter", "Packets a link drop point let through"),
    "link_down_dropped_packets": ("counter", "Packets dropped while the link was down (a `down` event)"),
    "point_result": ("gauge", "A point's result over its measured intervals, in the units of the series named by "
                     "`series`: stat is mean, std, ci95_low or ci95_high"),
    # the fidelity monitor (experiments/run/fidelity.py)
    "point_fidelity": ("gauge", "1 when the testbed, not the configured bottleneck, limited the point "
                       "(verdict testbed-limited), 0 when ok"),
}

def series_sample(scope: str, metric: str, labels: dict, value: float, ts: float | None) -> "Sample":
    """A metric's value (SI units) as a sample of its Prometheus series (scope flow or system)."""
    m = metric_table.BY_NAME[metric]
    return Sample(m.prometheus(scope), labels, value * m.factor, ts)


# qdisc.csv column -> exporter name for the counters every discipline has
QDISC_SERIES = {"sent_packets": "qdisc_sent_packets", "sent_bytes": "qdisc_sent_bytes",
                "dropped": "qdisc_dropped_packets", "overlimits": "qdisc_overlimits",
                "backlog_packets": "qdisc_backlog_packets", "backlog_bytes": "qdisc_backlog_bytes"}
_QDISC_IDS = {"t", "node", "dev", "kind", "handle", "parent", "leaf", "class"}


def qdisc_samples(rows: list[dict], labels: dict, ts: float | None) -> list["Sample"]:
    """Every numeric statistic of every qdisc (and class) row: the common counters under fixed names, a
    discipline's own (red_early, fq_codel_ecn_mark, drr_deficit, ...) as ccrig_qdisc_<column>."""
    out = []
    for r in rows:
        ql = {**labels, "node": r["node"], "dev": r["dev"], "kind": r.get("kind", ""),
              "handle": r.get("handle", ""), "class": "yes" if r.get("class") else "no"}
        for key, value in r.items():
            if key in _QDISC_IDS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            name = QDISC_SERIES.get(key, f"qdisc_{key}")
            if name not in HELP:
                HELP[name] = ("counter" if is_counter(key) else "gauge", f"{key.replace('_', ' ')} (tc -s)")
            out.append(Sample(name, ql, float(value), ts))
    return out


# of a scrape's timeout: an answer that took longer, by this process's clock (the time before the handler ran is not
# seen), may have missed it
LATE_SHARE = 0.5


@dataclass
class _State:
    pending: deque = field(default_factory=deque)
    current: list = field(default_factory=list)
    info: list = field(default_factory=list)
    answering: int = 0   # scrapes that took batches and are not yet answered


def families(samples: list[Sample]):
    by_name: dict[str, list[Sample]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
    for name, group in by_name.items():
        kind, doc = HELP.get(name, ("gauge", name.replace("_", " ")))
        keys = sorted({k for s in group for k in s.labels})
        fam = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(f"ccrig_{name}", doc, labels=keys)
        for s in group:
            fam.add_metric([str(s.labels.get(k, "")) for k in keys], s.value, timestamp=s.ts)
        yield fam


class _Serve:
    def __init__(self, samples):
        self.samples = samples

    def collect(self):
        yield from families(self.samples)


class Exporter:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.state = _State()
        self.lock = threading.Condition()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                started = time.monotonic()
                by_prometheus = self.headers.get("User-Agent", "").startswith("Prometheus/")
                body, batches = exporter.render(by_prometheus)
                timeout = float(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds") or "inf")
                late = True   # unless the answer is known to have left in time
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    self.wfile.flush()
                    late = time.monotonic() - started > LATE_SHARE * timeout
                except ConnectionError:   # Prometheus gave up on the scrape and closed it
                    pass
                finally:
                    if batches:
                        exporter.answered(batches, late)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def render(self, by_prometheus: bool) -> tuple[bytes, list]:
        """The exposition, and the batches this scrape took (Prometheus's, of every pending one; else none)."""
        taken: list = []
        with self.lock:
            if by_prometheus and self.state.pending:
                taken = list(self.state.pending)
                self.state.pending.clear()
                self.state.current = taken[-1]
                self.state.answering += 1
            samples = [s for batch in taken for s in batch] if taken else list(self.state.current)
            samples += list(self.state.info)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Serve(samples))
        return generate_latest(registry), taken

    def answered(self, batches: list, late: bool) -> None:
        """A scrape that took batches has been answered; late: it may have timed out, so the next scrape serves
        them again, before the ones queued."""
        with self.lock:
            if late:
                self.state.pending.extendleft(reversed(batches))
            self.state.answering -= 1
            self.lock.notify_all()

    def publish(self, samples: list[Sample]) -> None:
        """Queues one interval's batch for Prometheus."""
        with self.lock:
            self.state.pending.append(samples)
            if not self.state.current:
                self.state.current = samples

    def set_info(self, samples: list[Sample]) -> None:
        """Series served on every scrape without a timestamp (run info, progress)."""
        with self.lock:
            self.state.info = samples

    def drain(self, timeout: float) -> bool:
        """Waits until Prometheus has taken every queued batch, its answers sent; False on timeout."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.state.pending or self.state.answering:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
        return True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
