#!/usr/bin/env bash
# A hot standby of the local PostgreSQL cluster, for the replica tests (tests/test_replica.py).
#
#   .ci/pg_replica.sh            create it if absent, start it if stopped, wait until it serves
#   .ci/pg_replica.sh --recreate drop it and make it again (e.g. after it fell too far behind)
#
# The primary is cluster `main` of PostgreSQL $PG_VERSION (default 15) on 127.0.0.1:5432; the
# standby is cluster `replica` on 127.0.0.1:5433, a streaming copy made by pg_basebackup
# (-R: standby.signal + primary_conninfo; -X stream). No replication slot: a standby that is
# stopped for long never makes the primary keep more than wal_keep_size (1 GB, set below) of
# WAL for it (it may then need --recreate).
# PG_PRIMARY_CLUSTER / PG_PRIMARY_PORT / PG_REPLICA_CLUSTER / PG_REPLICA_PORT name another
# pair (the soak's own, soak/cluster.py: `soak` on 5440, `soak_standby` on 5441).
# Runs as root (pg_createcluster, pg_ctlcluster, editing pg_hba.conf). Idempotent: an existing
# standby is only started, never rebuilt, unless --recreate is given.
set -euo pipefail

version="${PG_VERSION:-15}"
primary="${PG_PRIMARY_CLUSTER:-main}"
primary_port="${PG_PRIMARY_PORT:-5432}"
replica="${PG_REPLICA_CLUSTER:-replica}"
replica_port="${PG_REPLICA_PORT:-5433}"
primary_conf="/etc/postgresql/$version/$primary"
replica_conf="/etc/postgresql/$version/$replica"
say() { echo "pg_replica: $*" >&2; }

if ! pg_isready -q -h 127.0.0.1 -p "$primary_port"; then
    say "ERROR: the primary (cluster $version/$primary) is not reachable on 127.0.0.1:$primary_port"
    exit 1
fi
psql_primary() { psql -X -q -A -t -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -c "$1"; }

# --- the primary accepts streaming replication from 127.0.0.1 --------------------------------
# PostgreSQL 15's defaults already allow it (wal_level=replica, max_wal_senders=10): checked,
# never changed (changing them needs a restart of a server others use).
wal_level="$(psql_primary 'SHOW wal_level')"
senders="$(psql_primary 'SHOW max_wal_senders')"
if [ "$wal_level" = minimal ] || [ "$senders" = 0 ]; then
    say "ERROR: the primary has wal_level=$wal_level, max_wal_senders=$senders;" \
        "set wal_level=replica and max_wal_senders>0 in $primary_conf/postgresql.conf and restart it"
    exit 1
fi
# A standby stopped by the tests (or slowed by a busy machine) must find the WAL it missed:
# the primary keeps 1 GB of it (wal_keep_size needs a reload only, never a restart).
if [ "$(psql_primary 'SHOW wal_keep_size')" = 0 ]; then
    say "keeping 1GB of WAL on the primary for a standby that falls behind (wal_keep_size)"
    psql_primary "ALTER SYSTEM SET wal_keep_size = '1GB'"
    psql_primary "SELECT pg_reload_conf()" >/dev/null
fi
hba="$primary_conf/pg_hba.conf"
if ! grep -qE '^host\s+replication\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
    # first: a stock cluster's own 'host replication ... scram-sha-256' line would match first
    say "adding 'host replication all 127.0.0.1/32 trust' to the top of $hba"
    sed -i '1i host replication all 127.0.0.1/32 trust' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$version" "$primary" reload
fi

cluster_exists() { pg_lsclusters -h | awk -v v="$version" -v c="$replica" '$1 == v && $2 == c' | grep -q .; }

if [ "${1:-}" = --recreate ] && cluster_exists; then
    say "dropping cluster $version/$replica"
    pg_dropcluster --stop "$version" "$replica"
fi

# --- create the standby once -------------------------------------------------------------------
if ! cluster_exists; then
    say "creating cluster $version/$replica on port $replica_port"
    pg_createcluster "$version" "$replica" -p "$replica_port" >/dev/null
    datadir="$(pg_lsclusters -h | awk -v v="$version" -v c="$replica" '$1 == v && $2 == c {print $6}')"
    # the standby takes connections as the primary does (the suite connects without a password)
    cp "$hba" "$replica_conf/pg_hba.conf"
    find "$datadir" -mindepth 1 -delete
    say "copying the primary into $datadir (pg_basebackup)"
    # --checkpoint=fast: the default spread checkpoint waits for the primary's next one (up to
    # checkpoint_timeout) on a primary that writes little, as a fresh CI machine's does
    runuser -u postgres -- pg_basebackup -h 127.0.0.1 -p "$primary_port" -U postgres \
        -D "$datadir" -R -X stream --checkpoint=fast
fi

# --- start it and wait until it answers as a standby ------------------------------------------
if ! pg_isready -q -h 127.0.0.1 -p "$replica_port"; then
    say "starting cluster $version/$replica"
    pg_ctlcluster --skip-systemctl-redirect "$version" "$replica" start || true
fi
for _ in $(seq 1 60); do
    pg_isready -q -h 127.0.0.1 -p "$replica_port" && break
    sleep 1
done
in_recovery="$(psql -X -A -t -h 127.0.0.1 -p "$replica_port" -U postgres -d postgres \
    -c 'SELECT pg_is_in_recovery()' 2>/dev/null || true)"
if [ "$in_recovery" != t ]; then
    say "ERROR: nothing answers as a hot standby on 127.0.0.1:$replica_port" \
        "(see /var/log/postgresql/postgresql-$version-$replica.log; --recreate rebuilds it)"
    exit 1
fi
say "hot standby of 127.0.0.1:$primary_port serving on 127.0.0.1:$replica_port"
