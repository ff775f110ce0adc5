"""What a client that outlives its deadline is blamed on: the kernel's state of its connection decides whether the
path refused the repetition (PathError: it runs again) or the rig failed (RunError). The client is a real process
that does not end; the kernel's answers are the workload's, given here."""
import subprocess
from contextlib import contextmanager
from typing import ClassVar

import pytest

from ccrig.errors import PathError, RunError
from ccrig.experiments.workloads.base import Flow, Socket, sockets
from ccrig.experiments.workloads.bulk import Bulk
from ccrig.experiments.workloads.traffic import Traffic


class Said(Bulk):
    """iperf3 as the kernel would describe its data connection at the deadline (ss's counters, as ss writes
    them) and its connections to the server's port."""
    counters: ClassVar[dict] = {}

    def opening(self, testbed, flow):
        return False

    def connection(self, testbed, flow):
        return Socket("ESTAB", flow.client_port, dict(self.counters))

    def client_connections(self, testbed, flow):
        return "ESTAB :41234 rto:204 bytes_acked:165 cwnd:10 lastsnd:60000; FIN-WAIT-1 :6009 backoff:6 rto:64000"


class Stalled(Said):    # its first data never got through
    counters = {"backoff": "6", "rto": "64000", "bytes_acked": "0"}


class SynOnly(Said):
    counters = {"backoff": "7", "rto": "120000", "bytes_acked": "1"}


class Drained(Said):    # its data flowed and was all acknowledged: the client may have stopped writing long ago
    counters = {"rto": "204", "bytes_acked": "1000000", "cwnd": "10", "lastsnd": "60000"}


class Starved(Said):    # its data flowed, then the path took its retransmissions one after another (PER 0.4)
    counters = {"backoff": "6", "rto": "96256", "bytes_acked": "17414"}


class Backlogged(Said):   # study 001 run AN, PER 0.4: 29 KB acknowledged in 130 s, not backing off at that moment
    counters = {"rto": "780", "cwnd": "2", "bytes_acked": "28998", "unacked": "2", "notsent": "2596864",
                "lastsnd": "244"}


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
    (SynOnly(), PathError, "(backoff 7, rto 120000 ms, 1 bytes acked)"),
    (Drained(), RunError, "iperf3 client of flow 9 did not finish within 0.2 s (its connections to port 5210 (its "
                          "data's from :20010): ESTAB :41234 rto:204 bytes_acked:165 cwnd:10 lastsnd:60000; "
                          "FIN-WAIT-1 :6009 backoff:6 rto:64000; its process: sleep S in ")])
def test_a_client_past_its_deadline(tmp_path, workload, error, words):
    with one_client(tmp_path, workload) as traffic:
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as raised:
            traffic.wait(0.2)
        assert type(raised.value) is error   # a PathError is a RunError: the drained client's must not be one


@pytest.mark.parametrize("workload, why", [
    (Starved(), "its connection in retransmission-timeout backoff (backoff 6, rto 96256 ms, 17414 bytes acked)"),
    (Backlogged(), "its connection still sending, 2596864 bytes the client wrote not yet sent (ESTAB :20010 "
                   "rto:780 cwnd:2 bytes_acked:28998 unacked:2 notsent:2596864 lastsnd:244)")])
def test_a_client_the_path_starves_after_its_data_flowed_is_stopped_and_its_flow_kept(tmp_path, workload, why):
    """Running the repetition again would keep only those in which no flow starved: the flow is measured by its
    sockets (its report missing, said why), the client stopped. Its socket backing off, or still holding data the
    client wrote, says the flow had data to send over the whole window; one with only its SYN acknowledged is
    still the path's to refuse, one drained the rig's to explain (above)."""
    with one_client(tmp_path, workload) as traffic:
        traffic.wait(0.2)
        assert traffic.clients[9].wait(10) is not None   # stopped
        assert "client had not finished within 0.2 s, " + why in traffic.unreported[9], traffic.unreported[9]
        # what held it, read before it was stopped: its control connection and where its process slept
        assert "its connections to port 5210 (its data's from :20010): ESTAB :41234" in traffic.unreported[9]
        assert "its process: sleep S in " in traffic.unreported[9], traffic.unreported[9]
        assert traffic.results() == {9: None}   # its JSON (none here) is not read


SS = """ESTAB 0      0      10.0.1.1:6009  10.0.2.1:5210
\t cubic wscale:10,10 rto:204 rtt:0.262/0.323 cwnd:20 bytes_sent:708902790 bytes_acked:708706342 unacked:3 notsent:4096
ESTAB 0      0      10.0.1.1:60922 10.0.2.1:5210
\t cubic wscale:10,10 rto:1206 backoff:2 rtt:0.021/0.02 ato:40 cwnd:13 bytes_acked:165 lastsnd:1016 lastrcv:1012
"""


def test_each_socket_of_ss_is_said_apart_with_its_port_and_the_counters_that_tell_a_stall():
    class Bed:
        def run(self, node, argv, check=True):
            assert node == "s1" and argv[:5] == ["ss", "-Htni", "state", "connected", "dport"], argv
            return subprocess.CompletedProcess(argv, 0, SS, "")
    flow = Flow(Bulk(), 9, "reno", "reno", "s1", "d1", 0.0, 1.0)
    assert Bulk().client_connections(Bed(), flow) == (
        "ESTAB :6009 rto:204 cwnd:20 bytes_acked:708706342 unacked:3 notsent:4096; "
        "ESTAB :60922 rto:1206 backoff:2 cwnd:13 bytes_acked:165 lastsnd:1016")
    (data, control) = sockets(SS)
    assert (data.backoff, data.notsent, data.port) == (None, 4096, 6009)
    assert (str(control.backoff), control.notsent) == ("backoff 2, rto 1206 ms, 165 bytes acked", 0)
