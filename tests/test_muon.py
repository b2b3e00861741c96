"""Muon: per-head / per-expert orthogonalised updates, batching, param groups, and a toy race with AdamW."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch import nn  # noqa: E402

import taskforge.rl  # noqa: E402
from taskforge.core.errors import ConfigError  # noqa: E402
from taskforge.rl.muon import (  # noqa: E402
    Muon,
    from_matrices,
    make_optimizer,
    muon_param_groups,
    newton_schulz,
    to_matrices,
    update_scale,
)

pytestmark = pytest.mark.torch

# NS5 with Keller Jordan's coefficients maps singular values into about [0.68, 1.2] (not exactly 1).
SV_LOW, SV_HIGH = 0.6, 1.25


def tiny_llama(seed: int = 0, vocab: int = 32, hidden: int = 64) -> nn.Module:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg)


class TinyMoE(nn.Module):
    """Stacked expert weights (E, out, in), as MoE implementations store them."""

    def __init__(self, experts: int = 4, d_in: int = 16, d_out: int = 32) -> None:
        super().__init__()
        self.experts = nn.Parameter(torch.randn(experts, d_out, d_in) * 0.1)
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, d_in) -> mean over experts
        return torch.einsum("eoi,bi->beo", self.experts, x).mean(1) + self.bias


def test_muon_is_exported_lazily_from_taskforge_rl() -> None:
    assert taskforge.rl.Muon is Muon
    assert issubclass(Muon, torch.optim.Optimizer)


def test_newton_schulz_singular_values_near_one_for_head_shaped_matrices() -> None:
    torch.manual_seed(0)
    for shape in [(32, 16, 64), (8, 64, 16)]:
        g = torch.randn(*shape)
        s = torch.linalg.svdvals(newton_schulz(g))
        assert s.min() > SV_LOW and s.max() < SV_HIGH, (shape, s.min(), s.max())
        # and it is not the identity map: the raw matrices are far from orthogonal
        raw = torch.linalg.svdvals(g)
        assert raw.max() / raw.min() > 2.0


def test_split_round_trip_rows_cols_and_experts() -> None:
    t = torch.arange(2 * 8 * 12, dtype=torch.float32).reshape(2, 8, 12)
    for split in (None, (0, 4), (1, 3)):
        mats = to_matrices(t, split)
        assert torch.equal(from_matrices(mats, t.shape, split), t)
    # axis 1 cuts columns: the first block of the first expert is columns 0..2
    assert torch.equal(to_matrices(t[0], (1, 3))[0], t[0][:, :3])
    assert torch.equal(to_matrices(t[0], (0, 4))[1], t[0][4:8])


def test_param_groups_llama_heads_and_adamw_for_embeddings_norms_head() -> None:
    model = tiny_llama()
    groups = muon_param_groups(model)
    by_name = {n: g for g in groups for n in g["names"]}
    assert by_name["model.layers.0.self_attn.q_proj.weight"]["split"] == (0, 16)
    assert by_name["model.layers.0.self_attn.k_proj.weight"]["split"] == (0, 16)
    assert by_name["model.layers.0.self_attn.o_proj.weight"]["split"] == (1, 16)
    assert by_name["model.layers.0.mlp.up_proj.weight"]["split"] is None
    assert by_name["model.layers.0.mlp.up_proj.weight"]["use_muon"]
    for name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                 "model.layers.1.input_layernorm.weight"):
        assert not by_name[name]["use_muon"], name
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_param_groups_gpt2_conv1d_layout() -> None:
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=40, n_embd=32, n_layer=1, n_head=4,
                                                                 n_positions=32))
    by_name = {n: g for g in muon_param_groups(model) for n in g["names"]}
    assert by_name["transformer.h.0.attn.c_attn.weight"]["split"] == (1, 8)  # (in, 3*out): cut columns
    assert by_name["transformer.h.0.attn.c_proj.weight"]["split"] == (0, 8)  # (in=heads*d, out): cut rows
    assert not by_name["transformer.wpe.weight"]["use_muon"]
    assert not by_name["transformer.h.0.attn.c_attn.bias"]["use_muon"]


def _one_step_update(model: nn.Module, opt: torch.optim.Optimizer, name: str) -> torch.Tensor:
    params = dict(model.named_parameters())
    before = params[name].detach().clone()
    ids = torch.randint(0, 32, (4, 12), generator=torch.Generator().manual_seed(3))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    return params[name].detach() - before


def test_each_head_update_is_orthogonal_the_whole_matrix_is_not() -> None:
    model = tiny_llama()
    lr = 0.01
    opt = Muon(muon_param_groups(model), lr=lr, momentum=0.0, nesterov=False)
    for name, split in [("model.layers.0.self_attn.q_proj.weight", (0, 16)),
                        ("model.layers.1.self_attn.o_proj.weight", (1, 16))]:
        model.zero_grad()
        delta = _one_step_update(model, opt, name)
        heads = to_matrices(delta, split)
        assert heads.shape[0] == 4
        scale = update_scale(heads.shape[1], heads.shape[2], "rms")
        s = torch.linalg.svdvals(heads / (-lr * scale))
        assert s.min() > SV_LOW and s.max() < SV_HIGH, (name, s.min(), s.max())
        # RMS-matched scale: every head's update has RMS ~ 0.2 * lr whatever its shape
        rms = heads.pow(2).mean(dim=(1, 2)).sqrt() / lr
        assert torch.all((rms > 0.2 * SV_LOW) & (rms < 0.2 * SV_HIGH)), rms
        # the per-head updates are NOT one orthogonal 64x64 matrix (heads are orthogonalised separately)
        whole = torch.linalg.svdvals(delta / (-lr * scale))
        assert whole.max() / whole.min() > 1.5


def test_each_expert_update_is_orthogonal() -> None:
    torch.manual_seed(0)
    moe = TinyMoE()
    lr = 0.01
    groups = muon_param_groups(moe)
    assert [g["use_muon"] for g in groups if "experts" in g["names"]] == [True]
    opt = Muon(groups, lr=lr, momentum=0.0, nesterov=False)
    before = moe.experts.detach().clone()
    x = torch.randn(64, 16)
    target = torch.randn(64, 32)
    ((moe(x) - target) ** 2).mean().backward()
    opt.step()
    delta = moe.experts.detach() - before
    scale = update_scale(32, 16, "rms")
    s = torch.linalg.svdvals(delta / (-lr * scale))  # (E, 16) singular values, one row per expert
    assert s.shape == (4, 16)
    assert s.min() > SV_LOW and s.max() < SV_HIGH
    assert moe.bias.grad is not None and not torch.equal(moe.bias.detach(), torch.zeros(32))  # AdamW moved it


def test_batched_same_shape_equals_one_by_one() -> None:
    a = tiny_llama(seed=1)
    b = copy.deepcopy(a)
    opt_a = Muon(muon_param_groups(a), lr=0.02, batch_same_shape=True)
    opt_b = Muon(muon_param_groups(b), lr=0.02, batch_same_shape=False)
    ids = torch.randint(0, 32, (4, 10), generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        for model, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-5, rtol=1e-4), name
    assert not torch.equal(dict(a.named_parameters())["model.layers.0.self_attn.q_proj.weight"],
                           dict(tiny_llama(seed=1).named_parameters())["model.layers.0.self_attn.q_proj.weight"])


def test_state_dict_round_trip_continues_identically() -> None:
    a = tiny_llama(seed=2)
    opt = Muon(muon_param_groups(a), lr=0.02)
    ids = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(0))
    a(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    b = copy.deepcopy(a)
    opt_b = Muon(muon_param_groups(b), lr=0.02)
    opt_b.load_state_dict(copy.deepcopy(opt.state_dict()))  # state_dict() holds references
    for model, o in ((a, opt), (b, opt_b)):
        o.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        o.step()
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-6)


def test_plain_params_are_split_by_dimension_and_bad_inputs_are_config_errors() -> None:
    lin = nn.Linear(8, 4)
    opt = Muon(lin.parameters(), lr=0.01)
    assert [(g["use_muon"], len(g["params"])) for g in opt.param_groups] == [(True, 1), (False, 1)]
    with pytest.raises(ConfigError, match="unknown optimizer"):
        make_optimizer("sgdx", lin, lr=0.1)
    with pytest.raises(ConfigError, match="split"):
        Muon([{"params": [lin.weight], "use_muon": True, "split": (0, 3)}], lr=0.01)
    with pytest.raises(ConfigError, match="use_muon=False"):
        Muon([{"params": [lin.bias], "use_muon": True}], lr=0.01)
    assert isinstance(make_optimizer("adamw", lin, lr=0.1), torch.optim.AdamW)


def _train_toy(name: str, lr: float, steps: int = 30) -> float:
    """Next-token memorisation of 64 random sequences by a tiny Llama, linear decay to 0; final loss."""
    model = tiny_llama(seed=0)
    data = torch.randint(0, 32, (64, 16), generator=torch.Generator().manual_seed(1))
    opt = make_optimizer(name, model, lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / steps)
    for _ in range(steps):
        loss = model(input_ids=data, labels=data).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        return float(model(input_ids=data, labels=data).loss)


@pytest.mark.slow
def test_muon_reaches_a_loss_at_least_as_low_as_adamw_on_a_toy_objective() -> None:
    """Same model, data, steps and schedule; each optimiser at its best learning rate of one shared grid."""
    torch.set_num_threads(1)
    grid = (3e-3, 1e-2, 3e-2)
    adamw = {lr: _train_toy("adamw", lr) for lr in grid}
    muon = {lr: _train_toy("muon", lr) for lr in grid}
    print(f"toy final loss after 30 steps: adamw {adamw} muon {muon}")
    assert min(muon.values()) <= min(adamw.values()), (muon, adamw)


def test_trainer_speed_bench_counts_per_head_matrices_and_times_steps() -> None:
    from taskforge.bench.trainer_speed import run

    r = run("muon", hidden=32, layers=1, heads=4, groups=1, group_size=2, prompt_len=8, completion_len=4,
            steps=1, warmup=0, device="cpu")
    # 1 layer: q 4 heads + k 2 + v 2 (GQA, 2 kv heads) + o 4 = 12 head matrices, + 3 MLP matrices
    assert r.muon_matrices == 15 and r.steps_per_s > 0 and r.device == "cpu"
    assert run("adamw", hidden=32, layers=1, heads=4, groups=1, group_size=2, prompt_len=8, completion_len=4,
               steps=1, warmup=0, device="cpu").muon_matrices == 0
