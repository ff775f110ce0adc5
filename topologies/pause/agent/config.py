"""What the controller loop and node 1's agent need to know about the pause_chain's link B: devices, namespaces,
thresholds, rates and buffers. JSON-serialisable (dataclasses.asdict), since it crosses the process boundary
as the programs' one argument."""
from __future__ import annotations

from dataclasses import dataclass

from ccrig.errors import InputError
from .controller import MAX_QUANTA


@dataclass
class EmulatedPauseConfig:
    """What the controller process needs; JSON-serialisable so it crosses the process boundary."""
    down_dev: str             # node 2's egress toward the receivers (its queue is B2)
    up_dev: str               # node 1's egress toward node 2 (the pausable link B)
    high: int                 # T1, packets
    low: int                  # T2, packets
    rate_bps: float           # μ1
    paused_bps: float         # μ2 (0 = stop)
    up_limit: int             # B1, packets: node 1's pfifo under tbf
    down_limit: int           # B2, packets (a threshold at or above it can never be crossed)
    departure_pps: float      # ν in packets/s: how fast queue 2 can drain
    wire_bytes: int = 1514    # one full-size packet on the wire (tbf's bucket)
    down_ns: str | None = None
    up_ns: str | None = None
    down_handle: str = "10:"  # the qdisc holding queue 2 (the pfifo leaf under link C's shaper)
    quanta: int | None = None
    refresh: float | None = None
    poll: float = 100e-6      # shortest time between two reads of the queue
    max_sleep: float = 0.01   # longest (keeps stop() and a mis-estimated bound cheap)
    realtime: bool = True
    # tbf: shape node 1's link B (emulated links). frames: send real 802.3x PAUSE frames out of frames_dev
    # (node 2's interface toward node 1, in down_ns) and let node 1's NIC honour them (real NICs)
    actuator: str = "tbf"
    frames_dev: str | None = None
    # tbf on another machine: node 1's address on link B, where its agent (obey) listens for the rates, the
    # agent's port (it reports the one it bound), and node 2's address on link B, the only sender it obeys;
    # None: node 1's tbf is reached here through up_ns
    signal_to: str | None = None
    signal_port: int | None = None
    signal_from: str | None = None

    def __post_init__(self):
        if self.actuator not in ("tbf", "frames"):
            raise InputError(f"pause actuator: got {self.actuator!r}; expected tbf or frames")
        if self.actuator == "frames":
            if not self.frames_dev:
                raise InputError("pause actuator frames: needs frames_dev, node 2's interface toward node 1")
            if self.quanta is None:
                # a NIC resumes when the pause time runs out: ON/OFF signalling is the longest pause, refreshed
                self.quanta = MAX_QUANTA
        if self.rate_bps <= 0:
            raise InputError(f"pause: rate: got {self.rate_bps!r}; expected a positive rate (μ1)")
        if self.paused_bps < 0 or self.paused_bps >= self.rate_bps:
            raise InputError(f"pause.paused_rate: got {self.paused_bps!r} bit/s; expected 0 (stop) up to "
                             f"below the link rate {self.rate_bps:g} bit/s")
        if not 1 <= self.low <= self.high:
            raise InputError(f"pause.low: got {self.low!r}; expected 1 <= T2 <= T1 = {self.high}")
        if self.high > self.down_limit:
            raise InputError(f"pause.high: got {self.high!r}; expected at most the downstream buffer B2 = "
                             f"{self.down_limit} packets")
        if self.signal_to is not None and self.actuator != "tbf":
            raise InputError(f"pause actuator {self.actuator}: signal_to is for tbf on another machine")
        if not 20e-6 <= self.poll <= 0.1:
            raise InputError(f"pause.poll: got {self.poll!r} s; expected 20us to 100ms")

    @property
    def arrival_pps(self) -> float:
        return self.rate_bps / (8 * self.wire_bytes)

    def tbf_argv(self, rate_bps: float, verb: str = "add") -> list[list[str]]:
        """The tc commands that put node 1's link B on tbf at rate_bps over a pfifo of B1 (handles as the htb
        shaper's, 1: and 10:, so statistics readers find the queue where they expect it); verb change: the
        first alone sets the rate of the tbf in place."""
        dev, burst = self.up_dev, str(self.wire_bytes)
        return [["tc", "qdisc", verb, "dev", dev, "root", "handle", "1:", "tbf",
                 "rate", f"{max(8, round(rate_bps))}bit", "burst", burst, "limit", str(self.up_limit * self.wire_bytes)],
                ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo",
                 "limit", str(self.up_limit)]]
