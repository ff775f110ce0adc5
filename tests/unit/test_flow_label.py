"""A flow's `label`: what figures, reports and the terminal's table call it (a paper's "Generic", "Telnet"), kept
from the spec through the repetition's summary to the point's; claims still pick flows by index or by cc."""
import pytest

from ccrig.errors import InputError
from ccrig.experiments import spec as specmod
from ccrig.experiments.report.summary import flow_label
from ccrig.experiments.run import summary
from ccrig.experiments.run.repetition import flows_of

SPEC = {"name": "labels", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "20pkt"}},
        "duration": "4s",
        "flows": [{"cc": {"law": "alphabeta", "alpha": 5, "beta": 0.99}, "label": "Generic", "count": 2},
                  {"cc": "reno"}]}


def test_a_label_names_the_flow_from_the_spec_to_the_points_summary():
    exp = specmod.validate(SPEC, "spec.yaml")
    flows = flows_of(exp, exp.topology.build(exp.n_flows), {0: "ccrig_ab0", 1: "ccrig_ab0", 2: "reno"})
    assert [f.name for f in flows] == ["Generic", "Generic", ""]
    rows = {f.index: [{"goodput_bps": 1e6}, {"goodput_bps": 1e6}] for f in flows}
    _, per_flow = summary.means(flows, rows, [{"goodput_bps": 3e6}] * 2, warmup=1)
    assert [e.get("label") for e in per_flow] == ["Generic", "Generic", None]
    # the congestion control is still the flow's cc (what a claim's {cc: ...} matches), and its label is its name
    assert per_flow[0]["cc"] == "alphabeta(alpha=5,beta=0.99)" and per_flow[2]["cc"] == "reno"
    assert [flow_label(e) for e in per_flow] == ["Generic #0", "Generic #1", "reno #2"]
    # the point's entry keeps it
    reps = [{"system": {}, "flows": per_flow, "t_max_bps": 1e7, "fair_share_bps": 3.3e6}]
    point = summary.point(specmod.points(SPEC, exp)[0], reps)
    assert [f.get("label") for f in point["flows"]] == ["Generic", "Generic", None]


@pytest.mark.parametrize("label", ["", "x" * 33, "two\nlines"])
def test_a_bad_label_is_one_line_naming_the_field(label):
    with pytest.raises(InputError, match=r"flows\[0\]\.label") as e:
        specmod.validate({**SPEC, "flows": [{"cc": "reno", "label": label}]}, "spec.yaml")
    assert "\n" not in str(e.value)


def test_the_utility_diagram_names_flows_by_their_label(tmp_path):
    from ccrig.experiments.report import plots
    at = lambda n, name, g: {"flow": n, "cc": "alphabeta(alpha=5,beta=0.99)", **({"label": name} if name else {}),
                             "goodput_bps": {"mean": g}, "rtt_s": {"mean": 0.1 + 0.05 * max(n, 1)}}
    # the two FTPs at one place share a label, as flows of one cc do
    flows = [at(0, "G FTP", 4.0e5), at(1, "G FTP", 4.0e5), at(2, "G Telnet", 1e3), at(3, None, 2e5)]
    svg = plots.plot_utility([{"index": 0, "params": {"q": "pfifo"}, "flows": flows}], tmp_path)
    text = svg.with_suffix(".svg").read_text()
    assert "G FTP #0, #1" in text and "G Telnet #2" in text and "alphabeta(alpha=5,beta=0.99) #3" in text
