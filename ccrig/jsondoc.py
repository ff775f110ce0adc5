"""`--json`: every command that prints a table can print one JSON document on stdout instead, for scripts and
notebooks. The document is strict JSON (RFC 8259): a number that is not finite (a mean of nothing) is null,
as summary.json writes it, so any parser reads it. And the other way: `values`, what a tool printed as several
JSON documents one after another (`ip -j -batch`, `bpftool -j`)."""
from __future__ import annotations

import json
import math
import sys


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(doc) -> str:
    return json.dumps(_finite(doc), indent=1, allow_nan=False, default=str)


def emit(doc, out=None) -> None:
    """Writes doc as the one JSON document of this command's stdout (out: where stdout is now, when the
    command sent everything else to stderr)."""
    stream = out or sys.stdout
    stream.write(dumps(doc) + "\n")
    stream.flush()


def values(text: str) -> list:
    """The JSON values a tool printed one after another (arrays flattened into their items), up to the first text
    that is not JSON: `ip -j -batch` prints an array per command, on a line each or run together by version;
    bpftool one array, or several."""
    out, at, decoder = [], 0, json.JSONDecoder()
    while rest := text[at:].lstrip():
        try:
            value, at = decoder.raw_decode(text, len(text) - len(rest))
        except json.JSONDecodeError:
            break
        out += value if isinstance(value, list) else [value]
    return out
