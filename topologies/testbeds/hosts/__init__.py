"""The hosts testbed: a Topology realised on real machines (a lab's, cloud VMs) reached over SSH.

An Ansible inventory says which machine plays which topology node and which of its NICs is cabled toward
which neighbour; `ccrig provision` (ansible/) has installed the tools. Per host variables:

    ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file, ansible_ssh_common_args
    ccrig_node: s1                        the topology node this host plays (default: the inventory name)
    ccrig_interfaces: {r1: enp1s0f0}      the interface toward each neighbouring node
    ccrig_interface: enp1s0f0             or: the one experiment interface used toward every neighbour
and for the whole inventory (all: vars:)
    ccrig_bottleneck: router | switch     where the bottleneck is (default router)

router mode: every node is a host. up() puts the topology's addresses (198.18.i.0/24) and routes on the mapped
  interfaces, makes them send wire-sized packets, and installs each link direction's tc on the transmitting
  host (the bottleneck on the router host's egress) exactly as the netns testbed does.
switch mode: the routers are a hardware switch, configured by the lab, not by ccrig. Only end-host settings
  are ours; the end hosts share one segment, 198.18.255.0/24. The bottleneck's rate and discipline in the spec
  are then a statement about the switch (used for T_max), not something ccrig applies; delay or loss on the
  switch's egress cannot be honoured and is refused.

Every command runs through one SSH connection per host (OpenSSH ControlMaster: the master is opened once, each
command is a multiplexed session, a few ms instead of a new handshake). Commands needing root run under
`sudo -n` unless the login user is root. Background processes are wrapped so that killing the local ssh (as the
runner kills any popen's process group) ends the remote process too, and down() kills any left by pid.
Project scripts named on a command line (the sampler) are copied to the host once and run from there.
Each host's clock offset against this machine is measured at up(), since samples carry the host's time.
down() restores every host: tc, addresses, routes, interface settings, forwarding, processes, staged files.
Before changing a host, up() writes the commands that undo it to undo.sh in the run's directory there, so
`ccrig clean -i` restores a host whose run was killed (SIGKILL, a lost controller) before its down().

    inventory.py   the inventory: hosts, their variables, which host plays which node
    ssh.py         one SSH connection per host (SshHost, a ccrig.commands.Node), checks shared with provisioning
    undo.py        what a run changed on each host and the commands that put it back (UndoJournal, undo.sh)
    clean.py       what killed runs left: SSH masters here, processes, directories and settings on the hosts
    hooks.py       what the orchestration asks beyond a topology: where laws load, the inventory's clean
    testbed.py     HostsTestbed
"""
from __future__ import annotations

from .clean import clean_host, clean_inventory, close_ssh_connections, run_dirs, run_named
from .inventory import (BOTTLENECK_MODES, EXPERIMENT_GROUPS, INVENTORY_ENV, Inventory, InventoryHost, ansible_tool,
                        inventory_path)
from .ssh import NodeConnections, SshHost, close_all, connect_all
from .testbed import HostsTestbed
from .undo import UNDO_SCRIPT, UndoJournal

TESTBED = HostsTestbed

__all__ = ["BOTTLENECK_MODES", "EXPERIMENT_GROUPS", "INVENTORY_ENV", "TESTBED", "UNDO_SCRIPT", "HostsTestbed",
           "Inventory", "InventoryHost", "NodeConnections", "SshHost", "UndoJournal", "ansible_tool", "clean_host",
           "clean_inventory", "close_all", "close_ssh_connections", "connect_all", "inventory_path", "run_dirs",
           "run_named"]
