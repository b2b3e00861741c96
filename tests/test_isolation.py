"""Attacks on each claim of ``sandboxes/isolation.py``'s threat model, written as graded code would try them.

Every attack runs a real interpreter inside the real bubblewrap jail; the whole module is skipped, with
probe()'s reason, only where bubblewrap cannot work. Limit tests run under each limiter this host has
(per-run cgroups and the unprivileged-rlimit fallback).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandboxes.isolation import (
    DEFAULT_ENV,
    IsolationSupport,
    IsolationUnavailable,
    Limits,
    Mounts,
    confine,
    isolated_argv,
    probe,
    python_mounts,
    run_isolated,
)

SUPPORT = probe()
pytestmark = pytest.mark.skipif(not SUPPORT.usable, reason=f"isolation unavailable: {SUPPORT.reason}")
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv as the local sandbox makes one (its interpreter may live under /root, e.g. pyenv)."""
    path = tmp_path_factory.mktemp("venv") / "v"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    return path


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A workspace any host uid may use, as the rlimit fallback needs (its jail runs as UNPRIVILEGED_UID)."""
    path = Path(tempfile.mkdtemp(prefix="taskforge-isolation-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


def _python(venv: Path, code: str, *args: str, timeout: float = 15, mounts: Mounts | None = None,
            **kwargs: Any) -> tuple[int | None, str]:
    """Run ``code`` with the venv's python in the jail, the venv bound read-only on top of ``mounts``."""
    mounts = mounts or Mounts()
    mounts = replace(mounts, ro=(*mounts.ro, *python_mounts(venv)))
    argv = [str(venv / "bin" / "python"), "-c", textwrap.dedent(code), *args]
    return run_isolated(argv, timeout, mounts=mounts, **kwargs)


def _report(out: str) -> dict[str, Any]:
    """The JSON object an attack prints on its last line."""
    return json.loads(out.strip().splitlines()[-1])


def _limiters() -> list[object]:
    """Each limiter to attack: the one probe() chose, plus the rlimit fallback when it works here."""
    params: list[object] = [pytest.param(SUPPORT, id=SUPPORT.limiter or "none")]
    if SUPPORT.usable and SUPPORT.limiter == "cgroup" and os.path.exists(SYSTEM_PYTHON):
        fallback = replace(SUPPORT, limiter="rlimit", cgroup_parents=None)
        if run_isolated(["true"], 20, support=fallback)[0] == 0:
            params.append(pytest.param(fallback, id="rlimit"))
    return params


def _alive_with(token: str) -> list[int]:
    """Host pids whose command line contains ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and token.encode() in Path("/proc", entry, "cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_planted_secrets_are_invisible(venv: Path, tmp_path: Path) -> None:
    token = secrets.token_hex(6)
    planted = [Path("/root/.cache") / f"taskforge-secret-{token}", Path("/work/main") / f".secret-{token}",
               Path("/work") / f"other-{token}" / "secret"]
    try:
        for path in planted:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("the answer")
        rc, out = _python(venv, """
            import json, os, sys
            seen = {}
            for p in sys.argv[1:] + ["/root/.cache", "/home", "/work", "/var", "/run", "/opt", "/sys"]:
                try:
                    seen[p] = open(p).read() if os.path.isfile(p) else sorted(os.listdir(p))
                except OSError as e:
                    seen[p] = type(e).__name__
            print(json.dumps({"seen": seen, "root": sorted(os.listdir("/"))}))
            """, *map(str, planted))
        assert rc == 0, out
        report = _report(out)
        assert all(v == "FileNotFoundError" for v in report["seen"].values()), report
        assert set(report["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin",
                                       "tmp", "usr", "root"}, report["root"]  # /root only holds the bound prefix
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        (Path("/work") / f"other-{token}").rmdir()


def test_writes_outside_rw_binds_fail(venv: Path, tmp_path: Path) -> None:
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    ws.mkdir()
    ro.mkdir()
    targets = ["/x", "/etc/x", "/usr/x", "/dev/x", "/root/x", str(ro / "x"), str(venv / "x")]
    rc, out = _python(venv, """
        import json, sys
        result = {}
        for p in sys.argv[1:]:
            try:
                open(p, "w").write("pwned")
                result[p] = "wrote"
            except OSError as e:
                result[p] = type(e).__name__
        print(json.dumps(result))
        """, *targets, str(ws / "ok"), str(tmp_path / "scratch"), mounts=Mounts.of(rw=[ws], ro=[ro]))
    assert rc == 0, out
    result = _report(out)
    assert result.pop(str(ws / "ok")) == "wrote" and (ws / "ok").read_text() == "pwned"  # the rw bind works
    assert result.pop(str(tmp_path / "scratch")) == "wrote"  # the jail's own /tmp is a scratch tmpfs...
    assert not (tmp_path / "scratch").exists()  # ...that the host never sees
    assert "wrote" not in result.values(), result
    assert not (ro / "x").exists() and not (venv / "x").exists()


def test_protected_paths_cannot_be_changed(venv: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_a.py").write_text("def test_a(): assert False\n")
    (ws / "conftest.py").write_text("# grader's\n")
    mounts = Mounts.of(rw=[ws], protected=[ws / "tests", ws / "conftest.py"])
    rc, out = _python(venv, """
        import json, os, shutil
        os.chdir(os.environ["WS"])
        open("fake.py", "w").write("def test_a(): pass\\n")
        attacks = {
            "write": lambda: open("tests/test_a.py", "w").write("def test_a(): pass\\n"),
            "append": lambda: open("conftest.py", "a").write("import os\\n"),
            "truncate": lambda: os.truncate("conftest.py", 0),
            "unlink file": lambda: os.unlink("conftest.py"),
            "unlink in dir": lambda: os.unlink("tests/test_a.py"),
            "replace file": lambda: os.replace("fake.py", "conftest.py"),
            "replace in dir": lambda: os.replace("fake.py", "tests/test_a.py"),
            "rename file away": lambda: os.rename("conftest.py", "moved.py"),
            "rename dir away": lambda: os.rename("tests", "tests_old"),
            "rmtree dir": lambda: shutil.rmtree("tests"),
            "add to dir": lambda: open("tests/conftest.py", "w").write("x"),
            "chmod": lambda: os.chmod("tests/test_a.py", 0o777),
            "symlink over": lambda: os.symlink("fake.py", "tests/test_b.py"),
            "rename workspace": lambda: os.rename(os.environ["WS"], os.environ["WS"] + ".moved"),
        }
        result = {}
        for name, attack in attacks.items():
            try:
                attack()
                result[name] = "done"
            except OSError as e:
                result[name] = type(e).__name__
        print(json.dumps(result))
        """, mounts=mounts, env={"WS": str(ws), "PATH": "/usr/bin:/bin"})
    assert rc == 0, out
    result = _report(out)
    assert "done" not in result.values(), result
    assert (ws / "tests" / "test_a.py").read_text() == "def test_a(): assert False\n"
    assert (ws / "conftest.py").read_text() == "# grader's\n"
    assert sorted(p.name for p in (ws / "tests").iterdir()) == ["test_a.py"]
    assert (ws / "fake.py").exists()  # the workspace itself stayed writable


def test_no_capabilities_no_remount(venv: Path) -> None:
    rc, out = _python(venv, """
        import json, subprocess
        caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))]
        run = lambda *a: subprocess.run(a, capture_output=True).returncode
        print(json.dumps({"caps": caps, "remount": run("mount", "-o", "remount,bind,rw", "/usr"),
                          "userns": run("unshare", "-Ur", "true"), "mount_tmpfs": run("mount", "-t", "tmpfs", "x", "/tmp")}))
        """)
    assert rc == 0, out
    report = _report(out)
    assert report["caps"] == ["0000000000000000", "0000000000000000"]
    assert report["remount"] != 0 and report["userns"] != 0 and report["mount_tmpfs"] != 0, report


def test_host_processes_are_invisible(venv: Path) -> None:
    token = secrets.token_hex(6)
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", token])
    try:
        rc, out = _python(venv, """
            import json, os, sys
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            lines = [open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace") for p in pids]
            try:
                os.kill(int(sys.argv[1]), 0)
                signalled = True
            except ProcessLookupError:
                signalled = False
            print(json.dumps({"pids": pids, "token_seen": any("time.sleep(" + "30)" in l for l in lines),
                              "signalled": signalled}))
            """, str(host.pid), token)
        assert rc == 0, out
        report = _report(out)
        assert len(report["pids"]) <= 3, report  # bwrap's init, the python and maybe its child
        assert not report["token_seen"] and not report["signalled"], report
        assert host.poll() is None  # the host process was not touched
    finally:
        host.kill()
        host.wait()


def test_no_network(venv: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        rc, out = _python(venv, """
            import json, socket, sys
            def connect(host, port):
                try:
                    socket.create_connection((host, port), timeout=3).close()
                    return "connected"
                except OSError as e:
                    return type(e).__name__
            own = socket.create_server(("127.0.0.1", 0))  # loopback itself works
            print(json.dumps({"host_localhost": connect("127.0.0.1", int(sys.argv[1])),
                              "internet": connect("1.1.1.1", 443), "dns": connect("example.com", 80),
                              "own_loopback": connect("127.0.0.1", own.getsockname()[1]),
                              "interfaces": [n for _, n in socket.if_nameindex()]}))
            """, str(port))
    assert rc == 0, out
    report = _report(out)
    assert report["own_loopback"] == "connected", report
    assert report["host_localhost"] == "ConnectionRefusedError", report
    assert report["internet"] in ("OSError", "TimeoutError") and report["dns"] == "gaierror", report
    assert report["interfaces"] == ["lo"], report


def test_environment_is_exactly_env(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKFORGE_TEST_SECRET", "hunter2")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ONLY": "this"}
    with confine(Limits()) as scope:  # as a process helper would: the jail's own parent env is the host's
        argv = isolated_argv([str(venv / "bin" / "python"), "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                             mounts=Mounts.of(ro=python_mounts(venv)), limits=Limits(), scope=scope, env=env)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {**env, "PWD": "/"}  # bwrap sets PWD


@pytest.mark.parametrize("support", _limiters())
def test_memory_hog_is_stopped(support: IsolationSupport, tmp_path: Path) -> None:
    hog = """
        import sys
        chunks = []
        for i in range(128):  # 8 GiB in 64 MiB chunks, every page touched
            chunks.append(b"x" * (64 << 20))
            print((i + 1) * 64, flush=True)
        """
    start = time.monotonic()
    rc, out = run_isolated([SYSTEM_PYTHON, "-c", textwrap.dedent(hog)], 60, limits=Limits(memory_mb=256),
                           support=support)
    reached = max((int(line) for line in out.split() if line.isdigit()), default=0)
    assert rc == (128 + signal.SIGKILL if support.limiter == "cgroup" else 1), out[-500:]  # OOM kill / MemoryError
    assert 64 <= reached <= 256, out[-500:]
    assert time.monotonic() - start < 30
    assert run_isolated(["true"], 20, support=support)[0] == 0  # the host and the next run are fine


@pytest.mark.parametrize("support", _limiters())
def test_fork_bomb_is_contained(support: IsolationSupport) -> None:
    token = secrets.token_hex(6)
    bomb = """
        import os, sys, time
        if os.fork() == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.01)
        time.sleep(2)
        print(sum(p.isdigit() for p in os.listdir("/proc")), flush=True)
        """
    start = time.monotonic()
    rc, out = run_isolated([SYSTEM_PYTHON, "-c", textwrap.dedent(bomb), token], 20, limits=Limits(pids=32),
                           support=support)
    assert rc == 0 and 16 < int(out.split()[-1]) <= 32 + 1, out[-500:]  # + bwrap's init
    assert time.monotonic() - start < 10
    assert subprocess.run(["true"], timeout=10).returncode == 0  # the host can still fork
    assert _alive_with(token) == []  # and not one bomb process outlived the run


def test_infinite_loop_is_killed(venv: Path) -> None:
    start = time.monotonic()
    rc, _ = _python(venv, "while True: pass", timeout=2)
    assert rc is None
    assert time.monotonic() - start < 2 + 1.5


@pytest.mark.parametrize("support", _limiters())
@pytest.mark.parametrize("main", ["exits", "times out"])
def test_setsid_grandchild_dies_with_the_run(support: IsolationSupport, shared_dir: Path, main: str) -> None:
    code = """
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.closerange(0, 3)
                time.sleep(1)
                open(sys.argv[1], "w").write("survived")
            os._exit(0)
        os.wait()
        if sys.argv[2] == "times out":
            time.sleep(60)
        """
    rc, out = run_isolated([SYSTEM_PYTHON, "-c", textwrap.dedent(code), str(shared_dir / "survivor"), main],
                           1 if main == "times out" else 10, mounts=Mounts.of(rw=[shared_dir]), support=support)
    assert rc == (None if main == "times out" else 0), out
    time.sleep(2)
    assert not (shared_dir / "survivor").exists()


def test_pass_fds_reach_the_command(venv: Path) -> None:
    results_r, results_w = os.pipe()
    other_r, other_w = os.pipe()
    os.set_inheritable(other_w, True)  # inheritable, but not passed: must not reach the command
    try:
        rc, out = _python(venv, """
            import os, sys
            os.write(int(sys.argv[1]), b'{"passed": 3}')
            try:
                os.write(int(sys.argv[2]), b"leak")
            except OSError:
                pass
            """, str(results_w), str(other_w), pass_fds=(results_w,))
        os.close(results_w)
        os.close(other_w)
        assert rc == 0, out
        assert os.read(results_r, 100) == b'{"passed": 3}'
        assert os.read(other_r, 100) == b""
    finally:
        os.close(results_r)
        os.close(other_r)


def test_venv_python_imports_stdlib(venv: Path) -> None:
    rc, out = _python(venv, "import json, ssl, sqlite3, sys; print(sys.prefix, sys.base_prefix)")
    assert rc == 0, out
    prefix, base = out.split()
    assert prefix == str(venv) and base == sys.base_prefix


def test_output_tail_and_cwd(tmp_path: Path) -> None:
    rc, out = run_isolated(["sh", "-c", "pwd; echo abcdef"], 10, cwd=tmp_path, tail=4,
                           mounts=Mounts.of(ro=[tmp_path]))
    assert (rc, out) == (0, "def\n")
    rc, out = run_isolated(["sh", "-c", "pwd"], 10, cwd=tmp_path, mounts=Mounts.of(ro=[tmp_path]))
    assert (rc, out) == (0, f"{tmp_path}\n")


def test_overhead_against_plain_subprocess(venv: Path) -> None:
    python = str(venv / "bin" / "python")
    mounts = Mounts.of(ro=python_mounts(venv))

    def median(run: Callable[[], object]) -> float:
        times = []
        for _ in range(20):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    plain = median(lambda: subprocess.run([python, "-c", "pass"], env=DEFAULT_ENV, check=True, timeout=30))
    isolated = median(lambda: run_isolated([python, "-c", "pass"], 30, mounts=mounts))
    print(f"\nrun_isolated overhead: plain {plain * 1000:.1f} ms, isolated {isolated * 1000:.1f} ms, "
          f"+{(isolated - plain) * 1000:.1f} ms ({SUPPORT.limiter})")
    assert isolated - plain < 0.25


def test_argv_binds_only_what_is_asked(tmp_path: Path) -> None:
    with confine(Limits()) as scope:
        argv = isolated_argv(["true"], mounts=Mounts.of(rw=[tmp_path]), limits=Limits(), scope=scope)
    sources = {argv[i + 1] for i, arg in enumerate(argv) if arg in ("--bind", "--ro-bind", "--ro-bind-try")}
    assert {s for s in sources if not s.startswith(("/usr", "/etc/", "/bin", "/sbin", "/lib"))} == {str(tmp_path)}
    assert "--bind" in argv and argv[argv.index("--bind") + 1] == str(tmp_path)


def test_mounts_reject_what_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not inside any rw bind"):
        Mounts.of(ro=[tmp_path], protected=[tmp_path / "tests"])
    with pytest.raises(ValueError, match="relative"):
        Mounts(rw=("ws",))


def test_probe_says_why_without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    support = probe.__wrapped__()
    assert not support.usable and "bwrap" in support.reason and "bubblewrap" in support.reason
    with pytest.raises(IsolationUnavailable, match="bwrap"):
        run_isolated(["true"], 10, support=support)
