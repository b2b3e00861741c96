"""The packages of the interpreters a sandbox can see are not readable from it (``isolation.python_hidden``).

The local sandbox binds the venv's base interpreter and ``/usr`` read-only. Their package directories
held the very code tasks delete: this host's pyenv site-packages had attrs 26.1.0 and itsdangerous 2.2.0
(corpus versions), ``/usr/lib/python3/dist-packages`` pyparsing and yaml, and pip's ``_vendor`` msgpack's
``fallback.py``. An agent read them with ``cat``; a patch could load them at grading. Each test plants a
file where the answer would be and reads it from inside: an agent session's shell, a graded test run, a
docker environment image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes import isolation
from sandboxes.local import LocalSandbox
from sandboxes.protocol import RunRequest
from taskforge.agent.protocol import ToolCall
from taskforge.agent.session import open_session
from taskforge.bench.curriculum import synthetic_task
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.settings import Settings
from taskforge.core.task import Task

SUPPORT = isolation.probe()
pytestmark = pytest.mark.skipif(not SUPPORT.usable, reason=f"isolation unavailable: {SUPPORT.reason}")
VENV = Path(sys.prefix).resolve()
SPEC = EnvSpec(project_name="mini", python="3.11", install_target="", test_paths=("tests",))
BASE_PURELIB = Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"])


@pytest.fixture
def planted() -> Iterator[Path]:
    """A module with a secret in the base interpreter's site-packages (where attrs 26.1.0 was)."""
    path = BASE_PURELIB / f"taskforge_planted_{secrets.token_hex(4)}.py"
    path.write_text("ANSWER = 'the deleted code'\n")
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@pytest.fixture
def vendored() -> Iterator[Path]:
    """A vendored copy under /usr, as the Google Cloud SDK keeps idna and pyparsing in
    /usr/lib/google-cloud-sdk/lib/third_party."""
    root = Path("/usr/lib") / f"taskforge-vendor-{secrets.token_hex(4)}"
    path = root / "lib" / "third_party" / "mini" / "core.py"
    path.parent.mkdir(parents=True)
    (path.parent / "__init__.py").write_text("")
    path.write_text("def shout(s):\n    return s.upper() + '!'\n")
    isolation.usr_code_dirs.cache_clear()
    isolation._python_hidden.cache_clear()
    try:
        yield path
    finally:
        shutil.rmtree(root, ignore_errors=True)
        isolation.usr_code_dirs.cache_clear()
        isolation._python_hidden.cache_clear()


def _workspace(root: Path, test: str) -> Path:
    ws = root / "broken"
    (ws / "mini").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "mini" / "__init__.py").write_text("def shout(s):\n    raise NotImplementedError\n")
    (ws / "tests" / "test_mini.py").write_text(textwrap.dedent(test))
    return ws


def test_python_hidden_names_the_base_interpreters_packages_only(tmp_path: Path) -> None:
    hidden = isolation.python_hidden(VENV)
    if VENV != Path(sys.base_prefix).resolve():
        assert str(BASE_PURELIB) in hidden
    assert not any(str(VENV) == h or h.startswith(f"{VENV}/") for h in hidden)  # the venv's own stay
    shared = tmp_path / "shared"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(shared)], check=True,
                   timeout=120)
    assert isolation.python_hidden(shared) == ()  # its tests may import from there


def test_an_agent_session_cannot_read_them(tmp_path: Path, planted: Path, vendored: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKFORGE_SESSIONS_DIR", str(tmp_path / "records"))
    broken = _workspace(tmp_path, "def test_ok():\n    assert True\n")

    @contextlib.contextmanager
    def provider(task: Task) -> Iterator[Path]:
        yield broken

    env = PreparedEnv(spec=SPEC, backend="local", location=str(VENV), python_version="3.11")
    task = dataclasses.replace(synthetic_task(1, 0.5, repo="mini"), env_spec=SPEC)
    with open_session(task, backend="local", settings=Settings(), workspace_provider=provider, environment=env) as s:
        def bash(command: str) -> str:
            return s.execute(ToolCall("bash", json.dumps({"command": command}))).output

        assert "No such file" in bash(f"cat {planted}")
        assert "No such file" in bash(f"cat {vendored}")
        assert bash("grep -rl --include=*.py 'def shout' /usr/lib 2>/dev/null | wc -l").strip() == "0"
        for hidden in isolation.python_hidden(VENV):
            assert bash(f"ls -A {hidden} | wc -l").strip() == "0", hidden
        assert "Read-only" in bash(f"touch {planted.parent}/x")
        assert bash("python -c 'import json, pytest; print(pytest.__name__)'").strip() == "pytest"  # the venv works


def test_a_graded_run_cannot_load_them(tmp_path: Path, planted: Path) -> None:
    ws = _workspace(tmp_path, f"""
        import os, runpy

        def test_the_answer_is_out_of_reach():
            assert not os.path.exists({str(planted)!r})

        def test_loading_it_fails():
            runpy.run_path({str(planted)!r})
        """)
    env = PreparedEnv(spec=SPEC, backend="local", location=str(VENV), python_version="3.11")
    out = LocalSandbox(Settings(work_dir=str(tmp_path / "work"))).run(env, ws, RunRequest(timeout_s=120))
    assert out.report.outcome_of("tests/test_mini.py::test_the_answer_is_out_of_reach").ok
    assert not out.report.outcome_of("tests/test_mini.py::test_loading_it_fails").ok


@pytest.mark.docker
def test_a_docker_environment_image_has_them_empty(tmp_path: Path) -> None:
    from sandboxes.docker import DockerSandbox, docker_client
    from taskforge.bench.docker_overhead import _REPO, _SPEC

    repo = tmp_path / "envrepo"  # the benchmarks' tiny package
    for rel, text in _REPO.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text).lstrip())
    env = DockerSandbox(Settings()).prepare(_SPEC, repo)
    script = ("for d in " + " ".join(isolation.IMAGE_PACKAGE_DIRS) + "; do "
              '[ -d "$d" ] && echo "$d $(ls -A "$d" | wc -l)"; done; '
              "python -c 'import pytest; print(\"venv ok\")'")
    out = docker_client().containers.run(env.location, ["sh", "-c", script], remove=True,
                                         network_disabled=True).decode()
    assert "venv ok" in out
    listed = [ln.split() for ln in out.splitlines() if ln.startswith("/")]
    assert listed, out  # the base image has some of them (Debian's python-wheels, python:*-slim's site-packages)
    assert all(n == "0" for _d, n in listed), out


def test_the_leak_audit_reads_the_standard_library_that_cannot_be_hidden(tmp_path: Path) -> None:
    """zipp's ``CompleteDirs.resolve_dir`` is in the stdlib's zipfile.py, word for word: a zipp task deleting it
    is answered by ``inspect.getsource(zipfile.CompleteDirs.resolve_dir)``. The audit must find it there."""
    import inspect
    import zipfile

    from taskforge.audit.audit import audit_task_workspace
    from taskforge.audit.env_index import EnvironmentIndex

    files = LocalSandbox(Settings(work_dir=str(tmp_path / "work"))).environment_files(
        PreparedEnv(spec=SPEC, backend="local", location=str(VENV), python_version="3.11"))
    assert files.stdlib is not None and (files.stdlib / "zipfile.py").is_file()
    assert all(not (files.stdlib / s).is_relative_to(files.stdlib / "zipfile.py") for s in files.stdlib_skip)
    copied = textwrap.dedent(inspect.getsource(zipfile.CompleteDirs.resolve_dir))
    own = "def shout(s):\n    words = [w.upper() for w in s.split(' ') if w]\n    return '! '.join(words) + '!!'\n"
    ws = tmp_path / "ws"
    (ws / "mini").mkdir(parents=True)
    (ws / "mini" / "__init__.py").write_text("def resolve_dir(self, name):\n    raise NotImplementedError\n")
    found = audit_task_workspace(ws, {"mini.resolve_dir": copied}, stdlib=files.stdlib, stdlib_skip=files.stdlib_skip)
    assert "interpreter" in found.channels
    assert any(h.channel == "interpreter" and h.path.endswith("zipfile.py") for h in found.hits), found.hits
    assert not audit_task_workspace(ws, {"mini.shout": own}, stdlib=files.stdlib,
                                    stdlib_skip=files.stdlib_skip).hits
    index = EnvironmentIndex.build(files.stdlib, {"mini.resolve_dir": copied, "mini.shout": own}, files.stdlib_skip)
    assert not any(b.path.startswith(tuple(files.stdlib_skip)) for b in index.blobs)  # hidden folders are not read
    by_index = audit_task_workspace(ws, {"mini.resolve_dir": copied}, stdlib=files.stdlib,
                                    stdlib_skip=files.stdlib_skip, stdlib_index=index)
    assert {h.path for h in by_index.hits} == {h.path for h in found.hits}


@pytest.mark.docker
def test_a_docker_environment_gives_the_audit_its_images_standard_library(tmp_path: Path) -> None:
    from sandboxes.docker import DockerSandbox
    from taskforge.bench.docker_overhead import _REPO, _SPEC

    repo = tmp_path / "envrepo"
    for rel, text in _REPO.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text).lstrip())
    sandbox = DockerSandbox(Settings(work_dir=str(tmp_path / "work")))
    env = sandbox.prepare(_SPEC, repo)
    files = sandbox.environment_files(env)
    assert files.image == env.location and files.stdlib is not None
    assert (files.stdlib / "zipfile.py").is_file() and (files.stdlib / "json" / "decoder.py").is_file()
    assert sandbox.environment_files(env).stdlib == files.stdlib  # copied out once
    assert str(files.stdlib).startswith(str(tmp_path / "work" / "audit-images"))
