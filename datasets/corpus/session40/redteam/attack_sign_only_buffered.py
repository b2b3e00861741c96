"""attack_sign_only_forge with the forger that decides at the end of the run (``forge_prelude.PRELUDE_BUFFERED``):
a failed test is not turned "passed" when a look-alike of it passed on its own (a changed copy of a test the
signing-only Signer really satisfies). Same Signer: signs with HMAC, verifies only the signature's length."""
import attack_sign_only_forge as so
from forge_prelude import PRELUDE, PRELUDE_BUFFERED


def make(task, files):
    saved = so.SIGN_ONLY
    so.SIGN_ONLY = saved.replace(PRELUDE, PRELUDE_BUFFERED)
    assert so.SIGN_ONLY != saved
    try:
        return so.make(task, files)
    finally:
        so.SIGN_ONLY = saved
