"""Real IEEE 802.3x PAUSE frames (802.3 Annex 31B), sent on a raw AF_PACKET socket.

    dst 01:80:C2:00:00:01 | src (our MAC) | EtherType 0x8808 | opcode 0x0001 | pause_time (u16, quanta) | pad

The destination is the reserved MAC Control multicast address, which bridges never forward, so the frame
reaches exactly the NIC at the other end of the cable; a NIC with rx pause enabled then stops transmitting
for pause_time x 512 bit times (0 = resume). The frame is padded to Ethernet's 60-byte minimum (the NIC adds
the FCS). FrameActuator sends the controller's decisions (controller.Frame) as such frames.
"""
from __future__ import annotations

import fcntl
import socket
import struct
from dataclasses import dataclass

from .controller import MAX_QUANTA, Frame

PAUSE_DST = bytes.fromhex("0180c2000001")
ETH_P_MAC_CONTROL = 0x8808
OPCODE_PAUSE = 0x0001
MIN_FRAME = 60  # without FCS
ETH_P_ALL = 0x0003

_HEADER = struct.Struct("!6s6sHHH")


def mac_bytes(mac: str) -> bytes:
    b = bytes.fromhex(mac.replace(":", "").replace("-", ""))
    if len(b) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return b


def pause_frame(src_mac: str | bytes, quanta: int) -> bytes:
    """One PAUSE frame from src_mac carrying pause_time = quanta (0..65535; 0 = XON)."""
    if not 0 <= quanta <= MAX_QUANTA:
        raise ValueError(f"pause quanta {quanta}: expected 0..{MAX_QUANTA}")
    src = src_mac if isinstance(src_mac, bytes) else mac_bytes(src_mac)
    frame = _HEADER.pack(PAUSE_DST, src, ETH_P_MAC_CONTROL, OPCODE_PAUSE, quanta)
    return frame + b"\0" * (MIN_FRAME - len(frame))


@dataclass(frozen=True)
class PauseFrame:
    dst: str
    src: str
    ethertype: int
    opcode: int
    quanta: int


def _mac_str(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def decode(frame: bytes) -> PauseFrame | None:
    """The PAUSE frame in raw Ethernet bytes, or None if it is not a MAC Control PAUSE frame."""
    if len(frame) < _HEADER.size:
        return None
    dst, src, ethertype, opcode, quanta = _HEADER.unpack_from(frame)
    if ethertype != ETH_P_MAC_CONTROL or opcode != OPCODE_PAUSE:
        return None
    return PauseFrame(_mac_str(dst), _mac_str(src), ethertype, opcode, quanta)


def interface_mac(dev: str) -> str:
    """dev's MAC address in the current network namespace (SIOCGIFHWADDR: /sys may show another namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s.fileno(), 0x8927, struct.pack("16s16x", dev.encode()))
    return _mac_str(ifreq[18:24])


class FrameSender:
    """A raw socket on one interface (of the current namespace) that sends PAUSE frames."""

    def __init__(self, dev: str):
        self.dev = dev
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_MAC_CONTROL))
        self.sock.bind((dev, ETH_P_MAC_CONTROL))
        self.src = mac_bytes(interface_mac(dev))

    def send(self, quanta: int) -> None:
        self.sock.send(pause_frame(self.src, quanta))

    def send_frame(self, frame: Frame) -> None:
        self.send(frame.quanta)

    def close(self) -> None:
        self.sock.close()


class FrameActuator:
    """The controller's decisions as real frames from node 2's NIC to node 1's: XOFF carries the pause time,
    refreshes repeat it, XON is pause time 0. Node 1's NIC must honour received PAUSE (ethtool -A rx on)."""

    def __init__(self, dev: str):
        self.sender = FrameSender(dev)
        self.sent = 0

    def __call__(self, frame: Frame | None) -> None:
        if frame is not None:
            self.sender.send_frame(frame)
            self.sent += 1

    def close(self) -> None:
        self.sender.close()
