"""The kernel modules build against a distribution's kernel headers (Debian linux-headers-amd64, the kernel
the vm tier boots), with their presets and runtime-writable parameters documented for modinfo. Building
needs no module support in the running kernel; loading them is the vm tier's (tests/vm/guest/test_cc_modules.py).
This build also leaves the .ko in tcp_modules/kmod for the guest, whose view of the tree is read-only.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TCP_MODULES = ROOT / "tcp_modules"
HEADERS = sorted(p for p in Path("/lib/modules").glob("*/build") if (p / "Makefile").exists())

pytestmark = pytest.mark.host


def test_distribution_headers_are_installed():
    assert HEADERS, "no kernel headers under /lib/modules/*/build; `make deps` installs linux-headers-amd64"


@pytest.mark.parametrize("kdir", HEADERS, ids=[p.parent.name for p in HEADERS])
def test_modules_build_against_headers(kdir):
    release = kdir.parent.name
    out = subprocess.run(["make", "-C", str(TCP_MODULES), "modules", f"KDIR={kdir}"], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "warning:" not in out.stderr.lower() + out.stdout.lower(), out.stderr[-2000:]
    for module, names, params in (
            ("tcp_alphabeta", ["ab_standard", "ab_responsive", "ab_smooth", "ab_param"], ["alpha", "beta"]),
            ("tcp_poly", ["poly_aimd", "poly_mimd", "poly_miad", "poly_aiad", "poly_aiad2", "poly_pipd",
                          "poly_aipd", "poly_piad", "poly_mimd_paper", "poly_pipd_paper", "poly_param"],
             ["alpha", "beta", "k", "l", "terms", "per_ack", "halve_first"]),
            ("tcp_generic", ["generic_5", "generic_40", "generic_param"], ["window"])):
        ko = TCP_MODULES / "kmod" / f"{module}.ko"
        info = subprocess.run(["modinfo", str(ko)], capture_output=True, text=True, check=True).stdout
        assert any(line.split()[1:2] == [release] for line in info.splitlines() if line.startswith("vermagic:"))
        assert "license:        GPL" in info
        desc = next(line for line in info.splitlines() if line.startswith("description:"))
        assert all(n in desc for n in names), desc
        documented = {line.split(":")[1].strip() for line in info.splitlines() if line.startswith("parm:")}
        assert documented == set(params)
        # every preset name fits TCP_CA_NAME_MAX and is in the module's string table
        data = ko.read_bytes()
        assert all(len(n) <= 15 and n.encode() + b"\0" in data for n in names)


def test_modules_target_says_what_is_missing():
    out = subprocess.run(["make", "-s", "-C", str(TCP_MODULES), "modules", "KDIR=/nonexistent"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0
    assert "KDIR=/nonexistent: no kernel build tree there; install the headers" in out.stderr
