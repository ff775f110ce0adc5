"""The mininet testbed (`testbed: mininet`): the Topology realised by Mininet (Debian's `mininet`), with
Linux-bridge or Open vSwitch switches on its links.

    topo.py      names, what each node and switch port is set to, the Topo (also for `mn --custom`)
    switches.py  the switch kinds, the spec's `mininet:` section (MininetOptions), the Open vSwitch daemons
    testbed.py   MininetTestbed: up, down, commands on nodes through mnexec
    clean.py     the run's record in /run/ccrig/mininet, and removing what a (killed) run left

Debian's library is imported by its own absolute name (`from mininet.net import Mininet`) inside this package
of the same last name: absolute imports name the top-level `mininet`, this package is only ever
ccrig.topologies.testbeds.mininet. Importing this package imports Debian's Mininet; where it is missing the
testbed registry keeps `mininet` known by name and says why it is unavailable.

The same Topo works on its own: `mn --custom topologies/mn_dumbbell.py --topo dumbbell,2 ...` (mn_*.py).
"""
from .clean import RECORDS, leftovers, node_shells
from .switches import MininetOptions, OvsDaemons, switch_class
from .testbed import MininetTestbed
from .topo import Names, TopologyNode, TopologyTopo, mn_topo, node_setup, node_setup_argv, queue_by_ccrig, \
    tclink_params, wire_argv

TESTBED = MininetTestbed

__all__ = ["RECORDS", "leftovers", "node_shells", "MininetOptions", "OvsDaemons", "switch_class", "MininetTestbed",
           "Names", "TopologyNode", "TopologyTopo", "mn_topo", "node_setup", "node_setup_argv", "queue_by_ccrig",
           "tclink_params", "wire_argv", "TESTBED"]
