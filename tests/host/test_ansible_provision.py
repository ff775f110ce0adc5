"""`ccrig provision` over real SSH: the site playbook provisions sshd-in-namespace hosts (tests/support/sshhosts.py),
a second run changes nothing, --check runs clean, teardown stops what site started and is idempotent too.

The hosts share this machine's filesystem and dpkg, so the packages role finds its packages installed (`make
deps` installs the same list); everything the roles write goes to the bed's own directory, and every daemon
listens on a namespace's address or 127.0.0.1 on a free port.
"""
import json
import socket
import urllib.request

import pytest

from ccrig.experiments.provision.playbooks import provision, run_playbook

from support.sshhosts import dumbbell_bed

# SSH test beds add users and sudoers files: useradd refuses while another holds /etc/passwd's lock
pytestmark = pytest.mark.xdist_group("sshhosts")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def provisioned_inventory(bed, **more):
    """The bed's inventory with every path and port of the roles inside the bed."""
    return bed.write_inventory(
        packages_update_cache=False,  # `make deps` refreshed the lists; no mirror traffic from the tests
        tcp_modules_dir=f"{bed.dir}/tcp_modules", tcp_modules_stage=f"{bed.dir}/tcp_modules-src.tar",
        pause_state_dir=f"{bed.dir}/pause", metrics_run_dir=f"{bed.dir}/run", traffic_run_dir=f"{bed.dir}/run",
        metrics_server_dir=f"{bed.dir}/prometheus", metrics_server_port=free_port(), **more)


@pytest.fixture(scope="module")
def bed():
    with dumbbell_bed(pairs=1) as b:
        b.port = None
        provisioned_inventory(b)
        yield b
        # whatever a failed test left running: teardown is what a user would run
        try:
            run_playbook(b.inventory, "teardown.yml", echo=lambda _: None)
        except Exception:
            pass


def listening(bed, host, port) -> bool:
    return bool(bed.exec(host, ["ss", "-Hltn", f"sport = :{port}"]).stdout.strip())


def server_port(bed) -> int:
    import yaml
    return yaml.safe_load(bed.inventory.read_text())["all"]["vars"]["metrics_server_port"]


def query(port, q):
    url = f"http://127.0.0.1:{port}/api/v1/query?query={urllib.request.quote(q)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def test_site_provisions_the_hosts(bed, capsys):
    assert provision(bed.inventory) == 0
    err = capsys.readouterr().err
    assert "TASK packages : Install the experiment tools" in err and "changed" in err
    # node exporters on every host's own address, iperf3's standing server on the receiver
    for host in bed.hosts:
        assert listening(bed, host, 9100), host
    assert listening(bed, "d1", 5200)
    # the laws were built on the host
    assert (bed.dir / "tcp_modules" / "build" / "tcp_alphabeta.bpf.o").is_file()
    # the controller's Prometheus scrapes every node exporter
    up = query(server_port(bed), 'up{job="node"}')
    assert sorted(r["metric"]["node"] for r in up) == sorted(bed.hosts)
    assert all(r["value"][1] == "1" for r in up)


def test_second_run_changes_nothing(bed):
    result = run_playbook(bed.inventory, echo=lambda _: None)
    assert result.changes == [] and result.changed == 0
    assert set(result.hosts) == set(bed.hosts) | {"localhost"}


def test_check_mode_runs_clean(bed):
    result = run_playbook(bed.inventory, check=True, echo=lambda _: None)
    assert result.failures == [] and result.changed == 0


def test_teardown_stops_what_site_started_and_is_idempotent(bed):
    first = run_playbook(bed.inventory, "teardown.yml", echo=lambda _: None)
    assert first.changed > 0
    for host in bed.hosts:
        assert not listening(bed, host, 9100), host
    assert not listening(bed, "d1", 5200)
    with pytest.raises(OSError):
        query(server_port(bed), "up")
    again = run_playbook(bed.inventory, "teardown.yml", echo=lambda _: None)
    assert again.changes == []
