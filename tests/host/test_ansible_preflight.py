"""`ccrig provision` refuses a bad inventory before Ansible changes anything, naming each host and the reason;
the pause role refuses an interface without Ethernet PAUSE (veth) and says so."""
import textwrap

import pytest
import yaml
from typer.testing import CliRunner

from ccrig.errors import InputError, RunError
from ccrig.experiments.provision.playbooks import app, run_playbook

from support.sshhosts import dumbbell_bed

# SSH test beds add users and sudoers files: useradd refuses while another holds /etc/passwd's lock
pytestmark = pytest.mark.xdist_group("sshhosts")


@pytest.fixture(scope="module")
def bed():
    with dumbbell_bed(pairs=1) as b:
        b.write_inventory(pause_state_dir=f"{b.dir}/pause")
        yield b


def variant(bed, tmp_path, change):
    inv = yaml.safe_load(bed.inventory.read_text())
    change(inv["all"]["children"])
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_missing_inventory_exits_2_naming_it(tmp_path):
    res = CliRunner().invoke(app, ["-i", str(tmp_path / "nope.yml")])
    assert res.exit_code == 2
    assert "nope.yml" in res.output and "expected an Ansible inventory" in res.output


def test_unreachable_host_and_wrong_interface_fail_before_the_run(bed, tmp_path):
    def breaks(g):
        g["receivers"]["hosts"]["d1"]["ansible_host"] = f"{bed.subnet}.99"  # nothing listens there
        g["senders"]["hosts"]["s1"]["ccrig_interfaces"] = {"r1": "nosuch0"}
        g["routers"]["hosts"]["r1"]["pause_interfaces"] = ["nosuch1"]
    inv = variant(bed, tmp_path, breaks)
    lines = []
    with pytest.raises(InputError) as e:
        run_playbook(inv, echo=lines.append)
    msg = str(e.value)
    assert "host d1" in msg and "unreachable" in msg
    assert "host s1" in msg and "'nosuch0' does not exist" in msg
    assert "host r1" in msg and "'nosuch1' does not exist" in msg
    assert lines == [], "Ansible ran although the check failed"
    # the same through the command line: exit 2, one line
    res = CliRunner().invoke(app, ["-i", str(inv)])
    assert res.exit_code == 2 and "host d1" in res.output


def test_host_without_sudo_fails_before_the_run(bed, tmp_path):
    user = bed.add_user("ns")
    inv = variant(bed, tmp_path, lambda g: g["receivers"]["hosts"]["d1"].update(ansible_user=user))
    with pytest.raises(InputError, match=f"host d1 .*user {user} cannot run commands as root without a password"):
        run_playbook(inv, echo=lambda _: None)


def test_pause_on_veth_is_refused_with_the_reason(bed, tmp_path):
    inv = variant(bed, tmp_path, lambda g: g["senders"]["hosts"]["s1"].update(pause_interfaces=["lab0"]))
    book = tmp_path / "pause.yml"
    book.write_text(textwrap.dedent("""\
        - name: PAUSE only
          hosts: senders
          become: true
          gather_facts: false
          roles:
            - role: pause
        """))
    with pytest.raises(RunError) as e:
        run_playbook(inv, str(book), echo=lambda _: None)
    msg = str(e.value)
    assert "host s1" in msg and "Refuse interfaces without PAUSE" in msg
    assert "lab0 has no Ethernet PAUSE" in msg and "Operation not supported" in msg
    # refused before anything was saved or set
    assert not (bed.dir / "pause").exists() or not any((bed.dir / "pause").iterdir())


def test_a_port_held_by_another_program_is_refused(bed, tmp_path):
    """The controller's Prometheus must not take another server on its port for its own."""
    import socket
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        inv = tmp_path / "inventory.yml"
        bed.write_inventory(inv, metrics_server_dir=f"{bed.dir}/prometheus", metrics_server_port=port)
        book = tmp_path / "server.yml"
        book.write_text(textwrap.dedent("""\
            - name: Prometheus only
              hosts: controller
              gather_facts: false
              roles:
                - role: metrics
                  vars:
                    metrics_part: server
            """))
        with pytest.raises(RunError) as e:
            run_playbook(inv, str(book), echo=lambda _: None)
    msg = str(e.value)
    assert "host localhost" in msg and f"127.0.0.1:{port} is held by another program" in msg
    assert not (bed.dir / "prometheus" / "prometheus.pid").exists()
