"""Spec parsing: units, validation errors that name path, value and what is accepted, sweeps, overrides."""
import pytest

from ccrig.experiments import spec as specmod
from ccrig.errors import InputError
from ccrig.units import Rate, Size, UnitError, parse_rate, parse_size, parse_time

BASE = {"name": "t", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "15pkt"}},
        "flows": [{"cc": "reno"}], "duration": "10s"}


def raw(**changes):
    import copy
    r = copy.deepcopy(BASE)
    for k, v in changes.items():
        specmod.set_path(r, k.replace("__", "."), v)
    return r


@pytest.mark.parametrize("text,bps", [("10mbit", 10e6), ("800kbit", 800e3), ("1.5gbit", 1.5e9), ("1000bit", 1000),
                                      ("1mbps", 8e6)])
def test_rates(text, bps):
    assert parse_rate(text) == Rate(bits_per_s=bps)


def test_packet_rates_and_sizes_and_times():
    assert parse_rate("100pps").bps(1526) == 100 * 1526 * 8
    assert parse_size("100pkt") == Size(packets=100)
    assert parse_size("64kb") == Size(bytes=64000)
    assert parse_size("1kib") == Size(bytes=1024)
    assert parse_time("20ms") == pytest.approx(0.02)
    assert parse_time("250us") == pytest.approx(250e-6)
    assert parse_time("1.5s") == 1.5


@pytest.mark.parametrize("bad", ["10mbti", "-5mbit", "0mbit", "fast", "", True])
def test_bad_rates(bad):
    with pytest.raises(UnitError):
        parse_rate(bad)


def test_spec_parses_units_once():
    e = specmod.validate(raw(), "s")
    assert e.topology.bottleneck.rate.bits_per_s == 10e6
    assert e.topology.bottleneck.buffer.packets == 15
    assert e.duration == 10.0 and e.interval == 1.0 and e.n_intervals == 10


@pytest.mark.parametrize("path,value,expect", [
    ("topology.bottleneck.rate", "-10mbit", "topology.bottleneck.rate: got '-10mbit'; a rate must be positive"),
    ("topology.bottleneck.rate", "10mbti", "unknown rate unit 'mbti'"),
    ("topology.bottleneck.bufer", "3pkt", "topology.bottleneck.bufer: unknown field; expected one of: buffer, qdisc, rate"),
    ("duration", 10, "duration: got 10; a time needs a unit"),
    ("flows[0].count", 0, "flows[0].count: got 0"),
    ("testbed", "docker", "testbed: got 'docker'; expected 'hosts', 'mininet', 'netns', 'vm' or 'auto'"),
    ("topology.bottleneck.qdisc", {"kind": "bogus"}, "topology.bottleneck.qdisc: got {'kind': 'bogus'}"),
])
def test_errors_name_path_value_and_accepted(path, value, expect):
    with pytest.raises(InputError) as e:
        specmod.validate(raw(**{path: value}), "spec.yaml")
    assert str(e.value).startswith("spec.yaml: ")
    assert expect in str(e.value)


def test_too_short_duration():
    with pytest.raises(InputError, match="duration: got 2s, which is 2 intervals"):
        specmod.validate(raw(duration="2s"), "s")


def test_sweep_grid_and_override(tmp_path):
    import yaml
    r = raw()
    r["sweep"] = {"topology.bottleneck.buffer": ["10pkt", "50pkt"], "flows[0].cc": ["reno", "cubic"]}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(r, sort_keys=False))
    r2, e = specmod.load(p, ["repetitions=3"])
    pts = specmod.points(r2, e)
    assert [pt.params for pt in pts] == [
        {"topology.bottleneck.buffer": "10pkt", "flows[0].cc": "reno"},
        {"topology.bottleneck.buffer": "10pkt", "flows[0].cc": "cubic"},
        {"topology.bottleneck.buffer": "50pkt", "flows[0].cc": "reno"},
        {"topology.bottleneck.buffer": "50pkt", "flows[0].cc": "cubic"}]
    assert pts[3].experiment.topology.bottleneck.buffer.packets == 50
    assert pts[3].experiment.flows[0].cc == "cubic"
    assert all(pt.experiment.repetitions == 3 for pt in pts)


def test_bad_sweep_value_names_the_point(tmp_path):
    import yaml
    r = raw()
    r["sweep"] = {"topology.bottleneck.buffer": ["10pkt", "lots"]}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(r))
    with pytest.raises(InputError, match="sweep point topology.bottleneck.buffer=lots"):
        specmod.load(p)


@pytest.mark.parametrize("values", [[], None])
def test_empty_sweep_list_names_the_path(tmp_path, values):
    """A grid of no points is refused as the field's error, whether [] comes from the file or from --set."""
    import yaml
    r = raw()
    r["sweep"] = {"topology.bottleneck.rate": ["10mbit"], "topology.bottleneck.buffer": values or []}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(r))
    overrides = [] if values is not None else ["sweep={topology.bottleneck.buffer: []}"]
    with pytest.raises(InputError, match=r"sweep\.topology\.bottleneck\.buffer: got \[\]; expected a list of at "
                                         r"least 1 entry$"):
        specmod.load(p, overrides)


def test_bad_override(tmp_path):
    import yaml
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(raw()))
    with pytest.raises(InputError, match="--set: got 'duration'; expected path=value"):
        specmod.load(p, ["duration"])


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such spec file"):
        specmod.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n  topology: [\n")
    with pytest.raises(InputError, match="not valid YAML at line 2"):
        specmod.load(bad)


def test_default_spec_is_valid():
    from pathlib import Path
    _, e = specmod.load(Path(__file__).parents[2] / "experiments/specs/default.yaml")
    assert e.n_flows == 4 and e.topology.bottleneck.rate.bits_per_s == 10e6
