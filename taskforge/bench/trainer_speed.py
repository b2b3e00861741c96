"""``taskforge bench trainer-speed`` / ``python -m taskforge.bench.trainer_speed``: GRPO(+feedback) steps/s.

Times ``taskforge.rl.trainer.GRPOTrainer.step`` — one forward with grad over ``prompt + completion``,
one teacher forward (no grad) for the hinted rollouts, backward, grad clipping and the optimiser step —
on a randomly initialised Llama built from a config (default: hidden 256, 4 layers, 8 heads of 32, byte
vocabulary: tiny but not trivial), with synthetic rollouts: ``groups`` tasks x ``group_size`` samples,
prompts of ``prompt_len`` and completions of ``completion_len`` random tokens, random 0/1 rewards, and a
16-token hint on half of the rollouts. Each optimiser (Muon, AdamW) gets ``warmup`` untimed steps, then
``steps`` timed ones (CUDA is synchronised around the timer). Runs on CUDA when available, else CPU.
With ``--json`` the last line printed is one JSON object.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import typer


@dataclass(frozen=True, slots=True)
class SpeedResult:
    optimizer: str
    device: str
    steps_per_s: float
    tokens_per_s: float  # completion tokens trained per second
    step_ms_p50: float
    params: int
    muon_matrices: int  # matrices orthogonalised per step (per-head / per-expert split counted)


def _rollouts(groups: int, group_size: int, prompt_len: int, completion_len: int, vocab: int,
              seed: int) -> list[Any]:
    import torch

    from taskforge.rl.trainer import TokenRollout

    g = torch.Generator().manual_seed(seed)
    out = []
    for gi in range(groups):
        prompt = tuple(torch.randint(0, vocab - 2, (prompt_len,), generator=g).tolist())
        for j in range(group_size):
            completion = tuple(torch.randint(0, vocab - 2, (completion_len,), generator=g).tolist())
            hint = tuple(torch.randint(0, vocab - 2, (16,), generator=g).tolist()) if j % 2 else ()
            out.append(TokenRollout(gi, prompt, completion, float(torch.rand(1, generator=g) < 0.5), hint))
    return out


def _muon_matrices(optimizer: Any) -> int:
    from taskforge.rl.muon import Muon, to_matrices

    if not isinstance(optimizer, Muon):
        return 0
    return sum(to_matrices(p.detach(), g["split"]).shape[0]
               for g in optimizer.param_groups if g["use_muon"] for p in g["params"])


def run(optimizer: str = "muon", hidden: int = 256, layers: int = 4, heads: int = 8, groups: int = 4,
        group_size: int = 4, prompt_len: int = 256, completion_len: int = 128, steps: int = 10, warmup: int = 2,
        micro_batch: int = 16, bf16: bool = False, device: str = "auto", seed: int = 0) -> SpeedResult:
    import contextlib

    import torch

    from taskforge.rl.policies.hf import byte_tokenizer, tiny_causal_lm
    from taskforge.rl.trainer import GRPOTrainer, TrainerConfig

    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                       ("cpu" if device == "auto" else device))
    tok = byte_tokenizer()
    torch.manual_seed(seed)
    model = tiny_causal_lm(len(tok), "llama", hidden, layers, heads, prompt_len + completion_len + 64,
                           tok.pad_token_id, tok.eos_token_id).to(dev)
    trainer = GRPOTrainer(model, tok.pad_token_id, TrainerConfig(optimizer=optimizer, lr=1e-3, kl_coef=0.1,
                                                                 micro_batch=micro_batch))
    rollouts = _rollouts(groups, group_size, prompt_len, completion_len, len(tok), seed)
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    times = []
    for i in range(warmup + steps):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with autocast:
            trainer.step(rollouts)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    total = sum(times)
    tokens = len(rollouts) * completion_len
    return SpeedResult(optimizer, str(dev) + (" bf16-autocast" if bf16 else ""), steps / total, tokens * steps / total,
                       1000 * statistics.median(times), sum(p.numel() for p in model.parameters()),
                       _muon_matrices(trainer.optimizer))


def bench_command(
    hidden: Annotated[int, typer.Option(help="Model width.")] = 256,
    layers: Annotated[int, typer.Option(help="Transformer layers.")] = 4,
    heads: Annotated[int, typer.Option(help="Attention heads.")] = 8,
    groups: Annotated[int, typer.Option(help="Tasks per step.")] = 4,
    group_size: Annotated[int, typer.Option(help="Samples per task (G).")] = 4,
    prompt_len: Annotated[int, typer.Option(help="Prompt tokens.")] = 256,
    completion_len: Annotated[int, typer.Option(help="Completion tokens.")] = 128,
    steps: Annotated[int, typer.Option(help="Timed steps per optimiser.")] = 10,
    warmup: Annotated[int, typer.Option(help="Untimed steps first.")] = 2,
    bf16: Annotated[bool, typer.Option(help="bfloat16 autocast (GPU).")] = False,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda.")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Last line: one JSON object.")] = False,
) -> None:
    """Steps/second of the GRPO + feedback-KL step with Muon and with AdamW on a small Llama."""
    results = [run(opt, hidden, layers, heads, groups, group_size, prompt_len, completion_len, steps, warmup,
                   bf16=bf16, device=device) for opt in ("muon", "adamw")]
    for r in results:
        typer.echo(f"{r.optimizer:6s} on {r.device}: {r.steps_per_s:.2f} steps/s, {r.tokens_per_s:.0f} tokens/s, "
                   f"p50 {r.step_ms_p50:.0f} ms/step ({r.params / 1e6:.2f}M params, {r.muon_matrices} Muon matrices)")
    muon, adamw = results
    summary = {"device": muon.device, "steps_per_s_muon": round(muon.steps_per_s, 3),
               "steps_per_s_adamw": round(adamw.steps_per_s, 3),
               "muon_overhead": round(adamw.steps_per_s / muon.steps_per_s - 1.0, 3),
               "results": [asdict(r) for r in results]}
    if as_json:
        typer.echo(json.dumps(summary))


def register(bench_app: typer.Typer) -> None:
    bench_app.command("trainer-speed")(bench_command)


if __name__ == "__main__":
    typer.run(bench_command)
