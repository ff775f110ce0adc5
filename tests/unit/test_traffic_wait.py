"""What a client that outlives its deadline is blamed on: the kernel's state of its connection decides whether the
path refused the repetition (PathError: it runs again) or the rig failed (RunError). The client is a real process
that does not end; the kernel's answers are the workload's, given here."""
import subprocess

import pytest

from ccrig.errors import PathError, RunError
from ccrig.experiments.workloads.base import Flow
from ccrig.experiments.workloads.bulk import Bulk
from ccrig.experiments.workloads.traffic import Traffic


class Stalled(Bulk):
    """iperf3 as the kernel would describe its connection at the deadline."""
    def opening(self, testbed, flow):
        return False

    def backing_off(self, testbed, flow):
        return "backoff 6, rto 64000 ms, 0 bytes acked"


class Slow(Stalled):
    def backing_off(self, testbed, flow):
        return None

    def connection(self, testbed, flow):
        return "ESTAB rto:204 bytes_acked:1 unacked:10 cwnd:1"


@pytest.mark.parametrize("workload, error, words", [
    (Stalled(), PathError, "retransmission-timeout backoff after 0.2 s (backoff 6, rto 64000 ms, 0 bytes acked)"),
    (Slow(), RunError, "iperf3 client of flow 9 did not finish within 0.2 s (its connection: ESTAB rto:204 "
                       "bytes_acked:1 unacked:10 cwnd:1)")])
def test_a_client_past_its_deadline(tmp_path, workload, error, words):
    traffic = Traffic(None, [Flow(workload, 9, "reno", "reno", "s1", "d1", 0.0, 1.0)], tmp_path)
    traffic.clients[9] = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as raised:
            traffic.wait(0.2)
        assert type(raised.value) is error   # a PathError is a RunError: the slow client's must not be one
    finally:
        traffic.clients[9].kill()
        traffic.clients[9].wait()
