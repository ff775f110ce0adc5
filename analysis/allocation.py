"""Where a study's next repetitions go: the undecided claims' needs (analysis/sequential.judge) priced and funded
within what is left of the budget (the engine's loop: experiments/run/budget.py). Which points get more comes from
the spread and the margin, never from an observed difference (sequential's docstring says why)."""
from __future__ import annotations

import math

# `Judgement` in the annotations is analysis/sequential.Judgement (not imported: sequential reads by_unit from here)
STEP_SHARE = 0.5     # of a round's budget for every claim's step (next_pairs); the rest decides whole claims


def next_pairs(judgements: list[Judgement], budget_left_s: float, cost_s: dict[str, float] | float = 1.0
               ) -> list[tuple[str, int]]:
    """More repetitions where undecided claims that can still look again need them: three passes within the
    budget (a fourth in the last round: the claims' next look is their last), each funding claims the cheapest
    first (what its asks add to the repetitions given so far, priced):
      1. a step for every claim, its needs capped at doubling each point, within STEP_SHARE of the budget (study
         001 run J's second round went whole to two claims' 66 pairs; three claims whose planned 118 a point no
         round could pay kept 3); the claims a step completes first;
      2. whole claims, so a round decides as many as it can (by points alone, run E's second round went whole to
         one point one claim needed 119 more of, while claims needing 1-23 got none);
      3. the points still wanted, all by the same share of their wants when the budget cannot pay them all
         (study 001 run AP's second look: the point two claims shared, its worth summed, took its 89 whole and
         left the 10-flow responsive point, whose six repetitions happened to agree, at its step: the claim could
         not be decided from one side), then one at a time, most informative first (a point's worth: the share of
         the undecided claims' variance its repetitions remove, per second of its cost) while one fits. In
         tests/unit/test_sequential.py's one-claim simulation the shares leave 7 % undecided at no difference
         (about 20 % before) and decide 94 % holds at a difference of the margin (86.5 %), the error rates as
         they were (3.9 % holds or fails at no difference; 2.0 % no-difference at the margin);
      4. the last round: no round follows it, so what the needs left unbought is spread over those claims' points, one
         repetition at a time to the point with the fewest, up to doubling each (study 000 runs Y and Z ended
         with 8.6 and 11.8 of 45 minutes unspent, a claim undecided in each: 80 % power is what a need aims at,
         not a ceiling).
    Needs come from the spread and margin (sequential.needs), steps from the repetitions so far: never the
    differences."""
    open_ = [j for j in judgements if j.verdict == "undecided" and not j.final and j.look < j.max_looks and j.needs]
    cost = (lambda k: cost_s.get(k, 1.0)) if isinstance(cost_s, dict) else (lambda k: float(cost_s))
    whole = {id(j): by_unit(j.needs) for j in open_}
    step = {id(j): _step(j, whole[id(j)]) for j in open_}
    given: dict[str, int] = {}
    # a step that is the claim's whole need may decide it; one that is a down payment on 156 more cannot: the
    # first go first (study 003 run K's first look stepped s5's 156-repetition claim and left three yes-or-no
    # claims, each three repetitions from a decision, at three)
    steps = STEP_SHARE * float(budget_left_s)
    unspent = _fund([j for j in open_ if step[id(j)] == whole[id(j)]], step, given, steps, cost)
    unspent = _fund([j for j in open_ if step[id(j)] != whole[id(j)]], step, given, unspent, cost)
    left = _fund(open_, whole, given, float(budget_left_s) - steps + unspent, cost)
    out = dict(given)
    for k, n in _most_informative(open_, given, left, cost):
        out[k] = out.get(k, 0) + n
        left -= n * cost(k)
    if open_ and all(j.look + 1 == j.max_looks for j in open_):
        for k, n in _fewest_first(open_, out, left, cost).items():
            out[k] = out.get(k, 0) + n
    return [(k, n) for k, n in out.items() if n > 0]


def _had(judgements: list[Judgement]) -> dict[str, int]:
    """The repetitions each point (unit) of these claims has had so far."""
    have: dict[str, int] = {}
    for j in judgements:
        for key, _, _, n, *_ in j.parts:
            have[unit(key)] = max(have.get(unit(key), 0), n)
    return have


def _step(j: Judgement, need: dict[str, int]) -> dict[str, int]:
    """A claim's needs capped at doubling each point's repetitions (a schedule no observed difference chose)."""
    have = _had([j])
    return {u: min(n, max(1, have.get(u, n))) for u, n in need.items()}


def _fund(claims: list[Judgement], asks: dict[int, dict[str, int]], given: dict[str, int], left: float, cost
          ) -> float:
    """Raises `given` to each claim's asks, the cheapest claim first, while the budget pays; returns what's left."""
    def extra(j: Judgement) -> float:
        return sum(max(0, n - given.get(u, 0)) * cost(u) for u, n in asks[id(j)].items())

    waiting = sorted(claims, key=lambda j: sorted(asks[id(j)].items()))   # ties: a fixed order, not the data's
    while waiting:
        j = min(waiting, key=extra)
        if extra(j) > left:
            break
        waiting.remove(j)
        left -= extra(j)
        for u, n in asks[id(j)].items():
            given[u] = max(given.get(u, 0), n)
    return left


def _fewest_first(judgements: list[Judgement], given: dict[str, int], left: float, cost) -> dict[str, int]:
    """`left` spread over the claims' points one repetition at a time, to the point with the fewest (had and
    given; ties by name), while one is affordable and no point gets more than doubled beyond what the needs
    gave it (a long --budget is an allowance, not an order to spend it on one claim): a schedule from the
    repetitions alone, no data's."""
    have = _had(judgements)
    extra: dict[str, int] = {}
    while True:
        affordable = [u for u in have if 0 < cost(u) <= left and extra.get(u, 0) < have[u] + given.get(u, 0)]
        if not affordable:
            return extra
        u = min(affordable, key=lambda u: (have[u] + given.get(u, 0) + extra.get(u, 0), u))
        extra[u] = extra.get(u, 0) + 1
        left -= cost(u)


def unit(point: str) -> str:
    """What a repetition of a point runs: a PAUSE point's run without PAUSE (SPEC#INDEX/baseline) is part of each
    of the point's pairs, and costs nothing beside it (priced apart, study 000 run D's rounds bought half what
    their share paid for, and 6 of its 30 minutes went unspent)."""
    return point.split("/", 1)[0]


def by_unit(need: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for point, n in need.items():
        out[unit(point)] = max(out.get(unit(point), 0), n)
    return out


def _most_informative(judgements: list[Judgement], given: dict[str, int], budget_left_s: float, cost
                      ) -> list[tuple[str, int]]:
    """The points' wants beyond `given`, most informative first, within the budget (see next_pairs)."""
    want: dict[str, int] = {}
    worth: dict[str, float] = {}
    for j in judgements:
        total = sum(c * c * v / n for _, c, v, n, *_ in j.parts if n > 0) or 1.0
        for key, coef, var, n, *_ in j.parts:
            u = unit(key)
            more = j.needs.get(key, 0) - given.get(u, 0)
            if more <= 0:
                continue
            want[u] = max(want.get(u, 0), more)
            n += given.get(u, 0)
            gain = coef * coef * var * (1 / n - 1 / (n + more)) / total if var > 0 else 1.0
            worth[u] = worth.get(u, 0.0) + gain
    order = sorted(want, key=lambda k: (-worth[k] / (want[k] * max(cost(k), 1e-9)), k))
    # the same share of every want, so a claim's points rise together as its needs (fewest first) planned them:
    # funding the most informative point whole starves the one whose few repetitions happened to agree
    price = sum(want[k] * cost(k) for k in order)
    share = min(1.0, float(budget_left_s) / price) if price > 0 else 1.0
    got = {k: math.floor(want[k] * share) for k in order}
    left = float(budget_left_s) - sum(n * cost(k) for k, n in got.items())
    while True:   # what the shares' rounding left, one repetition at a time, most informative first
        k = next((k for k in order if got[k] < want[k] and cost(k) <= left), None)
        if k is None:
            break
        got[k] += 1
        left -= cost(k)
    return [(k, got[k]) for k in order if got[k] > 0]
