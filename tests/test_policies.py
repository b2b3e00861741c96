"""Policies: oracle/null, the simulated learner, an external command, an OpenAI-compatible endpoint."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from taskforge.bench.curriculum import synthetic_task
from taskforge.core.errors import ConfigError
from taskforge.rl.answer_patch import extract_patch, wrong_patch
from taskforge.rl.grading import FakeGrader, GradedGroup, GradeResult
from taskforge.rl.policies import (
    CommandPolicy,
    OpenAIPolicy,
    PolicyOptions,
    SimulatedPolicy,
    make_policy,
)

TASK = synthetic_task(3, 0.4)


def _group(task, rewards) -> GradedGroup:
    return GradedGroup(0, task, tuple("" for _ in rewards),
                       tuple(GradeResult(task.instance_id, float(r)) for r in rewards))


# --- patches ----------------------------------------------------------------------------------------
def test_extract_patch_from_fenced_block_raw_diff_and_nothing() -> None:
    diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n a\n+b\n"
    assert extract_patch(f"Here you go:\n```diff\n{diff}```\nbye") == diff
    assert extract_patch(f"I changed it.\n{diff}") == diff
    assert extract_patch("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b") == "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert extract_patch("```python\nprint(1)\n```") == ""
    assert extract_patch("no idea") == ""


def test_wrong_patch_applies_but_differs_and_scores_zero(tmp_path: Path) -> None:
    wrong = wrong_patch(TASK.patch)
    assert wrong and wrong != TASK.patch
    assert wrong.count("\n") == TASK.patch.count("\n")
    assert "return None" in wrong
    # It applies with git to the broken file, like the gold patch does.
    repo = tmp_path / "r"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "feature_3.py").write_text("import math\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    for patch in (wrong, TASK.patch):
        subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=patch, text=True, check=True, timeout=30)
    assert FakeGrader().grade([(TASK, wrong), (TASK, TASK.patch)])[0].reward == 0.0
    # Nothing to falsify: the wrong solution is the empty patch.
    assert wrong_patch("diff --git a/x b/x\n+    return None\n") == ""


# --- oracle / null ----------------------------------------------------------------------------------
def test_oracle_and_null() -> None:
    assert make_policy("oracle").propose(TASK, 3) == [TASK.patch] * 3
    assert make_policy("null").propose(TASK, 2) == ["", ""]
    with pytest.raises(ConfigError, match="unknown policy 'nope'"):
        make_policy("nope")
    with pytest.raises(ConfigError, match="needs module"):
        make_policy("x", factories={"x": "taskforge.rl.no_such_module:make"})


# --- simulated --------------------------------------------------------------------------------------
def test_simulated_success_rate_follows_the_item_response_model() -> None:
    pol = SimulatedPolicy(PolicyOptions(seed=1, skill=2.0))
    p = pol.solve_probability(TASK)
    assert p == pytest.approx(1 / (1 + math.exp(-(2.0 - pol.latent_difficulty(TASK)))))
    patches = pol.propose(TASK, 4000)
    assert set(patches) == {TASK.patch, wrong_patch(TASK.patch)}
    assert sum(x == TASK.patch for x in patches) / 4000 == pytest.approx(p, abs=0.03)
    # Harder task, lower chance.
    assert pol.solve_probability(synthetic_task(3, 0.9)) < p


def test_simulated_learns_only_from_mixed_groups() -> None:
    pol = SimulatedPolicy(PolicyOptions(seed=0, skill=1.0, learning_rate=0.5))
    pol.update([_group(TASK, [1] * 8), _group(TASK, [0] * 8)])
    assert pol.skill == 1.0
    report = pol.update([_group(TASK, [1, 0, 0, 1, 0, 0, 0, 1])])
    assert pol.skill > 1.0 and report["skill"] == pol.skill
    assert report["loss"] != 0.0


def test_simulated_is_deterministic_and_resumable() -> None:
    a, b = SimulatedPolicy(PolicyOptions(seed=5)), SimulatedPolicy(PolicyOptions(seed=5))
    assert a.propose(TASK, 50) == b.propose(TASK, 50)
    state = json.loads(json.dumps(a.state_dict()))
    c = SimulatedPolicy(PolicyOptions(seed=99))
    c.load_state_dict(state)
    assert c.propose(TASK, 50) == a.propose(TASK, 50)


# --- command ----------------------------------------------------------------------------------------
AGENT = """
import os, sys
stmt = sys.stdin.read()
assert open(os.environ["TASKFORGE_PROBLEM_FILE"]).read() == stmt
task = open(os.environ["TASKFORGE_TASK_FILE"]).read()
assert "return math.floor" not in task, "the gold patch leaked to the agent"
print("thinking...")
print("```diff")
print(os.environ["GOLD"], end="")
print("```")
"""


def test_command_policy_reads_a_patch_from_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    monkeypatch.setenv("GOLD", TASK.patch)
    pol = make_policy("command", PolicyOptions(command=f"{sys.executable} {script}", timeout_s=30))
    assert pol.propose(TASK, 2) == [TASK.patch, TASK.patch]
    assert FakeGrader().grade([(TASK, pol.propose(TASK, 1)[0])])[0].reward == 1.0


def test_command_policy_timeout_kills_the_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    script = tmp_path / "slow.py"
    # The agent starts a grandchild that would write a marker after 3 s: killing the group stops both.
    script.write_text(f"import subprocess, sys, time\n"
                      f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3); "
                      f"open({str(marker)!r}, \"w\").write(\"x\")'])\n"
                      f"time.sleep(60)\n")
    pol = CommandPolicy(PolicyOptions(command=f"{sys.executable} {script}", timeout_s=1.0))
    t0 = time.monotonic()
    assert pol.propose(TASK, 1) == [""]
    assert time.monotonic() - t0 < 10
    assert pol.failures == 1
    time.sleep(3.5)
    assert not marker.exists()


def test_command_policy_failing_agent_gives_the_empty_patch_and_bad_command_is_an_error(tmp_path: Path) -> None:
    pol = CommandPolicy(PolicyOptions(command=f"{sys.executable} -c 'import sys; sys.exit(3)'"))
    assert pol.propose(TASK, 1) == [""] and pol.failures == 1
    with pytest.raises(ConfigError, match="needs a command"):
        CommandPolicy(PolicyOptions(command=""))
    with pytest.raises(ConfigError, match="cannot start agent command"):
        CommandPolicy(PolicyOptions(command=str(tmp_path / "missing-agent"))).propose(TASK, 1)


def test_command_policy_runs_in_the_workspace(tmp_path: Path) -> None:
    import contextlib

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "marker.txt").write_text(TASK.patch)

    @contextlib.contextmanager
    def provider(task) -> Iterator[Path]:
        yield ws

    opts = PolicyOptions(command=f"{sys.executable} -c \"import os; print(open('marker.txt').read(), end='')\"",
                         workspace=provider)
    assert CommandPolicy(opts).propose(TASK, 1) == [TASK.patch]


# --- openai-compatible endpoint ----------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    requests: list[dict] = []
    status = 200
    ignore_n = False

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
            return
        n = 1 if type(self).ignore_n else body.get("n", 1)
        answer = f"Sure.\n```diff\n{TASK.patch}```\n"
        payload = json.dumps({"choices": [{"index": i, "message": {"role": "assistant", "content": answer}}
                                          for i in range(n)]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"requests": [], "status": 200, "ignore_n": False})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_openai_policy_against_a_local_server(server, monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = server
    monkeypatch.setenv("TEST_KEY", "sk-test")
    pol = make_policy("openai", PolicyOptions(endpoint=url, model="tiny", api_key_env="TEST_KEY", timeout_s=10))
    assert pol.propose(TASK, 3) == [TASK.patch] * 3
    req = handler.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "tiny" and req["body"]["n"] == 3
    prompt = json.dumps(req["body"]["messages"])
    assert TASK.problem_statement in prompt and "math.floor" not in prompt  # no gold in the prompt


def test_openai_policy_asks_again_when_the_server_ignores_n(server) -> None:
    url, handler = server
    handler.ignore_n = True
    pol = OpenAIPolicy(PolicyOptions(endpoint=url, model="tiny", timeout_s=10))
    assert pol.propose(TASK, 3) == [TASK.patch] * 3
    assert len(handler.requests) == 3


def test_openai_policy_errors(server) -> None:
    url, handler = server
    handler.status = 401
    with pytest.raises(ConfigError, match="HTTP 401"):
        OpenAIPolicy(PolicyOptions(endpoint=url, model="m", timeout_s=10)).propose(TASK, 1)
    handler.status = 503
    pol = OpenAIPolicy(PolicyOptions(endpoint=url, model="m", timeout_s=10))
    assert pol.propose(TASK, 2) == ["", ""] and pol.failures == 1
    with pytest.raises(ConfigError, match="needs --endpoint"):
        OpenAIPolicy(PolicyOptions(model="m"))
    dead = dataclasses.replace(PolicyOptions(model="m", timeout_s=5), endpoint="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="cannot reach"):
        OpenAIPolicy(dead).propose(TASK, 1)


# --- an external agent, its workspace from the dataset, graded by the real reward path --------------------
SOLVER = '''
import difflib, os, pathlib
ws = pathlib.Path(os.environ["TASKFORGE_WORKSPACE"])
assert not (ws / "tests" / "test_shout.py").read_text().count("def test_shout("), "hidden tests visible"
src = (ws / "minilib" / "text.py").read_text()
fixed = src.replace("    raise NotImplementedError", '    return s.upper() + "!"', 1)
print("".join(difflib.unified_diff(src.splitlines(True), fixed.splitlines(True),
                                   "a/minilib/text.py", "b/minilib/text.py")), end="")
'''


@pytest.mark.slow
def test_command_agent_solves_a_real_task_through_the_reward_path(tmp_path: Path) -> None:
    from reward_fixtures import MINILIB, MINILIB_SPEC, build_stub_task, write_tree

    from sandboxes.fakes import SubprocessSandbox
    from taskforge.dataset import DatasetWriter
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees
    from taskforge.rl.grading import from_reward_result
    from taskforge.rl.policies import dataset_workspaces

    orig = write_tree(tmp_path / "orig", MINILIB)
    task = build_stub_task(orig, tmp_path, module="minilib/text.py", function="shout", spec=MINILIB_SPEC,
                           repo="minilib")
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        w.add_repo_archive("minilib", task.base_commit, orig)
        w.add(task)
    agent = tmp_path / "solver.py"
    agent.write_text(SOLVER)
    pol = make_policy("command", PolicyOptions(command=f"{sys.executable} {agent}", timeout_s=60,
                                               workspace=dataset_workspaces(root)))
    [patch] = pol.propose(task, 1)
    assert patch.startswith("--- a/minilib/text.py") and pol.failures == 0
    results = reward_many([(task, patch), (task, "")], sandbox=SubprocessSandbox(), trees=DatasetTrees(root))
    grades = [from_reward_result(r) for r in results]
    assert [g.reward for g in grades] == [1.0, 0.0], [r.detail for r in results]
