"""Run untrusted code confined: bubblewrap namespaces, a read-only minimal system, limits that hold.

Standard library only, so both the ``local`` sandbox and a bare process helper can import it.

Threat model. The confined command is hostile: it is graded code that wants to read what it should
not, tamper with the tests that grade it, reach the network, outlive its run or take the host down.
Each claim below names the test in ``tests/test_isolation.py`` that attacks it:

- It sees only ``/usr``, the ``/bin``/``/lib*`` links, a few ``/etc`` files (``_ETC``), a fresh
  ``/proc`` for its own PID namespace, a minimal ``/dev``, size-capped tmpfs ``/tmp`` and ``/dev/shm``,
  and the caller's binds: not ``/root``, ``/home``, ``/work`` or any other host path
  (``test_planted_secrets_are_invisible``). Where the caller asks (``Mounts.hidden``, ``python_hidden``), the
  package directories of the interpreters it can see (the base interpreter's site-packages, Debian's
  dist-packages and python-wheels, ensurepip's wheels) and other interpreters' standard libraries are empty:
  they held the very code tasks delete (``tests/test_interpreter_packages_hidden.py``).
- Writes land only on read-write binds and tmpfs; ``Mounts.protected`` paths stay read-only even inside
  a read-write bind: no write, truncate, unlink, rename or replacement of them or their parent
  directory (``test_writes_outside_rw_binds_fail``, ``test_protected_paths_cannot_be_changed``).
- No privileges: all capabilities dropped, no new user namespaces, no remount
  (``test_no_capabilities_no_remount``).
- Host processes are invisible (new PID namespace) (``test_host_processes_are_invisible``).
- No network: a new network namespace with only loopback; the host's localhost is another namespace
  (``test_no_network``).
- The environment is exactly the one given (``--clearenv``) (``test_environment_is_exactly_env``).
- Memory and process count are capped: a per-run cgroup v1 (``memory.limit_in_bytes``, ``pids.max``)
  where this host allows one, else ``RLIMIT_AS``/``RLIMIT_NPROC`` under an unprivileged host uid
  (``RLIMIT_NPROC`` is not enforced for uid 0) (``test_memory_hog_is_stopped``,
  ``test_fork_bomb_is_contained``). Files are capped at ``Limits.fsize_mb`` (``RLIMIT_FSIZE``).
- Wall clock: ``run_isolated`` kills on timeout. Nothing survives a run, not even a ``setsid``
  double-forked child: bwrap's init dies with bwrap (``--die-with-parent``), the kernel kills a PID
  namespace with its init (under rlimits the scope waits for that teardown, which outlasts the outer
  bwrap), and a run's cgroup is swept (``test_infinite_loop_is_killed``,
  ``test_setsid_grandchild_dies_with_the_run``).
- File descriptors handed over with ``pass_fds`` reach the command (bwrap keeps inherited fds); no others
  do (``test_pass_fds_reach_the_command``).

Not claimed: no seccomp filter, so the kernel's whole syscall surface is reachable (a kernel exploit
escapes); CPU time is not shared fairly; with the rlimit fallback ``RLIMIT_NPROC`` counts every
process of ``UNPRIVILEGED_UID`` on the host, so concurrent runs share one budget.

The caller's part: bind a venv with ``python_mounts(venv)`` (its base interpreter may live under
``/root``, e.g. pyenv); bind the workspace ``rw`` and its tests and conftest files ``protected``. Every bind
must be usable by ``IsolationSupport.host_uid``: root under cgroups (nothing to do), ``UNPRIVILEGED_UID``
under rlimits (chown or ``chmod a+rwX`` the rw binds; no bind source below a directory it cannot
traverse, such as ``/root`` or ``/tmp/pytest-of-root``). Read results from a ``pass_fds`` pipe, not from
files in a rw bind (the command can plant symlinks there).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

UNPRIVILEGED_UID = 65534
"""Host uid of the command under the rlimit fallback (``IsolationSupport.host_uid``)."""
DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
_ETC = ("passwd", "group", "nsswitch.conf", "hosts", "localtime", "ld.so.cache", "ld.so.conf",
        "ld.so.conf.d", "alternatives", "ssl", "ca-certificates", "pki", "mime.types")
_NAMESPACES = ("--unshare-user", "--uid", "0", "--gid", "0", "--disable-userns", "--cap-drop", "ALL",
               "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
               "--hostname", "sandbox", "--die-with-parent", "--new-session")
_ATTACH = 'for f in "$1" "$2"; do echo $$ > "$f" || exit 125; done; shift 2; exec "$@"'
_OVERHEAD_PIDS = 2  # bwrap outside and its init inside: the command's own tree gets exactly Limits.pids


class IsolationUnavailable(RuntimeError):
    """Confinement was asked for where ``probe()`` says it cannot work; the message says why."""


@dataclass(frozen=True, slots=True)
class IsolationSupport:
    """What this host allows (from ``probe()``). ``reason`` is empty exactly when ``usable``."""

    bwrap: str = ""
    prlimit: str = ""
    setpriv: str = ""
    limiter: str = ""
    """``"cgroup"`` (per-run v1 memory+pids cgroups, command runs as host root) or ``"rlimit"``."""
    cgroup_parents: tuple[str, str] | None = None
    """(memory dir, pids dir) under which each run gets its own cgroup."""
    reason: str = ""

    @property
    def usable(self) -> bool:
        return not self.reason

    @property
    def host_uid(self) -> int:
        """The uid the command has on the host: it must be able to write the rw binds, read the ro ones."""
        return 0 if self.limiter == "cgroup" else UNPRIVILEGED_UID


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource caps of one run; the wall clock is the ``timeout_s`` of ``run_isolated``."""

    memory_mb: int = 2048
    pids: int = 256
    fsize_mb: int = 1024
    """Largest file the command may write (also caps its captured output)."""
    tmpfs_mb: int = 256
    """Size of each tmpfs (``/tmp``, ``/dev/shm``, ``Mounts.tmpfs``)."""


@dataclass(frozen=True, slots=True)
class Mounts:
    """Host paths made visible, each at the same path inside. Build with ``Mounts.of``.

    ``protected`` paths must lie inside an ``rw`` path; they are bound read-only on top of it (tests
    inside a writable workspace). Binds are applied parents first, so nesting works in any direction.
    """

    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    tmpfs: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    """Directories seen empty and read-only (an empty read-only tmpfs over them): ``python_hidden``."""

    @classmethod
    def of(cls, ro: Iterable[str | os.PathLike[str]] = (), rw: Iterable[str | os.PathLike[str]] = (),
           protected: Iterable[str | os.PathLike[str]] = (),
           tmpfs: Iterable[str | os.PathLike[str]] = (),
           hidden: Iterable[str | os.PathLike[str]] = ()) -> Mounts:
        return cls(*(tuple(os.path.abspath(p) for p in group) for group in (ro, rw, protected, tmpfs, hidden)))

    def __post_init__(self) -> None:
        for path in (*self.ro, *self.rw, *self.protected, *self.tmpfs, *self.hidden):
            if not os.path.isabs(path):
                raise ValueError(f"mount path {path!r} is relative; give an absolute path (or use Mounts.of)")
        for path in self.protected:
            if not any(os.path.commonpath([path, rw]) == rw and path != rw for rw in self.rw):
                raise ValueError(f"protected path {path!r} is not inside any rw bind {self.rw}; "
                                 "bind it read-only with ro= instead")


def python_mounts(venv: str | os.PathLike[str]) -> tuple[str, ...]:
    """Read-only paths a venv needs: the venv and its base interpreter's prefix (unless under ``/usr``)."""
    venv = os.path.abspath(venv)
    cfg = Path(venv, "pyvenv.cfg")
    lines = cfg.read_text().splitlines() if cfg.is_file() else []
    bins = {os.path.realpath(v.strip()) for k, _, v in (ln.partition("=") for ln in lines) if k.strip() == "home"}
    bins.add(os.path.dirname(os.path.realpath(os.path.join(venv, "bin", "python"))))  # bin/python's target
    prefixes = {os.path.dirname(b) for b in bins} - {venv, "/"}
    return (venv, *sorted(p for p in prefixes if os.path.commonpath([p, "/usr"]) != "/usr"))


# Where an interpreter keeps third-party distributions, relative to a prefix: site-packages and Debian's
# dist-packages, and the wheels Debian's venv and ensurepip install from (pip's vendors msgpack, idna ...).
_PACKAGE_DIRS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
                 "lib64/python3*/site-packages", "local/lib/python3*/site-packages",
                 "local/lib/python3*/dist-packages", "share/python-wheels", "lib/python3*/ensurepip/_bundled")


def python_stdlib(venv: str | os.PathLike[str]) -> tuple[str, tuple[str, ...]] | None:
    """The standard library a venv's interpreter imports (``<base prefix>/lib/pythonX.Y``) and its
    subfolders that ``python_hidden`` hides (relative), or None when the venv does not say where it is.

    It cannot be hidden, and it holds copies of PyPI projects: zipfile has zipp's ``CompleteDirs`` and
    ``Path``, tomllib is tomli, json began as simplejson. The leak audit reads it (channel ``interpreter``).
    """
    stdlib = _venv_stdlib(venv)
    if stdlib is None:
        return None
    return stdlib, tuple(sorted(os.path.relpath(h, stdlib) for h in python_hidden(venv)
                                if os.path.commonpath([h, stdlib]) == stdlib))


# The same directories in a container image, whose interpreter is Debian's or python:*-slim's.
IMAGE_PACKAGE_DIRS = ("/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
                      "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages", "/usr/share/python-wheels",
                      "/usr/local/lib/python3*/ensurepip/_bundled", "/usr/lib/python3*/ensurepip/_bundled")
# A shell command (root, in an image build) that empties them: an image's ``python_hidden``.
EMPTY_IMAGE_PACKAGES_SH = ("for d in " + " ".join(IMAGE_PACKAGE_DIRS) + "; do "
                           'if [ -d "$d" ]; then find "$d" -mindepth 1 -delete; fi; done')


def python_hidden(venv: str | os.PathLike[str]) -> tuple[str, ...]:
    """The package directories of every interpreter a confined command can see, but the venv's own.

    A venv without system site-packages never reads them, yet the base interpreter's prefix is bound
    (``python_mounts``) and so is ``/usr``: the host's pyenv site-packages held attrs 26.1.0 and
    itsdangerous 2.2.0, the very versions of corpus packages, ``/usr/lib/python3/dist-packages`` held
    pyparsing and yaml, and pip's ``_vendor`` holds msgpack's ``fallback.py``. An agent could read the
    deleted code there, or a patch load it at grading. Hidden: seen as empty, read-only directories.
    A venv that includes system site-packages hides nothing (its tests may import from there); the
    leak audit's environment channel is the venv only, so such a venv is the caller's risk.

    Beyond interpreters, any folder two levels under ``/usr`` or ``/usr/local`` that holds Python code is
    hidden (``usr_code_dirs``): this host's Google Cloud SDK vendors idna, pyparsing, yaml, mako, lark,
    sqlparse and more in ``/usr/lib/google-cloud-sdk/lib/third_party``, and other interpreters' standard
    libraries hold newer copies (3.12's ``zipfile/_path`` is a later zipp). The venv's own standard library
    cannot be hidden; the leak audit reads it (``python_stdlib``).
    """
    return _python_hidden(os.path.realpath(venv))


@functools.lru_cache(maxsize=64)
def _python_hidden(venv: str) -> tuple[str, ...]:
    cfg = Path(venv, "pyvenv.cfg")
    lines = cfg.read_text().splitlines() if cfg.is_file() else []
    if any(k.strip() == "include-system-site-packages" and v.strip().lower() == "true"
           for k, _, v in (ln.partition("=") for ln in lines)):
        return ()
    bases = python_mounts(venv)[1:]
    found: set[str] = set()
    for prefix in sorted({"/usr", *bases}):
        for pattern in _PACKAGE_DIRS:
            found.update(str(p) for p in Path(prefix).glob(pattern) if p.is_dir() and not p.is_symlink())
    own = _venv_stdlib(venv)
    needed = {venv, *bases, *((own,) if own else ())}  # never hide these, nor a folder above them
    found.update(d for d in usr_code_dirs() if not any(os.path.commonpath([d, n]) == d for n in needed))
    found = {p for p in found if os.path.commonpath([p, venv]) not in (p, venv)}
    return tuple(sorted(p for p in found if not any(q != p and os.path.commonpath([p, q]) == q for q in found)))


# Folders under /usr that hold what every program needs (shared libraries, compilers): never hidden.
_USR_KEEP = ("/usr/lib/gcc", "/usr/lib/locale", "/usr/share/zoneinfo", "/usr/share/ca-certificates",
             "/usr/lib/ssl", "/usr/share/terminfo", "/usr/share/misc", "/usr/lib/git-core", "/usr/share/git-core")
_CODE_SUFFIXES = (".py", ".pyc", ".whl", ".egg")


@functools.lru_cache(maxsize=1)
def usr_code_dirs() -> tuple[str, ...]:
    """Folders two levels under ``/usr`` and ``/usr/local`` (``/usr/lib/google-cloud-sdk``) holding Python code
    anywhere below them: multiarch library folders and ``_USR_KEEP`` aside. Read once per process (about a
    second for this host's 6 GB ``/usr``)."""
    out = []
    for top in ("/usr", "/usr/local"):
        for first in sorted(Path(top).iterdir()) if os.path.isdir(top) else ():
            if first.is_symlink() or not first.is_dir() or str(first) == "/usr/local":
                continue
            for second in sorted(first.iterdir()) if os.access(first, os.R_OK | os.X_OK) else ():
                path = str(second)
                if (second.is_symlink() or not second.is_dir() or path in _USR_KEEP or "-linux-gnu" in second.name
                        or path.startswith("/usr/local/") and top == "/usr"):
                    continue
                if _holds_code(path):
                    out.append(path)
    return tuple(out)


def _holds_code(root: str) -> bool:
    for _dirpath, _dirnames, filenames in os.walk(root):
        if any(name.endswith(_CODE_SUFFIXES) for name in filenames):
            return True
    return False


def _venv_stdlib(venv: str | os.PathLike[str]) -> str | None:
    """``<base prefix>/lib/pythonX.Y`` of a venv, from its ``pyvenv.cfg``; None when it does not say."""
    cfg = Path(venv, "pyvenv.cfg")
    lines = cfg.read_text().splitlines() if cfg.is_file() else []
    conf = {k.strip(): v.strip() for k, _, v in (ln.partition("=") for ln in lines)}
    version = ".".join(conf.get("version", conf.get("version_info", "")).split(".")[:2])
    if not conf.get("home") or not version:
        return None
    stdlib = Path(os.path.realpath(conf["home"])).parent / "lib" / f"python{version}"
    return str(stdlib) if (stdlib / "os.py").is_file() else None


@dataclass(frozen=True, slots=True)
class Scope:
    """One live run's limit scope (see ``confine``); every process in it is killed when it closes."""

    support: IsolationSupport
    cgroups: tuple[str, ...] = ()
    info_fd: int = -1
    """Under rlimits: the file bwrap writes its init's host pid and PID namespace to (``--info-fd``)."""

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """Fds the ``isolated_argv`` command must inherit (add them to the caller's ``pass_fds``)."""
        return (self.info_fd,) if self.info_fd >= 0 else ()

    def kill_all(self, wait_s: float = 5.0) -> bool:
        """SIGKILL every process of the run until none is left; False if some outlived ``wait_s``.

        Under cgroups: every process in the run's cgroups. Under rlimits: bwrap's init, which takes its
        whole PID namespace with it; the kernel tears a namespace down after its outer bwrap has exited,
        so this waits until the init is gone (or a zombie, which it only becomes once the namespace is empty).
        """
        deadline = time.monotonic() + wait_s
        if self.info_fd >= 0:
            return self._kill_namespace(deadline)
        while True:
            pids = {int(p) for d in self.cgroups for p in Path(d, "cgroup.procs").read_text().split()}
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def _kill_namespace(self, deadline: float) -> bool:
        try:
            info = json.loads(os.pread(self.info_fd, 4096, 0) or b"{}")
            pid, namespace = int(info["child-pid"]), f"pid:[{int(info['pid-namespace'])}]"
        except (OSError, ValueError, KeyError):
            return True  # bwrap never started its init (killed first): nothing of the run can exist
        while True:
            try:  # a pid that is gone, a zombie or another namespace's (reused) is not the run's init
                state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
                if os.readlink(f"/proc/{pid}/ns/pid") != namespace or state in ("Z", "X"):
                    return True
            except OSError:
                return True
            if time.monotonic() > deadline:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)


@contextlib.contextmanager
def confine(limits: Limits, support: IsolationSupport | None = None) -> Iterator[Scope]:
    """A limit scope for one run: its own memory and pids cgroups (none under the rlimit fallback)."""
    support = support or probe()
    if not support.usable:
        raise IsolationUnavailable(support.reason)
    scope = Scope(support)
    stack = contextlib.ExitStack()
    try:
        if support.limiter == "cgroup" and support.cgroup_parents:
            scope = Scope(support, _make_cgroups(support.cgroup_parents, limits))
        elif support.limiter == "rlimit":
            info = tempfile.TemporaryFile()  # unlinked: only bwrap (through the fd) and this scope see it
            os.set_inheritable(info.fileno(), True)
            scope = Scope(support, info_fd=info.fileno())
            stack.callback(info.close)
        yield scope
    finally:
        scope.kill_all()
        stack.close()
        for path in scope.cgroups:
            with contextlib.suppress(OSError):
                os.rmdir(path)


def _make_cgroups(parents: tuple[str, str], limits: Limits) -> tuple[str, str]:
    name = f"taskforge-{os.getpid()}-{secrets.token_hex(4)}"
    memory, pids = (os.path.join(parent, name) for parent in parents)
    try:
        os.mkdir(memory)
        os.mkdir(pids)
        Path(memory, "memory.limit_in_bytes").write_text(str(limits.memory_mb << 20))
        with contextlib.suppress(OSError):  # absent or refused without swap accounting
            Path(memory, "memory.memsw.limit_in_bytes").write_text(str(limits.memory_mb << 20))
        Path(pids, "pids.max").write_text(str(limits.pids + _OVERHEAD_PIDS))
    except OSError as exc:
        for path in (memory, pids):
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise IsolationUnavailable(f"could not set up a run's cgroups under {parents}: {exc}; "
                                   "check that this process may create cgroups there") from exc
    return memory, pids


def isolated_argv(argv: Sequence[str], *, mounts: Mounts, limits: Limits, scope: Scope,
                  cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that runs ``argv`` confined within ``scope`` (from ``confine``).

    Start it in a new session (``start_new_session=True``) from a thread that outlives it (bwrap dies
    with its parent thread). Fds it inherits reach the command, so pass exactly the ones it may use, plus
    ``scope.pass_fds`` (bwrap's own, closed before the command starts).
    ``cwd`` is a path inside the sandbox (default ``/``); ``env`` defaults to ``DEFAULT_ENV``.
    """
    support = scope.support
    jail = _jail(support.bwrap, argv, mounts, limits, cwd, env)
    if scope.info_fd >= 0:
        jail[1:1] = ["--info-fd", str(scope.info_fd)]
    rlimits = [support.prlimit, f"--fsize={limits.fsize_mb << 20}", "--core=0"]
    if support.limiter == "cgroup":
        if len(scope.cgroups) != 2:
            raise ValueError("scope has no cgroups: build it with confine(limits) and keep it open")
        return ["/bin/sh", "-c", _ATTACH, "sh", *(os.path.join(d, "cgroup.procs") for d in scope.cgroups),
                *rlimits, "--", *jail]
    return [*rlimits, f"--as={limits.memory_mb << 20}", f"--nproc={limits.pids + _OVERHEAD_PIDS}", "--",
            support.setpriv, f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}", "--clear-groups", *jail]


def run_isolated(argv: list[str], timeout_s: float, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                 tail: int = 0, *, mounts: Mounts = Mounts(), limits: Limits = Limits(),
                 pass_fds: Sequence[int] = (), support: IsolationSupport | None = None) -> tuple[int | None, str]:
    """``run_capture`` confined: (exit code or None on timeout, combined output; last ``tail`` bytes if > 0).

    A command killed by a signal (e.g. the OOM killer) reports 128 + the signal number, as bwrap does.
    Everything the command started is dead when this returns. Raises ``IsolationUnavailable``.
    """
    with confine(limits, support) as scope, tempfile.TemporaryFile() as out:
        full = isolated_argv(argv, mounts=mounts, limits=limits, scope=scope, cwd=cwd, env=env)
        proc = subprocess.Popen(full, env={"PATH": "/usr/bin:/bin"}, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                pass_fds=(*pass_fds, *scope.pass_fds))
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        size = out.seek(0, os.SEEK_END)
        out.seek(max(0, size - tail) if tail > 0 else 0)
        return rc, out.read().decode("utf-8", "replace")


@functools.cache
def probe() -> IsolationSupport:
    """Whether confinement works here (bwrap and its namespaces, then cgroups, else rlimits); cached."""
    tools = {name: shutil.which(name) or "" for name in ("bwrap", "prlimit", "setpriv")}
    missing = [name for name, path in tools.items() if not path]
    if missing:
        return IsolationSupport(reason=f"{', '.join(missing)} not found on PATH; install bubblewrap and "
                                       "util-linux (apt-get install bubblewrap util-linux)")
    base = IsolationSupport(bwrap=tools["bwrap"], prlimit=tools["prlimit"], setpriv=tools["setpriv"])
    ok, why = _bwrap_works(base.bwrap)
    if not ok:
        return replace(base, reason=f"bubblewrap does not work here: {why}")
    parents, why = _cgroup_v1_parents()
    candidates = [replace(base, limiter="rlimit")]
    if parents:
        candidates.insert(0, replace(base, limiter="cgroup", cgroup_parents=parents))
    failures = [] if parents else [f"cgroups: {why}"]
    for candidate in candidates:  # the real code path, limits included
        try:
            rc, out = run_isolated(["true"], 20, limits=Limits(memory_mb=256, pids=16), support=candidate)
        except IsolationUnavailable as exc:
            rc, out = -1, str(exc)
        if rc == 0:
            return candidate
        failures.append(f"{candidate.limiter} (as host uid {candidate.host_uid}): exit {rc}: {out.strip()[-300:]}")
    return replace(base, reason="no way to limit memory and processes here: " + "; ".join(failures))


def _jail(bwrap: str, argv: Sequence[str], mounts: Mounts, limits: Limits,
          cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None) -> list[str]:
    """The bwrap part alone: namespaces, mounts, environment; limits are added by ``isolated_argv``."""
    out = [bwrap, *_NAMESPACES, *_system_mounts(limits), *_user_mounts(mounts, limits),
           "--remount-ro", "/dev", "--remount-ro", "/", "--clearenv"]  # bwrap's own tmpfs: read-only
    for key, value in (DEFAULT_ENV if env is None else env).items():
        out += ["--setenv", key, value]
    return [*out, "--chdir", os.fspath(cwd or "/"), "--", *argv]


def _bwrap_works(bwrap: str) -> tuple[bool, str]:
    """Run ``true`` in the jail without limits; if it fails, name the namespace this host refuses."""
    done = subprocess.run(_jail(bwrap, ["true"], Mounts(), Limits(), None, None), capture_output=True,
                          timeout=20, stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        return True, ""
    why = done.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit {done.returncode}"
    for flag in (f for f in _NAMESPACES if f.startswith(("--unshare-", "--disable-"))):
        extra = ["--unshare-user"] if flag == "--disable-userns" else []
        if subprocess.run([bwrap, "--ro-bind", "/", "/", *extra, flag, "true"], capture_output=True,
                          timeout=20, stdin=subprocess.DEVNULL).returncode:
            return False, f"bwrap {flag} is refused ({why})"
    return False, why


def _cgroup_v1_parents() -> tuple[tuple[str, str] | None, str]:
    """(memory dir, pids dir) of this process's own v1 cgroups, if both controllers are mounted writable."""
    mounts: dict[str, str] = {}
    for left, _, right in (ln.partition(" - ") for ln in Path("/proc/self/mountinfo").read_text().splitlines()):
        fstype, _source, options = (right.split() + ["", "", ""])[:3]
        mounts.update({c: left.split()[4] for c in options.split(",") if fstype == "cgroup"})
    own = {c: path for _id, cs, path in (ln.split(":", 2) for ln in Path("/proc/self/cgroup").read_text().splitlines())
           for c in cs.split(",")}
    dirs = []
    for controller in ("memory", "pids"):
        if controller not in mounts:
            return None, f"no cgroup v1 {controller} controller mounted (cgroup v2 is not supported)"
        nested = os.path.normpath(os.path.join(mounts[controller], own.get(controller, "/").lstrip("/")))
        dirs.append(nested if os.path.isdir(nested) else mounts[controller])
        if not os.access(dirs[-1], os.W_OK):
            return None, f"{dirs[-1]} is not writable"
    return (dirs[0], dirs[1]), ""


def _system_mounts(limits: Limits) -> list[str]:
    out = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            out += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            out += ["--ro-bind", top, top]
    for name in _ETC:
        out += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    size = str(limits.tmpfs_mb << 20)
    return [*out, "--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp",
            "--size", size, "--tmpfs", "/dev/shm"]


def _user_mounts(mounts: Mounts, limits: Limits) -> list[str]:
    ops = [*((p, "--ro-bind") for p in mounts.ro), *((p, "--bind") for p in mounts.rw),
           *((p, "--tmpfs") for p in mounts.tmpfs), *((p, "--ro-bind") for p in mounts.protected),
           *((p, "hidden") for p in mounts.hidden)]
    out: list[str] = []
    for path, op in sorted(ops, key=lambda item: len(Path(item[0]).parts)):  # stable: protected after rw
        if op == "hidden":  # an empty tmpfs, then read-only
            out += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
        else:
            out += ["--size", str(limits.tmpfs_mb << 20), op, path] if op == "--tmpfs" else [op, path, path]
    return out

