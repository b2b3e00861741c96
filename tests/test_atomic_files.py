"""``write_atomic``: old or new content, never half; no temp file left; readable mode; concurrent-safe names."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from taskforge.core import files as atomic_files
from taskforge.core.files import write_atomic


@pytest.mark.parametrize("durable", [False, True])
def test_replaces_whole_and_leaves_nothing_behind(tmp_path: Path, durable: bool) -> None:
    path = tmp_path / "sub" / "state.json"
    write_atomic(path, "old", durable=durable)
    write_atomic(path, b"new", durable=durable)
    assert path.read_bytes() == b"new" and [p.name for p in path.parent.iterdir()] == ["state.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_failed_write_keeps_the_old_content_and_removes_its_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    write_atomic(path, "old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic_files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
