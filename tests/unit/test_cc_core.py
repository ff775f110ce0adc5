"""The fixed-point C core against the floating-point reference, and the presets against the papers.

The C harness is compiled here with gcc (no other build step), fed tcp_modules/vectors.json and checks every
value within the vectors' stated tolerance (|c - v| <= rel |v| + abs; see tcp_modules/vectors.py).
"""
import json
import subprocess

import pytest

from ccrig.tcp_modules import laws, vectors
from ccrig.tcp_modules.laws import AlphaBeta, Poly, State

ROOT = vectors.PATH.parent
LAW_CODE = {"alphabeta": 1, "poly": 2}


def harness_input(v: dict) -> str:
    lines = [f"tol {v['tolerance']['rel']!r} {v['tolerance']['abs']!r}"]
    for c in v["cases"]:
        p = c["params"]
        lines.append(f"case {c['name']} {LAW_CODE[p['law']]} {p['alpha_q']} {p['beta_q']} {p.get('k', 0)} "
                     f"{p.get('l', 0)} {p.get('terms', 1)} {int(p.get('per_ack', False))}")
        lines += [f"inc {w} {x!r}" for w, x in c["increase"]]
        lines += [f"loss {w} {x!r}" for w, x in c["loss"]]
        for op, cwnd, acc, acked, x in c["steps"]:
            lines.append(f"ack {cwnd} {acc!r} {acked} {x!r}" if op == "ack" else f"lossstep {cwnd} {acc!r} {x!r}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = tmp_path_factory.mktemp("harness") / "cc_harness"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(ROOT / "harness" / "cc_harness.c"), "-lm"], check=True)
    return exe


def run_harness(exe, text: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=120)


def test_vectors_are_the_reference():
    """vectors.json is what the reference says now (regenerate with python -m tcp_modules.vectors)."""
    assert json.loads(vectors.PATH.read_text()) == json.loads(json.dumps(vectors.generate()))


def test_c_core_matches_vectors(harness):
    v = json.loads(vectors.PATH.read_text())
    proc = run_harness(harness, harness_input(v))
    assert proc.returncode == 0, proc.stdout[-3000:]
    n = sum(len(c["increase"]) + len(c["loss"]) + len(c["steps"]) for c in v["cases"])
    assert proc.stdout.strip().splitlines()[-1] == f"{n} passed, 0 failed"
    # the vectors cover both laws, every exponent, every number of terms and the per-ACK option
    params = [c["params"] for c in v["cases"]]
    assert {p["law"] for p in params} == {"alphabeta", "poly"}
    polys = [p for p in params if p["law"] == "poly"]
    assert {p["k"] for p in polys} >= set(range(laws.EXP_MIN, laws.EXP_MAX + 1))
    assert {p["l"] for p in polys} >= set(range(laws.EXP_MIN, laws.EXP_MAX + 1))
    assert {p["terms"] for p in polys} == set(range(1, laws.TERMS_MAX + 1))
    assert any(p["per_ack"] for p in polys)


def test_harness_catches_a_wrong_value(harness):
    """The check can fail: one expected value moved by 1 % is reported."""
    v = json.loads(vectors.PATH.read_text())
    case = next(c for c in v["cases"] if c["name"] == "ab_smooth")
    case["loss"][5][1] *= 1.01
    v["cases"] = [case]
    proc = run_harness(harness, harness_input(v))
    assert proc.returncode == 1
    assert "FAIL ab_smooth loss window" in proc.stdout and ", 1 failed" in proc.stdout


# --- presets against the papers ----------------------------------------------------------------------------

def test_friendly_alpha_matches_the_paper():
    # Mamatas & Tsaoussidis Eq. 3: beta = 7/8 gives alpha = 0.31 (exactly 0.3125)
    assert laws.friendly_alpha(7 / 8) == pytest.approx(0.3125, abs=1e-12)
    assert round(laws.friendly_alpha(7 / 8), 2) == laws.PRESETS["ab_smooth"].alpha == 0.31
    # the standard and responsive classes of §3.1 satisfy Eq. 3 exactly
    assert laws.friendly_alpha(0.5) == pytest.approx(1.0)
    assert laws.friendly_alpha(0.25) == pytest.approx(1.25)


def test_alphabeta_presets():
    assert laws.PRESETS["ab_standard"] == AlphaBeta(1.0, 0.5)
    assert laws.PRESETS["ab_responsive"] == AlphaBeta(1.25, 0.25)
    assert laws.PRESETS["ab_smooth"] == AlphaBeta(0.31, 0.875)


def test_epoch_length_eq4():
    """A congestion epoch from beta W to W lasts (1 - beta) W / alpha RTTs (their Eq. 4, less the loss RTT)."""
    for name in ("ab_standard", "ab_responsive", "ab_smooth"):
        law = laws.PRESETS[name]
        w = 64
        s = laws.on_loss(law, State(w))
        rtts = 0
        while s.window < w - 1e-9:
            s = laws.on_rtt(law, s)
            rtts += 1
        expected = (1 - law.beta) * w / law.alpha
        assert expected <= rtts <= expected + 2, name


@pytest.mark.parametrize("name,k,l,m,inc,dec", [
    # Table 1 with alpha = 1, beta = 1/2, at W = 16: increase per RTT, decrease at a loss
    ("poly_aimd", 0, 1, 1, 1, 8),
    ("poly_mimd", -1, 1, 1, 16, 8),
    ("poly_miad", -1, 0, 1, 16, 1),
    ("poly_aiad", 0, 0, 1, 1, 1),
    ("poly_aiad2", 0, 0, 2, 2, 2),
    ("poly_pipd", 1, 1, 2, 1 / 16 + 1 / 256, 8 + 64),
    ("poly_aipd", 0, 1, 2, 2, 8 + 64),
    ("poly_piad", 1, 0, 2, 1 / 16 + 1 / 256, 2),
])
def test_poly_presets_are_table1(name, k, l, m, inc, dec):
    law = laws.PRESETS[name]
    assert (law.k, law.l, law.terms) == (k, l, m)
    assert law.increase(16) == pytest.approx(inc)
    assert law.decrease(16) == pytest.approx(dec)
    # the decrease is floored at 2 segments
    assert law.loss_window(16) == pytest.approx(max(16 - dec, 2))


def test_per_ack_option():
    """per_ack applies the increase per acknowledged segment (the ns-2 text): W times the per-RTT growth."""
    per_rtt, per_ack = Poly(0, 1, 1), Poly(0, 1, 1, per_ack=True)
    s = State(10)
    assert laws.on_rtt(per_rtt, s).cwnd == 11
    assert laws.on_rtt(per_ack, s).cwnd == 20   # +1 for each of the 10 segments


def test_fraction_survives_a_loss():
    """A loss keeps the fractional part of beta W: 0.875 * 13 = 11.375."""
    s = laws.on_loss(AlphaBeta(0.31, 0.875), State(13))
    assert s.cwnd == 11 and s.window == pytest.approx(11.375)


def test_bpf_parameter_block_layout_matches_the_header(tmp_path):
    """tcp_modules/bpfobj.py patches `struct ccrig_params` inside compiled BPF objects: its packing must be
    the header's layout (offsets, size) and its magic the header's."""
    from ccrig.tcp_modules import bpfobj
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n'
                   'typedef uint32_t u32; typedef uint64_t u64; typedef int32_t s32;\n'
                   f'#include "{ROOT / "include" / "ccrig_law.h"}"\n'
                   'int main(void) { printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %llx\\n", sizeof(struct ccrig_params),'
                   ' offsetof(struct ccrig_params, alpha), offsetof(struct ccrig_params, beta),'
                   ' offsetof(struct ccrig_params, k), offsetof(struct ccrig_params, l),'
                   ' offsetof(struct ccrig_params, terms), offsetof(struct ccrig_params, per_ack),'
                   ' offsetof(struct ccrig_params, law), offsetof(struct ccrig_params, pad),'
                   ' (unsigned long long)CCRIG_MAGIC); return 0; }\n')
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in out[:9]] == [bpfobj.PARAMS.size, 8, 16, 24, 28, 32, 36, 40, 44]
    assert int(out[9], 16) == bpfobj.MAGIC
    packed = bpfobj.pack_params(laws.PRESETS["poly_pipd"])
    assert bpfobj.PARAMS.unpack(packed) == (bpfobj.MAGIC, 1 << 20, 1 << 19, 1, 1, 2, 0, 2, 0)
