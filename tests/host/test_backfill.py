"""A run's sample log reaches a running Prometheus by backfill: promtool makes blocks, the server loads them at
its next block reload (about a minute) and the series answer queries with their original timestamps."""
from __future__ import annotations

import os
import time

import pytest

from ccrig.experiments.telemetry.backfill import SampleLog, backfill
from ccrig.samples import Sample
from ccrig.experiments.telemetry.prometheus_server import PrometheusServer, query

pytestmark = pytest.mark.host


@pytest.mark.timeout(300)
def test_backfilled_series_are_queryable_in_the_running_server(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("host tier: needs root")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run = f"ccD-backfill-{os.getpid()}"
    now = time.time()
    log = SampleLog(run_dir / "samples.jsonl")
    log.set_info([Sample("run_info", {"experiment": "backfill", "run": run, "testbed": "vm"}, 1.0)])
    for k in range(20):   # twenty 1-s intervals that ended a minute ago, as a guest run would have made them
        ts = now - 80 + k
        labels = {"experiment": "backfill", "run": run, "point": "0", "rep": "0", "flow": "0", "cc": "reno"}
        log.publish([Sample("flow_goodput_bits_per_second", labels, 1e6 * (k + 1), ts),
                     Sample("qdisc_dropped_packets", {"run": run, "node": "r", "dev": "eth1"}, float(k), ts)])
    log.close()

    server = PrometheusServer(tmp_path / "prometheus")
    url = server.ensure(1.0)
    try:
        blocks = backfill(run_dir, server.root / "data")
        assert blocks and all((b / "meta.json").is_file() for b in blocks)
        promql = f'count_over_time(ccrig_flow_goodput_bits_per_second{{run="{run}"}}[5m])'
        deadline = time.monotonic() + 150
        result = []
        while time.monotonic() < deadline and not result:
            result = query(url, promql)
            time.sleep(2)
        assert result and float(result[0]["value"][1]) == 20, result
        # values and times are the run's own
        last = query(url, f'ccrig_flow_goodput_bits_per_second{{run="{run}"}}', time_s=now - 80 + 19.5)
        assert float(last[0]["value"][1]) == 20e6
        dropped = query(url, f'max_over_time(ccrig_qdisc_dropped_packets_total{{run="{run}"}}[5m])')
        assert float(dropped[0]["value"][1]) == 19
        info = query(url, f'count_over_time(ccrig_run_info{{run="{run}",testbed="vm"}}[5m])')
        assert float(info[0]["value"][1]) == 20
    finally:
        server.stop()
