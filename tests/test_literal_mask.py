"""Large constant-only literals are blanked before indexing, and the index learns exactly the same facts."""

from __future__ import annotations

import ast

from generators import literal_mask
from generators.index_visitor import index_file
from generators.literal_mask import mask_constant_literals

TABLE = ",\n".join(f"    (0x{i:X}, 'ß{i}', -{i}, None)" for i in range(200))
SOURCE = f'''"""A generated table, as in idna's uts46data.py."""
from .core import lookup


def _seg_0(fallback=(1, 2, 3)):
    return [
{TABLE}
    ]


TABLE = tuple(_seg_0())  \f
SMALL = (1, 2)
MIXED = [
{TABLE},
    lookup,
]


class Mapper:
    ROWS = {{{", ".join(f"{i}: {i * 2}" for i in range(100))}}}

    def get(self, key):
        return lookup(self.ROWS, key) or "ü"
'''


def test_masks_constant_tables_and_keeps_every_line(monkeypatch) -> None:
    monkeypatch.setattr(literal_mask, "MIN_CHARS", 0)
    masked = mask_constant_literals(SOURCE)
    assert len(masked) < len(SOURCE) * 0.6  # _seg_0 and ROWS go; MIXED holds a name and stays
    assert masked.count("\n") == SOURCE.count("\n") and "\f" in masked
    ast.parse(masked)
    original, after = SOURCE.split("\n"), masked.split("\n")
    for i, line in enumerate(original):  # lines outside the tables are untouched
        if "0x" not in line and ": " not in line:
            assert after[i].strip() == line.strip(), (i, line)  # a closing bracket may move left
    assert "fallback=(1, 2, 3)" in masked  # a signature is never masked
    assert "lookup," in masked  # a literal holding a name is not constant-only
    assert "SMALL = (1, 2)" in masked


def test_index_facts_are_the_same_masked_or_not(monkeypatch) -> None:
    monkeypatch.setattr(literal_mask, "MIN_CHARS", 0)
    masked = index_file(SOURCE, "pkg/data.py", "pkg.data", False)
    monkeypatch.setattr(literal_mask, "MIN_CHARS", 10**12)
    plain = index_file(SOURCE, "pkg/data.py", "pkg.data", False)
    assert not isinstance(masked, str) and not isinstance(plain, str)
    assert [e.to_dict() for e in masked.entities] == [e.to_dict() for e in plain.entities]
    assert [(r.line, r.kind, r.in_entity, r.candidates) for r in masked.refs] == \
           [(r.line, r.kind, r.in_entity, r.candidates) for r in plain.refs]
    assert {e.qualname for e in masked.entities} >= {"pkg.data._seg_0", "pkg.data.Mapper.get"}


def test_small_or_unparsable_files_come_back_unchanged() -> None:
    assert mask_constant_literals(SOURCE) == SOURCE  # under MIN_CHARS
    broken = "def f(:\n" + "x = 1\n" * 10_000
    assert mask_constant_literals(broken) == broken
