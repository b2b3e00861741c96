"""The verifier of an exported Harbor task: ``tests/run_tests.py``, run by ``tests/test.sh``. Standalone.

It never imports taskforge (it runs with the task image's interpreter); its siblings in the task are
``harbor_workspace.py``, ``harbor_run.py``, ``harbor_canaries.py`` + ``grading_plugin.py`` (the reward path's
plugin), ``harbor_monitor.py`` + ``vendor/unidiff`` (the reward path's patch monitor) and
``runner/pytest_runner.py`` (the runner every taskforge sandbox uses). It runs in Harbor's SEPARATE verifier
container, built from ``tests/``, which holds no process, file or interpreter of the agent: the agent's
workspace arrives as files (the ``/app`` artifact). The reward path's guarantees (``taskforge.reward``):

1. **Monitor**: the agent's diff against the broken workspace is scanned by the patch monitor; a finding
   (rules the gold patch fires exempt) zeroes the reward (``monitor_zero``).
2. **Workspace**: ``harbor_workspace.sanitize`` keeps the agent's changes to source files only, restores
   every test and test-support file from the original and refuses symlinks, binaries, shadowing modules
   and start-up hooks (``sitecustomize.py``, ``*.pth``) as tampering. The run gets a copy in which those
   files are root's and cannot be replaced (``hand_over``).
3. **Canaries**: ``harbor_canaries.plant_canaries`` (the reward path's ``taskforge/reward/canaries.py``,
   shipped as is) writes canaries with names drawn now (a fresh secret per run): tests that produce their
   own outcome, known as canaries only to this process; the hidden tests' strict equality gets a fresh
   name, and the grading plugin (which holds no plan) checks the run's integrity. The requested ids are
   shuffled; the runner runs their files in a plain pytest's order (sorted by path).
4. **Authority** (``harbor_run``): this process (root) is the only writer of the reward. The test run is a
   child under a fresh unprivileged uid, started on the runner, which takes its records channel (a pipe to
   this process) before pytest or any project code is imported; the first record of a (test, phase) wins,
   a second one, a foreign line, anything after ``end`` or a record for a test whose file failed to collect
   is forged; no ``end`` is a run that never finished.
5. **Nothing outlives the run**: when the runner exits (or at the timeout) every process of the grading uid
   is killed before the channel is read to its end and before the reward is written; the grading uid
   cannot write the reward directory.
6. **Score**: 1 iff every FAIL_TO_PASS and PASS_TO_PASS test ``passed`` (xfail, xpass, skip, error and
   missing fail) and no flag was raised. ``details.json`` next to the reward says why (``flags``: what
   zeroed it; ``warnings``: what did not).

When it cannot switch users (not root, or the interpreter is unusable by another uid: a host run) it runs
the child as itself in its own session and says so (``details["grader_uid"]`` is null).

    python -I run_tests.py --config config.json --workspace /app --reward /logs/verifier/reward.txt
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

if __package__:  # imported from the repository (taskforge.dataset)
    from ..reward import canaries
    from . import harbor_run as run
    from . import harbor_workspace as workspace_rules
else:  # the task's tests/run_tests.py: its siblings, found by path (python -I adds no script directory)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harbor_canaries as canaries  # type: ignore[no-redef]
    import harbor_run as run  # type: ignore[no-redef]
    import harbor_workspace as workspace_rules  # type: ignore[no-redef]


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - interpreters without extraction filters (the archive is our own)
            tar.extractall(dest)


def _run_tests(cfg: dict, ws: Path, scratch: Path, python: str, tests_dir: Path, details: dict
               ) -> tuple[run.RunResult, canaries.CanaryPlan]:
    """Plant canaries (names drawn now), then run the runner on them and the graded tests as the grading uid."""
    uid = run.grader_uid(python, scratch, run.libc_prctl())
    io, runner, home, tmp = (scratch / d for d in ("io", "runner", "home", "tmp"))
    for d in (io, runner, home, tmp):
        d.mkdir(mode=0o755)
    shutil.copyfile(tests_dir / "runner" / "pytest_runner.py", runner / "pytest_runner.py")
    os.chmod(runner / "pytest_runner.py", 0o644)
    strict = _name_strict_equality(cfg, ws)
    ini_name = f".tfgrade-{secrets.token_hex(4)}.ini"
    (ws / ini_name).write_text(cfg["clean_ini"], encoding="utf-8")
    # the files that define the hidden tests (``taskforge.core.test_homes``: may differ from where pytest collects them)
    homes = canaries.test_homes(ws, cfg["fail_to_pass"])
    hidden = sorted(f for f in {n.split("::")[0] for n in homes.homes(cfg["fail_to_pass"])} if (ws / f).is_file())
    src_root = next((r for r in cfg.get("src_roots", ["."]) if (ws / r).is_dir()), ".")
    plan = canaries.plant_canaries(ws, hidden, pass_to_pass=cfg["pass_to_pass"], fail_to_pass=cfg["fail_to_pass"],
                                   template=(tests_dir / "grading_plugin.py").read_text(encoding="utf-8"),
                                   src_root=src_root, allowed_plugin_files=tuple(cfg.get("allowed_plugin_files", ())),
                                   strict_eq=strict, uncopied=tuple(cfg.get("uncopied", ())),
                                   unchangeable=tuple(cfg.get("unchangeable", ())))
    # companions: the baseline's skipped tests beside the task's, run along and ungraded (a test's state may be
    # set by one that skips after: taskforge.core.companions)
    selected = [*cfg["fail_to_pass"], *cfg["pass_to_pass"], *cfg.get("companions", []), *plan.nodeids]
    random.SystemRandom().shuffle(selected)  # canaries are not the last ids of the request
    log = io / "output.log"
    log.touch(mode=0o600)
    src_roots = [str((ws / r).resolve()) for r in cfg.get("src_roots", ["."])]
    request = {"args": [*cfg.get("pytest_args", []), "-c", ini_name, "--rootdir=.", "--confcutdir=.",
                        "-p", plan.plugin_module, *cfg.get("pinned_options", []), *selected],
               "channel_fd": 1, "log_path": str(log), "grading": True,
               "tracebacks": bool(cfg.get("tracebacks", True)),  # details' output tail only: never the verdict
               "src_roots": src_roots, "shadow_allowed": list(cfg.get("shadow_allowed", []))}
    (io / "request.json").write_text(json.dumps(request), encoding="utf-8")
    os.chmod(io / "request.json", 0o644)
    if uid is not None:  # io/ is the run's: the runner deletes its request (the ids it runs) before project code
        read_only = workspace_rules.read_only_paths(ws, workspace_rules.Protected.from_config(cfg), *_skips(cfg))
        workspace_rules.hand_over(ws, uid, uid, [*read_only, ini_name])
        for d in (home, tmp, io):
            os.chown(d, uid, uid)
            os.chmod(d, 0o700)
        os.chown(log, uid, uid)
    result = run.run_runner(python, runner / "pytest_runner.py", io / "request.json", ws,
                            _child_env(python, home, tmp, src_roots), log, uid, float(cfg.get("timeout_s", 900)))
    details.update(grader_uid=uid, canaries=len(plan.expect), seconds_run=result.seconds,
                   stragglers=result.stragglers, output_tail=_tail(log),
                   runner_exit=(result.ledger.end or {}).get("exit", result.exit_code))
    return result, plan


def _name_strict_equality(cfg: dict, ws: Path) -> str:
    """Name the hidden tests' strict equality (``taskforge.reward.strict_asserts``) for this grading only."""
    token = cfg.get("strict_token", "")
    if not token or not cfg.get("strict_files"):
        return ""
    strict = f"_tfq{secrets.token_hex(5)}"
    for rel in cfg["strict_files"]:
        path = ws / rel
        if path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace(f"{token}(", f"{strict}("), encoding="utf-8")
    return strict


def _child_env(python: str, home: Path, tmp: Path, src_roots: list) -> dict:
    """The run's whole environment (as the sandboxes set it): nothing of this process's leaks in."""
    py_bin = os.path.dirname(python)
    env = {"PATH": f"{py_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp),
           "PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": "", "PYTEST_PLUGINS": "",
           "PYTHONPATH": os.pathsep.join(src_roots),
           # the same roots for a test's ``python -I`` child (sandboxes/startup_hooks.py installs the hook)
           "TASKFORGE_SRC_ROOTS": os.pathsep.join(src_roots)}
    if Path(py_bin).parent.joinpath("pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(Path(py_bin).parent)
    return env


def _skips(cfg: dict) -> tuple[frozenset, tuple]:
    return frozenset(cfg.get("skip_dirs", ())), tuple(cfg.get("skip_suffixes", (".pyc", ".pyo")))


def _tail(path: Path, size: int = 4000) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode("utf-8", "replace")


def score(cfg: dict, result: run.RunResult, plan: canaries.CanaryPlan) -> tuple[dict, list, list]:
    """(outcomes of the graded tests, zeroing flags, warnings), as ``taskforge.reward.reward._score``."""
    ledger = result.ledger
    f2p, p2p = list(cfg["fail_to_pass"]), list(cfg["pass_to_pass"])
    broken_files = {c.split("::")[0] for c in ledger.collection_errors}
    outcomes = {}
    for n in f2p + p2p:  # a test whose file failed to import is an error, not merely missing
        outcomes[n] = ledger.outcomes.get(n, "error" if n.split("::")[0] in broken_files else "missing")
    flags, warnings = [], []
    if result.timed_out:
        flags.append("timeout")
    elif ledger.shadows:
        flags += ["patch_refused", "tampering"]
    elif ledger.forged:
        flags += ["forged_results", "tampering"]
    elif ledger.end is None:
        flags += ["no_report", "tampering"]
    else:
        problems = plan.verify(ledger.outcomes, ledger.collection_errors, finished=True)
        if problems:
            flags += ["canary_failed", "tampering"]
            if any(p.startswith("must-fail") for p in problems):
                flags.append("canary_fail_did_not_fail")
            if any(p.startswith("must-pass") for p in problems):
                flags.append("canary_pass_did_not_pass")
    if not result.all_dead:
        flags += ["survivors", "tampering"]
    if ledger.collection_errors:
        warnings.append("collection_error")
    if any(o == "missing" for o in outcomes.values()):
        warnings.append("missing_tests")
    return outcomes, list(dict.fromkeys(flags)), warnings


def grade(cfg: dict, workspace: Path, tests_dir: Path, python: str, details: dict) -> float:
    """Score the agent's files at ``workspace`` (sanitized in place); fills ``details``."""
    f2p, p2p = list(cfg["fail_to_pass"]), list(cfg["pass_to_pass"])
    if not workspace.is_dir():
        details["flags"].append("no_submission")
        details["detail"] = f"no workspace at {workspace} (the agent's files did not reach the verifier)"
        return 0.0
    scratch = Path(tempfile.mkdtemp(prefix="tfgrade-"))
    try:
        os.chmod(scratch, 0o711)
        broken, originals = scratch / "broken", scratch / "originals"
        _extract(tests_dir / cfg.get("broken_workspace", "workspace.tar.gz"), broken)
        _extract(tests_dir / cfg["test_files"], originals)
        _monitor(cfg, workspace_rules.agent_diff(workspace, broken, *_skips(cfg)), tests_dir, details)
        protected = workspace_rules.Protected.from_config(cfg)
        done = workspace_rules.sanitize(workspace, broken, originals, protected, *_skips(cfg),
                                        frozenset(cfg.get("original_symlinks", ())))
        details.update(changed=done.changed, dropped=done.dropped, restored=done.restored,
                       removed=done.removed, startup_hooks=done.startup_hooks)
        if done.dropped:
            details["warnings"].append("protected_dropped")
        if done.refused or done.startup_hooks:
            details["flags"] += ["patch_refused", "tampering"] if done.refused else ["tampering"]
            details["detail"] = done.refused or f"the agent added interpreter start-up hooks {done.startup_hooks}"
            return 0.0
        ws = scratch / f"ws-{secrets.token_hex(4)}"
        workspace_rules.copy_for_run(workspace, ws, *_skips(cfg))
        result, plan = _run_tests(cfg, ws, scratch, python, tests_dir, details)
        outcomes, flags, warnings = score(cfg, result, plan)
        details["flags"] += flags
        details["warnings"] += warnings
        details.update(fail_to_pass={n: outcomes[n] for n in f2p}, pass_to_pass={n: outcomes[n] for n in p2p},
                       collection_errors=result.ledger.collection_errors, forged=result.ledger.forged[:5],
                       shadows=result.ledger.shadows[:5])
        passed = all(outcomes[n] == "passed" for n in f2p + p2p)
        return 1.0 if passed and not details["flags"] else 0.0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _monitor(cfg: dict, diff: str, tests_dir: Path, details: dict) -> None:
    """The reward path's patch monitor (``taskforge/reward/monitor.py``, copied as ``harbor_monitor.py`` with
    its ``unidiff`` under ``vendor/``) on the agent's diff; rules the gold patch fires are exempt."""
    import importlib.util

    sys.path.insert(0, str(tests_dir / "vendor"))
    spec = importlib.util.spec_from_file_location("harbor_monitor", tests_dir / "harbor_monitor.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"no patch monitor in {tests_dir}")
    monitor = importlib.util.module_from_spec(spec)
    sys.modules["harbor_monitor"] = monitor  # dataclasses look their module up
    spec.loader.exec_module(monitor)
    exempt = set(cfg.get("monitor_exempt", ()))
    findings = [f for f in monitor.scan_patch(diff) if f.rule not in exempt]
    details["findings"] = [f.to_dict() for f in findings[:20]]
    if findings:
        (details["flags"] if cfg.get("monitor_zero", True) else details["warnings"]).append("suspicious")
        first = findings[0]
        details["detail"] = f"patch monitor: {first.rule} at {first.path}:{first.line}: {first.evidence}"


def _prepare_reward_dir(reward_file: Path) -> None:
    reward_file.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        try:
            os.chmod(reward_file.parent, 0o755)  # the grading uid may not write here
        except OSError:
            pass
    reward_file.with_name("reward.json").unlink(missing_ok=True)
    _write_atomic(reward_file, "0\n")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--config", default=str(Path(__file__).with_name("config.json")))
    p.add_argument("--workspace", default="/app", help="the agent's files (Harbor's /app artifact)")
    p.add_argument("--reward", default="/logs/verifier/reward.txt")
    p.add_argument("--details", default="")
    p.add_argument("--python", default=sys.executable, help="interpreter that has pytest")
    a = p.parse_args(argv)
    config = Path(a.config).resolve()
    cfg = json.loads(config.read_text())
    reward_file = Path(a.reward).resolve()
    _prepare_reward_dir(reward_file)
    details_file = Path(a.details) if a.details else reward_file.with_name("details.json")
    details: dict = {"instance_id": cfg.get("instance_id", ""), "flags": [], "warnings": [], "removed": []}
    started = time.monotonic()
    try:
        reward = grade(cfg, Path(a.workspace).resolve(), config.parent, a.python, details)
    except Exception as exc:  # noqa: BLE001 - our side failed: score 0, say why
        details["flags"].append("grader_error")
        details["detail"] = f"{type(exc).__name__}: {exc}"
        reward = 0.0
    details["flags"] = list(dict.fromkeys(details["flags"]))
    if details["flags"]:
        reward = 0.0
    details.update(reward=reward, seconds=round(time.monotonic() - started, 3))
    _write_atomic(details_file, json.dumps(details, indent=2))
    reward_file.with_name("reward.json").unlink(missing_ok=True)
    _write_atomic(reward_file, f"{reward:g}\n")  # last: every process of the run is dead by now
    print(f"taskforge verifier: reward={reward:g} flags={details['flags']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
