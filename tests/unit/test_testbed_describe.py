"""Testbed.describe's one command per node: its output (tc's JSON for every device, then each interface's
`ethtool -k` after a line naming it) read back per interface."""
from ccrig.topologies.testbed import _described

ETHTOOL = """Features for {dev}:
rx-checksumming: on [fixed]
tcp-segmentation-offload: {tso}
\ttx-tcp-segmentation: {tso}
generic-segmentation-offload: off
generic-receive-offload: off
"""


def test_qdiscs_and_offloads_per_interface():
    tc = ('[{"kind":"htb","handle":"1:","dev":"eth0","root":true},{"kind":"pfifo","handle":"10:","dev":"eth0",'
          '"parent":"1:1"},{"kind":"noqueue","handle":"0:","dev":"lo","root":true}]')
    text = f"{tc}\n== eth0\n{ETHTOOL.format(dev='eth0', tso='off')}== eth1\n{ETHTOOL.format(dev='eth1', tso='on')}"
    qdiscs, offloads = _described(text)
    assert [q["kind"] for q in qdiscs if q["dev"] == "eth0"] == ["htb", "pfifo"]
    assert offloads == {
        "eth0": {"tcp-segmentation-offload": "off", "generic-segmentation-offload": "off",
                 "generic-receive-offload": "off"},
        "eth1": {"tcp-segmentation-offload": "on", "generic-segmentation-offload": "off",
                 "generic-receive-offload": "off"}}


def test_no_tc_output_leaves_the_offloads():
    qdiscs, offloads = _described(f"== eth0\n{ETHTOOL.format(dev='eth0', tso='off')}")
    assert qdiscs is None and offloads["eth0"]["tcp-segmentation-offload"] == "off"
