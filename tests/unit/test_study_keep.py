"""`ccrig study keep`: a full run's claims and figures beside its study, its claims.md's links true there."""
import json

import pytest

from ccrig.errors import InputError
from ccrig.experiments.report.study_keep import keep, relink


def _study_dir(tmp_path, quick=False):
    d = tmp_path / "pause-20261126-031544-1"
    run = d / "runs/rtt_files-20261126-031544-1/report"
    run.mkdir(parents=True)
    (run / "sweep_topology_rtt.png").write_bytes(b"png")
    (run / "utility.png").write_bytes(b"png")
    (run / "trace.png").write_bytes(b"png")   # not a summary figure: stays in the archive
    state = {"study": "pause", "folder": str(tmp_path / "studies/pause"), "quick": quick,
             "started": "2026-11-26T03:15:44+00:00",
             "specs": {"rtt_files": {"run_dir": "runs/rtt_files-20261126-031544-1", "status": "done"}}}
    (d / "study.json").write_text(json.dumps(state))
    (d / "claims.json").write_text(json.dumps({"study": "pause", "quick": quick, "claims": []}))
    (d / "claims.md").write_text(
        "| rtt_files | [rtt_files-1](runs/rtt_files-20261126-031544-1/report/report.md) |\n"
        "![rtt](runs/rtt_files-20261126-031544-1/report/sweep_topology_rtt.png)\n"
        "see [the paper](https://example.org/p.pdf)\n")
    return d


def test_a_full_run_is_kept_with_its_figures_and_true_links(tmp_path):
    d = _study_dir(tmp_path)
    into = keep(d)
    assert into == tmp_path / "studies/pause/runs/20261126-0315"
    assert sorted(p.name for p in (into / "figures").iterdir()) == ["rtt_files_sweep_topology_rtt.png",
                                                                    "rtt_files_utility.png"]
    md = (into / "claims.md").read_text()
    assert "![rtt](figures/rtt_files_sweep_topology_rtt.png)" in md
    assert "| rtt_files-1 (in the archive) |" in md
    assert "[the paper](https://example.org/p.pdf)" in md
    assert json.loads((into / "claims.json").read_text())["study"] == "pause"
    with pytest.raises(InputError, match="already exists"):   # never overwritten
        keep(d)


def test_a_quick_run_or_no_study_directory_is_refused(tmp_path):
    with pytest.raises(InputError, match="quick run"):
        keep(_study_dir(tmp_path, quick=True))
    with pytest.raises(InputError, match="no readable claims.json"):
        keep(tmp_path / "nothing")
    assert relink("[a](b.md)", {}) == "[a](b.md)"
    assert relink("[f[0]_cc](runs/x/report/f[0]_cc.png)", {}) == "f[0]_cc (in the archive)"


def _by_kernel(tmp_path, vm_quick=False):
    parent = tmp_path / "pause-bykernel-20261126-163352-1"
    for label, quick in (("netns", False), ("vm", vm_quick)):
        d = _study_dir(parent / label, quick)
        d.rename(parent / label / f"pause-{label}")
    doc = {"study": "pause", "seed": 3, "specs": ["rtt_files"],
           "kernels": [{"label": "netns", "kernel": "6.18", "testbed": "netns", "study_dir": "netns/pause-netns"},
                       {"label": "vm", "kernel": "6.1.0", "testbed": "vm", "study_dir": "vm/pause-vm"}],
           "claims": [], "differ": []}
    (parent / "kernels.json").write_text(json.dumps(doc))
    return parent


def test_a_by_kernel_run_is_kept_with_each_kernels_study_and_its_table(tmp_path):
    parent = _by_kernel(tmp_path)
    into = keep(parent)
    assert into == parent / "netns/studies/pause/runs/20261126-0315-bykernel"   # the first column's study folder
    assert (into / "netns/claims.json").is_file() and (into / "vm/figures/rtt_files_utility.png").is_file()
    assert [k["study_dir"] for k in json.loads((into / "kernels.json").read_text())["kernels"]] == ["netns", "vm"]
    assert "- vm: kernel 6.1.0, testbed vm, `vm`" in (into / "kernels.md").read_text()


def test_a_by_kernel_run_with_a_quick_column_is_refused_before_anything_is_made(tmp_path):
    parent = _by_kernel(tmp_path, vm_quick=True)
    with pytest.raises(InputError, match="the vm column ran a quick study"):
        keep(parent)
    assert not (parent / "netns/studies/pause/runs").exists()   # where the first column would have been kept


def test_a_spec_left_out_is_skipped_and_a_failed_keep_leaves_nothing(tmp_path):
    d = _study_dir(tmp_path)
    state = json.loads((d / "study.json").read_text())
    state["specs"]["rtt_bulk"] = {"run_dir": None, "status": "pending"}   # --specs left it out
    (d / "study.json").write_text(json.dumps(state))
    assert (keep(d) / "figures/rtt_files_utility.png").is_file()
    (d / "claims.md").unlink()   # fails at the last step: the half-written folder goes with it
    with pytest.raises(FileNotFoundError):
        keep(d, tmp_path / "kept")
    assert not (tmp_path / "kept").exists()
