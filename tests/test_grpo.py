"""GRPO: group advantages, masking, clipping, gradient flow, and one step that prefers the rewarded sample."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from taskforge.rl.grpo import (  # noqa: E402
    TokenBatch,
    forward_logits,
    group_advantages,
    grpo_loss,
    sequence_logprob,
    token_logprobs,
)
from taskforge.rl.trainer import GRPOTrainer, TokenRollout, TrainerConfig  # noqa: E402

pytestmark = pytest.mark.torch

PAD = 0


def tiny_llama(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg)


def test_group_advantages_are_normalised_per_group_and_zero_without_variance() -> None:
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]]))
    assert torch.allclose(adv.mean(-1), torch.zeros(3), atol=1e-6)
    assert torch.allclose(adv[0], torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-4)
    assert torch.equal(adv[1], torch.zeros(4))
    assert adv[2, 3] > 0 > adv[2, 0]
    assert torch.allclose(adv[2].std(unbiased=False), torch.tensor(1.0), atol=1e-4)


def test_token_batch_masks_prompt_and_padding() -> None:
    b = TokenBatch.build([[5, 6, 7], [5]], [[8, 9], [10, 11, 12]], PAD)
    assert b.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 10, 11, 12, 0]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    assert b.completion_mask.tolist() == [[False, False, False, True, True], [False, True, True, True, False]]


def test_loss_ignores_masked_positions_and_averages_over_tokens() -> None:
    lp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -9.0]], requires_grad=True)
    mask = torch.tensor([[False, True, True], [True, True, False]])
    adv = torch.tensor([1.0, -1.0])
    out = grpo_loss(lp, adv, mask)
    # ratio = 1 without old logprobs: loss = -mean_t(A) over the 4 completion tokens = 0, grad = -A/4
    assert out.tokens == 4 and abs(float(out.loss.detach())) < 1e-6
    out.loss.backward()
    assert torch.allclose(lp.grad, torch.tensor([[0.0, -0.25, -0.25], [0.25, 0.25, 0.0]]))
    perturbed = lp.detach().clone()
    perturbed[0, 0] = -50.0
    perturbed[1, 2] = 3.0
    old = lp.detach() - 0.1
    assert torch.allclose(grpo_loss(perturbed, adv, mask, old).loss, grpo_loss(lp.detach(), adv, mask, old).loss)


def test_clipped_ratio_stops_the_gradient_beyond_the_trust_region() -> None:
    old = torch.zeros(1, 2)
    lp = torch.tensor([[0.5, 0.05]], requires_grad=True)  # ratios e^0.5 = 1.65 (clipped), e^0.05 (inside)
    out = grpo_loss(lp, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), old_logprobs=old, clip_eps=0.2)
    out.loss.backward()
    assert lp.grad[0, 0] == 0.0 and lp.grad[0, 1] < 0
    assert out.clip_fraction == pytest.approx(0.5)


def test_gradients_flow_to_every_parameter_through_the_whole_loss() -> None:
    model = tiny_llama()
    trainer = GRPOTrainer(model, PAD, TrainerConfig(optimizer="adamw", lr=1e-3, kl_coef=0.5, max_grad_norm=0))
    rollouts = [TokenRollout(0, (1, 2, 3), (4, 5, 6), 1.0, hint_ids=(7, 8)),
                TokenRollout(0, (1, 2, 3), (9, 10), 0.0),
                TokenRollout(1, (11, 12), (13, 14, 15, 16), 0.0, hint_ids=(17,)),
                TokenRollout(1, (11, 12), (18,), 1.0)]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    stats = trainer.step(rollouts)
    assert stats.hinted == 2 and stats.kl > 0 and stats.grad_norm > 0
    for name, p in model.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name
        assert not torch.equal(p.detach(), before[name]), name


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_one_grpo_step_raises_the_rewarded_sample_relative_to_the_unrewarded(optimizer: str) -> None:
    model = tiny_llama(seed=1)
    prompt = (1, 2, 3, 4)
    good, bad = (20, 21, 22, 23), (30, 31, 32, 33)
    batch = TokenBatch.build([prompt, prompt], [good, bad], PAD)
    with torch.no_grad():
        lp0 = sequence_logprob(model, batch)
    trainer = GRPOTrainer(model, PAD, TrainerConfig(optimizer=optimizer, lr=3e-3, kl_coef=0.0))
    trainer.step([TokenRollout(0, prompt, good, 1.0), TokenRollout(0, prompt, bad, 0.0)])
    with torch.no_grad():
        lp1 = sequence_logprob(model, batch)
    margin0, margin1 = float(lp0[0] - lp0[1]), float(lp1[0] - lp1[1])
    assert margin1 > margin0 + 0.05, (margin0, margin1)
    assert float(lp1[0]) > float(lp0[0])  # the rewarded sample itself became more likely


def test_zero_variance_group_leaves_the_policy_gradient_at_zero() -> None:
    model = tiny_llama()
    trainer = GRPOTrainer(model, PAD, TrainerConfig(optimizer="adamw", kl_coef=0.0, max_grad_norm=0))
    stats = trainer.step([TokenRollout(0, (1, 2), (3, 4), 1.0), TokenRollout(0, (1, 2), (5, 6), 1.0)])
    assert stats.loss == 0.0 and stats.grad_norm == 0.0


def test_micro_batching_does_not_change_the_update() -> None:
    rollouts = [TokenRollout(g, (1, 2, g + 3), tuple(range(5, 5 + k)), float(k % 2), hint_ids=(9,) if k == 2 else ())
                for g in range(2) for k in range(1, 4)]
    grads = []
    for micro in (1, 8):
        model = tiny_llama(seed=2)
        GRPOTrainer(model, PAD, TrainerConfig(optimizer="adamw", micro_batch=micro, max_grad_norm=0)).step(rollouts)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_token_logprobs_match_the_models_own_loss() -> None:
    model = tiny_llama()
    ids = torch.tensor([[1, 5, 7, 9, 11]])
    batch = TokenBatch(ids, torch.ones_like(ids), torch.ones_like(ids, dtype=torch.bool))
    lp = token_logprobs(forward_logits(model, batch), ids)
    assert torch.allclose(-lp.mean(), model(input_ids=ids, labels=ids).loss, atol=1e-5)
