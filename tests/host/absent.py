"""A queue discipline no kernel has, so the tests of what ccrig does when a kernel lacks a feature run on every
kernel: on this one, which lacks many disciplines, and on a distribution kernel, which has them all.

`CCRIG` is the `ccrig` command line with one more discipline kind, `KIND`, known to the spec: it is added to
ccrig.qdiscs.KINDS before the spec's models are built from them, in the ccrig process itself. Nothing else is
changed: preflight probes the real kernel for it (`tc qdisc add dev lo root handle 1: ccrig_absent` in a
scratch namespace, answered "Specified qdisc kind is unknown") and refuses the spec as it would any discipline
the kernel lacks.
"""
from __future__ import annotations

import sys

KIND = "ccrig_absent"

_PROGRAM = f'''
from typing import ClassVar, Literal

from ccrig import qdiscs
from ccrig.qdiscs.base import Qdisc


class Absent(Qdisc):
    kind: Literal["{KIND}"] = "{KIND}"
    module: ClassVar[str] = "sch_{KIND}"

    def qdisc_args(self, buffer, rate_bps, mtu):
        return ["{KIND}"]   # no parameters: tc then asks the kernel, which answers that the kind is unknown


qdiscs.KINDS["{KIND}"] = Absent
from ccrig.experiments.cli.app import main   # builds the spec's models, now with {KIND}
main()
'''

CCRIG = [sys.executable, "-c", _PROGRAM]
