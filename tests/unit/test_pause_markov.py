"""The Markov PAUSE model (study 000 §III): generator against hand-written ones, the solver, measures, trends."""
import numpy as np
import pytest

from ccrig.analysis import pause_markov as pm
from ccrig.errors import InputError

L1, L2, MU1, MU2, NU, RTT = 7.0, 3.0, 11.0, 2.0, 5.0, 0.5
R = 1.0 / RTT


def dense_q(p, entries):
    """A generator from hand-written {(from_state, to_state): rate} with states as (i, j, k, a)."""
    Q = np.zeros((p.n_states, p.n_states))
    for (src, dst), rate in entries.items():
        s, t = int(pm.state_index(p, *src)), int(pm.state_index(p, *dst))
        Q[s, t] += rate
    Q -= np.diag(Q.sum(axis=1))
    return Q


def hand_b1_b2_1_n2(increase_when_down=False):
    """B1 = B2 = 1, T1 = T2 = 1 (= B2: PAUSE off), N = 2, written out rule by rule."""
    e = {
        # up states
        ((0, 0, 1, 1), (1, 0, 1, 1)): L1,
        ((0, 0, 1, 2), (1, 0, 1, 2)): L2, ((0, 0, 1, 2), (0, 0, 1, 1)): R,
        ((1, 0, 1, 1), (1, 0, 1, 2)): L1, ((1, 0, 1, 1), (0, 1, 1, 1)): MU1,
        ((1, 0, 1, 2), (0, 1, 1, 2)): MU1, ((1, 0, 1, 2), (1, 0, 1, 1)): R,
        ((0, 1, 1, 1), (1, 1, 1, 1)): L1, ((0, 1, 1, 1), (0, 0, 1, 1)): NU,
        ((0, 1, 1, 2), (1, 1, 1, 2)): L2, ((0, 1, 1, 2), (0, 0, 1, 2)): NU, ((0, 1, 1, 2), (0, 1, 1, 1)): R,
        ((1, 1, 1, 1), (1, 1, 1, 2)): L1, ((1, 1, 1, 1), (1, 0, 1, 1)): NU, ((1, 1, 1, 1), (0, 1, 1, 2)): MU1,
        ((1, 1, 1, 2), (1, 0, 1, 2)): NU, ((1, 1, 1, 2), (0, 1, 1, 2)): MU1, ((1, 1, 1, 2), (1, 1, 1, 1)): R,
        # down states (unreachable here: T1 = B2)
        ((0, 0, 2, 1), (1, 0, 2, 1)): L1,
        ((0, 0, 2, 2), (1, 0, 2, 2)): L2,
        ((1, 0, 2, 1), (1, 0, 2, 2)): L1, ((1, 0, 2, 1), (0, 1, 2, 1)): MU2,
        ((1, 0, 2, 2), (0, 1, 2, 2)): MU2,
        ((0, 1, 2, 1), (1, 1, 2, 1)): L1, ((0, 1, 2, 1), (0, 0, 1, 1)): NU,
        ((0, 1, 2, 2), (1, 1, 2, 2)): L2, ((0, 1, 2, 2), (0, 0, 1, 2)): NU,
        ((1, 1, 2, 1), (1, 1, 2, 2)): L1, ((1, 1, 2, 1), (1, 0, 1, 1)): NU, ((1, 1, 2, 1), (0, 1, 2, 2)): MU2,
        ((1, 1, 2, 2), (1, 0, 1, 2)): NU, ((1, 1, 2, 2), (0, 1, 2, 2)): MU2,
    }
    if increase_when_down:
        for i in (0, 1):
            for j in (0, 1):
                e[((i, j, 2, 2), (i, j, 2, 1))] = R
    return e


def hand_b1_1_b2_2_n1():
    """B1 = 1, B2 = 2, T1 = T2 = 1 (PAUSE on), N = 1 (losses leave a = N), written out rule by rule."""
    lam = L1
    return {
        ((0, 0, 1, 1), (1, 0, 1, 1)): lam,
        ((1, 0, 1, 1), (0, 1, 1, 1)): MU1,                                     # 6
        ((0, 1, 1, 1), (1, 1, 1, 1)): lam, ((0, 1, 1, 1), (0, 0, 1, 1)): NU,   # 1, 5
        ((1, 1, 1, 1), (1, 0, 1, 1)): NU, ((1, 1, 1, 1), (0, 2, 2, 1)): MU1,   # 5, 8 (not 6)
        ((0, 2, 1, 1), (1, 2, 1, 1)): lam, ((0, 2, 1, 1), (0, 1, 1, 1)): NU,   # 1, 4
        ((1, 2, 1, 1), (1, 1, 1, 1)): NU, ((1, 2, 1, 1), (0, 2, 1, 1)): MU1,   # 4, 10
        ((0, 0, 2, 1), (1, 0, 2, 1)): lam,
        ((1, 0, 2, 1), (0, 1, 2, 1)): MU2,                                     # 7
        ((0, 1, 2, 1), (1, 1, 2, 1)): lam, ((0, 1, 2, 1), (0, 0, 1, 1)): NU,   # 1, 5
        ((1, 1, 2, 1), (1, 0, 1, 1)): NU, ((1, 1, 2, 1), (0, 2, 2, 1)): MU2,   # 5, 7
        ((0, 2, 2, 1), (1, 2, 2, 1)): lam, ((0, 2, 2, 1), (0, 1, 2, 1)): NU,   # 1, 4
        ((1, 2, 2, 1), (1, 1, 2, 1)): NU, ((1, 2, 2, 1), (0, 2, 2, 1)): MU2,   # 4, 12
    }


def dense_pi(Q):
    """Exact dense solve of πQ = 0, Σπ = 1 over all states (least squares on the stacked system)."""
    n = Q.shape[0]
    A = np.vstack([Q.T, np.ones((1, n))])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    return pi


CASES = [
    (pm.PauseParams(lam=(L1, L2), mu1=MU1, mu2=MU2, nu=NU, B1=1, B2=1, T1=1, T2=1, rtt=RTT), hand_b1_b2_1_n2()),
    (pm.PauseParams(lam=(L1, L2), mu1=MU1, mu2=MU2, nu=NU, B1=1, B2=1, T1=1, T2=1, rtt=RTT,
                    increase_when_down=True), hand_b1_b2_1_n2(increase_when_down=True)),
    (pm.PauseParams(lam=(L1,), mu1=MU1, mu2=MU2, nu=NU, B1=1, B2=2, T1=1, T2=1, rtt=RTT), hand_b1_1_b2_2_n1()),
]


@pytest.mark.parametrize("p,entries", CASES)
def test_generator_equals_hand_written(p, entries):
    Q = pm.generator(p).toarray()
    np.testing.assert_allclose(Q, dense_q(p, entries), rtol=0, atol=1e-12)


@pytest.mark.parametrize("p,entries", CASES)
def test_pi_matches_dense_solve(p, entries):
    Q = pm.generator(p)
    rec = pm.recurrent_states(p, Q)
    pi = pm.stationary(Q, rec)
    np.testing.assert_allclose(pi, dense_pi(dense_q(p, entries)), rtol=0, atol=1e-12)
    assert abs(pi.sum() - 1.0) < 1e-12


def test_pause_off_leaves_down_states_empty():
    p = CASES[0][0]
    pi = pm.stationary(pm.generator(p), pm.recurrent_states(p, pm.generator(p)))
    _, _, k, _ = pm._states(p)
    assert pi[k == 2].max() == 0.0
    assert pi[k == 1].min() > 0.0


PAPER = [pm.PauseParams(lam=(25.0, 1.0), rtt=1.0),
         pm.PauseParams(lam=(50.0, 1.0), T1=18, T2=10, rtt=0.1),
         pm.PauseParams(lam=(50.0, 25.0, 1.0), T1=15, T2=15, rtt=2.0),
         pm.PauseParams(lam=(50.0, 25.0, 1.0), T1=20, T2=20, rtt=0.5),
         pm.PauseParams(lam=(50.0, 25.0, 1.0), T1=3, T2=3, rtt=0.5, increase_when_down=True)]


@pytest.mark.parametrize("p", PAPER)
def test_rows_sum_to_zero_and_pi_is_a_distribution(p):
    Q = pm.generator(p)
    assert np.abs(np.asarray(Q.sum(axis=1))).max() < 1e-10
    off = Q - pm.sp.diags(Q.diagonal())
    assert off.min() >= 0 and Q.diagonal().max() <= 0
    pi = pm.stationary(Q, pm.recurrent_states(p, Q))
    assert abs(pi.sum() - 1.0) < 1e-12 and pi.min() >= 0
    assert np.abs(pi @ Q).max() < 1e-10


@pytest.mark.parametrize("p", PAPER)
def test_three_throughput_expressions_agree(p):
    m = pm.solve(p)
    assert abs(m.throughput - m.throughput_via_queue1) < 1e-9
    assert abs(m.throughput - m.throughput_via_departures) < 1e-9
    assert 0 < m.throughput < p.nu
    # Little's law as printed and the loss probabilities in range
    assert m.EW1 == pytest.approx(m.EQ1 / m.lambda_effec_1) and m.EW2 == pytest.approx(m.EQ2 / m.lambda_effec_2)
    assert 0 <= m.P1 < 1 and 0 <= m.P2 < 1


def test_measures_against_dense_sums():
    """Each measure recomputed by brute force over states, from the printed formulas."""
    p = pm.PauseParams(lam=(50.0, 25.0, 1.0), T1=12, T2=8, rtt=0.7).validate()
    Q = pm.generator(p)
    pi = pm.stationary(Q, pm.recurrent_states(p, Q))
    m = pm.measures(p, pi)
    s = dict(EQ1=0.0, EQ2=0.0, le1=0.0, ll1=0.0, le2=0.0, ll2=0.0, busy2=0.0)
    for a in range(1, p.N + 1):
        for k in (1, 2):
            for j in range(p.B2 + 1):
                for i in range(p.B1 + 1):
                    x = pi[int(pm.state_index(p, i, j, k, a))]
                    s["EQ1"] += i * x
                    s["EQ2"] += j * x
                    s["le1" if i < p.B1 else "ll1"] += p.lam[a - 1] * x
                    if i > 0:
                        s["le2" if j < p.B2 else "ll2"] += (p.mu1 if k == 1 else p.mu2) * x
                    if j > 0:
                        s["busy2"] += x
    assert m.EQ1 == pytest.approx(s["EQ1"], rel=1e-12) and m.EQ2 == pytest.approx(s["EQ2"], rel=1e-12)
    assert m.lambda_effec_1 == pytest.approx(s["le1"], rel=1e-12)
    assert m.lambda_loss_1 == pytest.approx(s["ll1"], rel=1e-12)
    assert m.lambda_effec_2 == pytest.approx(s["le2"], rel=1e-12)
    assert m.lambda_loss_2 == pytest.approx(s["ll2"], rel=1e-12)
    assert m.P2 == pytest.approx(s["ll2"] / (s["le2"] + s["ll2"]), rel=1e-12)
    assert m.throughput_via_departures == pytest.approx(p.nu * s["busy2"], rel=1e-12)


def test_iterative_solver_agrees_with_direct():
    p = pm.PauseParams(lam=pm.linear_rates(50, 1, 5), B1=12, B2=16, T1=12, T2=9, rtt=0.8)
    a, b = pm.solve(p, method="direct"), pm.solve(p, method="iterative")
    for key in ("EQ1", "EQ2", "throughput", "P1", "P2"):
        assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-9, abs=1e-13)


def test_gain_is_zero_without_pause():
    g, on, off = pm.gain(pm.PauseParams(lam=(25.0, 1.0), T1=20, T2=20))
    assert g == 0.0 and on.throughput == off.throughput


def test_fig4_gain_grows_with_rtt():
    for l1 in (25.0, 50.0):
        gains = [pm.gain(pm.PauseParams(lam=(l1, 1.0), T1=15, T2=15, rtt=r))[0] for r in (0.2, 0.5, 1, 2, 5)]
        assert all(b > a for a, b in zip(gains, gains[1:])), gains
        assert gains[-1] > 5.0


def test_fig6_thresholds_near_b2_lose():
    curve = dict(pm.figure_curves("fig6")["lambda1=25"])
    best = max(curve, key=curve.get)
    assert 13 <= best <= 18
    assert curve[19.0] < curve[best] - 0.5 and curve[20.0] < curve[best] - 4.0
    assert curve[2.0] < 0  # and thresholds near an empty buffer lose too


def test_fig7_two_levels_gain_more_than_three():
    curves = pm.figure_curves("fig7")
    for (x, g2), (_, g3) in zip(curves["N=2"], curves["N=3"]):
        if x >= 0.5:
            assert g2 > g3


@pytest.mark.parametrize("field,kw", [
    ("T2", dict(T1=10, T2=12)), ("T1", dict(T1=21)), ("lam", dict(lam=(1.0, 5.0))), ("rtt", dict(rtt=0.0)),
    ("B1", dict(B1=0)), ("T2", dict(T2=0)),
])
def test_bad_parameters_name_the_field(field, kw):
    base = dict(lam=(25.0, 1.0))
    base.update(kw)
    with pytest.raises(InputError, match=rf"^{field}: got .*; expected "):
        pm.PauseParams(**base).validate()
