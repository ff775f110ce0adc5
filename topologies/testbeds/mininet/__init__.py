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
import sys
import warnings


def _stdlib_distutils() -> None:
    """Debian's Mininet imports distutils.version (StrictVersion). In a venv, setuptools' shim answers `import
    distutils` by importing setuptools and pkg_resources: 85 ms on every ccrig command, as the testbed registry
    imports this package. Python's own distutils (up to 3.11) has the same StrictVersion and imports in a few ms;
    where it is gone (3.12) the shim stays in charge."""
    shim = next((f for f in sys.meta_path if type(f).__module__ == "_distutils_hack"), None)
    if shim is None or "distutils" in sys.modules:
        return
    sys.meta_path.remove(shim)
    try:
        with warnings.catch_warnings():   # its deprecation is the reason Mininet must move, not ours to print
            warnings.simplefilter("ignore", DeprecationWarning)
            import distutils.version  # noqa: F401
    except ImportError:
        pass
    finally:
        sys.meta_path.insert(0, shim)


_stdlib_distutils()

from .clean import RECORDS, leftovers, node_shells  # noqa: E402
from .switches import MininetOptions, OvsDaemons, switch_class  # noqa: E402
from .testbed import MininetTestbed  # noqa: E402
from .topo import Names, TopologyNode, TopologyTopo, mn_topo, node_setup, node_setup_argv, queue_by_ccrig, \
    tclink_params, wire_argv

TESTBED = MininetTestbed

__all__ = ["RECORDS", "leftovers", "node_shells", "MininetOptions", "OvsDaemons", "switch_class", "MininetTestbed",
           "Names", "TopologyNode", "TopologyTopo", "mn_topo", "node_setup", "node_setup_argv", "queue_by_ccrig",
           "tclink_params", "wire_argv", "TESTBED"]
