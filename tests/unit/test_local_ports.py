"""How readiness finds a flow's socket (experiments/workloads/base.py local_ports): by the local port of each line
ss prints, with or without the State column, for IPv4, IPv6 and wildcard addresses."""
from types import SimpleNamespace

from ccrig.experiments.workloads.base import local_ports


class Bed:
    def __init__(self, out):
        self.out, self.argv = out, None

    def run(self, node, argv, check=True):
        self.argv = argv
        return SimpleNamespace(stdout=self.out)


def test_the_local_port_of_every_line_is_found():
    listening = ("LISTEN 1      128    198.18.2.2:5201 0.0.0.0:*\n"
                 "LISTEN 0      5      [::ffff:198.18.2.2]:5202 *:*\n"
                 "UNCONN 0      0      *:5203 *:*\n")
    bed = Bed(listening)
    assert local_ports(bed, "r1", ["-t", "-l"]) == {5201, 5202, 5203}
    assert bed.argv == ["ss", "-Hn", "-t", "-l"]
    # one state asked for: ss leaves the State column out
    established = "0      0      198.18.1.2:40001 198.18.2.2:5201\n0 0 198.18.1.2%eth0:40002 198.18.2.2:5202\n"
    assert local_ports(Bed(established), "s1", ["-t", "state", "established"]) == {40001, 40002}
    assert local_ports(Bed(""), "s1", ["-u", "-l"]) == set()
