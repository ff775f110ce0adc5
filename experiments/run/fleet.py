"""The fleet: a run's (point, repetition) pairs dealt to the members of an Ansible inventory (`--fleet INVENTORY`).

    fleet = Fleet(inventory, prefix, commands)
    fleet.check(raw)       before anything runs (ansible/fleet_check.yml): every member of the group `fleet`
                           reachable, on the same kernel release with the same laws' sources as the others, and
                           able to run the spec on its own kernel (`ccrig preflight` there); else InputError
                           naming each host and what it lacks or how it differs
    fleet.deal(pairs, archive, finished, lent, ...)
                           each member takes a batch of pairs in the run's order (as many as it runs at once,
                           more while the line is long; a pair that must run alone, alone) and runs it as a run
                           of its own (`ccrig run --pairs`: ansible/fleet_pairs.yml); its folders come back into
                           the run's archive, each with member.json (the member, its kernel and env), and each
                           pair is judged by the run's finished() as if it had run here

Ansible is the engine: one ansible-playbook per batch, limited to its member, its run an async job polled over
SSH. A member that becomes unreachable is lost: its batch goes back to the front of the line for the others, and
summary.json's fleet.lost says which member and when (the controller's clock: a member's is never used for
ordering). Ctrl-C or SIGTERM stops every member's batch (ansible/fleet_stop.yml: its run is sent SIGTERM and tears
itself down, `ccrig clean --prefix` removes anything left, its scratch folder goes).
"""
from __future__ import annotations

import json
import math
import os
import queue
import shutil
import socket
import tarfile
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import yaml

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.experiments.provision.playbooks import ANSIBLE_DIR, Inventory, play   # Ansible's view of the hosts
from ccrig.experiments.run import signals
from ccrig.experiments.run.engine import ALONE
from ccrig.experiments.run.members import disagreements
from ccrig.experiments.telemetry.backfill import LOG_NAME, read_samples
from ccrig.threads import Thread

GROUP = "fleet"          # the inventory group whose hosts are members
FLEET_ENV = "CCRIG_FLEET"   # the inventory `--fleet` names, for every run of the process (a study's specs)
MEMBERS_ENV = "CCRIG_FLEET_MEMBERS"   # only these members (comma-separated): a study --by-kernel's group
MEMBER_RECORD = "member.json"
# a batch's async job runs at most this long per pair beyond its own duration (set up, laws, reruns on the member)
PAIR_SLACK_S = 300
MAX_BATCH = 4   # pairs per batch at most beyond a member's slots (a lost member's batch is run again whole)
HEARTBEAT_S, HEARTBEAT_MISSES = 5.0, 3   # a member whose SSH port stays silent this long while it runs is lost


def _now() -> str:
    """The controller's clock, ISO 8601 (a member's is never used)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def use_fleet(fleet: Path | None) -> None:
    """--fleet: the inventory every run of this process deals its pairs to (a study's specs too)."""
    if fleet is None:
        return
    if not fleet.exists():
        raise InputError(f"--fleet: got {str(fleet)!r}; expected an Ansible inventory with a group {GROUP!r} "
                         f"(see ansible/inventories/fleet.example.yml)")
    os.environ[FLEET_ENV] = str(fleet.resolve())


def pair_arg(pairs: list[tuple]) -> str:
    """Pairs as `ccrig run --pairs` takes them: P:R[:variant],..."""
    return ",".join(":".join(str(x) for x in p) for p in pairs)


def parse_pairs(value: str) -> list[tuple]:
    """--pairs: P:R[:variant],... (a fleet member's share of a run)."""
    out = []
    for part in value.split(","):
        bits = part.split(":")
        if len(bits) not in (2, 3) or not bits[0].isdigit() or not bits[1].isdigit():
            raise InputError(f"--pairs: got {part!r}; expected POINT:REPETITION[:VARIANT], comma-separated")
        out.append((int(bits[0]), int(bits[1]), *bits[2:]))
    return out


_ANSWERED: set[tuple[Path, str]] = set()   # (inventory, member) that answered a check of this process


class Member:
    def __init__(self, name: str, index: int, prefix: str, jobs: str, address: tuple[str, int]):
        self.name, self.index, self.jobs, self.address = name, index, jobs, address
        self.prefix = f"{prefix}-m{index}"           # every name its runs make
        self.work = f"/tmp/{self.prefix}"             # its scratch folder (on the member)
        self.facts: dict = {}
        self.proc = None                              # the ansible-playbook now driving it
        self.batches = 0
        self.silent: str | None = None                # why its heartbeat stopped, while a batch ran

    def heartbeat(self, done: threading.Event) -> None:
        """Until done is set: whether its SSH port answers, every HEARTBEAT_S. Ansible retries an async job's
        poll through connection errors until the job's timeout (a host may be rebooting), so a member powered off
        mid-batch is seen here: after HEARTBEAT_MISSES in a row it is lost and its ansible-playbook stopped."""
        missed = 0
        while not done.wait(HEARTBEAT_S):
            try:
                socket.create_connection(self.address, timeout=HEARTBEAT_S).close()
                missed = 0
            except OSError as e:
                missed += 1
                if missed >= HEARTBEAT_MISSES:
                    self.silent = f"unreachable: its SSH port {self.address[0]}:{self.address[1]} did not answer " \
                                  f"{missed} times in {missed * HEARTBEAT_S:.0f} s ({e.strerror or e})"
                    if self.proc is not None and self.proc.poll() is None:
                        self.proc.terminate()
                    return

    def slots(self) -> int:
        """Pairs it may run at once: its ccrig_jobs, or (auto) its CPUs."""
        return int(self.jobs) if self.jobs.isdigit() else int(self.facts.get("cpus", 1))


class Fleet:
    def __init__(self, inventory: Path, prefix: str, commands: Commands, echo=lambda line: None):
        inv = Inventory.load(Path(inventory), commands, "--fleet")
        names = [n for n in inv.groups.get(GROUP, []) if not inv.hosts[n].local]
        if os.environ.get(MEMBERS_ENV):   # --by-kernel: one kernel's members at a time
            names = [n for n in names if n in os.environ[MEMBERS_ENV].split(",")]
        if not names:
            raise InputError(f"--fleet: {inventory}: no members; expected hosts in the group {GROUP!r} (see "
                             f"ansible/inventories/fleet.example.yml)")
        self.inventory, self.commands, self.echo = Path(inventory).resolve(), commands, echo
        self.members = {n: Member(n, i, prefix, str(inv.hosts[n].vars.get("ccrig_jobs", "auto")),
                                  (inv.hosts[n].address, inv.hosts[n].port)) for i, n in enumerate(sorted(names))}
        self.lost: list[dict] = []
        self.prefix = prefix
        self.scratch = Path(tempfile.gettempdir())   # deal()'s own folder while it runs
        self._stop = threading.Event()

    # --- before anything runs ----------------------------------------------------------------------------
    def check(self, raw: dict | None, agree: bool = True) -> None:
        """Each member's facts, and (raw: a spec) whether it can run the spec; InputError naming every member that
        cannot answer or lacks a need, and (agree) any fact the members differ in. A member that answered an
        earlier check of this process (a study's first spec) and is unreachable now is lost, not refused, while
        another answers: a study goes on without it."""
        with tempfile.NamedTemporaryFile("w", prefix=f"{self.prefix}-spec-", suffix=".yaml") as spec:
            spec.write(yaml.safe_dump(raw or {}, sort_keys=False))
            spec.flush()
            # a refused or dropped connection is tried twice more (sshd drops beyond MaxStartups, 10 by default):
            # the check changes nothing but a scratch folder; a host that is down is unreachable 1 s later
            result, code, stderr = self._play("fleet_check.yml", list(self.members), {
                "work": f"/tmp/{self.prefix}-check", "ansible_ssh_retries": 2,
                **({"spec": spec.name} if raw is not None else {})})
        problems = [f"host {h}: " + (f"no ccrig to run ({m}); install it there (a checkout and `make deps`) and "
                                     f"name it in the inventory's ccrig_command" if t == "Member facts" and
                                     not m.startswith("unreachable") else m) for h, t, m in result.failures]
        for name, m in self.members.items():
            out = result.outputs.get((name, "Member facts"))
            pre = result.outputs.get((name, "Spec preflight"), {})
            if out is None:
                if not any(p.startswith(f"host {name}:") for p in problems):
                    problems.append(f"host {name}: no answer (ansible-playbook exited {code}: "
                                    f"{stderr.strip().splitlines()[-1:] or 'no message'})")
                continue
            m.facts = json.loads(out["stdout"])
            _ANSWERED.add((self.inventory, name))
            if pre.get("rc"):
                lines = [ln for ln in (pre.get("stderr") or pre.get("stdout") or "").splitlines() if ln.strip()]
                problems.append(f"host {name} ({m.facts['kernel']}): {lines[-1] if lines else 'preflight failed'}")
        gone = [n for n in self.members if f"host {n}: unreachable" in " ".join(problems)
                and (self.inventory, n) in _ANSWERED]
        if gone and len(gone) < len(self.members) and len(problems) == len(gone):
            for n in gone:
                self.lost.append({"member": n, "at": _now(), "why": "unreachable "
                                  "before the run", "pairs_dealt_again": []})
                print(f"warning: fleet member {n} is unreachable; this run goes on without it")
                del self.members[n]
            problems = []
        if problems:
            raise InputError("--fleet: " + "; ".join(problems))
        problems = disagreements({n: m.facts for n, m in self.members.items()}) if agree else []
        if problems:
            raise InputError("--fleet: the members must agree (or run the study --by-kernel): " + "; ".join(problems))

    @property
    def kernel(self) -> str:
        return next(iter(self.members.values())).facts.get("kernel", "")

    def describe(self) -> dict:
        """summary.json's `fleet`: the inventory, each member's facts, and the members lost (when, why)."""
        return {"inventory": str(self.inventory), "members": {n: m.facts for n, m in self.members.items()},
                "lost": self.lost}

    # --- the run's pairs ----------------------------------------------------------------------------------
    def deal(self, pairs: list[tuple], archive, finished, lent, run_id: str, raw: dict, duration: float,
             stop=lambda: False) -> None:
        """Runs the pairs on the members; finished(pair, record, error, beside) as each batch comes back (may
        answer to run the pair again); the members' samples to lent.publish, Ansible's commands to the run's log.
        Once stop() (a study's --budget ended) no batch is dealt and the ones out come back; the pairs left are
        the caller's (runner.cut_short). Raises signals.Interrupted once every member's batch is stopped, RunError
        when every member is lost."""
        self.commands, publish = lent.commands, lent.publish
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-fleet-"))
        spec = self.scratch / "spec.yaml"
        spec.write_text(yaml.safe_dump(raw, sort_keys=False))
        waiting = deque((p, False) for p in pairs)
        done: queue.Queue = queue.Queue()
        busy: dict[str, Thread] = {}
        try:
            while waiting or busy:
                if waiting and stop():
                    waiting.clear()
                for m in self.members.values():
                    if waiting and m.name not in busy and m.name not in {x["member"] for x in self.lost}:
                        batch, alone = self._take(waiting, m)
                        busy[m.name] = Thread(self._batch, (m, batch, alone, spec, duration, done),
                                              name=f"fleet-{m.name}")
                if not busy and not waiting:
                    break
                if not busy:
                    raise RunError("--fleet: every member was lost (" + "; ".join(
                        f"{x['member']} at {x['at']}: {x['why']}" for x in self.lost) + f"); {len(waiting)} "
                        f"pair(s) not run")
                try:
                    m, batch, alone, outcome, detail = done.get(timeout=0.5)
                except queue.Empty:
                    continue
                busy.pop(m.name).join()
                if outcome == "lost":
                    self.lost.append({"member": m.name, "at": _now(), "why": detail,
                                      "pairs_dealt_again": [list(p) for p in batch]})
                    print(f"warning: fleet member {m.name} lost ({detail}); its {len(batch)} pair(s) go to the others")
                    waiting.extendleft((p, alone) for p in reversed(batch))
                elif outcome == "failed":
                    for p in batch:
                        finished(p, None, RunError(f"on {m.name}: {detail}"), False)
                else:
                    self._collect(m, batch, Path(detail), archive, finished, publish, run_id, waiting)
        except signals.Interrupted:
            self._stop.set()
            with signals.deferred(lambda: f"the fleet's batches on {', '.join(busy)}"):
                self._halt(busy)
            raise
        except BaseException:
            self._stop.set()
            self._halt(busy)
            raise
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _take(self, waiting: deque, m: Member) -> tuple[list[tuple], bool]:
        """The next batch for member m: the first pair alone if it must be, else the next pairs that need not."""
        pair, alone = waiting.popleft()
        if alone:
            return [pair], True
        # a batch costs one ansible-playbook and one `ccrig run` start (measured here: 4.5 s a batch), so a member
        # takes more than its slots while the line is long, up to MAX_BATCH, leaving every member two turns
        live = len(self.members) - len(self.lost)
        size = max(m.slots(), min(MAX_BATCH, math.ceil((len(waiting) + 1) / (2 * max(1, live)))))
        batch = [pair]
        for item in list(waiting):
            if len(batch) >= size:
                break
            if not item[1]:
                waiting.remove(item)
                batch.append(item[0])
        return batch, False

    def _batch(self, m: Member, batch: list[tuple], alone: bool, spec: Path, duration: float,
               done: queue.Queue) -> None:
        """One batch on member m (a thread of its own): ("done", the fetched tarball), ("lost", why) when the
        member cannot be reached, ("failed", why) when its run could not start or ended without a record."""
        m.batches += 1
        fetched = self.scratch / f"{m.name}-{m.batches}.tgz"
        extra = {"spec": str(spec), "work": m.work, "prefix": m.prefix, "pairs": pair_arg(batch),
                 "jobs": "1" if alone else m.jobs, "fetched": str(fetched),
                 "timeout": int(len(batch) * (duration + PAIR_SLACK_S))}
        ended, m.silent = threading.Event(), None
        threading.Thread(target=m.heartbeat, args=(ended,), daemon=True, name=f"fleet-{m.name}-heartbeat").start()
        try:
            result, code, stderr = self._play("fleet_pairs.yml", [m.name], extra, m)
        except Exception as e:  # noqa: BLE001 - the thread's outcome is a message
            done.put((m, batch, alone, "failed", f"ansible-playbook: {e}"))
            return
        finally:
            ended.set()
        unreachable = [msg for h, _, msg in result.failures if msg.startswith("unreachable")]
        if self._stop.is_set():
            outcome = ("failed", "stopped")
        elif m.silent:
            outcome = ("lost", m.silent)
        elif unreachable or (not result.hosts.get(m.name) and code != 0):
            outcome = ("lost", unreachable[0] if unreachable else f"ansible-playbook exited {code}: "
                       f"{(stderr.strip().splitlines() or ['no message'])[-1]}")
        elif result.failures:
            outcome = ("failed", "; ".join(f"task {t!r}: {msg}" for _, t, msg in result.failures))
        elif not fetched.is_file():
            outcome = ("failed", f"nothing came back (ansible-playbook exited {code})")
        else:
            outcome = ("done", str(fetched))
        done.put((m, batch, alone, *outcome))

    def _collect(self, m: Member, batch: list[tuple], tarball: Path, archive, finished, publish, run_id: str,
                 waiting: deque) -> None:
        """A batch's folders into the run's archive, each pair judged by finished() as if it had run here."""
        into = tarball.with_suffix("")
        with tarfile.open(tarball) as tar:
            # the member's own files only (this Python's tarfile predates extraction filters)
            bad = [t.name for t in tar.getmembers() if t.name.startswith("/") or ".." in Path(t.name).parts
                   or not (t.isfile() or t.isdir())]
            if bad:
                raise RunError(f"fleet member {m.name} sent back files outside its run: {', '.join(bad[:3])}")
            tar.extractall(into)
        runs = [d for d in into.iterdir() if (d / "summary.json").is_file()]
        sub = runs[0] if runs else into
        summary = json.loads((sub / "summary.json").read_text()) if runs else {}
        env = json.loads((sub / "env.json").read_text()) if (sub / "env.json").is_file() else {}
        reasons = {(p["index"], f["rep"], f.get("variant", "")): f["failed"] for p in summary.get("points", [])
                   for f in p.get("failed_repetitions", [])}
        samples = read_samples(sub / LOG_NAME) if (sub / LOG_NAME).is_file() else []
        for pair in batch:
            pi, rep, variant = (*pair, "")[:3]
            theirs = sub / "points" / f"{pi:03d}" / variant / f"rep{rep}"
            record = theirs / "repetition.json"
            if not record.is_file():
                why = reasons.get((pi, rep, variant), "no record came back")
                finished(pair, None, RunError(f"on {m.name}: {why}"), False)
                continue
            entry = json.loads(record.read_text())
            record.unlink()   # the run writes it once it has judged the pair (the pair's completion)
            ours = archive.rep_dir(pi, rep, variant)
            shutil.rmtree(ours)
            shutil.copytree(theirs, ours)
            (ours / MEMBER_RECORD).write_text(json.dumps({"member": m.name, "facts": m.facts, "env": env,
                                                          "run": sub.name}, indent=1, default=str) + "\n")
            mine = [s for s in samples if (s.labels.get("point"), s.labels.get("rep")) == (str(pi), str(rep))]
            for s in mine:
                s.labels["run"] = run_id
            if mine:
                publish(mine)
            how = finished(pair, entry, None, bool(entry.get("ran_beside_others")))   # beside its batch's others
            if how:
                if how == ALONE:
                    waiting.append((pair, True))
                else:
                    waiting.appendleft((pair, False))
        shutil.rmtree(into, ignore_errors=True)
        tarball.unlink(missing_ok=True)

    def _halt(self, busy: dict) -> None:
        """Every member's batch stopped and removed (their drivers first, then one fleet_stop.yml play on them all)."""
        for m in self.members.values():
            if m.proc is not None and m.proc.poll() is None:
                m.proc.terminate()
        for t in busy.values():
            t.join(60)
        stops = {m.name: {"prefix": m.prefix, "work": m.work} for m in self.members.values()
                 if m.batches and m.name not in {x["member"] for x in self.lost}}
        if stops:   # one play: every member at once
            for h, t, msg in self._play("fleet_stop.yml", list(stops), {"stops": stops})[0].failures:
                print(f"warning: fleet member {h}: could not stop its batch ({t}: {msg}); run `ccrig clean "
                      f"--prefix {stops.get(h, {}).get('prefix', '?')}` there")

    def _play(self, book: str, limit: list[str], extra: dict, member: Member | None = None):
        """ansible-playbook ansible/BOOK on the members named, with extra variables (a file: values stay
        values)."""
        with tempfile.NamedTemporaryFile("w", prefix=f"{self.prefix}-vars-", suffix=".json") as vars_file:
            json.dump(extra, vars_file)
            vars_file.flush()
            return play(self.inventory, ANSIBLE_DIR / book, self.commands, self.echo,
                        ["-l", ",".join(limit), "-e", f"@{vars_file.name}"],
                        started=lambda proc: setattr(member, "proc", proc) if member is not None else None)
