"""A law family is declared once: every reader (the spec, the BPF loader, the kernel-module loader and its
generated source, the Makefile, the vectors, `ccrig cc list`) finds every family from its descriptor alone, and a
new family is three files (tests/support/newfamily.py adds one in a copy of tcp_modules)."""
import dataclasses
import re
import subprocess

import pytest

from ccrig.errors import InputError
from ccrig.tcp_modules import bpf, bpfobj, cli, kmod, spec
from ccrig.tcp_modules.families import FAMILIES, PRESETS
from ccrig.tcp_modules.families._family import Family, param
from ccrig.tcp_modules.families.gen import kmod_source
from support import harness, newfamily

TCP_MODULES = newfamily.TCP_MODULES


def make_dry(root, *targets) -> str:
    """What make would run for targets (-n -B: nothing is built, everything is listed)."""
    return subprocess.run(["make", "-n", "-B", "-C", str(root), *targets], capture_output=True, text=True,
                          check=True, timeout=60).stdout


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_reader_finds_every_family(name):
    fam = FAMILIES[name]
    # the spec: every preset by name, and its parameters as a mapping, which the family's preset then serves
    for preset, law in fam.presets.items():
        assert spec.law_of(preset) == law and PRESETS[preset] == law
        mapping = {k: v for k, v in law.params().items()}
        assert spec.parse_cc(mapping) == law and spec.preset_of(spec.law_of(mapping)) == preset
        assert spec.cc_key(mapping).startswith(f"{name}(")
    assert name in spec.ACCEPTED and all(p.name in spec.ACCEPTED for p in fam.params)
    # the loaders: the BPF object and its generated names, the module, its tunable instance and parameters
    assert bpfobj.OBJECT[name] == fam.bpf_object and bpfobj.LAW_CODE[name] == fam.code
    law = next(iter(fam.presets.values()))
    assert bpfobj.PARAMS.unpack(bpfobj.pack_params(law))[7] == fam.code
    assert bpf.NAME_RE.match(bpf.generated_name("cclw-1", law)).group(1) == fam.letter
    assert (kmod.MODULE[name], kmod.PARAM_INSTANCE[name]) == (fam.module, fam.tunable)
    assert kmod.MODULE_PARAMS[name] == tuple(p.name for p in fam.params)
    assert cli._module_presets()[fam.tunable] == (fam.module, None)
    # the module's source, from the descriptor: every preset, the tunable instance, each parameter writable
    src = kmod_source(fam)
    assert all(f'CCRIG_OPS("{n}")' in src for n in [*fam.presets, fam.tunable])
    assert {m for m in re.findall(r"module_param_cb\((\w+),", src)} == {p.name for p in fam.params}
    assert f'#define CCRIG_LAW_FILE "../families/{name}.h"' in src
    # the build: one BPF object, one harness and one module source per family; the vectors beside it
    dry = make_dry(TCP_MODULES, "bpf", "harness", "sources")
    assert f'-DCCRIG_LAW_FILE="../families/{name}.h"' in dry and f"tcp_{name}.bpf.o" in dry
    assert f"cc_harness_{name}" in dry and f"families.gen kmod {name} > kmod/tcp_{name}.c" in dry
    assert fam.c_file.exists() and fam.vectors.exists() and fam.problems() == []


def test_a_new_family_is_three_files(tmp_path):
    """lin (additive increase, additive decrease) added to a copy of tcp_modules as descriptor, C law and
    vectors: the copy's readers all take it, its harness passes its vectors, its module source has its presets."""
    root = newfamily.copy_with_family(tmp_path)
    vectors = newfamily.write_vectors(root)
    added = sorted(p.relative_to(root).as_posix() for p in (root / "families").iterdir()
                   if p.name.startswith("lin"))
    assert added == ["families/lin.h", "families/lin.py", "families/lin.vectors.json"]
    families, cspec = newfamily.load(root, "families"), newfamily.load(root, "spec")
    assert list(families.FAMILIES) == sorted([*FAMILIES, "lin"]) and "lin" not in FAMILIES
    lin = families.FAMILIES["lin"]
    # the spec: presets, a mapping with its defaults, canonical keys, and its own bounds in the errors
    assert cspec.law_of("lin_three") == lin.presets["lin_three"]
    law = cspec.parse_cc({"law": "lin", "alpha": 2, "beta": 3})
    assert cspec.preset_of(law) == "lin_three" and cspec.cc_key(law) == "lin(alpha=2,beta=3)"
    assert cspec.cc_key({"law": "lin", "halve_first": True}) == "lin(alpha=1,beta=1,halve_first)"
    with pytest.raises(InputError, match=r"^cc\.beta: got 150; expected a number > 0 \(at least 2\^-20\) and at "
                                         r"most 100 \(segments removed on a loss\)$"):
        cspec.parse_cc({"law": "lin", "beta": 150})
    with pytest.raises(InputError, match=r"its fields are law, alpha, beta, halve_first$"):
        cspec.parse_cc({"law": "lin", "k": 1})
    # the loaders
    cbpf, cbpfobj, ckmod = (newfamily.load(root, m) for m in ("bpf", "bpfobj", "kmod"))
    assert cbpf.generated_name("cclw-1", law).startswith("crl_") and cbpfobj.OBJECT["lin"] == "tcp_lin.bpf.o"
    assert cbpfobj.PARAMS.unpack(cbpfobj.pack_params(law))[1:] == (2 << 20, 3 << 20, 0, 1, 1, 0, 4, 0)
    assert (ckmod.MODULE["lin"], ckmod.PARAM_INSTANCE["lin"]) == ("tcp_lin", "lin_param")
    # the build: make finds it, writes its module's source, and its C law passes its vectors
    subprocess.run(["make", "-s", "-C", str(root), "harness", "sources"], check=True, timeout=300,
                   capture_output=True)
    src = (root / "kmod" / "tcp_lin.c").read_text()
    assert 'CCRIG_OPS("lin_three"), .params = { .alpha = 2097152ULL, .beta = 3145728ULL' in src
    assert "AIAD congestion control: lin_one, lin_three, lin_param" in src
    v = harness.load(vectors)
    proc = harness.run(root / "build" / "cc_harness_lin", v)
    assert proc.returncode == 0 and proc.stdout.strip().endswith(f"{harness.checks(v)} passed, 0 failed"), proc.stdout
    # and the others' are there too, unchanged
    assert (root / "build" / "cc_harness_poly").exists() and (root / "kmod" / "tcp_alphabeta.c").exists()


def test_a_wrong_law_fails_the_new_familys_vectors(tmp_path):
    """The three-file check can fail: lin's vectors against a C law that removes one segment more."""
    root = newfamily.copy_with_family(tmp_path)
    v = harness.load(newfamily.write_vectors(root))
    law = root / "families" / "lin.h"
    law.write_text(law.read_text().replace("wq - p->beta", "wq - p->beta - (1ULL << CCRIG_FP)"))
    exe = harness.build(root, "lin", tmp_path / "cc_harness_lin")
    proc = harness.run(exe, v)
    assert proc.returncode == 1 and "FAIL lin_three loss window" in proc.stdout


def test_descriptors_are_checked():
    """A declaration the core cannot carry is refused, naming the family and what is wrong."""
    @dataclasses.dataclass(frozen=True)
    class Bad:
        gain: float = param("real", 1.0, lo=0, hi=5000, slot="alpha")
        k: float = param("real", 1.0, lo=0, hi=1)
        law: str = dataclasses.field(default="bad", init=False)
    fam = Family(law=Bad, letter="AB", code=9, tunable="a_tunable_far_too_long", summary="", presets={},
                 sample=lambda rng: Bad())
    problems = " | ".join(fam.problems())
    assert "parameter gain: a real's range must lie within 0..1000" in problems
    assert "parameter k: slot 'k' is not a real slot" in problems
    assert "letter 'AB' must be one lower-case letter or digit" in problems
    assert "'a_tunable_far_too_long' is longer than 15 characters" in problems
    assert "its C law" in problems and "bad.h is missing" in problems
