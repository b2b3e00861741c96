"""Sessions and tools on a tiny workspace (no generated dataset): limits, truncation, structured errors,
confinement, the diff, the episode budgets, the reaper, and the docker session's lockdown."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskforge.agent import reaper
from taskforge.agent.chat_client import ChatClient
from taskforge.agent.chat_episode import run_chat_episode
from taskforge.agent.episode import EndReason, EpisodeBudget, EpisodeRecord
from taskforge.agent.fake_endpoint import ScriptedEndpoint
from taskforge.agent.protocol import ToolCall, ToolError
from taskforge.agent.session import SandboxSession, open_session
from taskforge.agent.tools import TOOLS, pytest_summary, schemas
from taskforge.bench.curriculum import synthetic_task
from taskforge.core.environment import EnvSpec, PreparedEnv
from taskforge.core.patches import apply
from taskforge.core.settings import Settings
from taskforge.core.task import Task

VENV = Path(sys.prefix).resolve()
SPEC = EnvSpec(project_name="mini", python="3.11", install_target="", test_paths=("tests",))
BUDGET = EpisodeBudget(max_steps=8, max_tokens=1000, wall_clock_s=120, call_timeout_s=60, max_output_chars=400)


def _task() -> Task:
    return dataclasses.replace(synthetic_task(1, 0.5, repo="mini"), env_spec=SPEC)


def _workspace(root: Path) -> Path:
    ws = root / "broken"
    (ws / "mini").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "mini" / "__init__.py").write_text("def shout(s):\n    raise NotImplementedError\n")
    (ws / "tests" / "test_mini.py").write_text("from mini import shout\n\ndef test_ok():\n    assert True\n")
    return ws


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxSession]:
    monkeypatch.setenv("TASKFORGE_SESSIONS_DIR", str(tmp_path / "records"))
    broken = _workspace(tmp_path)

    @contextlib.contextmanager
    def provider(task: Task) -> Iterator[Path]:
        yield broken

    env = PreparedEnv(spec=SPEC, backend="local", location=str(VENV), python_version="3.11")
    with open_session(_task(), backend="local", settings=Settings(), workspace_provider=provider, environment=env,
                      budget=BUDGET) as s:
        yield s


def _call(s: SandboxSession, name: str, **args: object):  # noqa: ANN202
    return s.execute(ToolCall(name, json.dumps(args)))


def test_schemas_are_openai_function_tools() -> None:
    got = {t["function"]["name"]: t for t in schemas()}
    assert list(got) == ["bash", "view_file", "str_replace", "create_file", "run_tests", "submit"]
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in got.values())
    assert got["str_replace"]["function"]["parameters"]["required"] == ["path", "old_str", "new_str"]
    assert set(TOOLS) == set(got)


def test_bash_exit_code_timeout_truncation_and_no_network(session: SandboxSession) -> None:
    assert _call(session, "bash", command="exit 3").exit_code == 3
    session.budget = dataclasses.replace(BUDGET, call_timeout_s=2)
    slow = _call(session, "bash", command="sleep 30")
    assert slow.error is ToolError.TIMEOUT and slow.elapsed_s < 10 and "killed after 2s" in slow.output
    session.budget = BUDGET
    big = _call(session, "bash", command="seq 1 100000")
    assert big.truncated and "[taskforge: output truncated" in big.output and len(big.output) < 600
    assert big.output.startswith("1\n2\n") and big.output.rstrip().endswith("100000")
    net = _call(session, "bash", command="python -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\"")
    assert net.exit_code != 0 and "Network is unreachable" in net.output


def test_background_processes_do_not_outlive_a_call(session: SandboxSession) -> None:
    _call(session, "bash", command="(setsid sh -c 'sleep 2; echo late > late.txt' &) ; echo started")
    import time

    time.sleep(3)
    assert not (session.workspace / "late.txt").exists()


def test_file_tools_edit_and_the_diff_applies(session: SandboxSession, tmp_path: Path) -> None:
    shown = _call(session, "view_file", path="mini/__init__.py")
    assert shown.output == "     1\tdef shout(s):\n     2\t    raise NotImplementedError\n"
    ok = _call(session, "str_replace", path="mini/__init__.py", old_str="raise NotImplementedError",
               new_str="return s.upper()")
    assert ok.error is None and "edited mini/__init__.py" in ok.output
    assert _call(session, "create_file", path=f"{session.root}/mini/extra.py", content="X = 1\n").error is None
    twice = _call(session, "str_replace", path="mini/__init__.py", old_str="s", new_str="t")
    assert twice.error is ToolError.EDIT_NOT_APPLIED and "occurs" in twice.output
    absent = _call(session, "str_replace", path="mini/__init__.py", old_str="nope", new_str="t")
    assert absent.error is ToolError.EDIT_NOT_APPLIED and "does not occur" in absent.output
    tests = _call(session, "run_tests")
    assert tests.exit_code == 0 and tests.output.startswith("[run_tests: PASS: 1 passed")
    patch = session.diff()
    fresh = _workspace(tmp_path / "again")
    apply(patch, fresh)
    assert (fresh / "mini" / "__init__.py").read_text() == "def shout(s):\n    return s.upper()\n"
    assert (fresh / "mini" / "extra.py").read_text() == "X = 1\n"


def test_paths_stay_inside_the_workspace(session: SandboxSession) -> None:
    for path in ("../../etc/passwd", "/etc/passwd", "mini/../../x", ""):
        got = _call(session, "view_file", path=path)
        assert got.error is ToolError.BAD_ARGUMENTS, path
    _call(session, "bash", command="ln -s /etc/passwd leak.txt; ln -s /etc linkdir")
    assert _call(session, "view_file", path="leak.txt").error is ToolError.BAD_ARGUMENTS
    assert _call(session, "create_file", path="linkdir/evil", content="x").error is ToolError.BAD_ARGUMENTS
    assert "leak.txt" not in session.diff() and not Path("/etc/evil").exists()


def test_wrong_calls_are_structured_errors(session: SandboxSession) -> None:
    unknown = session.execute(ToolCall("grep_repo", "{}"))
    assert unknown.error is ToolError.UNKNOWN_TOOL and "available tools are: bash, view_file" in unknown.output
    assert session.execute(ToolCall("bash", "{nope")).error is ToolError.BAD_JSON
    assert session.execute(ToolCall("bash", "[1]")).error is ToolError.BAD_JSON
    assert session.execute(ToolCall("bash", '{"command": 1}')).error is ToolError.BAD_ARGUMENTS
    assert session.execute(ToolCall("view_file", '{"path": "x", "colour": 1}')).error is ToolError.BAD_ARGUMENTS
    assert session.execute(ToolCall("run_tests", '{"tests": "all"}')).error is ToolError.BAD_ARGUMENTS
    assert session.execute(ToolCall("submit", "")).submitted
    session.close()
    assert session.execute(ToolCall("bash", '{"command": "true"}')).error is ToolError.SESSION_CLOSED


def test_close_removes_the_directory_and_the_record(session: SandboxSession) -> None:
    directory = session.directory
    assert directory.is_dir() and list(reaper.sessions_dir().glob("*.json"))
    session.close()
    assert not directory.exists() and not list(reaper.sessions_dir().glob("*.json"))


def test_reaper_removes_what_a_dead_run_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKFORGE_SESSIONS_DIR", str(tmp_path / "records"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / "left-behind"
    left.mkdir()
    reaper.sessions_dir().mkdir()
    (reaper.sessions_dir() / "dead1.json").write_text(json.dumps({"pid": dead.pid, "started": "1", "dir": str(left)}))
    alive = reaper.write_record("alive1", dir=str(tmp_path))
    assert reaper.reap() == ["dead1"]
    assert not left.exists() and alive.is_file() and tmp_path.is_dir()


@pytest.mark.parametrize(("script", "budget", "reason", "steps"), [
    ([[("bash", {"command": "true"})]] * 20, EpisodeBudget(max_steps=3), EndReason.STEP_BUDGET, 3),
    ([[("bash", {"command": "true"})]] * 20, EpisodeBudget(max_tokens=25), EndReason.TOKEN_BUDGET, 3),
    ([[("bash", {"command": "sleep 1"})]] * 20, EpisodeBudget(wall_clock_s=2.5), EndReason.WALL_CLOCK, 0),
    ([[("bash", {"command": "true"})], [("submit", {})]], EpisodeBudget(), EndReason.SUBMITTED, 2),
])
def test_budgets_end_episodes_and_say_why(session: SandboxSession, script, budget: EpisodeBudget,  # noqa: ANN001
                                          reason: EndReason, steps: int) -> None:
    with ScriptedEndpoint(script) as url:
        patch, record = run_chat_episode(session, ChatClient.at(url, "scripted", timeout_s=10), budget)
    assert record.end_reason is reason and patch == ""
    if steps:
        assert record.steps == steps
    assert EpisodeRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_dead_endpoint_ends_the_episode_with_error(session: SandboxSession) -> None:
    from taskforge.core.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot reach"):
        run_chat_episode(session, ChatClient.at("http://127.0.0.1:9/v1", "m", timeout_s=2), BUDGET)


def test_pytest_summary_reads_the_last_line() -> None:
    assert pytest_summary("..F\n=== 2 passed, 1 failed in 0.1s ===\n") == "2 passed, 1 failed"
    assert pytest_summary("nothing") == ""


# --- docker: the same session in one locked-down container ---------------------------------------------
@pytest.mark.docker
def test_docker_session_is_locked_down_and_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import docker.errors

    from sandboxes.docker import DockerSandbox, docker_client
    from taskforge.agent.session_docker import OWNER_LABEL, SESSION_LABEL
    from taskforge.bench.docker_overhead import _REPO, _SPEC

    client = docker_client()
    repo = tmp_path / "envrepo"  # the benchmarks' tiny package: its image is built once per engine, then cached
    for rel, text in _REPO.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text).lstrip())
    built = DockerSandbox(Settings()).prepare(_SPEC, repo)
    env = dataclasses.replace(built, spec=SPEC)
    monkeypatch.setenv("TASKFORGE_SESSIONS_DIR", str(tmp_path / "records"))
    broken = _workspace(tmp_path)

    @contextlib.contextmanager
    def provider(task: Task) -> Iterator[Path]:
        yield broken

    with open_session(_task(), backend="docker", settings=Settings(), workspace_provider=provider, environment=env,
                      budget=BUDGET) as s:
        container = s.backend.container  # type: ignore[attr-defined]
        assert s.workspace is None and s.root == "/sandbox/workspace"
        assert _call(s, "bash", command="id -u").output.strip() == "65534"
        assert _call(s, "bash", command="touch /etc/x").exit_code != 0  # read-only root
        assert "lo" in _call(s, "bash", command="ls /sys/class/net").output
        assert _call(s, "bash", command="ls /sys/class/net").output.split() == ["lo"]
        _call(s, "bash", command="(setsid sh -c 'sleep 2; echo late > late.txt' &); echo started")
        assert _call(s, "bash", command="sleep 3; ls late.txt").exit_code != 0  # killed after the first call
        s.budget = dataclasses.replace(BUDGET, call_timeout_s=2)
        assert _call(s, "bash", command="sleep 30").error is ToolError.TIMEOUT
        s.budget = BUDGET
        assert _call(s, "str_replace", path="mini/__init__.py", old_str="raise NotImplementedError",
                     new_str="return s.upper()").error is None
        assert _call(s, "run_tests").output.startswith("[run_tests: PASS: 1 passed")
        assert "+    return s.upper()" in s.diff()
        attrs = client.api.inspect_container(container.id)["HostConfig"]
        assert attrs["NetworkMode"] == "none" and attrs["ReadonlyRootfs"] and attrs["CapDrop"] == ["ALL"]
        assert attrs["PidsLimit"] and attrs["Memory"]
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container.id)  # removed at close

    orphan = client.containers.create(env.location, ["sleep", "60"], labels={
        SESSION_LABEL: "orphan", OWNER_LABEL: f"{os.uname().nodename}:{2 ** 22 + 7}"})
    try:
        assert "orphan" in reaper.reap(client)
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(orphan.id)
    finally:
        with contextlib.suppress(Exception):
            orphan.remove(force=True)


def test_command_policy_works_in_the_session_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from taskforge.rl.policies import PolicyOptions, make_policy

    monkeypatch.setenv("TASKFORGE_SESSIONS_DIR", str(tmp_path / "records"))
    broken = _workspace(tmp_path)
    env = PreparedEnv(spec=SPEC, backend="local", location=str(VENV), python_version="3.11")

    @contextlib.contextmanager
    def provider(task: Task) -> Iterator[Path]:
        yield broken

    def sessions(task: Task) -> SandboxSession:
        return open_session(task, backend="local", settings=Settings(), workspace_provider=provider,
                            environment=env, budget=BUDGET)

    edit = ("import os, pathlib; p = pathlib.Path(os.environ['TASKFORGE_WORKSPACE'], 'mini', '__init__.py'); "
            "p.write_text(p.read_text().replace('raise NotImplementedError', 'return s.upper()'))")
    policy = make_policy("command", PolicyOptions(command=f"{sys.executable} -c \"{edit}\"", sessions=sessions))
    [patch] = policy.propose(_task(), 1)
    assert "+    return s.upper()" in patch and "NotImplementedError" in broken.joinpath("mini/__init__.py").read_text()
    [record] = policy.drain_episodes()
    assert record.end_reason is EndReason.FINISHED and record.patch_chars == len(patch)
    failing = make_policy("command", PolicyOptions(command=f"{sys.executable} -c \"raise SystemExit(3)\"",
                                                   sessions=sessions))
    assert failing.propose(_task(), 1) == [""] and failing.drain_episodes()[0].end_reason is EndReason.ERROR
