#!/usr/bin/env bash
# A throwaway PostgreSQL 15 + pgvector 0.8.0 cluster for the conformance tests.
#
#   .ci/postgres.sh start   install what is missing, create the cluster if missing, start it if
#                           stopped, make sure the test role and database exist; print the URL
#   .ci/postgres.sh stop    stop the cluster (its data stays, so the next start is quick)
#   .ci/postgres.sh url     print the URL (postgres://...) the tests connect to
#
# Every step is idempotent. Runs as root (it installs Debian packages and builds pgvector); the
# server itself runs as the `postgres` user, which PostgreSQL requires. Debian bookworm has no
# pgvector package, so pgvector is built from Debian's own source tarball, checked by sha256 and
# cached outside the repository.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"

PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG="${PG_BIN}/pg_config"
PGVECTOR_VERSION=0.8.0
PGVECTOR_TARBALL="pgvector_${PGVECTOR_VERSION}.orig.tar.gz"
PGVECTOR_URL="http://deb.debian.org/debian/pool/main/p/pgvector/${PGVECTOR_TARBALL}"
PGVECTOR_SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
CACHE_DIR="${MEMGPT_CI_CACHE:-/var/cache/memgpt-ci}"

HOST=127.0.0.1
PORT="${MEMGPT_CI_POSTGRES_PORT:-54329}"
ROLE=memgpt
PASSWORD=memgpt
DATABASE=memgpt_test
URL="postgres://${ROLE}:${PASSWORD}@${HOST}:${PORT}/${DATABASE}"

FRESH_START=0

log() { printf '[postgres.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The cluster lives in target/ci-postgres (gitignored, like every build output). The server runs
# as `postgres`, so every directory above it must be enterable by that user; where the checkout
# is somewhere private, fall back to a directory outside it.
cluster_root() {
    local root="${REPO}/target/ci-postgres"
    local dir="${REPO}"
    id postgres >/dev/null 2>&1 || { printf '%s\n' "${root}"; return; }
    while [[ "${dir}" != "/" ]]; do
        if ! runuser -u postgres -- test -x "${dir}" 2>/dev/null; then
            root="/var/tmp/memgpt-ci-postgres"
            break
        fi
        dir="$(dirname "${dir}")"
    done
    printf '%s\n' "${root}"
}

# Unix sockets have a ~107-byte path limit; a deep checkout would exceed it.
socket_dir() {
    local dir="$1/run"
    if (( ${#dir} > 80 )); then
        dir="/tmp/memgpt-ci-postgres-${PORT}"
    fi
    printf '%s\n' "${dir}"
}

as_postgres() { runuser -u postgres -- "$@"; }

psql_admin() {
    # Peer authentication over the cluster's own socket, as the superuser.
    as_postgres "${PG_BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "${SOCKET_DIR}" -p "${PORT}" -U postgres "$@"
}

install_packages() {
    local missing=()
    dpkg-query -W -f='${Status}' "postgresql-${PG_MAJOR}" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("postgresql-${PG_MAJOR}")
    dpkg-query -W -f='${Status}' "postgresql-server-dev-${PG_MAJOR}" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("postgresql-server-dev-${PG_MAJOR}")
    command -v make >/dev/null 2>&1 || missing+=(make)
    command -v gcc >/dev/null 2>&1 || missing+=(gcc)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    if (( ${#missing[@]} == 0 )); then
        log "packages: already installed"
        return
    fi
    log "packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The Debian package would create and start its own `main` cluster; this script runs its
    # own, so skip that (it does not affect an already installed package).
    mkdir -p /etc/postgresql-common/createcluster.d
    if [[ ! -e /etc/postgresql-common/createcluster.d/memgpt-ci.conf ]]; then
        printf 'create_main_cluster = false\n' > /etc/postgresql-common/createcluster.d/memgpt-ci.conf
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

pgvector_installed() {
    local sharedir libdir
    sharedir="$("${PG_CONFIG}" --sharedir)"
    libdir="$("${PG_CONFIG}" --pkglibdir)"
    [[ -f "${libdir}/vector.so" ]] \
        && grep -q "default_version = '${PGVECTOR_VERSION}'" "${sharedir}/extension/vector.control" 2>/dev/null
}

install_pgvector() {
    if pgvector_installed; then
        log "pgvector ${PGVECTOR_VERSION}: already installed"
        return
    fi
    mkdir -p "${CACHE_DIR}"
    local tarball="${CACHE_DIR}/${PGVECTOR_TARBALL}"
    if [[ ! -f "${tarball}" ]] || ! echo "${PGVECTOR_SHA256}  ${tarball}" | sha256sum -c --quiet - 2>/dev/null; then
        log "pgvector ${PGVECTOR_VERSION}: downloading ${PGVECTOR_URL}"
        curl -fsSL --retry 3 -o "${tarball}.part" "${PGVECTOR_URL}"
        mv "${tarball}.part" "${tarball}"
    fi
    echo "${PGVECTOR_SHA256}  ${tarball}" | sha256sum -c --quiet - \
        || { rm -f "${tarball}"; die "${PGVECTOR_TARBALL} does not match its sha256"; }
    local build
    build="$(mktemp -d)"
    tar -xzf "${tarball}" -C "${build}" --strip-components=1
    log "pgvector ${PGVECTOR_VERSION}: building"
    make -s -C "${build}" PG_CONFIG="${PG_CONFIG}" with_llvm=no >/dev/null
    make -s -C "${build}" PG_CONFIG="${PG_CONFIG}" with_llvm=no install >/dev/null
    rm -rf "${build}"
    pgvector_installed || die "pgvector ${PGVECTOR_VERSION} did not install"
}

# Where the cluster is (known once the postgres user exists, that is after install_packages).
locate_cluster() {
    ROOT="$(cluster_root)"
    DATA="${ROOT}/data"
    SOCKET_DIR="$(socket_dir "${ROOT}")"
    LOGFILE="${ROOT}/postgres.log"
}

is_running() {
    [[ -f "${DATA}/PG_VERSION" ]] && id postgres >/dev/null 2>&1 && as_postgres "${PG_BIN}/pg_ctl" -D "${DATA}" status >/dev/null 2>&1
}

init_cluster() {
    mkdir -p "${ROOT}"
    chown postgres:postgres "${ROOT}"
    chmod 0700 "${ROOT}"
    if [[ -f "${DATA}/PG_VERSION" ]]; then
        log "cluster: ${DATA} exists"
        return
    fi
    log "cluster: initdb ${DATA}"
    rm -rf "${DATA}"
    as_postgres "${PG_BIN}/initdb" -D "${DATA}" -U postgres -E UTF8 --locale=C.UTF-8 \
        --auth-local=peer --auth-host=scram-sha-256 >/dev/null
    # A disposable test cluster: no durability against power loss needed (the crash tests kill
    # clients, not the server).
    cat >> "${DATA}/postgresql.conf" <<EOF

# memgpt CI
listen_addresses = '${HOST}'
port = ${PORT}
max_connections = 200
fsync = off
full_page_writes = off
synchronous_commit = off
EOF
}

start_cluster() {
    mkdir -p "${SOCKET_DIR}"
    chown postgres:postgres "${SOCKET_DIR}"
    if is_running; then
        log "server: already running on ${HOST}:${PORT}"
        return
    fi
    log "server: starting on ${HOST}:${PORT}"
    FRESH_START=1
    as_postgres "${PG_BIN}/pg_ctl" -D "${DATA}" -l "${LOGFILE}" -w -t 60 \
        -o "-c unix_socket_directories='${SOCKET_DIR}'" start >/dev/null \
        || { tail -n 30 "${LOGFILE}" >&2 || true; die "the server did not start"; }
}

ensure_database() {
    psql_admin -d postgres <<EOF
SELECT 'CREATE ROLE ${ROLE} LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${ROLE}')
\gexec
ALTER ROLE ${ROLE} WITH LOGIN PASSWORD '${PASSWORD}';
SELECT 'CREATE DATABASE ${DATABASE} OWNER ${ROLE}'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '${DATABASE}')
\gexec
EOF
    # Created here by the superuser, so the tests' role need not be allowed to.
    psql_admin -d "${DATABASE}" -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS vector"
    if (( FRESH_START )); then
        # Each test run leaves one schema per test (memgpt_test_*); nobody can be using them
        # before the server was up, so clear them out (one statement each: a single transaction
        # could run out of locks).
        log "database: dropping leftover test schemas"
        psql_admin -d "${DATABASE}" <<'EOF'
SET client_min_messages = warning;
SELECT format('DROP SCHEMA %I CASCADE', nspname) FROM pg_namespace WHERE nspname LIKE 'memgpt\_test\_%'
\gexec
EOF
    fi
}

stop_cluster() {
    if is_running; then
        log "server: stopping"
        as_postgres "${PG_BIN}/pg_ctl" -D "${DATA}" -m fast -w stop >/dev/null
    else
        log "server: not running"
    fi
}

case "${1:-}" in
    start)
        [[ "$(id -u)" == 0 ]] || die "run as root (it installs packages and runs the server as postgres)"
        install_packages
        install_pgvector
        locate_cluster
        init_cluster
        start_cluster
        ensure_database
        printf '%s\n' "${URL}"
        ;;
    stop)
        locate_cluster
        stop_cluster
        ;;
    url)
        printf '%s\n' "${URL}"
        ;;
    *)
        echo "usage: $0 start|stop|url" >&2
        exit 2
        ;;
esac
