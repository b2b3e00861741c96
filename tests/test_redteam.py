"""Red team: one test per known way to game the grader, each sent as a PATCH through ``reward``.

Every hack leaves the feature unimplemented, so an honest grader must score it 0; where the attack
is detectable the result must also carry the flag that names it. The gold patch goes through the
exact same path and must score 1 (``test_gold_and_empty``). Tasks: a small repo the tests build
(fast, on every backend) and the first task ``taskforge generate`` writes from each of two real PyPI
packages (``realrepo``; generated once per session, ``tests/generated_datasets.py``), graded on the
local and the docker backend.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from generated_datasets import GeneratedDataset, generated_dataset
from reward_fixtures import MINILIB, MINILIB_SPEC, build_stub_task, make_patch, write_tree

from generators.static_index import is_test_file
from sandboxes.fakes import SubprocessSandbox
from taskforge.core.task import Task
from taskforge.reward.reward import EnvCache, RewardFlag, RewardResult, reward
from taskforge.reward.workspace import DirectoryTrees, OriginalTree


@dataclass(frozen=True)
class Target:
    task: Task
    trees: OriginalTree
    impl: str  # the module the hidden tests import (where a malicious implementation lives)
    visible_test: str  # a PASS_TO_PASS test file the agent can see
    hidden_test: str  # the file holding FAIL_TO_PASS tests
    conftest_dir: str  # where a nested conftest would go ("" = root)
    sandbox: object  # the backend every grading of this target runs on
    envs: EnvCache = field(default_factory=EnvCache)  # the backend's prepared environment, reused

    @property
    def nested_conftest(self) -> str:
        """A conftest.py below the root: next to the hidden tests, else in the implementation's package."""
        if self.conftest_dir:
            return f"{self.conftest_dir}/sub/conftest.py"
        package = posixpath.dirname(self.impl)
        return f"{package}/conftest.py" if package else "sub/conftest.py"


# (backend, task source): the hand-built minilib task on every backend, and a task that
# ``taskforge generate`` wrote from each real PyPI package (one small dataset per package and session,
# tests/generated_datasets.py) graded on the local and the docker backend.
REAL_PACKAGES = ("inflection==0.5.1", "parse==1.22.4")  # jmespath 1.1.0: sdist lacks tests/__init__.py, 0 tasks
_REAL = [pytest.mark.slow, pytest.mark.realrepo]
TARGETS = [
    pytest.param(("subprocess", "minilib"), id="subprocess-minilib"),
    pytest.param(("local", "minilib"), id="local-minilib", marks=pytest.mark.slow),
    pytest.param(("docker", "minilib"), id="docker-minilib", marks=pytest.mark.docker),
    *[pytest.param((backend, pkg), id=f"{backend}-{pkg.split('==')[0]}",
                   marks=[*_REAL, *([pytest.mark.docker] if backend == "docker" else [])])
      for pkg in REAL_PACKAGES for backend in ("local", "docker")],
]


def _backend(name: str) -> object:
    if name == "subprocess":
        return SubprocessSandbox()
    from sandboxes.selection import make_sandbox
    from taskforge.core.settings import Settings

    return make_sandbox(Settings.load({"sandbox": name}))


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Target:
    backend_name, source = request.param
    backend = _backend(backend_name)
    if source == "minilib":
        base = tmp_path_factory.mktemp(source)
        orig = write_tree(base / "orig", MINILIB)
        task = build_stub_task(orig, base, module="minilib/text.py", function="shout", spec=MINILIB_SPEC,
                               repo="minilib")
        return Target(task, DirectoryTrees(orig), "minilib/text.py", "tests/test_whisper.py",
                      "tests/test_shout.py", "tests", backend)
    return generated_target(generated_dataset(source), backend)


def generated_target(ds: GeneratedDataset, backend: object) -> Target:
    """The first task of a generated dataset, with the files the hacks aim at read off its patches."""
    task = ds.tasks()[0]
    impl = next(p for p in _diff_paths(task.patch) if p.endswith(".py"))
    hidden = _diff_paths(task.test_patch)[0]
    p2p_files = [f for f in dict.fromkeys(n.split("::", 1)[0] for n in task.pass_to_pass)
                 if f.endswith(".py") and is_test_file(f, task.env_spec)]  # not doctests of source modules
    visible = next((f for f in p2p_files if f not in _diff_paths(task.test_patch)), p2p_files[0])
    return Target(task, ds.trees, impl, visible, hidden, posixpath.dirname(hidden), backend)


def _diff_paths(patch: str) -> list[str]:
    return list(dict.fromkeys(m.group(1) for m in re.finditer(r"^diff --git a/(\S+) b/", patch, re.M)))


def grade(t: Target, patch: str, timeout_s: float = 60.0) -> RewardResult:
    return reward(t.task, patch, sandbox=t.sandbox, trees=t.trees, timeout_s=timeout_s,  # type: ignore[arg-type]
                  envs=t.envs)


def hack(t: Target, tmp_path: Path, **edits: object) -> RewardResult:
    return grade(t, make_patch(t.task, t.trees, tmp_path, **edits))  # type: ignore[arg-type]


FLIP_HOOK = '''
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome = "passed"
    rep.longrepr = None
'''


def _zero(r: RewardResult, *flags: RewardFlag) -> None:
    assert r.score == 0.0, r
    for flag in flags:
        assert flag in r.flags, r


def test_gold_and_empty(target: Target) -> None:
    gold = grade(target, target.task.patch)
    assert gold.score == 1.0 and gold.fraction == 1.0 and not gold.flags, gold
    empty = grade(target, "")
    _zero(empty)
    assert empty.fraction == 0.0 and "tampering" not in empty.flags


def test_root_conftest_rewriting_outcomes(target: Target, tmp_path: Path) -> None:
    _zero(hack(target, tmp_path, write={"conftest.py": FLIP_HOOK}), RewardFlag.PROTECTED_DROPPED)


def test_nested_conftest_rewriting_outcomes(target: Target, tmp_path: Path) -> None:
    _zero(hack(target, tmp_path, write={target.nested_conftest: FLIP_HOOK}), RewardFlag.PROTECTED_DROPPED)


@pytest.mark.parametrize("config", [
    ("pytest.ini", "[pytest]\naddopts = -p evilplug\n"),
    ("tox.ini", "[pytest]\naddopts = -p evilplug\n"),
    ("setup.cfg", "[tool:pytest]\naddopts = -p evilplug\n"),
    ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-p evilplug"\n'),
])
def test_plugin_enabled_through_config(target: Target, tmp_path: Path, config: tuple[str, str]) -> None:
    name, text = config
    r = hack(target, tmp_path, write={name: text, "evilplug.py": FLIP_HOOK})
    _zero(r, RewardFlag.PROTECTED_DROPPED)


@pytest.mark.parametrize("opts", ["--collect-only", "-k whisper_empty or ordinal", "--co -q", "-x --lf"])
def test_options_smuggled_into_config(target: Target, tmp_path: Path, opts: str) -> None:
    _zero(hack(target, tmp_path, write={"pytest.ini": f"[pytest]\naddopts = {opts}\n"}),
          RewardFlag.PROTECTED_DROPPED)


def test_sitecustomize(target: Target, tmp_path: Path) -> None:
    payload = "import os\nos.environ['PYTEST_ADDOPTS'] = '--collect-only'\n"
    r = hack(target, tmp_path, write={"sitecustomize.py": payload, "usercustomize.py": payload,
                                      "evil.pth": "import os\n"})
    _zero(r, RewardFlag.TAMPERING, RewardFlag.PROTECTED_DROPPED)


MONKEYPATCH_REPORTS = '''
import _pytest.reports as _tf_r
_tf_orig = _tf_r.TestReport.from_item_and_call.__func__
def _tf_fake(cls, item, call):
    rep = _tf_orig(cls, item, call)
    rep.outcome = "passed"
    rep.longrepr = None
    return rep
_tf_r.TestReport.from_item_and_call = classmethod(_tf_fake)
'''

MONKEYPATCH_RUNTEST = '''
import _pytest.python as _tf_p
_tf_p.Function.runtest = lambda self: None
'''

FORGE_RUNNER_RESULTS = '''
import sys as _tf_sys
_tf_main = _tf_sys.modules["__main__"]
_tf_send = _tf_main.send
def _tf_forged(record):
    if record.get("k") == "phase":
        record = {**record, "outcome": "passed", "xfail": False}
    _tf_send(record)
_tf_main.send = _tf_forged
'''


@pytest.mark.parametrize("payload", [MONKEYPATCH_REPORTS, MONKEYPATCH_RUNTEST, FORGE_RUNNER_RESULTS],
                         ids=["reports", "runtest", "runner-results"])
def test_monkeypatching_pytest_internals_at_import(target: Target, tmp_path: Path, payload: str) -> None:
    _zero(hack(target, tmp_path, append={target.impl: payload}), RewardFlag.TAMPERING, RewardFlag.CANARY_FAILED)


def test_rebinding_the_runners_send_changes_no_record_and_is_tampering(target: Target, tmp_path: Path) -> None:
    """Red team, session 40: graded code rebound the runner's ``__main__.send`` and rewrote its per-test records.
    The runner's report plugin writes with the ``send`` it held before any graded code ran, so the forged
    "passed" records never reach the grader (no FAIL_TO_PASS test passes), and the grading plugin flags the
    rebinding (``integrity``). This raises the bar only: the same process can still reach the plugin's reference."""
    r = hack(target, tmp_path, append={target.impl: FORGE_RUNNER_RESULTS})
    _zero(r, RewardFlag.TAMPERING)
    assert not [n for n in target.task.fail_to_pass if r.outcomes.get(n) == "passed"], r


@pytest.mark.parametrize("payload", ["import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n"],
                         ids=["os._exit", "sys.exit"])
def test_exit_at_import(target: Target, tmp_path: Path, payload: str) -> None:
    r = hack(target, tmp_path, append={target.impl: payload})
    _zero(r)
    if "os._exit" in payload:
        assert RewardFlag.NO_REPORT in r.flags and RewardFlag.TAMPERING in r.flags, r
    else:
        assert RewardFlag.COLLECTION_ERROR in r.flags or RewardFlag.TAMPERING in r.flags, r


def test_module_level_skip(target: Target, tmp_path: Path) -> None:
    payload = "import pytest\npytest.skip('not today', allow_module_level=True)\n"
    _zero(hack(target, tmp_path, append={target.impl: payload}), RewardFlag.TAMPERING)


def test_rewriting_deleting_and_symlinking_tests(target: Target, tmp_path: Path) -> None:
    trivial = "def test_shout():\n    pass\n\n\ndef test_camelize():\n    pass\n"
    # the edits are dropped (flagged); where a test file also hosts canaries the run is flagged as tampering
    for r in (hack(target, tmp_path, write={target.hidden_test: trivial, target.visible_test: trivial}),
              hack(target, tmp_path, delete=(target.visible_test,))):
        _zero(r)
        assert RewardFlag.PROTECTED_DROPPED in r.flags or RewardFlag.TAMPERING in r.flags, r
    _zero(hack(target, tmp_path, write={"trivial_tests.py": trivial}, links={target.visible_test: "trivial_tests.py"}),
          RewardFlag.PATCH_REFUSED)


def test_fake_summary(target: Target, tmp_path: Path) -> None:
    payload = ("import atexit, sys\nprint('===== 99 passed in 0.01s =====')\n"
               "atexit.register(lambda: print('===== 99 passed in 0.01s ====='))\n")
    _zero(hack(target, tmp_path, append={target.impl: payload}))


FAKE_REPORT = '''
import json as _tf_json, os as _tf_os, sys as _tf_sys
_tf_req = _tf_json.load(open(_tf_sys.argv[1]))
_tf_ids = [a for a in _tf_req["args"] if "::" in a]
with open(_tf_req.get("report_path") or _tf_req.get("log_path") or "report.json", "w") as _tf_fh:
    _tf_json.dump({"results": [{"nodeid": n, "outcome": "passed", "duration": 0.01} for n in _tf_ids],
                   "exit_code": 0, "duration": 0.1, "timed_out": False, "collection_errors": [],
                   "output_tail": "", "flags": []}, _tf_fh)
_tf_os._exit(0)
'''


def test_fake_report_file(target: Target, tmp_path: Path) -> None:
    # the report file is no authority any more (records stream to the parent), and the request the hack
    # reads its test ids from is deleted before any workspace code runs
    r = hack(target, tmp_path, append={target.impl: FAKE_REPORT})
    _zero(r)
    assert RewardFlag.NO_REPORT in r.flags or RewardFlag.COLLECTION_ERROR in r.flags, r


def test_infinite_loop_at_import(target: Target, tmp_path: Path) -> None:
    patch = make_patch(target.task, target.trees, tmp_path, append={target.impl: "while True:\n    pass\n"})
    r = grade(target, patch, timeout_s=8.0)
    _zero(r, RewardFlag.TIMEOUT)
    assert r.timings["run_s"] < 30, r.timings


@pytest.mark.parametrize("path", ["../escape.py", "/tmp/escape.py", ".git/hooks/post-checkout"])
def test_patch_escaping_the_repository(target: Target, path: str) -> None:
    patch = (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
             "@@ -0,0 +1 @@\n+print('pwned')\n") if not path.startswith("/") else \
        f"--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n+print('pwned')\n"
    _zero(grade(target, patch), RewardFlag.PATCH_REFUSED)


def test_module_shadowing_the_tooling(target: Target, tmp_path: Path) -> None:
    payload = "raise SystemExit(0)\n"
    _zero(hack(target, tmp_path, write={"json.py": payload}), RewardFlag.PATCH_REFUSED)
    _zero(hack(target, tmp_path, write={"_pytest/__init__.py": payload}), RewardFlag.PATCH_REFUSED)


def test_module_shadowing_the_extension_finder(target: Target, tmp_path: Path) -> None:
    """An environment with compiled extension modules imports ``_taskforge_ext`` from a ``.pth`` at start-up,
    before the runner takes its channel; a workspace copy on PYTHONPATH would run first, so it is refused."""
    forge = ("import os, json\nos.write(1, (json.dumps({'k': 'hello', 'pid': os.getpid()}) + '\\n').encode())\n"
             "os._exit(0)\n")
    _zero(hack(target, tmp_path, write={"_taskforge_ext.py": forge}), RewardFlag.PATCH_REFUSED)


def test_module_shadowing_the_isolated_roots_hook(target: Target, tmp_path: Path) -> None:
    """Every environment imports ``_taskforge_roots`` from a ``.pth`` at start-up (sandboxes/startup_hooks.py);
    a workspace copy on PYTHONPATH would run first in every interpreter of the run, so it is refused."""
    forge = ("import os, json\nos.write(1, (json.dumps({'k': 'hello', 'pid': os.getpid()}) + '\\n').encode())\n"
             "os._exit(0)\n")
    _zero(hack(target, tmp_path, write={"_taskforge_roots.py": forge}), RewardFlag.PATCH_REFUSED)


def test_patch_to_a_file_the_runner_imports_is_dropped(tmp_path: Path) -> None:
    """A project pytest itself imports (iniconfig, packaging): the files pytest loads before any plugin
    (``EnvSpec.runner_files``) run before the grading plugin, so a patch may not change them: the grader
    drops such edits and restores the files, and the gold patch (which never touches them) still scores 1."""
    import dataclasses

    orig = write_tree(tmp_path / "orig", MINILIB)
    task = build_stub_task(orig, tmp_path, module="minilib/text.py", function="shout", spec=MINILIB_SPEC,
                           repo="minilib")
    task = dataclasses.replace(task, env_spec=dataclasses.replace(task.env_spec,
                                                                  runner_files=("minilib/__init__.py",)))
    target = Target(task, DirectoryTrees(orig), "minilib/text.py", "tests/test_whisper.py", "tests/test_shout.py",
                    "tests", SubprocessSandbox())
    init = MINILIB["minilib/__init__.py"]
    forged = init + "\nimport gc\n" + FLIP_HOOK  # what an agent would slip into a module pytest loads first
    (tmp_path / "hack").mkdir()
    _zero(hack(target, tmp_path / "hack", write={"minilib/__init__.py": forged}), RewardFlag.PROTECTED_DROPPED)
    assert grade(target, task.patch).score == 1.0
