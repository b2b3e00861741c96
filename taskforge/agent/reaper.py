"""Sessions left behind by crashed runs: a record file per open session, and the reaper that removes them.

``open_session`` writes ``<sessions dir>/<id>.json`` (the opening process's pid and start time, the session
directory, the container id) before it creates anything, and ``close`` deletes it. ``reap`` removes the
directory and the container of every record whose process is gone, and (with a docker client) every
container labelled ``SESSION_LABEL`` whose owner on this host is gone. ``open_session`` reaps first; ``taskforge
sandbox reap`` does it by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sandboxes.reaper import owner_gone
from taskforge.core.files import write_atomic


def sessions_dir() -> Path:
    return Path(os.environ.get("TASKFORGE_SESSIONS_DIR") or Path(tempfile.gettempdir()) / "taskforge-sessions")


def _start_time(pid: int) -> str:
    """The kernel's start time of ``pid`` ('' when no such process), which tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, started: str) -> bool:
    now = _start_time(pid)
    return bool(now) and (not started or now == started)


def write_record(session_id: str, **fields: Any) -> Path:
    path = sessions_dir() / f"{session_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.is_file() else {"pid": os.getpid(), "started": _start_time(os.getpid())}
    write_atomic(path, json.dumps({**old, **fields}))
    return path


def remove_record(session_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (sessions_dir() / f"{session_id}.json").unlink()


def reap(client: Any | None = None) -> list[str]:
    """Remove what dead sessions left (their directories and containers); the ids reaped."""
    reaped: list[str] = []
    for path in sorted(sessions_dir().glob("*.json")) if sessions_dir().is_dir() else []:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _alive(int(rec.get("pid", 0)), str(rec.get("started", ""))):
            continue
        if rec.get("dir"):
            shutil.rmtree(rec["dir"], ignore_errors=True)
        if rec.get("container"):
            _remove_container(client, str(rec["container"]))
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        reaped.append(path.stem)
    if client is not None:
        reaped += _reap_labelled(client)
    return reaped


def _remove_container(client: Any | None, container_id: str) -> None:
    if client is None:
        from sandboxes.docker import docker_client

        try:
            client = docker_client(timeout_s=30)
        except Exception:  # no daemon: nothing of docker to clean
            return
    with contextlib.suppress(Exception):
        client.containers.get(container_id).remove(force=True, v=True)


def _reap_labelled(client: Any) -> list[str]:
    from taskforge.agent.session_docker import OWNER_LABEL, SESSION_LABEL

    out = []
    for container in client.containers.list(all=True, filters={"label": SESSION_LABEL}):
        if owner_gone(str(container.labels.get(OWNER_LABEL, ""))):
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
                out.append(str(container.labels.get(SESSION_LABEL)))
    return out
