"""The guest's Python trees as read-only ext4 images (topologies/testbeds/vm/images.py): built by the real
mke2fs, read back with debugfs (another program of e2fsprogs, not ours), cached by content."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from ccrig.commands import Commands
from ccrig.topologies.testbeds.vm import images


def _cat(img, path) -> str:
    return subprocess.run(["debugfs", "-R", f"cat {path}", str(img)], capture_output=True, text=True,
                          check=True).stdout


def test_an_image_holds_its_tree_and_is_rebuilt_only_when_the_tree_changes(tmp_path):
    tree, cache = tmp_path / "tree", tmp_path / "cache"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("X = 1\n")
    os.symlink("pkg/mod.py", tree / "link.py")
    commands = Commands(tmp_path / "commands.log")
    first = images.image(tree, commands, cache)
    assert first.path.is_file() and first.tree == tree and len(first.label) <= 16
    assert _cat(first.path, "/pkg/mod.py") == "X = 1\n"
    label = subprocess.run(["e2label", str(first.path)], capture_output=True, text=True, check=True).stdout.strip()
    assert label == first.label
    stamp = first.path.stat().st_mtime_ns
    assert images.image(tree, commands, cache) == first and first.path.stat().st_mtime_ns == stamp
    assert (tmp_path / "commands.log").read_text().count("mke2fs") == 1
    # a changed file: a new image and label, the old image gone
    (tree / "pkg" / "mod.py").write_text("X = 22\n")
    second = images.image(tree, commands, cache)
    assert second.path != first.path and second.label != first.label and not first.path.exists()
    assert _cat(second.path, "/pkg/mod.py") == "X = 22\n"
    assert sorted(p.name for p in cache.glob("*.img")) == [second.path.name]
    # the tree gone (a deleted clone's venv): its image goes with the next image built
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.py").write_text("")
    (tree / "pkg" / "mod.py").unlink()
    (tree / "pkg").rmdir()
    (tree / "link.py").unlink()
    tree.rmdir()
    kept = images.image(other, commands, cache)
    assert sorted(p.name for p in cache.glob("*.img")) == [kept.path.name]


def test_the_guest_mounts_each_image_read_only_over_its_tree(tmp_path):
    img = images.Image(tree=tmp_path / "a b", path=tmp_path / "x.img", label="ccpyabc")
    assert images.mounts([]) == "" and images.qemu_opts([]) == ""
    line = images.mounts([img])
    assert f"mount -o ro LABEL=ccpyabc '{tmp_path / 'a b'}'" in line
    opts = images.qemu_opts([img, img])
    assert f"file={tmp_path / 'x.img'},format=raw,readonly=on" in opts and "drive=ccpy1" in opts


def test_the_trees_are_this_interpreters_outside_the_checkout():
    trees = images.trees()
    assert sys.prefix == sys.base_prefix or trees[0] == Path(sys.prefix)
    assert Path(sysconfig.get_paths()["stdlib"]) in trees and len(set(trees)) == len(trees)
    checkout = Path(images.__file__).resolve().parents[3]
    assert not any(t.is_relative_to(checkout) for t in trees if t != Path(sys.prefix))
