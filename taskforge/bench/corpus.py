"""The corpus benchmark: the whole pipeline, as a user runs it, over a committed list of real packages.

    taskforge bench corpus [--list FILE] [--budget-cpu-min 15] [--only a,b] [--out DIR] [--resume]
                           [--json FILE] [--md FILE]

Per package (one after another) ``taskforge generate pypi:NAME==VER --max-tasks 10 --json`` runs as its
own process tree, capped by the tree's CPU (``--budget-cpu-min``, process + every child, see
``corpus_tree``) and by wall time (``--wall-factor`` x budget: the machine may be shared). Then
``taskforge validate`` runs on whatever reached the dataset (own, smaller cap). The package's result is
read back from its files (``corpus_report.collect``) and written atomically to
``OUT/packages/NAME/result.json`` as soon as it is known, and the table and JSON are rewritten after
every package, so a killed benchmark loses at most the package it was on; ``--resume`` skips the
packages that have a result. A package that is run (again) starts clean: its dataset and its cached
profile are removed first, so CPU figures never include work done by an earlier run.

A failure (bad name, build error, crash, cap) is that package's status; it never stops the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from taskforge.bench.corpus_report import (
    PackageResult,
    canonical,
    collect,
    find_profile,
    last_json_line,
    render_markdown,
    targets,
    task_key,
    task_verdicts,
)
from taskforge.bench.corpus_tree import run_tree
from taskforge.core.errors import ConfigError
from taskforge.core.files import write_atomic

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIST = REPO_ROOT / "datasets" / "corpus" / "packages.toml"
DEFAULT_JSON = REPO_ROOT / "datasets" / "corpus" / "results.json"
DEFAULT_MD = REPO_ROOT / "datasets" / "CORPUS.md"
MAX_TASKS = 10
STOP_GRACE_S = 30.0  # SIGTERM -> SIGKILL: generate flushes, writes its manifest and card (10 s was too short at load 8)
_CLI = "from taskforge.cli import main; main()"


def load_corpus(path: Path, only: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The ``[[package]]`` tables of ``path`` (name, version, size, ...); with ``only``, those, in that order."""
    try:
        packages = tomllib.loads(Path(path).read_text()).get("package", [])
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"corpus list {path} is unreadable ({exc}); pass --list with a TOML file of "
                          "[[package]] tables (name, version)") from exc
    bad = [p for p in packages if not p.get("name") or not p.get("version")]
    if bad or not packages:
        raise ConfigError(f"corpus list {path}: every [[package]] needs a name and a version "
                          f"({len(packages)} tables, {len(bad)} incomplete)")
    if only:
        wanted = {canonical(n) for n in only}
        unknown = wanted - {canonical(p["name"]) for p in packages}
        if unknown:
            raise ConfigError(f"--only names {sorted(unknown)} not in {path}; "
                              f"available: {', '.join(p['name'] for p in packages)}")
        by_name = {canonical(p["name"]): p for p in packages}
        packages = [by_name[n] for n in dict.fromkeys(canonical(n) for n in only)]  # in the order given
    return packages


def load_plain(path: Path) -> dict[str, int]:
    """Plain pytest's pass count per canonical package name; {} without the file.

    ``reference_passed`` wins over ``passed`` where plain ``pytest`` runs nothing for a reason of its own
    (markdown: one collection error stops it; decorator: its suite file does not match ``python_files``);
    the entry's ``notes`` say which command gave the reference count.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return {canonical(k): int(v.get("reference_passed", v.get("passed", 0))) for k, v in data.items()}


def load_plain_skipped(path: Path) -> dict[str, int]:
    """Plain pytest's skipped count per canonical package name; {} without the file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return {canonical(k): int(v.get("skipped", 0)) for k, v in data.items()}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(COLUMNS="200", NO_COLOR="1", TERM="dumb", PYTHONUNBUFFERED="1")
    return env


def _recover_if_killed(dataset: Path, name: str, say: Callable[[str], None]) -> None:
    """A generate killed before its manifest (SIGKILL after the grace period) left whole shards and a
    journal: make them a dataset, as a user would with ``taskforge recover`` (tomlkit: 4 tasks in 4 shards,
    no manifest, counted as 0 written)."""
    from taskforge.core.errors import TaskforgeError
    from taskforge.pipeline.generate import JOURNAL_DIR
    from taskforge.pipeline.recover import recover

    if (dataset / "manifest.json").is_file() or not (dataset / JOURNAL_DIR).is_dir():
        return
    try:
        rec = recover(dataset)
    except TaskforgeError as exc:
        say(f"  {name}: killed before its manifest; recover failed: {exc}")
        return
    say(f"  {name}: killed before its manifest; recovered {rec.tasks} task(s) ({rec.from_journal} from the journal)")


def _written_tasks(dataset: Path) -> list[dict[str, Any]]:
    from taskforge.core.errors import TaskforgeError
    from taskforge.dataset.reader import Dataset

    if not (dataset / "manifest.json").is_file():
        return []
    try:
        return [{"instance_id": t.instance_id, "strategy": t.strategy, "entities": list(t.entities),
                 "key": list(task_key({"entities": t.entities, "provenance": t.provenance}))}
                for t in Dataset.open(dataset).tasks()]
    except (TaskforgeError, OSError, ValueError):
        return []


def run_package(pkg: Mapping[str, Any], out: Path, *, budget_cpu_min: float, wall_factor: float,
                validate_cpu_min: float, plain: Mapping[str, int], generate_args: Sequence[str] = (),
                say: Callable[[str], None] = print) -> PackageResult:
    """Run generate (+ validate) for one package and return its result; never raises for the package."""
    name, version = str(pkg["name"]), str(pkg["version"])
    commit = _commit()  # before the run: the code it starts with
    pdir, work = out / "packages" / canonical(name), out / "work"
    dataset = pdir / "dataset"
    shutil.rmtree(pdir, ignore_errors=True)  # a package that is run starts clean (see the module docstring)
    stale = find_profile(work, name, version)
    if stale is not None:
        shutil.rmtree(stale, ignore_errors=True)
    argv = [sys.executable, "-c", _CLI, "generate", f"pypi:{name}=={version}", "--out", str(dataset),
            "--work-dir", str(work), "--max-tasks", str(MAX_TASKS), "--json", *generate_args]
    start = time.time()
    run = run_tree(argv, cpu_cap_s=budget_cpu_min * 60, wall_cap_s=budget_cpu_min * 60 * wall_factor,
                   log=pdir / "generate.log", env=_env(), grace_s=STOP_GRACE_S)
    end = time.time()
    log_text = (pdir / "generate.log").read_text(errors="replace")
    status = run.status if run.status != "exited" else ("ok" if run.rc == 0 else "failed")
    _recover_if_killed(dataset, name, say)
    written = _written_tasks(dataset)
    validate: dict[str, Any] | None = None
    validate_cpu_s = 0.0
    if written:
        say(f"  {name}: validating {len(written)} tasks")
        vrun = run_tree([sys.executable, "-c", _CLI, "validate", str(dataset), "--work-dir", str(work), "--json"],
                        cpu_cap_s=validate_cpu_min * 60, wall_cap_s=validate_cpu_min * 60 * wall_factor,
                        log=pdir / "validate.log", env=_env())
        validate_cpu_s = vrun.cpu_s
        vlog = (pdir / "validate.log").read_text(errors="replace")
        validate = last_json_line(vlog) or {}
        validate["status"] = (vrun.status if vrun.status != "exited" else
                              "ok" if vrun.rc == 0 else "broken" if "holding" in validate else "failed")
        if "holding" not in validate:  # killed at its cap: the verdicts it printed before (one line per task)
            validate = {"status": validate["status"], **task_verdicts(vlog)}
    return collect(name, version, dataset=dataset, work=work, log_text=log_text, start=start, end=end,
                   status=status, rc=run.rc, cpu_s=run.cpu_s, written=written, validate=validate,
                   size=str(pkg.get("size", "small")), budget_cpu_min=budget_cpu_min,
                   plain_passed=plain.get(canonical(name)), leftovers=run.leftovers,
                   validate_cpu_min=round(validate_cpu_s / 60, 2), commit=commit)


def result_path(out: Path, name: str) -> Path:
    return out / "packages" / canonical(name) / "result.json"


def read_result(out: Path, name: str) -> PackageResult | None:
    try:
        return PackageResult.from_dict(json.loads(result_path(out, name).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_reports(results: Sequence[PackageResult], meta: Mapping[str, Any], json_out: Path, md_out: Path) -> None:
    body = {"meta": dict(meta), "targets": targets(results), "packages": [r.to_dict() for r in results]}
    write_atomic(json_out, json.dumps(body, indent=1, sort_keys=True) + "\n")
    write_atomic(md_out, render_markdown(results, meta))


def run_corpus(packages: Sequence[Mapping[str, Any]], out: Path, *, budget_cpu_min: float, wall_factor: float,
               validate_cpu_min: float, plain: Mapping[str, int], resume: bool, json_out: Path, md_out: Path,
               meta: Mapping[str, Any], generate_args: Sequence[str] = (), stop_at: float | None = None,
               say: Callable[[str], None] = print,
               runner: Callable[..., PackageResult] | None = None,
               plain_skipped: Mapping[str, int] | None = None) -> list[PackageResult]:
    """Every package in order; the reports are rewritten after each one. ``stop_at`` (epoch seconds):
    start no package after it (the packages not run are left out of the reports). ``runner``: what runs
    one package (default ``run_package``; tests pass a stand-in)."""
    run_one = runner or run_package
    results: list[PackageResult] = []
    for pkg in packages:
        name = str(pkg["name"])
        done = read_result(out, name) if resume else None
        if done is None:
            if stop_at is not None and time.time() >= stop_at:
                say(f"{name}: not started (--stop-at passed)")
                continue
            say(f"{name} {pkg['version']}: generating (budget {budget_cpu_min:g} CPU-min)")
            done = run_one(pkg, out, budget_cpu_min=budget_cpu_min, wall_factor=wall_factor,
                               validate_cpu_min=validate_cpu_min, plain=plain, generate_args=generate_args, say=say)
            write_atomic(result_path(out, name), json.dumps(done.to_dict(), indent=1, sort_keys=True) + "\n",
                         durable=True)
        if plain_skipped:
            done = dataclasses.replace(done, plain_skipped=plain_skipped.get(canonical(name)))
        say(f"  {name}: {done.status}, {done.tasks_written} tasks written ({done.accepted} accepted, "
            f"{done.decided} decided), {done.cpu_min} CPU-min" + (f"; {done.error}" if done.error else ""))
        results.append(done)
        write_reports(results, meta, json_out, md_out)
    return results


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def _raise_on_term(_sig: int, _frame: Any) -> None:
    raise SystemExit(143)  # run_tree takes the running package's tree down on the way out


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("corpus")
    def corpus_cmd(
        list_file: Annotated[Path, typer.Option("--list", help="TOML list of [[package]] name/version.")] = DEFAULT_LIST,
        budget_cpu_min: Annotated[float, typer.Option(min=0.05, help="CPU-minutes per package (generate tree).")] = 15.0,
        json_out: Annotated[Path, typer.Option("--json", help="Results JSON (rewritten after each package).")] = DEFAULT_JSON,
        md_out: Annotated[Path, typer.Option("--md", help="Markdown table (rewritten after each package).")] = DEFAULT_MD,
        only: Annotated[str, typer.Option(help="Comma-separated package names, run in this order "
                                                    "(default: the whole list, in its order).")] = "",
        out: Annotated[Path, typer.Option(help="Work folder: per-package datasets, logs, results; environments.")]
            = Path(".taskforge/corpus"),
        resume: Annotated[bool, typer.Option(help="Keep packages that already have a result in OUT.")] = False,
        plain_file: Annotated[Path | None, typer.Option("--plain", help="Plain-pytest counts (default: "
                                                        "plain_pytest.json next to the list).")] = None,
        wall_factor: Annotated[float, typer.Option(min=1.0, help="Wall cap = factor x budget (shared machines).")] = 3.0,
        validate_cpu_min: Annotated[float | None, typer.Option(help="CPU-minutes for `taskforge validate` of a "
                                                               "package's tasks (default: the budget).")] = None,
        generate_arg: Annotated[list[str] | None, typer.Option(help="Extra argument for every `taskforge generate` "
                                                               "(repeatable), e.g. --generate-arg=--jobs=2.")] = None,
        stop_at: Annotated[str | None, typer.Option(help="Start no package after this UTC time (HH:MM).")] = None,
        label: Annotated[str, typer.Option(help="Title of the table (e.g. BEFORE).")] = "",
    ) -> None:
        """Generate + validate on every package of a corpus list; write the table, the JSON and the targets."""
        from taskforge.cli._common import err_console, user_errors

        with user_errors():
            packages = load_corpus(list_file, tuple(n.strip() for n in only.split(",") if n.strip()))
            plain_path = plain_file or Path(list_file).parent / "plain_pytest.json"
            plain = load_plain(plain_path)
            deadline = None
            if stop_at:
                hh, mm = (int(x) for x in stop_at.split(":"))
                now = datetime.now(UTC)
                deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
            meta = {"label": label, "command": " ".join(["taskforge", "bench", "corpus", *sys.argv[3:]]),
                    "commit": _commit(), "budget_cpu_min": budget_cpu_min, "max_tasks": MAX_TASKS,
                    "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpus": os.cpu_count(),
                    "list": str(list_file)}
            signal.signal(signal.SIGTERM, _raise_on_term)
            results = run_corpus(packages, out.resolve(), budget_cpu_min=budget_cpu_min, wall_factor=wall_factor,
                                 validate_cpu_min=validate_cpu_min or budget_cpu_min, plain=plain, resume=resume,
                                 json_out=json_out, md_out=md_out, meta=meta, generate_args=tuple(generate_arg or ()),
                                 stop_at=deadline, say=lambda m: err_console.print(m, highlight=False, soft_wrap=True),
                                 plain_skipped=load_plain_skipped(plain_path))
        t = targets(results)
        typer.echo(f"{t['ok']}/{t['packages']} ok; pass count = plain pytest: {t['pass_match']}/{t['pass_match_of']}; "
                   f">= 10 distinct validated tasks: {t['yield_met']}/{t['packages']}; gaps > 60 s: "
                   f"{len(t['gap_after_first_over_60s'])}; covered -> task {t['covered_to_task_share']}; "
                   f"suite-eq per task {t['suite_eq_per_task']}")
        typer.echo(f"table: {md_out}; json: {json_out}")
