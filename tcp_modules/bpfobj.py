"""Makes one BPF congestion-control variant out of a compiled object, without a compiler.

Each family's tcp_NAME.bpf.o (bpf/ccrig_family.bpf.c built with the family's C law) carries a parameter block
(`struct ccrig_params` in .rodata, found by its magic number) and a 15-character placeholder ops name. A variant is a copy of the object with
both replaced; `bpftool struct_ops register` then loads it (the verifier sees the patched values, which
are const volatile). The layout here must match include/ccrig_law.h; a family's declared parameters go into
the slots they name (families/_family.py), unused slots keep their defaults.
"""
from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from . import laws
from .families import FAMILIES
from .families._family import SLOT_DEFAULTS

MAGIC = 0x3170617267697263
# magic, alpha, beta (u64, Q20), k, l (s32), terms, per_ack, law, halve_first (u32; the header's former pad,
# so objects built before it read 0 there: off)
PARAMS = struct.Struct("<QQQiiIIII")
LAW_CODE = {name: fam.code for name, fam in FAMILIES.items()}
PLACEHOLDER = b"ccrig@variant@@"      # bpf/ccrig_family.bpf.c's ops name
OBJECT = {name: fam.bpf_object for name, fam in FAMILIES.items()}


class ObjectError(Exception):
    pass


def _find_once(data: bytes, needle: bytes, what: str, path: Path) -> int:
    i = data.find(needle)
    if i < 0 or data.find(needle, i + 1) >= 0:
        raise ObjectError(f"{path}: expected exactly one {what}; rebuild with `make -C tcp_modules bpf`")
    return i


def pack_params(law: laws.Law) -> bytes:
    s = dict(SLOT_DEFAULTS)
    for p in FAMILIES[law.law].params:
        s[p.slot] = getattr(law, p.name)
    return PARAMS.pack(MAGIC, laws.quantize(s["alpha"]), laws.quantize(s["beta"]), s["k"], s["l"], s["terms"],
                       int(s["per_ack"]), LAW_CODE[law.law], int(s["halve_first"]))


def variant(template: Path, law: laws.Law, name: str) -> bytes:
    """The object bytes of `template` with law's parameters and ops name `name` (<= 15 characters)."""
    if not 0 < len(name) <= 15 or not name.isascii():
        raise ValueError(f"BPF congestion-control name {name!r}: expected 1 to 15 ASCII characters")
    data = bytearray(template.read_bytes())
    i = _find_once(data, struct.pack("<Q", MAGIC), "parameter block", template)
    data[i:i + PARAMS.size] = pack_params(law)
    j = _find_once(data, PLACEHOLDER, f"name placeholder {PLACEHOLDER.decode()}", template)
    data[j:j + len(PLACEHOLDER)] = name.encode().ljust(len(PLACEHOLDER), b"\0")
    return bytes(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
