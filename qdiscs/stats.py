"""Queue statistics: `tc -s -j qdisc show dev D` parsed into one flat dict per qdisc."""
from __future__ import annotations

import json


def parse(text: str) -> list[dict]:
    out = []
    for q in json.loads(text or "[]"):
        out.append({"kind": q.get("kind"), "handle": q.get("handle"), "parent": q.get("parent", "root" if q.get("root") else None),
                    "sent_packets": q.get("packets"), "sent_bytes": q.get("bytes"), "dropped": q.get("drops"),
                    "overlimits": q.get("overlimits"), "requeues": q.get("requeues"),
                    "backlog_packets": q.get("qlen"), "backlog_bytes": q.get("backlog")})
    return out
