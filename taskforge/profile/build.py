"""The profile of a repository: the exact picture every later stage stands on.

``build_profile(source, settings, sandbox)`` resolves the source (a pinned checkout), detects and
prepares its environment, runs the whole suite N times (the first run also records per-test line
coverage), grades the original once through the reward path (``harness_check``: reliable tests that fail
only there are dropped), and builds the static index. For a project pytest itself imports (the sandbox's
``extra["runner_dependency"]``), the first run's ``preloaded`` record gives ``EnvSpec.runner_files``: the
project's files pytest had imported before loading plugins and conftests (never deleted, always restored). ``Profile.save(dir)`` / ``Profile.load(dir)`` use the versioned
on-disk format documented in ``datasets/PROFILE_FORMAT.md``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import taskforge
from generators.env_detect import detect_env
from generators.sources import RepoSnapshot, resolve_source
from sandboxes.local import full_suite_paths
from sandboxes.protocol import RunRequest, Sandbox
from taskforge.core.entities import Entity
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.errors import DatasetError, NoTestsError, SandboxError, SandboxTimeout
from taskforge.core.files import write_atomic
from taskforge.core.settings import Settings
from taskforge.core.testreport import ReportFlag, TestReport
from taskforge.profile.baseline import Baseline, compute_baseline
from taskforge.profile.coverage_map import CoverageMap, coverage_percent, covered_entities, statement_lines
from taskforge.profile.declared_flaky import without_declared_flaky
from taskforge.profile.harness_check import checked_baseline
from taskforge.profile.lint_items import without_lint_items
from taskforge.profile.subtests import without_subtests

SCHEMA_VERSION = 1
PROFILE_FILE = "profile.json"
_FILES = {"baseline": "baseline.json", "coverage": "coverage.json", "index": "index.json"}

Progress = Callable[[str], None]


def _static_index_module() -> Any:
    """The static index lives in ``generators.static_index``; mining still works without it."""
    try:
        from generators import static_index
    except ImportError:
        return None
    return static_index


@dataclass(frozen=True, slots=True)
class Profile:
    snapshot: RepoSnapshot
    env: PreparedEnv
    baseline: Baseline
    coverage: CoverageMap
    index: Any = None  # generators.static_index.StaticIndex, or None when the indexer is unavailable
    timings: Mapping[str, float] = field(default_factory=dict)
    coverage_percent: float = 0.0  # of function/method body statements, see coverage_map.coverage_percent
    taskforge_version: str = taskforge.__version__

    def __post_init__(self) -> None:
        # what the coverage run saw run outside every test and their collection is the import-time set of
        # functions/methods (what only the collection runs breaks some test files: validate's collect_broken)
        if self.index is not None and self.coverage.outside and hasattr(self.index, "observe_import_time"):
            self.index.observe_import_time(e.qualname for e in self.index.entities
                                           if e.kind.value in ("function", "method")
                                           and self.coverage.ran_at_import(e))

    @property
    def spec(self) -> EnvSpec:
        return self.env.spec

    @property
    def repo_dir(self) -> Path:
        return Path(self.snapshot.path)

    @property
    def entities(self) -> tuple[Entity, ...]:
        return tuple(self.index.entities) if self.index is not None else ()

    def covered_entities(self) -> tuple[Entity, ...]:
        """Entities whose body is executed by at least one reliable (always passing) test, or that a
        test module uses at import time (``generators.import_time``)."""
        from generators.candidates import import_time_tests

        by_coverage = set(covered_entities(self.entities, self.coverage, self.baseline.reliable))
        return tuple(e for e in self.entities if e in by_coverage or import_time_tests(e, self))

    def summary(self) -> dict[str, Any]:
        c = self.baseline.counts()
        return {
            "source": self.snapshot.source, "name": self.snapshot.name, "version": self.snapshot.version,
            "commit": self.snapshot.commit,
            "tests_passed": c["passed"], "tests_failed": c["failed"], "tests_flaky": c["flaky"],
            "tests_skipped": c["skipped"], "tests_grading_failed": len(self.baseline.grading_failed),
            "grading_check": self.baseline.grading_check.line if self.baseline.grading_check else "",
            "collection_errors": len(self.baseline.collection_errors),
            "entities": len(self.entities), "covered_entities": len(self.covered_entities()),
            "coverage_percent": self.coverage_percent, "runs": self.baseline.runs,
            "seconds": round(self.timings.get("total", 0.0), 2),
        }

    # --- on disk ---------------------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        """Write the profile under ``directory``; ``profile.json`` is written last (its presence = complete)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / PROFILE_FILE).unlink(missing_ok=True)
        _write_json(d / _FILES["baseline"], self.baseline.to_dict())
        self.coverage.save(d / _FILES["coverage"])
        index = self.index.to_dict() if self.index is not None else {"version": 1, "entities": [],
                                                                     "unavailable": True}
        _write_json(d / _FILES["index"], index)
        _write_json(d / PROFILE_FILE, {
            "schema_version": SCHEMA_VERSION, "taskforge_version": self.taskforge_version,
            "snapshot": self.snapshot.to_dict(), "env": self.env.to_dict(),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "coverage_percent": self.coverage_percent, "summary": self.summary(), "files": dict(_FILES),
        })
        return d

    @classmethod
    def load(cls, directory: Path) -> Profile:
        d = Path(directory)
        try:
            meta = json.loads((d / PROFILE_FILE).read_text())
        except FileNotFoundError:
            raise DatasetError(f"{d} holds no profile ({PROFILE_FILE} missing); run `taskforge mine SOURCE "
                               f"--out {d}` first") from None
        except ValueError as exc:
            raise DatasetError(f"{d / PROFILE_FILE} is not valid JSON ({exc}); re-run `taskforge mine`") from exc
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise DatasetError(f"profile {d} has schema_version {version!r}, expected {SCHEMA_VERSION}; "
                               "re-run `taskforge mine` with this taskforge version")
        files = {**_FILES, **meta.get("files", {})}
        try:
            baseline = Baseline.from_dict(json.loads((d / files["baseline"]).read_text()))
            coverage = CoverageMap.load(d / files["coverage"])
            index_raw = json.loads((d / files["index"]).read_text())
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"profile {d} is incomplete or damaged ({exc}); re-run `taskforge mine`") from exc
        module = _static_index_module()
        index = None
        if module is not None and not index_raw.get("unavailable"):
            try:
                index = module.StaticIndex.from_dict(index_raw)
            except ValueError as exc:
                raise DatasetError(f"profile {d}: {exc}") from exc
        return cls(
            snapshot=RepoSnapshot.from_dict(meta["snapshot"]), env=PreparedEnv.from_dict(meta["env"]),
            baseline=baseline, coverage=coverage, index=index, timings=dict(meta.get("timings", {})),
            coverage_percent=float(meta.get("coverage_percent", 0.0)),
            taskforge_version=meta.get("taskforge_version", ""),
        )


def build_profile(source: str, settings: Settings, sandbox: Sandbox, *, rev: str | None = None,
                  runs: int | None = None, progress: Progress | None = None, pure: bool = False) -> Profile:
    """Mine ``source`` and profile its test suite (see the module docstring). Raises ``TaskforgeError``s.

    ``pure``: the pure-Python variant, in an environment that serves none of the project's compiled
    extension modules (``EnvSpec.compiled_extensions``; ``taskforge.pipeline.variants``).
    """
    say = progress or (lambda _msg: None)
    timings: dict[str, float] = {}
    t0 = time.monotonic()

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        timings[name] = round(now - since, 3)
        return now

    say(f"resolving {source}")
    snapshot = resolve_source(source, Path(settings.work_dir), rev)
    t = lap("resolve", t0)
    spec = detect_env(Path(snapshot.path), python=_python_version(settings.python), name_hint=snapshot.name)
    if pure:
        spec = dataclasses.replace(spec, compiled_extensions=False, notes=(
            *spec.notes, "compiled extension modules: none served (the pure-Python variant)"))
    t = lap("detect", t)
    say(f"preparing the environment of {snapshot.slug}")
    env = sandbox.prepare(spec, Path(snapshot.path))
    t = lap("prepare", t)

    n = max(1, int(runs if runs is not None else settings.baseline_runs))
    reports: list[TestReport] = []
    contexts = None
    module = _static_index_module()
    omit = module.unmeasured_files(Path(snapshot.path), spec) if module is not None else ()
    with contextlib.ExitStack() as stack:
        # the workspace is copied before the index starts: each system call of the copy waits for the GIL while
        # a CPU-bound thread runs (networkx's copy took 12 s beside the index, under a second alone)
        ws = stack.enter_context(_workspace(snapshot, Path(settings.work_dir)))
        # the index is pure Python work in this process, the runs are child processes: overlap them
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="static-index")
        stack.callback(pool.shutdown, wait=False, cancel_futures=True)
        index_job = pool.submit(_timed, module.build_index, Path(snapshot.path), spec) if module is not None else None
        for i in range(n):
            say(f"run {i + 1}/{n} of the suite of {snapshot.slug}{' (with coverage)' if i == 0 else ''}")
            out = sandbox.run(env, ws, RunRequest(timeout_s=settings.test_timeout_s, coverage=(i == 0),
                                                  coverage_omit=omit if i == 0 else (),
                                                  read_only=_test_dirs(ws, spec)))
            _check_run(out.report, snapshot, env, settings.test_timeout_s)
            reports.append(out.report)
            if i == 0:
                contexts = out.coverage
            t = lap("coverage_run" if i == 0 else f"run_{i + 1}", t)
            limit = float(settings.baseline_more_runs_max_s)
            if i == 0 and n > 1 and 0 < limit < timings["coverage_run"]:
                say(f"the coverage run of {snapshot.slug} took {timings['coverage_run']:.0f}s: no more "
                    f"baseline runs (the grading check observes every test once more)")
                timings["runs_skipped"] = n - 1
                break
        say(f"indexing {snapshot.slug}")
        index, timings["index"] = index_job.result() if index_job is not None else (None, 0.0)
    if env.extra.get("runner_dependency"):
        env = dataclasses.replace(env, spec=dataclasses.replace(env.spec, runner_files=runner_files(
            reports[0].preloaded, env.spec)))
        say(f"{snapshot.name} is imported by the test runner ({env.extra['runner_dependency']}): "
            f"{len(env.spec.runner_files)} of its files load before any plugin; nothing in them is deleted")
    baseline = compute_baseline(reports, timing_reports=reports[1:] or reports)
    if index is not None and any(ReportFlag.FORGED_RECORDS in r.flags for r in reports):
        baseline = without_subtests(baseline, Path(snapshot.path), index.test_files)
    if index is not None:  # what the project itself marks flaky (zipp's big-O timing test) is never graded
        baseline = without_declared_flaky(baseline, Path(snapshot.path), index.test_files)
    baseline = without_lint_items(baseline)  # nor what a lint or type-check plugin collects (pydash's mypy items)
    if settings.grading_check:  # the original graded once as tasks are: tests only plain pytest passes go
        say(f"grading the original of {snapshot.slug} once through the reward path")
        g0 = time.monotonic()
        baseline = checked_baseline(Path(snapshot.path), env, baseline, sandbox, settings, name=snapshot.name)
        lap("grading_check", g0)
        if baseline.grading_check is not None and baseline.grading_check.status != "passed":
            say(baseline.grading_check.line)
    coverage = CoverageMap.from_contexts(contexts or {}, nodeids=(r.nodeid for r in reports[0].results))
    entities = tuple(index.entities) if index is not None else ()
    stmts = statement_lines(Path(snapshot.path), sorted({e.file for e in entities}))
    percent = coverage_percent(coverage, entities, stmts)
    timings["total"] = round(time.monotonic() - t0, 3)
    return Profile(snapshot=snapshot, env=env, baseline=baseline, coverage=coverage, index=index,
                   timings=timings, coverage_percent=percent)


def runner_files(preloaded: Iterable[str], spec: EnvSpec) -> tuple[str, ...]:
    """The project's own files among ``preloaded`` (workspace-relative): those under a package dir of
    ``spec`` (every preloaded ``.py`` file when none is known); test files never are."""
    roots = [d.strip("/") for d in spec.package_dirs if d.strip("/") not in ("", ".")]
    out = []
    for rel in preloaded:
        if not rel.endswith(".py") or Path(rel).name == "conftest.py":
            continue
        if not roots or any(rel == r or rel.startswith(r + "/") for r in roots):
            out.append(rel)
    return tuple(sorted(out))


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    start = time.monotonic()
    return fn(*args), round(time.monotonic() - start, 3)


def _check_run(report: TestReport, snapshot: RepoSnapshot, env: PreparedEnv, timeout_s: float) -> None:
    args = " ".join(("pytest", *env.spec.pytest_args, *full_suite_paths(env.spec)))
    last = _last_line(report.output_tail)
    if report.timed_out:
        raise SandboxTimeout(f"the test suite of {snapshot.slug} ran past {timeout_s:.0f}s and was killed "
                             f"(ran: {args}); raise --test-timeout or TASKFORGE_TEST_TIMEOUT_S")
    if ReportFlag.NO_REPORT in report.flags:
        raise SandboxError(f"the test runner of {snapshot.slug} died without a report (exit {report.exit_code}; "
                           f"ran: {args}): {last}")
    if not report.results:
        errs = f"; collection errors in {list(report.collection_errors)[:5]}" if report.collection_errors else ""
        raise NoTestsError(f"repo {snapshot.slug!r} has no tests pytest can collect (ran: {args}; exit "
                           f"{report.exit_code}{errs}): {last}")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not set(ln.strip()) <= set("=-")]
    errors = [ln for ln in lines if ln.startswith(("ERROR", "E "))]
    return (errors or lines or ["no output"])[-1][:300]


def _python_version(python: str) -> str:
    digits = "".join(ch for ch in Path(python).name if ch.isdigit() or ch == ".").strip(".")
    return digits if digits.count(".") == 1 else f"{sys.version_info.major}.{sys.version_info.minor}"


@contextlib.contextmanager
def _workspace(snapshot: RepoSnapshot, work_dir: Path) -> Iterator[Path]:
    """A throw-away copy of the snapshot (without .git) to run the baseline in; removed afterwards."""
    root = work_dir / "workspaces"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{snapshot.slug}-", dir=root))
    try:
        ws = tmp / "ws"
        shutil.copytree(snapshot.path, ws, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        yield ws
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=False))


def _test_dirs(ws: Path, spec: Any) -> tuple[str, ...]:
    """The test directories, read-only in the baseline as they are in every grading: a test that writes into
    them (tomlkit's ``tests/examples/``) fails here too, so it never becomes a reliable test gold cannot pass."""
    dirs = (d.strip("/") for d in spec.test_paths)
    return tuple(d for d in dict.fromkeys(dirs) if d not in ("", ".") and (ws / d).is_dir() and not (ws / d).is_symlink())
