"""What a manager loaded, and its records in the system's STATE_DIR (one JSON file per BPF variant, named after
it, and one `kmod-MODULE.json` per module inserted), which outlive the process: `ccrig cc list` shows them,
cleanup removes by them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import laws
from .systems import System


@dataclass
class Loaded:
    """One cc value as prepared: where it came from and what the kernel calls it."""
    key: str
    form: str                      # builtin | kmod | bpf
    kernel_name: str
    law: laws.Law | None = None
    object: Path | None = None
    sha256: str | None = None
    bpf_id: int | None = None
    extra: dict = field(default_factory=dict)

    def describe(self) -> dict:
        d = {"key": self.key, "form": self.form, "kernel_name": self.kernel_name,
             "parameters": self.law.params() if self.law else None}
        if self.object:
            d["object"] = str(self.object)
            d["sha256"] = self.sha256
        d.update(self.extra)
        return d


def record(s: System, stem: str, data: dict) -> None:
    s.write(s.state_dir / f"{stem}.json", json.dumps(data, indent=1).encode())


def read_record(s: System, file: str) -> dict:
    """A record by its file name in the state directory ({} when unreadable)."""
    try:
        return json.loads(s.read(s.state_dir / file) or "{}")
    except ValueError:
        return {}


def recorded_prefixes(s: System) -> dict[str, str]:
    """{generated name: prefix of the manager that loaded it}, from the system's records."""
    return {f.split(".")[0]: read_record(s, f).get("prefix", "")
            for f in s.listdir(s.state_dir) if f.startswith("cr") and f.endswith(".json")}
