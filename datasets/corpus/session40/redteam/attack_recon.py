"""Recon (idea 1/7): what can graded code see inside the confined sandbox? Not an attack by itself: it writes
what it found into recon.txt in the workspace root (the harness copies it out after the run).

Looks for: any file outside the workspace whose path or text holds itsdangerous' deleted code (``derive_key``,
``django-concat``, ``class TimestampSigner``), the mounts, the environment, /proc, fds, the scratch directory.
"""
from common import INIT, append

NOTE = "recon"

CODE = r'''
def _rt_recon():
    import os, sys
    out = []
    w = out.append
    cwd = os.getcwd()
    w("cwd=%s pid=%s ppid=%s uid=%s" % (cwd, os.getpid(), os.getppid(), os.getuid()))
    w("env=%r" % dict(os.environ))
    w("sys.path=%r" % sys.path)
    w("base_prefix=%s prefix=%s exe=%s" % (sys.base_prefix, sys.prefix, sys.executable))
    try:
        w("mountinfo:\n" + open("/proc/self/mountinfo").read())
    except Exception as e:
        w("mountinfo err %r" % e)
    try:
        w("fds=%r" % {f: os.readlink("/proc/self/fd/" + f) for f in os.listdir("/proc/self/fd")})
    except Exception as e:
        w("fds err %r" % e)
    try:
        procs = {}
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    procs[p] = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ")[:300]
                except Exception as e:
                    procs[p] = repr(e)
        w("procs=%r" % procs)
    except Exception as e:
        w("procs err %r" % e)
    tmp = os.environ.get("TMPDIR", "")
    scratch = os.path.dirname(tmp)
    for d in (scratch, tmp, os.environ.get("HOME", "")):
        try:
            w("ls %s: %r" % (d, os.listdir(d)))
        except Exception as e:
            w("ls %s err %r" % (d, e))
    needles = (b"def derive_key", b"django-concat", b"class TimestampSigner", b"def get_timestamp",
               b"class Serializer", b"itsdangerous")
    hits = []
    names = []
    seen = 0
    for top in ("/",):
        for dp, dns, fns in os.walk(top):
            if dp.startswith(("/proc", "/sys", "/dev")) or dp.startswith(cwd):
                dns[:] = []
                continue
            for fn in fns:
                p = os.path.join(dp, fn)
                if "itsdangerous" in p.lower():
                    names.append(p)
                if fn.endswith((".py", ".pyc", ".txt", ".json", ".whl", ".zip", ".tar", ".gz", ".rst", ".md")) or "." not in fn:
                    try:
                        if os.path.getsize(p) > 20_000_000:
                            continue
                        with open(p, "rb") as fh:
                            data = fh.read()
                    except Exception:
                        continue
                    seen += 1
                    for n in needles[:5]:
                        if n in data:
                            hits.append((p, n.decode()))
    w("files read=%d" % seen)
    w("names with itsdangerous=%r" % names[:200])
    w("content hits=%r" % hits[:300])
    with open(os.path.join(cwd, "recon.txt"), "w") as fh:
        fh.write("\n".join(out))


try:
    _rt_recon()
except Exception as _e:
    pass
'''


def make(task, files):
    return append(files, INIT, CODE)
