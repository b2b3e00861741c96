"""Compiled extension modules: which an environment keeps, and how the tests of a workspace find them."""

from __future__ import annotations

import _json
import _ssl
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandboxes import extensions
from sandboxes.runner import ext_finder

SUFFIX = ".cpython-311-x86_64-linux-gnu.so"


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / rel).write_text(text)
    return tmp_path / "repo"


def test_keeps_only_modules_compiled_from_native_sources(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {
        "src/pkg/__init__.py": "", "src/pkg/_speedups.c": "", "src/pkg/_cython.pyx": "",
        "src/pkg/core.py": "",  # compiled from Python (mypyc, Cython on a .py): the deleted code itself
    })
    installed = [f"pkg/_speedups{SUFFIX}", f"pkg/_cython{SUFFIX}", f"pkg/core{SUFFIX}",
                 f"1f3d__mypyc{SUFFIX}",  # mypyc's shared helper: no source of that name
                 "pkg/__init__.py", "pkg-1.0.dist-info/RECORD"]
    assert extensions.keep(installed, repo) == [f"pkg/_cython{SUFFIX}", f"pkg/_speedups{SUFFIX}"]
    assert extensions.module_names([f"pkg/_speedups{SUFFIX}", "_top.abi3.so"]) == ["_top", "pkg._speedups"]


def test_a_module_built_from_cpythons_name_module_source_is_kept(tmp_path: Path) -> None:
    """pyrsistent 0.20.0 builds ``pvectorc`` from ``pvectorcmodule.c``."""
    repo = _repo(tmp_path, {"pvectorcmodule.c": "", "pyrsistent/__init__.py": "", "pyrsistent/_pvector.py": ""})
    installed = [f"pvectorc{SUFFIX}", f"pyrsistent/_pvector{SUFFIX}", f"other{SUFFIX}"]
    assert extensions.keep(installed, repo) == [f"pvectorc{SUFFIX}"]


def test_a_module_linking_a_foreign_library_is_left_out(tmp_path: Path) -> None:
    """pyyaml's ``_yaml`` links libyaml: an image without it would take the pure path; here the compiled one."""
    assert any(n.startswith("libssl") for n in extensions.foreign_libraries(Path(_ssl.__file__)))
    assert extensions.foreign_libraries(Path(_json.__file__)) == []
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    shutil.copyfile(_ssl.__file__, site / "pkg" / f"_ssl{SUFFIX}")
    shutil.copyfile(_json.__file__, site / "pkg" / f"_json{SUFFIX}")
    repo = _repo(tmp_path, {"pkg/__init__.py": "", "pkg/_ssl.c": "", "pkg/_json.c": ""})
    assert extensions.keep([f"pkg/_ssl{SUFFIX}", f"pkg/_json{SUFFIX}"], repo, site) == [f"pkg/_json{SUFFIX}"]
    not_elf = tmp_path / "x.so"
    not_elf.write_bytes(b"not an ELF file")
    assert extensions.needed_libraries(not_elf) is None and extensions.foreign_libraries(not_elf) == ["x.so"]


def _overlay_prefix(tmp_path: Path) -> Path:
    """A stand-in venv root whose overlay serves ``pkg._json`` (the stdlib's ``_json``, PyInit__json)."""
    prefix = tmp_path / "venv"
    (prefix / extensions.EXT_DIR / "pkg").mkdir(parents=True)
    shutil.copyfile(_json.__file__, prefix / extensions.EXT_DIR / "pkg" / Path(_json.__file__).name)
    return prefix


def _import_in_child(prefix: Path, workspace: Path, code: str) -> subprocess.CompletedProcess[str]:
    boot = (f"import sys; sys.path.insert(0, {str(Path(ext_finder.__file__).parent)!r}); import ext_finder; "
            f"ext_finder.install({str(prefix / extensions.EXT_DIR)!r}); sys.path.insert(0, {str(workspace)!r}); ")
    return subprocess.run([sys.executable, "-c", boot + code], capture_output=True, text=True, timeout=60)


def test_finder_serves_an_overlay_module_to_the_workspace_package(tmp_path: Path) -> None:
    prefix = _overlay_prefix(tmp_path)
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    res = _import_in_child(prefix, ws, "import pkg, pkg._json as m; print(pkg.__file__); print(m.__file__); "
                                       "print(m.scanstring('\"ab\"', 1))")
    assert res.returncode == 0, res.stderr
    pkg_file, ext_file, scanned = res.stdout.splitlines()
    assert pkg_file == str(ws / "pkg" / "__init__.py")  # the package itself still comes from the workspace
    assert ext_file.startswith(str(prefix / extensions.EXT_DIR))
    assert scanned == "('ab', 4)"


def test_the_workspace_wins_over_the_overlay(tmp_path: Path) -> None:
    """The finder is asked last: a module the workspace defines (the agent's own) is what tests import."""
    prefix = _overlay_prefix(tmp_path)
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "_json.py").write_text("WHERE = 'workspace'\n")
    res = _import_in_child(prefix, ws, "import pkg._json as m; print(m.WHERE)")
    assert res.returncode == 0 and res.stdout.strip() == "workspace", res.stderr


def test_no_overlay_installs_no_finder(tmp_path: Path) -> None:
    res = _import_in_child(tmp_path / "none", tmp_path,
                           "import ext_finder; print(any(isinstance(f, ext_finder.ExtensionFinder) "
                           "for f in sys.meta_path))")
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr


def test_strip_moves_kept_modules_into_the_overlay_and_installs_the_finder(tmp_path: Path) -> None:
    from sandboxes.local import strip_project_code
    from taskforge.core.environment import EnvSpec

    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "core.py").write_text("")
    shutil.copyfile(_json.__file__, site / "pkg" / f"_json{SUFFIX}")
    dist = site / "pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Name: pkg\n")
    (dist / "RECORD").write_text("pkg/__init__.py,,\npkg/core.py,,\n"
                                 f"pkg/_json{SUFFIX},,\npkg-1.0.dist-info/METADATA,,\npkg-1.0.dist-info/RECORD,,\n")
    repo = _repo(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": "", "pkg/_json.c": ""})
    spec = EnvSpec(project_name="pkg", python="3.11", install_target=".", package_dirs=("pkg",))
    removed, kept = strip_project_code(venv, spec, repo)
    assert kept == [f"pkg/_json{SUFFIX}"] and sorted(removed) == ["pkg/__init__.py", "pkg/core.py"]
    assert not (site / "pkg").exists()
    assert (venv / extensions.EXT_DIR / "pkg" / f"_json{SUFFIX}").is_file()
    assert (site / "_taskforge_ext.pth").read_text() == "import _taskforge_ext\n"
    assert (site / "_taskforge_ext.py").read_bytes() == Path(ext_finder.__file__).read_bytes()
    assert extensions.bundle(venv).keys() == {f"pkg/_json{SUFFIX}"}
    assert "pkg/core.py" not in (dist / "RECORD").read_text()


def test_harbor_layers_ship_the_overlay_in_both_images() -> None:
    from taskforge.dataset import harbor_files

    plain = harbor_files._env_layers("base", True, False)
    with_ext = harbor_files._env_layers("base", True, False, ext=True)
    assert with_ext[:len(plain)] == plain
    assert f"COPY taskforge-ext/ {harbor_files.TASK_VENV}/taskforge-ext/" in with_ext
    assert any(ln.startswith("RUN cp /tmp/taskforge-finder/* ") for ln in with_ext)


def _local_profile(source: str, factory: pytest.TempPathFactory) -> Any:
    """``source`` profiled in the local sandbox (one baseline run), in the session's shared work area."""
    from sandboxes.local import LocalSandbox
    from taskforge.core.settings import Settings
    from taskforge.profile.build import build_profile

    work = factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    settings = Settings(work_dir=work, install_timeout_s=600, test_timeout_s=300)
    return build_profile(source, settings, LocalSandbox(settings), runs=1)


@pytest.mark.realrepo
@pytest.mark.slow
def test_markupsafe_profiles_its_speedups_tests(tmp_path_factory: pytest.TempPathFactory) -> None:
    """markupsafe 3.0.4: its ``[_speedups]`` tests skipped (39 of 79 passed) before the overlay existed."""
    profile = _local_profile("pypi:markupsafe==3.0.4", tmp_path_factory)
    assert profile.env.extra.get("extension_modules") == "markupsafe._speedups"
    speedups = [t for t in profile.baseline.passed if "_speedups" in t]
    assert len(speedups) > 30 and len(profile.baseline.passed) >= 79, profile.baseline


@pytest.mark.realrepo
@pytest.mark.slow
def test_pyrsistent_profiles_its_c_vector_tests(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pyrsistent 0.20.0: ``pvectorc`` (from ``pvectorcmodule.c``) was not kept, and its 102 C-path tests
    skipped (536 of plain pytest's 637 passes)."""
    profile = _local_profile("pypi:pyrsistent==0.20.0", tmp_path_factory)
    assert profile.env.extra.get("extension_modules") == "pvectorc"
    c_path = [t for t in profile.baseline.passed if "[pvectorc]" in t]
    assert len(c_path) > 90 and len(profile.baseline.passed) >= 630, profile.baseline.counts()


def _local_and_docker_profiles(source: str, factory: pytest.TempPathFactory) -> tuple:
    from sandboxes.docker import DockerSandbox
    from sandboxes.local import LocalSandbox
    from taskforge.core.settings import Settings
    from taskforge.profile.build import build_profile
    from tests._docker_env import require_base_image, require_docker

    work = factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    settings = Settings(work_dir=work, install_timeout_s=600, test_timeout_s=300)
    require_base_image(require_docker(), settings.base_image)
    return (build_profile(source, settings, LocalSandbox(settings), runs=1),
            build_profile(source, settings, DockerSandbox(settings), runs=1))


@pytest.mark.realrepo
@pytest.mark.slow
@pytest.mark.docker
def test_markupsafe_docker_image_serves_the_same_modules(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The image ships the local build's very files: the same tests pass on both backends."""
    local, docker = _local_and_docker_profiles("pypi:markupsafe==3.0.4", tmp_path_factory)
    assert docker.env.extra.get("extension_modules") == "markupsafe._speedups"
    assert sorted(docker.baseline.passed) == sorted(local.baseline.passed)
    assert any("_speedups" in t for t in docker.baseline.passed)


@pytest.mark.realrepo
@pytest.mark.slow
@pytest.mark.docker
def test_msgpack_builds_in_docker_without_a_compiler_in_the_image(tmp_path_factory: pytest.TempPathFactory) -> None:
    """msgpack 1.2.4 cannot be installed in a base image without gcc: the image once failed to build at all.

    Its metadata and its compiled module now come from the host's build.
    """
    local, docker = _local_and_docker_profiles("pypi:msgpack==1.2.4", tmp_path_factory)
    assert docker.env.extra.get("extension_modules") == "msgpack._cmsgpack"
    assert sorted(docker.baseline.passed) == sorted(local.baseline.passed)
    assert len(docker.baseline.passed) >= 160
