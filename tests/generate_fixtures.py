"""Seams for the generator tests: a tiny project with a real test suite, and a host-interpreter sandbox.

``make_mini_project(root)`` writes ``minipkg``: a statistics module (functions worth a task, a trivial
one, an untested one), an optional text-formatting module that only its own tests use (a ``module``
candidate), and pytest tests for both. The pipeline's tests run it through ``sandboxes.fakes.HostSandbox``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sandboxes.fakes import HostSandbox

STATS = '''\
"""Small statistics helpers."""


def mean(xs):
    """Arithmetic mean of a non-empty sequence of numbers."""
    total = 0
    for x in xs:
        total += x
    return total / len(xs)


def spread(xs):
    """Largest minus smallest value."""
    lo = min(xs)
    hi = max(xs)
    return hi - lo


def ident(x):
    return x


def untested(x):
    """No test calls this."""
    y = x + 1
    return y * 2
'''

TEXTFMT = '''\
"""Text formatting that nothing else in the package needs."""


def title_words(text):
    """Capitalise every word of ``text``."""
    words = text.split()
    return " ".join(w.capitalize() for w in words)


def shout(text):
    """Upper-case ``text`` and add an exclamation mark."""
    loud = text.upper()
    return loud + "!"
'''

TEST_STATS = '''\
from minipkg.stats import ident, mean, spread


def test_mean_ints():
    assert mean([1, 2, 3]) == 2


def test_mean_floats():
    assert mean([0.5, 1.5]) == 1.0


def test_spread():
    assert spread([3, 9, 4]) == 6


def test_spread_single():
    assert spread([7]) == 0


def test_ident():
    assert ident(5) == 5
'''

TEST_TEXTFMT = '''\
from minipkg.textfmt import shout, title_words


def test_title_words():
    assert title_words("hello big world") == "Hello Big World"


def test_shout():
    assert shout("hey") == "HEY!"
'''

CHECKS = '''\
"""Input checks."""


def checked(xs):
    """Length of ``xs``; raise on an empty sequence."""
    if not xs:
        raise ValueError("empty")
    return len(xs)
'''

TEST_CHECKS = '''\
import pytest

from minipkg.checks import checked


def test_checked_rejects_empty():
    with pytest.raises(Exception):
        checked([])
'''

PROJECT = {
    "minipkg/__init__.py": '"""A mini package for generator tests."""\n',
    "minipkg/stats.py": STATS,
    "minipkg/textfmt.py": TEXTFMT,
    "tests/test_stats.py": TEST_STATS,
    "tests/test_textfmt.py": TEST_TEXTFMT,
}
# ``checked``'s only test passes whatever the body raises: a stub of it has no FAIL_TO_PASS test
WITH_CHECKS = {"minipkg/checks.py": CHECKS, "tests/test_checks.py": TEST_CHECKS}


def make_mini_project(root: Path, extra: dict[str, str] | None = None) -> Path:
    """Write ``minipkg`` (plus ``extra`` files) under ``root``; returns ``root``."""
    for rel, text in {**PROJECT, **(extra or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def main(argv: list[str]) -> int:
    """``python tests/generate_fixtures.py SRC OUT WORK_DIR``: generate through ``HostSandbox``.

    Prints ``validated N`` (candidates validated by this run, journaled ones excluded) as its last line;
    the resume test kills it with SIGKILL and runs it again.
    """
    from taskforge.core.settings import Settings
    from taskforge.pipeline.executors import SyncExecutor
    from taskforge.pipeline.generate import GenerateOptions, generate
    from taskforge.pipeline.stopping import stop_on_sigterm

    src, out, work = argv[1:4]
    settings = Settings.load({"work_dir": work, "baseline_runs": 2, "test_timeout_s": 300})
    validated = []

    def emit(event: str, data: dict) -> None:
        if event == "candidate":
            validated.append(data)
            print(f"candidate accepted={data['accepted']}", flush=True)  # the stop tests wait for one

    with stop_on_sigterm():
        summaries = generate([src], Path(out), settings, GenerateOptions(max_candidates=6), SyncExecutor(),
                             emit=emit, sandbox=HostSandbox())
    for s in summaries:
        if s.error:
            print(f"error {s.error}", flush=True)
    print(f"validated {len(validated)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv))
