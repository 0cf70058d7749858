// libpq (Debian libpq-dev, PostgreSQL 15), the client of the `postgres` sink.
// Only Plugins/PostgresOutput/PostgresConnection.swift talks to it.
#include <libpq-fe.h>
