"""The loss program built by several processes at once, as pairs side by side build it on a fresh clone's first
run: each builds its own file and the object that stays is a whole one (real clang and llvm-strip)."""
import multiprocessing

from ccrig.commands import Commands
from ccrig.topologies.loss import program

BUILDERS = 4


def _build(barrier) -> None:
    barrier.wait(timeout=60)
    program.build(Commands(None))


def test_processes_building_at_once_all_get_a_whole_object(tmp_path, monkeypatch):
    monkeypatch.setattr(program, "BUILD", tmp_path)
    monkeypatch.setattr(program, "OBJECT", tmp_path / "loss.bpf.o")
    ctx = multiprocessing.get_context("fork")   # as the engine starts its pairs
    barrier = ctx.Barrier(BUILDERS)
    procs = [ctx.Process(target=_build, args=(barrier,)) for _ in range(BUILDERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * BUILDERS
    assert program.OBJECT.read_bytes()[:4] == b"\x7fELF"
    assert [f.name for f in tmp_path.iterdir()] == ["loss.bpf.o"]   # no builder's file left behind
