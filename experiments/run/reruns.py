"""Spoiled repetitions run again, and what the run keeps of the attempts it excluded.

    Reruns(archive, summary).judge(pair, record, beside) -> None | engine.ALONE | engine.AGAIN
    Reruns(archive, summary).refused(pair, why, beside) -> None | engine.AGAIN   (the path refused it)

A repetition whose numbers must not enter a verdict (analysis/samples.spoiled: its fidelity is not ok, a kernel
fault hit a flow, the collector disagrees with iperf3, ...) is moved aside in the archive, excluded, and its pair
runs again: alone when it ran beside other pairs or the machine limited it (interference is the likely cause, and
side by side it would meet it again), else as any other pair; a kernel fault beside others runs again as any pair
first (a fault is the kernel's, not the load's), alone the second time. After RERUNS reruns the last attempt is
kept as the pair's record (spoiled, so usable() leaves it out of every verdict) and its point is reported
unmeasurable with the reason. A pair the path refused (PathError) runs again as any pair, RERUNS times at most, then
fails. summary.json's `reruns` lists every excluded attempt (its folder, why, whether it ran beside others,
how it runs again, when it ran) and every pair given up on.

For the host tests, CCRIG_FORCE_INTERFERENCE=1 in the run's environment turns the fidelity verdict of every
repetition that ran beside others testbed-limited (saying it was forced), so the path from a spoiled attempt to
its rerun alone is exercised on a real run without needing this machine to be overloaded at that moment.

An excluded attempt's folder is points/NNN/excluded/[variant-]attemptK-repR: nothing that reads complete pairs
(repR/repetition.json) sees it, and it keeps everything the attempt measured. Its samples went live to Prometheus (a
reader tells the attempts apart by their times, in this list) and leave the run's sample log once the run has
closed it (drop_samples), so the log, and a backfill from it, has each repetition once.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ccrig.analysis import samples
from ccrig.experiments.run.engine import AGAIN, ALONE, named

RERUNS = 2   # a pair runs at most 1 + RERUNS times: a fault twice in a row is the point's, not bad luck
FORCE_ENV = "CCRIG_FORCE_INTERFERENCE"


def _entry(pair: tuple, attempt: int, why: str, beside: bool) -> dict:
    """An attempt's line in summary.json's reruns."""
    return {"point": pair[0], "rep": pair[1], **({"variant": pair[2]} if len(pair) == 3 else {}),
            "attempt": attempt, "spoiled": why, "beside_others": beside}


class Reruns:
    def __init__(self, archive, summary: dict, say=print, limit: int = RERUNS, name: str = ""):
        """name: the spec's, in every line said (a study runs its specs side by side; their points share numbers).
        limit: how often a spoiled pair runs again; a pair the path refused runs again RERUNS times whatever the
        limit (a study's --quick has none), as it has no record to keep: a flow of study 001's PER 0.2 contention
        whose first segment was lost five times failed a quick run in CI (2026-12-02)."""
        self.archive, self.summary, self.say, self.limit, self.name = archive, summary, say, limit, name
        self.spoiled: dict[tuple, int] = {}        # pair -> its attempts spoiled so far
        self.given_up: dict[tuple, str] = {}       # pair -> why its point is unmeasurable

    def judge(self, pair: tuple, record: dict, beside: bool, started: float | None = None) -> str | None:
        """None when the record stands (usable, or spoiled once too often: then the pair is given up on); else
        how the pair runs again, its attempt moved aside first."""
        record["ran_beside_others"] = beside
        if beside and os.environ.get(FORCE_ENV) == "1":
            fid = record.setdefault("fidelity", {"reasons": []})
            fid["verdict"] = "testbed-limited"
            fid.setdefault("reasons", []).append(f"forced ({FORCE_ENV}=1): it ran beside other pairs")
        by = samples.spoiled_by(record)
        n = self.spoiled.get(pair, 0)
        if n:
            record["attempt"] = n + 1
        if by is None:
            return None
        kind, why = by
        self.spoiled[pair] = n + 1
        entry = _entry(pair, n + 1, why, beside)
        if n >= self.limit:
            self.given_up[pair] = f"repetition {pair[1]} was spoiled in {n + 1} attempts, the last: {why}"
            self.summary.setdefault("reruns", []).append({**entry, "kept": "as the pair's record, left out of "
                                                          "every verdict (the point is unmeasurable)"})
            self.say(f"warning: {self._named(pair)} spoiled in {n + 1} attempts ({why}); "
                     f"its point is unmeasurable")
            return None
        # interference is the likely cause of a limited machine and of a collector falling behind, not of the
        # kernel's BPF fault (001 run B: faults came back in reruns alone, at handoff's 100-flow points): a fault
        # beside others runs again as any pair, and alone only if it comes back
        alone = kind == "fidelity" or (beside and (kind != "kernel_fault" or n >= 1))
        self._aside(pair, entry, record, started, alone, self.limit)
        return ALONE if alone else AGAIN

    def refused(self, pair: tuple, why: str, beside: bool, started: float | None = None) -> str | None:
        """A pair the path kept from measuring (ccrig.errors.PathError): AGAIN, as any other pair (the path
        refused it, not the machine), its attempt moved aside; None once it has been refused or spoiled
        1 + RERUNS times: then it fails, with the reason."""
        n = self.spoiled.get(pair, 0)
        if n >= RERUNS:
            return None
        self.spoiled[pair] = n + 1
        entry = _entry(pair, n + 1, f"the path refused it: {why}", beside)
        self._aside(pair, entry, {"ran_beside_others": beside}, started, alone=False, limit=RERUNS)
        return AGAIN

    def _aside(self, pair: tuple, entry: dict, record: dict, started: float | None, alone: bool, limit: int
               ) -> None:
        """The attempt moved aside and listed in summary.json's reruns, and the rerun announced (of at most
        1 + limit attempts)."""
        why = entry["spoiled"]
        folder = self._exclude(pair, record, why, entry["attempt"])
        self.summary.setdefault("reruns", []).append(
            {**entry, "excluded": str(folder.relative_to(self.archive.path)), "started_at": started,
             "excluded_at": time.time(), "rerun": "alone" if alone else "as any pair"})
        self.say(f"{self._named(pair)} spoiled ({why}); running it again"
                 f"{' alone' if alone else ''} (attempt {entry['attempt'] + 1} of at most {limit + 1})")

    def _named(self, pair: tuple) -> str:
        return named((self.name, *pair) if self.name else pair)

    def _exclude(self, pair: tuple, record: dict, why: str, attempt: int):
        """The attempt's folder moved to points/NNN/excluded/, its record written there with the reason."""
        variant = pair[2] if len(pair) == 3 else ""
        src = self.archive.rep_dir(pair[0], pair[1], variant)
        dest = self.archive.path / "points" / f"{pair[0]:03d}" / "excluded" / \
            f"{variant + '-' if variant else ''}attempt{attempt}-rep{pair[1]}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():   # a resumed run's earlier attempt of the same number
            shutil.rmtree(dest)
        if src.exists():
            src.rename(dest)
        else:   # refused before it wrote anything
            dest.mkdir()
        kept = {"rep": pair[1], **record, "excluded": why}
        (dest / "repetition.json").write_text(json.dumps(kept, indent=1, default=str) + "\n")
        return dest

    def drop_samples(self, log: Path) -> int:
        """Removes the excluded attempts' samples from the closed sample log: those labelled with the attempt's
        point and repetition, stamped between its start and its exclusion (its rerun's came later)."""
        spans = [(str(r["point"]), str(r["rep"]), r["started_at"], r["excluded_at"])
                 for r in self.summary.get("reruns", []) if r.get("started_at") and "excluded_at" in r]
        if not spans or not log.is_file():
            return 0
        keep, dropped = [], 0
        for line in log.read_text().splitlines():
            try:
                s = json.loads(line)
                labels, ts = s.get("labels", {}), float(s.get("ts", 0))
            except (ValueError, TypeError, AttributeError):
                keep.append(line)
                continue
            if any(labels.get("point") == p and labels.get("rep") == r and a <= ts <= b for p, r, a, b in spans):
                dropped += 1
            else:
                keep.append(line)
        if dropped:
            tmp = log.with_name(f".{log.name}.tmp")
            tmp.write_text("".join(f"{line}\n" for line in keep))
            tmp.rename(log)
            self.summary["excluded_samples_dropped"] = dropped
            self.archive.write_json("summary.json", self.summary)
        return dropped

    def unmeasurable(self, point: int) -> list[str]:
        """Why the point is unmeasurable: each of its pairs given up on."""
        return [why for pair, why in sorted(self.given_up.items()) if pair[0] == point]

    def mark_unmeasurable(self, point: int) -> None:
        """The point's summary entry (once summarised) says why it is unmeasurable, if it is."""
        why = self.unmeasurable(point)
        entry = next((p for p in self.summary.get("points", []) if p["index"] == point), None)
        if why and entry is not None:
            entry["unmeasurable"] = why
            self.archive.write_json("summary.json", self.summary)
