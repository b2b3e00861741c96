"""Problem statements: what the agent is told about the deleted feature (never its body or tests).

``build_context(deletion, index, repo_root)`` gathers what a writer may use: the deleted entities'
names, kinds, modules, decorators, signatures and docstrings, and the places in the remaining
*non-test* code that use them (the call-site lines are visible to the agent anyway). Bodies, test
files and test names never enter the context, so no writer can leak them.

Writers follow the ``StatementWriter`` protocol. ``OfflineWriter`` (the default) renders a Markdown
template. ``OpenAICompatibleWriter`` asks an OpenAI-compatible ``/chat/completions`` endpoint to
rephrase the same context and falls back to the offline text on any failure.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from generators.deletion import Deletion
from generators.deletion_build import USE_KINDS
from generators.static_index import StaticIndex
from taskforge.core.entities import Entity, EntityKind

MAX_USAGES = 8
USAGE_KINDS = USE_KINDS | {"import", "reexport", "all"}


@dataclass(frozen=True, slots=True)
class EntitySpec:
    qualname: str
    kind: str
    module: str
    file: str
    signature: str
    decorators: tuple[str, ...] = ()
    docstring: str = ""
    role: str = "target"  # target | member | dependent | stubbed | helper

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k in self.__slots__
                for v in [getattr(self, k)]}


@dataclass(frozen=True, slots=True)
class ProblemContext:
    repo: str
    strategy: str
    target: EntitySpec
    others: tuple[EntitySpec, ...] = ()  # members, dependents and helpers that were deleted too
    usages: tuple[str, ...] = ()  # "path:line: code" of remaining non-test uses
    module_file: str = ""  # for the module strategy: the file to recreate
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "strategy": self.strategy, "target": self.target.to_dict(),
                "others": [o.to_dict() for o in self.others], "usages": list(self.usages),
                "module_file": self.module_file}


@runtime_checkable
class StatementWriter(Protocol):
    name: str

    def write(self, ctx: ProblemContext) -> str:
        ...


def _spec(e: Entity, role: str, index: StaticIndex) -> EntitySpec:
    mod = index.module_for_file(e.file)
    return EntitySpec(e.qualname, e.kind.value, mod.qualname if mod is not None else e.module, e.file,
                      e.signature, e.decorators, e.docstring, role)


def build_context(deletion: Deletion, index: StaticIndex, repo_root: Path, repo: str = "") -> ProblemContext:
    target = index.entity(deletion.target)
    deleted = [index.entity(q) for q in deletion.deleted if q in index]
    others: list[EntitySpec] = []
    for e in deleted:
        if e.qualname == target.qualname:
            continue
        if e.qualname in deletion.stubbed:
            role = "stubbed"
        elif e.qualname in deletion.dependents:
            role = "dependent"
        elif e.qualname in deletion.helpers:
            role = "helper"
        else:
            role = "member"
        if role == "member" and target.kind is EntityKind.MODULE and e.is_private:
            continue  # a module's private internals are the implementer's choice
        others.append(_spec(e, role, index))
    usages: list[str] = []
    seen: set[tuple[str, int]] = set()
    for e in deleted:
        for r in e.references:
            if r.is_test or r.kind not in USAGE_KINDS or (r.file, r.line) in seen:
                continue
            if any(index.ref_inside(r, o) or (o.kind is EntityKind.MODULE and r.file == o.file) for o in deleted):
                continue
            seen.add((r.file, r.line))
            usages.append(f"{r.file}:{r.line}: {_line(repo_root, r.file, r.line)}")
    return ProblemContext(repo=repo or target.qualname.split(".", 1)[0], strategy=deletion.strategy,
                          target=_spec(target, "target", index), others=tuple(others),
                          usages=tuple(sorted(usages)[:MAX_USAGES]),
                          module_file=target.file if target.kind is EntityKind.MODULE else "")


def _line(root: Path, rel: str, line: int) -> str:
    try:
        return (Path(root) / rel).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def _describe(spec: EntitySpec) -> str:
    deco = "".join(f"@{d}\n" for d in spec.decorators)
    return f"```python\n{deco}{spec.signature}\n```" if spec.signature else f"`{spec.qualname}`"


def _doc(spec: EntitySpec) -> str:
    if not spec.docstring:
        return ""
    return "\n".join("> " + line if line else ">" for line in spec.docstring.splitlines()) + "\n"


class OfflineWriter:
    """Template-based statement from the context alone (deterministic, no network)."""

    name = "offline"

    def write(self, ctx: ProblemContext) -> str:
        t = ctx.target
        kind = t.kind
        parts: list[str] = []
        if ctx.strategy == "stub":
            what = "every method of the class" if kind == "class" else f"the {kind}"
            parts.append(f"# Implement `{t.qualname}`\n")
            parts.append(f"In `{t.file}`, {what} `{t.qualname}` currently raises `NotImplementedError`. "
                         "Implement it so that it behaves as documented and as the rest of the "
                         f"`{ctx.repo}` code base expects. Keep the signature unchanged.\n")
        elif ctx.strategy == "module":
            parts.append(f"# Add the module `{t.qualname}`\n")
            parts.append(f"The module `{t.qualname}` (file `{ctx.module_file}`) is missing from `{ctx.repo}`. "
                         "Create it and wire it back into the package so that the features below work.\n")
            if t.docstring:
                parts.append("Its purpose:\n\n" + _doc(t))
        else:
            parts.append(f"# Add `{t.qualname}`\n")
            owner = t.qualname[: t.qualname.rfind(".")]
            where = f"class `{owner}` in module `{t.module}`" if kind == "method" else f"module `{t.module}`"
            parts.append(f"The {kind} `{t.qualname.rsplit('.', 1)[-1]}` is missing from {where} "
                         f"(`{t.file}`). Implement it there, and make it available where the rest of "
                         f"`{ctx.repo}` expects it (package exports included).\n")
        if ctx.strategy != "module":
            parts.append("Signature:\n\n" + _describe(t) + "\n")
            if t.docstring:
                parts.append("Documentation:\n\n" + _doc(t))
        groups = [("member", "It must provide:"),
                  ("dependent", "These uses of it were removed as well and must be restored:"),
                  ("stubbed", "These functions that use it now raise `NotImplementedError` (signature and "
                              "docstring kept); implement them too:"),
                  ("helper", "The original implementation also had these private helpers (optional):")]
        for role, title in groups:
            specs = [o for o in ctx.others if o.role == role and (role != "member" or _public(o))]
            if not specs:
                continue
            parts.append(title + "\n")
            for o in specs:
                parts.append(f"- `{o.qualname}`\n\n" + _indent(_describe(o)) + "\n"
                             + (_indent(_doc(o)) if o.docstring else ""))
        if ctx.usages:
            parts.append("Where the rest of the code base refers to it (as it was before the removal):\n")
            parts.append("```\n" + "\n".join(ctx.usages) + "\n```\n")
        parts.append("Do not change the tests; they will be run against your implementation.\n")
        return "\n".join(p.rstrip("\n") + "\n" for p in parts).rstrip("\n") + "\n"


def _public(spec: EntitySpec) -> bool:
    """No private component below the module (``_Cls.meth`` and ``Cls._meth`` are private; dunders are not)."""
    rel = spec.qualname[len(spec.module) + 1:] if spec.qualname.startswith(spec.module + ".") else spec.qualname
    return all(not n.startswith("_") or (n.startswith("__") and n.endswith("__")) for n in rel.split("."))


def _indent(text: str) -> str:
    return "".join("  " + line if line.strip() else line for line in text.splitlines(keepends=True))


@dataclass(frozen=True, slots=True)
class OpenAICompatibleWriter:
    """Rephrases the offline statement with a chat model; the model sees only the context."""

    base_url: str  # e.g. "http://localhost:8000/v1"
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    name: str = "openai-compatible"

    def write(self, ctx: ProblemContext) -> str:
        fallback = OfflineWriter().write(ctx)
        body = {"model": self.model, "temperature": 0.2, "messages": [
            {"role": "system", "content": "You write GitHub-issue-style feature requests for a code base. "
             "Use only the facts given. Keep every signature exactly. Never invent implementation details."},
            {"role": "user", "content": "Rewrite this as a clear feature request:\n\n" + fallback
             + "\n\nContext (JSON):\n" + json.dumps(ctx.to_dict())},
        ]}
        req = urllib.request.Request(self.base_url.rstrip("/") + "/chat/completions",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {os.environ.get(self.api_key_env, '')}"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 (user-given URL)
                text = json.load(resp)["choices"][0]["message"]["content"]
        except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError, TimeoutError):
            return fallback
        return text if isinstance(text, str) and text.strip() else fallback


def write_statement(deletion: Deletion, index: StaticIndex, repo_root: Path,
                    writer: StatementWriter | None = None, repo: str = "") -> str:
    if writer is None and deletion.strategy in INTERFACE_STRATEGIES:
        return write_interface_statement(deletion, index, repo_root, repo)
    return (writer or OfflineWriter()).write(build_context(deletion, index, repo_root, repo))


# -- features and compositions: every interface to restore, FeatureBench-style -----------------------------
INTERFACE_STRATEGIES = frozenset({"feature", "compose"})


def interface_entities(deletion: Deletion, index: StaticIndex) -> list[Entity]:
    """The top-level deleted entities (classes with their public methods listed under them), by file."""
    ents = [index.entity(q) for q in deletion.deleted if q in index]
    tops = [e for e in ents if e.kind is not EntityKind.MODULE
            and not any(o is not e and o.kind is not EntityKind.MODULE and o.file == e.file
                        and o.start_line <= e.start_line and e.end_line <= o.end_line for o in ents)]
    return sorted(tops, key=lambda e: (e.file, e.start_line))


def render_interface(e: Entity, index: StaticIndex, heading: str) -> str:
    """One interface: heading, path, signature (with decorators), docstring, public methods of a class."""
    spec = _spec(e, "target", index)
    parts = [f"{heading} `{e.qualname}` ({e.kind.value} in `{e.file}`)\n", _describe(spec) + "\n"]
    if e.docstring:
        parts.append(_doc(spec))
    if e.kind is EntityKind.CLASS:
        methods = [m for m in index.members(e.qualname) if m.kind is EntityKind.METHOD
                   and _public(_spec(m, "member", index)) and m.qualname.count(".") == e.qualname.count(".") + 1]
        if methods:
            parts.append("Methods:\n")
            for m in methods:
                ms = _spec(m, "member", index)
                parts.append(f"- `{m.qualname.rsplit('.', 1)[-1]}`\n\n" + _indent(_describe(ms)) + "\n"
                             + (_indent(_doc(ms)) if m.docstring else ""))
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)


def write_interface_statement(deletion: Deletion, index: StaticIndex, repo_root: Path, repo: str = "") -> str:
    """A statement listing every interface to restore (path, signature, docstring) and nothing of the bodies."""
    ctx = build_context(deletion, index, repo_root, repo)
    tops = interface_entities(deletion, index)
    removed_files = sorted(f for f, t in deletion.files_after.items() if t is None)
    public = [e for e in tops if not e.is_private]
    private = [e for e in tops if e.is_private]
    names = ", ".join(f"`{e.qualname}`" for e in public[:4]) + (" and more" if len(public) > 4 else "")
    k = int(deletion.extra.get("k", 1))
    parts = [f"# Implement {'these features' if k > 1 else 'the feature'} of `{ctx.repo}`: {names}\n",
             f"The code below is missing from `{ctx.repo}` ({len(tops)} definitions over "
             f"{len({e.file for e in tops} | set(removed_files))} files). Implement every interface listed, in the "
             "file given and with the signature given, so that it behaves as documented and as the rest of the "
             "code base expects; export it again wherever the package exported it (`__all__`, package "
             "`__init__` modules).\n"]
    if removed_files:
        parts.append("These modules are missing entirely; create them:\n\n"
                     + "\n".join(f"- `{f}`" for f in removed_files) + "\n")
    parts.append("## Interfaces to restore\n")
    for i, e in enumerate(public, 1):
        parts.append(render_interface(e, index, f"### {i}."))
    if private:
        parts.append("## Private helpers the original had (their shape is yours to choose)\n")
        for e in private:
            parts.append(f"- `{e.qualname}` in `{e.file}`: `{e.signature or e.qualname}`\n")
    if ctx.usages:
        parts.append("## Where the rest of the code base refers to them (as it was before the removal)\n")
        parts.append("```\n" + "\n".join(ctx.usages) + "\n```\n")
    parts.append("Do not change the tests; they will be run against your implementation.\n")
    return "\n".join(p.rstrip("\n") + "\n" for p in parts).rstrip("\n") + "\n"
