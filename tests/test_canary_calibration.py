"""Changed copies of a test whose ``==`` is lenient pass on working code: validation finds those tests once per
file, and no grading plants a must-fail changed copy of them.

pyasn1 0.6.5's ``BitString`` equals ``(1, 0, 7)`` where it holds ``(1, 0, 1)``; a task accepted after one gold
grading scored 0 in 3 of 5 gradings of its own gold patch ("must-fail canary ... reported passed").
"""

from __future__ import annotations

import random
from pathlib import Path

from sandboxes.fakes import SubprocessSandbox
from sandboxes.protocol import RunRequest
from taskforge.core.environment import EnvSpec
from taskforge.reward.canaries import calibration_copies, plant_canaries
from taskforge.validate.calibration import unchangeable_tests
from tests.fixtures_repos import write

BITS = """\
class Bits(tuple):
    def __eq__(self, other):  # any non-zero is a set bit, as pyasn1's BitString compares
        return tuple(bool(b) for b in self) == tuple(bool(b) for b in other)

    __hash__ = tuple.__hash__


def decode(n):
    return Bits(int(c) for c in bin(n)[2:])


def name(n):
    return f"bits-{n}"
"""
TESTS = """\
from bits import decode, name


def test_decode():
    assert decode(5) == (1, 0, 1)


def test_name():
    assert name(5) == "bits-5"


class TestMore:
    def test_decode_six(self):
        got = decode(6)
        assert got == (1, 1, 0)

    def test_name_six(self):
        assert name(6) == "bits-6"
"""
LINES = {"test_decode": 2, "test_name": 2, "test_decode_six": 3, "test_name_six": 2}
SPEC = EnvSpec(project_name="bits", python="3.11", install_target="", src_roots=(".",), package_dirs=(),
               test_paths=("tests",))


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, {"bits.py": BITS, "tests/test_bits.py": TESTS})
    return root


def _run(root: Path):
    sandbox = SubprocessSandbox()
    env = sandbox.prepare(SPEC, root)
    calls: list[tuple[str, ...]] = []

    def run(ws: Path, tests: tuple[str, ...]):
        calls.append(tests)
        return sandbox.run(env, ws, RunRequest(tests=tests, timeout_s=120)).report

    return run, calls


def test_calibration_names_the_tests_whose_changed_copies_pass_and_is_kept_per_file(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    text = (root / "tests/test_bits.py").read_text()
    planted, copies = calibration_copies(text, "tests/test_bits.py")
    assert len(copies) == 4 * 3 and set(copies.values()) == {
        "tests/test_bits.py::test_decode", "tests/test_bits.py::test_name",
        "tests/test_bits.py::TestMore::test_decode_six", "tests/test_bits.py::TestMore::test_name_six"}
    assert planted.startswith(text.split("\n\n\ndef test_name")[0])
    run, calls = _run(root)
    cache = tmp_path / "cache"
    found = unchangeable_tests({"tests/test_bits.py": text}, root, run, cache)
    # 0 -> 1..9 never holds (a bit goes from clear to set); 1 -> 2..9 always does: the last literal is drawn
    assert found == {"tests/test_bits.py::test_decode"} or found == {
        "tests/test_bits.py::test_decode", "tests/test_bits.py::TestMore::test_decode_six"}
    assert "tests/test_bits.py::test_decode" in found and not any("name" in t for t in found)
    assert len(calls) == 1 and (root / "tests/test_bits.py").read_text() == text  # run on a copy
    assert unchangeable_tests({"tests/test_bits.py": text}, root, run, cache) == found
    assert len(calls) == 1  # the second answer came from the profile's cache


def test_no_grading_plants_a_changed_copy_of_an_unchangeable_test(tmp_path: Path) -> None:
    f2p = ("tests/test_bits.py::test_name",)
    p2p = ("tests/test_bits.py::test_decode", "tests/test_bits.py::TestMore::test_decode_six",
           "tests/test_bits.py::TestMore::test_name_six")
    lenient = ("tests/test_bits.py::test_decode", "tests/test_bits.py::TestMore::test_decode_six")

    def changed_origins(unchangeable: tuple[str, ...]) -> set[str]:
        out: set[str] = set()
        for seed in range(40):
            ws = tmp_path / f"ws{seed}-{len(unchangeable)}"
            write(ws, {"bits.py": BITS, "tests/test_bits.py": TESTS})
            plan = plant_canaries(ws, ["tests/test_bits.py"], pass_to_pass=p2p, fail_to_pass=f2p,
                                  rng=random.Random(seed), unchangeable=unchangeable)
            # a changed copy has its original's lines (a copy with a failing check appended has one more)
            out |= {plan.origins[n][0] for n, want in plan.expect.items() if want == "fail" and n in plan.origins
                    and len(plan.sources[n].splitlines()) == LINES[plan.origins[n][0].rsplit("::", 1)[1]]}
        return out

    assert changed_origins(()) & set(lenient)  # without calibration: changed copies of the lenient tests
    assert changed_origins(lenient) == {"tests/test_bits.py::test_name", "tests/test_bits.py::TestMore::test_name_six"}


SPEC_TESTS = TESTS.replace("class TestMore:", "class MoreSpec:")  # mako-like: python_classes = ["*Spec"]
SPEC_IDS = ("tests/test_bits.py::MoreSpec::test_decode_six", "tests/test_bits.py::MoreSpec::test_name_six")


def test_a_class_the_ids_name_gets_copies_and_calibration_as_a_test_class(tmp_path: Path) -> None:
    """mako 1.4.3 collects ``FilterTest`` (``python_classes = ["*Test", "Test*"]``): the canaries took only
    ``Test*`` and ``TestCase`` classes as test classes, so no copy guarded a test of such a class."""
    _, copies = calibration_copies(SPEC_TESTS, "tests/test_bits.py")
    assert not any("MoreSpec" in v for v in copies.values())  # nothing names it: not a test class
    root = tmp_path / "repo"
    write(root, {"bits.py": BITS, "tests/test_bits.py": SPEC_TESTS, "pytest.ini": "[pytest]\npython_classes = *Spec\n"})
    run, calls = _run(root)
    found = unchangeable_tests({"tests/test_bits.py": SPEC_TESTS}, root, run, tmp_path / "cache", nodeids=SPEC_IDS)
    assert len(calls) == 1 and "tests/test_bits.py::MoreSpec::test_name_six" not in found
    ran = set(calls[0])
    assert any("MoreSpec::" in n for n in ran)  # its methods' changed copies were calibrated
    origins: set[str] = set()
    for seed in range(30):
        ws = tmp_path / f"ws{seed}"
        write(ws, {"bits.py": BITS, "tests/test_bits.py": SPEC_TESTS})
        plan = plant_canaries(ws, ["tests/test_bits.py"], pass_to_pass=("tests/test_bits.py::test_decode",),
                              fail_to_pass=SPEC_IDS, rng=random.Random(seed), unchangeable=tuple(found))
        origins |= {o[0] for o in plan.origins.values()}
    assert set(SPEC_IDS) & origins, origins
