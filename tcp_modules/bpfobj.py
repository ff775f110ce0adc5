"""Makes one BPF congestion-control variant out of a compiled object, without a compiler.

tcp_alphabeta.bpf.o and tcp_poly.bpf.o each carry a parameter block (`struct ccrig_params` in .rodata,
found by its magic number) and a 15-character placeholder ops name. A variant is a copy of the object with
both replaced; `bpftool struct_ops register` then loads it (the verifier sees the patched values, which
are const volatile). The layout here must match include/ccrig_law.h.
"""
from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from . import laws

MAGIC = 0x3170617267697263
# magic, alpha, beta (u64, Q20), k, l (s32), terms, per_ack, law, halve_first (u32; the header's former pad,
# so objects built before it read 0 there: off)
PARAMS = struct.Struct("<QQQiiIIII")
LAW_CODE = {"alphabeta": 1, "poly": 2}
PLACEHOLDER = {"alphabeta": b"ccrig@ab@templ@", "poly": b"ccrig@po@templ@"}
OBJECT = {"alphabeta": "tcp_alphabeta.bpf.o", "poly": "tcp_poly.bpf.o"}


class ObjectError(Exception):
    pass


def _find_once(data: bytes, needle: bytes, what: str, path: Path) -> int:
    i = data.find(needle)
    if i < 0 or data.find(needle, i + 1) >= 0:
        raise ObjectError(f"{path}: expected exactly one {what}; rebuild with `make -C tcp_modules bpf`")
    return i


def pack_params(law: laws.Law) -> bytes:
    p = law.params()
    return PARAMS.pack(MAGIC, laws.quantize(p["alpha"]), laws.quantize(p["beta"]), p.get("k", 0), p.get("l", 1),
                       p.get("terms", 1), int(p.get("per_ack", False)), LAW_CODE[p["law"]],
                       int(p.get("halve_first", False)))


def variant(template: Path, law: laws.Law, name: str) -> bytes:
    """The object bytes of `template` with law's parameters and ops name `name` (<= 15 characters)."""
    if not 0 < len(name) <= 15 or not name.isascii():
        raise ValueError(f"BPF congestion-control name {name!r}: expected 1 to 15 ASCII characters")
    data = bytearray(template.read_bytes())
    i = _find_once(data, struct.pack("<Q", MAGIC), "parameter block", template)
    data[i:i + PARAMS.size] = pack_params(law)
    placeholder = PLACEHOLDER[law.law]
    j = _find_once(data, placeholder, f"name placeholder {placeholder.decode()}", template)
    data[j:j + len(placeholder)] = name.encode().ljust(len(placeholder), b"\0")
    return bytes(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
