"""The traffic-source kinds in a spec (experiments/workloads/: poisson, cbr, onoff, flood,
interactive): their fields with units, what they refuse (one line naming the field), and the programs they run."""
import pytest
import yaml

from ccrig.errors import InputError
from ccrig.experiments import spec as specmod
from ccrig.experiments import workloads
from ccrig.experiments.workloads import Flow


def _exp(*workload_yaml: str):
    text = ("name: t\ntopology: {name: dumbbell, bottleneck: {rate: 10mbit}}\nduration: 5s\nflows:\n"
            + "".join(f"  - {{workload: {w}}}\n" for w in workload_yaml))
    return specmod.validate(yaml.safe_load(text), "t")


def test_every_source_is_a_kind_of_its_own():
    assert {"poisson", "cbr", "onoff", "flood", "interactive"} <= set(workloads.kinds())


def test_rates_in_bits_count_whole_frames_and_pps_is_packets():
    e = _exp("{kind: cbr, rate: 5mbit}", "{kind: poisson, rate: 100pps, size: 200b}", "{kind: flood, size: 100b}")
    cbr, poisson, flood = (f.workload for f in e.flows)
    assert cbr.size.bytes == 1472 and cbr.pps() == pytest.approx(5e6 / (8 * 1514))
    assert poisson.pps() == 100
    assert flood.pps() == 0


def test_onoff_takes_on_and_off_as_written_although_yaml_reads_them_as_booleans():
    w = _exp("{kind: onoff, rate: 5mbit, on: 300s, off: 300s, periods: exponential}").flows[0].workload
    assert (w.on, w.off, w.periods) == (300.0, 300.0, "exponential")
    assert _exp("{kind: onoff, rate: 1000pps, on: 1s, off: 2s}").flows[0].workload.periods == "fixed"


@pytest.mark.parametrize("workload, field, words", [
    ("{kind: poisson, rate: -5mbit}", "flows[0].workload.rate", "a rate must be positive"),
    ("{kind: cbr, rate: 0pps}", "flows[0].workload.rate", "a rate must be positive"),
    ("{kind: cbr}", "flows[0].workload.rate", "missing"),
    ("{kind: onoff, rate: 5mbit}", "flows[0].workload.on", "missing"),
    ("{kind: onoff, rate: 5mbit, on: 1s}", "flows[0].workload.off", "missing"),
    ("{kind: onoff, rate: 5mbit, on: 0s, off: 1s}", "flows[0].workload.on", "positive"),
    ("{kind: onoff, rate: 5mbit, on: 1s, off: 1s, periods: gamma}", "flows[0].workload.periods", "exponential"),
    ("{kind: flood, size: 10b}", "flows[0].workload.size", "from 24b"),
    ("{kind: poisson, rate: 1mbit, size: 2000b}", "flows[0].workload.size", "1472b"),
    ("{kind: poisson, rate: 1mbit, size: 10pkt}", "flows[0].workload.size", "in bytes"),
    ("{kind: flood, rate: 1mbit}", "flows[0].workload.rate", "unknown field"),
    ("{kind: interactive, think: 0s}", "flows[0].workload.think", "positive"),
    ("{kind: interactive, size: 8b}", "flows[0].workload.size", "from 16b"),
    ("{kind: interactive, gaps: uniform}", "flows[0].workload.gaps", "fixed"),
])
def test_bad_sources_are_one_line_naming_the_field(workload, field, words):
    with pytest.raises(InputError) as e:
        _exp(workload)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"t: {field}:") and words in msg, msg


def test_udp_programs_are_the_sources_script_on_the_flows_ports():
    w = _exp("{kind: onoff, rate: 1000pps, size: 200b, on: 1s, off: 2s}").flows[0].workload
    f = Flow(w, 2, "cubic", "cubic", "s3", "d3", start=0.0, duration=8.0)
    server = f.server_argv("198.18.0.6")
    assert server[0].endswith("experiments/nodes/sources.py") and server[1] == "udp-recv"
    assert server[server.index("--port") + 1] == "5203" and server[server.index("--key") + 1] == "5203:20003"
    client = f.client_argv("198.18.0.6")
    assert client[1] == "udp-send" and client[client.index("--cport") + 1] == "20003"
    assert [client[client.index(k) + 1] for k in ("--pattern", "--pps", "--size", "--on", "--off", "--periods",
                                                   "--duration")] == ["onoff", "1000", "200", "1", "2", "fixed", "8"]
    assert w.script and not w.tcp_info and w.wait_go == ("--wait-go",)
    assert f.output_name == "sender-2.json" and w.server_output.format(index=2) == "receiver-2.jsonl"


def test_interactive_is_tcp_with_the_flows_congestion_control():
    w = _exp("{kind: interactive, think: 50ms, gaps: fixed}").flows[0].workload
    assert (w.size.bytes, w.think, w.gaps, w.tcp_info) == (40, 0.05, "fixed", True)
    f = Flow(w, 0, "reno", "reno", "s1", "d1", start=0.0, duration=5.0)
    client = f.client_argv("198.18.0.2")
    assert client[1] == "msg-send" and client[client.index("--cc") + 1] == "reno"
    assert client[client.index("--think") + 1] == "0.05" and client[client.index("--gaps") + 1] == "fixed"
    assert f.server_argv("198.18.0.2")[1] == "msg-recv"
