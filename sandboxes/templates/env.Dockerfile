# Environment image of one repository; sandboxes/docker_images.py fills the placeholders (string.Template).
# Holds the pinned dependencies, pytest, coverage and the in-sandbox runner: none of the repository's
# own source (the per-task workspace is copied into each run's container).
# Stage 1 installs with the CA bundle at hand; stage 2 copies only the virtualenv, so the bundle and
# pip's caches stay out of the image. The dependencies' byte code is compiled once here, deterministically
# (hash-based .pyc, not checked: the root filesystem of a run is read-only, so sources cannot change);
# without it every run (PYTHONDONTWRITEBYTECODE, read-only root) recompiled pytest and coverage: ~1 s.
# A file that does not compile (py2 leftovers in some sdists) just keeps no byte code.
# pip, setuptools and wheel (put there by ``venv``) are removed unless pinned, as the local sandbox's venvs
# (created --without-pip) do not have them: both backends then hold the same files (the leak audit
# searches them; an extra pip made the docker backend reject tasks the local one accepted).
FROM $base_image AS build
COPY build/ /tf/
RUN set -eu; \
    PY="$$(command -v /usr/local/bin/python3 || command -v /usr/bin/python3 || command -v python3)"; \
    "$$PY" -m venv $venv; \
    if [ -s /tf/ca.pem ]; then export PIP_CERT=/tf/ca.pem SSL_CERT_FILE=/tf/ca.pem; fi; \
    PIP_DISABLE_PIP_VERSION_CHECK=1 $venv/bin/python -m pip install --no-cache-dir --no-input \
        --progress-bar off -r /tf/requirements.txt; \
    $venv/bin/python /tf/install_dist_info.py /tf/dist-info /tf/ext /tf/finder /tf/startup; \
    for tool in wheel setuptools pip; do \
        if ! grep -qi "^$$tool==" /tf/requirements.txt; then \
            $venv/bin/python -m pip uninstall -y -q $$tool 2>/dev/null || true; \
        fi; \
    done; \
    find $venv -name __pycache__ -prune -exec rm -rf {} +; \
    $venv/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash $venv/lib >/dev/null || true

FROM $base_image
COPY --from=build $venv $venv
COPY pytest_runner.py $runner
ENV PATH=$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LC_ALL=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1
# The base interpreter's own packages are emptied (the venv has no system site-packages, so nothing reads
# them): pip's _vendor holds msgpack, idna and packaging, Debian's dist-packages and python-wheels more; an
# agent could read a deleted function there. The local sandbox hides the same directories
# (isolation.python_hidden); the command is isolation.EMPTY_IMAGE_PACKAGES_SH.
RUN set -eu; mkdir -p $mount && chmod 0755 $mount; $empty_packages
WORKDIR $mount
USER 65534:65534
