"""Writes a family's kernel module source from its descriptor: its presets as registered variants, its
tunable instance with one writable module parameter per declared parameter (the declared range enforced by
the kernel too), its modinfo description.

    cd tcp_modules && python3 -m families.gen kmod NAME > kmod/tcp_NAME.c     (the Makefile's rule)

Standard library only, run by the system's python3 wherever the modules are built (see _family.py).
"""
from __future__ import annotations

import sys

from . import FAMILIES
from ._family import SLOT_DEFAULTS, SLOTS, Family, Param, quantize


def _c_value(kind: str, v) -> str:
    if kind == "real":
        return f"{quantize(v)}ULL"
    return str(int(v))


def _block(fam: Family, law) -> str:
    """A C initialiser of struct ccrig_params holding law's parameters in their slots."""
    slots = dict(SLOT_DEFAULTS)
    for p in fam.params:
        slots[p.slot] = p.tunable_default if law is None else getattr(law, p.name)
    body = ", ".join(f".{slot} = {_c_value(SLOTS[slot], v)}" for slot, v in slots.items())
    return f"{{ {body}, .law = {fam.code} }}"


def _range_text(p: Param) -> str:
    if p.kind == "flag":
        return "0 or 1"
    if p.kind == "int":
        return f"{p.lo:g}..{p.hi:g}"
    return f"{p.lo:g} {'<' if p.lo_open else '<='} value {'<' if p.hi_open else '<='} {p.hi:g}, decimal"


def _default_text(p: Param) -> str:
    v = p.tunable_default
    return str(int(v)) if p.kind != "real" else f"{v:g}"


def _param(fam: Family, p: Param) -> str:
    if p.kind == "real":
        setter = (f"ccrig_set_real(val, kp, {quantize(p.lo)}ULL, {quantize(p.hi)}ULL, "
                  f"{str(p.lo_open).lower()}, {str(p.hi_open).lower()})")
        get = "ccrig_param_get_q20"
    else:
        lo, hi = (0, 1) if p.kind == "flag" else (int(p.lo), int(p.hi))
        setter = f"ccrig_set_int(val, kp, {lo}, {hi})"
        get = "param_get_uint" if p.slot in ("terms", "per_ack", "halve_first") else "param_get_int"
    desc = f"{fam.tunable}: {p.doc}, {_range_text(p)} (default {_default_text(p)})".replace('"', "'")
    return (f"static int ccrig_set_{p.name}(const char *val, const struct kernel_param *kp)\n"
            f"{{\n\treturn {setter};\n}}\n\n"
            f"static const struct kernel_param_ops ccrig_{p.name}_ops = {{ .set = ccrig_set_{p.name}, "
            f".get = {get} }};\n"
            f"module_param_cb({p.name}, &ccrig_{p.name}_ops, &ccrig_live.{p.slot}, 0644);\n"
            f'MODULE_PARM_DESC({p.name}, "{desc}");\n')


def kmod_source(fam: Family) -> str:
    variants = [f'\t{{ .ops = CCRIG_OPS("{name}"), .params = {_block(fam, law)} }},'
                for name, law in fam.presets.items()]
    variants.append(f'\t{{ .ops = CCRIG_OPS("{fam.tunable}"), .params = {{ .law = {fam.code} }}, '
                    f'.live = &ccrig_live }},')
    names = ", ".join([*fam.presets, fam.tunable])
    return "\n".join([
        "// SPDX-License-Identifier: GPL-2.0",
        f"/* {fam.module}: written by tcp_modules/families/gen.py from families/{fam.name}.py; do not edit.",
        f" * The law is families/{fam.name}.h, the core ../include/ccrig_law.h. {fam.tunable}'s parameters are",
        f" * writable at runtime through /sys/module/{fam.module}/parameters/ (a connection takes the values in",
        " * force when it starts). */",
        f'#define CCRIG_LAW_FILE "../families/{fam.name}.h"',
        '#include "ccrig_kmod.h"',
        "",
        f"static struct ccrig_params ccrig_live = {_block(fam, None)};",
        "",
        *[_param(fam, p) for p in fam.params],
        "static struct ccrig_variant ccrig_variants[] = {",
        *variants,
        "};",
        "",
        "#define CCRIG_VARIANTS ccrig_variants",
        '#include "ccrig_register.h"',
        "",
        "module_init(ccrig_register);",
        "module_exit(ccrig_unregister);",
        "",
        'MODULE_AUTHOR("ccrig");',
        'MODULE_LICENSE("GPL");',
        f'MODULE_DESCRIPTION("{fam.summary}: {names}");',
        ""])


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "kmod":
        print("usage: python3 -m families.gen kmod NAME", file=sys.stderr)
        return 2
    fam = FAMILIES.get(argv[1])
    if fam is None:
        print(f"family: got {argv[1]!r}; expected one of {', '.join(FAMILIES)} (a families/NAME.py descriptor)",
              file=sys.stderr)
        return 2
    sys.stdout.write(kmod_source(fam))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
