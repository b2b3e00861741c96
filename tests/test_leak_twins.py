"""The leak audit and a near-twin of the deleted body in the remaining code (idna 3.20).

idna's ``core.encode`` and ``core.decode`` share 80% of their lines. The remaining ``core.py`` of a stub of
``encode`` once counted as a *copy* of ``encode`` (a file with most of a deleted body's lines), so the
shared lines stayed fingerprints and were found in it: every stub of ``encode`` was ``leak_found``. A file
is a copy only when the deleted entity's own place in it (``encode``, ``UUID._deserialize``) holds the
body; ``build/lib/idna/core.py``, a real copy, is still found.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from taskforge.audit.audit import audit_task_workspace
from taskforge.audit.fingerprints import fingerprint

ENCODE = '''def encode(s, strict=False):
    labels = s.split(".") if strict else _dots_re.split(s)
    if not labels or labels == [""]:
        raise IDNAError("Empty domain")
    if labels[-1] == "":
        del labels[-1]
        trailing_dot = True
    for label in labels:
        s = alabel(label)
        if s:
            result.append(s)
        else:
            raise IDNAError("Empty label")
    return b".".join(result)
'''
DECODE = ENCODE.replace("def encode", "def decode").replace("alabel", "ulabel").replace('b".".join', '".".join')
STUB = "def encode(s, strict=False):\n    raise NotImplementedError\n"


def _stubbed(source: str, name: str) -> str:
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines(keepends=True)
    indent = " " * node.body[0].col_offset
    body_start = node.body[1].lineno if ast.get_docstring(node) else node.body[0].lineno
    return "".join([*lines[:body_start - 1], f"{indent}raise NotImplementedError\n", *lines[node.end_lineno:]])


def test_a_sibling_that_shares_most_lines_is_remaining_code_not_a_copy(tmp_path: Path) -> None:
    remaining = (STUB + "\n\n" + DECODE).encode()
    fps = fingerprint({"pkg.core.encode": ENCODE}, [remaining])
    assert not [f for f in fps.fingerprints if f.kind == "line" and f.text.encode() in remaining.replace(b" ", b"")]
    copy = ("def helper():\n    pass\n\n\n" + ENCODE).encode()  # the entity itself, at its own place
    kept = fingerprint({"pkg.core.encode": ENCODE}, [STUB.encode(), copy])
    assert any(f.text == 'labels=s.split(".")ifstrictelse_dots_re.split(s)' for f in kept.fingerprints)


@pytest.mark.realrepo
def test_idna_stub_of_encode_passes_and_a_build_copy_is_found(tmp_path_factory: pytest.TempPathFactory,
                                                               tmp_path: Path) -> None:
    from generators.sources import resolve_source

    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    original = Path(resolve_source("pypi:idna==3.20", work).path)
    core = (original / "idna" / "core.py").read_text()
    tree = ast.parse(core)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "encode")
    deleted = {"idna.core.encode": ast.get_source_segment(core, node) or ""}
    ws = tmp_path / "ws"
    shutil.copytree(original / "idna", ws / "idna")
    (ws / "idna" / "core.py").write_text(_stubbed(core, "encode"))
    result = audit_task_workspace(ws, deleted)
    assert result.passed, result.hits
    assert result.fingerprints > 10  # what encode has of its own is still searched
    (ws / "build" / "lib" / "idna").mkdir(parents=True)
    shutil.copy(original / "idna" / "core.py", ws / "build" / "lib" / "idna" / "core.py")
    hits = audit_task_workspace(ws, deleted).hits
    assert {h.path for h in hits} == {"build/lib/idna/core.py"}, hits


def test_a_renamed_verbatim_copy_is_still_a_copy() -> None:
    """An agent reading the workspace gets the answer from a verbatim body under another name just the same."""
    renamed = (STUB + "\n\n" + ENCODE.replace("def encode", "def _old_encode")).encode()
    kept = fingerprint({"pkg.core.encode": ENCODE}, [renamed])
    assert any(f.text == 'labels=s.split(".")ifstrictelse_dots_re.split(s)' for f in kept.fingerprints)
