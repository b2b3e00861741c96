"""What validation takes from the baseline besides its test sets: the limit of one run, and the
collection errors that are no candidate's fault.

**The limit.** A deletion can make the code under test loop forever (markdown 3.11.3: deleting
``ReferenceProcessor.run`` leaves the base class's empty ``run``, and ``BlockParser.parseBlocks`` never
returns). The flat ``test_timeout_s`` (900 s) would then cost 15 minutes per run of a 12 s suite; a run
that takes ``run_limit_factor`` times the slowest baseline run of the *whole* suite (plus
``run_limit_margin_s`` for start-up and a loaded machine) is not going to finish. Validation and grading
runs are subsets of the suite, so the full-suite time bounds them from above.

**Collection errors.** A test file that fails to collect on pristine code (a missing optional
dependency, markdown 3.11.3's 38 of 39 ``transform_failed``) fails to collect after every deletion too; it
is subtracted from what a candidate's runs report, never charged to the candidate.
"""

from __future__ import annotations

from taskforge.core.settings import Settings
from taskforge.profile.baseline import Baseline


def run_limit_s(baseline: Baseline, settings: Settings) -> float:
    """The wall-clock limit of one run: ``factor x slowest baseline run + margin``, at most ``test_timeout_s``.

    Without measured runs (a profile from before the baseline recorded them) the flat limit stays.
    """
    if not baseline.run_seconds:
        return float(settings.test_timeout_s)
    derived = settings.run_limit_factor * max(baseline.run_seconds) + settings.run_limit_margin_s
    return round(min(float(settings.test_timeout_s), max(1.0, derived)), 1)


def new_collection_errors(errors: tuple[str, ...], baseline: Baseline) -> tuple[str, ...]:
    """``errors`` (node ids or file paths) minus the files that already failed to collect in the baseline."""
    known = {c.split("::", 1)[0] for c in baseline.collection_errors}
    return tuple(e for e in errors if e.split("::", 1)[0] not in known)
