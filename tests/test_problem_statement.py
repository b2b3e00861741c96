"""The offline problem statement specifies the feature without its body or its tests."""

from __future__ import annotations

from pathlib import Path

from generators.deletion import Deletion
from generators.problem_statement import OfflineWriter, OpenAICompatibleWriter, build_context, write_statement
from generators.static_index import build_index
from generators.strategy_delete import DeleteStrategy
from generators.strategy_module import ModuleStrategy
from generators.strategy_stub import StubStrategy
from taskforge.core import patches
from taskforge.core.environment import EnvSpec

CORE = '''import re

from pkg.util import _SECRET_HELPER_NAME_IS_FINE


def slugify(text: str, sep: str = "-") -> str:
    """Turn text into a URL slug."""
    cleaned = re.sub(r"[^a-z0-9]+", sep, text.lower())
    return cleaned.strip(sep) + _SECRET_HELPER_NAME_IS_FINE()


def title(text):
    return slugify(text).upper()
'''
FILES = {"pkg/__init__.py": "from .core import slugify\n", "pkg/core.py": CORE,
         "pkg/util.py": "def _SECRET_HELPER_NAME_IS_FINE():\n    return ''\n",
         "tests/test_core.py": "from pkg import slugify\n\n\ndef test_hidden_slug_case():\n"
                               "    assert slugify('A b') == 'a-b'\n"}
SPEC = EnvSpec("pkg", "3.11", ".", package_dirs=("pkg",), test_paths=("tests",))


def _setup(tmp_path: Path):
    patches.write_tree(FILES, tmp_path)
    return build_index(tmp_path, SPEC)


def test_statement_has_signature_docstring_usages_but_no_body_or_tests(tmp_path: Path) -> None:
    index = _setup(tmp_path)
    for strategy in (StubStrategy(), DeleteStrategy()):
        d = strategy.delete(index.entity("pkg.core.slugify"), index, tmp_path)
        assert isinstance(d, Deletion), d
        text = write_statement(d, index, tmp_path, repo="pkg")
        assert 'def slugify(text: str, sep: str = "-") -> str' in text
        assert "Turn text into a URL slug." in text
        assert "re.sub" not in text and "cleaned" not in text  # no body
        assert "test_hidden_slug_case" not in text and "tests/" not in text  # no tests
        assert "pkg/core.py" in text
    d = DeleteStrategy().delete(index.entity("pkg.core.slugify"), index, tmp_path)
    ctx = build_context(d, index, tmp_path)
    # title() used slugify: it was deleted with it (a small dependent), and the statement asks for it back
    assert [o.qualname for o in ctx.others if o.role == "dependent"] == ["pkg.core.title"]
    assert any(u.startswith("pkg/__init__.py:1: from .core import slugify") for u in ctx.usages)


def test_module_statement_lists_public_api(tmp_path: Path) -> None:
    index = _setup(tmp_path)
    d = ModuleStrategy().delete(index.entity("pkg.util"), index, tmp_path)
    assert isinstance(d, Deletion)
    text = OfflineWriter().write(build_context(d, index, tmp_path))
    assert "pkg/util.py" in text and "Add the module `pkg.util`" in text


def test_endpoint_writer_falls_back_offline_when_unreachable(tmp_path: Path) -> None:
    index = _setup(tmp_path)
    d = StubStrategy().delete(index.entity("pkg.core.slugify"), index, tmp_path)
    assert isinstance(d, Deletion)
    ctx = build_context(d, index, tmp_path)
    w = OpenAICompatibleWriter(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=2)
    assert w.write(ctx) == OfflineWriter().write(ctx)
