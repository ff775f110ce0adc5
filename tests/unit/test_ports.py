"""ccrig/ports.py: a machine whose ephemeral range holds the flows' client ports is named, with the way out."""
import pytest

from ccrig.ports import CLIENT_PORTS, client_port_problem


@pytest.mark.parametrize("port_range,reserved", [
    ("32768\t60999", ""),                       # Linux's default
    ("49152\t65535", "22"),
    ("1024\t65535", f"{CLIENT_PORTS[0]}-{CLIENT_PORTS[-1]}"),
    ("1024\t65535", f"80,{CLIENT_PORTS[0] - 5}-{CLIENT_PORTS[-1] + 5}"),
])
def test_client_ports_out_of_the_kernels_hands(port_range, reserved):
    assert client_port_problem("host s1", port_range, reserved) is None


@pytest.mark.parametrize("port_range,reserved", [
    ("1024\t65535", ""),
    ("20500\t30000", ""),
    ("1024\t65535", f"{CLIENT_PORTS[0]}-{CLIENT_PORTS[0] + 10}"),   # only some kept
])
def test_a_range_holding_them_is_refused_naming_the_way_out(port_range, reserved):
    assert client_port_problem("host s1 (op@10.0.0.1:22)", port_range, reserved) == (
        f"host s1 (op@10.0.0.1:22): net.ipv4.ip_local_port_range is {port_range.replace(chr(9), '-')}, which holds "
        f"ccrig's client ports 20001-21000 (the kernel may give one to another connection); expected a range "
        f"above 21000 such as Linux's default 32768-60999, or keep them: "
        f"sysctl -w net.ipv4.ip_local_reserved_ports=20001-21000")
