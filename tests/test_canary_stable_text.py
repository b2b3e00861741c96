"""Gradings of one task read the hidden files' shape once: ``plant_canaries`` works on a stable text.

Every grading writes the hidden files with a fresh strict-equality name, seal name and seal tokens, so the
texts differ and every cache keyed on them missed: on idna 3.20 the parent re-parsed and re-walked a 1.4 MB
test file for every grading (half of the generate process's CPU samples while no test ran). The volatile
parts are now replaced by same-length stand-ins before any reading of the file's shape; the copies are still
cut from the real text, so they call the grading's own names.
"""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import pytest

from taskforge.core import pyparse
from taskforge.reward import canaries
from taskforge.reward.seals import SealSite, seal_source
from taskforge.reward.strict_asserts import strict_source

TESTS = "\n".join(
    [f"def test_value_{i}():\n    assert compute({i}) == 'v{i:03d}'\n    assert other({i}) == {i * 7}\n"
     for i in range(40)]
    + [f"def test_plain_{i}():\n    assert compute({i}) is not None\n" for i in range(10)])


def _grading_workspace(root: Path) -> tuple[Path, str, str, tuple[str, ...]]:
    """A workspace as one grading writes it: strict names, a seal name and tokens all fresh."""
    ws = root / f"ws-{secrets.token_hex(3)}"
    (ws / "tests").mkdir(parents=True)
    (ws / "pkg").mkdir()
    (ws / "pkg" / "__init__.py").write_text("def compute(x):\n    raise NotImplementedError\n")
    strict, seal = f"_tfq{secrets.token_hex(5)}", f"_tfs{secrets.token_hex(5)}"
    tokens: dict[str, SealSite] = {}
    text = seal_source(TESTS, "tests/test_pkg.py", {f"test_value_{i}": None for i in range(0, 40, 2)}, seal,
                       tokens=tokens, transform=lambda t: strict_source(t, strict))
    (ws / "tests" / "test_pkg.py").write_text(text)
    return ws, strict, seal, tuple(tokens)


def _plant(ws: Path, strict: str, seal: str, tokens: tuple[str, ...], seed: int) -> canaries.CanaryPlan:
    f2p = [f"tests/test_pkg.py::test_value_{i}" for i in range(40)]
    p2p = [f"tests/test_pkg.py::test_plain_{i}" for i in range(10)]
    return canaries.plant_canaries(ws, ["tests/test_pkg.py"], fail_to_pass=f2p, pass_to_pass=p2p, strict_eq=strict,
                                   seal=seal, tokens=tokens, rng=random.Random(seed))


def test_the_second_grading_reads_nothing_again_and_its_copies_call_its_own_names(tmp_path: Path) -> None:
    first = _grading_workspace(tmp_path)
    _plant(*first, seed=1)
    parses = pyparse.parse
    calls: list[int] = []

    def counting(source, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(source))
        return parses(source, *args, **kwargs)

    facts = canaries._facts_of.cache_info()
    ws, strict, seal, tokens = _grading_workspace(tmp_path)
    assert strict != first[1] and set(tokens).isdisjoint(first[3])
    pyparse.parse = counting  # type: ignore[assignment]
    try:
        plan = _plant(ws, strict, seal, tokens, seed=2)
    finally:
        pyparse.parse = parses  # type: ignore[assignment]
    assert not [n for n in calls if n > 1000], "the hidden file was parsed again"
    assert canaries._facts_of.cache_info().misses == facts.misses
    text = (ws / "tests" / "test_pkg.py").read_text()
    stand_in = strict[:4] + "0" * (len(strict) - 4)
    assert stand_in not in text and "0" * 12 not in text  # no stand-in reached a workspace
    copies = [src for nodeid, src in plan.sources.items() if nodeid.startswith("tests/test_pkg.py::")]
    assert copies and any(strict in c for c in copies)  # changed copies assert with this grading's name
    compile(text, "test_pkg.py", "exec")


def test_a_literal_that_looks_like_a_token_is_left_as_it_is() -> None:
    volatile = canaries._Volatile.of("_tfqabcdefabcd", "_tfs0123456789", ["a1b2c3d4e5f6"])
    text = "x = 'a1b2c3d4e5f6'\ny = 'ffffffffffff'\n_tfqabcdefabcd(1, 2)\n_tfs0123456789((g()), 'a1b2c3d4e5f6')\n"
    stable = volatile.stable(text)
    assert len(stable) == len(text) and stable.splitlines()[1] == "y = 'ffffffffffff'"
    assert "a1b2c3d4e5f6" not in stable and "_tfqabcdefabcd" not in stable


def test_another_candidate_reads_only_the_units_its_seals_changed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidates of one repository seal different assertions of the same file: its text differs, most of its
    units do not, and what a unit's own text decides is read once (``_unit_fact``)."""
    def workspace(sealed: range) -> tuple[Path, str, str, tuple[str, ...]]:
        ws = tmp_path / f"ws-{secrets.token_hex(3)}"
        (ws / "tests").mkdir(parents=True)
        strict, seal = f"_tfq{secrets.token_hex(5)}", f"_tfs{secrets.token_hex(5)}"
        tokens: dict[str, SealSite] = {}
        text = seal_source(TESTS, "tests/test_pkg.py", {f"test_value_{i}": None for i in sealed}, seal,
                           tokens=tokens, transform=lambda t: strict_source(t, strict))
        (ws / "tests" / "test_pkg.py").write_text(text)
        return ws, strict, seal, tuple(tokens)

    _plant(*workspace(range(0, 40, 2)), seed=3)
    ends = canaries._ends_on_its_own
    read: list[str] = []

    def counting(fn):  # type: ignore[no-untyped-def]
        read.append(fn.name)
        return ends(fn)

    monkeypatch.setattr(canaries, "_ends_on_its_own", counting)
    _plant(*workspace(range(0, 40, 4)), seed=4)
    assert sorted(read) == sorted(f"test_value_{i}" for i in range(2, 40, 4))  # the 10 units now unsealed


def test_the_units_with_an_expected_literal_are_read_once_per_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which FAIL_TO_PASS tests can have a block (``_twinnable``) is the same for every grading and estimate of a
    file: each unit's literals are read once, not once per call (idna 3.20: 6,000 units, 55 calls)."""
    read: list[str] = []
    real = canaries._sites
    monkeypatch.setattr(canaries, "_sites", lambda fn, strict="": read.append(fn.name) or real(fn, strict))
    source = TESTS + "\n\ndef test_zz_not_a_block():\n    assert compute(99) == 'once'\n"
    f2p = [f"tests/test_once.py::test_value_{i}" for i in range(40)] + ["tests/test_once.py::test_zz_not_a_block"]
    first = canaries.forge_chance({"tests/test_once.py": source}, f2p, "_q")
    sites_read = len(read)
    assert canaries.forge_chance({"tests/test_once.py": source}, f2p, "_q") == first
    assert canaries.forge_chance({"tests/test_once.py": source}, f2p, "_other") == first  # the name is not in it
    assert read.count("test_zz_not_a_block") == 1 and len(read) > sites_read  # the blocks' own reads only
