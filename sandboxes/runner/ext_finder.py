"""Serve the project's compiled extension modules to tests (installed as ``_taskforge_ext`` by taskforge).

Standalone (stdlib only): it is copied into an environment's site-packages next to a one-line
``_taskforge_ext.pth`` (``import _taskforge_ext``), so every interpreter of the environment (the
runner, and any Python a test starts) gets it at start-up.

The environment holds none of the project's code: its Python comes from the workspace. Its *compiled*
extension modules (``markupsafe._speedups``, ``msgpack._cmsgpack``) cannot: the workspace is a copy
of the source, never built. ``sandboxes.extensions`` keeps the ones built from native sources (never a
compiled copy of a Python module) under ``<venv>/taskforge-ext/<package path>/``; this finder, last
on ``sys.meta_path``, loads one when nothing on ``sys.path`` provides that name, as an editable
install would find it next to its package.
"""

import importlib.machinery
import importlib.util
import os
import sys

ROOT = os.path.join(sys.prefix, "taskforge-ext")


def _modules(root):
    """Dotted name -> file of every extension module under ``root`` (this interpreter's suffixes only)."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    found = {}
    for here, _dirs, files in os.walk(root):
        rel = os.path.relpath(here, root)
        parts = [] if rel == "." else rel.split(os.sep)
        for name in files:
            for suffix in suffixes:
                if name.endswith(suffix):
                    found.setdefault(".".join([*parts, name[: -len(suffix)]]), os.path.join(here, name))
                    break
    return found


class ExtensionFinder:
    """A meta-path finder for the modules of ``ROOT``; asked only after every other finder."""

    def __init__(self, modules):
        self.modules = dict(modules)

    def find_spec(self, fullname, path=None, target=None):
        location = self.modules.get(fullname)
        if location is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, location)
        return importlib.util.spec_from_file_location(fullname, location, loader=loader)

    def invalidate_caches(self):
        pass


def install(root=ROOT):
    modules = _modules(root) if os.path.isdir(root) else {}
    if modules and not any(isinstance(f, ExtensionFinder) for f in sys.meta_path):
        sys.meta_path.append(ExtensionFinder(modules))


install()
