"""The vm testbed's pure parts: kernel naming and ordering, the vng command line, the spec's `vm:` section."""
from __future__ import annotations

import json
import shlex
import struct
import tempfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from ccrig import machine
from ccrig.errors import InputError
from ccrig.topologies.testbeds import vm
from ccrig.topologies.testbeds.vm import guest


def test_releases_order_as_versions():
    releases = ["6.1.0-112-amd64", "6.10.0-1-amd64", "6.1.0-56-amd64", "5.10.0-30-amd64"]
    assert sorted(releases, key=vm.kernel._version_key) == ["5.10.0-30-amd64", "6.1.0-56-amd64", "6.1.0-112-amd64",
                                                    "6.10.0-1-amd64"]


def test_release_read_from_a_bzimage_header(tmp_path):
    # the x86 boot protocol: "HdrS" at 0x202, a pointer at 0x20E to the version string (relative to 0x200)
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    image[0x20E:0x210] = struct.pack("<H", 0x300)
    image[0x500:0x500 + 40] = b"6.9.7-ccrig (someone@somewhere) #1 SMP\0".ljust(40, b"\0")
    path = tmp_path / "bzImage"
    path.write_bytes(bytes(image))
    assert vm.image_release(path) == "6.9.7-ccrig"
    (tmp_path / "not-a-kernel").write_bytes(b"\0" * 0x1000)
    assert vm.image_release(tmp_path / "not-a-kernel") is None


def test_unknown_kernel_names_the_field_and_what_is_accepted():
    with pytest.raises(InputError, match=r"^kernel: got '0\.0\.0-none'; expected a kernel release"):
        vm.find_kernel("0.0.0-none")


def test_a_file_that_is_not_a_kernel_is_refused(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"junk" * 200)
    with pytest.raises(InputError, match="expected a bootable x86 kernel image"):
        vm.find_kernel(str(junk))


def test_vng_argv(tmp_path):
    kernel = vm.Kernel(Path("/boot/vmlinuz-6.1.0-56-amd64"), "6.1.0-56-amd64")
    argv = vm.vng_argv(kernel, "true", "tcg", cwd=Path("/work"), rwdirs=(tmp_path,), memory="1G", cpus=2)
    assert argv[0] == "env" and argv[1].startswith("PATH=")
    body = argv[2:]
    assert body[0].endswith("vng")
    joined = shlex.join(body)
    for part in ("--run /boot/vmlinuz-6.1.0-56-amd64", "--user root", "--memory 1G", "--cpus 2", "--force-9p",
                 "--cwd /work", "--disable-kvm", f"--rwdir {tmp_path}"):
        assert part in joined
    assert body[-2:] == ["--exec", "true"]
    assert "--disable-kvm" not in vm.vng_argv(kernel, "true", "kvm")
    # virtme-run's own files go where the run removes them (run_in_guest: a folder of the guest's name)
    assert vm.vng_argv(kernel, "true", "kvm", tmpdir=tmp_path)[2] == f"TMPDIR={tmp_path}"
    with pytest.raises(InputError, match="accel: got 'hvf'"):
        vm.vng_argv(kernel, "true", "hvf")
    with pytest.raises(InputError, match="rwdir: got"):
        vm.vng_argv(kernel, "true", "tcg", rwdirs=(tmp_path / "missing",))


def test_guest_command_finds_this_environment():
    line = vm.guest_command(["ccrig", "run", "a spec.yaml"], {"X": "1"})
    words = shlex.split(line)
    assert words[:2] == ["exec", "env"]
    assert f"PATH={vm.VENV_BIN}:{vm.GUEST_PATH}" in words
    assert "X=1" in words and "PYTHONDONTWRITEBYTECODE=1" in words
    assert words[-3:] == ["ccrig", "run", "a spec.yaml"]


def test_the_guest_is_handed_the_checkouts_revision_and_reads_it_back(monkeypatch):
    here = machine.git_revision()
    words = shlex.split(vm.guest_command(["true"]))
    handed = [w.split("=", 1)[1] for w in words if w.startswith(machine.GIT_ENV + "=")]
    assert len(handed) == 1 and json.loads(handed[0]) == here
    # in the guest: the handed answer, not git's (this one is no revision of any checkout)
    monkeypatch.setenv(machine.GIT_ENV, json.dumps({"commit": "0" * 40, "dirty": True}))
    machine.git_revision.cache_clear()
    try:
        assert machine.git_revision() == {"commit": "0" * 40, "dirty": True}
    finally:
        machine.git_revision.cache_clear()


def test_the_guest_is_handed_the_tools_versions_and_reads_them_back(monkeypatch):
    here = machine.tool_versions()
    words = shlex.split(vm.guest_command(["true"]))
    handed = [w.split("=", 1)[1] for w in words if w.startswith(machine.TOOLS_ENV + "=")]
    assert len(handed) == 1 and json.loads(handed[0]) == here
    monkeypatch.setenv(machine.TOOLS_ENV, json.dumps({"iperf3": "iperf 0.0", "tc": None}))
    machine.tool_versions.cache_clear()
    try:
        assert machine.tool_versions() == {"iperf3": "iperf 0.0", "tc": None}   # handed, no tool asked
    finally:
        machine.tool_versions.cache_clear()


def test_forced_accel(monkeypatch):
    monkeypatch.setenv("CCRIG_VM_ACCEL", "tcg")
    assert vm.accel_mode(vm.Kernel(Path("/nonexistent"), "x")) == "tcg"
    monkeypatch.setenv("CCRIG_VM_ACCEL", "fast")
    with pytest.raises(InputError, match="CCRIG_VM_ACCEL: got 'fast'; expected kvm or tcg"):
        vm.accel_mode()


def test_vm_options():
    assert vm.VmOptions().memory == vm.MEMORY
    assert vm.VmOptions(kernel="6.1.0-56-amd64", memory="1536M", cpus=1).cpus == 1
    with pytest.raises(ValidationError, match="memory"):
        vm.VmOptions(memory="2GB")
    with pytest.raises(ValidationError, match="cpus"):
        vm.VmOptions(cpus=0)
    with pytest.raises(ValidationError):
        vm.VmOptions(kernal="typo")


def test_clean_removes_the_command_files_of_guests_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "ccrig" / "vm-commands"
    folder.mkdir(parents=True)
    gone, live, other = (folder / n for n in ("ccrig-999991-ab12.sh", "ccrig-999992-cd34.sh", "other-1-ef.sh"))
    for f in (gone, live, other):
        f.write_text("true\n")
    vm.stop_stray_guests("ccrig-99999", keep=lambda name: name == "ccrig-999992")
    assert not gone.exists() and live.exists() and other.exists()


def test_clean_removes_the_virtme_folders_of_guests_it_stopped(tmp_path, monkeypatch):
    # run_in_guest removes its own; a run killed outright left /tmp/ccrig-PID-vng-XXXX behind (2026-12-07)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(guest, "cache_dir", lambda: tmp_path / "cache")
    gone, kept = tmp_path / "cvmu-1-vng-abc", tmp_path / "cvmu-2-vng-def"
    gone.mkdir(), kept.mkdir()
    (gone / "virtme_ret").write_text("0")
    guest.stop_stray_guests("cvmu-", keep=lambda name: name == "cvmu-2")
    assert not gone.exists() and kept.is_dir()
