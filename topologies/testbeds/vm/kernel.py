"""The guest's kernel: a distribution image in /boot with its modules, found by release or path."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ccrig.errors import InputError

# the repository: the guest runs the very same checkout (testbeds/vm/ is three folders below it)
REPO = Path(__file__).resolve().parents[3]
BOOT = Path("/boot")
MODULES = Path("/lib/modules")


@dataclass(frozen=True)
class Kernel:
    """A bootable kernel image and what identifies it."""
    image: Path
    release: str

    @property
    def config(self) -> Path | None:
        path = self.image.parent / f"config-{self.release}"
        return path if path.is_file() else None

    @property
    def modules(self) -> Path:
        return MODULES / self.release

    def config_sha256(self) -> str | None:
        return _sha256(self.config) if self.config else None

    def image_sha256(self) -> str:
        return _sha256(self.image)

    def describe(self) -> dict:
        """What env.json records about the guest kernel."""
        return {"release": self.release, "image": str(self.image), "image_sha256": self.image_sha256(),
                "config": str(self.config) if self.config else None, "config_sha256": self.config_sha256()}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def image_release(image: Path) -> str | None:
    """The release string an x86 bzImage carries in its setup header (Documentation/arch/x86/boot.rst:
    the 2-byte field at 0x20E points, relative to 0x200, at "6.1.0-56-amd64 (debian-kernel@...) #1 ...")."""
    try:
        with open(image, "rb") as f:
            head = f.read(0x10000)
    except OSError:
        return None
    if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
        return None
    offset = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    text = head[offset:offset + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    return text.split()[0] if text.split() else None


def _version_key(release: str) -> list:
    """6.1.0-56-amd64 < 6.1.0-112-amd64 < 6.10.0-1-amd64: numbers compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.\-+~]", release)]


def installed_kernels() -> list[Kernel]:
    """Images under /boot whose modules are installed (the distribution package installs both), oldest first."""
    out = []
    for image in BOOT.glob("vmlinuz-*"):
        release = image.name.removeprefix("vmlinuz-")
        if (MODULES / release).is_dir():
            out.append(Kernel(image, release))
    return sorted(out, key=lambda k: _version_key(k.release))


def find_kernel(name: str | None = None) -> Kernel:
    """The kernel to boot: None -> the newest installed distribution kernel; else a release (6.1.0-56-amd64) or
    the path of an image. Its modules must be under /lib/modules/<release>, where the guest loads them from."""
    if name is None:
        kernels = installed_kernels()
        if not kernels:
            raise InputError("kernel: no /boot/vmlinuz-* with modules under /lib/modules was found; install the "
                             "distribution kernel (`make deps` installs linux-image-amd64) or name an image")
        return kernels[-1]
    path = Path(name)
    if "/" not in name:
        path = BOOT / f"vmlinuz-{name}"
    if not path.is_file():
        have = ", ".join(k.release for k in installed_kernels()) or "none installed"
        raise InputError(f"kernel: got {name!r}; expected a kernel release with an image /boot/vmlinuz-<release> "
                         f"({have}) or the path of a kernel image")
    release = path.name.removeprefix("vmlinuz-") if path.name.startswith("vmlinuz-") else image_release(path)
    if release is None:
        raise InputError(f"kernel: got {name!r}; expected a bootable x86 kernel image (no bzImage header found)")
    kernel = Kernel(path.resolve(), release)
    if not kernel.modules.is_dir():
        raise InputError(f"kernel: got {name!r}; its modules are not installed under {kernel.modules} "
                         f"(install the kernel's package, or `make modules_install` for a kernel you built)")
    return kernel


def in_guest() -> bool:
    """Whether this process runs inside a virtme-ng guest (its init puts virtme_* options on the command line)."""
    try:
        return "virtme_" in Path("/proc/cmdline").read_text()
    except OSError:
        return False


