"""Which hidden tests' changed copies pass on the original code: no grading plants changed copies of them.

A must-fail canary is a copy of a test with one expected literal changed (``reward.canaries._mutated``); a
grading whose run passes it is flagged tampering. Where the project's ``==`` is lenient, working code passes
it: pyasn1 0.6.5's ``BitString`` equals ``(1, 0, 7)`` where it holds ``(1, 0, 1)``, and a task accepted after
one lucky gold grading scored 0 in 3 of 5 gradings of its own gold patch (``must-fail canary ... reported
passed``). For RL that is noise on the reward of correct solutions.

``unchangeable_tests`` plants ``CALIBRATION_VARIANTS`` changed copies of every test of the hidden files that
can have them (``canaries.calibration_copies``) in a copy of the original repository, runs them once, and
returns the tests (ids at home) one of whose copies passed. The answer depends only on the file's text and the
original code, so it is kept per file in the profile directory (``calibration/<digest>.json``) and every
candidate of the repository that hides the same file reuses it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from taskforge.core.files import copy_ignore, write_atomic
from taskforge.core.testreport import Outcome
from taskforge.reward.canaries import CALIBRATION_VARIANTS, calibration_copies, classes_in

CACHE_DIR = "calibration"


def _digest(rel: str, text: str, named: frozenset[str] = frozenset()) -> str:
    return hashlib.sha256(f"{CALIBRATION_VARIANTS}\0{rel}\0{text}\0{sorted(named)}".encode()).hexdigest()[:24]


def unchangeable_tests(files: Mapping[str, str], repo: Path, run: Callable[[Path, tuple[str, ...]], Any],
                       cache_dir: Path | None = None, nodeids: Iterable[str] = ()) -> frozenset[str]:
    """The tests of ``files`` (home path -> original text) whose changed copies pass on the original code in
    ``repo``. ``run(workspace, node ids)`` runs tests and returns their ``TestReport``. A run that gives no
    verdict (a timeout, a crash) names no test: the copies then stay as they were. ``nodeids``: the suite's
    test ids at home; the classes they name are test classes (``canaries.classes_in``), as a grading takes
    the classes its task's ids name, a subset of these."""
    ids = tuple(nodeids)
    found: set[str] = set()
    todo: dict[str, tuple[str, str]] = {}
    named = {rel: classes_in(ids, rel) for rel in files}
    for rel, text in sorted(files.items()):
        digest = _digest(rel, text, named[rel])
        cached = cache_dir / f"{digest}.json" if cache_dir is not None else None
        if cached is not None and cached.is_file():
            try:
                found.update(json.loads(cached.read_text()))
                continue
            except (OSError, ValueError):
                pass
        todo[rel] = (text, digest)
    if not todo:
        return frozenset(found)
    planted: dict[str, str] = {}
    origin: dict[str, str] = {}
    for rel, (text, _) in todo.items():
        planted[rel], copies = calibration_copies(text, rel, named=named[rel])
        origin.update(copies)
    if not origin:
        answers: dict[str, set[str]] = {rel: set() for rel in todo}
    else:
        with tempfile.TemporaryDirectory(prefix="tf-calibrate-") as tmp:
            ws = Path(tmp, "ws")
            shutil.copytree(repo, ws, ignore=copy_ignore, symlinks=True)
            for rel, text in planted.items():
                (ws / rel).write_text(text, encoding="utf-8")
            report = run(ws, tuple(sorted(origin)))
        if report.timed_out or not report.results:
            return frozenset(found)
        passed = {origin[_copy_of(n, origin)] for n, o in report.outcomes().items()
                  if o is Outcome.PASSED and _copy_of(n, origin)}
        answers = {rel: {t for t in passed if t.split("::", 1)[0] == rel} for rel in todo}
    for rel, tests in answers.items():
        found.update(tests)
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(cache_dir / f"{todo[rel][1]}.json", json.dumps(sorted(tests)))
    return frozenset(found)


def _copy_of(nodeid: str, copies: Mapping[str, str]) -> str:
    """The copy id ``nodeid`` is (or is an instance of, ``copy[param]``); "" when none."""
    if nodeid in copies:
        return nodeid
    base = nodeid.split("[", 1)[0]
    return base if base in copies else ""


__all__ = ["CACHE_DIR", "unchangeable_tests"]
