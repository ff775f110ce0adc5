"""ethtool's pause API on this kernel: veth implements none, so every path must end in a clear error (or, with
mode auto, the emulated controller and a note). The VM tier tests a driver that does implement it (e1000e)."""
import os

import pytest

from conftest import veth_namespace
from ccrig.commands import Commands
from ccrig.errors import InputError
from ccrig.topologies.pause.ethtool import Ethtool, NicPause, PauseParams, resolve_mode


@pytest.fixture
def veth(tmp_path):
    ns = f"ccF-et-{os.getpid()}"
    with veth_namespace(ns, "ccFv0", "ccFv1", Commands(tmp_path / "commands.log")) as c:
        yield ns, c


def test_unsupported_interface_names_interface_and_driver(veth):
    ns, c = veth
    tool = Ethtool(c, ns)
    with pytest.raises(InputError, match=r"interface ccFv0 \(namespace ccF-et-\d+\) \(driver veth\) does not "
                                         r"support Ethernet flow control: ethtool -a: Operation not supported"):
        tool.get("ccFv0")
    assert not tool.supported("ccFv0")
    with pytest.raises(InputError, match="driver veth"):
        NicPause(c).enable(ns, "ccFv0", PauseParams(False, True, True))
    # nothing was changed, so nothing is restored
    assert "ethtool -A" not in (c.log_path.read_text())


def test_missing_interface(veth):
    ns, c = veth
    with pytest.raises(InputError, match=r"interface ccFnope \(namespace .*\) does not exist"):
        Ethtool(c, ns).get("ccFnope")


def test_auto_falls_back_to_emulated_with_a_note(veth):
    ns, c = veth
    mode, note = resolve_mode("auto", [(ns, "ccFv0"), (ns, "ccFv1")], c)
    assert mode == "emulated"
    assert "ccFv0 (driver veth)" in note and "ccFv1 (driver veth)" in note
    with pytest.raises(InputError, match="driver veth"):
        resolve_mode("frames", [(ns, "ccFv0")], c)
    assert resolve_mode("emulated", [(ns, "ccFv0")], c) == ("emulated", None)


def test_veth_real_driver_counters(veth):
    ns, c = veth
    assert Ethtool(c, ns).driver_counters("ccFv0") == {}


def test_chain_plan_on_veth(tmp_path):
    """A pause_chain on namespaces: emulated as asked; auto falls back with a note; frames and ethtool are a
    clear error before any traffic (veth has no pause API)."""
    from ccrig.topologies.testbeds.netns import NetnsTestbed
    from ccrig.topologies.pause import chain_plan
    from ccrig.topologies.named.pause_chain import PauseChainSpec

    raw = {"name": "pause_chain", "link_a": {"rate": "60pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
           "link_c": {"rate": "15pps", "buffer": "20pkt"}, "pause": {"high": 12, "low": 8}}
    spec = PauseChainSpec.model_validate(raw)
    topo = spec.build(flows=1)
    c = Commands(tmp_path / "commands.log")
    bed = NetnsTestbed(topo, c, prefix=f"ccF-pl{os.getpid()}")
    try:
        bed.up()
        plan = chain_plan(spec, topo, bed, c)
        assert (plan.mode, plan.note, plan.nic_settings, plan.actuator) == ("emulated", None, [], "tbf")
        spec.pause.mode = "auto"
        plan = chain_plan(spec, topo, bed, c)
        assert plan.mode == "emulated" and plan.actuator == "tbf" and "(driver veth)" in plan.note
        for mode in ("frames", "ethtool"):
            spec.pause.mode = mode
            with pytest.raises(InputError, match=r"interface eth\d \(namespace ccF-pl\d+-n[12]\) \(driver veth\)"):
                chain_plan(spec, topo, bed, c)
    finally:
        bed.down()
