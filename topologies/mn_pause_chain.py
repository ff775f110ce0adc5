"""The PAUSE study's chain as a Mininet Topo of its own, for `mn` (run as root; Debian's mn uses the system python):

    mn --custom topologies/mn_pause_chain.py --topo pause_chain --switch lxbr --controller none --test pingall
    mn --custom topologies/mn_pause_chain.py --topo pause_chain,3,scale=10,rtt=100ms --switch lxbr --controller none

`pause_chain,N`: N sender/receiver pairs; `path=value` overrides the study's numbers below (link_a.rate,
link_b.rate, link_b.buffer, link_c.rate, link_c.buffer, rtt, scale). The added RTT needs netem, so it is 0 here
by default. The Topo is generated from the project's Topology model (topologies/named/pause_chain.py ->
topologies/testbeds/mininet/topo.py), the same the mininet testbed runs; the XOFF/XON controller is the runner's,
not the Topo's. mn execs this file, so it finds the repository from its own path and the project's packages in
its .venv.
"""
import sys as _sys
from pathlib import Path as _Path

_root = _Path(_sys._getframe(0).f_code.co_filename).resolve().parents[1]
# the venv's site-packages as a site directory, so its .pth files install the editable `ccrig` import name
import site as _site  # noqa: E402
_site.addsitedir(str(_root / f".venv/lib/python{_sys.version_info[0]}.{_sys.version_info[1]}/site-packages"))

from ccrig.topologies.testbeds.mininet import mn_topo as _mn_topo  # noqa: E402

# Malhotra et al.: mu1 = 100, nu = 15 packets/s; B1 = 10, B2 = 20 packets
_defaults = {"link_a": {"rate": "25pps"}, "link_b": {"rate": "100pps", "buffer": "10pkt"},
             "link_c": {"rate": "15pps", "buffer": "20pkt"}, "rtt": "0s"}
# validated by the chain's own model (topologies.SPECS)
topos = {"pause_chain": _mn_topo("pause_chain", _defaults)}
