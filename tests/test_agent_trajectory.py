"""Token-level trajectories: loss-mask layout, observation tokens get no gradient, GRPO over whole trajectories,
and the feedback KL lives on the hinted turn only."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from taskforge.agent.trajectory import (  # noqa: E402
    Trajectory,
    TrajectoryTrainer,
    Turn,
    sampling_logprobs_batch,
    trajectory_advantages,
    trajectory_batch,
)
from taskforge.rl.grpo import forward_logits, grpo_loss, token_logprobs  # noqa: E402
from taskforge.rl.trainer import TrainerConfig  # noqa: E402
from tests.test_grpo import PAD, tiny_llama  # noqa: E402  (the same 40-token model as the GRPO tests)

pytestmark = pytest.mark.torch


def two_turns(obs: tuple[int, ...] = (20, 21, 22), tail_obs: tuple[int, ...] = (), reward: float = 1.0,
              hint: tuple[int, ...] = ()) -> Trajectory:
    turns = [Turn((1, 2, 3), (5, 6), (-1.0, -1.5)), Turn(obs, (7, 8, 9), (-0.5, -0.7, -0.9), hint, "x" if hint else "")]
    if tail_obs:
        turns.append(Turn(tail_obs, ()))
    return Trajectory(0, tuple(turns), reward)


def test_loss_mask_is_one_on_model_tokens_only() -> None:
    tr = two_turns()
    assert tr.token_ids == (1, 2, 3, 5, 6, 20, 21, 22, 7, 8, 9)
    assert tr.loss_mask == (0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1)
    assert tr.sampling_logprobs == (0, 0, 0, -1.0, -1.5, 0, 0, 0, -0.5, -0.7, -0.9)
    batch = trajectory_batch([tr, Trajectory(0, (Turn((1,), (4,)),), 0.0)], PAD)
    assert batch.completion_mask[0].tolist() == [bool(m) for m in tr.loss_mask]
    assert batch.completion_mask[1].tolist() == [False, True] + [False] * 9
    assert batch.attention_mask[1].tolist() == [1, 1] + [0] * 9


def test_observation_tokens_get_zero_gradient() -> None:
    model = tiny_llama()
    trs = [two_turns(reward=1.0), two_turns(obs=(23, 24, 25), reward=0.0)]
    batch = trajectory_batch(trs, PAD)
    logits = forward_logits(model, batch)
    logits.retain_grad()
    loss = grpo_loss(token_logprobs(logits, batch.input_ids), trajectory_advantages(trs),
                     batch.completion_mask[:, 1:]).loss
    loss.backward()
    grad = logits.grad.abs().sum(-1)  # (B, T): position t predicts token t+1
    predicts_model_token = batch.completion_mask[:, 1:]
    assert torch.all(grad[:, :-1][~predicts_model_token] == 0)  # observation / prompt targets: no gradient
    assert torch.all(grad[:, :-1][predicts_model_token] > 0)


def test_changing_an_observation_token_does_not_change_the_loss_but_a_model_token_does() -> None:
    model = tiny_llama()

    def loss_of(trs: list[Trajectory]) -> float:
        batch = trajectory_batch(trs, PAD)
        old = sampling_logprobs_batch(trs, batch.input_ids.shape[1])  # fixed old logprobs: the loss has a value
        with torch.no_grad():
            lp = token_logprobs(forward_logits(model, batch), batch.input_ids)
        adv = torch.tensor([1.0, -1.0])
        return float(grpo_loss(lp, adv, batch.completion_mask[:, 1:], old_logprobs=old, clip_eps=10.0).loss)

    other = two_turns(reward=0.0)
    base = loss_of([two_turns(tail_obs=(30, 31)), other])
    assert loss_of([two_turns(tail_obs=(30, 32)), other]) == pytest.approx(base, abs=0)  # trailing observation
    changed_model = Trajectory(0, (Turn((1, 2, 3), (5, 11), (-1.0, -1.5)),) + two_turns(tail_obs=(30, 31)).turns[1:], 1.0)
    assert loss_of([changed_model, other]) != pytest.approx(base, abs=1e-6)


def test_advantages_are_group_normalised_per_task() -> None:
    trs = [Trajectory(g, (Turn((1,), (2,)),), r) for g, r in ((0, 1.0), (0, 0.0), (1, 1.0), (1, 1.0))]
    adv = trajectory_advantages(trs)
    assert adv[0] > 0 > adv[1]
    assert adv[2] == adv[3] == 0  # a zero-variance group teaches nothing


def test_teacher_rows_put_the_hint_before_that_turn_only() -> None:
    tr = two_turns(hint=(33, 34))
    [(student, teacher)] = tr.teacher_rows()
    flat = [t for seg, _ in teacher for t in seg]
    assert flat == [1, 2, 3, 5, 6, 20, 21, 22, 33, 34, 7, 8, 9]
    assert [t for seg, m in teacher if m for t in seg] == [7, 8, 9]  # only turn 2's model tokens are targets
    assert [t for seg, m in student if m for t in seg] == [7, 8, 9]
    assert two_turns().teacher_rows() == []


def test_step_learns_and_kl_is_zero_without_hints() -> None:
    model = tiny_llama()
    trainer = TrajectoryTrainer(model, PAD, TrainerConfig(optimizer="adamw", lr=3e-2, kl_coef=1.0))
    good = Trajectory(0, (Turn((1, 2), (5, 6)), Turn((20,), (7,))), 1.0)
    bad = Trajectory(0, (Turn((1, 2), (10, 11)), Turn((20,), (12,))), 0.0)

    def logp(tr: Trajectory) -> float:
        batch = trajectory_batch([tr], PAD)
        with torch.no_grad():
            lp = token_logprobs(forward_logits(model, batch), batch.input_ids)
        return float((lp * batch.completion_mask[:, 1:]).sum())

    before = logp(good) - logp(bad)
    stats = trainer.step_trajectories([good, bad])
    assert stats.kl == 0.0 and stats.hinted == 0 and stats.tokens == 6
    for _ in range(3):
        trainer.step_trajectories([good, bad])
    assert logp(good) - logp(bad) > before


def test_feedback_kl_pulls_the_hinted_turn_toward_the_teacher() -> None:
    model = tiny_llama(1)
    trainer = TrajectoryTrainer(model, PAD, TrainerConfig(optimizer="adamw", lr=1e-2, kl_coef=1.0))
    tr = Trajectory(0, (Turn((1, 2), (5, 6)), Turn((20, 21), (7, 8), (), (33, 34), "unknown_tool")), 0.0)
    [(student, teacher)] = tr.teacher_rows()
    from taskforge.rl.feedback import feedback_kl
    from taskforge.rl.grpo import segment_batch

    def kl() -> float:
        s, t = segment_batch([student], PAD), segment_batch([teacher], PAD)
        with torch.no_grad():
            out = feedback_kl(forward_logits(model, s), s.completion_mask, forward_logits(model, t), t.completion_mask)
        assert out.tokens == 2  # the hinted turn's two model tokens, nothing else
        return float(out.mean)

    first = kl()
    stats = trainer.step_trajectories([tr, tr])  # equal rewards: zero advantage, only the KL acts
    assert stats.hinted == 2 and stats.kl == pytest.approx(first, rel=1e-4)
    for _ in range(5):
        trainer.step_trajectories([tr, tr])
    assert kl() < first
