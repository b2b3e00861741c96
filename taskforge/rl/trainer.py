"""One GRPO (+ feedback KL) optimisation step on token rollouts: rollouts -> advantages -> loss -> step.

    advantages = group_advantages(rewards of each task's G rollouts)           # taskforge.rl.grpo
    logits     = model(prompt + completion)                                     # one forward, with grad
    pg_loss    = token-level clipped policy gradient on completion tokens
    teacher    = model(prompt + hint + completion) under no_grad, hinted rollouts only  # one extra forward
    kl         = exact reverse KL(student || teacher) on the completion tokens  # taskforge.rl.feedback
    loss       = pg_loss + kl_coef * kl ;  clip grad norm ;  optimizer.step()   # Muon or AdamW

``GRPOTrainer`` is independent of tasks, patches and grading: the ``hf`` policy turns graded groups into
``TokenRollout`` values and calls ``step``. Rollouts are processed in micro-batches of
``micro_batch`` sequences whose gradients accumulate (the token-level normalisation uses the token count
of the whole step, so micro-batching does not change the loss).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from taskforge.core.errors import ConfigError
from taskforge.rl.feedback import FeedbackKL, feedback_kl
from taskforge.rl.grpo import TokenBatch, forward_logits, group_advantages, grpo_loss, token_logprobs
from taskforge.rl.muon import OPTIMIZERS, make_optimizer


@dataclass(frozen=True, slots=True)
class TokenRollout:
    """One sampled completion, as tokens, with its reward and (optionally) a feedback hint."""

    group: int  # rollouts with the same group share a baseline (the G samples of one task)
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    reward: float
    hint_ids: tuple[int, ...] = ()  # inserted between prompt and completion for the teacher; () = no hint


@dataclass(frozen=True, slots=True)
class TrainerConfig:
    optimizer: str = "muon"  # muon | adamw
    lr: float = 1e-3  # Muon's RMS-matched scale lets AdamW and Muon share this learning rate
    weight_decay: float = 0.0
    kl_coef: float = 0.1  # weight of the feedback KL
    clip_eps: float = 0.2
    max_grad_norm: float = 1.0  # 0 = no clipping
    micro_batch: int = 8

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; expected one of {', '.join(OPTIMIZERS)}")
        if self.lr <= 0 or self.kl_coef < 0 or self.micro_batch < 1:
            raise ConfigError(f"trainer needs lr > 0, kl_coef >= 0, micro_batch >= 1; got lr={self.lr}, "
                              f"kl_coef={self.kl_coef}, micro_batch={self.micro_batch}")


@dataclass(frozen=True, slots=True)
class StepStats:
    loss: float
    pg_loss: float
    kl: float  # mean feedback KL over hinted completion tokens (0 without hints)
    hinted: int  # rollouts that had a hint
    tokens: int  # completion tokens trained on
    clip_fraction: float
    grad_norm: float
    seconds: float

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


class GRPOTrainer:
    def __init__(self, model: nn.Module, pad_id: int, config: TrainerConfig | None = None,
                 optimizer: torch.optim.Optimizer | None = None) -> None:
        self.model = model
        self.pad_id = pad_id
        self.config = config or TrainerConfig()
        self.optimizer = optimizer or make_optimizer(self.config.optimizer, model, lr=self.config.lr,
                                                     weight_decay=self.config.weight_decay)
        self.steps = 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def step(self, rollouts: Sequence[TokenRollout]) -> StepStats:
        t0 = time.perf_counter()
        cfg = self.config
        if not rollouts:
            raise ValueError("GRPOTrainer.step needs at least one rollout")
        adv = _advantages(rollouts)
        total_tokens = sum(len(r.completion_ids) for r in rollouts)
        hinted_tokens = sum(len(r.completion_ids) for r in rollouts if r.hint_ids)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        pg_sum = kl_sum = clip_sum = 0.0
        for start in range(0, len(rollouts), cfg.micro_batch):
            chunk = rollouts[start:start + cfg.micro_batch]
            batch = TokenBatch.build([r.prompt_ids for r in chunk], [r.completion_ids for r in chunk],
                                     self.pad_id, self.device)
            logits = forward_logits(self.model, batch)
            mask = batch.completion_mask[:, 1:]
            pg = grpo_loss(token_logprobs(logits, batch.input_ids), adv[start:start + len(chunk)].to(self.device),
                           mask, clip_eps=cfg.clip_eps)
            weight = pg.tokens / max(total_tokens, 1)  # token-level mean over the whole step
            loss = pg.loss * weight
            pg_sum += float(pg.loss.detach()) * weight
            clip_sum += pg.clip_fraction * weight
            hinted = [i for i, r in enumerate(chunk) if r.hint_ids]
            if hinted and cfg.kl_coef > 0:
                kl = self._feedback_kl(logits, batch, [chunk[i] for i in hinted], hinted)
                kl_weight = kl.tokens / max(hinted_tokens, 1)
                loss = loss + cfg.kl_coef * kl.mean * kl_weight
                kl_sum += float(kl.mean.detach()) * kl_weight
            loss.backward()
        params = [p for p in self.model.parameters() if p.grad is not None]
        # clip_grad_norm_ with max_norm=inf only measures the norm
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm if cfg.max_grad_norm > 0
                                                         else float("inf"))) if params else 0.0
        self.optimizer.step()
        self.steps += 1
        n_hinted = sum(1 for r in rollouts if r.hint_ids)
        return StepStats(pg_sum + cfg.kl_coef * kl_sum, pg_sum, kl_sum, n_hinted, total_tokens, clip_sum,
                         grad_norm, time.perf_counter() - t0)

    def _feedback_kl(self, logits: torch.Tensor, batch: TokenBatch, hinted: Sequence[TokenRollout],
                     rows: Sequence[int]) -> FeedbackKL:
        teacher = TokenBatch.build([r.prompt_ids + r.hint_ids for r in hinted], [r.completion_ids for r in hinted],
                                   self.pad_id, self.device)
        with torch.no_grad():
            teacher_logits = forward_logits(self.model, teacher)
        idx = torch.tensor(list(rows), device=self.device)
        return feedback_kl(logits[idx], batch.completion_mask[idx], teacher_logits, teacher.completion_mask)


def _advantages(rollouts: Sequence[TokenRollout]) -> torch.Tensor:
    out = torch.zeros(len(rollouts))
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(rollouts):
        groups.setdefault(r.group, []).append(i)
    for idx in groups.values():
        out[idx] = group_advantages(torch.tensor([rollouts[i].reward for i in idx]))
    return out
