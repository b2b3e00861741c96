"""``command``: an external agent run as a subprocess, once per sample; it prints a patch."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from taskforge.agent.episode import EndReason, EpisodeRecord
from taskforge.core.errors import ConfigError
from taskforge.core.task import Task
from taskforge.rl.answer_patch import extract_patch
from taskforge.rl.grading import GradedGroup
from taskforge.rl.policies.base import PolicyOptions, WorkspaceProvider, _Stateless


@contextlib.contextmanager
def _existing(path: Path, task: Task) -> Iterator[Path]:
    yield path  # a workspace provider over a directory that exists already (the session's)


def _public_task_json(task: Task) -> str:
    """What an external agent may see: no gold patch, no hidden tests, no setup patch (it holds the code)."""
    return json.dumps({"instance_id": task.instance_id, "repo": task.repo, "source": task.source,
                       "base_commit": task.base_commit, "version": task.version,
                       "problem_statement": task.problem_statement}, indent=2)


class CommandPolicy(_Stateless):
    """An external agent: a command run once per sample, which prints a patch on stdout.

    The command gets the problem statement on stdin and in ``$TASKFORGE_PROBLEM_FILE``, the public task
    fields as JSON in ``$TASKFORGE_TASK_FILE``, the sample number in ``$TASKFORGE_SAMPLE``, and, when a
    workspace provider is configured, the broken workspace as its working directory and in
    ``$TASKFORGE_WORKSPACE``. A run that times out (its whole process group is killed) or exits non-zero
    gives the empty patch; ``failures`` counts them.

    With a session factory (``PolicyOptions.sessions``, a local session: the agent needs the workspace on
    this host) the agent works in the session's workspace, and its patch is the session's diff unless it
    printed one; each run leaves an ``EpisodeRecord`` (``drain_episodes``). The command itself runs on the
    host, as the harness it is; what it executes should go through the session's sandbox.
    """

    name = "command"

    def __init__(self, options: PolicyOptions) -> None:
        import shlex

        self.argv = shlex.split(options.command)
        if not self.argv:
            raise ConfigError("policy 'command' needs a command line (--command 'my-agent --flag'), got none")
        self.timeout_s = options.timeout_s
        self.workspace = options.workspace
        self.sessions = options.sessions
        self.failures = 0
        self.episodes: list[EpisodeRecord] = []

    def propose(self, task: Task, n: int) -> list[str]:
        if self.sessions is not None:
            return [self._run_in_session(task, j) for j in range(n)]
        return [self._run_once(task, j) or "" for j in range(n)]

    def _run_in_session(self, task: Task, sample: int) -> str:
        assert self.sessions is not None
        start = time.monotonic()
        with self.sessions(task) as session:
            if session.workspace is None:
                raise ConfigError("policy 'command' needs a session whose workspace is on this host "
                                  "(--session-backend local), got one inside a container")
            provider = functools.partial(_existing, Path(session.workspace))
            out = self._run_once(task, sample, provider)
            patch = "" if out is None else out or session.diff()
        failed = out is None
        record = EpisodeRecord(task.instance_id, sample, EndReason.ERROR if failed else EndReason.FINISHED,
                               wall_s=round(time.monotonic() - start, 3), patch_chars=len(patch),
                               detail="the agent command timed out or exited non-zero" if failed else "")
        self.episodes.append(record)
        return patch

    def drain_episodes(self) -> list[EpisodeRecord]:
        """The records of the runs since the last call (the loop puts them in the training log)."""
        out, self.episodes = self.episodes, []
        return out

    def _run_once(self, task: Task, sample: int, workspace: WorkspaceProvider | None = None) -> str | None:
        """The patch the agent printed ('' when none); None (counted in ``failures``) when the run failed."""
        workspace = workspace or self.workspace
        with tempfile.TemporaryDirectory(prefix="taskforge-agent-") as tmp:
            problem = Path(tmp, "problem_statement.md")
            problem.write_text(task.problem_statement)
            task_file = Path(tmp, "task.json")
            task_file.write_text(_public_task_json(task))
            with (workspace(task) if workspace else contextlib.nullcontext(Path(tmp))) as ws:
                env = {**os.environ, "TASKFORGE_INSTANCE_ID": task.instance_id,
                       "TASKFORGE_PROBLEM_FILE": str(problem), "TASKFORGE_TASK_FILE": str(task_file),
                       "TASKFORGE_SAMPLE": str(sample)}
                if workspace:
                    env["TASKFORGE_WORKSPACE"] = str(ws)
                out = self._run(env, Path(ws), task.problem_statement)
        if out is None:
            self.failures += 1
            return None
        return extract_patch(out)

    def _run(self, env: dict[str, str], cwd: Path, stdin: str) -> str | None:
        try:
            proc = subprocess.Popen(self.argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        except OSError as exc:
            raise ConfigError(f"cannot start agent command {self.argv[0]!r} ({exc}); check --command") from exc
        try:
            out, _ = proc.communicate(stdin, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return out if proc.returncode == 0 else None

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        return {"agent_failures": float(self.failures)}


def make_command(options: PolicyOptions) -> CommandPolicy:
    return CommandPolicy(options)
