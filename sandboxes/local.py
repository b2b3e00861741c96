"""The ``local`` sandbox: a virtualenv per environment and one confined subprocess per test run.

The embedded default: no daemon. Two modes, named by ``Settings.sandbox``:

``local`` (default): every run is confined by ``sandboxes.isolation`` (bubblewrap): new PID, network,
IPC and user namespaces, no capabilities, a read-only minimal system, only the venv (read-only), the
workspace (read-write, its tests and test configuration read-only: ``RunRequest.read_only``) and the
run's scratch directory bound; memory and process caps (``Settings.local_memory_mb``/``local_pids``);
the whole process tree is dead before the result is read. Threat model and the test of each claim:
``sandboxes/isolation.py``, ``tests/test_isolation.py``. Where bubblewrap cannot work, ``prepare``
raises ``SandboxError`` saying why and what to do.

``local-unsafe``: for *trusted* code only (a project's own tests): no filesystem, memory or PID
isolation; the network is cut with ``unshare -rn`` where that works; the process group is killed.

In both modes the child sees only PATH (venv first), a scratch ``HOME`` and ``TMPDIR``,
``PYTHONHASHSEED=0``, ``TZ=UTC``, ``LC_ALL=C.UTF-8``, ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONPATH``
(the source roots; the runner moves them after site-packages) and the request's extra variables; its
outcomes come back as records on its stdout (``sandboxes/ledger.py``), never from a file it could rewrite;
and the environment holds no copy of the project: after installing it (for its dependencies and
metadata), its own files are deleted from site-packages (only its ``.dist-info`` stays, ``RECORD``
rewritten), so tests import the code from the workspace and nowhere else. The one exception is what the
workspace cannot hold, being never built: the project's extension modules compiled from its native
sources (``sandboxes.extensions``), kept in ``<venv>/taskforge-ext`` and imported only when the
workspace does not provide that name.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import fcntl
import functools
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sandboxes import extensions, isolation, reaper, startup_hooks
from sandboxes.install_plan import InstallAttempt, fallback_notes, install_steps
from sandboxes.ledger import read_ledger
from sandboxes.protocol import CoverageContexts, EnvironmentFiles, RunOutput, RunRequest, Sandbox
from sandboxes.runner_deps import refusal_in, runner_dependency, runner_distributions
from taskforge.core.environment import EnvSpec, PreparedEnv, normalise_name
from taskforge.core.errors import EnvironmentBuildError, SandboxError
from taskforge.core.process import run_capture, run_channel
from taskforge.core.settings import Settings

RUNNER = Path(__file__).parent / "runner" / "pytest_runner.py"
READY_MARKER = ".taskforge-ready.json"
_LOG_TAIL = 6000
_BASE_REQUIREMENTS = ("pytest", "coverage>=7.4")


class LocalSandbox:
    """Virtualenv + subprocess backend of the ``Sandbox`` protocol (see the module docstring)."""

    name = "local"

    def __init__(self, settings: Settings | None = None, *, isolate_network: bool = True,
                 confined: bool = True) -> None:
        self.settings = settings or Settings.load()
        self.envs_dir = Path(self.settings.work_dir) / "envs"
        self._isolate_network = isolate_network
        self._netns: bool | None = None
        self.confined = confined
        self.name = "local" if confined else "local-unsafe"

    def _support(self) -> isolation.IsolationSupport:
        support = isolation.probe()
        if not support.usable:
            raise SandboxError(f"the local sandbox cannot confine test runs here: {support.reason}; "
                               "or use --sandbox docker, or --sandbox local-unsafe for trusted code only")
        return support

    # --- environment ---------------------------------------------------------------------------
    def prepare(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        """The environment of ``spec`` (built once); raises for a project that is part of the test runner
        (``runner_deps``); ``extra["runner_dependency"]`` names the chain when pytest imports the project."""
        if self.confined:
            self._support()
        venv = self.envs_dir / spec.key
        self.envs_dir.mkdir(parents=True, exist_ok=True)
        with _file_lock(self.envs_dir / f"{spec.key}.lock"):
            marker = venv / READY_MARKER
            env = None
            if marker.is_file():
                try:
                    env = PreparedEnv.from_dict(json.loads(marker.read_text()))
                    install_runner(venv)
                except (ValueError, KeyError):
                    env = None  # a damaged marker: rebuild
            env = env or self._build(spec, Path(repo_dir), venv)
            for site in sorted(venv.glob("lib/python*/site-packages")):  # cached venvs predating it too
                startup_hooks.install(site)
        chains = runner_distributions(sorted(venv.glob("lib/python*/site-packages")), env.python_version)
        if why := refusal_in(spec.project_name, chains):
            raise EnvironmentBuildError(why)
        if chain := runner_dependency(spec.project_name, chains):
            env = dataclasses.replace(env, extra={**env.extra, "runner_dependency": chain})
        if self.confined:
            # what a confined run hides, read now (cached): the walk of /usr is tens of thousands of system
            # calls, each of which waits for the GIL when a CPU-bound thread runs beside it (the profile's
            # static index: 46 s instead of 0.4 s for networkx's first run)
            isolation.python_hidden(venv)
        return env

    def _build(self, spec: EnvSpec, repo_dir: Path, venv: Path) -> PreparedEnv:
        start = time.monotonic()
        shutil.rmtree(venv, ignore_errors=True)
        log: list[str] = []
        host_pip = _host_pip()
        venv_argv = [self.settings.python, "-m", "venv", *(["--without-pip"] if host_pip else []), str(venv)]
        self._step(["python -m venv"], venv_argv, 300, log, spec)
        py = str(venv / "bin" / "python")
        pip = [*host_pip, "--python", py] if host_pip else [py, "-m", "pip"]
        build = Path(tempfile.mkdtemp(prefix=f".build-{spec.key}-", dir=self.envs_dir))
        attempts: list[InstallAttempt] = []
        try:
            # pip may write build/ and *.egg-info into the tree it installs: give it a copy
            tree = build / "tree"
            shutil.copytree(repo_dir, tree, ignore=shutil.ignore_patterns(".git"), symlinks=True)
            for step in install_steps(spec, _BASE_REQUIREMENTS):
                reqs = build / "requirements.txt"
                reqs.write_text("\n".join(step.requirements) + "\n")
                argv = [*pip, "install", "--disable-pip-version-check", "--no-input",
                        "--progress-bar", "off", "-r", str(reqs)]
                if step.install_target:
                    path, _, extras = step.install_target.partition("[")
                    argv.append(str((tree / path).resolve()) + (f"[{extras}" if extras else ""))
                shown = " ".join(["pip install", *step.requirements, step.install_target])
                why = self._try_step([f"({step.label}) {shown}"], argv, self.settings.install_timeout_s, log)
                if not why:
                    break
                attempts.append(InstallAttempt(step, why))
            else:
                raise EnvironmentBuildError(
                    f"installing {spec.project_name} failed at every step: "
                    + "; ".join(f"{a.step.label}: {a.why[:200]}" for a in attempts)
                    + "; check the project's install metadata or add the missing requirement")
        finally:
            shutil.rmtree(build, ignore_errors=True)
        if attempts:
            spec = dataclasses.replace(spec, notes=(*spec.notes, *fallback_notes(attempts, step)))
            log.append("$ (taskforge) " + "\n".join(fallback_notes(attempts, step)))
        removed, compiled = strip_project_code(venv, spec, repo_dir) if spec.install_target else ([], [])
        log.append(f"$ (taskforge) removed {len(removed)} installed files of {spec.project_name}"
                   + (f"; kept its compiled extension modules {', '.join(extensions.module_names(compiled))}"
                      if compiled else "")
                   + ("" if spec.compiled_extensions else "; pure-Python variant: no compiled extension module kept"))
        rc, frozen = run_capture([*pip, "freeze", "--disable-pip-version-check"], 120, env=_build_env(self.settings))
        project = normalise_name(spec.project_name)
        frozen_lines = tuple(ln for ln in frozen.splitlines()
                             if ln.strip() and normalise_name(ln.split("==")[0].split(" @ ")[0]) != project)
        rc, version = run_capture([py, "-c", "import platform; print(platform.python_version())"], 60)
        install_runner(venv)
        env = PreparedEnv(
            spec=spec, backend="local", location=str(venv), python_version=version.strip(),
            frozen=frozen_lines, install_log="\n".join(log)[-_LOG_TAIL:],
            build_seconds=round(time.monotonic() - start, 3),
            extra={"install_command": shown, "removed_files": str(len(removed)),
                   **({"extension_modules": ",".join(extensions.module_names(compiled))} if compiled else {})},
        )
        tmp = venv / (READY_MARKER + ".tmp")
        tmp.write_text(json.dumps(env.to_dict(), indent=2))
        os.replace(tmp, venv / READY_MARKER)  # written last: its presence means "complete"
        return env

    def _step(self, label: list[str], argv: list[str], timeout: float, log: list[str], spec: EnvSpec) -> None:
        why = self._try_step(label, argv, timeout, log)
        if why:
            raise EnvironmentBuildError(f"building the environment of {spec.project_name} failed: {why}; "
                                        "check that the interpreter in Settings.python works")

    def _try_step(self, label: list[str], argv: list[str], timeout: float, log: list[str]) -> str:
        """Run one build step; "" when it worked, else one line saying why not (the log keeps the rest)."""
        rc, out = run_capture(argv, timeout, env=_build_env(self.settings), tail=200_000)
        log.append(f"$ {' '.join(label)}\n{out[-_LOG_TAIL:]}")
        if rc == 0:
            return ""
        what = f"timed out after {timeout:.0f}s" if rc is None else f"exit {rc}"
        errors = [ln.strip() for ln in out.splitlines() if ln.strip().startswith(("ERROR", "error:"))]
        detail = errors[-1] if errors else (out.strip().splitlines() or ["no output"])[-1]
        return f"{what}: {detail[:300]} (ran: {' '.join(label)[:200]})"

    def warm(self) -> Sandbox:
        from sandboxes.warm import WarmLocalSandbox

        return WarmLocalSandbox(self)

    def clone_env(self, env: PreparedEnv, scratch: Path) -> PreparedEnv:
        dest = Path(scratch) / "venv"
        shutil.copytree(env.location, dest, symlinks=True)
        return dataclasses.replace(env, location=str(dest))

    def environment_files(self, env: PreparedEnv) -> EnvironmentFiles:
        stdlib = isolation.python_stdlib(env.location)
        return EnvironmentFiles(directory=Path(env.location), stdlib=Path(stdlib[0]) if stdlib else None,
                                stdlib_skip=stdlib[1] if stdlib else ())

    # --- test runs -----------------------------------------------------------------------------
    @property
    def network_isolated(self) -> bool:
        """Whether runs get no network (``unshare -rn`` works here); probed once."""
        if self._netns is None:
            self._netns = False
            if self._isolate_network and shutil.which("unshare"):
                rc, _ = run_capture(["unshare", "-rn", "true"], 10)
                self._netns = rc == 0
        return self._netns

    def run(self, env: PreparedEnv, workspace: Path, request: RunRequest) -> RunOutput:
        start = time.monotonic()
        workspace = Path(workspace).resolve()
        venv = Path(env.location)
        runner = install_runner(venv)
        scratch = Path(tempfile.mkdtemp(prefix="taskforge-run-"))
        try:
            (scratch / "home").mkdir()
            (scratch / "tmp").mkdir()
            req = {**build_request(env.spec, workspace, request, scratch), "channel_fd": 1,
                   "log_path": str(scratch / "output.log")}
            (scratch / "request.json").write_text(json.dumps(req))
            argv = [str(venv / "bin" / "python"), str(runner), str(scratch / "request.json")]
            child_env = run_env(env.spec, workspace, venv, scratch, request.env)
            if self.confined:
                rc, records, err = self._run_confined(argv, request, workspace, venv, scratch, child_env)
            else:
                if self.network_isolated:
                    argv = ["unshare", "-rn", *argv]
                rc, records, err = run_channel(argv, request.timeout_s, cwd=workspace, env=child_env)
            tail = (read_tail(scratch / "output.log", _LOG_TAIL) + err)[-_LOG_TAIL:]
            report = read_ledger(records, exit_code=rc, elapsed=time.monotonic() - start, output_tail=tail,
                                 timed_out=rc is None, collect_only=request.collect_only)
            coverage = read_coverage(Path(req["coverage_json"])) if request.coverage and rc is not None else None
            return RunOutput(report=report, coverage=coverage, seconds=round(time.monotonic() - start, 3))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run_confined(self, argv: list[str], request: RunRequest, workspace: Path, venv: Path, scratch: Path,
                      child_env: Mapping[str, str]) -> tuple[int | None, bytes, str]:
        support = self._support()
        protected = [workspace / p for p in request.read_only if (workspace / p).exists()]
        mounts = isolation.Mounts.of(ro=isolation.python_mounts(venv), rw=[workspace, scratch],
                                     protected=[p for p in protected if not p.is_symlink()],
                                     hidden=isolation.python_hidden(venv))
        limits = isolation.Limits(memory_mb=self.settings.local_memory_mb, pids=self.settings.local_pids)
        with isolation.confine(limits, support) as scope:
            full = isolation.isolated_argv(argv, mounts=mounts, limits=limits, scope=scope, cwd=workspace,
                                           env=child_env)
            return run_channel(full, request.timeout_s, env={"PATH": "/usr/bin:/bin"}, pass_fds=scope.pass_fds,
                               kill=lambda: None if scope.kill_all() else None)


# --- pieces shared with other backends (the docker sandbox builds the same request) -----------------

def build_request(spec: EnvSpec, workspace: Path, request: RunRequest, scratch: Path) -> dict[str, Any]:
    """The runner's request.json for ``request`` (paths as seen by the runner)."""
    return {
        "args": [*spec.pytest_args, *request.tests],
        # a whole-suite run: the runner passes those of these paths that exist in its workspace (a test file the
        # hiding removed whole is gone, and pytest given a missing path collects nothing at all)
        **({} if request.tests else {"suite_paths": list(full_suite_paths(spec))}),
        "channel_path": str(scratch / "records.jsonl"),
        "src_roots": [str((workspace / r).resolve()) for r in spec.src_roots],
        "coverage": request.coverage,
        "coverage_source": [str(workspace / d) for d in spec.package_dirs] or [str(workspace)],
        **({"coverage_omit": [str(workspace / f) for f in request.coverage_omit]}
           if request.coverage and request.coverage_omit else {}),
        "coverage_json": str(scratch / "coverage.json"),
        "collect_only": request.collect_only,
        "tracebacks": request.tracebacks,
        "stop_at_failure": request.stop_at_failure,
        "stop_after": request.stop_after,
        **({"stop_at_failure_of": list(request.stop_at_failure_of)} if request.stop_at_failure_of else {}),
        **({"test_deadline_s": request.test_deadline_s} if request.test_deadline_s > 0 else {}),
        **({"test_deadlines": dict(request.test_deadlines)} if request.test_deadlines else {}),
        "grading": request.grading,
        **({"shadow_allowed": list(request.shadow_allowed)} if request.shadow_allowed is not None else {}),
    }


def full_suite_paths(spec: EnvSpec) -> tuple[str, ...]:
    """What pytest is given for a whole-suite run: the test paths and the doctest-only paths."""
    return tuple(dict.fromkeys((*spec.test_paths, *getattr(spec, "doctest_paths", ()))))


NUMERIC_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                       "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")


def run_env(spec: EnvSpec, workspace: Path, venv: Path, scratch: Path,
            extra: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a test run: nothing of the parent's leaks in."""
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "VIRTUAL_ENV": str(venv),
        "PYTHONHASHSEED": "0",
        "TZ": "UTC",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        # mypy writes .mypy_cache into its cwd, and crashes when that is a read-only test folder (typeguard
        # 4.6.1 runs mypy in tests/mypy/); a cache of the original code is also a leak we never want to write
        "MYPY_CACHE_DIR": str(scratch / "tmp" / "mypy-cache"),
        "PYTHONPATH": os.pathsep.join(str((workspace / r).resolve()) for r in spec.src_roots),
        # the same roots for a test's ``python -I`` child, which ignores PYTHONPATH (sandboxes.startup_hooks)
        **startup_hooks.roots_env(str((workspace / r).resolve()) for r in spec.src_roots),
        # one thread per numeric library: runs share the cores with other runs (jobs, the static index), and
        # OpenBLAS' helper threads spin while they wait; networkx's numpy/scipy tests took twice the CPU
        # (28.4 CPU-s for 14.4 CPU-s single-threaded) and more wall time. A run's ``env`` may set others.
        **dict.fromkeys(NUMERIC_THREAD_VARS, "1"),
    }
    if token := reaper.run_token():  # marks the run's processes for the watchdog of sandboxes.reaper
        env[reaper.TOKEN_ENV] = token
    env.update(extra)
    return env


def read_tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of a log file (no symlink followed: the run could have planted one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode("utf-8", "replace")


def read_records(path: Path) -> bytes:
    """The records a run appended to its channel file (``channel_path``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_coverage(path: Path) -> CoverageContexts | None:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return {f: {int(ln): tuple(ids) for ln, ids in lines.items()} for f, lines in raw.items()}


def strip_project_code(venv: Path, spec: EnvSpec, repo_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """Delete the project's own installed files from site-packages, keeping its ``.dist-info``.

    ``RECORD`` is rewritten to list only what remains. With ``repo_dir``, the extension modules compiled
    from the repository's native sources (``sandboxes.extensions.keep``) are moved into the venv's
    overlay instead, and the finder that serves them is installed. Returns (removed paths, kept extension
    modules), both site-packages-relative.
    """
    project = normalise_name(spec.project_name)
    removed: list[str] = []
    overlaid: list[str] = []
    for site in sorted(venv.glob("lib/python*/site-packages")):
        for dist_info in sorted(site.glob("*.dist-info")):
            if normalise_name(dist_info.name[: -len(".dist-info")].rsplit("-", 1)[0]) != project:
                continue
            record = dist_info / "RECORD"
            rows = list(csv.reader(io.StringIO(record.read_text()))) if record.is_file() else []
            compiled = (set(extensions.keep([r[0] for r in rows if r], repo_dir, site))
                        if repo_dir and spec.compiled_extensions else set())
            kept = []
            for row in rows:
                if not row:
                    continue
                target = (site / row[0]).resolve()
                if target.is_relative_to(dist_info.resolve()) or not target.is_relative_to(site.resolve()):
                    kept.append(row)  # metadata, and scripts outside site-packages (bin/ wrappers)
                    continue
                if row[0] in compiled and target.is_file():
                    extensions.move_into_overlay(site, row[0], venv)
                    overlaid.append(row[0])
                elif target.is_file() or target.is_symlink():
                    target.unlink()
                    removed.append(row[0])
                _prune_empty(target.parent, site)
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(kept)
            record.write_text(buf.getvalue())
        for d in spec.package_dirs:  # anything left behind by a non-standard installer
            for leftover in (site / Path(d).name, site / f"{Path(d).stem}.py"):
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                    removed.append(leftover.name + "/")
                elif leftover.is_file() and leftover.suffix == ".py":
                    leftover.unlink()
                    removed.append(leftover.name)
        if overlaid:
            extensions.install_finder(site)
    return removed, overlaid


def _prune_empty(d: Path, stop: Path) -> None:
    stop = stop.resolve()
    while d != stop and d.is_relative_to(stop):
        pycache = d / "__pycache__"
        if pycache.is_dir() and not any(p.suffix != ".pyc" for p in pycache.iterdir()):
            shutil.rmtree(pycache, ignore_errors=True)
        try:
            d.rmdir()
        except OSError:
            return
        d = d.parent


def install_runner(venv: Path) -> Path:
    """Copy the runner into its own folder of the venv (its folder lands on sys.path: keep it alone)."""
    target = venv / "taskforge-runner" / "pytest_runner.py"
    src = RUNNER.read_bytes()
    if not target.is_file() or target.read_bytes() != src:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(src)
        os.replace(tmp, target)
    return target


@functools.cache
def _host_pip() -> tuple[str, ...]:
    """This interpreter's pip when it can install into another environment (``--python``, pip >= 22.3).

    Creating venvs ``--without-pip`` and installing with the host's pip skips ``ensurepip`` (seconds
    to a minute per environment). Empty when unavailable: then each venv gets its own pip.
    """
    rc, out = run_capture([sys.executable, "-m", "pip", "--version"], 60)
    if rc != 0:
        return ()
    try:
        major, minor = (int(x) for x in out.split()[1].split(".")[:2])
    except (IndexError, ValueError):
        return ()
    return (sys.executable, "-m", "pip") if (major, minor) >= (22, 3) else ()


def _build_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    if ca := settings.effective_ca_bundle:
        env.setdefault("PIP_CERT", ca)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

