"""``WarmLocalSandbox``: forked runs give the local sandbox's reports and keep its guarantees."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from generate_fixtures import make_mini_project

from generators.env_detect import detect_env
from sandboxes.local import LocalSandbox
from sandboxes.protocol import RunRequest
from sandboxes.warm import WarmLocalSandbox
from taskforge.core.settings import Settings

PROBES = '''\
import os
import time


def test_environment_is_the_runs_own():
    assert os.environ["PYTHONHASHSEED"] == "0" and os.environ["HOME"].endswith("/home")
    assert "TF_WARM_PARENT_SECRET" not in os.environ
    assert os.read(0, 1) == b""  # stdin is empty: never the server's request pipe


def test_hangs():
    time.sleep(600)
'''


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    root = tmp_path_factory.mktemp("warm")
    src = make_mini_project(root / "minipkg", {"tests/test_probes.py": PROBES})
    base = LocalSandbox(Settings(work_dir=root / "work"))
    env = base.prepare(detect_env(src, name_hint="minipkg"), src)
    box = WarmLocalSandbox(base)
    yield box, base, env, src
    box.close()


@pytest.mark.slow
def test_same_reports_as_the_local_sandbox(warm, tmp_path):
    box, base, env, src = warm
    tests = ("tests/test_stats.py", "tests/test_textfmt.py::test_shout", "tests/test_probes.py::"
             "test_environment_is_the_runs_own")
    os.environ["TF_WARM_PARENT_SECRET"] = "x"
    try:
        a = base.run(env, src, RunRequest(tests=tests, timeout_s=120)).report
        b = box.run(env, src, RunRequest(tests=tests, timeout_s=120)).report
    finally:
        del os.environ["TF_WARM_PARENT_SECRET"]
    assert a.outcomes() == b.outcomes() and len(b.results) == 7
    assert all(o.ok for o in b.outcomes().values())


@pytest.mark.slow
def test_each_run_sees_the_workspace_as_it_is_now(warm, tmp_path):
    box, _, env, src = warm
    ws = tmp_path / "ws"
    shutil.copytree(src, ws)
    req = RunRequest(tests=("tests/test_stats.py::test_spread",), timeout_s=120)
    assert box.run(env, ws, req).report.all_ok(req.tests)
    stats = ws / "minipkg" / "stats.py"
    stats.write_text(stats.read_text().replace("return hi - lo", "return hi + lo"))
    assert not box.run(env, ws, req).report.all_ok(req.tests)  # no module survives from the last run


@pytest.mark.slow
def test_a_hung_run_is_killed_in_time_and_the_server_keeps_serving(warm):
    box, _, env, src = warm
    start = time.monotonic()
    report = box.run(env, src, RunRequest(tests=("tests/test_probes.py::test_hangs",), timeout_s=3)).report
    assert report.timed_out and time.monotonic() - start < 30
    again = box.run(env, src, RunRequest(tests=("tests/test_stats.py::test_mean_ints",), timeout_s=120)).report
    assert again.all_ok(("tests/test_stats.py::test_mean_ints",))


@pytest.mark.slow
def test_a_forked_run_fails_a_test_past_its_deadline(warm):
    """``test_deadline_s`` holds in a run forked from the server (the battery's stand-ins run there)."""
    box, _, env, src = warm
    tests = ("tests/test_probes.py::test_hangs", "tests/test_stats.py::test_mean_ints")
    start = time.monotonic()
    report = box.run(env, src, RunRequest(tests=tests, timeout_s=60, test_deadline_s=1.0)).report
    assert time.monotonic() - start < 30 and not report.timed_out
    assert report.outcome_of(tests[0]).value == "failed" and report.all_ok(tests[1:]), report.output_tail
