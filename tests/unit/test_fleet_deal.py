"""The fleet's pure parts (experiments/run/fleet.py): a member's share as `--pairs` carries it, and what members
must agree on before a run (the real fleet is tests/host/test_fleet.py)."""
import pytest

from ccrig.errors import InputError
from ccrig.experiments.run.fleet import pair_arg, parse_pairs
from ccrig.experiments.run.members import disagreements, laws_sha256


def test_pairs_go_to_a_member_and_come_back_the_same():
    pairs = [(3, 0), (0, 2, "baseline"), (12, 7)]
    assert parse_pairs(pair_arg(pairs)) == pairs


@pytest.mark.parametrize("bad", ["3", "a:1", "1:2:3:4", "1:-2", ""])
def test_a_bad_pair_is_named(bad):
    with pytest.raises(InputError, match=r"--pairs: got .*POINT:REPETITION"):
        parse_pairs(bad)


def test_members_on_two_kernels_are_named_with_their_kernels():
    same = {"kernel": "6.1.0-26-amd64", "laws_sha256": "ab" * 32}
    assert disagreements({"a": same, "b": dict(same)}) == []
    out = disagreements({"a": same, "b": {**same, "kernel": "6.12.9"}, "c": {**same, "laws_sha256": "cd" * 32}})
    assert out == ["kernel differs: 6.1.0-26-amd64 on a, c; 6.12.9 on b",
                   f"laws_sha256 differs: {'ab' * 8} on a, b; {'cd' * 8} on c"]


def test_the_laws_digest_is_of_their_sources():
    assert len(laws_sha256()) == 64 and laws_sha256() == laws_sha256()
