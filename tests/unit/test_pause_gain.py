"""The PAUSE study's pieces that need no machine: the gain and its interval, the baseline point, the files
workload in the spec and its flows' command lines."""
import math

import pytest
from scipy import stats as st

from ccrig.experiments import spec as specmod
from ccrig.errors import InputError
from ccrig.experiments.run.pause_run import baseline, gain
from ccrig.experiments.workloads import Flow
from ccrig.experiments.workloads.bulk import Bulk
from ccrig.experiments.workloads.files import Files


def raw(**extra):
    r = {"name": "t", "testbed": "netns",
         "topology": {"name": "pause_chain", "link_a": {"rate": "60pps"},
                      "link_b": {"rate": "100pps", "buffer": "10pkt"}, "link_c": {"rate": "15pps", "buffer": "20pkt"},
                      "pause": {"high": 12, "low": 8}},
         "flows": [{"count": 2, "cc": "reno", "workload": {"kind": "files", "size": "80kb", "idle": "1s"}}],
         "duration": "10s", "pause_gain": True}
    r.update(extra)
    return r


def test_gain_is_the_percent_increase_with_a_delta_method_interval():
    a = {"mean": 110.0, "std": 4.0, "n": 5}
    b = {"mean": 100.0, "std": 3.0, "n": 4}
    g = gain(a, b)
    assert g["percent"] == pytest.approx(10.0)
    rel = math.sqrt((4 / math.sqrt(5) / 110) ** 2 + (3 / 2 / 100) ** 2)
    half = 100 * 1.1 * rel * st.t.ppf(0.975, 3)
    assert g["ci95"] == pytest.approx([10 - half, 10 + half])


def test_gain_without_a_spread_or_a_baseline():
    assert gain({"mean": 90.0, "std": 0.0, "n": 1}, {"mean": 100.0, "std": 0.0, "n": 1})["ci95"] == \
        pytest.approx([-10.0, -10.0])
    assert gain({"mean": 90.0, "std": 1, "n": 3}, {"mean": 0.0, "std": 0, "n": 3})["percent"] is None
    assert gain({"mean": None, "n": 0}, {"mean": 1.0, "n": 3})["percent"] is None


def test_baseline_sets_both_thresholds_to_b2_and_keeps_the_rest():
    r = raw()
    exp = specmod.validate(r, "t")
    point = specmod.points(r, exp)[0]
    base = baseline(point)
    assert (base.experiment.topology.pause.high, base.experiment.topology.pause.t2) == (20, 20)
    assert base.experiment.topology.link_a == exp.topology.link_a and base.index == point.index
    assert point.experiment.topology.pause.high == 12   # the point itself untouched


def test_files_workload_in_the_spec_and_its_errors():
    exp = specmod.validate(raw(), "t")
    w = exp.flows[0].workload
    assert (w.kind, w.size.bytes, w.idle) == ("files", 80000, 1.0)
    assert specmod.validate(raw(flows=[{"workload": "bulk"}]), "t").flows[0].workload.kind == "bulk"
    with pytest.raises(InputError, match=r"flows\[0\]\.workload\.size: got '10pkt'"):
        specmod.validate(raw(flows=[{"workload": {"kind": "files", "size": "10pkt"}}]), "t")
    with pytest.raises(InputError, match=r"flows\[0\]\.workload"):
        specmod.validate(raw(flows=[{"workload": {"kind": "ftp"}}]), "t")


def test_files_flow_pins_the_bulk_flows_ports():
    exp = specmod.validate(raw(), "t")
    f = Flow(exp.flows[0].workload, 3, "reno", "reno", "s1", "d1", start=0.0, duration=10.0)
    b = Flow(Bulk(), 3, "reno", "reno", "s1", "d1", start=0.0, duration=10.0)
    assert isinstance(f.workload, Files) and type(b.workload) is Bulk
    assert (f.sender_key, f.receiver_key) == (b.sender_key, b.receiver_key) == ("20004:5204", "5204:20004")
    argv = f.client_argv("198.18.9.2")
    assert argv[argv.index("--cport") + 1] == "20004" and argv[argv.index("--port") + 1] == "5204"
    assert argv[argv.index("--size") + 1] == "80000b" and argv[argv.index("--cc") + 1] == "reno"
    assert f.server_argv("198.18.9.2")[1:] == ["serve", "--bind", "198.18.9.2", "--port", "5204"]
    assert f.output_name == "transfers-3.csv" and b.output_name == "iperf3-3.json"


def test_a_controller_that_went_without_looking_spoils_its_repetition_and_a_baseline_never():
    """PauseRun.judge: the controller's longest gap between looks at the queue against 1 % of the window."""
    from ccrig.experiments.run.pause_run import CONTROLLER_GAP_SHARE, PauseRun

    def judged(gap, paused=True, window=30.0):
        fid = {"verdict": "ok", "reasons": [], "cpu_steal": 0.0}
        PauseRun.judge(fid, {"paused": paused, "controller": {"longest_gap_s": gap}}, window)
        return fid

    assert CONTROLLER_GAP_SHARE == 0.01
    assert judged(0.3)["verdict"] == "ok"                 # at the bound: 1 % of 30 s
    late = judged(3.219)                                  # run AB's bulk repetition 9 at 0.1 s
    assert late["verdict"] == "testbed-limited"
    assert "3.219 s without a look at node 2's queue" in late["reasons"][0] and "30-s" in late["reasons"][0]
    assert judged(0.2, window=10.0)["verdict"] == "testbed-limited"   # the bound follows the window
    assert judged(3.219, paused=False)["verdict"] == "ok"  # a baseline (T1 = T2 = B2) never pauses
    assert judged(None)["verdict"] == "ok"                 # a record without the controller's account
