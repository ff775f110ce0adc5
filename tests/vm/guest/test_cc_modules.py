"""The kernel modules tcp_alphabeta and tcp_poly on a distribution kernel (inside the vm guest): they load
through CcManager (prefer kmod), register their presets and the tunable instances, take runtime parameters,
carry iperf3 flows between two namespaces, unload cleanly, and the kernel logs no WARN or BUG meanwhile.

The .ko come from tcp_modules/kmod when the host built them for this kernel (tests/host/test_cc_kmod_build.py,
or `make -C tcp_modules modules KDIR=/lib/modules/RELEASE/build`); the guest sees the tree read-only, so
otherwise they are built here, in a copy under /tmp, against this kernel's headers.
"""
from __future__ import annotations

import json
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from ccrig.tcp_modules.kmod import MODULE
from ccrig.tcp_modules.manager import CcManager
from ccrig.tcp_modules.systems import available, module_loaded
from support.wait import listening

ROOT = Path(__file__).resolve().parents[3]
TCP_MODULES = ROOT / "tcp_modules"
CCS = ["ab_smooth", "poly_pipd", {"law": "alphabeta", "alpha": 2, "beta": 0.6},
       {"law": "poly", "k": -1, "l": 1, "terms": 1, "alpha": 8, "beta": 0.25}]


def _built_for_this_kernel(d: Path) -> bool:
    for m in MODULE.values():
        ko = d / f"{m}.ko"
        if not ko.exists():
            return False
        vermagic = subprocess.run(["modinfo", "-F", "vermagic", str(ko)], capture_output=True, text=True).stdout
        if not vermagic.startswith(platform.release() + " "):
            return False
    return True


@pytest.fixture(scope="module")
def kmod_dir(tmp_path_factory):
    if _built_for_this_kernel(TCP_MODULES / "kmod"):
        return TCP_MODULES / "kmod"
    work = tmp_path_factory.mktemp("ccrig-kmod")
    # the families' descriptors and C laws too: the Makefile writes each module's source from them
    for sub in ("kmod", "include", "families"):
        shutil.copytree(TCP_MODULES / sub, work / sub,
                        ignore=shutil.ignore_patterns("*.o", "*.ko", "*.mod*", ".*", "__pycache__"))
    shutil.copy2(TCP_MODULES / "Makefile", work / "Makefile")
    kdir = Path("/lib/modules") / platform.release() / "build"
    out = subprocess.run(["make", "-C", str(work), "modules", f"KDIR={kdir}"], capture_output=True, text=True,
                         timeout=1200)
    assert out.returncode == 0, f"building the modules against {kdir} failed:\n{out.stdout[-1500:]}{out.stderr[-1500:]}"
    return work / "kmod"


@pytest.fixture(scope="module")
def dmesg_start(commands):
    return len(commands.run(["dmesg"]).stdout.splitlines())


@pytest.fixture(scope="module")
def loaded(commands, kmod_dir, dmesg_start):
    m = CcManager(commands, "ccrig-vmcc", prefer="kmod", kmod_dir=kmod_dir)
    assert m.preflight(CCS) == []
    names = m.prepare(CCS)
    yield m, names
    assert m.release() == []


def test_modules_register_presets_and_tunable_instances(loaded):
    m, names = loaded
    assert list(names.values()) == ["ab_smooth", "poly_pipd", "ab_param", "poly_param"]
    have = available()
    for n in ("ab_standard", "ab_responsive", "ab_smooth", "ab_param", "poly_aimd", "poly_mimd", "poly_miad",
              "poly_aiad", "poly_aiad2", "poly_pipd", "poly_aipd", "poly_piad", "poly_param",
              "poly_mimd_paper", "poly_pipd_paper"):   # study 002's models with numbers (tcp_modules/laws.py)
        assert n in have
    desc = {d["kernel_name"]: d for d in m.describe()}
    assert {d["form"] for d in desc.values()} == {"kmod"}
    assert len(desc["ab_smooth"]["sha256"]) == 64 and desc["ab_smooth"]["module"] == "tcp_alphabeta"
    # the manager wrote the tunable instances' parameters; the modules read them back in decimal
    ab = Path("/sys/module/tcp_alphabeta/parameters")
    assert (ab / "alpha").read_text().strip() == "2.000000" and (ab / "beta").read_text().strip() == "0.600000"
    poly = Path("/sys/module/tcp_poly/parameters")
    assert [(poly / p).read_text().strip() for p in ("k", "l", "terms", "per_ack", "halve_first")] == [
        "-1", "1", "1", "0", "0"]
    assert (poly / "alpha").read_text().strip() == "8.000000"


def test_parameters_out_of_range_are_refused(loaded):
    beta = Path("/sys/module/tcp_alphabeta/parameters/beta")
    for bad in ("1.5", "0", "x"):
        with pytest.raises(OSError):
            beta.write_text(bad)
    with pytest.raises(OSError):
        Path("/sys/module/tcp_poly/parameters/k").write_text("7")
    assert beta.read_text().strip() == "0.600000"


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_iperf3_flow_uses_the_module(loaded, ns_pair_shared, commands, which):
    _, names = loaded
    name = list(names.values())[which]
    p = ns_pair_shared
    server = commands.popen(["iperf3", "-s", "-1", "-p", "5301"], ns=p.b)
    try:
        # under TCG the server can take seconds to listen: a client started before fails to connect
        listening(lambda argv: commands.run(argv, ns=p.b, check=False), 5301, timeout=60)
        out = commands.run(["iperf3", "-c", p.addr_b, "-p", "5301", "-t", "2", "-C", name, "-J"], ns=p.a, timeout=120,
                           check=False)
    finally:
        server.kill()
        server.wait(timeout=10)
    result = json.loads(out.stdout)
    assert "error" not in result, result["error"]
    assert result["end"]["sender_tcp_congestion"] == name
    assert result["end"]["sum_received"]["bytes"] > 100_000


def test_unload_leaves_nothing_and_no_kernel_warning(loaded, commands, dmesg_start):
    m, names = loaded
    assert m.release() == []
    have = available()
    assert not set(names.values()) & set(have)
    assert not module_loaded("tcp_alphabeta") and not module_loaded("tcp_poly")
    new = commands.run(["dmesg"]).stdout.splitlines()[dmesg_start:]
    bad = [line for line in new if any(w in line for w in ("WARNING:", "BUG:", "Call Trace", "Oops"))]
    assert not bad, "\n".join(bad[:20])
