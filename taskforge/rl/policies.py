"""Policies: what proposes patches for a task. One protocol, several implementations.

``Policy.propose(task, n)`` returns ``n`` patches (unified diffs against the broken workspace; ``""`` is
the empty patch). ``update(groups)`` is the learning hook the loop calls after grading, with the graded
groups the step trains on; it returns metrics (``loss`` when the policy has one). ``state_dict`` /
``load_state_dict`` make a run resumable.

Built-ins (``POLICY_FACTORIES``; ``make_policy(name, options)`` builds one):

* ``oracle``: the gold patch; ``null``: the empty patch. They check the whole chain end to end.
* ``simulated``: **a simulation, not a model.** See ``SimulatedPolicy``.
* ``command``: an external agent run as a subprocess (``CommandPolicy``).
* ``openai``: an OpenAI-compatible chat-completions endpoint (``OpenAIPolicy``).
* ``hf``: a transformers causal LM trained with GRPO, in ``taskforge.rl.hf_policy`` (its own module).

To add a policy, add one ``name -> "module:factory"`` line to ``POLICY_FACTORIES``; the factory takes a
``PolicyOptions`` and is imported only when that policy is chosen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import math
import os
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from taskforge.errors import ConfigError
from taskforge.rl.grading import GradedGroup
from taskforge.rl.patches import extract_patch, wrong_patch
from taskforge.task import Task

WorkspaceProvider = Callable[[Task], contextlib.AbstractContextManager[Path]]


class Policy(Protocol):
    name: str

    def propose(self, task: Task, n: int) -> list[str]: ...

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Everything a policy factory may need; each policy reads its own fields, ``extra`` is free-form."""

    seed: int = 0
    # simulated
    skill: float = 0.0  # initial skill (logit scale)
    learning_rate: float = 0.1  # GRPO step size on the skill parameter
    difficulty_scale: float = 10.0  # item difficulty = scale * score + offset + noise
    difficulty_offset: float = -2.0
    difficulty_noise: float = 0.5  # std of the per-task deviation from the static score
    # command / openai
    command: str = ""  # external agent command line (split with shlex; no shell)
    endpoint: str = ""  # OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"  # name of the environment variable holding the key
    temperature: float = 1.0
    max_tokens: int = 4096
    timeout_s: float = 600.0  # per agent run / per request
    workspace: WorkspaceProvider | None = None  # materialises the broken workspace of a task
    extra: Mapping[str, str] = field(default_factory=dict)  # e.g. hf: model path, lr, ...


class _Stateless:
    name = "stateless"

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        return None


class OraclePolicy(_Stateless):
    """Always the gold patch: must score 1.0 through the real reward path."""

    name = "oracle"

    def propose(self, task: Task, n: int) -> list[str]:
        return [task.patch] * n


class NullPolicy(_Stateless):
    """Always the empty patch: must score 0.0 (the hidden tests fail on the broken workspace)."""

    name = "null"

    def propose(self, task: Task, n: int) -> list[str]:
        return [""] * n


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class SimulatedPolicy:
    """A SIMULATED learner for measuring curricula; it does not write code.

    Item-response model: task *i* has a latent difficulty ``b_i = scale * score_i + offset + e_i``
    (``e_i ~ N(0, noise)``, fixed per task and seed: the static score is an imperfect proxy), and the
    policy solves it with probability ``p_i = sigmoid(skill - b_i)``. On a success it returns the gold
    patch, on a failure a plausible *wrong* patch (the gold patch with its returned values replaced,
    else the empty patch), so the grader grades real patches.

    Learning is GRPO on the one parameter ``skill``: for every graded group the advantages are
    ``A_j = (r_j - mean r) / std r`` (zero for zero-variance groups), and
    ``skill += lr * mean_j(A_j * d log pi(y_j) / d skill)`` over all rollouts handed to ``update``
    (``d log p / d skill = 1 - p`` for a success, ``-p`` for a failure). In expectation a group adds
    ``lr * sqrt(p (1 - p))``: only mixed-outcome groups teach, most at ``p = 0.5``.
    """

    name = "simulated"

    def __init__(self, options: PolicyOptions | None = None) -> None:
        o = options or PolicyOptions()
        self.options = o
        self.skill = float(o.skill)
        self._rng = np.random.Generator(np.random.PCG64(o.seed))
        self._wrong: dict[str, str] = {}

    def latent_difficulty(self, task: Task) -> float:
        o = self.options
        digest = hashlib.sha256(f"{o.seed}:{task.instance_id}".encode()).digest()
        noise = float(np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "big"))).normal())
        return o.difficulty_scale * task.difficulty.score + o.difficulty_offset + o.difficulty_noise * noise

    def solve_probability(self, task: Task) -> float:
        return _sigmoid(self.skill - self.latent_difficulty(task))

    def propose(self, task: Task, n: int) -> list[str]:
        p = self.solve_probability(task)
        wrong = self._wrong.get(task.instance_id)
        if wrong is None:
            wrong = self._wrong[task.instance_id] = wrong_patch(task.patch)
        return [task.patch if u < p else wrong for u in self._rng.random(n)]

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        grad, loss, count = 0.0, 0.0, 0
        for g in groups:
            r = np.asarray(g.rewards, dtype=np.float64)
            count += len(r)
            if r.size == 0 or r.std() == 0:
                continue
            adv = (r - r.mean()) / r.std()
            p = min(max(self.solve_probability(g.task), 1e-9), 1 - 1e-9)
            dlogp = np.where(r >= 0.5, 1.0 - p, -p)
            logp = np.where(r >= 0.5, math.log(p), math.log(1.0 - p))
            grad += float((adv * dlogp).sum())
            loss -= float((adv * logp).sum())
        if count:
            self.skill += self.options.learning_rate * grad / count
        return {"loss": loss / count if count else 0.0, "skill": self.skill}

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "skill": self.skill, "seed": self.options.seed,
                "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # The seed fixes each task's latent difficulty: it is part of the learner, not just of its RNG.
        self.options = dataclasses.replace(self.options, seed=int(state["seed"]))
        self.skill = float(state["skill"])
        self._rng.bit_generator.state = state["rng"]


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
    """

    name = "command"

    def __init__(self, options: PolicyOptions) -> None:
        import shlex

        self.argv = shlex.split(options.command)
        if not self.argv:
            raise ConfigError("policy 'command' needs a command line (--command 'my-agent --flag'), got none")
        self.timeout_s = options.timeout_s
        self.workspace = options.workspace
        self.failures = 0

    def propose(self, task: Task, n: int) -> list[str]:
        return [self._run_once(task, j) for j in range(n)]

    def _run_once(self, task: Task, sample: int) -> str:
        with tempfile.TemporaryDirectory(prefix="taskforge-agent-") as tmp:
            problem = Path(tmp, "problem_statement.md")
            problem.write_text(task.problem_statement)
            task_file = Path(tmp, "task.json")
            task_file.write_text(_public_task_json(task))
            with (self.workspace(task) if self.workspace else contextlib.nullcontext(Path(tmp))) as ws:
                env = {**os.environ, "TASKFORGE_INSTANCE_ID": task.instance_id,
                       "TASKFORGE_PROBLEM_FILE": str(problem), "TASKFORGE_TASK_FILE": str(task_file),
                       "TASKFORGE_SAMPLE": str(sample)}
                if self.workspace:
                    env["TASKFORGE_WORKSPACE"] = str(ws)
                out = self._run(env, Path(ws), task.problem_statement)
        if out is None:
            self.failures += 1
            return ""
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


SYSTEM_PROMPT = ("You are an expert software engineer. A feature was removed from a repository; implement it. "
                 "Answer with a unified diff (git format, paths a/... b/...) against the repository, "
                 "inside one ```diff fenced block.")


class OpenAIPolicy(_Stateless):
    """An OpenAI-compatible chat-completions endpoint (``POST {endpoint}/chat/completions``).

    Asks for ``n`` choices per request (servers that ignore ``n`` are asked again until ``n`` answers
    came back) and extracts the patch from each answer. An unreachable endpoint or a 4xx answer is a
    run-level ``ConfigError``; a timeout or 5xx gives empty patches, counted in ``failures``.
    """

    name = "openai"

    def __init__(self, options: PolicyOptions) -> None:
        if not options.endpoint or not options.model:
            raise ConfigError("policy 'openai' needs --endpoint URL and --model NAME "
                              f"(got endpoint={options.endpoint!r}, model={options.model!r})")
        self.url = options.endpoint.rstrip("/") + "/chat/completions"
        self.model = options.model
        self.api_key = os.environ.get(options.api_key_env, "")
        self.temperature = options.temperature
        self.max_tokens = options.max_tokens
        self.timeout_s = options.timeout_s
        self.failures = 0

    def messages(self, task: Task) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Repository: {task.repo} ({task.version})\n\n{task.problem_statement}"}]

    def propose(self, task: Task, n: int) -> list[str]:
        answers: list[str] = []
        for _ in range(n):  # at most n requests (a server that ignores `n` answers one choice each)
            got = self._request(task, n - len(answers))
            if got is None:
                self.failures += 1
                break
            answers.extend(got)
            if len(answers) >= n:
                break
        patches = [extract_patch(a) for a in answers[:n]]
        return patches + [""] * (n - len(patches))

    def _request(self, task: Task, n: int) -> list[str] | None:
        body = json.dumps({"model": self.model, "messages": self.messages(task), "n": n,
                           "temperature": self.temperature, "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise ConfigError(f"endpoint {self.url} answered HTTP {exc.code} ({exc.reason}); "
                                  "check --model and the API key variable") from exc
            return None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                return None
            raise ConfigError(f"cannot reach {self.url} ({exc.reason}); check --endpoint") from exc
        except (TimeoutError, json.JSONDecodeError):
            return None
        choices = payload.get("choices") or []
        return [str((c.get("message") or {}).get("content") or "") for c in choices] or None

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        return {"endpoint_failures": float(self.failures)}


def dataset_workspaces(dataset_dir: str | Path) -> WorkspaceProvider:
    """A workspace provider that rebuilds a task's broken workspace from the dataset's repo archive."""
    from taskforge.dataset import Dataset

    ds = Dataset.open(dataset_dir, verify=False)

    @contextlib.contextmanager
    def provide(task: Task) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="taskforge-ws-") as tmp:
            yield ds.broken_workspace(task, Path(tmp) / "workspace")

    return provide


def _oracle(options: PolicyOptions) -> Policy:
    return OraclePolicy()


def _null(options: PolicyOptions) -> Policy:
    return NullPolicy()


def _simulated(options: PolicyOptions) -> Policy:
    return SimulatedPolicy(options)


def _command(options: PolicyOptions) -> Policy:
    return CommandPolicy(options)


def _openai(options: PolicyOptions) -> Policy:
    return OpenAIPolicy(options)


# name -> "module:factory"; factories take PolicyOptions. Imported only when chosen (hf needs torch).
POLICY_FACTORIES: Mapping[str, str] = {
    "oracle": "taskforge.rl.policies:_oracle",
    "null": "taskforge.rl.policies:_null",
    "simulated": "taskforge.rl.policies:_simulated",
    "command": "taskforge.rl.policies:_command",
    "openai": "taskforge.rl.policies:_openai",
    "hf": "taskforge.rl.hf_policy:make_policy",
}


def make_policy(name: str, options: PolicyOptions | None = None,
                factories: Mapping[str, str] = POLICY_FACTORIES) -> Policy:
    """Build the policy registered under ``name``."""
    target = factories.get(name)
    if target is None:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(sorted(factories))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"policy {name!r} needs module {module_name} ({exc}); install taskforge[rl]") from exc
    factory: Callable[[PolicyOptions], Policy] = getattr(module, attr)
    return factory(options or PolicyOptions())
