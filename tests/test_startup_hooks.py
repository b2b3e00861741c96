"""The start-up hook that gives a test's ``python -I`` child the workspace's roots, in every backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sandboxes import startup_hooks
from sandboxes.runner import isolated_roots
from taskforge.reward.protected import SHADOW_GUARDED


def _child(flags: list[str], site: Path, roots: str | None, code: str) -> subprocess.CompletedProcess:
    """An interpreter that imports the hook as the ``.pth`` would, with ``roots`` in the variable."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if roots is not None:
        env[startup_hooks.ROOTS_ENV] = roots
    boot = f"import sys; sys.path.insert(0, {str(site)!r}); import {startup_hooks.ROOTS_MODULE}; sys.path.remove({str(site)!r}); "
    return subprocess.run([sys.executable, *flags, "-c", boot + code], capture_output=True, text=True, timeout=60,
                          env=env, cwd=site)


def test_an_isolated_interpreter_gets_the_roots_first(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    startup_hooks.install(site)
    roots = [tmp_path / "ws" / "src", tmp_path / "ws" / "lib"]
    (roots[0] / "proj").mkdir(parents=True)
    (roots[0] / "proj" / "__init__.py").write_text("")
    roots[1].mkdir()
    res = _child(["-I"], site, os.pathsep.join(map(str, roots)), "import proj; print(proj.__file__); print(sys.path[:2])")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == str(roots[0] / "proj" / "__init__.py")
    assert res.stdout.splitlines()[1] == repr([str(r) for r in roots])


def test_an_interpreter_that_reads_the_environment_is_left_alone(tmp_path: Path) -> None:
    """Such an interpreter has PYTHONPATH; the hook must not add the roots a second time, nor where PYTHONPATH
    was deliberately changed by a test."""
    site = tmp_path / "site"
    site.mkdir()
    startup_hooks.install(site)
    res = _child([], site, str(tmp_path / "elsewhere"), "print(sys.path.count(" + repr(str(tmp_path / "elsewhere")) + "))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "0"


def test_no_variable_no_roots(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    startup_hooks.install(site)
    before = _child(["-I"], site, None, "print(len(sys.path))")
    empty = _child(["-I"], site, "", "print(len(sys.path))")
    assert before.returncode == 0 and empty.stdout == before.stdout, (before.stderr, empty.stderr)


def test_install_writes_the_module_and_its_pth_once(tmp_path: Path) -> None:
    startup_hooks.install(tmp_path)
    pth = tmp_path / f"{startup_hooks.ROOTS_MODULE}.pth"
    module = tmp_path / f"{startup_hooks.ROOTS_MODULE}.py"
    assert pth.read_text() == f"import {startup_hooks.ROOTS_MODULE}\n"
    assert module.read_bytes() == Path(isolated_roots.__file__).read_bytes()
    stamp = module.stat().st_mtime_ns
    startup_hooks.install(tmp_path)
    assert module.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([pth.name, module.name])


def test_the_hook_reads_the_variable_the_sandboxes_set() -> None:
    from taskforge.dataset import harbor_verifier

    assert isolated_roots.ENV == startup_hooks.ROOTS_ENV
    env = harbor_verifier._child_env(sys.executable, Path("/tmp/h"), Path("/tmp/t"), ["/app", "/app/src"])
    assert env[startup_hooks.ROOTS_ENV] == env["PYTHONPATH"] == "/app:/app/src"


def test_a_workspace_module_cannot_take_the_hooks_name() -> None:
    assert startup_hooks.ROOTS_MODULE in SHADOW_GUARDED


def test_local_run_env_names_the_roots(tmp_path: Path) -> None:
    from sandboxes.local import run_env
    from taskforge.core.environment import EnvSpec

    spec = EnvSpec(project_name="p", python="3.11", install_target="", src_roots=(".", "src"))
    env = run_env(spec, tmp_path, tmp_path / "venv", tmp_path, {})
    assert env[startup_hooks.ROOTS_ENV] == env["PYTHONPATH"] == f"{tmp_path}{os.pathsep}{tmp_path / 'src'}"


def test_harbor_images_install_the_hook_and_only_the_agents_sets_the_roots() -> None:
    from taskforge.dataset import harbor_files

    layers = harbor_files._env_layers("base", True, False)
    assert f"COPY {harbor_files.STARTUP_FOLDER}/ /tmp/{harbor_files.STARTUP_FOLDER}/" in layers
    assert not any(harbor_files.STARTUP_FOLDER in ln for ln in harbor_files._env_layers("base", False, False))


def test_docker_env_image_installs_the_hook_and_its_tag_follows_it(tmp_path: Path, monkeypatch) -> None:
    from sandboxes import docker_images
    from taskforge.core.environment import EnvSpec

    assert "/tf/startup;" in docker_images._TEMPLATE.read_text()
    spec = EnvSpec(project_name="p", python="3.11", install_target="")
    before = docker_images.env_image_tag(spec, tmp_path, "sha256:base")
    changed = tmp_path / "hook.py"
    changed.write_text("# another hook\n")
    monkeypatch.setattr(startup_hooks, "ROOTS_SOURCE", changed)
    assert docker_images.env_image_tag(spec, tmp_path, "sha256:base") != before


def test_only_the_agents_image_names_the_roots() -> None:
    """The verifier image runs ``python -I run_tests.py`` itself: with the roots set there, a workspace module
    could shadow what the verifier imports. Only the agent's image and the verifier's graded child set them."""
    from taskforge.dataset import harbor_files
    from tests.strategies import sample_task

    task = sample_task(1)
    agent = harbor_files.agent_dockerfile(task, "base", True, False, "agent")
    verifier = harbor_files.verifier_dockerfile(task, "base", True, False)
    assert f"ENV PYTHONPATH=/app {startup_hooks.ROOTS_ENV}=/app" in agent
    assert startup_hooks.ROOTS_ENV not in verifier
    assert f"COPY {harbor_files.STARTUP_FOLDER}/" in verifier
