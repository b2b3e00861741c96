"""The verifier of an exported Harbor task: copied as ``tests/run_tests.py`` and run by ``tests/test.sh``.

Stdlib only (it runs with whatever Python the task image has; pytest comes from the image). Steps:

1. Restore every test file and test-support file from the original tree (``test_files.tar.gz``):
   the test locations are deleted and re-extracted, every ``conftest.py`` not in the original is
   removed, root pytest configuration is overwritten. This also restores the hidden tests.
2. Add two canary tests (one must pass, one must fail) next to the workspace root.
3. Run FAIL_TO_PASS + PASS_TO_PASS + canaries in a child pytest process (own process group, killed
   at the timeout) that records each test's outcome from pytest's own reports.
4. Reward 1 iff every FAIL_TO_PASS and PASS_TO_PASS test passed (xfailed counts; a test that never
   reported counts as failed) and the canaries behaved; else 0. A canary that misbehaves, a missing
   report or a timeout is flagged in ``details.json`` and scores 0.

    python run_tests.py --config config.json --workspace /app --reward /logs/verifier/reward.txt
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

OK = ("passed",)  # xfailed, xpassed and skipped hidden tests do not pass
ROOT_CONFIG = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "conftest.py")
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", ".tox", "node_modules"}
CANARY = '''
def test_taskforge_canary_must_pass():
    assert True


def test_taskforge_canary_must_fail():
    assert False, "taskforge canary"
'''


# -- child: run pytest, record outcomes ------------------------------------------------------------
class _Recorder:
    """pytest plugin: keeps only the selected node ids, records each one's outcome."""

    def __init__(self, select: list[str]) -> None:
        self.select = set(select)
        self.outcomes: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.collection_errors: list[str] = []

    def pytest_collection_modifyitems(self, session, config, items):  # noqa: ANN001, ANN201 (pytest hook)
        keep = [i for i in items if i.nodeid in self.select]
        dropped = [i for i in items if i.nodeid not in self.select]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_collectreport(self, report):  # noqa: ANN001, ANN201 (pytest hook)
        if report.failed:
            self.collection_errors.append(report.nodeid)

    def pytest_runtest_logreport(self, report):  # noqa: ANN001, ANN201 (pytest hook)
        nodeid, when = report.nodeid, report.when
        wasxfail = hasattr(report, "wasxfail")
        if when == "setup":
            if report.failed:
                self.outcomes[nodeid] = "error"
            elif report.skipped:
                self.outcomes[nodeid] = "xfailed" if wasxfail else "skipped"
        elif when == "call":
            if wasxfail:
                self.outcomes[nodeid] = "xfailed" if report.skipped else "xpassed"
            else:
                self.outcomes[nodeid] = report.outcome
            self.durations[nodeid] = float(report.duration)
        elif when == "teardown" and report.failed:
            self.outcomes[nodeid] = "error"


def run_child(args_file: str, report_file: str) -> int:
    import pytest  # from the task image's environment

    spec = json.loads(Path(args_file).read_text())
    recorder = _Recorder(spec["select"])
    code = pytest.main(spec["args"], plugins=[recorder])
    Path(report_file).write_text(json.dumps({"exit_code": int(code), "outcomes": recorder.outcomes,
                                             "durations": recorder.durations,
                                             "collection_errors": recorder.collection_errors}))
    return 0


# -- parent: restore, run, grade -------------------------------------------------------------------
def restore_tests(workspace: Path, archive: Path, test_paths: list[str]) -> list[str]:
    """Put the original test files and test-support files back; returns what was removed."""
    removed: list[str] = []
    for rel in test_paths:
        target = workspace / rel
        if rel in (".", "") or not target.exists():
            continue
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
        removed.append(rel)
    with tarfile.open(archive, "r:gz") as tar:
        original = set(tar.getnames())
        for dirpath, dirnames, filenames in os.walk(workspace):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            if "conftest.py" in filenames:
                rel = (Path(dirpath) / "conftest.py").relative_to(workspace).as_posix()
                if rel not in original:
                    os.unlink(Path(dirpath) / "conftest.py")
                    removed.append(rel)
        for name in ROOT_CONFIG:  # configuration the agent added would change how pytest runs
            if name not in original and (workspace / name).is_file():
                (workspace / name).unlink()
                removed.append(name)
        if sys.version_info >= (3, 12) or hasattr(tarfile, "data_filter"):
            tar.extractall(workspace, filter="data")
        else:  # pragma: no cover - old interpreters in task images
            tar.extractall(workspace)
    return removed


def grade(outcomes: dict[str, str], f2p: list[str], p2p: list[str], canary: str) -> tuple[float, list[str]]:
    flags: list[str] = []
    if outcomes.get(f"{canary}::test_taskforge_canary_must_pass") != "passed":
        flags.append("canary_pass_did_not_pass")
    if outcomes.get(f"{canary}::test_taskforge_canary_must_fail") != "failed":
        flags.append("canary_fail_did_not_fail")
    ok = all(outcomes.get(n, "missing") in OK for n in f2p + p2p)
    return (1.0 if ok and not flags else 0.0), flags


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(Path(__file__).with_name("config.json")))
    p.add_argument("--workspace", default="/app")
    p.add_argument("--reward", default="/logs/verifier/reward.txt")
    p.add_argument("--details", default="")
    p.add_argument("--python", default=sys.executable, help="interpreter that has pytest")
    p.add_argument("--child", nargs=2, metavar=("ARGS_JSON", "REPORT_JSON"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return run_child(*a.child)

    cfg = json.loads(Path(a.config).read_text())
    workspace = Path(a.workspace).resolve()
    reward_file = Path(a.reward)
    reward_file.parent.mkdir(parents=True, exist_ok=True)
    reward_file.write_text("0\n")  # until proven otherwise
    details_file = Path(a.details) if a.details else reward_file.with_name("details.json")
    f2p, p2p = list(cfg["fail_to_pass"]), list(cfg["pass_to_pass"])
    details: dict = {"instance_id": cfg.get("instance_id", ""), "flags": []}
    started = time.monotonic()

    details["removed"] = restore_tests(workspace, Path(a.config).with_name(cfg["test_files"]), cfg["test_paths"])
    canary = f"test_taskforge_canary_{uuid.uuid4().hex[:8]}.py"
    (workspace / canary).write_text(CANARY)
    with tempfile.TemporaryDirectory(prefix="taskforge-verify-") as tmp:
        args_file, report_file = Path(tmp) / "args.json", Path(tmp) / "report.json"
        # Whole files are collected (a node id pytest cannot find would abort the session) and the
        # plugin keeps exactly the wanted node ids.
        files = sorted({n.split("::", 1)[0] for n in f2p + p2p})
        pytest_args = ["-p", "no:cacheprovider", "-q", "-o", "addopts=", "--continue-on-collection-errors",
                       "--rootdir", str(workspace), *cfg.get("pytest_args", []), *files, canary]
        select = f2p + p2p + [f"{canary}::test_taskforge_canary_must_pass",
                              f"{canary}::test_taskforge_canary_must_fail"]
        args_file.write_text(json.dumps({"args": pytest_args, "select": select}))
        env = dict(os.environ)
        roots = [str(workspace / r) for r in cfg.get("src_roots", ["."])]
        env["PYTHONPATH"] = os.pathsep.join(roots + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        proc = subprocess.Popen([a.python, str(Path(__file__).resolve()), "--child", str(args_file), str(report_file)],
                                cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=float(cfg.get("timeout_s", 900)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            details["flags"].append("timeout")
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stray grandchildren the tests left behind
        except ProcessLookupError:
            pass
        (workspace / canary).unlink(missing_ok=True)
        report = json.loads(report_file.read_text()) if report_file.is_file() else None
    if report is None:
        details["flags"].append("no_report")
        outcomes: dict[str, str] = {}
    else:
        outcomes = report["outcomes"]
        details["exit_code"] = report["exit_code"]
        details["collection_errors"] = report["collection_errors"]
        for nodeid in f2p + p2p:  # a test whose file failed to import is an error, not merely missing
            if nodeid not in outcomes and nodeid.split("::", 1)[0] in report["collection_errors"]:
                outcomes[nodeid] = "error"
    reward, flags = grade(outcomes, f2p, p2p, Path(canary).as_posix())
    details["flags"] += flags
    if details["flags"]:
        reward = 0.0
    details.update(reward=reward, seconds=round(time.monotonic() - started, 3),
                   fail_to_pass={n: outcomes.get(n, "missing") for n in f2p},
                   pass_to_pass={n: outcomes.get(n, "missing") for n in p2p},
                   output_tail=out.decode(errors="replace")[-4000:])
    details_file.write_text(json.dumps(details, indent=2))
    reward_file.write_text(f"{reward:g}\n")
    print(f"taskforge verifier: reward={reward:g} flags={details['flags']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
