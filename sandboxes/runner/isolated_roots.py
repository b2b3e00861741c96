"""Give an isolated interpreter the project's source roots (installed as ``_taskforge_roots`` by taskforge).

Standalone (stdlib only): it is copied into an environment's site-packages next to a one-line
``_taskforge_roots.pth`` (``import _taskforge_roots``), so every interpreter of the environment runs it
at start-up.

An environment holds none of the project's code: tests import it from the workspace, which
``PYTHONPATH`` names. A test that starts ``python -I`` or ``python -E`` (multidict's, yarl's and
frozenlist's ``test_circular_imports.py`` run ``python -I -c "import multidict"``) gets an interpreter
that ignores ``PYTHONPATH``; where the project is installed, that child still imports it from
site-packages, here it cannot. So in such an interpreter (and only there) this module puts the roots
that ``TASKFORGE_SRC_ROOTS`` names in front of ``sys.path``, as ``PYTHONPATH`` would have: the child
imports the project as from an installed copy. An interpreter that reads the environment gets the roots
from ``PYTHONPATH`` and is left alone.
"""

import os
import sys

ENV = "TASKFORGE_SRC_ROOTS"


def install():
    if not sys.flags.ignore_environment:
        return
    roots = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p and p not in sys.path]
    sys.path[0:0] = roots


install()
