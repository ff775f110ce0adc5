"""The Markov model of IEEE 802.3x PAUSE (hop-by-hop) flow control interacting with TCP (study 000, §III).
One module of ~400 lines on purpose: the model as printed, its generator and its solver are read together.

The model (Malhotra, van Haalen, Mandjes, Núñez-Queija, CWI PNA-E0518, 2005)
--------------------------------------------------------------------------------
Two queues in tandem. Queue 1 (buffer B1) is fed by a Markov-modulated Poisson process, the aggregate of TCP
senders, whose rate level a ∈ 1..N gives the rate λ_a with λ_1 > λ_2 > … > λ_N. Queue 1 serves into queue 2
(buffer B2) at μ1 while queue 2 is "up" (k = 1) and at μ2 while it is "down" (k = 2, PAUSE in force); queue 2
is served at ν. Queue 2 goes down when a packet takes it from T1 to T1+1 and comes back up when a departure
takes it from T2 to T2−1 (1 ≤ T2 ≤ T1 ≤ B2; T1 = B2 switches PAUSE off). Every loss (queue 1 full on arrival,
queue 2 full when queue 1 serves into it) doubles the rate level (halves the TCP rate): a -> min(2a, N); the
level steps back a -> a−1 at rate 1/RTT (additive increase).

State (i, j, k, a): i ∈ 0..B1 packets in queue 1, j ∈ 0..B2 in queue 2, k ∈ {1 up, 2 down}, a ∈ 1..N.
Transitions, numbered as printed in the paper:

   1. (i, j, k, a)   -λ_a->  (i+1, j, k, a)                        i < B1 (implicit)
   2. (B1, j, k, a)  -λ_a->  (B1, j, k, 2a)                         2a ≤ N     (loss at queue 1)
   3. (B1, j, k, a)  -λ_a->  (B1, j, k, N)                          2a > N     (loss at queue 1)
   4. (i, j, k, a)   -ν->    (i, j−1, k, a)                         j ≥ 1, j ≠ T2
   5. (i, T2, k, a)  -ν->    (i, T2−1, 1, a)                        1 ≤ T2 ≤ B2
   6. (i, j, 1, a)   -μ1->   (i−1, j+1, 1, a)                       j ≠ B2, i ≥ 1   (and j ≠ T1, see below)
   7. (i, j, 2, a)   -μ2->   (i−1, j+1, 2, a)                       j ≠ B2, i ≥ 1
   8. (i, T1, 1, a)  -μ1->   (i−1, T1+1, 2, a)                      T1 < B2, i ≥ 1
   9. (i, B2, 1, a)  -μ1->   (i−1, B2, 1, 2a)                       2a ≤ N, i ≥ 1   (loss at queue 2)
  10. (i, B2, 1, a)  -μ1->   (i−1, B2, 1, N)                        2a > N, i ≥ 1   (loss at queue 2)
  11. (i, B2, 2, a)  -μ2->   (i−1, B2, 2, 2a)                       2a ≤ N, i ≥ 1   (loss at queue 2)
  12. (i, B2, 2, a)  -μ2->   (i−1, B2, 2, N)                        2a > N, i ≥ 1   (loss at queue 2)
  13. (i, j, 1, a)   -1/RTT-> (i, j, 1, a−1)                        a > 1

Reading of the printed text, and the options where it is ambiguous:
- Transition 6 is printed with "j ≠ B2" only, so at j = T1 < B2 both 6 and 8 would fire and queue 1 would be
  served at 2·μ1. The prose says the T1 -> T1+1 step "simultaneously changes" the state to down, and transition
  4 likewise excludes the special case (j ≠ T2) that 5 handles; so 8 replaces 6 at j = T1 (no option: the double
  rate describes no mechanism).
- Transition 13 is printed for k = 1 only: TCP does not speed up while queue 2 is down. That is the default
  (`increase_when_down=False`); `increase_when_down=True` applies 13 in both states, the reading in which the
  missing k is a typesetting slip (TCP's window grows whatever the link state).
- Rules 2/3 at a = N and the self-loop they make: a loss that does not change the state. It has no place in the
  generator (the diagonal absorbs it) but counts in λ_loss,1.
- The thresholds T1 and T2 are not printed for Figs. 4 and 7 nor T1 for Fig. 5; `FIGURES` states the values used.

Performance measures (§III.B) are computed exactly as printed, from π with πQ = 0, πe = 1:
E[Q1] = Σ i π, E[Q2] = Σ j π, λ_effec,1 = Σ_a λ_a Σ_{i<B1} π, λ_loss,1 = Σ_a λ_a Σ_{i=B1} π,
P1 = λ_loss,1/(λ_effec,1 + λ_loss,1), EW1 = E[Q1]/λ_effec,1,
λ_effec,2 = μ1 Σ_{i>0, j<B2, k=1} π + μ2 Σ_{i>0, j<B2, k=2} π, λ_loss,2 = the same over j = B2,
P2 = λ_loss,2/(λ_effec,2 + λ_loss,2), EW2 = E[Q2]/λ_effec,2,
throughput = λ_effec,2 = λ_effec,1·(1 − P2) = ν·P(j > 0)   (the three agree in the stationary regime: queue 2
in = queue 2 out, and queue 1 out = queue 2 accepted + queue 2 lost).
The PAUSE gain is 100·(throughput(T1, T2) − throughput(T1 = B2)) / throughput(T1 = B2) percent.

Solving. States that cannot recur (down with j < T2, up with j > T1 < B2: entered only through transitions that
never lead there) carry π = 0. From every state the chain can reach (0, 0, 1, 1) (queues drain, the link comes
back up, the rate level steps back to 1), so the states reachable from it form the one closed class; π is
solved on that class only (about half the states): up to DIRECT_MAX_STATES by one sparse LU, above by GMRES
preconditioned with a block Gauss–Seidel sweep over the rate levels (see `stationary`). Generator, solve and
measures are vectorised (no Python loop over states): about a million recurrent states solve in ~20 s on two
busy cores (tests/bench/bench_markov.py).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import breadth_first_order
from threadpoolctl import threadpool_limits

from ccrig.errors import InputError, field_error


@dataclass(frozen=True)
class PauseParams:
    """One instance of the model. Rates are in packets per second, buffers and thresholds in packets."""

    lam: tuple[float, ...]  # λ_1 > … > λ_N; N = len(lam)
    mu1: float = 100.0
    mu2: float = 2.0
    nu: float = 15.0
    B1: int = 10
    B2: int = 20
    T1: int = 15
    T2: int = 15
    rtt: float = 1.0
    increase_when_down: bool = False  # transition 13 as printed (False) or in both link states (True)

    @property
    def N(self) -> int:
        return len(self.lam)

    @property
    def n_states(self) -> int:
        return (self.B1 + 1) * (self.B2 + 1) * 2 * self.N

    def validate(self) -> "PauseParams":
        lam = tuple(float(x) for x in self.lam)
        if not lam or any(not np.isfinite(x) or x <= 0 for x in lam):
            raise field_error("lam", self.lam, "one or more positive rates λ1 > … > λN")
        if any(b >= a for a, b in zip(lam, lam[1:])):
            raise field_error("lam", self.lam, "strictly decreasing rates λ1 > λ2 > … > λN")
        for name in ("mu1", "mu2", "nu", "rtt"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float, np.integer, np.floating)) and np.isfinite(v) and v > 0):
                raise field_error(name, v, "a positive finite number")
        if not (isinstance(self.B1, (int, np.integer)) and self.B1 >= 1):
            raise field_error("B1", self.B1, "an integer ≥ 1")
        if not (isinstance(self.B2, (int, np.integer)) and self.B2 >= 1):
            raise field_error("B2", self.B2, "an integer ≥ 1")
        if not (isinstance(self.T1, (int, np.integer)) and 1 <= self.T1 <= self.B2):
            raise field_error("T1", self.T1, f"an integer in 1..B2 = 1..{self.B2} (T1 = B2 switches PAUSE off)")
        if not (isinstance(self.T2, (int, np.integer)) and 1 <= self.T2 <= self.T1):
            raise field_error("T2", self.T2, f"an integer in 1..T1 = 1..{self.T1}")
        return replace(self, lam=lam)

    def without_pause(self) -> "PauseParams":
        """The same system with hop-by-hop control off: T1 = B2 (T2 then only re-labels an up state as up)."""
        return replace(self, T1=self.B2, T2=min(self.T2, self.B2))


def state_index(p: PauseParams, i, j, k, a):
    """Flat index of (i, j, k, a) with k ∈ {1, 2}, a ∈ 1..N (i varies fastest)."""
    return np.ravel_multi_index((np.asarray(a) - 1, np.asarray(k) - 1, j, i), (p.N, 2, p.B2 + 1, p.B1 + 1))


def _states(p: PauseParams):
    a, k, j, i = np.indices((p.N, 2, p.B2 + 1, p.B1 + 1)).reshape(4, -1)
    return i, j, k + 1, a + 1


def transitions(p: PauseParams):
    """All off-diagonal transitions as (rule, source, target, rate) arrays, one entry per printed rule firing.

    Targets are computed as offsets of the flat index (i moves by 1, j by B1+1, k by (B2+1)(B1+1), a by twice
    that), on the sources of each rule only: a million-state generator is built in seconds.
    """
    i, j, k, a = _states(p)
    lam = np.asarray(p.lam, dtype=float)
    si, sj = 1, p.B1 + 1
    sk = (p.B2 + 1) * sj
    sa = 2 * sk
    pause_on = p.T1 < p.B2
    busy1 = i >= 1
    up, down = k == 1, k == 2
    rules = [  # (rule, mask, offset or callable(src) -> offset, rate or callable(src) -> rate)
        (1, i < p.B1, si, None),
        (2, (i == p.B1) & (2 * a <= p.N), "double", None),
        (3, (i == p.B1) & (2 * a > p.N), "double", None),
        (4, (j >= 1) & (j != p.T2), -sj, p.nu),
        (5, j == p.T2, "to_up", p.nu),
        (6, up & (j != p.B2) & busy1 & ~((j == p.T1) & pause_on), sj - si, p.mu1),
        (7, down & (j != p.B2) & busy1, sj - si, p.mu2),
        (8, up & (j == p.T1) & pause_on & busy1, sj - si + sk, p.mu1),
        (9, up & (j == p.B2) & busy1 & (2 * a <= p.N), "lose2", p.mu1),
        (10, up & (j == p.B2) & busy1 & (2 * a > p.N), "lose2", p.mu1),
        (11, down & (j == p.B2) & busy1 & (2 * a <= p.N), "lose2", p.mu2),
        (12, down & (j == p.B2) & busy1 & (2 * a > p.N), "lose2", p.mu2),
        (13, (up | p.increase_when_down) & (a > 1), -sa, 1.0 / p.rtt),
    ]
    out = []
    for rule, mask, offset, rate in rules:
        src = np.flatnonzero(mask)
        a_s = a[src]
        if offset == "double":  # a -> min(2a, N)
            offset = (np.minimum(2 * a_s, p.N) - a_s) * sa
        elif offset == "lose2":  # i -> i-1, a -> min(2a, N)
            offset = (np.minimum(2 * a_s, p.N) - a_s) * sa - si
        elif offset == "to_up":  # j -> j-1, k -> 1
            offset = -sj - (k[src] - 1) * sk
        tgt = src + offset
        r = lam[a_s - 1] if rate is None else np.full(src.size, float(rate))
        keep = src != tgt  # rule 3 at a = N: a loss that leaves the state as it is
        out.append((np.full(int(keep.sum()), rule), src[keep], tgt[keep], r[keep]))
    rule, s, t, r = (np.concatenate(x) for x in zip(*out))
    return rule, s, t, r


def generator(p: PauseParams) -> sp.csr_matrix:
    """The infinitesimal generator Q (rows sum to zero) over all (B1+1)(B2+1)·2·N states."""
    p = p.validate()
    _, s, t, r = transitions(p)
    n = p.n_states
    diag = np.arange(n)
    out_rate = np.bincount(s, weights=r, minlength=n)
    # one COO -> CSR conversion with the diagonal in it (duplicate entries, none expected, would be summed)
    return sp.csr_matrix((np.concatenate([r, -out_rate]), (np.concatenate([s, diag]), np.concatenate([t, diag]))),
                         shape=(n, n))


def recurrent_states(p: PauseParams, Q: sp.csr_matrix) -> np.ndarray:
    """Indices of the closed class: every state reachable from (0, 0, up, a = 1) (sorted)."""
    start = int(state_index(p, 0, 0, 1, 1))
    order = breadth_first_order(Q, start, directed=True, return_predecessors=False)
    return np.sort(order)


DIRECT_MAX_STATES = 2_000  # above this, sparse LU of the whole system fills in badly (see `stationary`)
BLOCK_ORDERING = "MMD_ATA"  # SuperLU ordering of the level blocks: LU of a 63 000-state block 0.6 s vs 0.84 s (COLAMD)


def stationary(Q: sp.csr_matrix, states: np.ndarray | None = None, blocks: np.ndarray | None = None,
               method: str = "auto", rtol: float = 1e-12) -> np.ndarray:
    """π with πQ = 0, Σπ = 1, solved on `states` (the closed class; all states if None), zero elsewhere.

    The system solved is Q_r^T π = 0 with its last equation swapped for Σπ = 1 (on an irreducible class any
    n−1 balance equations are independent, so it is non-singular). Pinning one state instead (x_s = 1, which
    keeps the matrix sparse) is numerically unsafe: the model has states of probability 1e-19, and pinning one
    of them blows the others up past what double precision resolves.

    method "direct": one sparse LU (SuperLU, COLAMD). Exact and fastest on the paper's sizes, but the rate-level
    jumps a -> 2a couple the (i, j) planes of all levels (and the normalisation row is dense), so the fill-in
    grows fast: 30 000 states take seconds and 165 000 minutes.
    method "iterative": GMRES preconditioned by a block Gauss–Seidel sweep with the exact LU of each diagonal
    block of Q_r^T, one block per rate level (`blocks` gives each state's level, states sorted by it). Inside a
    level the fast dynamics (μ, ν, λ) form a 2-D grid whose LU stays sparse; what the sweep misses of the
    exchange between levels (1/RTT and losses) GMRES corrects in a dozen or so steps. "auto" picks direct up to
    DIRECT_MAX_STATES states or for a single level.
    """
    if method not in ("auto", "direct", "iterative"):
        raise field_error("method", method, "auto, direct or iterative")
    n = Q.shape[0]
    idx = np.arange(n) if states is None else np.asarray(states)
    QrT = Q[idx][:, idx].T.tocsr()
    m = len(idx)
    levels = np.zeros(m, dtype=int) if blocks is None else np.asarray(blocks)
    single = np.all(levels == levels[0])
    if method == "auto":
        method = "direct" if m <= DIRECT_MAX_STATES or single else "iterative"
    if method == "iterative" and single:
        raise field_error("method", method, "direct for a single rate level (N = 1): there are no blocks")
    if method == "direct":
        A = sp.vstack([QrT[:-1], sp.csr_matrix(np.ones((1, m)))]).tocsc()
        b = np.zeros(m)
        b[-1] = 1.0
        x = spla.spsolve(A, b, permc_spec="COLAMD")
    else:
        x = _block_gmres(QrT, levels, rtol)
    x = np.clip(x, 0.0, None)  # round-off can leave -1e-18 on states of vanishing probability
    pi = np.zeros(n)
    pi[idx] = x / x.sum()
    return pi


def _block_gmres(QrT: sp.csr_matrix, blocks: np.ndarray, rtol: float) -> np.ndarray:
    """GMRES on Q_r^T π = 0 with the last equation swapped for Σπ = 1, preconditioned by a backward block
    Gauss–Seidel sweep over the rate levels (exact LU of each diagonal block of Q_r^T).

    The dense normalisation row costs nothing here (GMRES only multiplies by the matrix), and it keeps the
    unknowns at the scale of π: pinning one state to 1 instead lets an improbable pin blow the others up to
    1e20 and GMRES stagnate. The blocks are proper principal submatrices of an irreducible singular M-matrix,
    hence non-singular. The sweep runs from level N down to 1 because the inflow a+1 -> a (rate 1/RTT, from every
    up state) is the coupling that matters; the loss jumps a -> 2a come only from boundary states. Measured on
    B1 = B2 = 100, N = 16: 12–15 GMRES steps to 1e-12 against 41–53 sweeping upward and ~60 with block Jacobi.
    BLAS is held to one thread: the vectors are short and, on a busy 2-core machine, OpenBLAS threads spinning
    against each other made each GMRES step 40 times slower.
    """
    if np.any(np.diff(blocks) < 0):
        raise ValueError("block labels must be sorted (states ordered by rate level)")
    cuts = np.flatnonzero(np.diff(blocks)) + 1
    bounds = list(zip(np.r_[0, cuts], np.r_[cuts, len(blocks)]))
    m = QrT.shape[0]
    with threadpool_limits(limits=1):
        lus = [spla.splu(QrT[s:e, s:e].tocsc(), permc_spec=BLOCK_ORDERING) for s, e in bounds]
        above = [QrT[s:e, e:] for s, e in bounds]  # inflow into level l from the levels above it

        def precondition(v):
            out = np.zeros_like(v)
            for (s, e), lu, U in reversed(list(zip(bounds, lus, above))):
                out[s:e] = lu.solve(v[s:e] - U @ out[e:])
            return out

        def matvec(x):
            y = QrT @ x
            y[-1] = x.sum()
            return y

        A = spla.LinearOperator((m, m), matvec=matvec, dtype=float)
        M = spla.LinearOperator((m, m), matvec=precondition, dtype=float)
        b = np.zeros(m)
        b[-1] = 1.0
        restart = min(m, 60)
        x, info = spla.gmres(A, b, M=M, rtol=rtol, atol=0.0, restart=restart, maxiter=20)
    if info != 0:
        raise RuntimeError(f"GMRES did not reach rtol {rtol} in {20 * restart} steps")
    return x


@dataclass
class PauseMeasures:
    """The performance measures of §III.B (rates in packets/s, times in s, probabilities in 0..1)."""

    EQ1: float
    EQ2: float
    EW1: float
    EW2: float
    lambda_effec_1: float
    lambda_loss_1: float
    P1: float
    lambda_effec_2: float
    lambda_loss_2: float
    P2: float
    throughput: float  # = lambda_effec_2
    throughput_via_queue1: float  # = lambda_effec_1 * (1 - P2)
    throughput_via_departures: float  # = nu * P(j > 0)
    n_states: int = 0
    n_recurrent: int = 0
    solve_s: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def measures(p: PauseParams, pi: np.ndarray) -> PauseMeasures:
    """The measures of §III.B from a stationary distribution over all states (index as `state_index`)."""
    i, j, k, a = _states(p)
    lam = np.asarray(p.lam, dtype=float)[a - 1]
    EQ1 = float(pi @ i)
    EQ2 = float(pi @ j)
    le1 = float(pi[i < p.B1] @ lam[i < p.B1])
    ll1 = float(pi[i == p.B1] @ lam[i == p.B1])
    serve = np.where(k == 1, p.mu1, p.mu2)
    busy1 = i > 0
    le2 = float(pi[busy1 & (j < p.B2)] @ serve[busy1 & (j < p.B2)])
    ll2 = float(pi[busy1 & (j == p.B2)] @ serve[busy1 & (j == p.B2)])
    P1 = ll1 / (le1 + ll1)
    P2 = ll2 / (le2 + ll2) if le2 + ll2 > 0 else 0.0
    return PauseMeasures(
        EQ1=EQ1,
        EQ2=EQ2,
        EW1=EQ1 / le1,
        EW2=EQ2 / le2 if le2 > 0 else 0.0,
        lambda_effec_1=le1,
        lambda_loss_1=ll1,
        P1=P1,
        lambda_effec_2=le2,
        lambda_loss_2=ll2,
        P2=P2,
        throughput=le2,
        throughput_via_queue1=le1 * (1.0 - P2),
        throughput_via_departures=p.nu * float(pi[j > 0].sum()),
        n_states=p.n_states,
    )


def solve(p: PauseParams, method: str = "auto") -> PauseMeasures:
    """Generator, stationary distribution and measures for one instance (method: see `stationary`)."""
    p = p.validate()
    t0 = time.perf_counter()
    Q = generator(p)
    rec = recurrent_states(p, Q)
    pi = stationary(Q, rec, blocks=_states(p)[3][rec], method=method)
    m = measures(p, pi)
    m.n_recurrent = int(rec.size)
    m.solve_s = time.perf_counter() - t0
    return m


def gain(p: PauseParams) -> tuple[float, PauseMeasures, PauseMeasures]:
    """PAUSE gain in percent: throughput with (T1, T2) against throughput with T1 = B2 (no hop-by-hop control)."""
    p = p.validate()
    with_pause = solve(p)
    without = solve(p.without_pause())
    g = 100.0 * (with_pause.throughput - without.throughput) / without.throughput
    return g, with_pause, without


# The model curves of Figs. 4–7 (μ1 = 100, μ2 = 2, ν = 15, B1 = 10, B2 = 20, λ_N = 1). The text gives
# λ1 = 25 for Figs. 5–6, λ = (50, 1) and (50, 25, 1) for Fig. 7, and "varying λ1" for Fig. 4 (25 and 50 are the
# values used elsewhere; 100 = μ1 is the heaviest load). It prints no thresholds for Figs. 4 and 7 and no T1 for
# Fig. 5: we use T1 = T2 = 15 (75 % of B2, the paper's optimum "about 70–80 % of buffer size") and T1 = 15 in
# Fig. 5; Figs. 5–6 use RTT = 1 s. RTTs: the paper's simulations go from 0.1 s up.
RTTS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
FIGURES = {
    "fig4": {"x": "rtt", "values": RTTS,
             "curves": {f"lambda1={l1:g}": {"lam": (float(l1), 1.0), "T1": 15, "T2": 15} for l1 in (25, 50, 100)}},
    "fig5": {"x": "T2", "values": tuple(range(1, 16)),
             "curves": {"T1=15": {"lam": (25.0, 1.0), "T1": 15, "rtt": 1.0}}},
    "fig6": {"x": "T1=T2", "values": tuple(range(2, 21)),
             "curves": {"lambda1=25": {"lam": (25.0, 1.0), "rtt": 1.0}}},
    "fig7": {"x": "rtt", "values": RTTS,
             "curves": {"N=2": {"lam": (50.0, 1.0), "T1": 15, "T2": 15},
                        "N=3": {"lam": (50.0, 25.0, 1.0), "T1": 15, "T2": 15}}},
}


def figure_curves(name: str, increase_when_down: bool = False) -> dict[str, list[tuple[float, float]]]:
    """The model curve(s) of one figure: {label: [(x, gain %), ...]}."""
    if name not in FIGURES:
        raise field_error("figure", name, "one of " + ", ".join(FIGURES))
    fig = FIGURES[name]
    curves = {}
    for label, base in fig["curves"].items():
        points = []
        for x in fig["values"]:
            kw = dict(base)
            if fig["x"] == "rtt":
                kw["rtt"] = float(x)
            elif fig["x"] == "T2":
                kw["T2"] = int(x)
            else:
                kw["T1"] = kw["T2"] = int(x)
            g, _, _ = gain(PauseParams(increase_when_down=increase_when_down, **kw))
            points.append((float(x), g))
        curves[label] = points
    return curves


def linear_rates(lam1: float, lamN: float, N: int) -> tuple[float, ...]:
    """N rate levels from λ1 down to λN, evenly spaced (the paper found linear vs not to matter little)."""
    if N < 1:
        raise InputError(f"N: got {N!r}; expected an integer ≥ 1")
    if N == 1:
        return (float(lam1),)
    return tuple(float(x) for x in np.linspace(lam1, lamN, N))
