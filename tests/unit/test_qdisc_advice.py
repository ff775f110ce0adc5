"""The probe's advice and what it tries, without touching the kernel."""
import os

from ccrig import qdiscs
from ccrig.qdiscs import probe


def test_probe_tries_every_kind_and_the_link_disciplines():
    tried = probe.probes()
    assert set(tried) == set(qdiscs.kinds()) | {"htb", "tbf", "netem"}
    for kind, (module, args) in tried.items():
        assert module == f"sch_{kind}" or (kind in ("pfifo", "bfifo") and module == "sch_fifo")
        assert args[0] == kind


def test_missing_message_names_kind_release_and_way_out():
    msg = probe.missing_message("fq", "9.9.9-other")
    assert "'fq'" in msg and "9.9.9-other" in msg and "modprobe sch_fq" in msg and "testbed: vm" in msg
    msg = probe.missing_message("fq_codel", "9.9.9-other")
    assert "modprobe sch_fq_codel" in msg


def test_missing_message_on_a_kernel_without_modules():
    msg = probe.missing_message("red", os.uname().release)
    assert "'red'" in msg and os.uname().release in msg and "testbed: vm" in msg
    if probe.modules_supported():
        assert "modprobe sch_red" in msg
    else:
        assert "cannot load modules" in msg and "modprobe" not in msg
