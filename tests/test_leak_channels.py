"""One test per leak channel, on a real task: ``inflection==0.5.1`` from PyPI with the body of
``inflection.camelize`` deleted. Each test plants one leak, checks the audit finds it (channel, path,
evidence), scrubs, and checks the audit then passes.
"""

from __future__ import annotations

import io
import py_compile
import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import git
import pytest
from _leak_task import LeakTask, inflection_sdist, inflection_task, run
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from taskforge.audit.audit import audit_task_workspace
from taskforge.audit.scrub import scrub_workspace
from taskforge.core.task import AuditResult

pytestmark = pytest.mark.realrepo

BODY_LINE = "string[0].lower() + camelize(string)[1:]"
ENV = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@x", "GIT_COMMITTER_NAME": "dev",
       "GIT_COMMITTER_EMAIL": "dev@x"}


@pytest.fixture(scope="session")
def sdist() -> Path:
    return inflection_sdist()


@pytest.fixture
def task(sdist: Path, tmp_path: Path) -> LeakTask:
    t = inflection_task(tmp_path)
    clean = _audit(t)
    assert clean.passed, clean.hits  # the scrubbed task starts clean: no false positive
    assert clean.fingerprints >= 5
    return t


def _audit(t: LeakTask, env_dir: Path | None = None) -> AuditResult:
    return audit_task_workspace(t.workspace, t.deleted, env_dir=env_dir, allowed_text=[t.problem])


def _assert_found(result: AuditResult, channel: str, path_part: str) -> None:
    assert not result.passed
    assert any(h.channel == channel and path_part in h.path for h in result.hits), result.hits
    assert all(h.evidence for h in result.hits)


def _scrub_and_pass(t: LeakTask) -> None:
    report = scrub_workspace(t.workspace, [t.qualname])
    assert report.git.startswith("fresh ")
    after = _audit(t)
    assert after.passed, after.hits
    repo = git.Repo(t.workspace)
    assert len(list(repo.iter_commits("--all"))) == 1
    assert not repo.remotes and not repo.tags
    assert not (t.workspace / ".git" / "logs").exists()
    assert not (t.workspace / ".git" / "refs" / "stash").exists()


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, env={**ENV, "PATH": "/usr/bin:/bin"}, check=True,
                          capture_output=True, text=True, timeout=60).stdout


def _history_workspace(t: LeakTask) -> git.Repo:
    """A workspace whose git holds the original module (as a careless generator would ship it)."""
    shutil.rmtree(t.workspace / ".git")
    broken = (t.workspace / t.module).read_text()
    shutil.copy(t.original_module, t.workspace / t.module)
    repo = git.Repo.init(t.workspace)
    _git(t.workspace, "add", "-A")
    _git(t.workspace, "commit", "-qm", "original")
    (t.workspace / t.module).write_text(broken)
    return repo


def test_git_history_log_all_S(task: LeakTask) -> None:
    _history_workspace(task)
    _git(task.workspace, "commit", "-qam", "delete camelize")
    assert _git(task.workspace, "log", "--all", "--oneline", "-S", BODY_LINE).strip()
    _assert_found(_audit(task), "git", "blob ")
    _scrub_and_pass(task)
    assert not _git(task.workspace, "log", "--all", "--oneline", "-S", BODY_LINE).strip()


def test_git_reflog(task: LeakTask) -> None:
    _history_workspace(task)
    _git(task.workspace, "commit", "-q", "--amend", "-am", "only the broken code")
    assert not _git(task.workspace, "log", "--all", "--oneline", "-S", BODY_LINE).strip()
    assert _git(task.workspace, "log", "-g", "--oneline", "-S", BODY_LINE).strip()  # reachable by reflog
    _assert_found(_audit(task), "git", "blob ")
    _scrub_and_pass(task)
    assert not _git(task.workspace, "reflog").strip()


def test_git_stash(task: LeakTask) -> None:
    _history_workspace(task)
    _git(task.workspace, "commit", "-q", "--amend", "-am", "broken")
    _git(task.workspace, "reflog", "expire", "--expire=now", "--all")
    _git(task.workspace, "gc", "-q", "--prune=now")
    shutil.copy(task.original_module, task.workspace / task.module)
    _git(task.workspace, "stash", "-q")
    assert BODY_LINE in _git(task.workspace, "stash", "show", "-p")
    _assert_found(_audit(task), "git", "blob ")
    _scrub_and_pass(task)


def test_git_unreachable_loose_and_packed(task: LeakTask) -> None:
    _history_workspace(task)
    _git(task.workspace, "commit", "-q", "--amend", "-am", "broken")
    _git(task.workspace, "repack", "-q", "-a", "-d")  # the original commit now sits in a pack
    _git(task.workspace, "reflog", "expire", "--expire=now", "--all")
    _git(task.workspace, "hash-object", "-w", str(task.original_module))  # and a dangling loose blob
    assert not _git(task.workspace, "log", "--all", "-g", "--oneline", "-S", BODY_LINE).strip()
    assert "unreachable" in _git(task.workspace, "fsck", "--unreachable", "--no-reflogs")
    result = _audit(task)
    _assert_found(result, "git", "blob ")
    assert len([h for h in result.hits if h.channel == "git"]) >= 1
    _scrub_and_pass(task)
    assert not list((task.workspace / ".git" / "objects" / "pack").glob("*.pack"))


def test_git_tags_and_remotes(task: LeakTask) -> None:
    repo = git.Repo(task.workspace)
    repo.create_remote("origin", str(task.original))
    _git(task.workspace, "fetch", "-q", "origin")
    _git(task.workspace, "tag", "v0.5.1", "FETCH_HEAD")
    result = _audit(task)
    _assert_found(result, "git", "config")  # the remote: fetching it restores the original
    _assert_found(result, "git", "blob ")  # the tagged original commit's blob
    assert any("remote 'origin'" in h.evidence for h in result.hits)
    _scrub_and_pass(task)


def test_pyc_of_original_module(task: LeakTask) -> None:
    target = task.workspace / "inflection" / "__pycache__" / f"__init__.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc"
    py_compile.compile(str(task.original_module), cfile=str(target), doraise=True)
    result = _audit(task)
    _assert_found(result, "workspace", "__pycache__")
    assert any("byte code" in h.evidence and "names" in h.evidence for h in result.hits), result.hits
    _scrub_and_pass(task)
    assert not list(task.workspace.rglob("*.pyc"))


def test_mypy_cache_of_original(task: LeakTask) -> None:
    run([sys.executable, "-m", "mypy", "--cache-dir", str(task.workspace / ".mypy_cache"),
         "--ignore-missing-imports", "--no-error-summary", str(task.original_module)], timeout=300)
    assert (task.workspace / ".mypy_cache").is_dir()
    result = _audit(task)
    _assert_found(result, "workspace", ".mypy_cache")
    _scrub_and_pass(task)
    assert not (task.workspace / ".mypy_cache").exists()


def test_stub_declaring_entity(task: LeakTask) -> None:
    stub = task.workspace / "inflection" / "__init__.pyi"
    stub.write_text("def camelize(string: str, uppercase_first_letter: bool = ...) -> str: ...\n"
                    "def dasherize(word: str) -> str: ...\n")
    _assert_found(_audit(task), "workspace", "inflection/__init__.pyi")
    _scrub_and_pass(task)
    assert stub.read_text() == "def dasherize(word: str) -> str: ...\n"


def _wheel(t: LeakTask, out: Path) -> Path:
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(out), str(t.original)], timeout=300)
    return next(out.glob("inflection-*.whl"))


def _venv(tmp: Path) -> Path:
    env = tmp / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    return env


def _site(env: Path) -> Path:
    return next(env.glob("lib/python*/site-packages"))


def test_installed_copy_in_site_packages(task: LeakTask, tmp_path: Path) -> None:
    env = _venv(tmp_path)
    wheel = _wheel(task, tmp_path / "wheels")
    run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q", "--no-deps",
         "--no-index", str(wheel)], timeout=300)
    site = _site(env)
    record = next(site.glob("inflection-*.dist-info")) / "RECORD"
    assert "inflection/__init__.py" in record.read_text()
    (site / "legacy-inflection.pth").write_text(f"{task.original}\n")  # an old editable install
    result = _audit(task, env)
    _assert_found(result, "environment", "site-packages/inflection/__init__.py")
    _assert_found(result, "environment", "legacy-inflection.pth -> ")
    shutil.rmtree(site / "inflection")
    (site / "legacy-inflection.pth").unlink()
    assert _audit(task, env).passed  # the metadata alone (what the local sandbox keeps) holds no code


def test_cached_wheel_and_sdist_in_pip_cache(task: LeakTask, sdist: Path, tmp_path: Path) -> None:
    env = _venv(tmp_path)
    wheel = _wheel(task, tmp_path / "wheels")
    cache = env / ".cache" / "pip"
    (cache / "wheels" / "3f" / "a1").mkdir(parents=True)
    shutil.copy(wheel, cache / "wheels" / "3f" / "a1" / wheel.name)
    (cache / "http-v2" / "a" / "b").mkdir(parents=True)
    shutil.copy(sdist, cache / "http-v2" / "a" / "b" / "5e1c9d0e.body")  # pip stores bodies by hash
    result = _audit(task, env)
    _assert_found(result, "environment", ".whl!inflection/__init__.py")
    _assert_found(result, "environment", ".body!inflection-0.5.1/inflection/__init__.py")
    shutil.rmtree(cache)
    assert _audit(task, env).passed


def test_egg_info_build_and_dist(task: LeakTask, tmp_path: Path) -> None:
    shutil.copytree(task.original / "inflection.egg-info", task.workspace / "inflection.egg-info")
    (task.workspace / "build" / "lib" / "inflection").mkdir(parents=True)
    shutil.copy(task.original_module, task.workspace / "build" / "lib" / "inflection" / "__init__.py")
    (task.workspace / "dist").mkdir()
    wheel = _wheel(task, task.workspace / "dist")
    result = _audit(task)
    _assert_found(result, "workspace", "build/lib/inflection/__init__.py")
    _assert_found(result, "workspace", f"dist/{wheel.name}!inflection/__init__.py")
    _scrub_and_pass(task)
    assert not any((task.workspace / d).exists() for d in ("build", "dist", "inflection.egg-info"))


def test_built_docs_viewcode(task: LeakTask) -> None:
    pages = task.workspace / "docs" / "_build" / "html" / "_modules"
    pages.mkdir(parents=True)
    code = highlight(task.original_module.read_text(), PythonLexer(), HtmlFormatter())
    (pages / "inflection.html").write_text(f"<html><body><h1>Source code for inflection</h1>{code}</body></html>")
    assert BODY_LINE not in (pages / "inflection.html").read_text()  # only found once tags are stripped
    _assert_found(_audit(task), "workspace", "docs/_build/html/_modules/inflection.html")
    _scrub_and_pass(task)


def test_the_original_checkout_itself_is_caught(task: LeakTask) -> None:
    result = audit_task_workspace(task.original, task.deleted, allowed_text=[task.problem])
    _assert_found(result, "workspace", "inflection/__init__.py")
    _assert_found(result, "git", "blob ")


def _build_image(client, files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    """An image built from an in-memory context (``files`` holds the Dockerfile)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    buf.seek(0)
    image, _ = client.images.build(fileobj=buf, custom_context=True, rm=True, forcerm=True)
    return image


def _docker_client():  # type: ignore[no-untyped-def]
    """A pinged client, or a visible skip (a failure when TASKFORGE_REQUIRE_DOCKER=1), never a silent pass."""
    from tests._docker_env import require_docker

    return require_docker()


@pytest.mark.docker
def test_image_layers_through_docker_sdk(task: LeakTask, tmp_path: Path) -> None:
    client = _docker_client()
    site = "usr/lib/python3.11/site-packages"

    def build(with_copy: bool) -> object:
        files = {"Dockerfile": f"FROM scratch\nCOPY site /{site}\n".encode(), "site/other/__init__.py": b"x = 1\n"}
        if with_copy:
            files["site/inflection/__init__.py"] = task.original_module.read_bytes()
            files["site/inflection-0.5.1.dist-info/METADATA"] = b"Metadata-Version: 2.1\nName: inflection\n"
            files["site/inflection-0.5.1.dist-info/RECORD"] = b"inflection/__init__.py,,\n"
        return _build_image(client, files)

    leaky = build(True)
    clean = build(False)
    try:
        result = audit_task_workspace(task.workspace, task.deleted, image=leaky, docker_client=client,
                                      allowed_text=[task.problem])
        _assert_found(result, "image", f"{site}/inflection/__init__.py")
        assert not any(f"{site}/other/__init__.py" in h.path for h in result.hits)
        assert audit_task_workspace(task.workspace, task.deleted, image=clean, docker_client=client,
                                    allowed_text=[task.problem]).passed
    finally:
        for image in (leaky, clean):
            client.images.remove(image.id, force=True)


@pytest.mark.docker
def test_base_image_layers_are_left_out_on_a_real_engine(task: LeakTask, tmp_path: Path) -> None:
    """An image built FROM a base: the base's layers are not searched when the base is named (as
    ``generate`` and ``taskforge audit --images`` do from the environment image's label), the
    layers added on top are, streamed or through the layer cache."""
    client = _docker_client()

    def build(dockerfile: str, files: dict[str, bytes]) -> object:
        return _build_image(client, {"Dockerfile": dockerfile.encode(), **files})

    body = task.original_module.read_bytes()
    base = build("FROM scratch\nCOPY lib /usr/lib/python3.11\n", {"lib/twin.py": body})
    clean_env = build(f"FROM {base.id}\nCOPY site /site\n", {"site/other.py": b"x = 1\n"})
    leaky_env = build(f"FROM {base.id}\nCOPY site /site\n", {"site/inflection.py": body})
    try:
        for cache in (None, tmp_path / "cache"):
            def run_audit(image: object, base_image: object = None, cache: Path | None = cache) -> AuditResult:
                return audit_task_workspace(task.workspace, task.deleted, image=image, docker_client=client,
                                            allowed_text=[task.problem], image_cache=cache, base_image=base_image)

            assert run_audit(clean_env, base.id).passed
            _assert_found(run_audit(clean_env), "image", "usr/lib/python3.11/twin.py")
            hits = run_audit(leaky_env, base.id).hits
            assert [h.path.split(":/", 1)[1] for h in hits] == ["site/inflection.py"]
    finally:
        for image in (leaky_env, clean_env, base):
            try:
                client.images.remove(image.id, force=True)
            except Exception:  # an untagged parent goes with its last child
                pass
