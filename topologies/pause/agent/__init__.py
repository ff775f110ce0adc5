"""The PAUSE program that runs beside the links: the controller loop on node 2 (loop.py), watching its queue and
acting on node 1's link B, and node 1's agent (rate_signal.obey) where node 1 is another machine.

    node 1 ──tbf μ1 / μ2 ─▶ node 2 ──(htb ν, pfifo B2)─▶ ...
      ▲                        │
      └─── change_tbf ◀── controller ◀── qlen of B2 (RTM_GETQDISC)

Everything in this folder uses the standard library only (and ccrig/errors.py): the hosts have no ccrig
installed, so the runner ships this folder as one zip (topologies/pause/emulated.agent_zip) and runs it as
`python3 agent.pyz ARGS`; on this machine it runs as `python -m ccrig.topologies.pause.agent ARGS` (main.py).
The runner's side, which starts, reads and stops it, is topologies/pause/emulated.py.
"""
