#!/usr/bin/env bash
# docker-compose.yaml's `cassandra-init` (the cassandra image, for its cqlsh), at every `up`,
# after deploy/cassandra/enable-auth.sh has turned PasswordAuthenticator on:
#
#   1. the first time only, logs in as the built-in superuser cassandra/cassandra (Cassandra
#      makes it on the first start with authentication, when no role exists) and creates the
#      superuser $CASSANDRA_ADMIN_USERNAME with $CASSANDRA_ADMIN_PASSWORD;
#   2. as that admin, whenever cassandra/cassandra still logs in: takes login and superuser from
#      the built-in role and gives it a random password (Cassandra's own advice);
#   3. as the admin, every time: creates the application's role $CASSANDRA_USERNAME if missing,
#      else sets its password to $CASSANDRA_PASSWORD if that does not log in (a changed password
#      takes effect at the next `up`). Not a superuser: CREATE on all keyspaces (Cassandra gives
#      a keyspace's creator every permission on it), SELECT on system_views.max_partition_size
#      (the audits read it; system.size_estimates is readable by every role), and every
#      permission on $STATESTORE_KEYSPACE when that keyspace already exists (made before
#      authentication was on, or by another role).
#
# Passwords reach cqlsh through a 0600 credentials file and the statements through stdin, never
# through the command line. Identifiers must be lower-case CQL names; passwords any text.
set -euo pipefail

host=${CASSANDRA_HOST:-cassandra}
port=${CASSANDRA_PORT:-9042}
timeout_s=${CASSANDRA_INIT_TIMEOUT:-300}
keyspace=${STATESTORE_KEYSPACE:-wordcount}
admin=${CASSANDRA_ADMIN_USERNAME:?set CASSANDRA_ADMIN_USERNAME}
admin_password=${CASSANDRA_ADMIN_PASSWORD:?set CASSANDRA_ADMIN_PASSWORD}
app=${CASSANDRA_USERNAME:?set CASSANDRA_USERNAME}
app_password=${CASSANDRA_PASSWORD:?set CASSANDRA_PASSWORD}
cqlsh=${CQLSH:-cqlsh}

for name in "$admin" "$app" "$keyspace"; do
    if ! [[ $name =~ ^[a-z][a-z0-9_]{0,47}$ ]]; then
        echo "create-roles: '$name' is not a lower-case CQL name ([a-z][a-z0-9_]*)" >&2
        exit 2
    fi
done
if [ "$admin" = cassandra ] || [ "$app" = cassandra ] || [ "$admin" = "$app" ]; then
    echo "create-roles: the admin and the application need roles of their own, neither 'cassandra'" >&2
    exit 2
fi

umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
HOME=$work # cqlsh keeps its history under ~/.cassandra

# A CQL string literal.
literal() { printf "'%s'" "${1//\'/\'\'}"; }

# cql USER PASSWORD < statements: runs them as USER; fails on the first error.
cql() {
    printf '[plain_text_auth]\nusername = %s\npassword = %s\n' "$1" "$2" > "$work/credentials"
    "$cqlsh" "$host" "$port" --credentials "$work/credentials" --request-timeout 60 --no-color
}

logs_in() { cql "$1" "$2" <<< "SELECT release_version FROM system.local;" > /dev/null 2>&1; }

# 1. The admin, made by the built-in superuser the first time.
deadline=$((SECONDS + timeout_s))
until logs_in "$admin" "$admin_password"; do
    if logs_in cassandra cassandra; then
        cql cassandra cassandra <<< "CREATE ROLE IF NOT EXISTS $admin
            WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = $(literal "$admin_password");"
        echo "create-roles: created the superuser $admin"
        sleep 2 # the credentials cache
    elif ((SECONDS >= deadline)); then
        echo "create-roles: after ${timeout_s}s neither $admin nor cassandra/cassandra logs in to" \
            "$host:$port; if $admin exists, CASSANDRA_ADMIN_PASSWORD must be the password it was" \
            "created with" >&2
        exit 1
    else
        sleep 5
    fi
done

# 2. The built-in superuser off.
if logs_in cassandra cassandra; then
    random=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
    cql "$admin" "$admin_password" <<< "ALTER ROLE cassandra
        WITH PASSWORD = $(literal "$random") AND SUPERUSER = false AND LOGIN = false;"
    echo "create-roles: cassandra/cassandra can no longer log in"
fi

# 3. The application's role. Its password is only set when it does not log in with it already:
# Cassandra refuses a second password change of a role within 5 s, and each costs a bcrypt hash.
exists=$(cql "$admin" "$admin_password" <<< "SELECT role FROM system_auth.roles WHERE role = $(literal "$app");")
if [[ $exists != *"(1 rows)"* ]]; then
    cql "$admin" "$admin_password" <<< "CREATE ROLE $app WITH LOGIN = true AND PASSWORD = $(literal "$app_password");"
    echo "create-roles: created the role $app"
elif ! logs_in "$app" "$app_password"; then
    cql "$admin" "$admin_password" <<< "ALTER ROLE $app WITH LOGIN = true AND PASSWORD = $(literal "$app_password");"
    echo "create-roles: set the password of $app"
fi
cql "$admin" "$admin_password" << CQL
GRANT CREATE ON ALL KEYSPACES TO $app;
GRANT SELECT ON TABLE system_views.max_partition_size TO $app;
CQL
found=$(cql "$admin" "$admin_password" <<< "SELECT keyspace_name FROM system_schema.keyspaces
    WHERE keyspace_name = $(literal "$keyspace");")
if [[ $found == *"(1 rows)"* ]]; then
    cql "$admin" "$admin_password" <<< "GRANT ALL PERMISSIONS ON KEYSPACE $keyspace TO $app;"
fi
echo "create-roles: $app logs in (CREATE on all keyspaces; all permissions on $keyspace once it exists)"
