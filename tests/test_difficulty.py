"""The documented difficulty score: bounds, monotonicity, tier ordering."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from generators.deletion import Deletion
from generators.difficulty import band, difficulty_of, score

_ints = st.integers(min_value=0, max_value=10_000)


@given(tier=st.integers(0, 2), stm=_ints, cx=_ints, ent=st.integers(1, 500), fo=_ints, files=st.integers(1, 50),
       fi=_ints, f2p=_ints)
def test_score_in_unit_interval_and_monotone(tier, stm, cx, ent, fo, files, fi, f2p) -> None:
    s = score(tier, stm, cx, ent, fo, files, fi, f2p)
    assert 0.0 <= s <= 1.0
    assert score(tier, stm + 5, cx, ent, fo, files, fi, f2p) >= s
    assert score(min(tier + 1, 2), stm, cx, ent, fo, files, fi, f2p) >= s


def test_known_values() -> None:
    assert score(0, 0, 0, 1, 0, 1, 0, 0) == 0.0
    assert score(2, 10**6, 10**6, 10**6, 10**6, 10**6, 10**6, 10**6) == 1.0
    assert score(1, 0, 0, 1, 0, 1, 0, 0) == 0.125  # tier weight 0.25 * 1/2
    assert band(0.1) == "easy" and band(0.5) == "medium" and band(0.9) == "hard"


def test_difficulty_of_a_deletion() -> None:
    d = Deletion(strategy="module", target="p.m", deleted=("p.m", "p.m.f"), files_before={"p/m.py": "x"},
                 files_after={"p/m.py": None, "p/__init__.py": "y"}, lines_deleted=40, statements_deleted=12,
                 complexity=5, fan_in=2, fan_out=7)
    diff = difficulty_of(d, fail_to_pass=3)
    assert (diff.tier, diff.entities_deleted, diff.files_touched, diff.fail_to_pass) == (2, 2, 2, 3)
    assert diff.score == score(2, 12, 5, 2, 7, 2, 2, 3)
    stub = difficulty_of(Deletion("stub", "p.f", ("p.f",), {}, {}, 40, 12, 5, 2, 7), fail_to_pass=3)
    assert stub.score < diff.score
