"""Tests that run ``python -m pkg`` in a child process cover what ``pkg/__main__.py`` reaches."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from generators.cli_tests import cli_tests
from generators.static_index import build_index
from taskforge.core import patches
from taskforge.core.environment import EnvSpec

SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",))
TESTS = '''import subprocess
import sys


def test_cli():
    out = subprocess.check_output([sys.executable, "-m", "pkg", "x"], text=True)
    assert out == "X\\n"


class TestMore:
    def test_shell(self):
        subprocess.run("python -m pkg y", shell=True, check=True)

    def test_plain(self):
        assert True
'''


def test_cli_tests_cover_what_main_reaches_and_nothing_else(tmp_path: Path) -> None:
    patches.write_tree({
        "pkg/__init__.py": "",
        "pkg/core.py": "def shout(s):\n    return s.upper()\n\n\ndef unrelated(s):\n    return s\n",
        "pkg/__main__.py": "import sys\nfrom .core import shout\n\n\ndef main():\n    print(shout(sys.argv[1]))\n\n\n"
                           "if __name__ == '__main__':\n    main()\n",
        "tests/test_cli.py": TESTS,
    }, tmp_path)
    index = build_index(tmp_path, SPEC)
    reliable = frozenset({"tests/test_cli.py::test_cli", "tests/test_cli.py::TestMore::test_shell",
                          "tests/test_cli.py::TestMore::test_plain"})
    profile = SimpleNamespace(index=index, repo_dir=tmp_path, baseline=SimpleNamespace(reliable=reliable))
    spawning = {"tests/test_cli.py::test_cli", "tests/test_cli.py::TestMore::test_shell"}
    assert cli_tests(index.entity("pkg.core.shout"), profile) == spawning
    assert cli_tests(index.entity("pkg.__main__.main"), profile) == spawning
    assert cli_tests(index.entity("pkg.core"), profile) == spawning  # a module: any of its entities reached
    assert cli_tests(index.entity("pkg.core.unrelated"), profile) == frozenset()


def test_no_main_module_means_no_cli_tests(tmp_path: Path) -> None:
    patches.write_tree({"pkg/__init__.py": "def f(x):\n    return x\n", "tests/test_cli.py": TESTS}, tmp_path)
    index = build_index(tmp_path, SPEC)
    profile = SimpleNamespace(index=index, repo_dir=tmp_path,
                              baseline=SimpleNamespace(reliable=frozenset({"tests/test_cli.py::test_cli"})))
    assert cli_tests(index.entity("pkg.f"), profile) == frozenset()


SCRIPT_TESTS = '''import subprocess
import sys


def test_script():
    cmd = [sys.executable, "pkg/__init__.py", "x"]
    assert subprocess.check_output(cmd, text=True) == "X\\\\n"


def test_reads_the_file_only():
    assert open("pkg/__init__.py").read()
'''


def test_a_test_running_a_module_file_as_a_script_covers_what_its_main_block_reaches(tmp_path: Path) -> None:
    """tabulate 0.10.0: ``[sys.executable, "tabulate/__init__.py", ...]`` in 7 tests of test/test_cli.py; they
    covered nothing, went red as PASS_TO_PASS, and 37 of 48 decided candidates were rejected for it."""
    patches.write_tree({
        "pkg/__init__.py": ("import sys\n\n\ndef shout(s):\n    return _up(s)\n\n\ndef _up(s):\n    return s.upper()\n\n\n"
                            "def unrelated(s):\n    return s\n\n\ndef _main():\n    print(shout(sys.argv[1]))\n\n\n"
                            "if __name__ == '__main__':\n    _main()\n"),
        "tests/test_script.py": SCRIPT_TESTS,
    }, tmp_path)
    index = build_index(tmp_path, SPEC)
    reliable = frozenset({"tests/test_script.py::test_script", "tests/test_script.py::test_reads_the_file_only"})
    profile = SimpleNamespace(index=index, repo_dir=tmp_path, baseline=SimpleNamespace(reliable=reliable))
    assert cli_tests(index.entity("pkg._up"), profile) == {"tests/test_script.py::test_script"}  # transitively
    assert cli_tests(index.entity("pkg._main"), profile) == {"tests/test_script.py::test_script"}
    assert cli_tests(index.entity("pkg.unrelated"), profile) == frozenset()  # the main block never reaches it
