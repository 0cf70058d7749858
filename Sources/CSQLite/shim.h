// The system SQLite (Debian libsqlite3-dev), used by the HTTP sink's durable queue.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import:
// this constant makes sqlite3_bind_* copy the bytes it is given.
static const sqlite3_destructor_type csqlite_transient = SQLITE_TRANSIENT;
