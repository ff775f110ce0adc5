"""Read-only disk images of the Python trees a guest imports from, mounted in the guest over the same paths.

    for_guest(commands) -> [Image]; qemu_opts(images) -> qemu's arguments; mounts(images) -> the guest's shell lines

The guest sees the host's root over 9p, and virtme's initramfs mounts it without a cache, so every stat and read
of an import is a round trip through an emulated machine: under TCG `python -c pass` took 4.3 s and importing the
run's modules 47-62 s, each time a Python process starts in the guest. The same trees as ext4 images on virtio-blk
took 1.2 s and 18 s (measured 2026-11-27 on this 2-core machine). The trees are the virtual environment, the
standard library and the system's site folders on sys.path; the checkout stays on 9p (an image of it saved 1 s
of 18, and the host writes in it while a guest runs).

Each image is built once per content of its tree and cached in the cache folder (vm-images/): its name and ext4
label carry a digest of every file's path, size and modification time, so a changed tree gets a new image and
the old one is removed. A lock makes a second guest wait for the first's build. The images are attached
read-only, so guests side by side share them. Where an image cannot be built or mounted, the guest reads that
tree over 9p as before, slower, and says so.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import site
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.machine import cache_dir, cache_lock

SLACK = 1.15              # of the files' blocks, for the file system's own (inode tables, directories)
SPARE = 64 << 20          # bytes on top
BLOCK = 4096


@dataclass(frozen=True)
class Image:
    tree: Path    # mounted over this path in the guest
    path: Path    # the image file on the host
    label: str    # its ext4 label: how the guest finds it (vd* order is qemu's to choose)


def trees() -> list[Path]:
    """The folders this interpreter imports from outside the checkout: the virtual environment, the standard
    library (lib-dynload is inside it) and the system's site folders it uses (Debian's mininet module is in one)."""
    venv = Path(sys.prefix) if sys.prefix != sys.base_prefix else None
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = [t for t in (venv, stdlib) if t is not None and t.is_dir()]
    on_path = {Path(p).resolve() for p in sys.path if p}
    for p in map(Path, site.getsitepackages()):
        if p in on_path and p.is_dir() and not any(p.is_relative_to(t) for t in found) and any(p.iterdir()):
            found.append(p)
    return found


def _survey(tree: Path) -> tuple[str, int, int]:
    """(digest of every entry's path, size and modification time, bytes in whole blocks, entries)."""
    h, size, count = hashlib.sha256(), 0, 0
    for root, dirs, files in os.walk(tree):
        dirs.sort()
        for name in sorted(files) + dirs:
            st = os.lstat(os.path.join(root, name))
            h.update(f"{root}/{name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
            size += -(-st.st_size // BLOCK) * BLOCK
            count += 1
    return h.hexdigest(), size, count


def image(tree: Path, commands: Commands, folder: Path | None = None) -> Image:
    """The tree's image, built now if its content changed since the cached one (under a lock)."""
    folder = folder or cache_dir() / "vm-images"
    slug = hashlib.sha256(str(tree).encode()).hexdigest()[:8]
    digest, size, count = _survey(tree)
    label = f"ccpy{digest[:12]}"
    path = folder / f"{slug}-{digest[:12]}.img"
    with cache_lock(f".{slug}.lock", folder):
        if not path.exists():
            tmp = folder / f".{slug}.img.tmp"
            tmp.unlink(missing_ok=True)
            blocks = int((size * SLACK + SPARE) // BLOCK)
            # no journal: the guest never writes it; root owns every file, as on the host
            commands.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", str(BLOCK), "-O", "^has_journal", "-L", label,
                          "-N", str(count + 1024), "-E", "root_owner=0:0", "-d", str(tree), str(tmp), str(blocks)],
                         timeout=600)
            tmp.rename(path)
            (folder / f"{slug}.tree").write_text(str(tree))
            for old in folder.glob(f"{slug}-*.img"):
                if old != path:
                    old.unlink(missing_ok=True)   # a guest still running on it keeps its open file
    _prune(folder)
    return Image(tree=tree, path=path, label=label)


def _prune(folder: Path) -> None:
    """Removes the images of trees that are gone (a clone's venv, deleted): each is as large as its tree."""
    for record in folder.glob("*.tree"):
        try:
            gone = not Path(record.read_text()).is_dir()
        except OSError:
            continue
        if gone:
            for old in folder.glob(f"{record.stem}-*.img"):
                old.unlink(missing_ok=True)
            record.unlink(missing_ok=True)


def for_guest(commands: Commands, warn=print) -> list[Image]:
    """Every tree's image; a tree whose image cannot be built is left to 9p (said once, with why)."""
    out = []
    for tree in trees():
        try:
            out.append(image(tree, commands))
        except (OSError, RunError) as e:
            warn(f"warning: the guest reads {tree} over 9p (slower): its image could not be built ({e})")
    return out


def qemu_opts(images: list[Image]) -> str:
    """qemu's arguments attaching each image read-only over virtio-blk (PCI: vng's machine with 9p)."""
    return " ".join(f"-drive if=none,id=ccpy{i},file={img.path},format=raw,readonly=on "
                    f"-device virtio-blk-pci,drive=ccpy{i}" for i, img in enumerate(images))


def mounts(images: list[Image]) -> str:
    """The guest's shell lines that mount each image over its tree, by label; one that fails says so and the
    tree stays on 9p."""
    if not images:
        return ""
    lines = ["modprobe -q ext4 2>/dev/null"]
    for img in images:
        tree = shlex.quote(str(img.tree))
        lines.append(f"mount -o ro LABEL={img.label} {tree} 2>/dev/null || echo 'warning: the guest reads "
                     f"{img.tree} over 9p (slower): mounting its image failed' >&2")
    return "; ".join(lines) + "; "
