"""Export tasks as Harbor task directories (the format Harbor, TRL, SkyRL, rLLM... read).

One directory per task, built from the dataset alone (original tree archive + the row's patches):

    <name>/instruction.md           the problem statement (what the agent reads)
    <name>/task.toml                [metadata]; [agent] as an unprivileged user; [verifier] SEPARATE, with
                                    its own [verifier.environment]; the agent's /app declared as an artifact
    <name>/environment/             the agent's image: Dockerfile (FROM a configurable base image, the
                                    BROKEN workspace into /app), workspace.tar.gz, requirements.txt,
                                    ca-bundle.pem (optional), docker-compose.yaml (``network="compose"``)
    <name>/tests/                   the verifier's image (Harbor builds it from tests/Dockerfile): test.sh,
                                    run_tests.py + harbor_{workspace,run,canaries}.py (the verifier),
                                    grading_plugin.py, runner/pytest_runner.py, harbor_monitor.py +
                                    vendor/unidiff (the patch monitor), config.json,
                                    test_files.tar.gz (original test and test-support files),
                                    workspace.tar.gz (the broken workspace), test.patch
    <name>/solution/solve.sh        applies the gold patch (as the files it produces), for the oracle

Threat model (the agent is trained to maximise the reward; each claim has an attack in
``tests/test_harbor_hacks.py``, run through the real ``harbor`` CLI):

- *Tests out of reach*: ``environment/`` holds only the broken workspace and the pins; the hidden tests,
  the gold files and the verifier live in ``tests/`` and ``solution/``, never in the agent's image.
- *Grading apart from the agent*: the verifier runs in Harbor's SEPARATE verifier environment, a fresh
  container of the verifier image; the agent's container is stopped (every process of the agent dead)
  before it starts, and the agent's workspace reaches it only as files (the ``/app`` artifact). A
  ``sitecustomize.py``, a background process, a replaced ``python3`` or a planted ``/tests`` of the agent
  do not exist there.
- *Result authority*: ``harbor_verifier`` (module docstring) grades as the reward path does: the agent's
  changes to source files only, secret canaries named at verification time, the streaming runner, a
  parent process that is the only writer of the reward and kills the run's whole process tree first,
  the patch monitor on the agent's diff (``monitor_zero``).
- *No privilege*: the agent works as ``agent_user`` (not root): it cannot change the interpreter, the
  virtualenv or anything outside ``/app``, ``/tmp`` and its home.
- *No network*: the agent's and the verifier's containers have no network, so ``pip download`` cannot
  fetch the original code. ``network="policy"`` (the default) asks Harbor for it
  (``network_mode = "no-network"``: providers that cannot enforce it refuse the task; Harbor's docker
  provider enforces it with its egress-control sidecar image); ``network="compose"`` sets Docker's
  ``network_mode: none`` in a compose overlay (docker provider; no extra image).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tomli_w
import unidiff

import taskforge
from sandboxes import extensions, startup_hooks
from taskforge.core.errors import DatasetError, EnvironmentBuildError, SandboxError
from taskforge.core.files import BYTECODE_SUFFIXES, SKIP_DIRS
from taskforge.core.patches import apply
from taskforge.core.settings import Settings
from taskforge.core.task import Task
from taskforge.core.test_homes import test_homes
from taskforge.dataset import harbor_files
from taskforge.dataset.manifest import sha256_file
from taskforge.dataset.reader import Dataset
from taskforge.dataset.repos import tar_directory
from taskforge.dataset.schema import SYSTEM_PROMPT
from taskforge.reward.monitor import scan_patch
from taskforge.reward.patch_guard import SHADOW_GUARDED, ProtectedPaths, symlinks_in
from taskforge.reward.reward import top_level_names
from taskforge.reward.strict_asserts import strict_source
from taskforge.reward.workspace import (
    original_ini,
    pinned_options,
    plugin_modules,
    walk_files,
    write_clean_ini,
)

_NAME = re.compile(r"[^a-z0-9_-]+")
TASK_VENV = harbor_files.TASK_VENV
NETWORK_MODES = ("policy", "compose")
STRICT_TOKEN = "__taskforge_strict_eq__"  # stands for the strict equality's name until a grading draws one
# the task's copy of each verifier file; the grading plugin is never imported here (it runs on import)
VERIFIER_FILES = {"run_tests.py": "taskforge.dataset.harbor_verifier",
                  "harbor_workspace.py": "taskforge.dataset.harbor_workspace",
                  "harbor_run.py": "taskforge.dataset.harbor_run",
                  "harbor_canaries.py": "taskforge.reward.canaries",
                  "harbor_test_homes.py": "taskforge.core.test_homes",
                  "harbor_pyparse.py": "taskforge.core.pyparse",
                  "harbor_records.py": "sandboxes.runner.records",
                  "harbor_protected.py": "taskforge.reward.protected",
                  "grading_plugin.py": "taskforge.reward.grading_plugin",
                  "harbor_monitor.py": "taskforge.reward.monitor",
                  "runner/pytest_runner.py": "sandboxes.runner.pytest_runner"}


def _source_of(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise DatasetError(f"cannot find {module}; reinstall taskforge")
    return Path(spec.origin)


@dataclass(frozen=True, slots=True)
class HarborOptions:
    base_image: str = ""  # "" = the task's image_name, else fallback_image
    fallback_image: str = ""  # for tasks without an image ("" = python:<env python>-slim)
    install_requirements: bool | None = None  # None = pip install env_frozen unless FROM the task's own image
    ca_bundle: str = ""  # a CA bundle file copied into the image and given to pip ("" = none)
    agent_timeout_s: float = 1800.0
    verifier_timeout_s: float = 900.0
    build_timeout_s: float = 1200.0
    cpus: int = 1
    memory_mb: int = 2048
    storage_mb: int = 10240
    agent_user: str = "agent"  # the unprivileged user the agent works as (created in the agent image)
    network: str = "policy"  # "policy": Harbor's network_mode = "no-network"; "compose": Docker network_mode none
    monitor_zero: bool = True  # the patch monitor's findings zero the reward (Settings.monitor_zero)


def harbor_name(instance_id: str) -> str:
    """A task directory name Docker and Compose accept (lowercase letters, digits, ``-``, ``_``)."""
    name = _NAME.sub("-", instance_id.lower()).strip("-_")
    return name or "task"


def _difficulty_label(score: float) -> str:
    return "easy" if score < 1 / 3 else "medium" if score < 2 / 3 else "hard"


def _requirements(task: Task) -> str:
    project = task.env_spec.project_name.lower().replace("_", "-")
    keep = []
    for line in task.env_frozen:
        s = line.strip()
        name = re.split(r"[=<>~!@\[ ;]", s, maxsplit=1)[0].lower().replace("_", "-")
        if not s or s.startswith(("-e ", "#", "--")) or " @ file:" in s or name == project:
            continue  # the project itself comes from the workspace, never from an index
        keep.append(s)
    if not any(re.split(r"[=<>~!@\[ ;]", k, maxsplit=1)[0].lower() == "pytest" for k in keep):
        keep.append("pytest")
    return "\n".join(keep) + "\n"


def _instruction(task: Task) -> str:
    return (f"# Re-implement a removed feature of `{task.repo}`\n\n{task.problem_statement.rstrip()}\n\n---\n\n"
            f"The repository ({task.repo} {task.version}) is checked out in `/app`, your working directory "
            "(there is no network). "
            f"{SYSTEM_PROMPT.split('. ', 1)[1]}\n")


def _files(root: Path) -> dict[str, str]:
    """Workspace-relative path -> sha256 of every regular file under ``root``."""
    return {p.relative_to(root).as_posix(): sha256_file(p)
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def _patch_paths(patch: str) -> set[str]:
    try:
        return {f.path for f in unidiff.PatchSet(patch)}
    except unidiff.UnidiffParseError:
        return set()


def grading_rules(task: Task, original: Path) -> tuple[ProtectedPaths, dict[str, object]]:
    """What the reward path would own and pin when grading ``task`` (``taskforge.reward.reward._assemble``),
    as the exported verifier's ``config.json`` keys."""
    spec = task.env_spec
    tests = (*task.fail_to_pass, *task.pass_to_pass)
    plugins = plugin_modules(original, spec.src_roots)
    protected = ProtectedPaths(test_dirs=spec.test_paths, src_roots=spec.src_roots,
                               extra=frozenset(_patch_paths(task.test_patch) | {n.split("::")[0] for n in tests}
                                               | plugins | set(spec.runner_files)),
                               exempt=frozenset(_patch_paths(task.patch)))
    ini = original_ini(original)
    with tempfile.TemporaryDirectory(prefix="taskforge-ini-") as tmp:
        write_clean_ini(ini, Path(tmp, "clean.ini"))
        clean_ini = Path(tmp, "clean.ini").read_text(encoding="utf-8")
    return protected, {
        "test_paths": list(spec.test_paths), "src_roots": list(spec.src_roots),
        "protected_extra": sorted(protected.extra), "protected_exempt": sorted(protected.exempt),
        "shadow_guarded": sorted(SHADOW_GUARDED), "shadow_allowed": list(top_level_names(original, spec.src_roots)),
        "allowed_plugin_files": sorted(plugins), "original_symlinks": symlinks_in(original),
        "clean_ini": clean_ini, "pinned_options": pinned_options(ini),
        "skip_dirs": sorted(SKIP_DIRS), "skip_suffixes": list(BYTECODE_SUFFIXES),
    }


def _compiled_extensions(task: Task, original: Path) -> dict[str, bytes]:
    """The compiled extension modules of the task's local environment (built here once, then cached)."""
    try:
        return extensions.host_bundle(task.env_spec, original, Settings.load())
    except (EnvironmentBuildError, SandboxError) as exc:
        raise DatasetError(f"cannot build the compiled extension modules of {task.instance_id} for its Harbor "
                           f"images: {exc}") from None


def export_task(ds: Dataset, task: Task, dest: Path, options: HarborOptions) -> Path:
    """Write one Harbor task directory at ``dest`` (replaced atomically if it exists)."""
    base_image = (options.base_image or task.image_name or options.fallback_image
                  or f"python:{task.env_spec.python}-slim")
    install = options.install_requirements
    if install is None:
        install = not (task.image_name and base_image == task.image_name)
    ca = bool(options.ca_bundle)
    with tempfile.TemporaryDirectory(prefix="taskforge-harbor-") as tmp_s:
        tmp = Path(tmp_s)
        original, broken, solved = tmp / "original", tmp / "broken", tmp / "solved"
        ds.extract_original(task, original)
        shutil.copytree(original, broken, symlinks=True)
        apply(task.setup_patch, broken, what=f"setup_patch of {task.instance_id}")
        shutil.copytree(broken, solved, symlinks=True)
        apply(task.patch, solved, what=f"gold patch of {task.instance_id}")
        broken_files, solved_files = _files(broken), _files(solved)
        gold = {p for p, b in solved_files.items() if broken_files.get(p) != b}
        deleted = sorted(set(broken_files) - set(solved_files))
        protected, rules = grading_rules(task, original)
        owned = {rel for rel, path in walk_files(original).items()
                 if protected.kind(rel) is not None and not path.is_symlink()}
        if gold & owned:
            raise DatasetError(f"gold patch of {task.instance_id} touches test files {sorted(gold & owned)[:3]}; "
                               "the task is malformed, regenerate it")

        build = tmp / "task"
        env_dir, tests_dir, sol_dir = build / "environment", build / "tests", build / "solution"
        for d in (env_dir, tests_dir, sol_dir, tests_dir / "runner"):
            d.mkdir(parents=True)
        (build / "instruction.md").write_text(_instruction(task))
        (build / "task.toml").write_text(tomli_w.dumps(_task_toml(task, options)))
        compiled = _compiled_extensions(task, original) if install else {}
        for d in (env_dir, tests_dir):  # the same dependency layers in both images
            tar_directory(broken, d / "workspace.tar.gz")
            for rel, data in compiled.items():
                (d / harbor_files.EXT_FOLDER / rel).parent.mkdir(parents=True, exist_ok=True)
                (d / harbor_files.EXT_FOLDER / rel).write_bytes(data)
            if compiled:
                (d / harbor_files.FINDER_FOLDER).mkdir()
                for name, data in extensions.finder_files().items():
                    (d / harbor_files.FINDER_FOLDER / name).write_bytes(data)
            (d / "requirements.txt").write_text(_requirements(task))
            if install:  # the start-up hook that gives a test's ``python -I`` child the roots, as in the sandboxes
                (d / harbor_files.STARTUP_FOLDER).mkdir()
                for name, data in startup_hooks.files().items():
                    (d / harbor_files.STARTUP_FOLDER / name).write_bytes(data)
            if ca:
                shutil.copyfile(options.ca_bundle, d / "ca-bundle.pem")
            if options.network == "compose":
                (d / "docker-compose.yaml").write_text(harbor_files.NO_NETWORK_COMPOSE)
        (env_dir / "Dockerfile").write_text(harbor_files.agent_dockerfile(task, base_image, install, ca,
                                                                          options.agent_user, bool(compiled)))
        (tests_dir / "Dockerfile").write_text(harbor_files.verifier_dockerfile(task, base_image, install, ca,
                                                                                bool(compiled)))

        # the hidden tests' ``assert A == B`` made strict (``taskforge.reward.strict_asserts``); the verifier
        # names the strict equality afresh for every grading
        strict_files = sorted(f for f in {n.split("::")[0] for n in test_homes(original, task.fail_to_pass)
                                          .homes(task.fail_to_pass)} if f in owned and f.endswith(".py"))
        protected_tree = tmp / "protected"
        for rel in sorted(owned):
            (protected_tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(original / rel, protected_tree / rel)
        for rel in strict_files:
            text = (protected_tree / rel).read_text(encoding="utf-8")
            (protected_tree / rel).write_text(strict_source(text, STRICT_TOKEN), encoding="utf-8")
        tar_directory(protected_tree, tests_dir / "test_files.tar.gz")
        for name, module in VERIFIER_FILES.items():
            shutil.copyfile(_source_of(module), tests_dir / name)
        shutil.copytree(Path(str(unidiff.__file__)).parent, tests_dir / "vendor" / "unidiff",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # the monitor's diff parser
        (tests_dir / "test.patch").write_text(task.test_patch)
        config = {"instance_id": task.instance_id, "fail_to_pass": list(task.fail_to_pass),
                  "pass_to_pass": list(task.pass_to_pass), "pytest_args": list(task.env_spec.pytest_args),
                  "test_files": "test_files.tar.gz", "broken_workspace": "workspace.tar.gz",
                  "timeout_s": max(60.0, options.verifier_timeout_s - 60), "strict_files": strict_files,
                  "strict_token": STRICT_TOKEN, "monitor_zero": options.monitor_zero,
                  "monitor_exempt": sorted({f.rule for f in scan_patch(task.patch)}),
                  "uncopied": list(task.provenance.get("uncopied", ()) or ()),
                  "unchangeable": list(task.provenance.get("unchangeable", ()) or ()),
                  # skipped tests beside the task's, run along and ungraded (taskforge.core.companions)
                  "companions": list(task.provenance.get("companions", ()) or ()), **rules}
        (tests_dir / "config.json").write_text(json.dumps(config, indent=2))
        (tests_dir / "test.sh").write_text(harbor_files.test_sh(task))
        (tests_dir / "test.sh").chmod(0o755)

        tar_directory(solved, sol_dir / "gold_files.tar.gz", select=gold)
        (sol_dir / "deleted_files.txt").write_text("".join(f"{p}\n" for p in deleted))
        (sol_dir / "gold.patch").write_text(task.patch)
        (sol_dir / "solve.sh").write_text(harbor_files.solve_sh(task))
        (sol_dir / "solve.sh").chmod(0o755)

        dest.parent.mkdir(parents=True, exist_ok=True)
        staged = dest.with_name(f".{dest.name}.tmp")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(build, staged)
        if dest.exists():
            shutil.rmtree(dest)
        staged.rename(dest)
    return dest


def _task_toml(task: Task, o: HarborOptions) -> dict[str, object]:
    d = task.difficulty
    resources: dict[str, object] = {"build_timeout_sec": float(o.build_timeout_s), "cpus": o.cpus,
                                    "memory_mb": o.memory_mb, "storage_mb": o.storage_mb}
    if o.network == "policy":
        resources["network_mode"] = "no-network"
    return {
        "version": "1.0",
        # the agent's workspace is all that reaches the separate verifier (as files, at /app)
        "artifacts": ["/app"],
        "metadata": {
            "author_name": "taskforge",
            "difficulty": _difficulty_label(d.score),
            "category": "programming",
            "tags": ["python", "feature-deletion", task.strategy, task.repo],
            "instance_id": task.instance_id,
            "repo": task.repo,
            "source": task.source,
            "base_commit": task.base_commit,
            "strategy": task.strategy,
            "difficulty_score": d.score,
            "difficulty_tier": d.tier,
            "fail_to_pass": len(task.fail_to_pass),
            "pass_to_pass": len(task.pass_to_pass),
            "taskforge_version": taskforge.__version__,
            "network": o.network,
        },
        "verifier": {"timeout_sec": float(o.verifier_timeout_s), "environment_mode": "separate", "user": "root",
                     "environment": dict(resources)},
        "agent": {"timeout_sec": float(o.agent_timeout_s), "user": o.agent_user},
        "environment": dict(resources),
    }


def export_harbor(ds: Dataset, out: Path, options: HarborOptions | None = None, tasks: list[Task] | None = None
                  ) -> list[Path]:
    """Export ``tasks`` (default: all) of ``ds`` into ``out/<harbor_name(instance_id)>/``."""
    options = options or HarborOptions()
    if options.network not in NETWORK_MODES:
        raise DatasetError(f"unknown Harbor network mode {options.network!r}; "
                           f"use one of {', '.join(NETWORK_MODES)}")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", options.agent_user):
        raise DatasetError(f"agent user {options.agent_user!r} is not a valid user name (e.g. 'agent')")
    if options.ca_bundle and not Path(options.ca_bundle).is_file():
        raise DatasetError(f"CA bundle {options.ca_bundle} does not exist; pass an existing file or none")
    chosen = ds.tasks() if tasks is None else tasks
    names: dict[str, str] = {}
    for t in chosen:
        name = harbor_name(t.instance_id)
        if name in names:
            raise DatasetError(f"tasks {names[name]!r} and {t.instance_id!r} map to the same Harbor directory "
                               f"{name!r}; export them separately")
        names[name] = t.instance_id
    return [export_task(ds, t, Path(out) / harbor_name(t.instance_id), options) for t in chosen]
