"""The local sandbox: every claim of its threat model, checked against a real virtualenv and pytest.

One environment (pytest + coverage) is built per session in a shared work area and reused
(the ready-marker makes the second ``prepare`` a lookup).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from generators.env_detect import detect_env
from sandboxes.local import LocalSandbox, build_request
from sandboxes.protocol import RunRequest
from taskforge.core.errors import EnvironmentBuildError
from taskforge.core.settings import Settings
from taskforge.core.testreport import Outcome
from tests.fixtures_repos import make_toy_project, write


def shared_work_dir(factory: pytest.TempPathFactory) -> Path:
    """One work area per session, shared by test modules, so environments are built once."""
    d = factory.getbasetemp() / "tf-shared-work"
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("toy")
    make_toy_project(root, sandbox_probes=True, real_home=os.path.expanduser("~"))
    hang = (  # a child that beats on a file in the workspace (the only place a confined run may write)
        "import os, subprocess, sys, time\n\n"
        "BEAT = 'import os, sys, time\\nwhile True:\\n    open(sys.argv[1], \"a\").write(\".\")\\n    time.sleep(0.05)\\n'\n\n"
        "def test_hang():\n"
        "    subprocess.Popen([sys.executable, '-c', BEAT, os.environ['BEAT_FILE']], start_new_session=True)\n"
        "    time.sleep(600)\n"
    )
    write(root, {"slow/test_hang.py": hang,
                 "crash/test_crash.py": "import os, signal\n\ndef test_crash():\n    os.kill(os.getpid(), signal.SIGKILL)\n"})
    settings = Settings(work_dir=shared_work_dir(tmp_path_factory))
    sandbox = LocalSandbox(settings)
    spec = detect_env(root)
    env = sandbox.prepare(spec, root)
    return sandbox, env, root


def test_spec_of_toy_is_not_installable_and_runs_tests_dir(toy) -> None:
    _, env, _ = toy
    assert env.spec.install_target == ""
    assert env.spec.test_paths == ("tests",)
    assert env.backend == "local" and env.python_version.startswith("3.")
    assert any(line.lower().startswith("pytest==") for line in env.frozen)


def test_outcomes_of_every_kind(toy) -> None:
    sandbox, env, root = toy
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), timeout_s=120))
    got = out.report.outcomes()
    assert got == {
        "tests/test_toy.py::test_add": Outcome.PASSED,
        "tests/test_toy.py::test_shout": Outcome.PASSED,
        "tests/test_toy.py::test_fails": Outcome.FAILED,
        "tests/test_toy.py::test_skipped": Outcome.SKIPPED,
        "tests/test_toy.py::test_xfail": Outcome.XFAILED,
        "tests/test_toy.py::test_setup_error": Outcome.ERROR,
    }
    assert out.report.exit_code == 1
    assert "test_fails" in out.report.output_tail
    assert not (root / ".pytest_cache").exists()  # the run leaves the workspace clean
    assert not list(root.rglob("__pycache__"))



def test_tests_see_plugin_autoload_as_a_plain_pytest_would(toy) -> None:
    """The graded session loads no entry-point plugin; a pytest the tests start (pytester) loads them."""
    sandbox, env, root = toy
    write(root, {"autoload/test_autoload.py": "import os\n\ndef test_env():\n"
                                              "    assert 'PYTEST_DISABLE_PLUGIN_AUTOLOAD' not in os.environ\n"})
    out = sandbox.run(env, root, RunRequest(tests=("autoload/test_autoload.py",), timeout_s=120))
    assert out.report.outcomes() == {"autoload/test_autoload.py::test_env": Outcome.PASSED}


def test_requested_files_run_in_a_plain_pytests_order_whatever_the_request_order(toy) -> None:
    """pyrsistent 0.20.0: ``vector_test.py`` reloads a module that ``checked_map_test.py`` needs unreloaded;
    the grading's shuffled request ran the files in request order, and gold failed at random."""
    sandbox, env, root = toy
    write(root, {"order/test_b.py": "import builtins\n\ndef test_b():\n    assert getattr(builtins, '_tf_a', 0)\n",
                 "order/test_a.py": "import builtins\n\ndef test_a():\n    builtins._tf_a = 1\n",
                 "order/sub/test_c.py": "import builtins\n\ndef test_c():\n    assert not hasattr(builtins, '_tf_a')\n"})
    ids = ("order/test_b.py::test_b", "order/test_a.py::test_a", "order/sub/test_c.py::test_c")
    out = sandbox.run(env, root, RunRequest(tests=ids, timeout_s=120))
    assert out.report.outcomes() == dict.fromkeys(ids, Outcome.PASSED), out.report.output_tail


def test_a_parametrization_over_a_set_is_reported_unordered(toy) -> None:
    """isodate 0.7.2 parametrizes over a set holding None (hashed by address): its ``expected23`` ids shift
    between processes, and two baseline runs agree by chance often enough that only the runner's word on
    the argvalues' type makes them unreliable every time."""
    sandbox, env, root = toy
    write(root, {"unordered/test_sets.py": (
        "import pytest\n\nCASES = {(1, object), (2, None)}\n\n"
        "@pytest.mark.parametrize('n, kind', CASES)\ndef test_set(n, kind):\n    pass\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_list(n):\n    pass\n")})
    out = sandbox.run(env, root, RunRequest(tests=("unordered",), timeout_s=120))
    assert len(out.report.outcomes()) == 4 and not out.report.flags, out.report
    assert sorted(out.report.unordered) == sorted(n for n in out.report.outcomes() if "test_set[" in n)
    assert len(out.report.unordered) == 2


def test_items_sharing_a_node_id_are_deselected_not_flagged_as_forged(toy) -> None:
    """pyyaml's conftest names custom items after data files, and some share a name: the second record of
    one id was read as forged, and every grading of the original flagged."""
    sandbox, env, root = toy
    write(root, {"dupes/conftest.py": (
        "import pytest\n\nclass Item(pytest.Item):\n    def runtest(self):\n        pass\n\n"
        "class File(pytest.File):\n    def collect(self):\n"
        "        for name in ('same', 'same', 'other'):\n            yield Item.from_parent(self, name=name)\n\n"
        "def pytest_collect_file(parent, file_path):\n"
        "    if file_path.suffix == '.data':\n        return File.from_parent(parent, path=file_path)\n"),
        "dupes/cases.data": "", "dupes/test_plain.py": "def test_plain():\n    pass\n"})
    out = sandbox.run(env, root, RunRequest(tests=("dupes",), timeout_s=120))
    assert out.report.outcomes() == {"dupes/cases.data::other": Outcome.PASSED,
                                     "dupes/test_plain.py::test_plain": Outcome.PASSED}, out.report
    assert not out.report.flags, out.report


def test_stop_at_failure_ends_the_run_after_the_first_failing_test(toy) -> None:
    """What ran up to the first failure ran as in a whole run; nothing after it runs (``--maxfail=1``)."""
    sandbox, env, root = toy
    whole = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), timeout_s=120)).report.outcomes()
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), timeout_s=120, stop_at_failure=True))
    got = out.report.outcomes()
    order = list(whole)
    first = next(i for i, n in enumerate(order) if whole[n] in (Outcome.FAILED, Outcome.ERROR))
    assert got == {n: whole[n] for n in order[: first + 1]}
    assert len(got) < len(whole)
    after = order[1]  # stop_after: the tests up to that one, whatever they gave
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), timeout_s=120, stop_after=after))
    assert out.report.outcomes() == {n: whole[n] for n in order[:2]}
    # stop_at_failure_of: failures of other tests do not stop it; the first failure among these does
    failing = [n for n in order if whole[n] in (Outcome.FAILED, Outcome.ERROR)]
    assert failing, whole
    among = (failing[-1],)
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), timeout_s=120, stop_at_failure_of=among))
    last = order.index(failing[-1])
    assert out.report.outcomes() == {n: whole[n] for n in order[:last + 1]}
    passing = tuple(n for n in order if whole[n] == Outcome.PASSED)
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), timeout_s=120, stop_at_failure_of=passing))
    assert out.report.outcomes() == whole  # none of them fails: the whole run

def test_a_test_past_its_deadline_fails_and_the_run_goes_on(toy) -> None:
    """``test_deadline_s``: a looping test fails after the deadline (even one whose loop catches every
    Exception, or every BaseException once), the run goes on to the next test; without it, the loop runs
    into the run's limit and nothing after it is reported."""
    sandbox, env, root = toy
    write(root, {"loops/test_loops.py": (
        "def test_spins():\n    while True:\n        try:\n            pass\n        except Exception:\n"
        "            pass\n\n"
        "def test_swallows_once():\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        pass\n    while True:\n        pass\n\n"
        "def test_after():\n    assert True\n")})
    start = time.monotonic()
    out = sandbox.run(env, root, RunRequest(tests=("loops/test_loops.py",), timeout_s=60, test_deadline_s=1.0))
    assert time.monotonic() - start < 30
    assert out.report.outcomes() == {"loops/test_loops.py::test_spins": Outcome.FAILED,
                                     "loops/test_loops.py::test_swallows_once": Outcome.FAILED,
                                     "loops/test_loops.py::test_after": Outcome.PASSED}, out.report.output_tail
    out = sandbox.run(env, root, RunRequest(tests=("loops/test_loops.py::test_spins",), timeout_s=4))
    assert out.report.timed_out and out.report.outcome_of("loops/test_loops.py::test_spins") is Outcome.MISSING


def test_a_test_with_its_own_deadline_keeps_it_and_the_others_get_the_default(toy) -> None:
    """``test_deadlines``: soupsieve's always-equal stand-in looped in a 0.01 s test for the 43 s that one
    deadline over its slowest hidden test (3.8 s) allowed; a slow test keeps its own, longer deadline, and
    0 means none."""
    sandbox, env, root = toy
    write(root, {"own/test_own.py": (
        "import time\n\n"
        "def test_loops():\n    while True:\n        pass\n\n"
        "def test_slow():\n    time.sleep(2.5)\n\n"
        "def test_slow_unbounded():\n    time.sleep(2.5)\n")})
    ids = ("own/test_own.py::test_loops", "own/test_own.py::test_slow", "own/test_own.py::test_slow_unbounded")
    start = time.monotonic()
    out = sandbox.run(env, root, RunRequest(tests=ids, timeout_s=60, test_deadline_s=1.0,
                                            test_deadlines={ids[1]: 10.0, ids[2]: 0.0}))
    assert time.monotonic() - start < 30
    assert out.report.outcomes() == {ids[0]: Outcome.FAILED, ids[1]: Outcome.PASSED, ids[2]: Outcome.PASSED}


def test_a_deadline_runs_in_the_call_phase_only(toy) -> None:
    """A deadline that fired in setup or teardown made the test an *error*: idna 3.20 lost an accepted candidate
    per run (``unstable``) to a must-fail canary, 0.5 s deadline, that reported "error, expected failed" in one
    empty-patch grading. A slow setup or teardown is no failure of ours; the call still has its deadline."""
    sandbox, env, root = toy
    write(root, {"phases/test_phases.py": (
        "import time\n\nimport pytest\n\n\n"
        "@pytest.fixture\ndef slow_setup():\n    time.sleep(1.5)\n\n\n"
        "@pytest.fixture\ndef slow_teardown():\n    yield\n    time.sleep(1.5)\n\n\n"
        "def test_fails_after_a_slow_setup(slow_setup):\n    assert 1 == 2\n\n\n"
        "def test_fails_before_a_slow_teardown(slow_teardown):\n    assert 1 == 2\n\n\n"
        "def test_passes_after_a_slow_setup(slow_setup):\n    assert True\n\n\n"
        "def test_loops(slow_setup):\n    while True:\n        pass\n")})
    ids = tuple(f"phases/test_phases.py::{n}" for n in (
        "test_fails_after_a_slow_setup", "test_fails_before_a_slow_teardown", "test_passes_after_a_slow_setup",
        "test_loops"))
    out = sandbox.run(env, root, RunRequest(tests=ids, timeout_s=60, test_deadline_s=0.5))
    assert out.report.outcomes() == {ids[0]: Outcome.FAILED, ids[1]: Outcome.FAILED, ids[2]: Outcome.PASSED,
                                     ids[3]: Outcome.FAILED}, out.report.output_tail


def test_environment_is_scrubbed(toy, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox, env, root = toy
    monkeypatch.setenv("TASKFORGE_TEST_SECRET", "hunter2")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_probes.py::test_env_scrubbed",), timeout_s=120))
    assert out.report.outcome_of("tests/test_probes.py::test_env_scrubbed") is Outcome.PASSED, \
        out.report.output_tail


def test_mypy_caches_outside_a_read_only_test_folder(toy) -> None:
    """typeguard 4.6.1 runs ``mypy`` with its cwd in tests/mypy/, read-only in every run: mypy crashed
    writing ``.mypy_cache`` there. ``MYPY_CACHE_DIR`` points at the run's scratch (never the workspace)."""
    sandbox, env, root = toy
    write(root, {"rocache/test_cache.py": (
        "import os\n\ndef test_cache_dir():\n    d = os.environ['MYPY_CACHE_DIR']\n"
        "    assert not os.path.realpath(d).startswith(os.path.realpath(os.getcwd()))\n"
        "    os.makedirs(d, exist_ok=True)\n    open(os.path.join(d, 'x'), 'w').close()\n"
        "    try:\n        open(os.path.join(os.path.dirname(__file__), 'x'), 'w')\n"
        "    except OSError:\n        pass\n    else:\n        raise AssertionError('test folder writable')\n")})
    out = sandbox.run(env, root, RunRequest(tests=("rocache/test_cache.py",), timeout_s=120, read_only=("rocache",)))
    assert out.report.outcomes() == {"rocache/test_cache.py::test_cache_dir": Outcome.PASSED}, out.report.output_tail


def test_an_isolated_child_imports_the_workspace_project_as_an_installed_one(toy) -> None:
    """multidict 7.2.1's ``test_circular_imports.py`` (and yarl's, frozenlist's) run ``python -I -c "import
    multidict"``: an isolated interpreter ignores PYTHONPATH, and the project is not installed in the
    environment (its code comes from the workspace), so 5 of its tests failed here and passed in plain
    pytest. The environment's start-up hook gives such a child the workspace's roots; an interpreter that
    reads PYTHONPATH is left alone, and a child told to forget the roots gets none."""
    sandbox, env, root = toy
    write(root, {"isolated/test_isolated.py": (
        "import os, subprocess, sys\n\n"
        "def child(*flags, env=None):\n"
        "    return subprocess.run([sys.executable, *flags, '-c', 'import sys, toypkg; print(toypkg.__file__); '\n"
        "                           'print(sys.path.count(sys.path[0]))'],\n"
        "                          capture_output=True, text=True, timeout=60, env=env)\n\n"
        "def test_isolated_child():\n"
        "    out = child('-I')\n"
        "    assert out.returncode == 0, out.stderr\n"
        "    assert out.stdout.splitlines()[0].startswith(os.getcwd())\n\n"
        "def test_ignore_environment_child():\n"
        "    assert child('-E', '-s').returncode == 0\n\n"
        "def test_plain_child_once_on_the_path():\n"
        "    out = child()\n"
        "    assert out.returncode == 0, out.stderr\n"
        "    assert out.stdout.splitlines()[1] == '1'\n\n"
        "def test_isolated_child_without_the_roots():\n"
        "    env = {k: v for k, v in os.environ.items() if k != 'TASKFORGE_SRC_ROOTS'}\n"
        "    assert child('-I', env=env).returncode != 0\n")})
    out = sandbox.run(env, root, RunRequest(tests=("isolated/test_isolated.py",), timeout_s=120))
    assert set(out.report.outcomes().values()) == {Outcome.PASSED}, out.report.output_tail
    assert len(out.report.outcomes()) == 4


def test_no_network_when_platform_allows(toy) -> None:
    sandbox, env, root = toy
    if not sandbox.network_isolated:
        pytest.skip("unshare -rn does not work on this host: network is NOT isolated (documented)")
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_probes.py::test_no_network",), timeout_s=120))
    assert out.report.outcome_of("tests/test_probes.py::test_no_network") is Outcome.PASSED, \
        out.report.output_tail


def test_hung_test_is_killed_with_its_children(toy, tmp_path: Path) -> None:
    sandbox, env, root = toy
    beat = root / "slow" / "beat.txt"
    start = time.monotonic()
    out = sandbox.run(env, root, RunRequest(tests=("slow/test_hang.py",), timeout_s=4,
                                            env={"BEAT_FILE": str(beat)}))
    assert time.monotonic() - start < 30
    assert out.report.timed_out and out.report.results == ()
    assert beat.stat().st_size > 0  # the child ran ...
    size = beat.stat().st_size
    time.sleep(0.5)
    assert beat.stat().st_size == size  # ... and died with the run (a new session did not save it)
    beat.unlink()


def test_runner_killed_mid_run_gives_crashed_report(toy) -> None:
    sandbox, env, root = toy
    out = sandbox.run(env, root, RunRequest(tests=("crash/test_crash.py",), timeout_s=60))
    assert "no_report" in out.report.flags
    assert not out.report.timed_out


def test_per_test_coverage_contexts(toy) -> None:
    sandbox, env, root = toy
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), coverage=True, timeout_s=120))
    cov = out.coverage
    assert cov is not None and set(cov) == {"toypkg/__init__.py"}
    lines = cov["toypkg/__init__.py"]
    assert lines[6] == ("tests/test_toy.py::test_add", "tests/test_toy.py::test_fails")  # total = a + b
    assert lines[12] == ("tests/test_toy.py::test_shout", "tests/test_toy.py::test_xfail")  # loud = ...
    assert 18 not in lines and 19 not in lines  # unused() never ran
    assert lines[4] == ("",)  # `def add` runs at import: the empty context, outside every test


def test_coverage_of_a_tests_child_processes_counts_for_that_test(toy) -> None:
    """jsonpointer's CLI tests run the package in a child process with an environment of their own (another
    PYTHONPATH): per-test coverage saw nothing of it, and deleting what the CLI runs was rejected as a red
    PASS_TO_PASS test."""
    sandbox, env, root = toy
    write(root, {"cli/test_cli.py": (
        "import os, subprocess, sys\n\n"
        "def test_child():\n"
        "    code = 'import toypkg; print(toypkg.shout(\"x\"))'\n"
        "    env = {'PATH': os.environ['PATH'], 'PYTHONPATH': os.pathsep.join([os.getcwd(), *sys.path[1:]])}\n"
        "    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=60)\n"
        "    assert out.stdout.strip() == 'X!' and out.stderr == '', out.stderr\n\n"
        "def test_in_process():\n"
        "    import toypkg\n"
        "    assert toypkg.add(1, 2) == 3\n")})
    out = sandbox.run(env, root, RunRequest(tests=("cli/test_cli.py",), coverage=True, timeout_s=120))
    assert out.report.outcomes() == {"cli/test_cli.py::test_child": Outcome.PASSED,
                                     "cli/test_cli.py::test_in_process": Outcome.PASSED}, out.report.output_tail
    lines = out.coverage["toypkg/__init__.py"]
    assert lines[12] == ("cli/test_cli.py::test_child",)  # loud = ..., in the child only
    assert lines[6] == ("cli/test_cli.py::test_in_process",)


def test_collect_only_lists_tests_as_skipped(toy) -> None:
    sandbox, env, root = toy
    out = sandbox.run(env, root, RunRequest(tests=("tests/test_toy.py",), collect_only=True, timeout_s=120))
    assert "collect_only" in out.report.flags
    assert len(out.report.results) == 6
    assert {r.outcome for r in out.report.results} == {Outcome.SKIPPED}


def test_prepare_reuses_a_complete_environment(toy) -> None:
    sandbox, env, root = toy
    start = time.monotonic()
    again = sandbox.prepare(env.spec, root)
    assert time.monotonic() - start < 2
    assert again == env


def test_request_uses_spec_args_and_paths(toy, tmp_path: Path) -> None:
    _, env, root = toy
    req = build_request(env.spec, root, RunRequest(), tmp_path)
    assert req["args"] == list(env.spec.pytest_args) and req["suite_paths"] == ["tests"]
    assert "suite_paths" not in build_request(env.spec, root, RunRequest(tests=("tests/test_a.py::t",)), tmp_path)
    assert req["coverage_source"] == [str(root / "toypkg")]
    json.dumps(req)  # plain JSON


@pytest.mark.slow
def test_install_failure_is_one_clear_error(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    write(tmp_path, {"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\n'
                                       'build-backend = "setuptools.build_meta"\n[project]\nname = "bad"\n'
                                       'version = "1"\ndependencies = ["no-such-dist-taskforge-xyz==0.0.1"]\n',
                     "bad/__init__.py": "", "tests/test_b.py": "def test_b():\n    pass\n"})
    sandbox = LocalSandbox(Settings(work_dir=shared_work_dir(tmp_path_factory), install_timeout_s=300))
    spec = detect_env(tmp_path)
    with pytest.raises(EnvironmentBuildError) as err:
        sandbox.prepare(spec, tmp_path)
    msg = str(err.value)
    assert "installing bad failed" in msg and "\n" not in msg
    assert not (shared_work_dir(tmp_path_factory) / "envs" / spec.key / ".taskforge-ready.json").exists()


@pytest.mark.slow
def test_installed_project_code_is_stripped_from_the_environment(tmp_path: Path,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    root = make_toy_project(tmp_path / "proj", installable=True, src_layout=True, failing=False)
    sandbox = LocalSandbox(Settings(work_dir=shared_work_dir(tmp_path_factory)))
    spec = detect_env(root)
    assert spec.install_target == "." and spec.src_roots == ("src",)
    env = sandbox.prepare(spec, root)
    site = next(Path(env.location).glob("lib/python*/site-packages"))
    assert not (site / "toypkg").exists()
    dist = next(site.glob("toypkg-*.dist-info"))
    assert "toypkg/" not in (dist / "RECORD").read_text()
    assert not any(line.startswith("toypkg") for line in env.frozen)
    out = sandbox.run(env, root, RunRequest(timeout_s=120))
    assert out.report.outcome_of("tests/test_toy.py::test_add") is Outcome.PASSED
    # no copy of the code anywhere but the workspace: without it, the tests cannot import it
    ws = tmp_path / "ws"
    shutil.copytree(root, ws)
    shutil.rmtree(ws / "src" / "toypkg")
    out = sandbox.run(env, ws, RunRequest(timeout_s=120))
    assert not out.report.results or out.report.outcome_of("tests/test_toy.py::test_add") is not Outcome.PASSED
    assert out.report.collection_errors == ("tests/test_toy.py",)


def test_benchmarks_run_once_as_tests(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest-benchmark's fixture timed rounds of each benchmark (wcwidth: 2.5 s for each of 50 tests);
    outcomes are all a run reports, so each benchmark body runs once (``--benchmark-disable``)."""
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'bench-toy'\nversion = '1.0'\n"
                                       "[project.optional-dependencies]\ntests = ['pytest-benchmark']\n",
                     "bench_toy/__init__.py": "",
                     "tests/test_b.py": "CALLS = []\n\ndef test_b(benchmark):\n"
                                        "    benchmark(CALLS.append, 1)\n    assert len(CALLS) == 1\n"})
    sandbox = LocalSandbox(Settings(work_dir=shared_work_dir(tmp_path_factory)))
    env = sandbox.prepare(detect_env(tmp_path), tmp_path)
    out = sandbox.run(env, tmp_path, RunRequest(timeout_s=300))
    assert out.report.outcomes() == {"tests/test_b.py::test_b": Outcome.PASSED}, out.report.output_tail


def test_a_whole_suite_run_leaves_out_test_paths_the_workspace_lacks(tmp_path: Path, monkeypatch) -> None:
    """mako 1.4.3 lists its 23 test files as test paths; once the hiding removed one whole, pytest given the
    missing path collected nothing, and 79 of 112 candidates were rejected ``no_pass_to_pass``."""
    from sandboxes.runner.pytest_runner import suite_paths

    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_a.py").write_text("def test_a():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert suite_paths(["test/test_a.py", "test/test_gone.py", "README.rst"]) == ["test/test_a.py"]
    assert suite_paths(["test/test_gone.py"]) == ["test/test_gone.py"]  # none exists: pytest says so
    assert suite_paths(None) == []


def test_the_runner_restores_the_signals_a_background_launch_ignores() -> None:
    """ecdsa 0.19.2: a bench started with ``nohup ... &`` ran its tests with SIGINT ignored, and a test that sends
    itself SIGINT and expects KeyboardInterrupt failed in the baseline only."""
    import subprocess
    import sys

    code = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "import sys; sys.path.insert(0, 'sandboxes/runner')\n"
            "from pytest_runner import default_signals; default_signals()\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
            "import os\n"
            "try:\n    os.kill(os.getpid(), signal.SIGINT); import time; time.sleep(1)\n"
            "except KeyboardInterrupt:\n    print('interrupted')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0 and "interrupted" in out.stdout, out.stderr


def test_hypothesis_tests_run_few_fixed_examples_and_leave_no_database(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """cattrs 26.2.1: 1,006 mostly-Hypothesis tests, 138 s a run, half of a 15 CPU-minute budget in profiling.
    Every run now sees the same examples (a gold patch's gradings do not toss a coin), at most
    ``HYPOTHESIS_MAX_EXAMPLES`` of them, even where the project asked for more or the package under test loaded a
    profile that tests nothing, and writes no example database (failing examples replayed in the next run) into
    the workspace."""
    from sandboxes.runner.pytest_runner import HYPOTHESIS_MAX_EXAMPLES

    write(tmp_path, {"pyproject.toml": "[project]\nname = 'hyp-toy'\nversion = '1.0'\n"
                                       "[project.optional-dependencies]\ntests = ['hypothesis']\n",
                     # code under grading can load a profile before ``@given`` reads it: nothing to test
                     "hyp_toy/__init__.py": "from hypothesis import Phase, settings\n"
                                            "settings.register_profile('idle', max_examples=1)\n"
                                            "settings.load_profile('idle')\n",
                     "tests/test_h.py": "from pathlib import Path\n"
                                        "import hyp_toy\n"
                                        "from hypothesis import given, settings, strategies as st\n"
                                        "SEEN = []\n\n"
                                        "@settings(max_examples=300)\n@given(st.integers())\n"
                                        "def test_p(x):\n    SEEN.append(x)\n\n"
                                        "@given(st.integers())\n"
                                        "def test_q(x):\n    SEEN.append('q')\n\n"
                                        "@given(st.text())\ndef test_fails(s):\n    assert False\n\n"
                                        "def test_z_record():\n"
                                        "    Path(__file__).parents[1].joinpath('seen.txt').write_text(repr(SEEN))\n"})
    sandbox = LocalSandbox(Settings(work_dir=shared_work_dir(tmp_path_factory)))
    env = sandbox.prepare(detect_env(tmp_path), tmp_path)
    seen = []
    for _ in range(2):
        out = sandbox.run(env, tmp_path, RunRequest(timeout_s=300))
        assert out.report.outcomes() == {"tests/test_h.py::test_p": Outcome.PASSED,
                                         "tests/test_h.py::test_q": Outcome.PASSED,
                                         "tests/test_h.py::test_fails": Outcome.FAILED,
                                         "tests/test_h.py::test_z_record": Outcome.PASSED}, out.report.output_tail
        seen.append((tmp_path / "seen.txt").read_text())
    assert seen[0] == seen[1]
    values = eval(seen[0])  # noqa: S307 (our own repr of a list of ints and "q"s)
    assert 1 < values.count("q") <= HYPOTHESIS_MAX_EXAMPLES and 1 < len(values) - values.count("q") <= 20
    assert not (tmp_path / ".hypothesis" / "examples").exists()  # its own caches (unicode data) may be there


def test_coverage_omits_the_files_it_is_told_to_and_keeps_the_package(toy) -> None:
    """networkx keeps its tests inside the package: tracing their lines (a generator over every gc object) was
    about half its coverage run's overhead, and no query of the coverage map asks for a test file's lines."""
    sandbox, env, root = toy
    inner = "toypkg/tests/test_inner.py"
    write(root, {inner: "import toypkg\n\ndef test_inner():\n    total = sum(1 for _ in range(3))\n"
                        "    assert toypkg.add(total, 1) == 4\n"})
    try:
        traced = sandbox.run(env, root, RunRequest(tests=(inner,), coverage=True, timeout_s=120)).coverage
        omitted = sandbox.run(env, root, RunRequest(tests=(inner,), coverage=True, timeout_s=120,
                                                    coverage_omit=(inner,))).coverage
    finally:
        shutil.rmtree(root / "toypkg" / "tests")
    assert traced is not None and omitted is not None
    assert inner in traced and inner not in omitted  # the test file itself is measured only when not omitted
    assert traced["toypkg/__init__.py"][6] == omitted["toypkg/__init__.py"][6] == (f"{inner}::test_inner",)


def test_coverage_omit_reaches_the_runner_as_absolute_paths_of_a_coverage_run_only(tmp_path: Path) -> None:
    spec = detect_env(make_toy_project(tmp_path / "p"))
    ws = Path("/ws")
    on = build_request(spec, ws, RunRequest(coverage=True, coverage_omit=("a/tests/test_x.py",)), tmp_path)
    off = build_request(spec, ws, RunRequest(coverage=False, coverage_omit=("a/tests/test_x.py",)), tmp_path)
    assert on["coverage_omit"] == ["/ws/a/tests/test_x.py"] and "coverage_omit" not in off


def test_prepare_reads_what_confined_runs_hide_before_any_run(toy) -> None:
    """The profile starts its CPU-bound index thread right after ``prepare``: the walk of /usr done in the first
    run beside it waited for the GIL at every system call (46 s for networkx instead of 0.4 s)."""
    from sandboxes import isolation

    sandbox, env, root = toy
    isolation._python_hidden.cache_clear()
    sandbox.prepare(env.spec, root)
    assert isolation._python_hidden.cache_info().currsize == 1


def test_runs_give_numeric_libraries_one_thread_unless_the_request_says_otherwise(toy) -> None:
    """OpenBLAS' helper threads spin while they wait: networkx's numpy/scipy tests took twice the CPU of a
    single-threaded run, in every run a task costs."""
    sandbox, env, root = toy
    write(root, {"threads/test_threads.py": (
        "import os\n\n"
        "def test_one():\n"
        "    assert os.environ['OPENBLAS_NUM_THREADS'] == os.environ['OMP_NUM_THREADS'] == '1'\n\n"
        "def test_asked():\n"
        "    assert os.environ['OMP_NUM_THREADS'] == '4'\n")})
    try:
        plain = sandbox.run(env, root, RunRequest(tests=("threads/test_threads.py",), timeout_s=120)).report
        asked = sandbox.run(env, root, RunRequest(tests=("threads/test_threads.py",), timeout_s=120,
                                                  env={"OMP_NUM_THREADS": "4"})).report
    finally:
        shutil.rmtree(root / "threads")
    assert plain.outcomes() == {"threads/test_threads.py::test_one": Outcome.PASSED,
                                "threads/test_threads.py::test_asked": Outcome.FAILED}, plain.output_tail
    assert asked.outcomes()["threads/test_threads.py::test_asked"] == Outcome.PASSED
