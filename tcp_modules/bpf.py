"""The BPF form of a law: a variant of its family's build/tcp_NAME.bpf.o registered with `bpftool struct_ops
register`, any number of parameterisations, each under a generated name `cr{L}_{PPPP}_{HHHHHH}`: L the family's
letter (its descriptor's: a for alphabeta, p for poly), PPPP four hex digits of the manager's prefix, HHHHHH six
of the parameters (and of the host, on a remote system) — recognisable by cleanup, at most 15 characters
(TCP_CA_NAME_MAX).

Variants are always made here, from this machine's build: the objects are CO-RE, so one build serves every
kernel with BTF; a host's variant is shipped there. Each host's variants carry the host's name in their
parameter tag, so hosts sharing one kernel (the project's one-machine test bed) never register the same name,
while the prefix tag stays the run's and `ccrig clean --prefix` finds them all.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from ccrig import jsondoc

from . import bpfobj, laws
from .families import FAMILIES
from .loaded import Loaded, record
from .systems import HERE, System, as_system

BUILD = HERE / "build"
BTF = Path("/sys/kernel/btf/vmlinux")
# any letter, not only today's families': cleanup still finds a variant of a family since removed
NAME_RE = re.compile(r"^cr([a-z0-9])_([0-9a-f]{4})_([0-9a-f]{6})$")


def prefix_tag(prefix: str) -> str:
    return hashlib.sha1(prefix.encode()).hexdigest()[:4]


def generated_name(prefix: str, law: laws.Law, host: str = "") -> str:
    """cr{a|p}_{prefix tag}_{parameter tag}: the same parameters under one prefix (on one host) get the same
    name; on another host another name, with the same prefix tag."""
    params = json.dumps(law.params(), sort_keys=True) + (f"@{host}" if host else "")
    return f"cr{FAMILIES[law.law].letter}_{prefix_tag(prefix)}_{hashlib.sha1(params.encode()).hexdigest()[:6]}"


def struct_ops_maps(system) -> list[tuple[int, str]]:
    """(map id, congestion-control name) of every registered BPF congestion control (system: a System, or
    a Commands for this machine)."""
    proc = as_system(system).run(["bpftool", "-j", "struct_ops", "dump"], check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    out = []
    # bpftool prints one JSON array of alternating map-info and value objects (some versions several)
    objs = jsondoc.values(proc.stdout)
    map_id = None
    for o in objs:
        if "bpf_map_info" in o:
            map_id = o["bpf_map_info"].get("id")
        elif "bpf_struct_ops_tcp_congestion_ops" in o and map_id is not None:
            out.append((map_id, o["bpf_struct_ops_tcp_congestion_ops"]["data"]["name"]))
            map_id = None
    return out


def globals_of(system, map_id: int, op: str = "in_ack_event") -> dict:
    """The global variables (.bss) of a registered variant's object, {} when unreadable: reached from its
    struct_ops map through the program behind `op` (`bpftool struct_ops dump` names it "NAME/prog_id:N"), whose
    maps include the object's .bss."""
    s = as_system(system)
    proc = s.run(["bpftool", "-j", "struct_ops", "dump", "id", str(map_id)], check=False)
    # one map's dump is two objects joined by a comma, not an array: read the op's entry from the text
    m = re.search(rf'"{op}":\s*"[^"]*/prog_id:(\d+)"', proc.stdout) if proc.returncode == 0 else None
    if not m:
        return {}
    proc = s.run(["bpftool", "-j", "prog", "show", "id", m.group(1)], check=False)
    prog = next(iter(jsondoc.values(proc.stdout)), {}) if proc.returncode == 0 else {}
    out: dict = {}
    for mid in prog.get("map_ids", []):
        proc = s.run(["bpftool", "-j", "map", "dump", "id", str(mid)], check=False)
        for entry in jsondoc.values(proc.stdout) if proc.returncode == 0 else []:
            section = (entry.get("formatted") or entry).get("value", {})
            for var in section.get(".bss", []) if isinstance(section, dict) else []:
                out.update(var)
    return out


def repaired(system, item: Loaded) -> int | None:
    """How many garbage thresholds the variant's glue put right (bpf/ccrig_tcp.bpf.h, ccrig_in_ack_event) since
    it was registered; None when it cannot be read (an object built before the repair, bpftool refusing)."""
    if item.bpf_id is None:
        return None
    n = globals_of(system, item.bpf_id).get("ccrig_repaired")
    return int(n) if n is not None else None


def unregister_id(system, map_id: int) -> bool:
    return as_system(system).ok(["bpftool", "struct_ops", "unregister", "id", str(map_id)])


def why_not(s: System) -> list[str]:
    """Why BPF variants cannot be registered on s (empty: they can)."""
    why = []
    if not s.exists(BTF):
        why.append(f"kernel {s.release()} has no BTF ({BTF} missing; needs CONFIG_DEBUG_INFO_BTF=y)")
    if not s.which("bpftool"):
        why.append("bpftool is not installed " + ("(Debian: apt-get install bpftool, or `make deps`)" if s.local
                                                  else f"on {s.where} (`ccrig provision -i INVENTORY`)"))
    # the variants are made from this machine's build, wherever they are registered
    if not all((BUILD / o).exists() for o in bpfobj.OBJECT.values()):
        missing = [t for t in ("clang", "llvm-strip") if shutil.which(t) is None]
        if missing:
            why.append(f"the BPF objects are not built and {', '.join(missing)} is missing "
                       f"(Debian: apt-get install clang llvm, or `make deps`)")
    if not s.is_root():
        why.append("registering a BPF congestion control needs root")
    return why


def register(s: System, prefix: str, key: str, law: laws.Law, build: Callable[[str], None]) -> Loaded:
    """Makes law's variant, ships it to s's state directory and registers it; build("bpf") first builds the
    templates here if make finds them missing or older than their sources (a checkout moved on since they were
    built: the glue that runs is the checkout's). Recorded under the variant's name with the prefix."""
    template = BUILD / bpfobj.OBJECT[law.law]
    build("bpf")
    name = generated_name(prefix, law, s.name)
    data = bpfobj.variant(template, law, name)
    obj = s.state_dir / f"{name}.bpf.o"
    s.write(obj, data)
    if name in s.available():
        # ours (same prefix, same parameters) left by a run that died: replace it
        for map_id, cc_name in struct_ops_maps(s):
            if cc_name == name:
                unregister_id(s, map_id)
    proc = s.run(["bpftool", "struct_ops", "register", str(obj)])
    m = re.search(r"\bid (\d+)", proc.stdout + proc.stderr)
    map_id = int(m.group(1)) if m else next((i for i, n in struct_ops_maps(s) if n == name), None)
    item = Loaded(key, "bpf", name, law, obj, bpfobj.sha256(data), map_id,
                  extra={"template": str(template), "template_sha256": bpfobj.sha256(template.read_bytes())})
    record(s, name, {**item.describe(), "prefix": prefix, "bpf_id": map_id})
    return item


def unregister(s: System, item: Loaded) -> bool:
    """Unregisters a variant register() loaded (by its map id, else by its name) and removes its files;
    says whether the kernel no longer offers it."""
    if item.bpf_id is None or not unregister_id(s, item.bpf_id):
        for map_id, name in struct_ops_maps(s):
            if name == item.kernel_name:
                unregister_id(s, map_id)
    s.remove(s.state_dir / f"{item.kernel_name}.bpf.o", s.state_dir / f"{item.kernel_name}.json")
    return item.kernel_name not in s.available()
