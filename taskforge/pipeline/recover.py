"""``recover``: make the dataset of a killed ``generate`` readable, with every task its journal holds.

A SIGKILL leaves whole shards without a manifest (readers ignore them) and accepted tasks that only the
journal (``OUT/.journal/<repo>/*.json``) holds. ``recover`` opens the dataset (the writer adopts the
whole shards), adds every accepted task of the journal whose repository archive is stored (the archive is
written before a source's first task), and closes it: manifest and card. Seconds, no test run. Running
``generate`` again with the same arguments also recovers them, and then validates what is left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from taskforge.dataset.manifest import REPOS_DIR
from taskforge.dataset.repos import archive_name
from taskforge.dataset.writer import DatasetWriter
from taskforge.pipeline.generate import JOURNAL_DIR
from taskforge.validate.jobs import CandidateResult


@dataclass(frozen=True, slots=True)
class Recovered:
    tasks: int  # tasks in the dataset afterwards
    from_journal: int  # tasks added from the journal
    without_archive: int  # accepted tasks left out: their repository archive is missing


def journal_results(out: Path) -> list[CandidateResult]:
    """Every readable accepted result of the journal under ``out``, in a stable order."""
    found: list[CandidateResult] = []
    for path in sorted((Path(out) / JOURNAL_DIR).glob("*/*.json")):
        try:
            res = CandidateResult.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # torn or foreign
        if res.task is not None:
            found.append(res)
    return found


def recover(out: Path) -> Recovered:
    out = Path(out)
    added = missing = 0
    with DatasetWriter(out) as writer:
        for res in journal_results(out):
            task = res.task
            assert task is not None
            if not (out / REPOS_DIR / archive_name(task.repo, task.base_commit)).is_file():
                missing += 1
                continue
            added += writer.add(task)
        total = len(writer)
    return Recovered(total, added, missing)
