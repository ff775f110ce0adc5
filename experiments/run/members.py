"""What a fleet member is (`ccrig member-facts`, run on the member over SSH by ansible/fleet_check.yml), and what
the members of one fleet must agree on (experiments/run/fleet.py refuses a fleet that does not). Nothing here
needs the runner: a member answers fast."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

LAW_SOURCES = Path(__file__).resolve().parents[2] / "tcp_modules"


def laws_sha256() -> str:
    """One digest of the laws' sources (the families' C and BPF, their parameters): members whose digests differ
    run different laws under the same names."""
    h = hashlib.sha256()
    for f in sorted(LAW_SOURCES.rglob("*")):
        if f.is_file() and f.suffix in (".c", ".h", ".py", ".yaml") and not {"build", "__pycache__"} & set(f.parts):
            h.update(str(f.relative_to(LAW_SOURCES)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def facts() -> dict:
    """What a member says of itself (`ccrig member-facts`): what must agree across a fleet, and its size."""
    from ccrig import machine  # lazy: member-facts needs nothing else of the run
    return {"kernel": os.uname().release, "machine": os.uname().machine, "cpus": os.cpu_count() or 1,
            "ccrig": machine.git_revision(), "laws_sha256": laws_sha256()}


AGREE = ("kernel", "laws_sha256")   # what every member must share: a verdict across them is one kernel's


def disagreements(facts: dict[str, dict]) -> list[str]:
    """What the members (name -> facts()) differ in that they must agree on: one line per fact, each value with
    the members that have it."""
    out = []
    for key in AGREE:
        seen: dict[str, list[str]] = {}
        for name, f in sorted(facts.items()):
            seen.setdefault(str(f.get(key)), []).append(name)
        if len(seen) > 1:
            out.append(f"{key} differs: " + "; ".join(f"{v[:16]} on {', '.join(ns)}" for v, ns in seen.items()))
    return out
