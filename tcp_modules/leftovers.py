"""`ccrig clean` for congestion controls: removes what managers left on a system when their process died (or
everything ccrig loaded there): BPF variants by their generated names, modules by their records."""
from __future__ import annotations

from . import bpf
from .kmod import MODULE, rmmod
from .loaded import read_record, recorded_prefixes
from .systems import as_system


def cleanup(system, prefix: str | None = None, keep=None) -> list[str]:
    """Removes every BPF variant ccrig registered (only those of `prefix` if given), and the modules ccrig
    inserted (with a prefix: those that prefix's run inserted). keep(prefix) -> True spares what a manager
    with that prefix loaded (a run still going). system: a System (a host's) or a Commands (this machine).
    Returns one sentence per thing removed (naming the host on a remote system)."""
    s = as_system(system)
    on = "" if s.local else f" on {s.where}"
    said = []
    tag = bpf.prefix_tag(prefix) if prefix is not None else None
    owners = recorded_prefixes(s)
    if s.which("bpftool"):
        for map_id, name in bpf.struct_ops_maps(s):
            m = bpf.NAME_RE.match(name)
            if m and keep is not None and keep(owners.get(name, "")):
                said.append(f"kept BPF congestion control {name}{on}"
                            + (f": {owners[name]} still uses it" if owners.get(name) else ""))
                continue
            if m and (tag is None or m.group(2) == tag):
                if bpf.unregister_id(s, map_id):
                    said.append(f"unregistered BPF congestion control {name}{on}")
                else:
                    said.append(f"could not unregister BPF congestion control {name}{on} (map id {map_id})")
    files = s.listdir(s.state_dir)
    if files:
        still = set(s.available())
        stale = []
        for f in files:
            name = f.split(".")[0]
            m = bpf.NAME_RE.match(name)
            if m and name not in still and (tag is None or m.group(2) == tag):
                stale.append(s.state_dir / f)
        s.remove(*stale)
        for f in files:
            if not (f.startswith("kmod-") and f.endswith(".json")):
                continue
            info = read_record(s, f)
            if prefix is not None and info.get("prefix") != prefix:
                continue
            if keep is not None and keep(info.get("prefix", "")):
                continue
            module = info.get("module", f[:-len(".json")].removeprefix("kmod-"))
            if rmmod(s, module, tries=4):
                said.append(f"removed module {module}{on}")
                s.remove(s.state_dir / f)
            else:
                said.append(f"could not remove module {module}{on} (still in use)")
    # with no record to go by, a full clean here removes the laws' modules; a host's were inserted by
    # `ccrig provision` on purpose (teardown.yml removes them), so they stay
    if prefix is None and keep is None and s.local and s.modules_supported():
        for module in MODULE.values():
            if s.module_loaded(module):
                if rmmod(s, module, tries=4):
                    said.append(f"removed module {module}")
                else:
                    said.append(f"could not remove module {module} (still in use)")
    return said
