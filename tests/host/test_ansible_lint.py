"""The Ansible content passes ansible-lint's production profile, and every role has the documented layout."""
import subprocess
import sys
from pathlib import Path

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"


def test_roles_have_the_documented_layout():
    roles = sorted(p.name for p in (ANSIBLE / "roles").iterdir())
    assert roles == ["metrics", "packages", "pause", "tcp_modules", "traffic"]
    for role in roles:
        for part in ("defaults/main.yml", "tasks/main.yml", "handlers/main.yml", "meta/argument_specs.yml"):
            assert (ANSIBLE / "roles" / role / part).is_file(), f"{role}/{part}"


def test_ansible_lint_production_profile_passes():
    lint = Path(sys.executable).parent / "ansible-lint"
    res = subprocess.run([str(lint), "--offline", "--nocolor", "--profile", "production", str(ANSIBLE)],
                         capture_output=True, text=True, timeout=600, cwd=ANSIBLE.parent)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Passed" in res.stdout + res.stderr


def test_inventories_parse():
    inv = Path(sys.executable).parent / "ansible-inventory"
    for f in sorted((ANSIBLE / "inventories").glob("*.yml")):
        res = subprocess.run([str(inv), "-i", str(f), "--list"], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "Unable to parse" not in res.stderr, (f, res.stderr)
