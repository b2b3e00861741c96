"""Read the arguments of a ``setup.py``'s ``setup(...)`` call statically, with ``ast``; never run it.

A setup.py is a program: running it to learn its metadata would run the package's build code on the
host. What can be read without running it is read here, and only from literals:

- ``extras_require={"icu": ["PyICU >= 1.0.0"], ...}`` written in the call (natsort 8.4.0), or a name
  the module binds once, at its top level, to a dict literal or to ``dict(key=[...])``
  (``EXTRAS = {...}`` ... ``setup(extras_require=EXTRAS)``; arrow 1.4.0's flit-generated setup.py);
- each value a list, tuple or set of string literals, a string, a module-level name bound once to one of
  those, or a ``+`` of them (``"all": base + extra``).

An extra whose value is not statically readable keeps its name with no requirements; of a dict that is not
readable at all, the names are read from the text (``extras_require={"a": ...}``), with no requirements. A key
``"name:marker"`` adds the marker to each requirement of ``name``; a key ``":marker"`` holds conditional
install requirements, not an extra, and is left out. Standard library only.
"""

from __future__ import annotations

import ast
import re

from taskforge.core import pyparse

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def setup_py_extras(text: str) -> dict[str, list[str]]:
    """The extras of ``setup(extras_require=...)`` in ``text``: name -> requirements (see the module docstring)."""
    read = _literal_extras(text) if "extras_require" in text else None
    if read is not None:
        return read
    if m := re.search(r"extras_require\s*=\s*\{(.*?)\}", text, re.S):
        return {key: [] for key in re.findall(r"""['"]([A-Za-z0-9_.-]+)['"]\s*:""", m.group(1))}
    return {}


def _literal_extras(text: str) -> dict[str, list[str]] | None:
    tree = _parse(text)
    if tree is None:
        return None
    names = _module_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_setup(node.func):
            for kw in node.keywords:
                if kw.arg == "extras_require":
                    value = names.get(kw.value.id) if isinstance(kw.value, ast.Name) else kw.value
                    return _extras_of(value, names) if value is not None else None
    return None


def setup_py_name_constant(text: str) -> str:
    """``name=NAME`` in a ``setup()`` call, with ``NAME = 'PyYAML'`` at module level; "" when not so."""
    tree = _parse(text)
    if tree is None:
        return ""
    names = _module_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Name):
                    value = names.get(kw.value.id)
                    if isinstance(value, ast.Constant) and isinstance(value.value, str) and \
                            _NAME.fullmatch(value.value):
                        return value.value
    return ""


def _parse(text: str) -> ast.Module | None:
    try:
        return pyparse.parse(text)
    except (SyntaxError, ValueError):
        return None


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Names bound exactly once at the module's top level (``X = ...`` or ``X: T = ...``) and never changed
    in place (``X["all"] = ...``, ``X.update(...)``, ``X += ...``), to their value."""
    bound: dict[str, list[ast.expr | None]] = {}
    for node in tree.body:
        value: ast.expr | None
        if isinstance(node, ast.Assign):
            targets, value = list(node.targets), node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets, value = [node.target], None if isinstance(node, ast.AugAssign) else node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                bound.setdefault(target.id, []).append(value)
    changed = {_name_of(node.value) for node in ast.walk(tree) if isinstance(node, ast.Subscript)
               and isinstance(node.ctx, ast.Store)}
    changed |= {_name_of(node.func.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)}
    return {name: values[0] for name, values in bound.items()
            if len(values) == 1 and values[0] is not None and name not in changed}


def _name_of(expr: ast.expr) -> str:
    return expr.id if isinstance(expr, ast.Name) else ""


def _is_setup(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "setup") or \
        (isinstance(func, ast.Attribute) and func.attr == "setup")


def _extras_of(value: ast.expr, names: dict[str, ast.expr]) -> dict[str, list[str]] | None:
    if isinstance(value, ast.Dict):
        items = [(k.value if isinstance(k, ast.Constant) else None, v) for k, v in zip(value.keys, value.values,
                                                                                         strict=True)]
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
            and not value.args:
        items = [(kw.arg, kw.value) for kw in value.keywords]
    else:
        return None
    if any(not isinstance(key, str) for key, _ in items):
        return None  # ``**other`` or a computed key: which extras there are is not known
    extras: dict[str, list[str]] = {}
    for key, v in items:
        name, _, marker = str(key).partition(":")
        if not name.strip():
            continue  # ``":python_version<'3.9'"``: conditional install_requires
        reqs = _strings(v, names, depth=0)
        if reqs is not None and marker.strip():
            reqs = [_with_marker(r, marker.strip()) for r in reqs]
        extras.setdefault(name.strip(), []).extend(reqs or [])
    return extras


def _with_marker(req: str, marker: str) -> str:
    """``("foo; os_name == 'nt'", "python_version<'3.9'")`` -> both markers joined by ``and``."""
    name, _, own = req.partition(";")
    return f"{name.strip()}; ({own.strip()}) and ({marker})" if own.strip() else f"{name.strip()}; {marker}"


def _strings(value: ast.expr, names: dict[str, ast.expr], depth: int) -> list[str] | None:
    """The requirement strings ``value`` holds, or None when it is not made of literals."""
    if depth > 8:
        return None
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [ln.strip() for ln in value.value.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
            return [e.value.strip() for e in value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.strip()]
        return None
    if isinstance(value, ast.Name) and value.id in names:
        return _strings(names[value.id], names, depth + 1)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left, right = _strings(value.left, names, depth + 1), _strings(value.right, names, depth + 1)
        return left + right if left is not None and right is not None else None
    return None
