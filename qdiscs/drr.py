"""DRR, Deficit Round Robin (Shreedhar and Varghese 1995; tc-drr(8)): one class per flow, each with its own
drop-tail queue, served round robin a quantum of bytes at a time.

drr itself is only a scheduler: a classifier must put every flow in its own class. Two ways, chosen by the
caller of setup_argv:

* `flow_sources` given (one source address per flow, as the dumbbell has: one sender host per flow): exact
  u32 matches, so flow i is class i, always -- a flow here is an address pair, as in the studies' DRR.
* only a count of flows: the `flow` classifier hashes addresses, protocol and ports into that many classes,
  so two flows may share a class (as in sfq); use flow_sources whenever the addresses are known.

Anything neither filter matches (ARP, for one) goes to the last class by a catch-all filter, because drr
drops unclassified packets and a router that cannot ARP carries nothing.

    tc qdisc  add dev D parent P handle 10: drr
    tc class  add dev D parent 10: classid 10:1 drr quantum Q        (one per flow)
    tc qdisc  add dev D parent 10:1 pfifo limit L                      (each class's queue)
    tc filter add dev D parent 10: protocol ip prio 1 u32 match ip src A/32 flowid 10:1
    tc filter add dev D parent 10: protocol all prio 2 u32 match u32 0 0 flowid 10:N
"""
from __future__ import annotations

import math
from typing import ClassVar, Literal, Sequence

from ccrig.errors import field_error
from .base import Bytes, Count, Qdisc, wire_bytes


class Drr(Qdisc):
    kind: Literal["drr"] = "drr"
    module: ClassVar[str] = "sch_drr"
    kconfig: ClassVar[str] = "NET_SCH_DRR"
    # its classes' deficit (bytes, tc -s class show) goes up and down
    gauges: ClassVar[frozenset[str]] = frozenset({"deficit"})
    quantum: Bytes = None             # bytes a class may send per round (default: one full-size packet)
    class_limit: Count = None          # packets in each class's queue (default: the link's buffer shared out)



    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["drr"]

    def classes_under(self, handle: str) -> str | None:
        # the per-flow classes hang off drr's own handle: each one's counters say how the flows were served
        return handle

    def class_limit_for(self, buffer, mtu: int, classes: int) -> int:
        """Packets per class: the link's buffer divided among the classes (rounded up), so a sweep over the
        buffer compares the same total memory across disciplines; or class_limit when given."""
        if self.class_limit is not None:
            return self.class_limit
        if buffer is None:
            return 1000
        total = buffer.packets if buffer.packets is not None else max(1, buffer.bytes // wire_bytes(mtu))
        return max(1, math.ceil(total / classes))

    def setup_argv(self, dev, parent, handle, buffer, rate_bps, mtu, flows,
                   flow_sources: Sequence[str] | None = None):
        if flow_sources is not None:
            flow_sources = list(dict.fromkeys(flow_sources))  # one class per distinct source
            n = len(flow_sources)
        else:
            n = flows
        if n < 1:
            raise field_error("flows", n, "at least 1 flow for drr's per-flow classes")
        major = handle.rstrip(":")
        quantum = str(self.quantum or wire_bytes(mtu))
        limit = str(self.class_limit_for(buffer, mtu, n))
        cmds = [["tc", "qdisc", "add", "dev", dev, "parent", parent, "handle", f"{major}:", "drr"]]
        for i in range(1, n + 1):
            classid = f"{major}:{i:x}"  # tc class minors are hexadecimal
            cmds.append(["tc", "class", "add", "dev", dev, "parent", f"{major}:", "classid", classid,
                         "drr", "quantum", quantum])
            cmds.append(["tc", "qdisc", "add", "dev", dev, "parent", classid, "pfifo", "limit", limit])
        filt = ["tc", "filter", "add", "dev", dev, "parent", f"{major}:"]
        if flow_sources is not None:
            for i, src in enumerate(flow_sources, 1):
                cmds.append([*filt, "protocol", "ip", "prio", "1", "u32", "match", "ip", "src", f"{src}/32",
                             "flowid", f"{major}:{i:x}"])
        else:
            cmds.append([*filt, "protocol", "all", "prio", "1", "handle", "1", "flow", "hash", "keys",
                         "src,dst,proto,proto-src,proto-dst", "divisor", str(n), "baseclass", f"{major}:1"])
        cmds.append([*filt, "protocol", "all", "prio", "2", "u32", "match", "u32", "0", "0",
                     "flowid", f"{major}:{n:x}"])
        return cmds
