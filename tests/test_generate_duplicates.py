"""A candidate whose task an accepted one already is, is not validated (``generate.duplicate_of``)."""

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
