"""The local Prometheus server (Debian's `prometheus`), started once and left running between runs.

It lives in one folder (default results/prometheus): prometheus.yml, its TSDB under data/, targets/ with one
file-discovery file per running run (so runs never share a port), server.json (pid, url) and server.log.
It listens on 127.0.0.1 only. Each measurement interval gets its own scrape job (`ccrig_<interval>`) whose
scrape interval is that interval; a run adds its exporter to targets/<job>/<run>.json and removes it at the end.
A researcher who runs their own Prometheus sets CCRIG_PROMETHEUS_URL (and points its file discovery at
CCRIG_PROMETHEUS_TARGETS) instead.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.parse
import urllib.request
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import RunError

DEFAULT_PORT = 9090


def job_name(interval: float) -> str:
    ms = round(interval * 1000)
    return f"ccrig_{ms}ms"


class PrometheusServer:
    def __init__(self, root: Path, commands: Commands | None = None):
        self.root = root.resolve()
        self.commands = commands or Commands(None)

    @property
    def targets_dir(self) -> Path:
        return self.root / "targets"

    def _state(self) -> dict | None:
        try:
            state = json.loads((self.root / "server.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        try:
            os.kill(state["pid"], 0)
            cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            return None
        return state if b"prometheus" in cmdline else None

    @property
    def url(self) -> str | None:
        state = self._state()
        return state["url"] if state else None

    def _jobs(self) -> list[str]:
        return sorted(p.name for p in self.targets_dir.iterdir() if p.is_dir()) if self.targets_dir.exists() else []

    def _write_config(self) -> None:
        jobs = []
        for job in self._jobs():
            ms = int(job.removeprefix("ccrig_").removesuffix("ms"))
            jobs.append({"job_name": job, "scrape_interval": f"{ms}ms", "scrape_timeout": f"{max(ms // 2, 100)}ms",
                         "honor_timestamps": True,
                         "file_sd_configs": [{"files": [str(self.targets_dir / job / "*.json")],
                                              "refresh_interval": "1s"}]})
        config = {"global": {"scrape_interval": "15s", "evaluation_interval": "15s"}, "scrape_configs": jobs}
        # JSON is YAML; Prometheus reads it as its config
        (self.root / "prometheus.yml").write_text(json.dumps(config, indent=2) + "\n")

    def ensure(self, interval: float) -> str:
        """Starts the server if it is not running, with a scrape job for this interval; returns its URL."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.targets_dir / job_name(interval)).mkdir(parents=True, exist_ok=True)
        self._write_config()
        state = self._state()
        if state:
            os.kill(state["pid"], signal.SIGHUP)  # reload: a new interval's job may have been added
            self._wait_ready(state["url"])
            return state["url"]
        # a port found free can be taken before prometheus binds it (two runs with servers of their own starting
        # at once both find 9090 free): the one that lost the race starts again on a port the kernel picks
        error = None
        for preferred in (DEFAULT_PORT, 0, 0):
            url, proc = self._start(_free_port(preferred))
            try:
                self._wait_ready(url, proc)
                return url
            except RunError as e:
                if proc.poll() is None:   # running but not ready: not a lost race
                    raise
                error = e
        raise error

    def _start(self, port: int):
        url = f"http://127.0.0.1:{port}"
        log = open(self.root / "server.log", "a")
        argv = ["prometheus", f"--config.file={self.root / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.root / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle", "--storage.tsdb.retention.time=90d",
                "--web.enable-remote-write-receiver"]
        proc = self.commands.popen(argv, stdout=log, stderr=log)
        (self.root / "server.json").write_text(json.dumps({"pid": proc.pid, "url": url}) + "\n")
        return url, proc

    def _wait_ready(self, url: str, proc=None, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RunError(f"prometheus exited at start (code {proc.returncode}); see {self.root / 'server.log'}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RunError(f"prometheus at {url} not ready after {timeout:g} s; see {self.root / 'server.log'}")

    def add_target(self, interval: float, run: str, address: str, labels: dict) -> Path:
        path = self.targets_dir / job_name(interval) / f"{run}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": [address], "labels": labels}]) + "\n")
        tmp.rename(path)  # atomically, so discovery never reads half a file
        return path

    def stop(self) -> bool:
        state = self._state()
        if not state:
            return False
        os.kill(state["pid"], signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(state["pid"], 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        (self.root / "server.json").unlink(missing_ok=True)
        return True


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RunError("no free TCP port on 127.0.0.1 for prometheus")


def query(url: str, promql: str, time_s: float | None = None) -> list[dict]:
    """An instant query through the HTTP API; returns the result vector."""
    params = {"query": promql}
    if time_s is not None:
        params["time"] = f"{time_s:.3f}"
    return _api(url, "query", params)


def query_range(url: str, promql: str, start: float, end: float, step: float) -> list[dict]:
    return _api(url, "query_range", {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                      "step": f"{step:g}"})


def _api(url: str, endpoint: str, params: dict) -> list[dict]:
    full = f"{url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(full, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RunError(f"prometheus query failed: {body.get('error')}")
    return body["data"]["result"]
