"""Turn a language model's completion into a patch against the broken workspace.

A completion is either a unified diff (taken as is, via ``taskforge.rl.answer_patch.extract_patch``) or
Python code: the implementation of the deleted feature. Code is spliced into the broken file with
libcst: every top-level ``def``/``class`` of the completion replaces the definition of the same name in
the file (at module level or inside a class, so a stubbed method is replaced in place); a definition the
file does not have (the ``delete`` strategy removed it) is appended at the end of the module. The
result is diffed against the broken file with ``taskforge.core.patches.diff_file`` (a git-style patch).
Untouched code keeps its exact bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from taskforge.core.patches import diff_file
from taskforge.rl.answer_patch import extract_patch

_CODE_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)

Definition = cst.FunctionDef | cst.ClassDef


@dataclass(frozen=True, slots=True)
class Proposal:
    """What a completion became: the patch, and what the feedback diagnosis needs."""

    patch: str  # '' when nothing could be made of the completion (scores 0)
    code: str  # the code the model wrote ('' for a diff completion)
    path: str = ""  # the file the code went into
    module_source: str = ""  # that file after splicing ('' when the code did not parse)
    expected_signature: str = ""  # the header of the definition it replaced, e.g. 'def f(a, b=1)'


def extract_code(completion: str) -> str:
    """The code of a completion: the first fenced block if there is one, else the whole text."""
    m = _CODE_FENCE.search(completion)
    return (m.group(1) if m else completion).strip("\n") + "\n"


def definitions(code: str) -> list[Definition]:
    """Top-level functions and classes of ``code`` ([] when it does not parse)."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return []
    return [n for n in module.body if isinstance(n, cst.FunctionDef | cst.ClassDef)]


class _Replace(cst.CSTTransformer):
    def __init__(self, new: Mapping[str, Definition]) -> None:
        self.new = new
        self.replaced: dict[str, Definition] = {}
        self.depth = 0  # function nesting: definitions inside functions are never targets

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return False

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.BaseStatement:
        self.depth -= 1
        return self._swap(original, updated)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.BaseStatement:
        return self._swap(original, updated)

    def _swap(self, original: Definition, updated: Definition) -> cst.BaseStatement:
        name = original.name.value
        if self.depth == 0 and name in self.new and name not in self.replaced \
                and type(self.new[name]) is type(original):
            self.replaced[name] = original
            return self.new[name].with_changes(leading_lines=original.leading_lines)
        return updated


def splice(source: str, code: str) -> tuple[str, dict[str, Definition]] | None:
    """``source`` with the definitions of ``code`` spliced in (see module doc), and what they replaced.

    ``None`` when ``code`` or ``source`` does not parse, or ``code`` defines nothing.
    """
    new = definitions(code)
    if not new:
        return None
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None
    by_name = {d.name.value: d for d in new}  # libcst re-indents a node to wherever it is placed
    replacer = _Replace(by_name)
    out = module.visit(replacer)
    two_blank = [cst.EmptyLine(), cst.EmptyLine()]
    missing = [by_name[d.name.value].with_changes(leading_lines=two_blank)
               for d in new if d.name.value not in replacer.replaced]
    if missing:
        out = out.with_changes(body=[*out.body, *missing])
    return out.code, replacer.replaced


def header(node: Definition) -> str:
    """``def name(params)`` / ``class Name(bases)`` of a definition, without body or decorators."""
    empty = cst.Module(body=[])
    if isinstance(node, cst.FunctionDef):
        prefix = "async def" if node.asynchronous else "def"
        return f"{prefix} {node.name.value}({empty.code_for_node(node.params)})"
    bases = ", ".join(empty.code_for_node(a) for a in node.bases)
    return f"class {node.name.value}({bases})" if bases else f"class {node.name.value}"


def completion_to_patch(completion: str, files: Mapping[str, str]) -> Proposal:
    """The patch a completion stands for, against ``files`` ({path: text} of the relevant broken files)."""
    diff = extract_patch(completion)
    if diff:
        return Proposal(diff, "")
    code = extract_code(completion)
    if not files:
        return Proposal("", code)
    new_names = {d.name.value for d in definitions(code)}
    target = next((p for p, text in files.items() if any(re.search(rf"(?m)^\s*(?:async\s+def|def|class)\s+{n}\b",
                                                               text) for n in new_names)), next(iter(files)))
    result = splice(files[target], code)
    if result is None:
        return Proposal("", code, target)
    spliced, replaced = result
    signature = next((header(d) for d in replaced.values() if isinstance(d, cst.FunctionDef)), "")
    return Proposal(diff_file(target, files[target], spliced), code, target, spliced, signature)
