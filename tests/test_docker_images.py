"""Unit tests of the docker backend's pure parts (no daemon needed)."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

from sandboxes import local
from sandboxes.docker import IO_DIR, WORKSPACE, DockerSandbox
from sandboxes.docker_images import TEST_TOOLING, env_image_tag, render_dockerfile, tar_bytes, tar_directory
from sandboxes.isolation import EMPTY_IMAGE_PACKAGES_SH
from sandboxes.protocol import RunRequest
from taskforge.core.environment import EnvSpec

SPEC = EnvSpec(project_name="mini", python="3.11", install_target=".", src_roots=("src",),
               package_dirs=("src/mini",), pytest_args=("-p", "no:warnings"))


def test_tag_follows_spec_packaging_files_and_base(tmp_path):
    (tmp_path / "setup.py").write_text("setup(install_requires=['six'])")
    (tmp_path / "mini.py").write_text("x = 1")
    tag = env_image_tag(SPEC, tmp_path, "sha256:base")
    assert tag.startswith("taskforge-env:") and len(tag.split(":")[1]) == 16
    (tmp_path / "mini.py").write_text("x = 2")  # source is not part of the environment
    assert env_image_tag(SPEC, tmp_path, "sha256:base") == tag
    (tmp_path / "setup.py").write_text("setup(install_requires=['six', 'attrs'])")
    assert env_image_tag(SPEC, tmp_path, "sha256:base") != tag
    assert env_image_tag(SPEC, tmp_path, "sha256:other") != env_image_tag(SPEC, tmp_path, "sha256:base")
    other = EnvSpec.from_dict({**SPEC.to_dict(), "requirements": ["attrs"]})
    assert env_image_tag(other, tmp_path, "sha256:base") != env_image_tag(SPEC, tmp_path, "sha256:base")


def test_dockerfile_keeps_the_ca_bundle_in_the_build_stage():
    text = render_dockerfile("python:3.11-slim")
    build, final = text.split("\nFROM python:3.11-slim\n")
    assert "FROM python:3.11-slim AS build" in build and "ca.pem" in build
    assert "ca.pem" not in final and "/tf" not in final.replace("/tf/", "")
    assert "/usr/local/bin/python3" in build and "/usr/bin/python3" in build  # slim and Debian bases
    assert "USER 65534:65534" in final and not re.search(r"\$\{?[a-z_]{2,}", final)  # every placeholder filled
    assert EMPTY_IMAGE_PACKAGES_SH in final  # the base interpreter's packages are emptied (python_hidden's twin)


def test_request_and_environment_match_the_local_backend():
    req = RunRequest(tests=("tests/test_a.py::t",), coverage=True, env={"X": "1"})
    payload = DockerSandbox.request_payload(SPEC, req)
    assert payload == {**local.build_request(SPEC, Path(WORKSPACE), req, Path(IO_DIR)),
                       "channel_fd": 1, "log_path": f"{IO_DIR}/output.log"}  # records on the container's stdout
    assert payload["args"] == ["-p", "no:warnings", "tests/test_a.py::t"]
    assert payload["channel_path"] == f"{IO_DIR}/records.jsonl" and payload["src_roots"] == [f"{WORKSPACE}/src"]
    env = DockerSandbox.environment(SPEC, req)
    assert env["PYTHONPATH"] == f"{WORKSPACE}/src" and env["HOME"] == "/tmp" and env["X"] == "1"
    assert env["PYTHONHASHSEED"] == "0" and "HTTP_PROXY" not in env
    assert TEST_TOOLING == local._BASE_REQUIREMENTS  # same tooling versions as local venvs


def test_tars_are_owned_by_the_run_user(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("a")
    (tmp_path / ".git").mkdir()
    (tmp_path / "link").symlink_to("pkg/a.py")
    with tarfile.open(fileobj=io.BytesIO(tar_directory(tmp_path, "workspace", uid=65534, exclude=(".git",)))) as t:
        members = {m.name: m for m in t.getmembers()}
    assert set(members) == {"workspace", "workspace/pkg", "workspace/pkg/a.py", "workspace/link"}
    assert {m.uid for m in members.values()} == {65534}
    assert members["workspace/link"].issym()
    data = tar_bytes({"io/r.json": b"{}"}, uid=7, dirs=("io",))
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        assert [(m.name, m.isdir(), m.uid) for m in t.getmembers()] == [("io", True, 7), ("io/r.json", False, 7)]


def test_read_only_paths_and_every_directory_above_them_belong_to_root(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("t")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "conftest.py").write_text("c")
    (tmp_path / "pkg" / "mod.py").write_text("m")
    data = tar_directory(tmp_path, "workspace", uid=65534, read_only=("tests", "pkg/sub/conftest.py"))
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        info = {m.name: (m.uid, m.mode & 0o7777) for m in t.getmembers()}
    assert info["workspace"] == (0, 0o1777) and info["workspace/pkg"] == (0, 0o1777)
    assert info["workspace/pkg/sub"] == (0, 0o1777)  # a run cannot rename the conftest away
    assert info["workspace/tests"][0] == 0 and info["workspace/tests"][1] & 0o022 == 0  # no new files inside
    assert info["workspace/tests/test_a.py"][0] == 0 and info["workspace/pkg/sub/conftest.py"][0] == 0
    assert info["workspace/pkg/mod.py"][0] == 65534  # source stays the run's
