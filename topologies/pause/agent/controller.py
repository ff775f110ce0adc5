"""The XOFF/XON controller of IEEE 802.3x hop-by-hop flow control, as pure code (no I/O, no clock).

The study's rule (Malhotra et al., §II-A, Fig. 1): node 2 watches its queue. When the occupancy rises above
the high threshold T1 it tells its upstream neighbour, node 1, to slow from μ1 to μ2 (0 = stop); when the
occupancy falls below the low threshold T2 it lets node 1 go at μ1 again. Between T2 and T1 the rate is
whichever the last crossing chose (hysteresis):

    occupancy > T1             -> XOFF   (transition 8: T1 -> T1+1 puts queue 2 in the "down" state)
    occupancy < T2             -> XON    (transition 5: T2 -> T2-1 puts it back "up")
    T1 = B2                    -> never XOFF: the queue cannot exceed its buffer (the study's "no PAUSE")

802.3x itself has no "XOFF until further notice": a PAUSE frame carries a pause time in quanta of 512 bit
times of the link, the receiver stops for that long, and a frame with pause time 0 lets it go at once (XON).
A congested port therefore refreshes its XOFF before the pause time runs out. Two pieces model that:

    XoffXon        the sender of PAUSE (node 2): occupancy -> frames to send (quanta, or 0 for XON)
    PauseReceiver  the receiver of PAUSE (node 1's MAC): frames -> paused until when

`quanta=None` gives the study's ON/OFF signalling (an XOFF holds until the XON); the emulated actuator and the
real-frame actuator both drive these same objects, so the state machine is tested once, here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

QUANTUM_BITS = 512      # one pause quantum: 512 bit times of the link (802.3 Annex 31B)
MAX_QUANTA = 0xFFFF     # the pause_time field is 16 bits


def quanta_seconds(quanta: int, link_bps: float) -> float:
    """How long `quanta` pause quanta last on a link of link_bps."""
    return quanta * QUANTUM_BITS / link_bps


def seconds_to_quanta(seconds: float, link_bps: float) -> int:
    """The pause time in quanta closest to `seconds` on a link of link_bps, clamped to the field's 1..65535."""
    return max(1, min(MAX_QUANTA, round(seconds * link_bps / QUANTUM_BITS)))


@dataclass(frozen=True)
class Frame:
    """One PAUSE frame to send upstream: pause_time in quanta (0 = XON). `refresh` marks an XOFF that
    renews a pause already in force rather than starting one."""
    quanta: int
    refresh: bool = False

    @property
    def is_xon(self) -> bool:
        return self.quanta == 0


@dataclass
class XoffXon:
    """The congested port's decision: when to send XOFF, refresh it and send XON.

    high, low: T1 and T2 in packets (low <= high). quanta: the pause time every XOFF carries, or None for
    ON/OFF signalling (XOFF holds until XON). refresh: seconds between XOFFs while the queue stays above low
    (quanta mode only), which must be shorter than the pause time or the upstream resumes in between.
    """
    high: int
    low: int
    quanta: int | None = None
    refresh: float | None = None
    congested: bool = False
    last_xoff: float = float("-inf")

    def __post_init__(self):
        if self.low > self.high:
            raise ValueError(f"low threshold T2={self.low} above high threshold T1={self.high}; expected T2 <= T1")
        if self.low < 1:
            raise ValueError(f"low threshold T2={self.low}; expected at least 1 (XON fires below T2)")
        if self.quanta is not None:
            if not 1 <= self.quanta <= MAX_QUANTA:
                raise ValueError(f"quanta={self.quanta}; expected 1..{MAX_QUANTA} (0 is XON, not a pause)")
            if self.refresh is None or self.refresh <= 0:
                raise ValueError("quanta mode needs a positive refresh interval")

    def step(self, now: float, occupancy: int) -> Frame | None:
        """The frame to send given the queue's occupancy at time now, or None."""
        if not self.congested:
            if occupancy > self.high:
                self.congested = True
                self.last_xoff = now
                return Frame(self.quanta if self.quanta is not None else MAX_QUANTA)
            return None
        if occupancy < self.low:
            self.congested = False
            return Frame(0)
        if self.quanta is not None and now - self.last_xoff >= self.refresh:
            self.last_xoff = now
            return Frame(self.quanta, refresh=True)
        return None

    def next_deadline(self) -> float | None:
        """When step() must run next regardless of the queue (the refresh), or None."""
        if self.congested and self.quanta is not None:
            return self.last_xoff + self.refresh
        return None


@dataclass
class PauseReceiver:
    """The upstream MAC honouring PAUSE: paused from an XOFF until its pause time ends or an XON arrives.

    link_bps converts quanta to seconds. ON/OFF signalling (no pause time) is an XOFF with until=inf.
    """
    link_bps: float
    timed: bool = True
    paused_until: float = float("-inf")

    def receive(self, now: float, frame: Frame) -> None:
        if frame.is_xon:
            self.paused_until = float("-inf")
        elif self.timed:
            # a new PAUSE replaces the running timer (802.3 31B.3.7), it does not add to it
            self.paused_until = now + quanta_seconds(frame.quanta, self.link_bps)
        else:
            self.paused_until = float("inf")

    def paused(self, now: float) -> bool:
        return now < self.paused_until


@dataclass
class PauseLink:
    """Both ends of one pausable link: the congested port deciding and the upstream obeying, plus the
    accounting the study reports (XOFF/XON events, refreshes, expiries, time paused).

    step(now, occupancy) returns (frame or None, rate change or None) where the rate change is "paused" or
    "running": what the actuator must make the upstream transmitter do now.
    """
    high: int
    low: int
    link_bps: float
    quanta: int | None = None
    refresh: float | None = None
    sender: XoffXon = field(init=False)
    receiver: PauseReceiver = field(init=False)
    paused: bool = False
    paused_since: float = 0.0
    paused_time: float = 0.0
    xoff: int = 0
    xon: int = 0
    refreshes: int = 0
    expiries: int = 0

    def __post_init__(self):
        refresh = self.refresh
        if self.quanta is not None and refresh is None:
            # refresh at half the pause time: a late poll still renews the pause before it runs out
            refresh = quanta_seconds(self.quanta, self.link_bps) / 2
        self.refresh = refresh
        self.sender = XoffXon(self.high, self.low, self.quanta, refresh)
        self.receiver = PauseReceiver(self.link_bps, timed=self.quanta is not None)

    def step(self, now: float, occupancy: int) -> tuple[Frame | None, str | None]:
        frame = self.sender.step(now, occupancy)
        if frame is not None:
            if frame.is_xon:
                self.xon += 1
            elif frame.refresh:
                self.refreshes += 1
            else:
                self.xoff += 1
            self.receiver.receive(now, frame)
        return frame, self._settle(now)

    def _settle(self, now: float) -> str | None:
        want = self.receiver.paused(now)
        if want == self.paused:
            return None
        if want:
            self.paused, self.paused_since = True, now
            return "paused"
        # resumed: by an XON, or because the pause time ran out without a refresh
        if self.sender.congested:
            self.expiries += 1
        self.paused = False
        self.paused_time += now - self.paused_since
        return "running"

    def tick(self, now: float) -> str | None:
        """Time passing without a new occupancy reading: a pause may expire."""
        return self._settle(now)

    def next_deadline(self) -> float | None:
        """The earliest time something happens without the queue changing (refresh or expiry)."""
        times = [t for t in (self.sender.next_deadline(),
                             self.receiver.paused_until if self.paused else None) if t is not None]
        finite = [t for t in times if t != float("inf")]
        return min(finite) if finite else None

    def time_paused(self, now: float) -> float:
        return self.paused_time + (now - self.paused_since if self.paused else 0.0)
