"""What a client that outlives its deadline is blamed on: the kernel's state of its connection decides whether the
path refused the repetition (PathError: it runs again) or the rig failed (RunError). The client is a real process
that does not end; the kernel's answers are the workload's, given here."""
import subprocess
from contextlib import contextmanager

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


@contextmanager
def one_client(tmp_path, workload):
    """A point's Traffic with one flow whose client is a real process that does not end (its own session, as
    Commands.popen starts it)."""
    traffic = Traffic(None, [Flow(workload, 9, "reno", "reno", "s1", "d1", 0.0, 1.0)], tmp_path)
    traffic.clients[9] = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield traffic
    finally:
        traffic.clients[9].kill()
        traffic.clients[9].wait()


@pytest.mark.parametrize("workload, error, words", [
    (Stalled(), PathError, "retransmission-timeout backoff after 0.2 s (backoff 6, rto 64000 ms, 0 bytes acked)"),
    (Slow(), RunError, "iperf3 client of flow 9 did not finish within 0.2 s (its connection: ESTAB rto:204 "
                       "bytes_acked:1 unacked:10 cwnd:1)")])
def test_a_client_past_its_deadline(tmp_path, workload, error, words):
    with one_client(tmp_path, workload) as traffic:
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as raised:
            traffic.wait(0.2)
        assert type(raised.value) is error   # a PathError is a RunError: the slow client's must not be one


class Starved(Stalled):
    """A flow whose data flowed, then whose retransmissions the path took one after another (PER 0.4)."""
    def backing_off(self, testbed, flow):
        return "backoff 6, rto 96256 ms, 17414 bytes acked"


class SynOnly(Stalled):
    def backing_off(self, testbed, flow):
        return "backoff 7, rto 120000 ms, 1 bytes acked"


def test_a_client_the_path_holds_in_backoff_after_its_data_flowed_is_stopped_and_its_flow_kept(tmp_path):
    """Running the repetition again would keep only those in which no flow starved: the flow is measured by its
    sockets (its report missing, said why), the client stopped; one with only its SYN acknowledged is still the
    path's to refuse (the Stalled case above: 0 bytes; here 1)."""
    with one_client(tmp_path, Starved()) as traffic:
        traffic.wait(0.2)
        assert traffic.clients[9].wait(10) is not None   # stopped
        assert "client had not finished within 0.2 s" in traffic.unreported[9]
        assert "(backoff 6, rto 96256 ms, 17414 bytes acked)" in traffic.unreported[9]
        assert traffic.results() == {9: None}   # its JSON (none here) is not read
    with one_client(tmp_path, SynOnly()) as traffic:
        with pytest.raises(PathError, match="1 bytes acked"):
            traffic.wait(0.2)
