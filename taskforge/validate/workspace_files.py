"""Files of a validation workspace: writing a deletion's or a hiding's edits, and removing whole the test
files all of whose tests are hidden."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from generators.hidden_tests import imported_elsewhere


def write_files(root: Path, files: Mapping[str, str | None]) -> None:
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def remove_whole_files(hidden: Any, f2p: tuple[str, ...], all_tests: frozenset[str], repo: Path) -> Any:
    """Remove, whole, every test file all of whose tests in ``all_tests`` (the reliable ones) are FAIL_TO_PASS.

    The static hiding cannot always see that (tests inherited from a mixin, a file that cannot even be
    imported without the feature) and would leave a file that no longer collects.
    """
    by_file: dict[str, set[str]] = {}
    for n in all_tests:
        by_file.setdefault(n.split("::", 1)[0], set()).add(n)
    whole = sorted(f for f in {n.split("::", 1)[0] for n in f2p}
                   if by_file.get(f) and by_file[f] <= set(f2p) and (repo / f).is_file())
    # a file another remaining test module imports from stays (its tests are hidden, its helpers kept)
    whole = [f for f in whole if not imported_elsewhere(repo, f, exclude=frozenset(whole))]
    if not whole:
        return hidden
    # the bytes' text, line ends kept: read_text() turned fastjsonschema 2.22.3's CRLF test files into LF
    # text, and the setup_patch deleting one did not apply to the real file (every delete candidate failed)
    before = {**hidden.files_before, **{f: (repo / f).read_bytes().decode("utf-8") for f in whole}}
    after = {**hidden.files_after, **dict.fromkeys(whole)}
    return dataclasses.replace(
        hidden, files_before=before, files_after=after, hidden=tuple(dict.fromkeys((*hidden.hidden, *whole))),
        removed_files=tuple(dict.fromkeys((*hidden.removed_files, *whole))),
        unmatched=tuple(n for n in hidden.unmatched if n.split("::", 1)[0] not in whole))
