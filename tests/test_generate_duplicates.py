"""A candidate whose task an accepted one already is, is not validated (``generate.duplicate_of``), or not
counted when it was (``generate.same_task_as``)."""

from __future__ import annotations

from types import SimpleNamespace

from generators.candidates import Candidate
from taskforge.pipeline.generate import duplicate_of


def _accepted(cid: str, strategy: str, entities: tuple[str, ...]) -> SimpleNamespace:
    return SimpleNamespace(candidate_id=cid, task=SimpleNamespace(strategy=strategy, entities=entities))


def test_the_stub_of_a_classs_only_method_is_the_class_stub() -> None:
    """arrow 1.4.0: the stub of ``TzinfoParser`` stubs only ``parse`` (its task's entities); the stub of
    ``TzinfoParser.parse`` was validated too and dropped by the dataset writer as a duplicate."""
    results = {"stub:arrow.parser.TzinfoParser": _accepted("stub:arrow.parser.TzinfoParser", "stub",
                                                           ("arrow.parser.TzinfoParser.parse",)),
               "stub:arrow.locales.EnglishLocale": _accepted("stub:arrow.locales.EnglishLocale", "stub",
                                                             ("arrow.locales.EnglishLocale._ordinal_number",
                                                              "arrow.locales.EnglishLocale.describe")),
               "stub:x.rejected": SimpleNamespace(candidate_id="stub:x.rejected", task=None)}

    def cand(strategy: str, entity: str) -> Candidate:
        return Candidate(f"{strategy}:{entity}", strategy, entity, ("t.py::t",), 1.0, "")

    assert duplicate_of(cand("stub", "arrow.parser.TzinfoParser.parse"), results) == "stub:arrow.parser.TzinfoParser"
    assert duplicate_of(cand("delete", "arrow.parser.TzinfoParser.parse"), results) == ""  # another task
    assert duplicate_of(cand("stub", "arrow.locales.EnglishLocale.describe"), results) == ""  # a part of one
    assert duplicate_of(cand("stub", "x.rejected"), results) == ""


def test_a_twin_validated_in_the_same_batch_is_rejected_as_a_duplicate() -> None:
    """arrow 1.4.0, session 32: ``TzinfoParser`` and ``TzinfoParser.parse`` were next to each other in the order,
    so neither was accepted when the batch was drawn; both were validated and accepted (10 accepted, 9 written,
    the run stopped one task short of --max-tasks 10). An accepted result whose task an accepted one already is
    becomes a ``duplicate`` rejection (``same_task_as``)."""
    from taskforge.pipeline.generate import same_task_as

    results = {"stub:a.B": _accepted("stub:a.B", "stub", ("a.B.parse",))}
    assert same_task_as(SimpleNamespace(strategy="stub", entities=("a.B.parse",)), results) == "stub:a.B"
    assert same_task_as(SimpleNamespace(strategy="delete", entities=("a.B.parse",)), results) == ""
    assert same_task_as(SimpleNamespace(strategy="stub", entities=("a.B.parse", "a.B.other")), results) == ""
