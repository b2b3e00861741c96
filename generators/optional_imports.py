"""Modules a project's own code imports without declaring them, and the extras that provide them.

A package often backs a feature with an extra and imports its modules only when they are there:
jsonschema 4.26.0's ``_format.py`` imports fqdn, idna, webcolors... under ``with suppress(ImportError):``
and its ``format`` extra declares them; without them ~425 format tests of its suite skip. networkx
imports numpy/scipy/pandas inside functions (lazily), backed by its ``default`` extra; pyparsing's
``pyparsing.diagram`` imports railroad and jinja2 at its top, backed by ``diagrams``. This module reads
the package's source with ``ast`` (never imports it) and records each absolute import by how it is reached:

- ``guarded``: in the body of a ``try`` whose handlers catch ImportError / ModuleNotFoundError (or
  Exception, BaseException, a bare ``except``), or under ``with (contextlib.)suppress(ImportError...)``;
- ``lazy``: in a function body;
- ``top``: unconditionally, at a module's top level (of a module that, when the import is not a declared
  dependency, is itself optional);
- ``fallback``: in such an ImportError handler (``except ImportError: import rfc3986_validator``): what
  the code does *without* the guarded module, so an extra that only provides fallbacks adds nothing.

Imports under ``if TYPE_CHECKING:`` and relative imports are not recorded. Test folders inside the package
are skipped: ``env_detect`` reads the test files' imports itself. ``import_time_imports`` follows, instead,
what importing some of the project's modules imports unconditionally, through the project's own modules
(cattrs' ``cattrs.preconf.ujson`` imports ``ujson`` on its first lines). Standard library only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from taskforge.core import pyparse

_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_SKIP_PARTS = frozenset({"tests", "test", "testing", "_vendor", "vendor", "_vendored", "vendored", "extern",
                         "site-packages", "__pycache__"})
_MAX_FILES = 2000
_KINDS = ("guarded", "lazy", "top")  # the order a module's kind is named in, when it is reached several ways


@dataclass(frozen=True, slots=True)
class PackageImports:
    """Top-level module names the project's code imports: ``kinds`` maps each to how (see the module
    docstring); ``fallback`` holds those imported only in an ImportError handler."""

    kinds: Mapping[str, str]
    fallback: frozenset[str] = frozenset()


def scan_package_imports(repo: Path, package_dirs: Iterable[str]) -> PackageImports:
    """The imports of the ``.py`` files of ``package_dirs`` (test folders and files excluded)."""
    found: dict[str, set[str]] = {kind: set() for kind in (*_KINDS, "fallback")}
    for path in _source_files(repo, package_dirs):
        try:
            tree = pyparse.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        _visit(tree.body, "top", found)
    kinds: dict[str, str] = {}
    for kind in reversed(_KINDS):
        kinds.update(dict.fromkeys(found[kind], kind))
    return PackageImports(dict(sorted(kinds.items())), frozenset(found["fallback"] - kinds.keys()))


def pick_extras(new_dists: Mapping[str, set[str]], wanted: Mapping[str, str],
                cap: int) -> list[tuple[str, list[str]]]:
    """Greedily the extras that provide the most ``wanted`` modules not yet provided, at most ``cap``.

    ``new_dists``: extra -> the normalised names of its requirements not already declared;
    ``wanted``: normalised distribution name that may provide a module (``dist_keys``) -> that module.
    Returns (extra, modules it provides) pairs. An extra left with nothing new is not picked: of
    jsonschema's ``format`` and ``format-nongpl`` (the same modules, but rfc3987 vs its fallbacks) one is.
    """
    provided: set[str] = set()
    picked: dict[str, list[str]] = {}
    while len(picked) < cap:
        gains = {e: {m for d in dists if (m := _module_of(d, wanted))} - provided
                 for e, dists in sorted(new_dists.items()) if e not in picked}
        best = max(gains, key=lambda e: len(gains[e]), default=None)
        if best is None or not gains[best]:
            break
        provided |= gains[best]
        picked[best] = sorted(gains[best])
    return list(picked.items())


def dist_keys(module: str) -> set[str]:
    """Normalised distribution names that provide ``module`` by a naming convention: the name itself
    (``rfc3339_validator`` -> ``rfc3339-validator``), ``python-NAME`` and ``pyNAME`` (``pyzmq``)."""
    name = module.replace("_", "-").replace(".", "-").lower()
    return {name, f"python-{name}", f"py{name}"}


def dist_provides(dist: str, module: str) -> bool:
    """Whether the distribution ``dist`` (normalised) provides ``module`` by the conventions of
    ``dist_keys`` and ``_module_of``: ``railroad-diagrams`` provides ``railroad``, ``pyicu`` ``icu``."""
    return _module_of(dist, dict.fromkeys(dist_keys(module), module)) is not None


def import_time_imports(repo: Path, package_dirs: Iterable[str], modules: Iterable[str]) -> frozenset[str]:
    """The top-level names of the modules outside the project that importing ``modules`` (dotted names of
    the project's own modules) imports unconditionally: at the top level of each module, of the packages
    above it, and of the project's modules those import in turn (absolute or relative), never in a ``try``,
    an ``if``, a ``with`` or a function. cattrs 26.2.1's tests/test_preconf.py imports
    ``cattrs.preconf.ujson``, whose first lines import ``ujson``: without it the file does not collect."""
    index = _module_index(repo, package_dirs)
    own = {name.split(".")[0] for name in index}
    found: set[str] = set()
    seen: set[str] = set()
    queue = list(modules)
    while queue:
        parts = queue.pop().split(".")
        for name in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):  # the packages above run first
            if name in seen or name not in index:
                continue
            seen.add(name)
            try:
                tree = pyparse.parse(index[name].read_text(errors="replace"))
            except (SyntaxError, ValueError, OSError):
                continue
            package = name if index[name].name == "__init__.py" else name.rpartition(".")[0]
            for node in tree.body:
                if isinstance(node, ast.Import):
                    dotted = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and (base := _absolute(node, package)):
                    dotted = [base, *(f"{base}.{a.name}" for a in node.names)]  # a name may be a submodule
                else:
                    continue
                for d in dotted:
                    if d.split(".")[0] in own:
                        queue.append(d)
                    else:
                        found.add(d.split(".")[0])
    return frozenset(found)


def _module_index(repo: Path, package_dirs: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for the ``.py`` files of ``package_dirs`` (``pkg/__init__.py`` is ``pkg``)."""
    index: dict[str, Path] = {}
    for d in package_dirs:
        p = repo / d
        if p.is_file() and p.suffix == ".py":
            index[p.stem] = p
        elif p.is_dir():
            for f in sorted(p.rglob("*.py"))[:_MAX_FILES]:
                parts = (p.name, *f.relative_to(p).with_suffix("").parts)
                index[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return index


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from ..x import y`` in ``package``; "" above the top package."""
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 >= len(parts):
        return ""
    return ".".join([*parts[:len(parts) - (node.level - 1)], *([node.module] if node.module else [])])


def _module_of(dist: str, wanted: Mapping[str, str]) -> str | None:
    """The wanted module ``dist`` provides: by name, with a ``-py``/``py-``/``-python`` tag
    (``linkify-it-py`` provides ``linkify_it``: markdown-it-py 4.3.0's ``linkify`` extra, 31 tests skipped
    without it), or as ``NAME-suffix`` (``railroad-diagrams``)."""
    for name in (dist, dist.removesuffix("-py"), dist.removeprefix("py-"), dist.removesuffix("-python")):
        if name in wanted:
            return wanted[name]
    head = dist.split("-")[0]
    return wanted.get(head) if len(head) >= 4 and head != dist else None


# --- the ast walk ----------------------------------------------------------------------------------

def _source_files(repo: Path, package_dirs: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for d in package_dirs:
        p = repo / d
        if p.is_file() and p.suffix == ".py":
            files.append(p)
        elif p.is_dir():
            files += [f for f in sorted(p.rglob("*.py")) if not _SKIP_PARTS & set(f.relative_to(p).parts[:-1])
                      and not f.name.startswith("test_") and not f.name.endswith("_test.py")
                      and f.name != "conftest.py"]
    return files[:_MAX_FILES]


def _visit(nodes: Iterable[ast.AST], ctx: str, found: dict[str, set[str]]) -> None:
    """Record the imports under ``nodes`` in ``found[ctx]``; ``ctx`` is a kind or "fallback"."""
    for node in nodes:
        if isinstance(node, ast.Import):
            found[ctx].update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module and not node.level:
                found[ctx].add(node.module.split(".")[0])
        elif isinstance(node, ast.Try | ast.TryStar):
            guarded = any(_catches_import_error(h.type) for h in node.handlers)
            _visit(node.body, "guarded" if guarded and ctx != "fallback" else ctx, found)
            for h in node.handlers:
                _visit(h.body, "fallback" if guarded else ctx, found)
            _visit([*node.orelse, *node.finalbody], ctx, found)
        elif isinstance(node, ast.With | ast.AsyncWith) and any(_suppresses_import_error(i.context_expr)
                                                                 for i in node.items):
            _visit(node.body, "guarded" if ctx != "fallback" else ctx, found)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _visit(ast.iter_child_nodes(node), "lazy" if ctx == "top" else ctx, found)
        elif isinstance(node, ast.If) and _name(node.test) == "TYPE_CHECKING":
            _visit(node.orelse, ctx, found)  # the body's imports are for type checkers only
        else:
            _visit(ast.iter_child_nodes(node), ctx, found)


def _catches_import_error(handler_type: ast.expr | None) -> bool:
    if handler_type is None:
        return True  # a bare ``except:``
    types = handler_type.elts if isinstance(handler_type, ast.Tuple) else [handler_type]
    return any(_name(t) in _CATCHES for t in types)


def _suppresses_import_error(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and _name(expr.func) == "suppress" and any(
        _name(a) in _CATCHES for a in expr.args)


def _name(expr: ast.expr) -> str:
    """``ImportError`` -> "ImportError", ``contextlib.suppress`` -> "suppress", anything else -> ""."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return ""
