"""A queue discipline no kernel has, so the tests of what ccrig does when a kernel lacks a feature run on every
kernel: on this one, which lacks many disciplines, and on a distribution kernel, which has them all.

`CCRIG` is the `ccrig` command line with one more discipline module, absent_qdisc/ccrig_absent.py (kind `KIND`),
among qdiscs/'s: its folder joins the package's search path before anything asks for the disciplines, in the
ccrig process itself, so it is found by its kind as a new discipline module would be. Nothing else is changed:
preflight probes the real kernel for it (`tc qdisc add dev lo root handle 1: ccrig_absent` in a scratch
namespace, answered "Specified qdisc kind is unknown") and refuses the spec as it would any discipline the
kernel lacks.
"""
from __future__ import annotations

import sys
from pathlib import Path

KIND = "ccrig_absent"
FOLDER = Path(__file__).resolve().parent / "absent_qdisc"

_PROGRAM = f'''
from ccrig import qdiscs
qdiscs.__path__.append({str(FOLDER)!r})
from ccrig.experiments.cli.app import main   # builds the spec's models, now with {KIND}
main()
'''

CCRIG = [sys.executable, "-c", _PROGRAM]
