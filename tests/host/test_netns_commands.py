"""The command runner inside a namespace: ip, tc and ss switch into it themselves (one process, no `ip netns exec`),
and what they see and change is that namespace's, exactly as through `ip netns exec`; anything else still goes
through `ip netns exec`. Real namespaces, a real veth pair and a real listening socket."""
import os
import subprocess
import sys

import pytest

from ccrig.commands import Commands


@pytest.fixture
def ns():
    name = f"ccci-{os.getpid()}-cmdns"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_ip_tc_and_ss_act_in_the_namespace_and_log_one_process(ns, tmp_path):
    log = tmp_path / "commands.log"
    c = Commands(log)
    dev = "ccveth0"
    c.run(["ip", "link", "add", dev, "type", "veth", "peer", "name", f"{dev}p"], ns=ns)
    c.run(["ip", "link", "set", dev, "up"], ns=ns)
    c.run(["tc", "qdisc", "replace", "dev", dev, "root", "pfifo", "limit", "37"], ns=ns)
    # the device and its discipline are the namespace's, not this one's
    assert dev not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    inside = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev], capture_output=True,
                            text=True, check=True).stdout
    assert "pfifo" in inside and "limit 37" in inside, inside
    assert "limit 37" in c.run(["tc", "qdisc", "show", "dev", dev], ns=ns).stdout
    # ss -N sees the namespace's sockets: a listener started there (through `ip netns exec`) on loopback
    c.run(["ip", "link", "set", "lo", "up"], ns=ns)
    code = ("import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 5977)); s.listen(); print(1, flush=True); "
            "sys.stdin.read()")
    listener = c.popen([sys.executable, "-c", code], ns=ns, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert listener.stdout.readline().strip() == b"1"   # listening: readiness, not a sleep
        assert ":5977" in c.run(["ss", "-Hltn"], ns=ns).stdout
        assert ":5977" not in subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
    finally:
        listener.stdin.close()
        listener.wait(timeout=30)
    lines = [line.split(None, 2)[2] for line in log.read_text().splitlines()]
    assert lines[0] == f"ip -n {ns} link add {dev} type veth peer name {dev}p"
    assert f"tc -n {ns} qdisc replace dev {dev} root pfifo limit 37" in lines
    assert f"ss -N {ns} -Hltn" in lines
    assert any(line.startswith(f"ip netns exec {ns} {sys.executable}") for line in lines), lines
