"""Queue statistics as the kernel counts them: `tc -s -j qdisc show` and `tc -s class show`, flattened.

Every qdisc becomes one flat dict (one row of the archive's qdisc.csv):

    kind, handle, parent ("root" for a root qdisc), sent_packets, sent_bytes, dropped, overlimits, requeues,
    backlog_packets, backlog_bytes

followed by the discipline's own counters, each prefixed with its kind so columns of different disciplines
never collide (pie has its own `dropped`): red_early, fq_codel_ecn_mark, pie_prob, ... Each discipline's module
says what its own are and which of them go up and down (its class's `gauges`); every other one counts up.

tc's JSON puts these next to the common counters (iproute2 6.1). Classes (drr's per-flow classes): iproute2
before 6.2 prints `tc class show` as text only, so parse_classes reads both text and JSON; a class row has the
same common columns plus `leaf` and e.g. drr_deficit (bytes).
"""
from __future__ import annotations

import json
import re

from functools import cache

from ccrig.commands import Commands
from ccrig.errors import RunError
from . import available
from .shaper import SHAPER_GAUGES

# tc's JSON name -> ccrig's column, in the order of the archive's qdisc.csv
COMMON = {"packets": "sent_packets", "bytes": "sent_bytes", "drops": "dropped", "overlimits": "overlimits",
          "requeues": "requeues", "qlen": "backlog_packets", "backlog": "backlog_bytes"}
COLUMNS = ["kind", "handle", "parent", *COMMON.values()]
# identity and configuration, not statistics
_NOT_STATS = {"kind", "handle", "parent", "root", "refcnt", "options", "leaf", "class"}

# the common columns that go up and down (Prometheus gauges)
COMMON_GAUGES = frozenset({"backlog_packets", "backlog_bytes"})


@cache
def gauges() -> frozenset[str]:
    """Every column that goes up and down: the common ones, the shaper's and each discipline's own (as
    <kind>_<name>); every other numeric column only counts up."""
    own = {f"{kind}_{name}" for kind, cls in available().items() for name in cls.gauges}
    return COMMON_GAUGES | SHAPER_GAUGES | own


def is_counter(column: str) -> bool:
    return column not in gauges() and column not in ("kind", "handle", "parent", "leaf")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _row(obj: dict, kind: str) -> dict:
    row = {"kind": kind, "handle": obj.get("handle", ""),
           "parent": "root" if obj.get("root") else obj.get("parent", "")}
    for name, column in COMMON.items():
        row[column] = obj.get(name, 0)
    for name, value in obj.items():
        if name not in COMMON and name not in _NOT_STATS and _number(value):
            row[f"{kind}_{name}"] = value
    return row


def parse(json_text: str) -> list[dict]:
    """`tc -s -j qdisc show dev D` -> one flat dict per qdisc, in tc's order."""
    if not json_text.strip():
        return []
    try:
        data = json.loads(json_text)
    except json.JSONDecodeError as e:
        raise RunError(f"tc -s -j qdisc show: output is not JSON ({e}): {json_text[:80]!r}") from None
    return [_row(q, q["kind"]) for q in data]


_HEADER = re.compile(r"^class (?P<kind>\S+) (?P<handle>\S+) (?:parent (?P<parent>\S+)|root)"
                     r"(?: leaf (?P<leaf>\S+))?")
_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) requeues (\d+)\)")
_BACKLOG = re.compile(r"backlog (\d+(?:\.\d+)?)(b|Kb|Mb|Gb)? (\d+)p")
_PAIR = re.compile(r"([a-z_]+):? (-?\d+(?:\.\d+)?)(b|Kb|Mb|Gb)?(?=\s|$)")
_SCALE = {None: 1, "b": 1, "Kb": 1024, "Mb": 1024 ** 2, "Gb": 1024 ** 3}


def _size(num: str, unit: str | None) -> int:
    return int(round(float(num) * _SCALE[unit]))


def parse_classes(text: str) -> list[dict]:
    """`tc -s class show dev D` (text, or JSON from newer iproute2) -> one flat dict per class."""
    if text.lstrip().startswith("["):
        rows = []
        for c in json.loads(text):
            kind = c.get("class") or c.get("kind", "")
            row = _row(c, kind)
            row["leaf"] = c.get("leaf", "")
            rows.append(row)
        return rows
    rows: list[dict] = []
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            # tc says "root" for a class hanging directly off its qdisc: name that qdisc instead
            rows.append({"kind": m["kind"], "handle": m["handle"],
                         "parent": m["parent"] or m["handle"].split(":")[0] + ":", "leaf": m["leaf"] or "",
                         **{c: 0 for c in COMMON.values()}})
            continue
        if not rows or not line.strip():
            continue
        row = rows[-1]
        if (s := _SENT.search(line)):
            row.update(sent_bytes=int(s[1]), sent_packets=int(s[2]), dropped=int(s[3]),
                       overlimits=int(s[4]), requeues=int(s[5]))
        elif (b := _BACKLOG.search(line)):
            row.update(backlog_bytes=_size(b[1], b[2]), backlog_packets=int(b[3]))
        else:
            # the class's own statistics, e.g. drr "deficit 0b", htb "lended: 12 borrowed: 0 ..."
            for name, num, unit in _PAIR.findall(line):
                value = _size(num, unit) if unit else (float(num) if "." in num else int(num))
                row[f"{row['kind']}_{name}"] = value
    return rows


def read(commands: Commands, ns: str | None, dev: str) -> list[dict]:
    """The qdiscs on dev in namespace ns (None: the current one), now."""
    return parse(commands.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], ns=ns).stdout)


def read_classes(commands: Commands, ns: str | None, dev: str, parent: str | None = None) -> list[dict]:
    """The classes on dev (under parent, e.g. drr's "10:", when given), now."""
    argv = ["tc", "-s", "class", "show", "dev", dev]
    if parent is not None:
        argv += ["parent", parent]
    return parse_classes(commands.run(argv, ns=ns).stdout)
