"""`ccrig cc`: the congestion controls the kernel offers, and loading or unloading a law's variant.

    ccrig cc list
    ccrig cc load ab_smooth                                   # prints the kernel name to use (iperf3 -C NAME)
    ccrig cc load '{law: poly, k: 1, l: 1, terms: 2}' --prefer bpf
    ccrig cc unload cra_1a2b_3c4d5e        # a generated name, a module preset name, or --all
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
import yaml

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from . import laws
from .bpf import NAME_RE, generated_name, struct_ops_maps, unregister_id
from .kmod import MODULE, PARAM_INSTANCE, rmmod
from .leftovers import cleanup
from .manager import PREFERS, CcManager
from .spec import cc_key, law_of, parse_cc
from .systems import STATE_DIR, LocalSystem, available, module_loaded

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Congestion-control laws: list what the kernel offers, load or unload a variant.")
CLI_PREFIX = "ccrig-cli"


def _parse_arg(text: str, what: str = "CC"):
    """A name, or a YAML/JSON mapping such as '{law: alphabeta, alpha: 1, beta: 0.5}'."""
    t = text.strip()
    if t.startswith("{"):
        try:
            value = yaml.safe_load(t)
        except yaml.YAMLError:
            raise InputError(f"{what}: got {text!r}; expected a name or a mapping such as "
                             "'{law: alphabeta, alpha: 1, beta: 0.5}'") from None
    else:
        value = t
    return parse_cc(value, what)


def _records() -> dict[str, dict]:
    out = {}
    if STATE_DIR.exists():
        for f in STATE_DIR.glob("*.json"):
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if "kernel_name" in d:
                out[d["kernel_name"]] = d
    return out


def _module_presets() -> dict[str, tuple[str, laws.Law | None]]:
    out = {}
    for name, law in laws.PRESETS.items():
        out[name] = (MODULE[law.law], law)
    for law_name, inst in PARAM_INSTANCE.items():
        out[inst] = (MODULE[law_name], None)
    return out


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")):
    """What the kernel offers now (with the form and parameters of ccrig's variants), then the presets."""
    recs, mods = _records(), _module_presets()
    rows = []
    for name in available():
        if name in recs:
            r = recs[name]
            rows.append({"name": name, "form": "bpf", "key": r.get("key"), "parameters": r.get("parameters"),
                         "prefix": r.get("prefix")})
        elif NAME_RE.match(name):
            rows.append({"name": name, "form": "bpf", "key": None, "parameters": None, "prefix": None})
        elif name in mods:
            module, law = mods[name]
            params = law.params() if law else _live_params(module)
            rows.append({"name": name, "form": "kmod", "key": name, "parameters": params, "module": module})
        else:
            rows.append({"name": name, "form": "builtin", "key": name, "parameters": None})
    presets = {n: law.params() for n, law in laws.PRESETS.items()}
    if as_json:
        typer.echo(json.dumps({"available": rows, "presets": presets}, indent=1))
        return
    typer.echo(f"{'name':16} {'form':8} parameters")
    for r in rows:
        p = r.get("parameters")
        typer.echo(f"{r['name']:16} {r['form']:8} {_fmt(p) if p else ''}")
    typer.echo("\npresets (ccrig cc load NAME, or cc: NAME in a spec):")
    for n, p in presets.items():
        typer.echo(f"  {n:14} {_fmt(p)}")


def _fmt(p: dict) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in p.items())


def _live_params(module: str) -> dict | None:
    pdir = Path("/sys/module") / module / "parameters"
    if not pdir.exists():
        return None
    return {f.name: f.read_text().strip() for f in sorted(pdir.iterdir())}


@app.command()
def load(cc: str = typer.Argument(..., help="a preset name or a mapping, e.g. '{law: alphabeta, beta: 0.875, "
                                             "friendly: true}'"),
         prefer: str = typer.Option("auto", help="auto (kernel module where possible, BPF otherwise), kmod or bpf"),
         prefix: str = typer.Option(CLI_PREFIX, help="name prefix whose tag goes into generated BPF names")):
    """Load a law's variant and print the kernel name to give iperf3 -C or a spec. It stays until unloaded."""
    value = _parse_arg(cc)
    if prefer not in PREFERS:
        raise InputError(f"--prefer: got {prefer!r}; expected one of {', '.join(PREFERS)}")
    m = CcManager(Commands(None), prefix, prefer)
    names = m.prepare([value])
    item = m.describe()[0]
    typer.echo(f"{names[cc_key(value)]}\t{item['form']}\t{cc_key(value)}")


@app.command()
def unload(names: List[str] = typer.Argument(None, help="kernel names (generated BPF names, module presets) or "
                                                         "the cc values they were loaded from"),
           all_: bool = typer.Option(False, "--all", help="remove every variant ccrig loaded (with --prefix: that "
                                                          "prefix's only)"),
           prefix: Optional[str] = typer.Option(None, help="prefix the variants were loaded under "
                                                          f"(default for cc values: {CLI_PREFIX})")):
    """Remove variants: BPF ones are unregistered, module presets remove their module."""
    system = LocalSystem()
    if all_:
        for line in cleanup(system, prefix) or ["nothing to unload"]:
            typer.echo(line)
        return
    if not names:
        raise InputError("NAMES: got nothing; expected one or more names, or --all")
    mods = _module_presets()
    maps = struct_ops_maps(system)
    for text in names:
        name = text.strip()
        if not NAME_RE.match(name) and name not in mods and name not in MODULE.values():
            value = _parse_arg(text, "NAMES")
            law = law_of(value)
            if law is None:
                raise InputError(f"NAMES: got {text!r}; expected a ccrig variant (cr…_…_… names, module presets "
                                 f"{', '.join(mods)}) or a cc value loaded with `ccrig cc load`")
            name = generated_name(prefix or CLI_PREFIX, law)
        if NAME_RE.match(name):
            ids = [i for i, n in maps if n == name]
            if not ids:
                raise RunError(f"{text}: no registered BPF congestion control {name}")
            for i in ids:
                if not unregister_id(system, i):
                    raise RunError(f"{name}: bpftool could not unregister map id {i}")
            for p in STATE_DIR.glob(f"{name}.*"):
                p.unlink(missing_ok=True)
            typer.echo(f"unregistered {name}")
        else:
            module = mods[name][0] if name in mods else name
            if not module_loaded(module):
                raise RunError(f"{text}: module {module} is not loaded")
            if not rmmod(system, module):
                raise RunError(f"{text}: module {module} is still in use; close its connections and retry")
            (STATE_DIR / f"kmod-{module}.json").unlink(missing_ok=True)
            typer.echo(f"removed module {module}")
