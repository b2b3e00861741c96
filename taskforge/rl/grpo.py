"""GRPO objective (Shao et al. 2024, DeepSeekMath) for a causal LM: no value model, group baselines.

For a task, G completions ``y_1..y_G`` of one prompt get rewards ``r_1..r_G``. The advantage of every
token of ``y_j`` is the group-normalised reward ``A_j = (r_j - mean r) / (std r + eps)`` (zero when all
G rewards are equal: such a group teaches nothing). The loss is token-level (DAPO, Yu et al. 2025: every
completion token of the batch weighs the same, so long completions are not down-weighted):

    ratio_t = exp(logp_t - old_logp_t)
    loss    = - sum_t mask_t * min(ratio_t * A, clip(ratio_t, 1 - eps, 1 + eps) * A) / sum_t mask_t

``mask`` is 1 on completion tokens and 0 on the prompt and on padding. Without ``old_logprobs`` (one
gradient step per batch of rollouts, the default) ``old = logp.detach()``: the ratio is 1, the clip never
binds, and the gradient is exactly the REINFORCE-with-group-baseline gradient ``-A * grad logp``.
Deviation from the paper: no KL penalty to a reference model (as in DAPO and Dr. GRPO); the feedback KL
of ``taskforge.rl.feedback`` is the only KL term.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn


def group_advantages(rewards: Tensor, eps: float = 1e-6, scale: bool = True) -> Tensor:
    """Group-normalised advantages; ``rewards`` has shape ``(G,)`` or ``(groups, G)``."""
    r = rewards.to(torch.float32)
    mean = r.mean(dim=-1, keepdim=True)
    centred = r - mean
    if not scale:
        return centred
    std = r.std(dim=-1, keepdim=True, unbiased=False)
    return torch.where(std > 0, centred / (std + eps), torch.zeros_like(centred))


@dataclass(frozen=True, slots=True)
class TokenBatch:
    """Right-padded sequences ``prompt + completion`` and which positions are completion tokens."""

    input_ids: Tensor  # (B, T) long
    attention_mask: Tensor  # (B, T) long, 1 on real tokens
    completion_mask: Tensor  # (B, T) bool, True on completion tokens (the ones the loss trains)

    @classmethod
    def build(cls, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad_id: int,
              device: torch.device | str = "cpu") -> TokenBatch:
        if len(prompts) != len(completions) or not prompts:
            raise ValueError(f"need as many prompts as completions (>0), got {len(prompts)} and {len(completions)}")
        width = max(len(p) + len(c) for p, c in zip(prompts, completions, strict=True))
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        comp = torch.zeros((len(prompts), width), dtype=torch.bool)
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            n = len(p) + len(c)
            ids[i, :n] = torch.tensor(list(p) + list(c), dtype=torch.long)
            attn[i, :n] = 1
            comp[i, len(p):n] = True
        return cls(ids.to(device), attn.to(device), comp.to(device))


def forward_logits(model: nn.Module, batch: TokenBatch) -> Tensor:
    """Logits ``(B, T, V)`` of a causal LM over the batch (float32 for stable log-softmax)."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    logits = out.logits if hasattr(out, "logits") else out
    return logits.float()


def token_logprobs(logits: Tensor, input_ids: Tensor) -> Tensor:
    """``(B, T-1)``: log-probability of token ``t+1`` given the prefix, from logits ``(B, T, V)``."""
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


@dataclass(frozen=True, slots=True)
class GRPOLoss:
    loss: Tensor  # scalar, differentiable
    clip_fraction: float  # share of completion tokens whose ratio was clipped
    tokens: int  # completion tokens in the loss


def grpo_loss(logprobs: Tensor, advantages: Tensor, mask: Tensor, old_logprobs: Tensor | None = None,
              clip_eps: float = 0.2) -> GRPOLoss:
    """Token-level clipped policy-gradient loss.

    ``logprobs`` and ``mask`` are ``(B, T-1)`` (aligned with the predicted tokens, as from
    ``token_logprobs`` and ``completion_mask[:, 1:]``); ``advantages`` is ``(B,)`` (one per completion)
    or ``(B, T-1)``.
    """
    m = mask.to(logprobs.dtype)
    adv = advantages.to(logprobs.dtype)
    if adv.ndim == 1:
        adv = adv.unsqueeze(-1)
    old = logprobs.detach() if old_logprobs is None else old_logprobs.detach()
    ratio = torch.exp(logprobs - old)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    per_token = -torch.minimum(ratio * adv, clipped * adv)
    tokens = m.sum()
    loss = (per_token * m).sum() / tokens.clamp(min=1.0)
    with torch.no_grad():
        was_clipped = ((ratio - clipped).abs() > 0) & mask.bool()
        frac = float(was_clipped.sum() / tokens.clamp(min=1.0))
    return GRPOLoss(loss, frac, int(tokens.item()))


def sequence_logprob(model: nn.Module, batch: TokenBatch) -> Tensor:
    """Sum of completion-token log-probabilities per row, ``(B,)`` (for tests and diagnostics)."""
    lp = token_logprobs(forward_logits(model, batch), batch.input_ids)
    return (lp * batch.completion_mask[:, 1:].to(lp.dtype)).sum(-1)


def segment_batch(rows: Sequence[Sequence[tuple[Sequence[int], bool]]], pad_id: int,
                  device: torch.device | str = "cpu") -> TokenBatch:
    """A ``TokenBatch`` of rows made of segments ``(token ids, trained)``: the multi-turn layout.

    Each row is the concatenation of its segments; ``completion_mask`` is True exactly on the tokens of
    segments marked ``trained`` (the model's own turns), False on the others (prompt, observations,
    hints) and on padding. ``TokenBatch.build`` is the one-prompt-one-completion case.
    """
    if not rows:
        raise ValueError("segment_batch needs at least one row")
    flat = [[t for ids, _ in row for t in ids] for row in rows]
    width = max(1, max(len(f) for f in flat))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    comp = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, row in enumerate(rows):
        pos = 0
        for seg, trained in row:
            n = len(seg)
            if n:
                ids[i, pos:pos + n] = torch.tensor(list(seg), dtype=torch.long)
                attn[i, pos:pos + n] = 1
                comp[i, pos:pos + n] = trained
            pos += n
    return TokenBatch(ids.to(device), attn.to(device), comp.to(device))
