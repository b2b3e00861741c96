"""Muon: momentum, then Newton–Schulz orthogonalisation of every 2-D update, at the model's natural grain.

Algorithm (Keller Jordan's Muon, with the per-head / per-expert split and the Moonlight update scale):

1. ``m <- beta * m + (1 - beta) * g`` (EMA momentum); the update is ``m`` or, with Nesterov,
   ``(1 - beta) * g + beta * m``.
2. The update is cut into the matrices the model actually computes with: one per attention head for
   query/key/value/output projections (a parameter group declares ``split=(axis, block)``: axis 0 cuts
   rows, axis 1 cuts columns, ``block`` is the head dimension), one per expert for stacked expert weights
   (any tensor with more than two dimensions is a stack of matrices over its leading dimensions), else
   the whole matrix.
3. Each matrix ``G`` is replaced by an approximation of ``U V^T`` (``G = U S V^T``) with 5 iterations of
   the quintic Newton–Schulz map ``X <- a X + (b A + c A^2) X``, ``A = X X^T``, coefficients
   ``(a, b, c) = (3.4445, -4.7750, 2.0315)``. These coefficients trade exactness for speed: singular
   values land in roughly [0.7, 1.2], not exactly 1. Matrices of the same shape (all heads of all layers,
   all experts) are stacked and orthogonalised in ONE batched matmul chain. The iteration runs in
   bfloat16 on GPU (it is stable there) and in float32 on CPU.
4. Update scale, ``scale_rule="rms"`` (default): ``0.2 * sqrt(max(rows, cols))``. An orthogonal
   ``rows x cols`` matrix has RMS ``1/sqrt(max(rows, cols))``, so this gives every update an RMS of 0.2
   whatever the matrix shape (Moonlight, "Muon is Scalable for LLM Training", 2025): a 16x64 head gets
   the same per-element step as a 1024x1024 projection, and the learning rate and weight decay are
   AdamW's. The alternative ``scale_rule="spectral"`` (Keller Jordan: ``sqrt(max(1, rows/cols))``)
   shrinks small heads' per-element step by ``1/sqrt(max(rows, cols))``, which makes the right learning
   rate depend on the head size; that is why it is not the default.
5. Decoupled weight decay ``p <- p (1 - lr * wd)``, then ``p <- p - lr * scale * O``.

Parameters that are not hidden matrices — embeddings, the output head, norms, biases — are updated by an
internal AdamW (the groups with ``use_muon=False``), as every Muon recipe does. ``muon_param_groups``
builds those groups for a transformers or plain torch model; ``make_optimizer`` picks Muon or AdamW by
name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from taskforge.core.errors import ConfigError

NS_COEFFS = (3.4445, -4.7750, 2.0315)
OPTIMIZERS = ("muon", "adamw")

Split = tuple[int, int] | None  # (axis of the matrix to cut: 0 rows | 1 cols, block size)


def newton_schulz(g: Tensor, steps: int = 5, dtype: torch.dtype | None = None, eps: float = 1e-7) -> Tensor:
    """Approximate the orthogonal factor ``U V^T`` of each matrix in ``g`` (shape ``(..., rows, cols)``).

    ``dtype`` is the compute dtype (default: bfloat16 on CUDA, float32 elsewhere); the result has
    ``g``'s dtype.
    """
    if g.ndim < 2:
        raise ValueError(f"newton_schulz needs matrices, got shape {tuple(g.shape)}")
    a, b, c = NS_COEFFS
    compute = dtype or (torch.bfloat16 if g.is_cuda else torch.float32)
    x = g.to(compute)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)  # spectral norm <= Frobenius norm <= 1
    for _ in range(steps):
        gram = x @ x.mT
        poly = b * gram + c * (gram @ gram)
        x = a * x + poly @ x
    if tall:
        x = x.mT
    return x.to(g.dtype)


def to_matrices(t: Tensor, split: Split = None) -> Tensor:
    """View ``t`` as a stack ``(n, rows, cols)`` of the matrices Muon orthogonalises one by one."""
    if t.ndim < 2:
        raise ValueError(f"Muon updates matrices; got a {t.ndim}-D tensor of shape {tuple(t.shape)}")
    rows, cols = t.shape[-2], t.shape[-1]
    m = t.reshape(-1, rows, cols)
    if split is None:
        return m
    axis, block = split
    n = m.shape[0]
    if axis == 0:
        return m.reshape(n * (rows // block), block, cols)
    return m.reshape(n, rows, cols // block, block).permute(0, 2, 1, 3).reshape(-1, rows, block)


def from_matrices(mats: Tensor, shape: torch.Size, split: Split = None) -> Tensor:
    """Inverse of ``to_matrices``: put the stack back into a tensor of ``shape``."""
    rows, cols = shape[-2], shape[-1]
    if split is not None and split[0] == 1:
        block = split[1]
        mats = mats.reshape(-1, cols // block, rows, block).permute(0, 2, 1, 3)
    return mats.reshape(shape)


def check_split(shape: torch.Size, split: Split) -> None:
    if split is None:
        return
    axis, block = split
    if axis not in (0, 1) or block <= 0 or shape[-2 + axis] % block:
        raise ConfigError(f"Muon split {split} does not fit a parameter of shape {tuple(shape)}; expected "
                          f"(axis 0|1, block dividing that axis); fix the param group's 'split'")


def update_scale(rows: int, cols: int, rule: str) -> float:
    if rule == "rms":
        return 0.2 * math.sqrt(max(rows, cols))
    if rule == "spectral":
        return math.sqrt(max(1.0, rows / cols))
    raise ConfigError(f"unknown Muon scale_rule {rule!r}; expected 'rms' or 'spectral'")


class Muon(torch.optim.Optimizer):
    """Muon for hidden matrices, AdamW for the rest, in one ``torch.optim.Optimizer``.

    Each param group has ``use_muon`` (default: ``True`` for tensors with two or more dimensions; a group
    that mixes both is split) and, for Muon groups, an optional ``split=(axis, block)`` (see module doc).
    ``batch_same_shape=False`` orthogonalises matrix by matrix (same result, used to check batching).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.95, nesterov: bool = True,
                 ns_steps: int = 5, weight_decay: float = 0.0, scale_rule: str = "rms",
                 adamw_betas: tuple[float, float] = (0.9, 0.95), adamw_eps: float = 1e-8,
                 ns_dtype: torch.dtype | None = None, batch_same_shape: bool = True) -> None:
        if lr <= 0 or not 0.0 <= momentum < 1.0 or ns_steps < 1:
            raise ConfigError(f"Muon needs lr > 0, 0 <= momentum < 1, ns_steps >= 1; got lr={lr}, "
                              f"momentum={momentum}, ns_steps={ns_steps}")
        update_scale(1, 1, scale_rule)
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps,
                        weight_decay=weight_decay, scale_rule=scale_rule, adamw_betas=adamw_betas,
                        adamw_eps=adamw_eps, split=None)
        super().__init__(_split_mixed_groups(params), defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if group["use_muon"]:
                    if p.ndim < 2:
                        raise ConfigError(f"Muon group has a {p.ndim}-D parameter of shape {tuple(p.shape)}; "
                                          "Muon updates matrices: put it in a group with use_muon=False")
                    check_split(p.shape, group["split"])
        self.ns_dtype = ns_dtype
        self.batch_same_shape = batch_same_shape

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        pending: list[tuple[Tensor, dict[str, Any], Tensor]] = []
        for group in self.param_groups:
            if group["use_muon"]:
                pending.extend((p, group, self._momentum_update(p, group))
                               for p in group["params"] if p.grad is not None)
            else:
                for p in group["params"]:
                    if p.grad is not None:
                        self._adamw_step(p, group)
        if not pending:
            return loss
        stacks = [to_matrices(u, g["split"]) for _, g, u in pending]
        orth = self._orthogonalise(stacks, [g["ns_steps"] for _, g, _ in pending])
        for (p, group, upd), o in zip(pending, orth, strict=True):
            rows, cols = o.shape[-2], o.shape[-1]
            scale = update_scale(rows, cols, group["scale_rule"])
            if group["weight_decay"]:
                p.mul_(1.0 - group["lr"] * group["weight_decay"])
            p.add_(from_matrices(o, upd.shape, group["split"]).to(p.dtype), alpha=-group["lr"] * scale)
        return loss

    def _momentum_update(self, p: Tensor, group: Mapping[str, Any]) -> Tensor:
        state = self.state[p]
        grad = p.grad
        assert grad is not None
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(grad)
        buf = state["momentum_buffer"]
        beta = group["momentum"]
        buf.lerp_(grad, 1.0 - beta)
        return grad.lerp(buf, beta) if group["nesterov"] else buf.clone()

    def _orthogonalise(self, stacks: Sequence[Tensor], steps: Sequence[int]) -> list[Tensor]:
        """Orthogonalise every matrix of every stack; same-shape matrices share one batched call."""
        if not self.batch_same_shape:
            return [torch.stack([newton_schulz(m, n, self.ns_dtype) for m in s])
                    for s, n in zip(stacks, steps, strict=True)]
        buckets: dict[tuple[Any, ...], list[int]] = {}
        for i, s in enumerate(stacks):
            buckets.setdefault((tuple(s.shape[1:]), s.dtype, s.device, steps[i]), []).append(i)
        out: list[Tensor | None] = [None] * len(stacks)
        for key, idx in buckets.items():
            batch = newton_schulz(torch.cat([stacks[i] for i in idx]), key[3], self.ns_dtype)
            for i, piece in zip(idx, batch.split([stacks[i].shape[0] for i in idx]), strict=True):
                out[i] = piece
        return [o for o in out if o is not None]

    def _adamw_step(self, p: Tensor, group: Mapping[str, Any]) -> None:
        grad = p.grad
        assert grad is not None
        state = self.state[p]
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        beta1, beta2 = group["adamw_betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1.0 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        bias1 = 1.0 - beta1 ** state["step"]
        bias2 = 1.0 - beta2 ** state["step"]
        denom = (exp_avg_sq / bias2).sqrt_().add_(group["adamw_eps"])
        if group["weight_decay"]:
            p.mul_(1.0 - group["lr"] * group["weight_decay"])
        p.addcdiv_(exp_avg, denom, value=-group["lr"] / bias1)


def _split_mixed_groups(params: Iterable[Any]) -> list[dict[str, Any]]:
    """Normalise ``params`` into groups that all carry ``use_muon``."""
    items = list(params)
    if not items:
        raise ConfigError("Muon got no parameters; pass model parameters or muon_param_groups(model)")
    groups = items if isinstance(items[0], dict) else [{"params": items}]
    out: list[dict[str, Any]] = []
    for group in groups:
        if "use_muon" in group:
            out.append(dict(group))
            continue
        tensors = list(group["params"])
        rest = {k: v for k, v in group.items() if k != "params"}
        matrices = [p for p in tensors if p.ndim >= 2]
        others = [p for p in tensors if p.ndim < 2]
        if matrices:
            out.append({**rest, "params": matrices, "use_muon": True})
        if others:
            out.append({**rest, "params": others, "use_muon": False})
    return out


# (regex on the parameter name, axis to cut in the tensor's own layout). Linear weights are (out, in);
# GPT-2's Conv1D weights are (in, out), hence the swapped axes for c_attn / c_proj.
HEAD_SPLIT_RULES: tuple[tuple[str, int], ...] = (
    (r"(^|\.)(q_proj|k_proj|v_proj|query|key|value)\.weight$", 0),
    (r"(^|\.)(o_proj|out_proj)\.weight$", 1),
    (r"(^|\.)attn\.c_attn\.weight$", 1),
    (r"(^|\.)attn\.c_proj\.weight$", 0),
    (r"(^|\.)in_proj_weight$", 0),
)


def muon_param_groups(model: nn.Module, head_dim: int | None = None,
                      split_rules: Sequence[tuple[str, int]] = HEAD_SPLIT_RULES,
                      weight_decay: float = 0.0) -> list[dict[str, Any]]:
    """Split ``model``'s parameters into Muon groups (per head / per expert / whole) and one AdamW group.

    ``head_dim`` defaults to the model config's ``head_dim`` or ``hidden_size // num_attention_heads``.
    AdamW gets tensors with fewer than 2 dimensions (norms, biases), every ``nn.Embedding`` weight and the
    output head (``get_output_embeddings``), so tied embeddings stay on AdamW too. Each group carries
    ``names`` (parameter names) for inspection.
    """
    head_dim = head_dim or _config_head_dim(model)
    adamw_ids = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    get_out = getattr(model, "get_output_embeddings", None)
    out_head = get_out() if callable(get_out) else None
    if out_head is not None and getattr(out_head, "weight", None) is not None:
        adamw_ids.add(id(out_head.weight))
    groups: dict[tuple[bool, Split], dict[str, Any]] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        use_muon = p.ndim >= 2 and id(p) not in adamw_ids
        split: Split = None
        if use_muon and p.ndim == 2 and head_dim:
            for pattern, axis in split_rules:
                if re.search(pattern, name) and p.shape[axis] % head_dim == 0 and p.shape[axis] > head_dim:
                    split = (axis, head_dim)
                    break
        group = groups.setdefault((use_muon, split), {"params": [], "names": [], "use_muon": use_muon,
                                                       "split": split, "weight_decay": weight_decay})
        group["params"].append(p)
        group["names"].append(name)
    return list(groups.values())


def _config_head_dim(model: nn.Module) -> int | None:
    config = getattr(model, "config", None)
    if config is None:
        return None
    explicit = getattr(config, "head_dim", None)
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    if isinstance(heads, int) and isinstance(hidden, int) and heads > 0 and hidden % heads == 0:
        return hidden // heads
    return None


def make_optimizer(name: str, model: nn.Module, lr: float, weight_decay: float = 0.0,
                   **kwargs: Any) -> torch.optim.Optimizer:
    """``"muon"`` (Muon on hidden matrices + AdamW on the rest) or ``"adamw"`` (torch's AdamW on all).

    For ``"muon"``, ``adamw_lr`` (default: ``lr``) is the learning rate of the AdamW-handled parameters
    (embeddings, head, norms, biases) and ``head_dim`` overrides the per-head split size.
    """
    if name == "muon":
        head_dim = kwargs.pop("head_dim", None)
        adamw_lr = kwargs.pop("adamw_lr", None)
        groups = muon_param_groups(model, head_dim=head_dim, weight_decay=weight_decay)
        for group in groups:
            if not group["use_muon"] and adamw_lr is not None:
                group["lr"] = adamw_lr
        return Muon(groups, lr=lr, **kwargs)
    if name == "adamw":
        betas = kwargs.pop("betas", (0.9, 0.95))
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas, **kwargs)
    raise ConfigError(f"unknown optimizer {name!r}; expected one of {', '.join(OPTIMIZERS)}")
