#!/usr/bin/env bash
# Starts and stops the remote-execution test services on loopback: a private PostgreSQL 15
# cluster and a BuildGrid server (REAPI Execution, ActionCache, CAS, ByteStream, Capabilities
# and the Remote Workers API's Bots service; instance name "") whose scheduler lives in it.
#
# Usage: scripts/ci/remote-services.sh start DIR
#        scripts/ci/remote-services.sh stop DIR
#
# start  DIR may be missing or an empty directory (e.g. from mktemp -d). Everything goes under
#        it: the cluster (DIR/pg), the server's config and log (DIR/buildgrid.yml, DIR/bgd.log),
#        the pids. Both listen on free loopback ports, so runs side by side do not clash. When
#        the server answers, scripts/ci/reapi-smoke.py proves it works (a blob round trip and
#        an ActionCache miss), and only then is DIR/env written, a file to `source`:
#          export GREENLIGHT_TEST_REAPI=http://127.0.0.1:PORT
#          export GREENLIGHT_TEST_PG=postgresql://postgres@127.0.0.1:PGPORT/greenlight
#          export GREENLIGHT_TEST_PG_CA=DIR/pg/ca.crt
#        The server also takes TLS (its certificate, for 127.0.0.1, is signed by that CA), and
#        has two more roles for the store's connection tests: gl_password (password "pw-test",
#        which it must give) and gl_tls (which must connect over TLS).
#        (database greenlight is empty; bgd is BuildGrid's). On failure it stops what it
#        started, prints the log's tail and exits 1, leaving DIR for `stop`.
# stop   stops BuildGrid (its own process group) and PostgreSQL, then removes DIR. Safe to run
#        twice, on a DIR whose start failed halfway, or on a DIR that is gone.
#
# Needs Debian's PostgreSQL 15 binaries (apt-get install postgresql; GREENLIGHT_PG_BIN names
# another bin directory) and the venv scripts/ci/install-buildgrid.sh makes
# (GREENLIGHT_BUILDGRID_VENV, default .tools/venv-buildgrid). PostgreSQL refuses to run as root,
# so as root the cluster belongs to the `postgres` user and runs as it (runuser); DIR must then
# be reachable by that user (a DIR under /tmp is).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${GREENLIGHT_BUILDGRID_VENV:-$root/.tools/venv-buildgrid}"
pg_bin="${GREENLIGHT_PG_BIN:-/usr/lib/postgresql/15/bin}"
# The file start leaves in DIR first; stop removes only a DIR that holds it.
marker=.greenlight-remote-services
# How long the server gets to answer its first call (3 to 7 s here, on 2 busy cores).
start_timeout=60

die() {
    printf 'remote-services: %s\n' "$*" >&2
    exit 1
}

# as_pg CMD…: runs CMD as the cluster's owner, from a directory that user can enter.
as_pg() {
    if [[ "$(id -u)" == 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# group_running PGID: a process of group PGID is still running. An exited one stays a zombie
# until init reaps it (the server's parent, the start that launched it, is gone by then), and
# counts as gone. Read from /proc: slim images have no ps.
group_running() {
    local pgid="$1" stat fields
    for stat in /proc/[0-9]*/stat; do
        read -r fields 2>/dev/null <"$stat" || continue
        # After the command name in parentheses: state, ppid, pgrp, …
        read -r -a fields <<<"${fields##*) }"
        [[ "${fields[2]}" == "$pgid" && "${fields[0]}" != Z ]] && return 0
    done
    return 1
}

# stop_all DIR: ends whatever of BuildGrid and PostgreSQL a start in DIR left running.
stop_all() {
    local dir="$1" pgid waited
    if [[ -f "$dir/bgd.pid" ]]; then
        pgid="$(cat "$dir/bgd.pid")"
        if [[ "$pgid" =~ ^[0-9]+$ ]] && kill -TERM -- "-$pgid" 2>/dev/null; then
            # BuildGrid stops its threads on SIGTERM (about 3 s here); a group still running
            # after 10 s is killed.
            for ((waited = 0; waited < 100; waited++)); do
                group_running "$pgid" || break
                sleep 0.1
            done
            kill -KILL -- "-$pgid" 2>/dev/null || true
        fi
        rm -f "$dir/bgd.pid"
    fi
    if [[ -f "$dir/pg/data/postmaster.pid" ]]; then
        as_pg "$pg_bin/pg_ctl" stop -D "$dir/pg/data" -m fast -w -t 30 >/dev/null 2>&1 || true
        # A postmaster that outlived pg_ctl (or a pg_ctl that could not run) is killed outright.
        local pid
        pid="$(head -n 1 "$dir/pg/data/postmaster.pid" 2>/dev/null || true)"
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
            [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == postgres ]]; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
}

# free_ports N: N distinct TCP ports free on 127.0.0.1 right now (held open together while
# chosen, so they differ). Another process may take one before it is used: start retries.
free_ports() {
    "$venv/bin/python" - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

start() {
    local dir="$1"
    [[ -x "$pg_bin/initdb" && -x "$pg_bin/pg_ctl" && -x "$pg_bin/psql" ]] ||
        die "no PostgreSQL 15 binaries in $pg_bin: apt-get install postgresql (or set GREENLIGHT_PG_BIN)"
    [[ -x "$venv/bin/bgd" && -f "$venv/greenlight-variant" ]] ||
        die "no BuildGrid venv at $venv: run scripts/ci/install-buildgrid.sh${GREENLIGHT_BUILDGRID_VENV:+ \"$venv\"}"
    "$venv/bin/python" -c '' 2>/dev/null ||
        die "$venv/bin/python does not run (is the python it was made from gone or unreadable?): run scripts/ci/install-buildgrid.sh${GREENLIGHT_BUILDGRID_VENV:+ \"$venv\"} again"
    local variant config_template scheme
    variant="$(cat "$venv/greenlight-variant")"
    case "$variant" in
        0.9.1) config_template="$root/scripts/ci/buildgrid.yml" scheme=postgresql ;;
        0.4.4) config_template="$root/scripts/ci/buildgrid-0.4.yml" scheme=postgresql+psycopg2 ;;
        *) die "$venv/greenlight-variant names BuildGrid '$variant', which no config here fits: run scripts/ci/install-buildgrid.sh again" ;;
    esac
    if [[ "$(id -u)" == 0 ]]; then
        id postgres >/dev/null 2>&1 ||
            die "running as root, and PostgreSQL refuses to run as root, but there is no 'postgres' user to run it as: apt-get install postgresql creates it"
        command -v runuser >/dev/null 2>&1 || die "running as root needs runuser (apt-get install util-linux)"
    fi

    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [[ -z "$(ls -A "$dir")" ]] || die "$dir is not empty (already started? 'remote-services.sh stop $dir' first)"
    # What lets `stop` remove DIR: it never deletes a directory this script did not fill.
    : >"$dir/$marker"
    # From here on, a failure stops what was started; DIR stays for its logs until `stop`.
    # shellcheck disable=SC2064 # DIR is expanded now, on purpose
    trap "stop_all $(printf %q "$dir")" EXIT

    # PostgreSQL: a cluster of its own, trust auth, TCP on loopback only (no unix socket, whose
    # path length DIR would limit), durability off (a test cluster dies with its DIR).
    mkdir "$dir/pg"
    if [[ "$(id -u)" == 0 ]]; then
        chmod a+x "$dir"
        chown postgres: "$dir/pg"
        runuser -u postgres -- test -w "$dir/pg" ||
            die "the postgres user cannot reach $dir/pg (a parent directory is closed to it): use a DIR under /tmp"
    fi
    as_pg "$pg_bin/initdb" -D "$dir/pg/data" -A trust -U postgres -E UTF8 --no-locale --no-sync \
        >"$dir/pg/initdb.log" 2>&1 || { cat "$dir/pg/initdb.log" >&2; die "initdb failed (above)"; }
    cat >>"$dir/pg/data/postgresql.conf" <<'CONF'
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
CONF
    # TLS and passwords, for the store's connection tests: a certificate for 127.0.0.1 signed by
    # a CA of this run (DIR/pg/ca.crt), a role that must give a password (gl_password, password
    # "pw-test") and one that must come over TLS (gl_tls).
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=greenlight test CA' \
        -keyout "$dir/pg/ca.key" -out "$dir/pg/ca.crt" >/dev/null 2>&1 ||
        die "openssl could not make the test CA (apt-get install openssl)"
    openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' \
        -keyout "$dir/pg/data/server.key" -out "$dir/pg/server.csr" >/dev/null 2>&1 &&
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/pg/san.ext" &&
        openssl x509 -req -in "$dir/pg/server.csr" -CA "$dir/pg/ca.crt" -CAkey "$dir/pg/ca.key" \
            -CAcreateserial -days 2 -extfile "$dir/pg/san.ext" -out "$dir/pg/data/server.crt" \
            >/dev/null 2>&1 ||
        die "openssl could not make the test server certificate"
    chmod 600 "$dir/pg/data/server.key"
    [[ "$(id -u)" == 0 ]] && chown postgres "$dir/pg/data/server.key" "$dir/pg/data/server.crt"
    {
        printf 'host all gl_password 127.0.0.1/32 scram-sha-256\n'
        printf 'hostnossl all gl_tls 127.0.0.1/32 reject\n'
        cat "$dir/pg/data/pg_hba.conf"
    } >"$dir/pg/hba.new" && mv "$dir/pg/hba.new" "$dir/pg/data/pg_hba.conf"
    [[ "$(id -u)" == 0 ]] && chown postgres "$dir/pg/data/pg_hba.conf"
    local pg_port port attempt
    for attempt in 1 2 3; do
        read -r pg_port port < <(free_ports 2)
        as_pg "$pg_bin/pg_ctl" start -D "$dir/pg/data" -w -t 60 -l "$dir/pg/postgres.log" \
            -o "-p $pg_port" \
            >/dev/null 2>&1 && break
        # Most likely the port was taken in between; anything else fails the same way thrice.
        if ((attempt == 3)); then
            tail -n 20 "$dir/pg/postgres.log" >&2 || true
            die "PostgreSQL did not start (log above: $dir/pg/postgres.log)"
        fi
    done
    "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres \
        -c 'create database bgd' -c 'create database greenlight' \
        -c "create role gl_password login superuser password 'pw-test'" \
        -c 'create role gl_tls login superuser' >/dev/null ||
        die "creating the databases bgd and greenlight on 127.0.0.1:$pg_port failed (above)"
    "$venv/bin/bgd" migrate apply "$scheme://postgres@127.0.0.1:$pg_port/bgd" >"$dir/migrate.log" 2>&1 ||
        { tail -n 20 "$dir/migrate.log" >&2; die "bgd migrate apply failed (log above: $dir/migrate.log)"; }

    # BuildGrid: in a session (so a process group) of its own, which `stop` ends as a whole.
    for attempt in 1 2 3; do
        sed -e "s/@PORT@/$port/g" -e "s/@PGPORT@/$pg_port/g" "$config_template" >"$dir/buildgrid.yml"
        # shellcheck disable=SC2016 # expanded by the inner bash, whose $$ is the server's pid
        setsid bash -c 'echo $$ >"$1/bgd.pid"; exec "$2/bin/bgd" server start "$1/buildgrid.yml"' \
            bgd "$dir" "$venv" >"$dir/bgd.log" 2>&1 </dev/null &
        local waited
        for ((waited = 0; waited < 50; waited++)); do
            [[ -s "$dir/bgd.pid" ]] && break
            sleep 0.1
        done
        [[ -s "$dir/bgd.pid" ]] || die "setsid did not start the server (log: $dir/bgd.log)"
        local rc=0
        "$venv/bin/python" "$root/scripts/ci/reapi-smoke.py" "http://127.0.0.1:$port" \
            --wait "$start_timeout" --pid "$(cat "$dir/bgd.pid")" >"$dir/smoke.log" 2>&1 || rc=$?
        if ((rc == 0)); then
            break
        fi
        # A server that died at once on a port taken since it was chosen gets another port.
        if ((rc == 2 && attempt < 3)) && grep -qi 'address already in use\|failed to bind\|bind to' "$dir/bgd.log"; then
            stop_bgd_only "$dir"
            continue
        fi
        echo "---- $dir/bgd.log (tail)" >&2
        tail -n 30 "$dir/bgd.log" >&2 || true
        echo "----" >&2
        cat "$dir/smoke.log" >&2
        die "BuildGrid $variant on 127.0.0.1:$port did not come up (config $dir/buildgrid.yml)"
    done

    local env_tmp="$dir/env.tmp"
    {
        echo "export GREENLIGHT_TEST_REAPI=http://127.0.0.1:$port"
        echo "export GREENLIGHT_TEST_PG=postgresql://postgres@127.0.0.1:$pg_port/greenlight"
        echo "export GREENLIGHT_TEST_PG_CA=$dir/pg/ca.crt"
    } >"$env_tmp"
    mv "$env_tmp" "$dir/env"
    trap - EXIT
    echo "remote-services: BuildGrid $variant on 127.0.0.1:$port, PostgreSQL on 127.0.0.1:$pg_port ($dir/env)"
}

# stop_bgd_only DIR: ends the server alone (a retry on another port keeps the cluster).
stop_bgd_only() {
    local dir="$1" pgid
    pgid="$(cat "$dir/bgd.pid" 2>/dev/null || true)"
    [[ "$pgid" =~ ^[0-9]+$ ]] && kill -KILL -- "-$pgid" 2>/dev/null || true
    rm -f "$dir/bgd.pid"
}

# made_by_start DIR: DIR holds the marker, or (from a start before the marker) only what start
# puts there.
made_by_start() {
    [[ -f "$1/$marker" ]] && return 0
    [[ -d "$1/pg" ]] || return 1
    local entry
    for entry in "$1"/* "$1"/.[!.]*; do
        case "${entry##*/}" in
            pg | bgd.log | bgd.pid | buildgrid.yml | env | env.tmp | migrate.log | smoke.log | '*' | '.[!.]*') ;;
            *) return 1 ;;
        esac
    done
}

stop() {
    local dir="$1"
    [[ -e "$dir" ]] || return 0
    if [[ -d "$dir" && -z "$(ls -A "$dir")" ]]; then
        rmdir "$dir"
        return 0
    fi
    made_by_start "$dir" ||
        die "$dir was not made by 'remote-services.sh start' (no $marker in it); not touching it"
    stop_all "$dir"
    rm -rf "$dir"
}

case "${1:-}" in
    start | stop)
        [[ -n "${2:-}" ]] || die "usage: $0 $1 DIR"
        "$1" "$2"
        ;;
    *) die "usage: $0 start DIR | stop DIR" ;;
esac
