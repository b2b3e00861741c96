"""The docker sandbox's threat model (``sandboxes/docker.py`` docstring), claim by claim, on a real engine."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import docker.errors
import pytest

from sandboxes.docker import OWNER_LABEL, RUN_LABEL, DockerSandbox
from sandboxes.protocol import RunRequest
from sandboxes.reaper import owner_tag
from taskforge.core.settings import Settings
from taskforge.core.testreport import Outcome
from tests._docker_env import MINI_FILES, MINI_SPEC, require_base_image, require_docker, write_files

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    client = require_docker()
    settings = Settings.load({"work_dir": str(tmp_path_factory.mktemp("work")), "docker_memory": "256m",
                              "docker_pids": 64, "docker_cpus": 1.0})
    require_base_image(client, settings.base_image)
    sandbox = _Recording(settings, client)
    repo = write_files(tmp_path_factory.mktemp("repo"), MINI_FILES)
    env = sandbox.prepare(MINI_SPEC, repo)
    return sandbox, env, repo


def _workspace(repo: Path, tmp_path: Path, test_code: str) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(repo, ws)
    (ws / "tests" / "test_evil.py").write_text(textwrap.dedent(test_code))
    return ws


class _Recording(DockerSandbox):
    """Notes every container it creates and that container's volume, so a test checks exactly its own
    runs (other xdist workers and killed earlier processes may have containers of their own)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.made: list[tuple[str, str]] = []

    def _create(self, env, request):
        container = super()._create(env, request)
        container.reload()
        volumes = [m["Name"] for m in container.attrs["Mounts"] if m.get("Type") == "volume"]
        self.made.append((container.id, volumes[0]))
        return container


def _leftovers(sandbox: _Recording) -> tuple[list[str], list[str]]:
    """The containers and volumes of ``sandbox``'s runs that still exist."""
    containers = {c.id for c in sandbox.client.containers.list(all=True, filters={"label": RUN_LABEL})}
    volumes = {v.name for v in sandbox.client.volumes.list()}
    return ([cid for cid, _ in sandbox.made if cid in containers],
            [vol for _, vol in sandbox.made if vol in volumes])


def test_infinite_loop_is_killed_within_timeout(box, tmp_path):
    sandbox, env, repo = box
    ws = _workspace(repo, tmp_path, "def test_spin():\n    while True:\n        pass\n")
    out = sandbox.run(env, ws, RunRequest(tests=("tests/test_evil.py",), timeout_s=5))
    assert out.report.timed_out
    assert "no_report" in out.report.flags
    assert out.seconds < 5 + 10
    assert _leftovers(sandbox) == ([], [])


def test_fork_bomb_is_contained(box, tmp_path):
    sandbox, env, repo = box
    ws = _workspace(repo, tmp_path, """
        import os, time

        def test_bomb():
            children = 0
            for _ in range(1000):
                try:
                    pid = os.fork()
                except OSError:
                    break  # EAGAIN: the pids limit holds
                if pid == 0:
                    while True:  # every child keeps forking
                        try:
                            os.fork()
                        except OSError:
                            time.sleep(0.05)
                children += 1
            assert children < 64
    """)
    started = time.monotonic()
    out = sandbox.run(env, ws, RunRequest(tests=("tests/test_evil.py",), timeout_s=60))
    assert out.report.outcome_of("tests/test_evil.py::test_bomb") is Outcome.PASSED, out.report.output_tail
    assert time.monotonic() - started < 60
    assert _leftovers(sandbox) == ([], [])


def test_memory_hog_is_killed_and_reported(box, tmp_path):
    sandbox, env, repo = box
    ws = _workspace(repo, tmp_path, """
        def test_hog():
            blocks = []
            for _ in range(64):
                blocks.append(b"x" * (64 << 20))  # 4 GiB in all, against a 256 MiB limit
    """)
    out = sandbox.run(env, ws, RunRequest(tests=("tests/test_evil.py",), timeout_s=120))
    assert "oom_killed" in out.report.flags
    assert not out.report.timed_out
    assert out.report.outcome_of("tests/test_evil.py::test_hog") is not Outcome.PASSED
    assert "out of memory" in out.report.output_tail


def test_network_is_unreachable(box, tmp_path):
    sandbox, env, repo = box
    ws = _workspace(repo, tmp_path, """
        import os, socket
        import pytest

        def test_no_route():
            with pytest.raises(OSError):
                socket.create_connection(("1.1.1.1", 53), timeout=3)

        def test_no_dns():
            with pytest.raises(OSError):
                socket.getaddrinfo("pypi.org", 443)

        def test_only_loopback():
            assert sorted(os.listdir("/sys/class/net")) == ["lo"]
    """)
    out = sandbox.run(env, ws, RunRequest(tests=("tests/test_evil.py",), timeout_s=60))
    assert out.report.counts() == {"passed": 3}, out.report.output_tail


def test_writes_outside_the_workspace_fail_and_privileges_are_dropped(box, tmp_path):
    sandbox, env, repo = box
    ws = _workspace(repo, tmp_path, """
        import errno, os
        import pytest

        @pytest.mark.parametrize("path", ["/etc/evil", "/opt/taskforge/venv/evil.pth", "/usr/lib/evil",
                                          "/evil", "/opt/taskforge/runner/pytest_runner.py"])
        def test_read_only(path):
            with pytest.raises(OSError) as info:
                open(path, "w").write("x")
            assert info.value.errno in (errno.EROFS, errno.EACCES)

        def test_venv_is_read_only_even_by_mode():
            with pytest.raises(OSError) as info:
                os.utime("/opt/taskforge/venv/bin/python")
            assert info.value.errno in (errno.EROFS, errno.EPERM, errno.EACCES)

        def test_workspace_and_tmp_are_writable():
            open("scratch.txt", "w").write("ok")
            open("/tmp/scratch.txt", "w").write("ok")

        def test_unprivileged():
            status = open("/proc/self/status").read()
            assert os.getuid() == 65534 and os.getgid() == 65534
            assert "CapEff:\\t0000000000000000" in status
            assert "NoNewPrivs:\\t1" in status
    """)
    out = sandbox.run(env, ws, RunRequest(tests=("tests/test_evil.py",), timeout_s=60))
    assert out.report.counts() == {"passed": 8}, out.report.output_tail
    assert not (ws / "scratch.txt").exists()  # the host's workspace is never written


class _Exploding(_Recording):
    def _execute(self, container, request):  # the run raises after its container started
        container.start()
        raise RuntimeError("boom")


def test_nothing_left_after_a_run_that_raised(box, tmp_path):
    sandbox, env, repo = box
    exploding = _Exploding(sandbox.settings, sandbox.client)
    with pytest.raises(RuntimeError, match="boom"):
        exploding.run(env, repo, RunRequest(timeout_s=30))
    assert len(exploding.made) == 1
    assert _leftovers(exploding) == ([], [])


def test_containers_of_a_killed_owner_are_reaped_by_the_next_sandbox(box, tmp_path):
    """A process killed mid-run cannot remove its container (session 34 left five, which failed CI's
    leftover checks); the next DockerSandbox removes every run container whose owner is gone."""
    sandbox, env, repo = box
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    orphans = [sandbox.client.containers.create(env.location, ["true"], labels={
        RUN_LABEL: f"orphan{i}", OWNER_LABEL: owner}) for i, owner in enumerate((
            f"{host}:{dead.pid}:1", f"{host}:{2 ** 22 + 7}"))]  # the older tag: host:pid (above pid_max)
    mine = sandbox.client.containers.create(env.location, ["true"], labels={
        RUN_LABEL: "alive", OWNER_LABEL: owner_tag()})
    elsewhere = sandbox.client.containers.create(env.location, ["true"], labels={
        RUN_LABEL: "other-host", OWNER_LABEL: f"not-{host}:{dead.pid}:1"})
    try:
        DockerSandbox(sandbox.settings, sandbox.client)
        left = {c.id for c in sandbox.client.containers.list(all=True, filters={"label": RUN_LABEL})}
        assert not {c.id for c in orphans} & left
        assert {mine.id, elsewhere.id} <= left  # an owner that may be alive is never reaped
    finally:
        for c in (*orphans, mine, elsewhere):
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True, v=True)


def test_concurrent_runs_do_not_see_each_other(box, tmp_path):
    sandbox, env, repo = box
    ws = _workspace(repo, tmp_path, """
        import os, time

        def test_alone():
            me, other = os.environ["WHO"], os.environ["OTHER"]
            open(me, "w").write(me)
            open(f"/tmp/{me}", "w").write(me)
            time.sleep(3)
            assert not os.path.exists(other) and not os.path.exists(f"/tmp/{other}")
            assert sorted(os.listdir("/sandbox")) == ["io", "workspace"]
            assert os.path.exists(me)
    """)
    outs: dict[str, object] = {}

    def go(me: str, other: str) -> None:
        outs[me] = sandbox.run(env, ws, RunRequest(tests=("tests/test_evil.py",), timeout_s=60,
                                                   env={"WHO": me, "OTHER": other}))

    threads = [threading.Thread(target=go, args=pair) for pair in (("a", "b"), ("b", "a"))]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    assert wall < outs["a"].seconds + outs["b"].seconds  # they overlapped: each ran in the other's window
    for who in ("a", "b"):
        assert outs[who].report.outcome_of("tests/test_evil.py::test_alone") is Outcome.PASSED, \
            outs[who].report.output_tail
    assert _leftovers(sandbox) == ([], [])
