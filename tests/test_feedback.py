"""Targeted textual feedback: hints from explainable failures, and the student/teacher KL on one message."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from taskforge.rl.feedback import diagnose, feedback_kl, token_kl  # noqa: E402
from taskforge.rl.grpo import TokenBatch, forward_logits  # noqa: E402
from taskforge.rl.trainer import GRPOTrainer, TokenRollout, TrainerConfig  # noqa: E402

pytestmark = pytest.mark.torch

PAD = 0
MODULE = '''import re

_WORD = re.compile(r"\\w+")


def helper(text):
    return _WORD.findall(text)


def count_words(text, lower=False):
{body}
'''


def tiny_llama(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg)


# --- hints -----------------------------------------------------------------------------------------
def test_syntax_error_hint_names_the_line() -> None:
    hint = diagnose("def count_words(text, lower=False):\n    return len(helper(text)\n")
    assert hint is not None and hint.kind == "syntax_error" and "line" in hint.text


def test_undefined_name_found_in_the_real_module_scope() -> None:
    code = "def count_words(text, lower=False):\n    return len(tokenize(text)) + len(helper(text))\n"
    source = MODULE.format(body="    return len(tokenize(text)) + len(helper(text))")
    hint = diagnose(code, module_source=source)
    assert hint is not None and hint.kind == "undefined_name"
    assert "`tokenize`" in hint.text and "helper" not in hint.text and "`len`" not in hint.text
    # the same code is fine where the module defines everything it calls
    ok = MODULE.format(body="    return len(helper(text))")
    assert diagnose("def count_words(text, lower=False):\n    return len(helper(text))\n", module_source=ok) is None


def test_name_error_from_test_output() -> None:
    hint = diagnose("def f():\n    return g()\n", module_source="def g():\n    return 1\n\n\ndef f():\n    return g()\n",
                    error_text="E   NameError: name 'undefined_thing' is not defined")
    assert hint is not None and "`undefined_thing`" in hint.text


def test_wrong_signature_from_test_output_and_from_the_stub() -> None:
    hint = diagnose("def count_words(text):\n    return 1\n",
                    error_text="TypeError: count_words() takes 1 positional argument but 2 were given",
                    expected_signature="def count_words(text, lower=False)")
    assert hint is not None and hint.kind == "wrong_signature" and "count_words(text, lower=False)" in hint.text
    static = diagnose("def count_words(text):\n    return 1\n", expected_signature="def count_words(text, lower=False)")
    assert static is not None and static.kind == "wrong_signature" and "takes 1 parameter(s) but must take 2" in static.text
    assert diagnose("def count_words(text, lower=False):\n    return 1\n",
                    expected_signature="def count_words(text, lower=False)") is None


# --- KL ----------------------------------------------------------------------------------------------
def _logits(model: torch.nn.Module, prompt: list[int], hint: list[int], message: list[int]) -> tuple:
    b = TokenBatch.build([prompt + hint], [message], PAD)
    return forward_logits(model, b), b.completion_mask


def test_kl_is_exactly_zero_when_the_hint_is_empty() -> None:
    model = tiny_llama()
    prompt, message = [1, 2, 3, 4], [10, 11, 12]
    s_logits, s_target = _logits(model, prompt, [], message)
    with torch.no_grad():
        t_logits, t_target = _logits(model, prompt, [], message)  # a real teacher forward, empty hint
    assert float(feedback_kl(s_logits, s_target, t_logits, t_target).mean.detach()) == 0.0
    shortcut = feedback_kl(s_logits, s_target, None)  # what the trainer does for an empty hint
    assert float(shortcut.mean.detach()) == 0.0 and torch.count_nonzero(shortcut.per_token) == 0
    trainer = GRPOTrainer(model, PAD, TrainerConfig(optimizer="adamw", kl_coef=1.0))
    stats = trainer.step([TokenRollout(0, tuple(prompt), tuple(message), 0.0, hint_ids=()),
                          TokenRollout(0, tuple(prompt), (13, 14), 0.0)])
    assert stats.kl == 0.0 and stats.hinted == 0


def test_kl_is_zero_outside_the_target_message_and_positive_on_it() -> None:
    model = tiny_llama()
    prompt, hint, message = [1, 2, 3, 4, 5], [30, 31, 32], [10, 11, 12, 13]
    s_logits, s_target = _logits(model, prompt, [], message + [14, 15])  # message followed by other tokens
    s_target = s_target.clone()
    s_target[0, len(prompt) + len(message):] = False  # the target is the message only
    with torch.no_grad():
        t_logits, t_target = _logits(model, prompt, hint, message + [14, 15])
    t_target = t_target.clone()
    t_target[0, len(prompt) + len(hint) + len(message):] = False
    kl = feedback_kl(s_logits, s_target, t_logits, t_target)
    on = s_target[0, 1:]
    assert kl.tokens == len(message) - 0  # every message token is predicted from a position inside the row
    assert torch.all(kl.per_token[0][on] > 0)
    assert torch.count_nonzero(kl.per_token[0][~on]) == 0
    assert float(kl.mean) > 0


def test_teacher_is_detached_gradient_flows_only_through_the_student() -> None:
    s = torch.randn(3, 7, requires_grad=True)
    t = torch.randn(3, 7, requires_grad=True)
    token_kl(s, t).sum().backward()
    assert s.grad is not None and float(s.grad.abs().sum()) > 0
    assert t.grad is None
    assert torch.all(token_kl(s.detach(), t.detach()) >= 0)


def test_kl_positive_and_decreasing_when_the_student_is_trained_toward_the_hinted_teacher() -> None:
    torch.set_num_threads(1)
    model = tiny_llama(seed=3)
    prompt, hint = (1, 2, 3, 4, 5, 6), (30, 31, 32, 33)
    messages = [(10, 11, 12, 13, 14), (15, 16, 17, 18)]
    # equal rewards: the policy-gradient term is zero, only the feedback KL trains
    rollouts = [TokenRollout(0, prompt, m, 0.0, hint_ids=hint) for m in messages]
    trainer = GRPOTrainer(model, PAD, TrainerConfig(optimizer="adamw", lr=1e-3, kl_coef=1.0))
    kls = [trainer.step(rollouts).kl for _ in range(12)]
    print("feedback KL over steps:", [round(k, 6) for k in kls])
    assert all(k > 0 for k in kls)
    assert all(b < a for a, b in zip(kls[:5], kls[1:5], strict=False))  # strictly decreasing at first
    assert max(kls[6:]) < 0.5 * kls[0]  # and it stays down
