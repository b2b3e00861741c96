"""The in-sandbox runner keeps pytest inside the workspace, even when the workspace sits in another project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes.ledger import read_ledger

RUNNER = Path(__file__).resolve().parents[1] / "sandboxes" / "runner" / "pytest_runner.py"


def _run(workspace: Path, scratch: Path) -> dict:
    request = {"args": ["tests"], "channel_path": str(scratch / "records.jsonl")}
    (scratch / "request.json").write_text(json.dumps(request))
    done = subprocess.run([sys.executable, str(RUNNER), str(scratch / "request.json")], cwd=workspace,
                          capture_output=True, timeout=120, check=False)
    return read_ledger((scratch / "records.jsonl").read_bytes(), exit_code=done.returncode, elapsed=0.0).to_dict()


def test_enclosing_project_config_and_conftest_are_ignored(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / "work" / "ws" / "tests").mkdir(parents=True)
    # an enclosing project whose config would break the run and whose conftest would fail everything
    (outer / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--no-such-option"\n')
    (outer / "conftest.py").write_text("import pytest\n@pytest.fixture(autouse=True)\ndef boom():\n    raise RuntimeError\n")
    ws = outer / "work" / "ws"
    (ws / "tests" / "test_a.py").write_text("def test_ok():\n    assert True\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    report = _run(ws, scratch)
    assert [(r["nodeid"], r["outcome"]) for r in report["results"]] == [("tests/test_a.py::test_ok", "passed")]


def test_workspace_config_is_still_used(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "setup.cfg").write_text("[tool:pytest]\npython_functions = check_*\n")
    (ws / "tests" / "test_b.py").write_text("def check_one():\n    assert True\n\ndef test_not_collected():\n    assert False\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    report = _run(ws, scratch)
    assert [r["nodeid"] for r in report["results"]] == ["tests/test_b.py::check_one"]


def test_a_native_tool_pytest_table_is_the_workspace_config_under_pytest_9(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """humanize 4.17.0 configures pytest 9's ``[tool.pytest]`` (addopts ``--doctest-modules``, testpaths src and
    tests); the runner saw no config, ran with an empty ini, and its 15 doctests in src/ were never collected
    (893 tests vs plain pytest's 908). pytest 8 does not read that table, so there the empty ini stays."""
    from sandboxes.runner.pytest_runner import _anchor_to_workspace

    (tmp_path / "pyproject.toml").write_text('[tool.pytest]\naddopts = ["--doctest-modules"]\n')
    monkeypatch.chdir(tmp_path)
    for version, empty_ini in (("9.2.0", False), ("8.4.2", True)):
        monkeypatch.setattr(pytest, "__version__", version)
        args = _anchor_to_workspace(["tests"], str(tmp_path))
        assert ("-c" in args) is empty_ini, (version, args)
        assert args[-3:] == ["--rootdir=.", "--confcutdir=.", "tests"]


def test_a_plugin_the_runner_loads_is_not_named_twice() -> None:
    """multidict's addopts ``-p pytest_cov`` (kept in grading runs) next to the runner's ``-p pytest_cov.plugin``
    stopped every grading with "Plugin already registered under a different name"."""
    from sandboxes.runner.pytest_runner import _drop_loaded_plugin_args

    loaded = {"pytest_cov", "pytest_cov.plugin"}
    assert _drop_loaded_plugin_args(["-p", "pytest_cov", "-ppytest_cov", "-p", "mine", "--pdb", "-p"], loaded) \
        == ["-p", "mine", "--pdb", "-p"]


def test_an_environment_plugin_blocked_by_its_entry_point_name_is_not_loaded_by_its_module() -> None:
    """fastjsonschema 2.22.3's test extra installs pytest-cache 1.0, entry point ``cacheprovider =
    pytest_cache``: the runner's ``-p no:cacheprovider`` was undone by the ``-p pytest_cache`` that loads
    the environment's plugins, and the plugin crashed every grading under pytest 9 (71 gold_failed, 0 tasks)."""
    from sandboxes.runner.pytest_runner import RUNNER_BLOCKED, _blocked_plugins, _env_plugins

    entries = [("cacheprovider", "pytest_cache"), ("randomly", "pytest_randomly"), ("mock", "pytest_mock"),
               ("xdist", "xdist.plugin"), ("cov", "pytest_cov.plugin")]
    blocked = (*RUNNER_BLOCKED, *_blocked_plugins(["-p", "no:xdist", "-pno:pytest_cov.plugin", "-p", "mine"]))
    assert _env_plugins(entries, blocked) == ["-p", "pytest_mock"]


def test_request_plugins_load_before_the_environment_plugins(tmp_path: Path) -> None:
    """A project that is itself a pytest plugin (pytest-mock) has its workspace module imported by the
    environment's ``-p``; the grading plugin, named by the request's ``-p``, must be imported first, so no code
    of a graded patch runs before it takes its snapshot. Before the fix the environment's plugins came first."""
    import site

    from sandboxes.runner.pytest_runner import _split_plugin_args

    assert _split_plugin_args(["-c", "x.ini", "-p", "_tfgab", "-pno:foo", "--pdb", "t.py::a", "-p"]) == \
        (["-p", "_tfgab", "-pno:foo"], ["-c", "x.ini", "--pdb", "t.py::a", "-p"])
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    venv_site = next(venv.glob("lib/python*/site-packages"))
    # this interpreter's packages (pytest) reach the venv through a .pth, outside the venv's own site-packages
    (venv_site / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    dist = venv_site / "myplug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nmyplug = myplug\n")
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_a.py").write_text("def test_ok():\n    assert True\n")
    seen = tmp_path / "seen.txt"
    (ws / "myplug.py").write_text(f"import sys\nopen({str(seen)!r}, 'w').write(str('_tfgfirst' in sys.modules))\n")
    (ws / "_tfgfirst.py").write_text("")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    request = {"args": ["-p", "_tfgfirst", "tests"], "channel_path": str(scratch / "records.jsonl"),
               "src_roots": [str(ws)]}
    (scratch / "request.json").write_text(json.dumps(request))
    done = subprocess.run([str(venv / "bin" / "python"), str(RUNNER), str(scratch / "request.json")], cwd=ws,
                          capture_output=True, timeout=120, check=False, env={"PATH": "/usr/bin:/bin"})
    report = read_ledger((scratch / "records.jsonl").read_bytes(), exit_code=done.returncode, elapsed=0.0)
    assert [(r.nodeid, r.outcome.value) for r in report.results] == [("tests/test_a.py::test_ok", "passed")], \
        done.stdout[-2000:]
    assert seen.read_text() == "True"  # the request's plugin was imported before the environment's


def test_the_runner_reports_the_workspace_files_imported_before_conftests(tmp_path: Path) -> None:
    """The ``preloaded`` record: workspace files already imported when pytest loads conftests (here by a
    ``-p`` plugin; for iniconfig, by pytest itself), never a test module or a conftest."""
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "pkg").mkdir()
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "early.py").write_text("X = 1\n")
    (ws / "pkg" / "late.py").write_text("Y = 2\n")
    (ws / "_plug.py").write_text("import pkg.early\n")
    (ws / "tests" / "conftest.py").write_text("import pkg.late\n")
    (ws / "tests" / "test_a.py").write_text("def test_ok():\n    assert True\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    request = {"args": ["-p", "_plug", "tests"], "channel_path": str(scratch / "records.jsonl"),
               "src_roots": [str(ws)]}
    (scratch / "request.json").write_text(json.dumps(request))
    done = subprocess.run([sys.executable, str(RUNNER), str(scratch / "request.json")], cwd=ws,
                          capture_output=True, timeout=120, check=False)
    report = read_ledger((scratch / "records.jsonl").read_bytes(), exit_code=done.returncode, elapsed=0.0)
    assert report.preloaded == ("_plug.py", "pkg/__init__.py", "pkg/early.py"), done.stdout[-2000:]
    assert [r.outcome.value for r in report.results] == ["passed"] and not report.flags


def test_coverage_contexts_are_test_functions_in_a_large_parametrized_suite(tmp_path: Path) -> None:
    """5,000+ tests at 4+ instances per function: one coverage context per test function (packaging's 64,204
    tests wrote 572 MB of per-instance contexts); a small suite keeps one per test."""
    from sandboxes.runner.pytest_runner import GROUP_MIN_RATIO, GROUP_MIN_TESTS

    def run(n: int) -> dict:
        ws = tmp_path / f"ws{n}"
        (ws / "tests").mkdir(parents=True)
        (ws / "pkg.py").write_text("def double(x):\n    return 2 * x\n\n\ndef other():\n    return 1\n")
        (ws / "tests" / "test_a.py").write_text(
            f"import pytest\nimport pkg\n\n\n@pytest.mark.parametrize('i', range({n}))\n"
            "def test_double(i):\n    assert pkg.double(i) == i + i\n\n\ndef test_other():\n    assert pkg.other() == 1\n")
        scratch = tmp_path / f"scratch{n}"
        scratch.mkdir()
        request = {"args": ["tests"], "channel_path": str(scratch / "records.jsonl"), "src_roots": [str(ws)],
                   "coverage": True, "coverage_source": [str(ws / "pkg.py")], "coverage_json": str(scratch / "c.json")}
        (scratch / "request.json").write_text(json.dumps(request))
        subprocess.run([sys.executable, str(RUNNER), str(scratch / "request.json")], cwd=ws, capture_output=True,
                       timeout=600, check=False)
        return json.loads((scratch / "c.json").read_text())["pkg.py"]

    assert GROUP_MIN_TESTS <= 5000 and GROUP_MIN_RATIO <= 4000
    big = run(5000)
    assert big["2"] == ["tests/test_a.py::test_double"] and big["6"] == ["tests/test_a.py::test_other"]
    small = run(3)
    assert small["2"] == [f"tests/test_a.py::test_double[{i}]" for i in range(3)]


def test_only_the_first_failures_get_a_formatted_traceback(tmp_path: Path) -> None:
    """idna 3.20: a stub of check_label fails 6,403 unittest tests; formatting each traceback took the
    grading past its 718 s limit (141 s brief). With tracebacks on, the first FULL_TRACEBACKS failures are
    formatted and the rest give their exception's last line; every outcome is the same."""
    from sandboxes.runner.pytest_runner import FULL_TRACEBACKS

    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_many.py").write_text(
        "import unittest\n\ndef deep(n):\n    return deep(n - 1) if n else 1 / 0\n\n"
        "class T(unittest.TestCase):\n" + "".join(f"    def test_{i}(self):\n        deep(20)\n" for i in range(60))
        + "\ndef test_plain_fails():\n    assert deep(3)\n\ndef test_passes():\n    assert True\n")
    for tracebacks, brief in ((True, 61 - FULL_TRACEBACKS), (False, 61)):
        scratch = tmp_path / f"scratch-{tracebacks}"
        scratch.mkdir()
        request = {"args": ["tests"], "channel_path": str(scratch / "records.jsonl"), "tracebacks": tracebacks}
        (scratch / "request.json").write_text(json.dumps(request))
        done = subprocess.run([sys.executable, str(RUNNER), str(scratch / "request.json")], cwd=ws,
                              capture_output=True, text=True, timeout=120, check=False)
        report = read_ledger((scratch / "records.jsonl").read_bytes(), exit_code=done.returncode, elapsed=0.0)
        outcomes = [r.outcome.value for r in report.results]
        assert outcomes.count("failed") == 61 and outcomes.count("passed") == 1, outcomes
        assert done.stdout.count("(traceback not formatted)") == (brief if tracebacks else 0), done.stdout[-2000:]


def test_a_bare_unittest_main_at_the_end_of_a_test_file_does_not_stop_collection(tmp_path: Path) -> None:
    """toposort 1.10: its test file ends with ``unittest.main()`` outside any ``__main__`` guard; at collection it
    parsed pytest's arguments and exited, and nothing was collected (plain pytest: an internal error)."""
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_t.py").write_text("import unittest\n\n\nclass T(unittest.TestCase):\n"
                                            "    def test_one(self):\n        self.assertEqual(1 + 1, 2)\n\n\n"
                                            "unittest.main()\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    report = _run(ws, scratch)
    assert [(r["nodeid"], r["outcome"]) for r in report["results"]] == [("tests/test_t.py::T::test_one", "passed")]
