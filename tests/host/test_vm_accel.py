"""KVM-or-TCG detection never hangs and is cached: the probe is bounded and a second answer costs nothing."""
from __future__ import annotations

import json
import os
import time

import pytest

from ccrig.topologies.testbeds import vm

# its probe boots a guest for at most PROBE_TIMEOUT: on a host tier's worker beside the vm group's guests (in that
# group it lengthened the suite's critical path by 45 s), in a group of its own so it never meets another probe
pytestmark = [pytest.mark.host, pytest.mark.xdist_group("vm-accel")]


def test_probe_is_bounded_and_cached(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("host tier: needs root (/dev/kvm)")
    monkeypatch.delenv("CCRIG_VM_ACCEL", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    kernel = vm.find_kernel()
    t = time.monotonic()
    firmware = vm.kvm_firmware_probe()
    assert time.monotonic() - t < vm.PROBE_TIMEOUT + 10
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert not firmware
    mode = vm.accel_mode(kernel)
    assert mode in vm.ACCELS
    if not firmware:
        assert mode == "tcg"   # no KVM boot was even tried
    cache = json.loads((tmp_path / "ccrig" / "vm-accel.json").read_text())
    assert list(cache.values()) == [mode]
    # the cached answer: no probe runs
    monkeypatch.setattr(vm.guest, "probe_accel", lambda *a, **k: pytest.fail("probed again despite the cache"))
    assert vm.accel_mode(kernel) == mode
