"""The PAUSE program's entry point: `python3 agent.pyz ARGS` on a host, `python -m ccrig.topologies.pause.agent
ARGS` here.

    CONFIG_JSON          the controller loop on node 2 (loop.py)
    obey CONFIG_JSON     node 1's agent, obeying the controller's rate signals (rate_signal.py)

CONFIG_JSON is an EmulatedPauseConfig as a JSON object. Every message goes to stdout as one JSON line; a
failure to start is {"error": ...} and exit status 2.
"""
from __future__ import annotations

import json
import signal
import sys

from .config import EmulatedPauseConfig
from .loop import ControllerLoop
from .rate_signal import obey
from .realtime import speed_up


def main(argv: list[str]) -> int:
    """Runs the controller loop or (argv[0] obey) node 1's agent until SIGTERM; returns the exit status."""
    out = sys.stdout
    if argv and argv[0] == "obey":
        try:
            return obey(EmulatedPauseConfig(**json.loads(argv[1])), out)
        except OSError as e:
            out.write(json.dumps({"error": str(e)}) + "\n")
            out.flush()
            return 2
    cfg = EmulatedPauseConfig(**json.loads(argv[0]))
    try:
        loop = ControllerLoop(cfg, out)
        loop.read()
    except OSError as e:
        out.write(json.dumps({"error": str(e)}) + "\n")
        out.flush()
        return 2
    if cfg.realtime:
        speed_up()

    def _stop(*_):
        loop.stop = True
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        loop.run()
    except OSError as e:
        out.write(json.dumps({"error": str(e)}) + "\n")
        return 1
    finally:
        loop.finish()
    return 0
