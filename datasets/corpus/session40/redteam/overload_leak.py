"""Finding: a stubbed entity defined with ``@typing.overload`` keeps its implementation in the agent's workspace.

For every entity a stub task lists, parse its module in the broken workspace and report the definitions with
that qualified name whose body is more than a docstring + ``raise NotImplementedError`` / ``...``.

    python overload_leak.py DATASET_DIR
"""
from __future__ import annotations

import ast
import sys
import tempfile
from pathlib import Path

from taskforge.dataset.reader import Dataset


def defs(tree: ast.Module):
    out = []

    def walk(body, prefix):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + n.name, n))
            elif isinstance(n, ast.ClassDef):
                walk(n.body, prefix + n.name + ".")
    walk(tree.body, "")
    return out


def stubby(fn) -> bool:
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return all(isinstance(s, ast.Raise) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                            and s.value.value is Ellipsis) for s in body)


def main() -> None:
    ds = Dataset.open(Path(sys.argv[1]))
    for task in ds.tasks():
        if "__stub__" not in task.instance_id:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            ws = ds.broken_workspace(task, Path(tmp) / "ws")
            for q in task.entities:
                parts = q.split(".")
                for cut in range(len(parts) - 1, 0, -1):
                    rel = Path("src", *parts[:cut]).with_suffix(".py")
                    if (ws / rel).is_file():
                        inner = ".".join(parts[cut:])
                        tree = ast.parse((ws / rel).read_text())
                        found = [(n.lineno, n.end_lineno, stubby(n)) for name, n in defs(tree) if name == inner]
                        live = [f for f in found if not f[2]]
                        if live:
                            print(f"{task.instance_id}: {q}: {len(found)} defs, implementation still in the "
                                  f"workspace at {rel}:{live[0][0]}-{live[0][1]} ({live[0][1] - live[0][0] + 1} lines)")
                        break


if __name__ == "__main__":
    main()
