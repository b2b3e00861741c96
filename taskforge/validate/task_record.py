"""The task record of a validated deletion: its instance id, patches, statement and provenance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.core.task import Task


def build_task(profile: Any, cand: Any, deletion: Any, original: Mapping[str, str | None],
               broken: Mapping[str, str | None], f2p: tuple[str, ...], p2p: tuple[str, ...], is_test: Any,
               job_provenance: Mapping[str, Any], settings: Any) -> Task | Rejected:
    """The ``Task`` record of a validated deletion (before the contract runs), or TRANSFORM_FAILED /
    UNDERSPECIFIED (the statement check could not make the statement enough for the hidden tests)."""
    import taskforge
    from generators.difficulty import difficulty_of
    from generators.problem_statement import write_statement
    from generators.statement_check import check_statement
    from taskforge.core.patches import task_patches

    snap = profile.snapshot
    patches = task_patches(original, broken, is_test)
    if not patches.patch.strip() or not patches.test_patch.strip():
        return Rejected(cand.candidate_id, RejectReason.TRANSFORM_FAILED,
                        "the deletion produced an empty gold or test patch")
    difficulty = difficulty_of(deletion, len(f2p))
    statement = write_statement(deletion, profile.index, profile.repo_dir, repo=snap.name)
    check = check_statement(statement, deletion.deleted, profile.index, profile.repo_dir, original, broken, is_test,
                            settings.statement_max_undetermined, names_visible=deletion.strategy == "stub")
    if check.rejected:
        return Rejected(cand.candidate_id, RejectReason.UNDERSPECIFIED, check.rejected)
    statement = check.statement
    from generators.dependent_stubs import task_label

    instance_id = make_instance_id(snap.name, snap.version, deletion.strategy, task_label(deletion), patches)
    from taskforge.core.companions import companions

    # skipped tests beside the task's tests: every grading runs them along, ungraded (taskforge.core.companions)
    along = companions(profile.baseline.skipped, (*f2p, *p2p))
    return Task(
        instance_id=instance_id, repo=snap.name, source=snap.source, base_commit=snap.commit,
        version=snap.version, created_at=snap.created_at, strategy=deletion.strategy,
        entities=tuple(deletion.deleted), setup_patch=patches.setup_patch, patch=patches.patch,
        test_patch=patches.test_patch, problem_statement=statement, fail_to_pass=tuple(f2p),
        pass_to_pass=tuple(p2p), env_spec=profile.spec, difficulty=difficulty,
        env_frozen=tuple(profile.env.frozen), image_name=str(profile.env.extra.get("image", "")),
        provenance={"taskforge_version": taskforge.__version__, "generator": deletion.strategy,
                    "candidate": cand.to_dict(), **dict(job_provenance),
                    **({"stubbed_dependents": list(deletion.stubbed)} if deletion.stubbed else {}),
                    **({"companions": list(along)} if along else {}),
                    "statement_check": check.to_dict()},
    )


def entity_source(deletion: Any, qualname: str, index: Any) -> str:
    e = index.get(qualname)
    if e is None:
        return ""
    text = deletion.files_before.get(e.file)
    if not text:
        return ""
    return e.source_in(text.splitlines(keepends=True))


def make_instance_id(name: str, version: str, strategy: str, target: str, patches: Any) -> str:
    """Deterministic: the same deletion of the same repository always gets the same id."""
    import hashlib

    h = hashlib.sha256((patches.setup_patch + "\0" + patches.patch).encode()).hexdigest()[:8]
    return f"{name}-{version}__{strategy}__{target}-{h}"
