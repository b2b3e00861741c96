"""Helpers the attack builders share."""
from __future__ import annotations

from taskforge.core.patches import diff

INIT = "src/itsdangerous/__init__.py"


def append(files: dict[str, str], rel: str, code: str) -> str:
    before = files.get(rel)
    after = (before or "") + "\n" + code.strip("\n") + "\n"
    return diff({rel: before}, {rel: after})


def replace_files(files: dict[str, str], new: dict[str, str | None]) -> str:
    return diff({r: files.get(r) for r in new}, new)
