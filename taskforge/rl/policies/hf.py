"""The ``hf`` policy: a transformers causal LM that writes the deleted feature, trained with GRPO + feedback.

* Model: loaded with transformers from a local directory (``--model PATH``, ``local_files_only``: no
  download ever), or built in code from a config (default: a tiny Llama with a byte-level tokenizer made
  with ``tokenizers``; 256 byte tokens + pad + eos, so any text round-trips).
* Prompt: the relevant files of the broken workspace (the non-test files the task's ``setup_patch``
  touches, read from the workspace the loop's provider materialises), then the problem statement, then
  ``### Implementation``. Left-truncated to ``max_prompt_tokens``, so the statement is always kept.
* Output: ``G`` completions sampled with temperature in one ``generate`` call; each becomes a patch
  (``taskforge.rl.completion_patch``: a unified diff as is, or Python definitions spliced into the
  broken file with libcst).
* ``update(groups)``: for each graded group, the stored token rollouts get their rewards; a rollout that
  failed with an explainable error (syntax error, undefined name, wrong signature) gets a one-line hint
  (``taskforge.rl.feedback.diagnose``) that the teacher sees just before the completion; then one
  ``GRPOTrainer.step`` (GRPO + feedback KL) with Muon or AdamW.

Options (``--policy-opt KEY=VALUE``): ``optimizer`` (muon|adamw), ``lr``, ``kl_coef``, ``clip_eps``,
``temperature``, ``top_p``, ``max_new_tokens``, ``max_prompt_tokens``, ``max_file_chars``, ``arch``
(llama|gpt2), ``hidden``, ``layers``, ``heads``, ``device`` (auto|cpu|cuda), ``feedback`` (1|0),
``checkpoint_dir`` (where ``state_dict`` saves weights and optimizer state for resuming), ``dataset``
(a dataset directory to rebuild workspaces from, when the loop gives no workspace provider).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from taskforge.core.errors import ConfigError
from taskforge.core.patches import patch_paths
from taskforge.core.task import Task
from taskforge.rl.completion_patch import Proposal, completion_to_patch
from taskforge.rl.feedback import diagnose
from taskforge.rl.grading import GradedGroup
from taskforge.rl.policies import PolicyOptions, WorkspaceProvider, dataset_workspaces
from taskforge.rl.trainer import GRPOTrainer, TokenRollout, TrainerConfig

PAD_TOKEN, EOS_TOKEN = "<|pad|>", "<|endoftext|>"


@dataclass(frozen=True, slots=True)
class HFConfig:
    model_path: str = ""  # local model directory; '' = build a tiny model from a config
    arch: str = "llama"  # llama | gpt2 (built-from-config models only)
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    max_positions: int = 1024
    optimizer: str = "muon"
    lr: float = 1e-3
    kl_coef: float = 0.1
    clip_eps: float = 0.2
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 96
    max_prompt_tokens: int = 768
    max_file_chars: int = 6000
    micro_batch: int = 8
    feedback: bool = True
    device: str = "auto"
    checkpoint_dir: str = ""
    dataset: str = ""
    seed: int = 0
    # multi-turn episodes (taskforge.agent.hf_episode): episodes=1 turns the policy into a tool-calling agent
    episodes: bool = False
    max_turns: int = 8
    max_context_tokens: int = 2048
    max_obs_chars: int = 1000
    episode_wall_s: float = 300.0

    @classmethod
    def from_options(cls, options: PolicyOptions) -> HFConfig:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {"model_path": options.model, "temperature": options.temperature,
                                  "seed": options.seed}
        for key, raw in options.extra.items():
            if key not in fields:
                raise ConfigError(f"unknown hf policy option {key!r}; known: {', '.join(sorted(fields))}")
            kind = type(getattr(cls(), key))
            try:
                values[key] = raw.strip().lower() in ("1", "true", "yes") if kind is bool else kind(raw)
            except ValueError as exc:
                raise ConfigError(f"hf policy option {key}={raw!r} is not a {kind.__name__}") from exc
        if values["temperature"] <= 0:
            raise ConfigError(f"hf policy needs temperature > 0 (it samples), got {values['temperature']}")
        return cls(**values)

    def trainer_config(self) -> TrainerConfig:
        return TrainerConfig(optimizer=self.optimizer, lr=self.lr, kl_coef=self.kl_coef if self.feedback else 0.0,
                             clip_eps=self.clip_eps, micro_batch=self.micro_batch)


def byte_tokenizer() -> Any:
    """A byte-level tokenizer built in code (``tokenizers`` BPE without merges): 256 bytes + pad + eos."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD_TOKEN, eos_token=EOS_TOKEN)


IM_START, IM_END = "<|im_start|>", "<|im_end|>"
CHATML_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                   "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def chat_tokenizer() -> Any:
    """``byte_tokenizer`` plus ``<|im_start|>``/``<|im_end|>`` and a ChatML chat template (multi-turn episodes)."""
    tok = byte_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": [IM_START, IM_END]})
    tok.chat_template = CHATML_TEMPLATE
    return tok


def tiny_causal_lm(vocab_size: int, arch: str = "llama", hidden: int = 64, layers: int = 2, heads: int = 4,
                   max_positions: int = 1024, pad_id: int | None = None, eos_id: int | None = None) -> nn.Module:
    """A small randomly initialised causal LM built from a transformers config (no download)."""
    import transformers

    if arch == "llama":
        cfg = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=4 * hidden,
                                       num_hidden_layers=layers, num_attention_heads=heads,
                                       num_key_value_heads=max(1, heads // 2), max_position_embeddings=max_positions,
                                       pad_token_id=pad_id, eos_token_id=eos_id, bos_token_id=eos_id)
        return transformers.LlamaForCausalLM(cfg)
    if arch == "gpt2":
        cfg2 = transformers.GPT2Config(vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=heads,
                                       n_positions=max_positions, pad_token_id=pad_id, eos_token_id=eos_id,
                                       bos_token_id=eos_id)
        return transformers.GPT2LMHeadModel(cfg2)
    raise ConfigError(f"unknown hf arch {arch!r}; expected llama or gpt2")


@dataclass(frozen=True, slots=True)
class _Sample:
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    proposal: Proposal


class HFPolicy:
    name = "hf"

    def __init__(self, model: nn.Module, tokenizer: Any, config: HFConfig | None = None,
                 workspace: WorkspaceProvider | None = None) -> None:
        self.config = config or HFConfig()
        self.model = model
        self.tokenizer = tokenizer
        self.workspace = workspace
        self.pad_id = int(tokenizer.pad_token_id)
        self.eos_id = int(tokenizer.eos_token_id)
        self.trainer = GRPOTrainer(model, self.pad_id, self.config.trainer_config())
        self._pending: dict[str, list[_Sample]] = {}
        self._files: dict[str, dict[str, str]] = {}
        self.updates = 0

    # --- rollouts ----------------------------------------------------------------------------------
    def relevant_files(self, task: Task) -> dict[str, str]:
        """{path: text} of the broken workspace's non-test Python files that the deletion touched."""
        if task.instance_id in self._files:
            return self._files[task.instance_id]
        from generators.static_index import is_test_file

        paths = [p for p in patch_paths(task.setup_patch) if p.endswith(".py") and not is_test_file(p, task.env_spec)]
        files: dict[str, str] = {}
        if self.workspace is not None and paths:
            with self.workspace(task) as root:
                for p in paths:
                    f = Path(root) / p
                    if f.is_file():
                        files[p] = f.read_text(encoding="utf-8", errors="replace")
        self._files[task.instance_id] = files
        return files

    def prompt(self, task: Task) -> str:
        cap = self.config.max_file_chars
        parts = [f"### File: {path}\n{text[-cap:] if len(text) > cap else text}"
                 for path, text in self.relevant_files(task).items()]
        parts.append(f"### Task ({task.repo})\n{task.problem_statement.strip()}")
        parts.append("### Implementation (Python code)\n")
        return "\n\n".join(parts)

    def propose(self, task: Task, n: int) -> list[str]:
        files = self.relevant_files(task)
        ids = self.tokenizer(self.prompt(task), add_special_tokens=False)["input_ids"]
        prompt_ids = tuple(ids[-self.config.max_prompt_tokens:])
        device = self.trainer.device
        self.model.eval()
        generate: Any = self.model.generate  # a transformers GenerationMixin method
        with torch.no_grad():
            out = generate(
                input_ids=torch.tensor([prompt_ids], device=device),
                attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long, device=device),
                do_sample=True, temperature=self.config.temperature, top_p=self.config.top_p, top_k=0,
                max_new_tokens=self.config.max_new_tokens, num_return_sequences=n,
                pad_token_id=self.pad_id, eos_token_id=self.eos_id)
        samples = []
        for row in out[:, len(prompt_ids):].tolist():
            completion = _cut(row, self.eos_id, self.pad_id)
            text = self.tokenizer.decode([t for t in completion if t != self.eos_id], skip_special_tokens=True)
            samples.append(_Sample(prompt_ids, tuple(completion), completion_to_patch(text, files)))
        self._pending.setdefault(task.instance_id, []).extend(samples)
        return [s.proposal.patch for s in samples]

    # --- learning ----------------------------------------------------------------------------------
    def hint_for(self, sample: _Sample, grade: Any) -> tuple[int, ...]:
        """Token ids of the feedback hint for a failed rollout, or () when nothing explainable went wrong."""
        if not self.config.feedback or grade.reward >= 1.0 or not sample.proposal.code.strip():
            return ()
        hint = diagnose(sample.proposal.code, sample.proposal.module_source or None,
                        error_text=str(getattr(grade, "output_tail", "") or ""),
                        expected_signature=sample.proposal.expected_signature)
        if hint is None:
            return ()
        return tuple(self.tokenizer(f"# {hint.text}\n", add_special_tokens=False)["input_ids"])

    def rollouts(self, groups: Sequence[GradedGroup]) -> list[TokenRollout]:
        out: list[TokenRollout] = []
        for gi, group in enumerate(groups):
            pool = list(self._pending.get(group.task.instance_id, ()))
            for patch, grade in zip(group.patches, group.grades, strict=False):
                match = next((i for i, s in enumerate(pool) if s.proposal.patch == patch), None)
                if match is None:
                    continue  # not proposed by this policy instance (e.g. after a resume)
                sample = pool.pop(match)
                if sample.completion_ids:
                    out.append(TokenRollout(gi, sample.prompt_ids, sample.completion_ids, float(grade.reward),
                                            self.hint_for(sample, grade)))
        return out

    def update(self, groups: Sequence[GradedGroup]) -> dict[str, float]:
        rollouts = self.rollouts(groups)
        self._pending.clear()
        if not rollouts:
            return {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "rollouts": 0.0}
        stats = self.trainer.step(rollouts)
        self.updates += 1
        return {**stats.to_dict(), "rollouts": float(len(rollouts)),
                "steps_per_s": 1.0 / stats.seconds if stats.seconds > 0 else 0.0}

    # --- resume ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"name": self.name, "updates": self.updates, "checkpoint": ""}
        if self.config.checkpoint_dir:
            path = Path(self.config.checkpoint_dir) / "hf_policy.pt"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".pt.tmp")
            torch.save({"model": self.model.state_dict(), "optimizer": self.trainer.optimizer.state_dict(),
                        "updates": self.updates}, tmp)
            os.replace(tmp, path)
            state["checkpoint"] = str(path)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.updates = int(state.get("updates", 0))
        ckpt = str(state.get("checkpoint") or "")
        if ckpt:
            if not Path(ckpt).is_file():
                raise ConfigError(f"hf policy checkpoint {ckpt} is missing; start without --resume or restore it")
            data = torch.load(ckpt, map_location=self.trainer.device, weights_only=True)
            self.model.load_state_dict(data["model"])
            self.trainer.optimizer.load_state_dict(data["optimizer"])


def _cut(row: Sequence[int], eos_id: int, pad_id: int) -> list[int]:
    """Generated ids up to and including the first eos; padding dropped."""
    out: list[int] = []
    for t in row:
        if t == eos_id:
            out.append(t)
            break
        if t == pad_id:
            break
        out.append(t)
    return out


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"hf policy device {name!r} asked for, but torch sees no CUDA device; use device=cpu")
    return torch.device(name)


def load_model(config: HFConfig) -> tuple[nn.Module, Any]:
    """(model, tokenizer): from ``config.model_path`` (local files only) or built from a config."""
    if config.model_path:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not Path(config.model_path).is_dir():
            raise ConfigError(f"hf model path {config.model_path!r} is not a directory; give a local "
                              "transformers model directory (no downloads) or leave --model empty for a tiny model")
        tokenizer = AutoTokenizer.from_pretrained(config.model_path, local_files_only=True)
        model: nn.Module = AutoModelForCausalLM.from_pretrained(config.model_path, local_files_only=True)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if config.episodes and not getattr(tokenizer, "chat_template", None):
            tokenizer.add_special_tokens({"additional_special_tokens": [IM_START, IM_END]})
            tokenizer.chat_template = CHATML_TEMPLATE
            model.resize_token_embeddings(len(tokenizer))
        return model, tokenizer
    tokenizer = chat_tokenizer() if config.episodes else byte_tokenizer()
    torch.manual_seed(config.seed)
    model = tiny_causal_lm(len(tokenizer), config.arch, config.hidden, config.layers, config.heads,
                           config.max_positions, tokenizer.pad_token_id, tokenizer.eos_token_id)
    return model, tokenizer


def make_policy(options: PolicyOptions) -> HFPolicy:
    """Factory registered as ``hf`` in ``taskforge.rl.policies.POLICY_FACTORIES``."""
    config = HFConfig.from_options(options)
    model, tokenizer = load_model(config)
    model.to(_device(config.device))
    workspace = options.workspace or (dataset_workspaces(config.dataset) if config.dataset else None)
    if config.episodes:
        from taskforge.agent.hf_episode import HFEpisodePolicy, episode_sessions

        return HFEpisodePolicy(model, tokenizer, config, episode_sessions(options, workspace))
    return HFPolicy(model, tokenizer, config, workspace)
