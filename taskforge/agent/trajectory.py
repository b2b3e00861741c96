"""Token-level trajectories of multi-turn episodes, and GRPO (+ turn-local feedback KL) over them.

A trajectory is a sequence of turns. Each turn adds *context* tokens (the system/user prompt on the first
turn, then the rendered tool observation and the next assistant header) and the *model* tokens the policy
sampled, with their sampling log-probabilities. The loss mask is 1 on model tokens and 0 on every context
token, so observations (which the environment wrote, not the model) never receive gradient.

    A_j      = group_advantages(rewards of the G trajectories of one task)      # taskforge.rl.grpo
    pg_loss  = token-level clipped PG over the model tokens of all trajectories, A_j broadcast over them
    teacher  = model(context up to turn k + hint_k + model tokens of turn k)      # hinted turns only
    kl       = exact reverse KL(student || teacher) on turn k's model tokens     # taskforge.rl.feedback
    loss     = pg_loss + kl_coef * kl

The teacher of a hinted turn sees the full history before that turn, then the one-line hint, then the
same sampled tokens; the KL is computed on those tokens only (``feedback_kl``), so the hint touches the
context of that turn and no other. Each hinted turn is one teacher row (no grad). The teacher is the
current weights by default (the reference's "same model with the hint"); ``teacher`` may be set to a
frozen snapshot instead, which keeps the hint's effect from being distilled away as the weights move. Rewards are per
trajectory (the grader's reward of the final ``diff``), never per turn.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from taskforge.rl.feedback import feedback_kl
from taskforge.rl.grpo import (
    TokenBatch,
    forward_logits,
    group_advantages,
    grpo_loss,
    segment_batch,
    token_logprobs,
)
from taskforge.rl.trainer import GRPOTrainer, StepStats


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn: context tokens (loss mask 0), then sampled model tokens (mask 1) with their logprobs."""

    context_ids: tuple[int, ...]
    model_ids: tuple[int, ...]
    logprobs: tuple[float, ...] = ()  # sampling log-probability of each model token (may be empty)
    hint_ids: tuple[int, ...] = ()  # feedback hint for the teacher of this turn; () = none
    hint_kind: str = ""

    def __post_init__(self) -> None:
        if self.logprobs and len(self.logprobs) != len(self.model_ids):
            raise ValueError(f"turn has {len(self.model_ids)} model tokens but {len(self.logprobs)} logprobs")


@dataclass(frozen=True, slots=True)
class Trajectory:
    """The turns of one episode, its reward, and its group (the G episodes of one task share a baseline)."""

    group: int
    turns: tuple[Turn, ...]
    reward: float

    def segments(self) -> list[tuple[tuple[int, ...], bool]]:
        out: list[tuple[tuple[int, ...], bool]] = []
        for t in self.turns:
            out += [(t.context_ids, False), (t.model_ids, True)]
        return out

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(i for seg, _ in self.segments() for i in seg)

    @property
    def loss_mask(self) -> tuple[int, ...]:
        return tuple(int(trained) for seg, trained in self.segments() for _ in seg)

    @property
    def sampling_logprobs(self) -> tuple[float, ...]:
        """Aligned with ``token_ids``: the sampling logprob on model tokens, 0.0 on context tokens."""
        out: list[float] = []
        for t in self.turns:
            out += [0.0] * len(t.context_ids)
            out += list(t.logprobs) if t.logprobs else [0.0] * len(t.model_ids)
        return tuple(out)

    @property
    def model_tokens(self) -> int:
        return sum(len(t.model_ids) for t in self.turns)

    def teacher_rows(self) -> list[tuple[list[tuple[tuple[int, ...], bool]], list[tuple[tuple[int, ...], bool]]]]:
        """For each hinted turn k: (student row, teacher row) as segments; only turn k's tokens are marked.

        The student row is the trajectory up to and including turn k's model tokens; the teacher row
        is the same with the hint between turn k's context and its model tokens.
        """
        rows = []
        prefix: list[tuple[tuple[int, ...], bool]] = []
        for t in self.turns:
            if t.hint_ids and t.model_ids:
                rows.append((prefix + [(t.context_ids, False), (t.model_ids, True)],
                             prefix + [(t.context_ids, False), (t.hint_ids, False), (t.model_ids, True)]))
            prefix = prefix + [(t.context_ids, False), (t.model_ids, False)]
        return rows


def trajectory_advantages(trajectories: Sequence[Trajectory]) -> torch.Tensor:
    """``(B,)``: group-normalised reward of each trajectory within its group."""
    out = torch.zeros(len(trajectories))
    groups: dict[int, list[int]] = {}
    for i, tr in enumerate(trajectories):
        groups.setdefault(tr.group, []).append(i)
    for idx in groups.values():
        out[idx] = group_advantages(torch.tensor([trajectories[i].reward for i in idx]))
    return out


def trajectory_batch(trajectories: Sequence[Trajectory], pad_id: int, device: torch.device | str = "cpu") -> TokenBatch:
    return segment_batch([tr.segments() for tr in trajectories], pad_id, device)


def sampling_logprobs_batch(trajectories: Sequence[Trajectory], width: int) -> torch.Tensor:
    """``(B, width-1)`` aligned with ``token_logprobs``: old logprobs for the importance ratio."""
    out = torch.zeros(len(trajectories), max(width - 1, 0))
    for i, tr in enumerate(trajectories):
        lp = tr.sampling_logprobs[1:]
        out[i, :len(lp)] = torch.tensor(lp)
    return out


class TrajectoryTrainer(GRPOTrainer):
    """``GRPOTrainer`` (optimizer, config, device) with a step over whole multi-turn trajectories.

    ``use_sampling_logprobs``: take the recorded sampling logprobs as ``old_logprobs`` (the PPO ratio
    then measures the drift between the sampler and the trained weights); off by default, which gives
    the exact REINFORCE-with-group-baseline gradient as in ``taskforge.rl.grpo``.
    """

    use_sampling_logprobs: bool = False
    teacher: torch.nn.Module | None = None  # None: the current weights (self-distillation); else a frozen model

    def step_trajectories(self, trajectories: Sequence[Trajectory]) -> StepStats:
        t0 = time.perf_counter()
        cfg = self.config
        trajs = [tr for tr in trajectories if tr.model_tokens]
        if not trajs:
            raise ValueError("step_trajectories needs at least one trajectory with model tokens")
        adv = trajectory_advantages(trajs)
        total_tokens = sum(tr.model_tokens for tr in trajs)
        pairs = [(i, s, t) for i, tr in enumerate(trajs) for s, t in tr.teacher_rows()]
        hinted_tokens = sum(sum(len(seg) for seg, m in s if m) for _, s, _ in pairs)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        pg_sum = kl_sum = clip_sum = 0.0
        for start in range(0, len(trajs), cfg.micro_batch):
            chunk = trajs[start:start + cfg.micro_batch]
            batch = trajectory_batch(chunk, self.pad_id, self.device)
            logits = forward_logits(self.model, batch)
            old = (sampling_logprobs_batch(chunk, batch.input_ids.shape[1]).to(self.device)
                   if self.use_sampling_logprobs else None)
            pg = grpo_loss(token_logprobs(logits, batch.input_ids), adv[start:start + len(chunk)].to(self.device),
                           batch.completion_mask[:, 1:], old_logprobs=old, clip_eps=cfg.clip_eps)
            weight = pg.tokens / max(total_tokens, 1)
            loss = pg.loss * weight
            pg_sum += float(pg.loss.detach()) * weight
            clip_sum += pg.clip_fraction * weight
            loss.backward()
        if pairs and cfg.kl_coef > 0:
            for start in range(0, len(pairs), cfg.micro_batch):
                chunk_pairs = pairs[start:start + cfg.micro_batch]
                student = segment_batch([s for _, s, _ in chunk_pairs], self.pad_id, self.device)
                teacher = segment_batch([t for _, _, t in chunk_pairs], self.pad_id, self.device)
                with torch.no_grad():
                    teacher_logits = forward_logits(self.teacher or self.model, teacher)
                kl = feedback_kl(forward_logits(self.model, student), student.completion_mask, teacher_logits,
                                 teacher.completion_mask)
                kl_weight = kl.tokens / max(hinted_tokens, 1)
                (cfg.kl_coef * kl.mean * kl_weight).backward()
                kl_sum += float(kl.mean.detach()) * kl_weight
        grad_norm = self._clip_and_step()
        return StepStats(pg_sum + cfg.kl_coef * kl_sum, pg_sum, kl_sum, len(pairs), total_tokens, clip_sum,
                         grad_norm, time.perf_counter() - t0)

    def _clip_and_step(self) -> float:
        params = [p for p in self.model.parameters() if p.grad is not None]
        limit = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, limit)) if params else 0.0
        self.optimizer.step()
        self.steps += 1
        return grad_norm
