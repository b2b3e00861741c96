"""Multi-turn episodes of a transformers causal LM against a ``Session``, and the ``hf`` episode policy.

Chat format: ChatML (``<|im_start|>role\\n...<|im_end|>\\n``), applied with the tokenizer's chat template
(``chat_tokenizer`` adds the two special tokens and the template to the tiny byte tokenizer of
``taskforge.rl.policies.hf``; a local model directory brings its own). The model calls a tool by writing
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the Hermes/Qwen convention); its turn ends
at ``<|im_end|>`` (or eos). The observation comes back as a ``tool`` message.

One episode (``run_episode``):

    context = template(system + task statement) + "<|im_start|>assistant\\n"
    repeat up to max_turns:
        sample a turn (temperature, top_p; the sampling logprob of every token is kept)
        parse the tool call; execute it in the session (or a structured error when there is none)
        detector -> hint for this turn (feedback on) ; submit -> stop
        context += "<|im_end|>\\n" + template(tool message) + "<|im_start|>assistant\\n"
    patch = session.diff()       # graded by the loop's grader in a fresh sandbox, never here

Why an episode ended is recorded (``submitted``, ``max_turns``, ``token_budget``, ``wall_clock``).
``HFEpisodePolicy`` is the ``hf`` policy with ``episodes=1``: ``propose`` runs G episodes per task and
returns their diffs; ``update`` turns the graded groups into ``Trajectory`` values (reward = grade) and
takes one ``TrajectoryTrainer.step_trajectories``; its checkpoint is the ``hf`` policy's.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from taskforge.agent.fake_session import TOOL_NAMES, FakeSession
from taskforge.agent.feedback_tools import diagnose_turn
from taskforge.agent.protocol import Observation, Session, ToolCall, ToolError
from taskforge.agent.trajectory import Trajectory, TrajectoryTrainer, Turn
from taskforge.core.errors import ConfigError
from taskforge.core.task import Task
from taskforge.rl.feedback import Hint
from taskforge.rl.grading import GradedGroup
from taskforge.rl.policies import PolicyOptions, WorkspaceProvider
from taskforge.rl.policies.hf import IM_END, HFConfig, HFPolicy

SYSTEM = ("You fix a Python repository by calling tools. Reply with exactly one call per turn: "
          '<tool_call>{"name": TOOL, "arguments": {...}}</tool_call>. Call submit when done.')
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')
SessionFactory = Callable[[Task], Session]


def episode_sessions(options: PolicyOptions, workspace: WorkspaceProvider | None) -> SessionFactory:
    """The sessions episodes run in: ``options.sessions`` (a live, jailed session per episode, e.g.
    ``taskforge.agent.environments.dataset_sessions``) when the caller gives one, else a ``FakeSession``
    over the task's broken workspace (unconfined: for tiny or scripted models only)."""
    live = getattr(options, "sessions", None)
    if live is not None:
        return live  # type: ignore[no-any-return]
    if workspace is None:
        raise ConfigError("hf episodes need the tasks' workspaces: pass a dataset (taskforge train DATASET, or "
                          "--policy-opt dataset=DIR) or a session factory")
    provider = workspace

    def fake(task: Task) -> Session:
        with provider(task) as root:
            return FakeSession(task, root)

    return fake


def parse_tool_call(text: str) -> ToolCall | Observation:
    """The tool call in a model turn, or a ``BAD_JSON`` observation saying how to write one."""
    m = _CALL.search(text)
    if m is None:
        return Observation('no tool call found; reply with <tool_call>{"name": "bash", "arguments": '
                           '{"command": "ls"}}</tool_call>', -1, error=ToolError.BAD_JSON)
    body = m.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        name = _NAME.search(body)
        if name is None:
            return Observation(f"the tool call is not valid JSON: {body[:200]!r}", -1, error=ToolError.BAD_JSON)
        return ToolCall(name.group(1), body)  # the session answers BAD_JSON (or UNKNOWN_TOOL) for it
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return Observation('a tool call is {"name": ..., "arguments": {...}}', -1, error=ToolError.BAD_JSON)
    args = data.get("arguments", {})
    return ToolCall(data["name"], args if isinstance(args, str) else json.dumps(args))


@dataclass(frozen=True, slots=True)
class EpisodeTurn:
    """What happened in one turn (for the record and the detectors); tokens are in ``Turn``."""

    text: str
    call: ToolCall | None
    observation: Observation
    hint: Hint | None = None


@dataclass(frozen=True, slots=True)
class Episode:
    turns: tuple[Turn, ...]
    record: tuple[EpisodeTurn, ...]
    patch: str
    end_reason: str
    seconds: float

    def mistakes(self) -> Counter[str]:
        """Detector kind -> turns it fired on (whether or not feedback was on)."""
        return Counter(t.hint.kind for t in self.record if t.hint is not None)


@dataclass(frozen=True, slots=True)
class EpisodeConfig:
    max_turns: int = 8
    max_new_tokens: int = 96
    max_context_tokens: int = 2048
    max_obs_chars: int = 1000
    wall_clock_s: float = 300.0
    temperature: float = 1.0
    top_p: float = 1.0
    feedback: bool = True
    system: str = SYSTEM
    prefill: str = ""  # text put after each assistant header (context, mask 0), e.g. '<tool_call>{"name": "'
    suffix: str = ""  # text the scaffold closes each turn with before parsing, e.g. '"}</tool_call>'
    tool_names: tuple[str, ...] = field(default_factory=lambda: TOOL_NAMES)


def _encode(tokenizer: Any, text: str) -> tuple[int, ...]:
    return tuple(tokenizer(text, add_special_tokens=False)["input_ids"])


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool = True) -> str:
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt))


def sample_turn(model: Any, context: Sequence[int], config: EpisodeConfig, stop_ids: Sequence[int],
                pad_id: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Sampled token ids of one turn (up to and including a stop token) and their sampling logprobs."""
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([list(context)], device=device),
                             attention_mask=torch.ones(1, len(context), dtype=torch.long, device=device),
                             do_sample=True, temperature=config.temperature, top_p=config.top_p, top_k=0,
                             max_new_tokens=config.max_new_tokens, pad_token_id=pad_id, eos_token_id=list(stop_ids),
                             output_scores=True, return_dict_in_generate=True)
    new = out.sequences[0, len(context):].tolist()
    ids: list[int] = []
    lps: list[float] = []
    for tok, scores in zip(new, out.scores, strict=False):
        if tok == pad_id and tok not in stop_ids:
            break
        ids.append(tok)
        lps.append(float(torch.log_softmax(scores[0].float(), -1)[tok]))
        if tok in stop_ids:
            break
    return tuple(ids), tuple(lps)


def run_episode(model: Any, tokenizer: Any, session: Session, config: EpisodeConfig,
                sampler: Callable[[Sequence[int]], tuple[tuple[int, ...], tuple[float, ...]]] | None = None) -> Episode:
    """One episode in ``session`` (module doc); the session is not closed here."""
    t0 = time.perf_counter()
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    stop_ids = [i for i in (im_end, tokenizer.eos_token_id) if isinstance(i, int) and i >= 0]
    pad_id = int(tokenizer.pad_token_id)
    sample = sampler or (lambda ctx: sample_turn(model, ctx, config, stop_ids, pad_id))
    statement = session.task.problem_statement.strip()
    pending = _encode(tokenizer, _render(tokenizer, [{"role": "system", "content": config.system},
                                                     {"role": "user", "content": statement}]) + config.prefill)
    length = 0
    turns: list[Turn] = []
    record: list[EpisodeTurn] = []
    reason = "max_turns"
    for _ in range(config.max_turns):
        if time.perf_counter() - t0 > config.wall_clock_s:
            reason = "wall_clock"
            break
        if length + len(pending) + config.max_new_tokens > config.max_context_tokens:
            reason = "token_budget"
            break
        context = tuple(t for turn in turns for t in turn.context_ids + turn.model_ids) + pending
        ids, lps = sample(context)
        text = config.prefill + tokenizer.decode([i for i in ids if i not in stop_ids],
                                                 skip_special_tokens=False) + config.suffix
        parsed = parse_tool_call(text)
        call: ToolCall | None = None
        if isinstance(parsed, ToolCall):
            call, obs = parsed, session.execute(parsed)
        else:
            obs = parsed
        hint = diagnose_turn(call or ToolCall("", text), obs, config.tool_names, session.workspace)
        hint_ids = _encode(tokenizer, f"{hint.text}\n") if hint is not None and config.feedback else ()
        turns.append(Turn(pending, ids, lps, hint_ids, hint.kind if hint is not None else ""))
        record.append(EpisodeTurn(text, call, obs, hint))
        length += len(pending) + len(ids)
        if obs.submitted:
            reason = "submitted"
            break
        closing = "" if ids and ids[-1] in stop_ids else IM_END
        shown = obs.output[:config.max_obs_chars]
        pending = _encode(tokenizer, closing + "\n" + _render(tokenizer, [{"role": "tool", "content": shown}])
                          + config.prefill)
    return Episode(tuple(turns), tuple(record), session.diff(), reason, time.perf_counter() - t0)


class HFEpisodePolicy(HFPolicy):
    """The ``hf`` policy in multi-turn mode (``--policy-opt episodes=1``; module doc)."""

    def __init__(self, model: Any, tokenizer: Any, config: HFConfig, sessions: SessionFactory) -> None:
        super().__init__(model, tokenizer, config, None)
        self.sessions = sessions
        self.trajectory_trainer = TrajectoryTrainer(model, self.pad_id, config.trainer_config())
        self.trainer = self.trajectory_trainer  # the hf policy's checkpoint saves this optimizer
        self.episode_config = EpisodeConfig(
            max_turns=config.max_turns, max_new_tokens=config.max_new_tokens,
            max_context_tokens=config.max_context_tokens if config.model_path else min(config.max_context_tokens,
                                                                                       config.max_positions),
            max_obs_chars=config.max_obs_chars,
            wall_clock_s=config.episode_wall_s, temperature=config.temperature, top_p=config.top_p,
            feedback=config.feedback)
        self._episodes: dict[str, list[Episode]] = {}

    def propose(self, task: Task, n: int) -> list[str]:
        out = []
        for _ in range(n):
            with self.sessions(task) as session:
                episode = run_episode(self.model, self.tokenizer, session, self.episode_config)
            self._episodes.setdefault(task.instance_id, []).append(episode)
            out.append(episode.patch)
        return out

    def trajectories(self, groups: Sequence[GradedGroup]) -> tuple[list[Trajectory], list[Episode]]:
        trajs, episodes = [], []
        for gi, group in enumerate(groups):
            pool = self._episodes.get(group.task.instance_id, [])
            for patch, grade in zip(group.patches, group.grades, strict=False):
                k = next((i for i, e in enumerate(pool) if e.patch == patch), None)
                if k is None:
                    continue  # proposed before a resume
                ep = pool.pop(k)
                episodes.append(ep)
                trajs.append(Trajectory(gi, ep.turns, float(grade.reward)))
        return trajs, episodes

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        trajs, episodes = self.trajectories(groups)
        self._episodes.clear()
        report = episode_metrics(episodes)
        if not any(t.model_tokens for t in trajs):
            return {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "rollouts": 0.0, **report}
        stats = self.trajectory_trainer.step_trajectories(trajs)
        self.updates += 1
        return {**stats.to_dict(), "rollouts": float(len(trajs)), **report}


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Per-turn mistake rates by detector kind, mean turns, and end reasons (as floats for the log)."""
    turns = sum(len(e.record) for e in episodes)
    mistakes: Counter[str] = Counter()
    for e in episodes:
        mistakes.update(e.mistakes())
    out = {"episodes": float(len(episodes)), "turns_per_episode": turns / len(episodes) if episodes else 0.0}
    out.update({f"rate_{k}": v / max(turns, 1) for k, v in sorted(mistakes.items())})
    out.update({f"end_{k}": float(v) for k, v in sorted(Counter(e.end_reason for e in episodes).items())})
    return out
