"""Issue 19's fixes on the real packages that showed them (PyPI sdists; marker ``realrepo``).

- marshmallow 4.4.0: a parametrized id holding ``datetime.now()`` is never a reliable test; field
  classes used at import time by test-module schemas cover those modules' tests, and a delete whose
  names every test module needs at import time is rejected before any run.
- markdown 3.11.3: tests using ``subTest`` (second call records) leave the reliable set; a deletion that
  makes ``BlockParser.parseBlocks`` loop is killed after k x the baseline's suite time, not 900 s.
- python-dateutil 4.0.0: a test inherited from ``TzFoldMixin`` is hidden where it is defined.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from generators.candidates import covering_tests, propose
from generators.hidden_tests import hide_tests
from generators.registry import all_strategies
from sandboxes.selection import make_sandbox
from taskforge.core.outcomes import RejectReason
from taskforge.core.settings import Settings
from taskforge.profile.build import build_profile
from taskforge.validate.from_baseline import run_limit_s
from taskforge.validate.steps import CandidateJob, validate_candidate

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]


def _settings(**over: object) -> Settings:
    return Settings.load({"work_dir": str(Settings.load().work_dir), **over})


def _profile(source: str, tmp: Path, runs: int) -> tuple[object, Path]:
    settings = _settings()
    profile = build_profile(source, settings, make_sandbox(settings), runs=runs)
    profile.save(tmp / "profile")
    return profile, tmp / "profile"


@pytest.fixture(scope="module")
def marshmallow(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    return _profile("pypi:marshmallow==4.4.0", tmp_path_factory.mktemp("mm"), runs=2)


@pytest.fixture(scope="module")
def markdown(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    return _profile("pypi:markdown==3.11.3", tmp_path_factory.mktemp("md"), runs=1)


def _candidate(profile: object, cid: str) -> object:
    cands, _ = propose(profile, list(all_strategies().values()))
    return next(c for c in cands if c.candidate_id == cid)


def test_marshmallow_datetime_now_ids_are_never_reliable(marshmallow: tuple[object, Path]) -> None:
    profile, _ = marshmallow
    family = "tests/test_deserialization.py::TestFieldDeserialization::test_invalid_datetime_deserialization["
    dated = [t for t in profile.baseline.all_tests if t.startswith(family) and ":" in t.split("[", 1)[1]]
    assert len(dated) >= 2  # 2 per run (two formats of now()), each run names them differently
    assert not [t for t in dated if t in profile.baseline.reliable]
    assert f"{family}not-a-datetime]" in profile.baseline.reliable  # the fixed ids of the family stay


def test_marshmallow_import_time_uses_cover_and_reject_up_front(marshmallow: tuple[object, Path]) -> None:
    profile, pdir = marshmallow
    lst = profile.index.entity("marshmallow.fields.List")
    by_body = profile.coverage.tests_for_entity(lst, among=profile.baseline.reliable)
    covering = covering_tests(lst, profile)
    # tests/base.py's schemas build fields.List at import; conftest imports it: every test needs it
    assert "tests/test_context.py::TestContext::test_context_function" in covering - by_body
    res = validate_candidate(CandidateJob(str(pdir), _candidate(profile, "delete:marshmallow.fields.Mapping"),
                                          _settings().to_dict()))
    assert res.rejected is not None and res.rejected.reason is RejectReason.IMPORT_BROKEN, res.outcome
    # decided without a test run (counted, not timed: a wall-clock bound failed a CI run on a loaded machine)
    assert "import time" in res.rejected.detail and res.runs == 0 and res.test_seconds == 0.0


def test_markdown_subtest_records_are_merged_not_forged(markdown: tuple[object, Path]) -> None:
    """unittest ``subTest`` gives one record per sub-case; the ledger merges them (worst outcome wins), so
    markdown's subtest tests are ordinary reliable tests, not a forged run."""
    profile, _ = markdown
    toc = "tests/test_syntax/extensions/test_toc.py::TestTOC::testHTMLAttributeWithAngleBracket"
    assert toc in profile.baseline.reliable and not profile.baseline.flaky
    assert "tests/test_syntax/extensions/test_toc.py::TestTOC::testTOCMarker" in profile.baseline.reliable


def test_markdown_looping_deletion_is_killed_after_k_times_the_suite(markdown: tuple[object, Path]) -> None:
    profile, pdir = markdown
    settings = _settings(run_limit_factor=1.0, run_limit_margin_s=10.0)
    limit = run_limit_s(profile.baseline, settings)
    assert limit < 0.2 * settings.test_timeout_s
    cand = _candidate(profile, "delete:markdown.blockprocessors.ReferenceProcessor.run")
    start = time.monotonic()
    res = validate_candidate(CandidateJob(str(pdir), cand, settings.to_dict()))
    took = time.monotonic() - start
    assert res.rejected is not None and res.rejected.reason is RejectReason.TIMEOUT, res.outcome
    assert took < 3 * limit + 30, (took, limit)


def test_dateutil_mixin_tests_are_hidden_where_defined(tmp_path: Path) -> None:
    dl = tmp_path / "dl"
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                           "-d", str(dl), "python-dateutil==4.0.0"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-500:]
    with tarfile.open(next(dl.glob("python_dateutil-4.0.0.tar.gz"))) as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / "python_dateutil-4.0.0"
    f2p = [f"tests/test_tz.py::{cls}::testFoldPositiveUTCOffset" for cls in ("TZRangeTest", "TZStrTest")]
    hidden = hide_tests(root, f2p)
    assert hidden.unmatched == () and set(hidden.inherited) == set(f2p)
    after = hidden.files_after["tests/test_tz.py"]
    compile(after, "test_tz.py", "exec")
    before = (root / "tests/test_tz.py").read_text()
    # TzFoldMixin's copy goes; TzWinFoldMixin's (inherited by other classes) and every other test stay
    assert after.count("def testFoldPositiveUTCOffset") == before.count("def testFoldPositiveUTCOffset") - 1
    assert after.count("    def test") == before.count("    def test") - 1


def test_isodate_positional_ids_of_a_set_parametrization_are_never_reliable(tmp_path: Path) -> None:
    """isodate 0.7.2: ``TEST_CASES`` is a set holding None, so ``test_format[...-expected23-...]`` names another
    case in every process; ids that coincided across the baseline runs were kept, and 0 of 50 decided candidates
    became tasks (32 PASS_TO_PASS ids missing in every validation)."""
    profile, _ = _profile("pypi:isodate==0.7.2", tmp_path, runs=2)
    positional = [t for t in profile.baseline.all_tests
                  if t.startswith(("tests/test_date.py::test_format[", "tests/test_date.py::test_parse["))
                  and "-expected" in t and not t.split("-expected", 1)[1].startswith("None")]
    assert len(positional) >= 40, sorted(profile.baseline.all_tests)[:5]
    assert not [t for t in positional if t in profile.baseline.reliable]
    assert "tests/test_duration.py::test_format" in profile.baseline.reliable or any(
        t.startswith("tests/test_duration.py::") for t in profile.baseline.reliable)


def test_jsonpointer_cli_tests_cover_what_their_child_process_runs(tmp_path: Path) -> None:
    """jsonpointer 3.12's CommandLineTests run ``bin/jsonpointer`` in a child process with an environment of
    their own (``PYTHONPATH=root``): 6 of them covered jsonpointer.py (the ones using runpy in-process), and
    deleting what the CLI runs was rejected as a red PASS_TO_PASS test."""
    profile, _ = _profile("pypi:jsonpointer==3.12", tmp_path, runs=1)
    lines = profile.coverage.lines.get("jsonpointer.py", {})
    cli = {t for ids in lines.values() for t in ids if "::CommandLineTests::" in t}
    assert len(cli) >= 25, sorted(cli)
    assert profile.baseline.counts()["passed"] == 92, sorted(profile.baseline.failed)  # plain pytest's 92


def test_fastjsonschema_grades_with_its_obsolete_cache_plugin_and_crlf_test_files(tmp_path: Path) -> None:
    """fastjsonschema 2.22.3 on held-out probe C: 0 tasks from 177 decided. pytest-cache 1.0 (entry point
    ``cacheprovider``) crashed every grading (71 gold_failed), and the setup_patch of a delete that removes a
    CRLF test file whole did not apply."""
    profile, pdir = _profile("pypi:fastjsonschema==2.22.3", tmp_path, runs=1)
    settings = _settings()
    for cid in ("stub:fastjsonschema.generator.serialize_regexes", "delete:fastjsonschema._factory"):
        for _ in range(3):
            res = validate_candidate(CandidateJob(str(pdir), _candidate(profile, cid), settings.to_dict()))
            # an open flake, seen in 3 full CI runs (sessions 31-33) and never alone: under the full suite's load a
            # gold grading of delete:fastjsonschema._factory fails all 69 tests of tests/test_common.py (repeat 1:
            # gold_failed, repeat 2: unstable; NOTES.md); the product rejects such a candidate (a lost task, not a
            # forged score), so it is validated again, at most 3 times
            if not (res.rejected is not None and res.rejected.reason.value in ("gold_failed", "unstable")
                    and "69 of" in res.rejected.detail):
                break
        assert res.task is not None, res.rejected
