"""Targeted textual feedback: a hint from what went wrong, and a KL that pulls the student toward it.

For one chosen message of a rollout (here: the completion whose patch failed with an explainable error
— a name that does not exist, a syntax error, a wrong signature), ``diagnose`` builds a one-line hint.
The teacher is the same model with the hint inserted into the local context just before that message
(``prompt + hint + message``); the student is the model with the original context (``prompt +
message``). Both score the *same* message tokens; the loss adds

    coef * mean over message tokens t of  KL( pi_student(. | ctx_t) || pi_teacher(. | ctx_t + hint) )

and is masked everywhere else (prompt, hint, padding, other rollouts). The teacher costs one extra
forward pass under ``no_grad`` (no sampling: the message was already sampled by the student); the
student's logits are the ones the GRPO loss already computed. When the hint is empty the teacher context
equals the student context, so its logits *are* the student's: they are reused (detached) and the KL is
exactly 0.

KL direction and estimator. We use the reverse KL, KL(student || teacher), computed *exactly* over the
whole vocabulary at each message position: ``sum_v p_s(v) (log p_s(v) - log p_t(v))``.
- Reverse, because the message tokens were sampled from the student, so the positions are on-policy for
  the student, and reverse KL is mode-seeking: the student moves its mass onto what the hinted teacher
  finds likely instead of spreading it over everything the teacher allows (on-policy distillation,
  Agarwal et al. 2024 "GKD"; Thinking Machines 2025 "On-policy distillation").
- Exact over the vocabulary, because we have both full distributions at every position for free (the
  logits exist anyway) and V is small next to the forward pass. The sampled estimators (k1 =
  ``log p_s(y) - log p_t(y)`` at the sampled token, k3 = ``r - 1 - log r``) only see one token per
  position: k1 is unbiased but high-variance and negative on many tokens; k3 is non-negative but its
  gradient as a loss is biased. The exact sum has neither problem, is >= 0 per token, and is 0 iff the
  two distributions agree.
The teacher is detached: gradients flow only through the student's distribution.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

import libcst as cst
import torch
from libcst.metadata import MetadataWrapper, ScopeProvider
from torch import Tensor

HINT_KINDS = ("syntax_error", "undefined_name", "wrong_signature")

_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")
_ARITY = re.compile(r"TypeError: ([A-Za-z_][\w.]*)\(\) (takes .*? but \d+ (?:was|were) given|"
                    r"missing \d+ required (?:positional|keyword-only) arguments?: .*|"
                    r"got an unexpected keyword argument '\w+')")


@dataclass(frozen=True, slots=True)
class Hint:
    """What went wrong, as one short line the teacher reads before the message."""

    kind: str  # one of HINT_KINDS
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


def diagnose(code: str, module_source: str | None = None, error_text: str = "",
             expected_signature: str = "") -> Hint | None:
    """A hint for ``code`` (the generated implementation), or ``None`` when nothing explainable is wrong.

    ``module_source`` is the file with ``code`` spliced in (to look names up in their real scope);
    ``error_text`` is test output (``NameError``/``TypeError`` lines); ``expected_signature`` is the
    ``def`` line the task asks for. Checks, first match wins: syntax, undefined names, signature.
    """
    try:
        compile(code, "<completion>", "exec")
    except SyntaxError as exc:
        where = f" at line {exc.lineno}" if exc.lineno else ""
        return Hint("syntax_error", f"Hint: the previous attempt had a SyntaxError{where} ({exc.msg}); "
                                    "write valid Python.")
    own = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))  # report only names the completion itself uses
    undefined = [n for n in _undefined_names(module_source if module_source is not None else code) if n in own]
    m = _NAME_ERROR.search(error_text)
    if m and m.group(1) not in undefined:
        undefined.insert(0, m.group(1))
    if undefined:
        names = ", ".join(f"`{n}`" for n in undefined[:3])
        return Hint("undefined_name", f"Hint: {names} is not defined in this module; use only names that "
                                      "exist here or define them.")
    m = _ARITY.search(error_text)
    if m:
        return Hint("wrong_signature", f"Hint: calling `{m.group(1)}` failed ({m.group(2)}); keep the "
                                       f"signature the callers use{_sig_suffix(expected_signature)}.")
    if expected_signature:
        got = _def_arity(code)
        want = _def_arity(expected_signature + ("" if expected_signature.rstrip().endswith(":") else ":")
                          + "\n    pass\n")
        if got is not None and want is not None and got != want:
            return Hint("wrong_signature", f"Hint: the function takes {got[0]} parameter(s) but must take "
                                           f"{want[0]}{_sig_suffix(expected_signature)}.")
    return None


def _sig_suffix(signature: str) -> str:
    return f": `{signature.strip().rstrip(':')}`" if signature else ""


def _undefined_names(source: str) -> list[str]:
    """Names read somewhere in ``source`` that no scope (module, enclosing, builtins) defines."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return []
    if re.search(r"(?m)^\s*from\s+\S+\s+import\s+\*", source):
        return []  # a star import can bind anything: no name is provably undefined
    wrapper = MetadataWrapper(module)
    scopes = {s for s in wrapper.resolve(ScopeProvider).values() if s is not None}
    found: list[str] = []
    for scope in scopes:
        for access in scope.accesses:
            name = access.node.value if isinstance(access.node, cst.Name) else None
            if name and not access.referents and not hasattr(builtins, name) and name not in found \
                    and name not in ("__file__", "__name__", "__doc__", "__spec__", "__package__"):
                found.append(name)
    return sorted(found)


def _def_arity(code: str) -> tuple[int, tuple[str, ...]] | None:
    """(number of parameters, their names) of the first function defined in ``code``."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return None
    for node in module.body:
        if isinstance(node, cst.FunctionDef):
            p = node.params
            names = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
            return len(names), tuple(names)
    return None


def target_logits(logits: Tensor, target_mask: Tensor) -> Tensor:
    """``(N, V)``: the logits that predict the target tokens (row-major order), from ``(B, T, V)``."""
    return logits[:, :-1][target_mask[:, 1:]]


def token_kl(student_logits: Tensor, teacher_logits: Tensor) -> Tensor:
    """Exact reverse KL(student || teacher) per row of ``(N, V)`` logits; the teacher is detached."""
    log_s = torch.log_softmax(student_logits.float(), dim=-1)
    log_t = torch.log_softmax(teacher_logits.detach().float(), dim=-1)
    return (log_s.exp() * (log_s - log_t)).sum(-1)


@dataclass(frozen=True, slots=True)
class FeedbackKL:
    mean: Tensor  # scalar: mean KL over the target tokens (0 when there are none), differentiable
    per_token: Tensor  # (B, T-1) in the student's layout: KL at each predicted token, 0 off target
    tokens: int


def feedback_kl(student_logits: Tensor, student_target: Tensor, teacher_logits: Tensor | None,
                teacher_target: Tensor | None = None) -> FeedbackKL:
    """KL between student and teacher on the target message only.

    ``student_target``/``teacher_target`` (``(B, T)`` bool) mark the target message's tokens in each
    layout; every row must mark the same number of tokens in both (the same message). ``teacher_logits
    = None`` means the hint was empty: the teacher context is the student context, KL = 0 exactly.
    """
    s = target_logits(student_logits, student_target)
    if teacher_logits is None:
        t = s.detach()
    else:
        assert teacher_target is not None
        t = target_logits(teacher_logits, teacher_target)
        if t.shape != s.shape:
            raise ValueError(f"student and teacher mark different message tokens: {tuple(s.shape)} vs "
                             f"{tuple(t.shape)}; the hint must only add tokens before the message")
    kl = token_kl(s, t)
    per_token = torch.zeros(student_target[:, 1:].shape, dtype=kl.dtype, device=kl.device)
    per_token = per_token.masked_scatter(student_target[:, 1:], kl)
    mean = kl.mean() if kl.numel() else student_logits.sum() * 0.0
    return FeedbackKL(mean, per_token, int(kl.numel()))
