"""What a file another process is writing has grown by since the last look: the samplers' lines and a UDP
receiver's (experiments/run/collectors.py), the queue monitor's fixed-size events (qdiscs/sojourn).

    t = Tail(fd, record=b"\\n")       # or record=32: events of 32 bytes
    t.read() -> bytes                 # the whole records written since the last read; a record still being
                                      # written is kept back and comes whole with the next read

It reads at its own offset (pread), so the writer's offset on a shared file description is never moved. With
`free_every`, the blocks already read are given back to the file system every that many bytes (the file keeps its
size): a sampler writing 1 MB a second for an hour does not fill /tmp.
"""
from __future__ import annotations

import ctypes
import os

_FALLOC_PUNCH = 0x01 | 0x02   # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE (linux/falloc.h)
_libc = ctypes.CDLL(None, use_errno=True)


class Tail:
    def __init__(self, fd: int, record: bytes | int = b"\n", free_every: int = 0):
        self.fd, self.record, self.free_every = fd, record, free_every
        self.pos = self.freed = 0
        self.rest = b""

    def read(self) -> bytes:
        parts = [self.rest]
        while chunk := os.pread(self.fd, 1 << 20, self.pos):
            self.pos += len(chunk)
            parts.append(chunk)
        data = b"".join(parts)
        if isinstance(self.record, bytes):
            cut = data.rfind(self.record) + len(self.record) if self.record in data else 0
        else:
            cut = len(data) // self.record * self.record
        whole, self.rest = data[:cut], data[cut:]
        if self.free_every and self.pos - self.freed >= self.free_every:
            # a file system without hole punching keeps the blocks: nothing else changes
            _libc.fallocate(self.fd, _FALLOC_PUNCH, ctypes.c_long(0), ctypes.c_long(self.pos))
            self.freed = self.pos
        return whole
