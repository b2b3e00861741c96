"""The static index of a repository: its entities and every place that references them (libcst).

``build_index(repo_root, spec)`` parses the project's own code (``spec.package_dirs`` under
``spec.src_roots``; tests, ``conftest.py``, ``setup.py`` and docs excluded) and returns a frozen
``StaticIndex``: every module, class, function and method with its qualified name, file, line spans,
signature, docstring, statement count and cyclomatic complexity, plus the references to it found in
the project's code *and* in its tests (``Reference.is_test``).

References are resolved in two phases. Phase 1 (per file, ``generators/index_visitor.py``) records
raw candidates: libcst's ``QualifiedNameProvider`` names (relative imports made absolute), ``self.x`` /
``cls.x`` inside a class, ``__all__`` strings, import statements. Phase 2 (here) resolves them against
the set of entities, following module-level import aliases (``from .mod import f`` in a package's
``__init__`` makes ``pkg.f`` mean ``pkg.mod.f``) and class bases for inherited methods. An attribute
on a receiver that cannot be resolved (``obj.meth()``) becomes a ``dynamic`` reference on every method
of that name: a possible use, so deletion can be cautious and difficulty can count it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generators.index_visitor import FileFacts, RawRef, index_file
from generators.redefinitions import merge_definitions
from taskforge.core.entities import DefinitionRole, Entity, EntityKind, Reference
from taskforge.core.environment import EnvSpec

# 2: an overloaded or redefined name is its implementation, with ``Entity.other_definitions``
# (a version-1 index describes such a name by its first ``def``: often an ``@overload`` stub)
INDEX_VERSION = 2

_SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "env", ".tox", ".nox", "build", "dist",
                        "node_modules", "__pycache__", "site-packages", ".eggs", ".mypy_cache",
                        ".pytest_cache", ".taskforge"})
_NON_SOURCE_DIRS = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
                              "scripts", "bin", "tools"})
# ``__main__.py`` is source: ``python -m pkg`` and tests (``import_module('pkg.__main__')``) import it, so a
# deletion must see (and edit) its imports of the package (python-slugify 9.2.0)
_NON_SOURCE_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py", "tasks.py"})


@dataclass(frozen=True, slots=True)
class StaticIndex:
    """Entities of the project's own code with their references; lookups by qualname and by file."""

    entities: tuple[Entity, ...]
    source_files: tuple[str, ...] = ()  # workspace-relative files indexed as project code
    test_files: tuple[str, ...] = ()  # workspace-relative files scanned for test references
    parse_errors: tuple[str, ...] = ()  # "path: message" for files libcst could not parse
    _by_qualname: dict[str, Entity] = field(default_factory=dict, init=False, repr=False, compare=False)
    _by_file: dict[str, tuple[Entity, ...]] = field(default_factory=dict, init=False, repr=False,
                                                    compare=False)
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_file: dict[str, list[Entity]] = defaultdict(list)
        for e in self.entities:
            self._by_qualname[e.qualname] = e
            by_file[e.file].append(e)
        self._by_file.update({f: tuple(es) for f, es in by_file.items()})

    # -- lookups -----------------------------------------------------------------------------------
    def get(self, qualname: str) -> Entity | None:
        return self._by_qualname.get(qualname)

    def entity(self, qualname: str) -> Entity:
        try:
            return self._by_qualname[qualname]
        except KeyError:
            raise KeyError(f"no entity {qualname!r} in the static index") from None

    def __contains__(self, qualname: object) -> bool:
        return qualname in self._by_qualname

    def in_file(self, file: str) -> tuple[Entity, ...]:
        return self._by_file.get(file, ())

    def module_for_file(self, file: str) -> Entity | None:
        return next((e for e in self.in_file(file) if e.kind is EntityKind.MODULE), None)

    def members(self, qualname: str) -> tuple[Entity, ...]:
        """Entities defined inside ``qualname`` (methods of a class; everything of a module)."""
        owner = self.entity(qualname)
        return tuple(e for e in self.in_file(owner.file)
                     if e.qualname != qualname and contains(owner, e))

    def referrers(self, qualname: str, include_tests: bool = True,
                  kinds: Iterable[str] | None = None) -> tuple[Reference, ...]:
        """References to ``qualname`` from outside its own definition."""
        owner = self.entity(qualname)
        wanted = set(kinds) if kinds is not None else None
        return tuple(r for r in owner.references
                     if (include_tests or not r.is_test) and (wanted is None or r.kind in wanted)
                     and not self.ref_inside(r, owner))

    def ref_inside(self, ref: Reference, owner: Entity) -> bool:
        """Whether ``ref`` lies inside a definition of ``owner`` (same file, within the lines of its
        implementation or of another ``def`` of its name: an overload's annotations, a property's setter)."""
        if ref.file != owner.file:
            return False
        if owner.kind is EntityKind.MODULE:
            return True
        return any(start <= ref.line <= end for start, end in owner.spans)

    def dependencies(self, qualname: str, kinds: Iterable[str] | None = None) -> tuple[str, ...]:
        """Entities that the code of ``qualname`` references (itself and its members excluded)."""
        owner = self.entity(qualname)
        wanted = set(kinds) if kinds is not None else None
        out: set[str] = set()
        for e in self.entities:
            if e.qualname == qualname or contains(owner, e):
                continue
            for r in e.references:
                if not r.is_test and (wanted is None or r.kind in wanted) and self.ref_inside(r, owner):
                    out.add(e.qualname)
                    break
        return tuple(sorted(out))

    def dependents(self, qualname: str, include_tests: bool = False) -> tuple[str, ...]:
        """Enclosing entities (or ``file:`` for module-level code) of references to ``qualname``."""
        out = {r.in_entity or f"{r.file}:" for r in self.referrers(qualname, include_tests=include_tests)
               if r.kind != "dynamic"}
        return tuple(sorted(out))

    def import_time_entities(self) -> frozenset[str]:
        """Entities that run when the project's modules are imported (a stub of them breaks imports).

        Seeds: calls at module level, and uses in a class body or in a ``def`` header (decorators,
        default values) outside any method body; then everything those entities use, transitively
        (for a class: its constructor methods). Once ``observe_import_time`` has been given what a
        coverage run saw, functions and methods are the observed ones instead.
        """
        if "import_time" in self._memo:
            return self._memo["import_time"]  # type: ignore[no-any-return]
        seeds: set[str] = set()
        for e in self.entities:
            for r in e.references:
                if r.is_test or r.kind not in ("call", "name", "attribute"):
                    continue
                if self._runs_at_import(r):
                    seeds.add(e.qualname)
        result = frozenset(self.closure(
            seeds, kinds=("call", "name", "attribute"),
            of_class=lambda q: [f"{q}.{m}" for m in ("__init__", "__new__", "__post_init__", "__init_subclass__")]))
        self._memo["import_time"] = result
        return result

    def observe_import_time(self, ran_outside_tests: Iterable[str]) -> None:
        """For functions and methods, answer what a coverage run saw execute outside every test and their
        collection (the package's import, conftests, session hooks: ``CoverageMap.ran_at_import``).

        The static closure over-approximates: it follows every possible call, and an attribute call
        ``obj.name`` reaches every method called ``name`` (markdown 3.11.3: 97 stub candidates refused
        as running at import, 6 of them did). It also misses what runs through a dynamic lookup: ijson
        3.6.0's backends call ``enrich_backend(globals())``, which runs ``globals()['_make_' + name](backend)``
        at import; its 12 factories were stubbed and each cost a validation run that found every test of
        the backend failing (``suite_red_after_deletion``). So what was observed counts whatever the static
        answer says; a function that only a test module's own module-level code runs (a marshmallow schema in
        ``tests/base.py``) ran during collection, not here, and is no import-time use of the package. Classes
        and modules keep the static answer: a class body always runs at import, so coverage cannot tell
        whether the class is *used*.
        """
        static = self.import_time_entities()
        observed = frozenset(q for q in ran_outside_tests if q in self)
        self._memo["import_time"] = frozenset(
            q for q in static
            if self.entity(q).kind not in (EntityKind.FUNCTION, EntityKind.METHOD)) | observed

    def closure(self, seeds: Iterable[str], *, kinds: tuple[str, ...],
                of_class: Callable[[str], Iterable[str]]) -> set[str]:
        """``seeds`` and everything they use through ``kinds`` references, transitively; a class also
        reaches what ``of_class`` names (its constructors, or all its members)."""
        done: set[str] = set()
        todo = list(seeds)
        while todo:
            q = todo.pop()
            if q in done or q not in self:
                continue
            done.add(q)
            if self.entity(q).kind is EntityKind.CLASS:
                todo.extend(of_class(q))
            todo.extend(self.dependencies(q, kinds=kinds))
        return done

    def _runs_at_import(self, r: Reference) -> bool:
        if not r.in_entity:
            return r.kind == "call"
        owner = self.get(r.in_entity)
        if owner is None or owner.kind is EntityKind.MODULE:
            return r.kind == "call"
        if owner.kind is EntityKind.CLASS:  # class body, unless inside one of its methods
            return not any(m.kind is EntityKind.METHOD and m.start_line <= r.line <= m.end_line
                           for m in self.members(owner.qualname))
        body_start, end, decorated = owner.body_start, owner.end_line, bool(owner.decorators)
        for o in owner.other_definitions:  # in another def of the name: the header is that def's
            if o.start_line <= r.line <= o.end_line:
                # ``@overload`` and ``@x.setter`` run nothing of the project; an alternate's decorators are not
                # recorded, so they count (a seed too many refuses a stub; one too few breaks the import)
                body_start, end, decorated = o.body_start, o.end_line, o.role is DefinitionRole.ALTERNATE
        if not (r.line < body_start and r.line < end):
            return False
        # the header: decorators run; a bare name in a default or an annotation is only evaluated (pycparser 3.12's
        # ``lexer: type[CLexer] = CLexer`` constructs no lexer), so it seeds nothing unless decorators share the header
        return r.kind != "name" or decorated

    # -- serialisation ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"version": INDEX_VERSION, "entities": [e.to_dict() for e in self.entities],
                "source_files": list(self.source_files), "test_files": list(self.test_files),
                "parse_errors": list(self.parse_errors)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StaticIndex:
        version = int(d.get("version", INDEX_VERSION))
        if version != INDEX_VERSION:
            raise ValueError(f"static index version {version} is not supported (expected {INDEX_VERSION}); "
                             "re-run `taskforge mine` to rebuild it")
        return cls(entities=tuple(Entity.from_dict(e) for e in d.get("entities", ())),
                   source_files=tuple(d.get("source_files", ())), test_files=tuple(d.get("test_files", ())),
                   parse_errors=tuple(d.get("parse_errors", ())))


def contains(outer: Entity, inner: Entity) -> bool:
    """Whether ``inner`` is defined inside ``outer`` (a member of a class, anything of a module)."""
    if inner.file != outer.file or inner.qualname == outer.qualname:
        return False
    if outer.kind is EntityKind.MODULE:
        return True
    return inner.qualname.startswith(outer.qualname + ".") and outer.start_line <= inner.start_line \
        and inner.end_line <= outer.end_line


# ---------------------------------------------------------------------------------------------------
# discovery
# ---------------------------------------------------------------------------------------------------
def is_test_file(rel: str, spec: EnvSpec) -> bool:
    """Test code: under one of ``spec.test_paths``, or named ``test_*.py``/``*_test.py``/``conftest.py``."""
    p = Path(rel)
    name = p.name
    if name == "conftest.py" or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"):
        return True
    for tp in spec.test_paths:
        tp = tp.strip("/").split("::", 1)[0]
        if tp in ("", "."):
            continue
        if rel == tp or rel.startswith(tp.rstrip("/") + "/"):
            return True
    return any(part in ("tests", "test") for part in p.parts[:-1])


def _walk_py(root: Path) -> Iterable[Path]:
    if root.is_file():
        if root.suffix == ".py":
            yield root
        return
    for path in sorted(root.rglob("*.py")):
        if any(part in _SKIP_DIRS or part.endswith(".egg-info") for part in path.relative_to(root).parts[:-1]):
            continue
        yield path


def _module_name(rel: str, spec: EnvSpec) -> str:
    """Dotted module name of a workspace-relative file, relative to the longest matching src root."""
    parts = list(Path(rel).with_suffix("").parts)
    best: list[str] = []
    for root in spec.src_roots:
        rparts = [p for p in Path(root).parts if p not in (".", "")]
        if parts[: len(rparts)] == rparts and len(rparts) >= len(best):
            best = rparts
    parts = parts[len(best):]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def discover_source_files(repo_root: Path, spec: EnvSpec) -> list[str]:
    """Workspace-relative ``.py`` files of the project's own (non-test) code."""
    roots: list[Path] = []
    if spec.package_dirs:
        roots = [repo_root / d for d in spec.package_dirs]
    else:
        for src in spec.src_roots:
            base = repo_root / src
            if not base.is_dir():
                continue
            for child in sorted(base.iterdir()):
                if child.name in _NON_SOURCE_DIRS or child.name in _SKIP_DIRS or child.name.startswith("."):
                    continue
                if (child.is_dir() and (child / "__init__.py").is_file()) or child.suffix == ".py":
                    roots.append(child)
    out: list[str] = []
    for root in roots:
        for path in _walk_py(root):
            rel = path.relative_to(repo_root).as_posix()
            inner = path.relative_to(root).parts[:-1] if root.is_dir() else ()
            if path.name in _NON_SOURCE_FILES or is_test_file(rel, spec):
                continue
            if any(part in ("tests", "test") for part in inner):  # a real subpackage may be "testing"/"tools"
                continue
            out.append(rel)
    return sorted(dict.fromkeys(out))


def discover_test_files(repo_root: Path, spec: EnvSpec) -> list[str]:
    out = []
    for path in _walk_py(repo_root):
        rel = path.relative_to(repo_root).as_posix()
        if is_test_file(rel, spec):
            out.append(rel)
    return out


def unmeasured_files(repo_root: Path, spec: EnvSpec) -> tuple[str, ...]:
    """The test files that are no source file: no entity lies in them, so no query of the coverage map asks
    for their lines, and the profile's coverage run need not trace them (``RunRequest.coverage_omit``).
    networkx keeps its tests inside the package: tracing them was about half its coverage run's overhead."""
    sources = set(discover_source_files(repo_root, spec))
    return tuple(t for t in discover_test_files(repo_root, spec) if t not in sources)


# ---------------------------------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------------------------------
def build_index(repo_root: Path, spec: EnvSpec) -> StaticIndex:
    """Index the project's own code under ``repo_root`` and the references to it from code and tests."""
    repo_root = Path(repo_root)
    sources = discover_source_files(repo_root, spec)
    source_set = set(sources)
    tests = [t for t in discover_test_files(repo_root, spec) if t not in source_set]
    facts: list[FileFacts] = []
    errors: list[str] = []
    for rel, is_test in [(s, False) for s in sources] + [(t, True) for t in tests]:
        try:
            text = (repo_root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(f"{rel}: cannot read ({exc})")
            continue
        try:
            result = index_file(text, rel, _module_name(rel, spec), is_test)
        except RecursionError:  # one file nested too deep for the parsers never fails the repository's index
            errors.append(f"{rel}: nested too deeply to parse (RecursionError); left out of the index")
            continue
        if isinstance(result, str):
            errors.append(f"{rel}: {result}")
        else:
            facts.append(result)
    return _assemble(facts, errors)


def _assemble(facts: list[FileFacts], errors: list[str]) -> StaticIndex:
    # a name defined several times in one scope (``@overload``s, a setter, ``if``/``else``) is its implementation
    drafts: dict[str, Entity] = merge_definitions(e for f in facts for e in f.entities)
    aliases: dict[str, str] = {}
    bases: dict[str, tuple[str, ...]] = {}
    stars: dict[str, list[str]] = defaultdict(list)  # module -> modules it star-imports (``from .m import *``)
    for f in facts:
        aliases.update(f.aliases)
        bases.update(f.class_bases)
        if not f.is_test and f.module:
            stars[f.module].extend(m for m in f.star_imports if m != f.module)
    top_level = {q.split(".", 1)[0] for q in drafts}

    def resolve(name: str, depth: int = 0) -> str | None:
        if name in drafts:
            return name
        if depth > 12 or not name:
            return None
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            target = aliases.get(prefix)
            if target is not None and target != prefix:
                rest = parts[i:]
                return resolve(".".join([target, *rest]), depth + 1)
        found = through_star(parts)
        if found is not None:
            return found
        for i in range(len(parts) - 1, 0, -1):  # inherited member: Class.meth where meth is on a base
            owner = ".".join(parts[:i])
            if owner in drafts and drafts[owner].kind is EntityKind.CLASS and i == len(parts) - 1:
                return lookup_member(owner, parts[i], set())
        return None

    star_memo: dict[str, str | None] = {}

    def through_star(parts: list[str]) -> str | None:
        """``pkg.name`` where ``pkg`` (the longest module prefix) star-imports ``name`` from ``pkg.mod``."""
        i = next((i for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in drafts), 0)
        module = ".".join(parts[:i])
        if not i or parts[i].startswith("_") or not stars.get(module):  # ``import *`` skips private names
            return None
        name = ".".join(parts)
        if name not in star_memo:
            star_memo[name] = None  # a star cycle (a imports * from b, b from a) ends here
            star_memo[name] = next((found for src in stars[module]
                                    if (found := resolve(".".join([src, *parts[i:]]), 1)) is not None), None)
        return star_memo[name]

    def lookup_member(cls: str, attr: str, seen: set[str]) -> str | None:
        if cls in seen:
            return None
        seen.add(cls)
        if f"{cls}.{attr}" in drafts:
            return f"{cls}.{attr}"
        for base in bases.get(cls, ()):
            resolved = resolve(base)
            if resolved and drafts[resolved].kind is EntityKind.CLASS:
                found = lookup_member(resolved, attr, seen)
                if found:
                    return found
        return None

    refs: dict[str, set[Reference]] = defaultdict(set)
    dynamic: dict[str, set[Reference]] = defaultdict(set)
    for f in facts:
        for raw in f.refs:
            target = _resolve_raw(raw, resolve, lookup_member)
            if target is not None and raw.kind not in ("import", "reexport") and drafts[target].kind is EntityKind.MODULE:
                # ``pkg.sub`` used as a value where pkg's ``from .sub import *`` binds a ``sub`` of its own
                # (python-slugify: ``from slugify import slugify`` is the function, not the submodule)
                shadow = through_star(target.split("."))
                if shadow is not None and drafts[shadow].kind is not EntityKind.MODULE:
                    target = shadow
            ref = Reference(raw.file, raw.line, raw.kind, raw.in_entity, raw.is_test)
            if target is not None:
                refs[target].add(ref)
            elif raw.attr and raw.dynamic_ok(top_level):
                dynamic[raw.attr].add(Reference(raw.file, raw.line, "dynamic", raw.in_entity, raw.is_test))
    entities = []
    for q, e in drafts.items():
        found = set(refs.get(q, ()))
        if e.kind is EntityKind.METHOD:
            name = q.rsplit(".", 1)[1]
            found |= {r for r in dynamic.get(name, ()) if r.in_entity != q}
        ordered = tuple(sorted(found, key=lambda r: (r.is_test, r.file, r.line, r.kind, r.in_entity)))
        entities.append(_replace_refs(e, ordered))
    entities.sort(key=lambda e: (e.file, e.start_line, e.qualname))
    return StaticIndex(
        entities=tuple(entities),
        source_files=tuple(sorted(f.file for f in facts if not f.is_test)),
        test_files=tuple(sorted(f.file for f in facts if f.is_test)),
        parse_errors=tuple(errors),
    )


def _resolve_raw(raw: RawRef, resolve: Any, lookup_member: Any) -> str | None:
    if raw.self_class:
        return lookup_member(raw.self_class, raw.attr, set()) if raw.attr else None
    for cand in raw.candidates:
        target = resolve(cand)
        if target is not None:
            return target
    return None


def _replace_refs(e: Entity, refs: tuple[Reference, ...]) -> Entity:
    return replace(e, references=refs)
