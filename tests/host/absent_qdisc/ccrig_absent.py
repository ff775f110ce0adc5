"""A queue discipline no kernel has (tests/host/absent.py): a discipline module like those of qdiscs/, put among
them by the test's ccrig process, so it is found by its kind as they are."""
from __future__ import annotations

from typing import ClassVar, Literal

from ccrig.qdiscs.base import Qdisc


class Absent(Qdisc):
    kind: Literal["ccrig_absent"] = "ccrig_absent"
    module: ClassVar[str] = "sch_ccrig_absent"

    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["ccrig_absent"]   # no parameters: tc then asks the kernel, which answers that the kind is unknown
