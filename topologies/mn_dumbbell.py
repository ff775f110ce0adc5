"""The dumbbell as a Mininet Topo of its own, for `mn` (run as root; Debian's mn uses the system python):

    mn --custom topologies/mn_dumbbell.py --topo dumbbell,2 --switch lxbr --controller none --test pingall
    mn --custom topologies/mn_dumbbell.py --topo dumbbell,4,bottleneck.rate=20mbit,rtt=10ms \
       --switch ovsbr,datapath=user --controller none

`dumbbell,N`: N sender/receiver pairs; `path=value` overrides the topology section of
experiments/specs/default.yaml (bottleneck.rate, bottleneck.buffer, bottleneck.qdisc, rtt, loss, access.rate).
The Topo is generated from the project's Topology model (topologies/testbeds/mininet/topo.py), the same the
mininet testbed runs: nodes eth0.. with 198.18.i.0/24 addresses and static routes, every link through a switch of
its own.
mn execs this file, so it finds the repository from its own path and the project's packages in its .venv.
"""
import sys as _sys
from pathlib import Path as _Path

_root = _Path(_sys._getframe(0).f_code.co_filename).resolve().parents[1]
# the venv's site-packages as a site directory, so its .pth files install the editable `ccrig` import name
import site as _site  # noqa: E402
_site.addsitedir(str(_root / f".venv/lib/python{_sys.version_info[0]}.{_sys.version_info[1]}/site-packages"))

import yaml as _yaml  # noqa: E402

from ccrig.topologies.testbeds.mininet import mn_topo as _mn_topo  # noqa: E402

_defaults = _yaml.safe_load((_root / "experiments/specs/default.yaml").read_text())["topology"]
topos = {"dumbbell": _mn_topo("dumbbell", _defaults)}
