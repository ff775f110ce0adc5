"""Every numeric field of a spec has a range, and a value outside it is refused when the spec is validated, by a
message naming the field, the value and the range (ccrig/units.py, ccrig/fields.py, the topologies, the spec).
The whole corpus of bad inputs goes through the real command line in tests/host/test_bad_inputs.py."""
from __future__ import annotations

import copy

import pytest

from ccrig import units
from ccrig.errors import InputError
from ccrig.experiments import spec as specmod

BASE = {"name": "r", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt"}},
        "flows": [{"cc": "reno"}], "duration": "5s"}
CHAIN = {"name": "pause_chain", "link_a": {"rate": "25pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
         "link_c": {"rate": "15pps", "buffer": "20pkt"}, "pause": {"high": 15}, "scale": 10}


def validate(**changes):
    raw = copy.deepcopy(BASE)
    for path, value in changes.items():
        specmod.set_path(raw, path.replace("__", "."), value)
    return specmod.validate(raw, "spec")


def test_tc_rate_limits():
    units.check_bps(8)
    units.check_bps(8 * 2 ** 32)
    for bps in (7.9, 8 * 2 ** 32 + 1):
        with pytest.raises(units.UnitError, match="from 8bit"):
            units.check_bps(bps)
    assert units.parse_rate("34gbit").bits_per_s == 34e9
    with pytest.raises(units.UnitError, match="34.36gbit"):
        units.parse_rate("35gbit")


def test_sizes_are_positive_and_buffers_hold_a_packet():
    for text in ("0pkt", "-5pkt", "0b", "-1kb"):
        with pytest.raises(units.UnitError, match="must be positive"):
            units.parse_size(text)
    assert units.buffer_problem(units.Size(packets=1), 1514) is None
    assert units.buffer_problem(units.Size(bytes=1514), 1514) is None
    assert "1514b" in units.buffer_problem(units.Size(bytes=1513), 1514)
    assert "32-bit" in units.buffer_problem(units.Size(packets=2 ** 32), 1514)


@pytest.mark.parametrize("changes,message", [
    ({"topology__bottleneck__buffer": "0pkt"}, "topology.bottleneck.buffer: got '0pkt'; a size must be positive"),
    ({"topology__bottleneck__buffer": "1000b"}, "topology.bottleneck.buffer: got '1000b'; expected a buffer of at "
                                                "least 1 packet or one full-size packet in bytes (1514b)"),
    ({"topology__bottleneck__buffer": "1000b", "topology__mtu": 900}, None),   # 914-byte frames fit
    ({"topology__bottleneck__rate": "40gbit"}, "topology.bottleneck.rate: got '40gbit'; expected a rate from 8bit"),
    ({"topology__bottleneck__rate": "0.0001pps"}, "topology.bottleneck.rate: got '0.0001pps'; expected a rate"),
    ({"topology__rtt": "2min"}, "topology.rtt: got '120s'; expected at most 60s"),
    ({"topology__mtu": 100}, "topology.mtu: got 100; expected an MTU of 576..9000 bytes"),
    ({"topology__pairs": 255}, "topology.pairs: got 255; expected 1..254 host pairs"),
    ({"flows[0].count": 100000}, "flows[0].count: got 100000; expected 1..1000 flows"),
    ({"flows[0].count": 254}, None),
    ({"flows[0].count": 255}, "flows: got 255 flows, each on a host pair of its own; expected at most 254"),
    ({"flows[0].count": 1000, "topology__pairs": 10}, None),
    ({"flows": [{"count": 600}, {"count": 600}], "topology__pairs": 10}, "flows: got 1200 flows in all"),
    ({"flows[0].start": "5s"}, "flows[0].start: got 5s; expected a time before the end of the run"),
    ({"duration": "100000s"}, "duration: got '100000s'; expected a time from 0 to 1 day"),
    ({"interval": "5ms", "duration": "1s"}, "interval: got 0.005s; expected a time of at least 10ms"),
    ({"repetitions": 1001}, "repetitions: got 1001"),
])
def test_dumbbell_and_experiment_ranges(changes, message):
    if message is None:
        validate(**changes)
        return
    with pytest.raises(InputError) as e:
        validate(**changes)
    assert str(e.value).startswith(f"spec: {message}"), str(e.value)


@pytest.mark.parametrize("changes,message", [
    ({"scale": 1e9}, "topology.link_a.rate: got '25pps'; expected a rate times scale 1e+09 from 8bit"),
    ({"pause": {"high": 15, "paused_rate": "0.00001pps"}}, "topology.pause.paused_rate: got '1e-05pps'"),
    ({"pause": {"high": 15, "poll": "0s"}}, "topology.pause.poll: got '0s'; expected a time from 10us to 1s"),
    ({"link_b": {"rate": "100pps", "buffer": "0pkt"}}, "topology.link_b.buffer: got '0pkt'"),
    ({"pairs": 300}, "topology.pairs: got 300; expected 1..254 host pairs"),
    ({"mtu": 10000}, "topology.mtu: got 10000"),
])
def test_pause_chain_ranges(changes, message):
    topo = {**copy.deepcopy(CHAIN), **changes}
    with pytest.raises(InputError) as e:
        validate(topology=topo)
    assert str(e.value).startswith(f"spec: {message}"), str(e.value)


def test_spec_files_that_are_not_specs(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(InputError, match=r"binary.yaml: not a text file \(byte 0x00 at offset 0\)"):
        specmod.load(binary)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"not a text file \(byte 0xe9 at offset 9\)"):
        specmod.load(latin)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * specmod.MAX_SPEC_BYTES)
    with pytest.raises(InputError, match="big.yaml: got a file of more than 1048576 bytes; expected a spec of at "
                                         "most 1024 KiB"):
        specmod.load(big)
