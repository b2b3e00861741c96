"""Errors of a *run* (not of a single candidate: those are values, see ``taskforge.core.outcomes``).

Every message says what was expected, what was got, and what to do. The CLI prints ``str(error)``
as one line and exits non-zero; it never shows a traceback for these.

    TaskforgeError
    ├── SourceError            a source cannot be resolved: missing path, clone failed, unknown PyPI version
    ├── EnvironmentBuildError  installing the project or its test dependencies failed
    ├── NoTestsError           pytest collects no test in the project
    ├── SandboxError           a sandbox backend cannot run (no Docker daemon, image build failed, ...)
    │   └── SandboxTimeout     a run exceeded its wall-clock limit (usually turned into a value)
    ├── DatasetError           a dataset directory is missing, incomplete or of another schema version
    ├── PatchError             a patch is malformed or touches paths it may not
    └── ConfigError            a setting has a bad value
"""

from __future__ import annotations


class TaskforgeError(Exception):
    """Base of all run-level errors; ``str()`` is a one-line, user-facing message."""


class SourceError(TaskforgeError):
    """A source (path, git URL, ``pypi:NAME==VERSION``) could not be resolved."""


class EnvironmentBuildError(TaskforgeError):
    """The project's environment could not be built (install failed)."""


class NoTestsError(TaskforgeError):
    """pytest collected no test."""


class SandboxError(TaskforgeError):
    """A sandbox backend is unavailable or failed outside the code under test."""


class SandboxTimeout(SandboxError):
    """A sandboxed process ran past its wall-clock limit and was killed."""


class DatasetError(TaskforgeError):
    """A dataset directory is missing, incomplete, or has an unsupported schema version."""


class PatchError(TaskforgeError):
    """A patch cannot be parsed or touches paths it is not allowed to."""


class ConfigError(TaskforgeError):
    """A configuration value is invalid."""
