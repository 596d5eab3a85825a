#!/usr/bin/env bash
# Entrypoint of docker-compose.yaml's `cassandra` service: turns authentication and
# authorization on in the image's cassandra.yaml (the official image has no variable for them),
# then hands over to the image's own entrypoint, which sets addresses, seeds, cluster name and
# snitch and drops to the cassandra user:
#
#   authenticator: PasswordAuthenticator    logins with a password (system_auth.roles)
#   authorizer: CassandraAuthorizer         GRANTed permissions (system_auth.role_permissions)
#   role_manager: CassandraRoleManager      the roles themselves
#
# It runs at every container start and is idempotent. Both forms of the keys are handled: a
# plain `authenticator: AllowAllAuthenticator` (Cassandra 4.x) and the block form of 5.0,
# `authenticator:` with an indented `class_name:` (and `parameters:`), whose indented lines go.
# The roles (an admin, the application's login; the built-in cassandra/cassandra switched off)
# are made by deploy/cassandra/create-roles.sh in the `cassandra-init` service.
set -euo pipefail

conf="${CASSANDRA_CONF:-/etc/cassandra}/cassandra.yaml"

# set_key KEY VALUE: the top-level KEY of $conf becomes `KEY: VALUE` (appended when missing).
set_key() {
    local key=$1 value=$2 tmp
    tmp=$(mktemp)
    awk -v key="$key" -v value="$value" '
        # Inside the replaced block: blank lines are held until we know whether the block goes on.
        skip && /^[[:space:]]*$/ { held = held $0 "\n"; next }
        skip && /^[[:space:]]/ { held = ""; next }
        skip { printf "%s", held; held = ""; skip = 0 }
        index($0, key ":") == 1 { print key ": " value; skip = 1; found = 1; next }
        { print }
        END { printf "%s", held; if (!found) print key ": " value }
    ' "$conf" > "$tmp"
    # No `mv`: the file may be bind-mounted (the image's own entrypoint edits it the same way).
    cat "$tmp" > "$conf"
    rm -f "$tmp"
    if ! grep -qx "$key: $value" "$conf"; then
        echo "enable-auth: could not set $key in $conf" >&2
        exit 1
    fi
}

set_key authenticator PasswordAuthenticator
set_key authorizer CassandraAuthorizer
set_key role_manager CassandraRoleManager
echo "enable-auth: $conf has PasswordAuthenticator, CassandraAuthorizer, CassandraRoleManager"

# The image's default command, which a compose `entrypoint` clears.
if [ "$#" -eq 0 ]; then
    set -- cassandra -f
fi
exec docker-entrypoint.sh "$@"
