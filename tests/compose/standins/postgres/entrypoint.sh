#!/bin/sh
# What the official postgres image's entrypoint does, in the parts synthgate's compose file
# uses: on the first start, initdb with POSTGRES_USER / POSTGRES_PASSWORD and create
# POSTGRES_DB; password (scram) authentication over TCP from anywhere, trust on the socket;
# run as the postgres user, listening on every interface.
set -eu

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

user=${POSTGRES_USER:-postgres}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
    pwfile=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
    db=${POSTGRES_DB:-$user}
    if [ "$db" != postgres ]; then
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        createdb --username="$user" "$db"
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
    echo "stand-in postgres: initialized $PGDATA for $user / $db"
fi

if [ "$1" = postgres ]; then
    shift
    exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"
