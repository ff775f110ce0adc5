"""The fixed-point C core with each family's C law against the family's floating-point reference, and the
presets against the papers.

The C harness is compiled here with gcc once per family (no other build step), fed the family's vectors
(tcp_modules/families/NAME.vectors.json) and checks every value within the vectors' stated tolerance
(|c - v| <= rel |v| + abs; see tcp_modules/vectors.py).
"""
import dataclasses
import json
import random
import statistics
import subprocess

import pytest

from ccrig.tcp_modules import laws, vectors
from ccrig.tcp_modules.families import FAMILIES
from ccrig.tcp_modules.laws import AlphaBeta, Poly, State
from support import harness

ROOT = vectors.Path(vectors.__file__).parent


@pytest.fixture(scope="module")
def harnesses(tmp_path_factory):
    d = tmp_path_factory.mktemp("harness")
    return {name: harness.build(ROOT, name, d / f"cc_harness_{name}") for name in FAMILIES}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_vectors_are_the_reference(name):
    """Each family's vectors are what its reference says now (regenerate with python -m ccrig.tcp_modules.vectors)."""
    fam = FAMILIES[name]
    assert harness.load(fam.vectors) == json.loads(json.dumps(vectors.generate(fam)))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_c_core_matches_vectors(harnesses, name):
    fam = FAMILIES[name]
    v = harness.load(fam.vectors)
    proc = harness.run(harnesses[name], v)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"{harness.checks(v)} passed, 0 failed"
    # every preset and the family's own cases are checked, and the random ones
    names = [c["name"] for c in v["cases"]]
    assert set(fam.presets) | set(fam.vector_cases) <= set(names)
    assert sum(n.startswith("random") for n in names) == fam.n_random
    assert {c["params"]["law"] for c in v["cases"]} == {name}


def test_poly_vectors_cover_the_law():
    """The polynomial vectors cover every exponent, every number of terms, the per-ACK option and the first-loss
    halving, with trajectories passing through a first and a later loss."""
    v = harness.load(FAMILIES["poly"].vectors)
    polys = [c["params"] for c in v["cases"]]
    assert {p["k"] for p in polys} >= set(range(laws.EXP_MIN, laws.EXP_MAX + 1))
    assert {p["l"] for p in polys} >= set(range(laws.EXP_MIN, laws.EXP_MAX + 1))
    assert {p["terms"] for p in polys} == set(range(1, laws.TERMS_MAX + 1))
    assert any(p["per_ack"] for p in polys)
    halving = [c for c in v["cases"] if c["params"].get("halve_first")]
    assert {"poly_mimd_paper", "poly_pipd_paper", "poly_pipd_halve_first"} <= {c["name"] for c in halving}
    assert all(c["params"]["slots"]["halve_first"] is False for c in v["cases"] if c not in halving)
    assert sum(1 for c in halving for s in c["steps"] if s[0] == "loss" and s[5] == 0) >= 5
    assert sum(1 for c in halving for s in c["steps"] if s[0] == "loss" and s[5] == 1) >= 5


def test_harness_catches_a_wrong_value(harnesses):
    """The check can fail: one expected value moved by 1 % is reported."""
    v = harness.load(FAMILIES["alphabeta"].vectors)
    case = next(c for c in v["cases"] if c["name"] == "ab_smooth")
    case["loss"][5][1] *= 1.01
    v["cases"] = [case]
    proc = harness.run(harnesses["alphabeta"], v)
    assert proc.returncode == 1
    assert "FAIL ab_smooth loss window" in proc.stdout and ", 1 failed" in proc.stdout


def test_a_family_is_checked_by_its_own_law(harnesses):
    """Each harness holds one family's law: the polynomial vectors fed to the alphabeta build fail."""
    v = harness.load(FAMILIES["poly"].vectors)
    v["cases"] = [c for c in v["cases"] if c["name"] == "poly_pipd"]
    assert harness.run(harnesses["poly"], v).returncode == 0
    proc = harness.run(harnesses["alphabeta"], v)
    assert proc.returncode == 1 and "FAIL poly_pipd" in proc.stdout


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


def test_table1_presets_are_unchanged_by_the_paper_presets():
    """The halving option is off for every preset that existed before it, and their parameters are as they were."""
    for name in ("poly_aimd", "poly_mimd", "poly_miad", "poly_aiad", "poly_aiad2", "poly_pipd", "poly_aipd",
                 "poly_piad"):
        law = laws.PRESETS[name]
        assert (law.alpha, law.beta, law.per_ack, law.halve_first) == (1.0, 0.5, False, False), name
        assert set(law.params()) == {"law", "k", "l", "terms", "alpha", "beta", "per_ack"}, name


def test_paper_presets():
    mimd, pipd = laws.PRESETS["poly_mimd_paper"], laws.PRESETS["poly_pipd_paper"]
    assert (mimd.k, mimd.l, mimd.terms, mimd.alpha, mimd.beta, mimd.halve_first) == (-1, 1, 1, 10, 0.5, True)
    assert (pipd.k, pipd.l, pipd.terms, pipd.alpha, pipd.beta, pipd.halve_first) == (1, 1, 2, 20, 0.1, True)
    # MIMD: 10 % per RTT (+1 at W = 10, as Reno), W/2 at a loss
    assert mimd.increase(10) == pytest.approx(1) and mimd.increase(40) == pytest.approx(4)
    assert mimd.loss_window(20) == pytest.approx(10)
    # PIPD: W - 0.1 W - (0.1 W)^2 is at most 20.25 (at W = 45) and 18 or more for losses at 30-60 segments
    assert pipd.loss_window(45) == pytest.approx(20.25)
    assert max(pipd.loss_window(w) for w in range(1, 200)) == pytest.approx(20.25)
    assert all(18 - 1e-9 <= pipd.loss_window(w) <= 20.25 for w in range(30, 61))
    # +2 per RTT at that minimum, as the PIPD block's k = 0 rows
    assert pipd.increase(20) == pytest.approx(2)


def test_halve_first():
    """The paper's first congestion indication halves the window; the polynomial decrease applies only after."""
    pipd, halving = laws.PRESETS["poly_pipd"], Poly(1, 1, 2, halve_first=True)
    s = State(40)
    assert laws.on_loss(pipd, s).window == 2                         # Table 1 literally: the floor
    first = laws.on_loss(halving, s)
    assert first.window == 20 and first.seen_loss
    assert laws.on_loss(halving, first).window == 2                  # then the rule itself
    assert laws.on_loss(halving, laws.on_rtt(halving, first)).seen_loss
    # slow start's overshoot (90 segments in a 45-segment pipe) is halved, then the rule holds about 20
    paper = laws.PRESETS["poly_pipd_paper"]
    s = laws.on_loss(paper, State(90))
    assert s.window == 45
    assert laws.on_loss(paper, s).window == pytest.approx(20.25)
    assert laws.on_loss(dataclasses.replace(paper, halve_first=False), State(90)).window == 2
    # an odd window keeps its half segment; the floor is 2
    assert laws.on_loss(halving, State(7)).window == pytest.approx(3.5)
    assert laws.on_loss(halving, State(3)).window == 2


def drop_tail_rounds(flows, pipe: float, rounds: int = 3000, seed: int = 1):
    """A round-trip-by-round-trip model of flows sharing one drop-tail queue: each round every flow's window
    grows by its law (doubles in slow start), and when the windows sum past `pipe` (BDP + buffer, packets) the
    excess is dropped, a flow losing with the chance that one of its packets is among the excess; a flow that
    loses applies laws.on_loss once. Returns per flow the median window after a loss and the mean window,
    over the last four fifths of the rounds."""
    rng = random.Random(seed)
    w = [2.0] * len(flows)
    slow, seen = [True] * len(flows), [False] * len(flows)
    after, total = [[] for _ in flows], [0.0] * len(flows)
    skip = rounds // 5
    for r in range(rounds):
        grown = [2 * x if slow[i] else x + law.increase(max(1, int(x))) for i, (x, law) in enumerate(zip(w, flows))]
        excess = max(0.0, sum(grown) - pipe)
        for i, law in enumerate(flows):
            if excess and rng.random() < 1 - (1 - excess / sum(grown)) ** grown[i]:
                w[i] = laws.loss_window_at(law, int(grown[i]), seen[i])
                slow[i], seen[i] = False, True
                if r >= skip:
                    after[i].append(w[i])
            else:
                w[i] = grown[i]
            if r >= skip:
                total[i] += w[i]
    return [(statistics.median(a), t / (rounds - skip)) for a, t in zip(after, total)]


def test_paper_presets_rank_as_the_paper_in_its_six_flow_setting():
    """The paper's six flows (four AIMD variants, MIMD, PIPD) on one drop-tail queue: PIPD's minimum window is
    about 20 and MIMD's about 10, and PIPD gets the most, MIMD the next (its \"more aggressive\" and Fig. 4's
    ranking); Table 1's literal presets (alpha 1, beta 1/2) cannot show it: PIPD sits at the floor."""
    reno = laws.PRESETS["ab_standard"]
    paper = drop_tail_rounds([reno] * 4 + [laws.PRESETS["poly_mimd_paper"], laws.PRESETS["poly_pipd_paper"]], 110)
    (reno_min, reno_mean), (mimd_min, mimd_mean), (pipd_min, pipd_mean) = paper[0], paper[4], paper[5]
    assert 7 <= mimd_min <= 13 and 16 <= pipd_min <= 20.25, paper
    assert pipd_mean > mimd_mean > reno_mean, paper
    literal = drop_tail_rounds([reno] * 4 + [laws.PRESETS["poly_mimd"], laws.PRESETS["poly_pipd"]], 110)
    assert literal[5][0] == 2, literal


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
    from ccrig.tcp_modules import bpfobj   # lazy: only this test reads the loader's packing
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n'
                   'typedef uint32_t u32; typedef uint64_t u64; typedef int32_t s32;\n'
                   f'#include "{ROOT / "include" / "ccrig_law.h"}"\n'
                   'int main(void) { printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %llx\\n", sizeof(struct ccrig_params),'
                   ' offsetof(struct ccrig_params, alpha), offsetof(struct ccrig_params, beta),'
                   ' offsetof(struct ccrig_params, k), offsetof(struct ccrig_params, l),'
                   ' offsetof(struct ccrig_params, terms), offsetof(struct ccrig_params, per_ack),'
                   ' offsetof(struct ccrig_params, law), offsetof(struct ccrig_params, halve_first),'
                   ' (unsigned long long)CCRIG_MAGIC); return 0; }\n')
    exe = tmp_path / "layout"
    subprocess.run(["gcc", '-DCCRIG_LAW_FILE="../families/alphabeta.h"', "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in out[:9]] == [bpfobj.PARAMS.size, 8, 16, 24, 28, 32, 36, 40, 44]
    assert int(out[9], 16) == bpfobj.MAGIC
    packed = bpfobj.pack_params(laws.PRESETS["poly_pipd"])
    assert bpfobj.PARAMS.unpack(packed) == (bpfobj.MAGIC, 1 << 20, 1 << 19, 1, 1, 2, 0, 2, 0)
    packed = bpfobj.pack_params(laws.PRESETS["poly_pipd_paper"])
    assert bpfobj.PARAMS.unpack(packed) == (bpfobj.MAGIC, 20 << 20, laws.quantize(0.1), 1, 1, 2, 0, 2, 1)
