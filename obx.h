/* obx.h — a transactional outbox for C, over ODBC.               v0.2.0
 *
 * A message is written in the same database transaction as the business
 * change that caused it, then handed to a handler by topic, at least once.
 * One file holds the whole library, STB style:
 *
 *     #define OBX_IMPLEMENTATION      // in exactly one .c file
 *     #include "obx.h"
 *
 * Every other file includes "obx.h" without the define. Link with -lodbc
 * (unixODBC). Requires C99; compiles as C++ too. obx.h and ibx.h (the
 * inbox) share their core, so one program can use both.
 *
 * CONTENTS
 *   1. Quick start           5. Errors
 *   2. Compile-time options  6. Databases and ODBC notes
 *   3. Runtime options       7. Testing with the fake ODBC layer
 *   4. Threads               8. License (end of file)
 *   Then the API: common (results, hooks, limits, backoff, selection,
 *   UUIDs), store and messages (enqueue, ordering keys, the envelope: tenant,
 *   aggregate and headers, expiry, priority, ack, abandon, fail, lease extend, get; in
 *   a transaction of your own driver: obx_enqueue_sql), the work queue and
 *   dispatcher (claim, reap, cleanup, metrics, providers, routers, batch
 *   handlers, pauses), dead letters (list, replay, purge), joins (fan-in,
 *   cancel).
 *
 * 1. QUICK START ------------------------------------------------------------
 *   A whole program (it is compiled and run by `make check`): open a store
 *   on a SQLite file and create its tables, enqueue a message, deliver it.
 *
 *     #define OBX_IMPLEMENTATION
 *     #include "obx.h"
 *     #include <stdio.h>
 *
 *     static obx_outcome send_email(const obx_message *m, char *error, size_t size, void *user) {
 *         (void)error; (void)size; (void)user;
 *         printf("deliver %s: %s\n", m->topic, m->payload);
 *         return OBX_DONE; // or OBX_RETRY with a reason in `error`: tried again later
 *     }
 *
 *     int main(void) {
 *         obx_store_desc desc = {0};
 *         obx_dispatcher_desc dd = {0};
 *         obx_new_message m = {0};
 *         obx_store *store = NULL;
 *         obx_dispatcher *d = NULL;
 *         obx_result r;
 *         desc.connection_string = "Driver={SQLite3};Database=quickstart.db;JournalMode=WAL;";
 *         desc.deploy_schema = 1; // create the tables if they are missing
 *         if (obx_store_open(&desc, &store) != OBX_OK) {
 *             fprintf(stderr, "open: %s\n", obx_store_last_error(store)->message);
 *             obx_store_close(store);
 *             return 1;
 *         }
 *         m.topic = "email.send";
 *         m.payload = "{\"to\":\"ops@example.com\"}";
 *         m.payload_len = OBX_NTS;
 *         // In your own transaction: obx_enqueue_tx(store, your_hdbc, &m, NULL).
 *         r = obx_enqueue(store, &m, NULL);
 *         dd.store = store;
 *         if (r == OBX_OK) r = obx_dispatcher_create(&dd, &d);
 *         if (r == OBX_OK) r = obx_dispatcher_on(d, "email.send", send_email, NULL);
 *         // A service calls obx_dispatcher_run(d) until obx_dispatcher_stop();
 *         // here: rounds until nothing is left.
 *         while (r == OBX_OK) r = obx_dispatcher_run_once(d, NULL);
 *         if (r != OBX_EMPTY) fprintf(stderr, "%s\n", obx_store_last_error(store)->message);
 *         obx_dispatcher_destroy(d);
 *         obx_store_close(store);
 *         return r == OBX_EMPTY ? 0 : 1;
 *     }
 */
/* >>common-begin manual */
/*
 * 2. COMPILE-TIME OPTIONS --------------------------------------------------
 *   global (must be the same wherever obx.h is included):
 *     OBX_API            linkage of public functions (default: extern)
 *     OBX_STATIC         make every public function static (one-TU use)
 *   implementation-only (matter only where OBX_IMPLEMENTATION is defined):
 *     OBX_ASSERT(c)      assertion used for internal invariants (assert)
 *     OBX_NO_POSIX_CLOCK build without clock_gettime()/nanosleep(); give
 *                        the store a clock hook then (a dispatcher without
 *                        one is refused: it could not sleep between polls)
 *     OBX_NO_THREADS     build without threads: obx_dispatcher_wake() does
 *                        nothing, run() sleeps in 50 ms slices, leases are
 *                        not renewed while handlers run, and a dispatcher
 *                        does not listen at its wake_path
 *     OBX_NO_WAKE_SOCKET build without sockets: a wake_path (store or
 *                        dispatcher desc) is OBX_ERR_UNSUPPORTED (always
 *                        so on Windows)
 *     OBX_SQLITE3_API    reach SQLite through its own C API instead of ODBC
 *                        (link -lsqlite3 or the amalgamation; no driver
 *                        manager, no ODBC driver): each statement is
 *                        prepared once per connection and kept. The
 *                        connection_string is a file name, a "file:" URI, or
 *                        sqliteodbc's pairs (Database=, Timeout= busy ms,
 *                        default 100000, JournalMode=, SyncPragma= default
 *                        NORMAL; other keys ignored); hdbc is the
 *                        application's sqlite3 * (_tx calls then run in its
 *                        transaction on it). The sqlite dialect only; the
 *                        behaviour, schema and tables are the same. Where
 *                        the program includes <sql.h> too, include it first.
 *     OBX_NO_SQLITE, OBX_NO_POSTGRESQL, OBX_NO_MARIADB, OBX_NO_SQLSERVER
 *                        leave that dialect's SQL out (a gateway that only
 *                        talks to SQLite needs none of the others); a store
 *                        on a left-out dialect is OBX_ERR_UNSUPPORTED
 *     OBX_PORTABLE_FALLBACKS  use what macOS has instead of what it lacks
 *                        (on by itself on Apple; forced, it tests that path
 *                        on Linux, glibc 2.36+): condition-variable waits on
 *                        CLOCK_REALTIME deadlines (no
 *                        pthread_condattr_setclock; a wall-clock step
 *                        shifts one short wait slice) and the random seed
 *                        from arc4random_buf (no /dev/urandom)
 *     OBX_TERSE_MESSAGES error and log texts without the sentence that
 *                        explains them (how to fix it, what happens next):
 *                        `where` (call and argument), the result, the
 *                        cause and the database's own text stay; an
 *                        internal assertion says only its line; about
 *                        1.1 KB less on each header
 *   global, for a gateway that needs less (define them for the whole
 *   program: a left-out function is not declared, so calling it is a
 *   compile error; the schema and every struct stay the same):
 *     OBX_NO_MULTI_STORE  no providers or routers (obx_provider_*,
 *                         obx_router_*): a dispatcher serves one store
 *     OBX_NO_METRICS_TEXT no obx_metrics_text, nor the handler-duration
 *                         histograms only it reports (obx_store_counters
 *                         and obx_queue_stats stay)
 *     OBX_NO_DEAD_LETTERS no obx_dead_list/_replay/_purge, obx_dead_move,
 *                         obx_run_now (dead messages
 *                         are still kept; tools built without the option
 *                         handle them)
 *     OBX_NO_ENVELOPE     no envelope on enqueue: a message that sets
 *                         tenant_id, aggregate_type, aggregate_id or headers
 *                         is refused with OBX_ERR_UNSUPPORTED naming the
 *                         field; messages read back have none (the columns
 *                         are not read); no obx_message_header(_at)
 *   The implementation needs POSIX 2008 (clock_gettime, condition-variable
 *   clocks). It arranges that itself: in strict ISO mode (-std=c99, c11,
 *   ...) it defines _POSIX_C_SOURCE 200809L when no feature-test macro is
 *   set (GNU mode needs nothing). Only when a system header came before
 *   obx.h in that file in strict mode is it too late; then an #error says to
 *   include obx.h (with OBX_IMPLEMENTATION) before any other header there,
 *   or to compile it with -D_POSIX_C_SOURCE=200809L. No flag beyond
 *   -pthread and -lodbc (-lsqlite3 with OBX_SQLITE3_API).
 *   Windows (_WIN32; mingw-w64, and code kept to what MSVC takes) needs no
 *   POSIX: the implementation uses Win32 itself, a thin layer in "head"
 *   (SRW locks, condition variables, _beginthreadex, INIT_ONCE; the system
 *   time, the performance counter and Sleep; rand_s for the seed; never
 *   winpthreads), and Windows' own ODBC:
 *   `x86_64-w64-mingw32-gcc -std=c99 app.c -lodbc32` (MSVC: odbc32.lib).
 *   Left out there: the wake socket (a wake_path is OBX_ERR_UNSUPPORTED
 *   naming wake_path; a dispatcher polls). make check-windows builds both
 *   headers with mingw-w64 and -Werror and runs the fake-ODBC tests under
 *   Wine; no real driver nor MSVC is run by the tests.
 *
 * 3. RUNTIME OPTIONS --------------------------------------------------------
 *   Descriptions are structs where all-zero means "the default"; each field
 *   says its default where it is declared. Hooks (obx_hooks): allocator,
 *   clock, logger and random source, each a struct of function pointers
 *   plus a `user` pointer; a NULL function pointer means "the default for
 *   that member":
 *     allocator  malloc / realloc / free (give all three or none: a
 *                half-set allocator is refused with OBX_ERR_INVALID_ARG)
 *     clock      CLOCK_REALTIME for UTC wall time, CLOCK_MONOTONIC for
 *                intervals, nanosleep for sleeping (Windows: the system
 *                time, the performance counter, Sleep)
 *     logger     one line per event to stderr (UTC time, process id,
 *                level, store, text), level INFO and up or what
 *                OBX_LOG_LEVEL says (debug, info, warn, error, off); lines
 *                about single messages are DEBUG unless message_log_level
 *                asks for INFO; control characters in logged text become '?'
 *                and key=value values from outside (topic, ids) are quoted
 *                when not plain. ERROR is for what needs a person (a dead
 *                message, a store that fails and will not mend itself);
 *                WARN for what the library retries (a handler's retry, an
 *                outage, a lock it waits for)
 *     random     splitmix64 seeded from /dev/urandom (arc4random_buf on
 *                Apple, rand_s on Windows; else time, address: a device without
 *                /dev/urandom should give this hook)
 *   The hook types are laid out identically in both headers, so one
 *   allocator, clock or logger implementation plugs into both.
 *   Priority (obx_new_message.priority, -5..5, 0 the default): a claim
 *   takes the higher priority first among due messages, one level worth
 *   10 s of waiting (aging: nothing starves); the outbox's ordering keys
 *   keep their order whatever the priorities. docs/FEATURES.md, "Priority".
 *   Dispatching (obx_dispatcher_desc): handlers take one message each
 *   (obx_dispatcher_on), or all of a claim's messages of their topic in
 *   one call with an outcome per message (obx_dispatcher_on_batch). A
 *   handler's OBX_PAUSE (downstream unavailable) puts the message back
 *   without using an attempt and pauses its topic for pause_ms, doubling
 *   up to pause_max_ms until the topic's first success; other topics go on.
 *   Transactional handlers (obx_dispatcher_on_tx): exactly once for what
 *   a handler writes to the store's own database. The handler gets the
 *   store's connection (an SQLHDBC; with OBX_SQLITE3_API the sqlite3 *) in
 *   a transaction the dispatcher opened for its message. On OBX_DONE the
 *   ack runs in that transaction and checks that the lease is still this
 *   dispatcher's (its owner token on the row, in flight), and one commit
 *   makes the writes and Done durable together; a crash anywhere before
 *   the commit leaves neither, after it both (OBX-TXH-KILL). A lease lost
 *   by then (reaped, claimed elsewhere): everything rolled back, counted in
 *   obx_run_stats.lease_lost, no attempt used. OBX_RETRY, _DEAD, _WAIT,
 *   _PAUSE: the writes are rolled back, then the message is settled as
 *   usual (a retry uses an attempt; dead means dead with no effect; a
 *   connection lost at the ack or the commit uses none). A
 *   deadlock or serialization failure (the handler says OBX_CONFLICT, or
 *   the ack or the commit hits one): rolled back and run again, 3 runs at
 *   most, no attempt used. Locks: the message's row is locked only from
 *   the ack to the commit, so the lease renewal (on its own connection)
 *   and other workers' claims never wait for a handler. SQLite has one
 *   writer at a time: the transaction begins deferred, takes the write
 *   lock at the handler's first write (or the ack), and every other writer
 *   (renewal, claims, producers) waits for its commit, up to their busy
 *   timeout: keep such handlers short there, or write last. A handler that
 *   reads, then writes after another connection committed (the renewal
 *   every third of the lease) gets SQLITE_BUSY at once: a conflict, run
 *   again. Effects outside the database (mail, HTTP) stay at least once.
 *   The batch form (obx_dispatcher_on_batch_tx) commits when every result
 *   is OBX_DONE; otherwise it rolls back, the other outcomes stand, and
 *   the done messages run again alone.
 *   Dead messages are tools' work: obx_dead_list (paged, filtered),
 *   obx_dead_replay (ready again, attempts reset, last error kept, expiry
 *   dropped) and obx_dead_purge; obx_dead_move (an operator's cancel: a
 *   message to Dead with a reason) and obx_run_now (a scheduled one due
 *   now). Crash loops: a message claimed max_starts times (store
 *   desc, default 3) without an outcome, its handler having killed the
 *   process each time, ends dead at the next reap instead of taking a
 *   worker down again; a dispatcher handles a message claimed before
 *   without an outcome alone, after the rest of its batch is settled.
 *   Schema: deploy_schema and obx_store_deploy create the tables, or
 *   upgrade in place those an older release deployed (rows kept; new
 *   PostgreSQL and SQLite tables put the fixed-width hot columns first, an
 *   old table keeps its order: obx_store_rewrite, by hand, PostgreSQL). A deploy
 *   looks in the catalog before each statement that would lock the table
 *   and changes only what is missing or different, so on an up-to-date
 *   schema (every start with deploy_schema, every deploy by the operator's tool) it takes
 *   no lock that blocks writers. A change waits for its lock at most 5 s
 *   and says so (INFO; WARN and OBX_ERR_DB_TRANSIENT when the lock did not
 *   come). What an upgrade locks: PostgreSQL runs it as one transaction,
 *   so from its first added column to its commit the table is under ACCESS
 *   EXCLUSIVE (no reads, no writes), index builds included. MariaDB
 *   commits each statement: most added columns are instant, but the
 *   outbox's PERSISTENT generated columns (ordering) copy the table, writers
 *   waiting for the copy; storage layout 2's state columns are added
 *   VIRTUAL (instant; a new table has them PERSISTENT, which InnoDB's purge
 *   never computes; converting an old table is a copy, docs/RELIABILITY.md)
 *   and their indexes are built online, beside layout 1's
 *   indexes, which the previous release forces; obx_store_upgrade (obxctl
 *   upgrade) converts old keys to UUID and drops those indexes when asked.
 *   A changed trigger gets a new name and is created
 *   before the old one is dropped, so no settle runs without one. Times
 *   measured: docs/UPGRADING.md.
 *
 * 4. THREADS ----------------------------------------------------------------
 *   A store owns one ODBC connection and is used by one thread at a time;
 *   so is a provider and a dispatcher. Give each thread its own (a producing
 *   thread and a dispatching thread each open their own store or provider).
 *   Thread-safe: obx_dispatcher_wake() and obx_dispatcher_stop() (call them
 *   from any thread), and the pure functions (backoff, selection, UUIDs,
 *   identifier checks). Opening connections is serialized internally, for
 *   both headers together (psqlODBC is not safe to connect from two
 *   threads at once). With a custom clock.sleep_ms hook the dispatcher
 *   sleeps through the hook, so obx_dispatcher_wake() cannot shorten its
 *   waits.
 *   Leases: while a batch is handled, one thread of the dispatcher's own
 *   renews its leases every third of the lease (a failed renewal is tried
 *   again after a tenth), on a connection of its own
 *   (opened when first needed), for up to max_handler_ms; so a handler
 *   slower than its lease is never run twice at once. A handler starts only
 *   while the last renewal that extended every message of the batch (or
 *   the claim) still covers it, less a margin: when renewals fail (no
 *   connection slot, out of memory, another thread connecting) or find a
 *   lease gone (reaped: someone else's now), the batch's handlers not yet
 *   started are released, not run. That thread calls the store's hooks
 *   too: they must then be thread-safe (the defaults are). Without
 *   threads, or on a caller's connection, there is no renewal: a handler
 *   must finish well within the lease or extend it itself
 *   (obx_lease_extend); a message whose lease is nearly over when its
 *   turn comes is released for redelivery rather than handled.
 *
 *   Threads and ownership (for maintainers: every object a second thread
 *   touches; no thread keeps a pointer into an object that another
 *   component may free):
 *   - Lease renewer: owned by its dispatcher, from obx_dispatcher_create to
 *     obx_dispatcher_destroy (which joins its thread). It holds copies, not
 *     pointers into a store: the connection string, the extend statement,
 *     the store id, the dialect, the hooks (the default random state its
 *     own). Its connection is its own, closed when the batch's database
 *     differs, when a provider closes a store (counted by the provider,
 *     seen by the dispatcher between batches) and at destroy. The batch's
 *     messages (the store's claim buffer) are read only between the
 *     batch's start and its end, which waits out a renewal in flight; the
 *     dispatcher stays inside that store's round meanwhile. Guarded by the
 *     renewer's mutex.
 *   - Wake listener (wake_path): owned by its dispatcher, alive only inside
 *     obx_dispatcher_run (joined before it returns); touches the socket and
 *     the loop's wait state, which the loop's mutex guards (as for
 *     obx_dispatcher_wake and obx_dispatcher_stop from any thread).
 *   - Provider registry and its stores: owned by the provider, used only by
 *     the thread that uses the provider (its dispatcher's). A database that
 *     is down is opened again on a thread of the provider's own, one attempt
 *     at a time, so its connect (up to the login timeout) never holds up the
 *     open stores: that thread owns only its copies of the id and connection
 *     string and the store it opens; the provider's thread takes the store
 *     in at a later refresh or round (under a lock of the provider's) and
 *     owns it from then on; destroy waits for an attempt that is out.
 *   - The connect lock: process-wide, one for both headers, held only
 *     around SQLDriverConnect. The renewal thread only tries it: a renewal
 *     never queues behind another thread's connect (to a frozen server).
 *   - Hooks: the caller's functions, called from every thread above; the
 *     defaults are thread-safe (the random source steps atomically).
 *   make check-tsan runs the threaded tests under ThreadSanitizer.
 *
 * 5. ERRORS -----------------------------------------------------------------
 *   Every function returns an obx_result: OBX_OK (0), a small positive
 *   value for a non-error outcome (OBX_EMPTY), or a negative error.
 *   obx_result_str() names each. Details of the last error (SQLSTATE,
 *   native code, driver message, which call or argument) are on the store:
 *   obx_store_last_error() (a dispatcher's: obx_dispatcher_last_error()).
 *   Bad input is refused before any SQL runs, naming the argument.
 *   Out-parameters are written only on success, except where a function
 *   says otherwise. OBX_ERR_DB_TRANSIENT means retrying later may succeed
 *   (deadlock, serialization failure, lock timeout, busy database, query
 *   timeout, lost connection). The library already retries a whole unit
 *   of work a few times after a deadlock or serialization failure; it
 *   never retries after a lost connection (the commit's outcome is
 *   unknown), it reports it and reconnects on the next call. A dispatcher
 *   retries a round that failed transiently after 100 ms, backing off to
 *   1 s, so work resumes about a second after the database is back. A
 *   statement the server can never take (MariaDB: a payload over
 *   max_allowed_packet) is OBX_ERR_DB with connection_lost set. A server
 *   that takes no writes (SQLSTATE 25006, MariaDB 1290/1792: a standby
 *   after a failover) is OBX_ERR_DB_TRANSIENT without connection_lost
 *   (nothing was written), and the store reconnects before its next call.
 *   A connect that no retry mends is OBX_ERR_DB, its message naming what
 *   was asked for: a DSN not defined, a driver that cannot be loaded (where
 *   to look: `odbcinst -j`, `odbcinst -q -d`, `odbcinst -q -s`), a database
 *   that does not exist or a refused login, a SQLite file that cannot be
 *   opened (its directory missing); a server that does not answer is
 *   OBX_ERR_DB_TRANSIENT.
 */
/* >>common-end manual */
/*
 *   (2. continued) For obx.h alone, global like OBX_NO_MULTI_STORE:
 *     OBX_NO_JOIN         no joins (obx_join_*), and a deploy creates
 *                         no join tables or triggers (acks and fails
 *                         skip the trigger); a build with joins creates
 *                         them when it deploys, as it adds any column,
 *                         so one database serves builds with and without
 *     OBX_NO_ORDERING_KEYS no ordering keys on enqueue: a message that
 *                         sets ordering_key is refused with
 *                         OBX_ERR_UNSUPPORTED naming it; the claim still
 *                         keeps the order of keys other builds enqueue
 *                         into the same database
 *
 * 6. DATABASES AND ODBC NOTES ----------------------------------------------
 *   The dialect is detected from SQLGetInfo(SQL_DBMS_NAME) or forced with
 *   obx_store_desc.dialect.
 *     SQLite      driver libsqliteodbc: "Driver={SQLite3};Database=f.db;"
 *                 Add "JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
 *                 for speed and a bounded busy wait (the driver waits about
 *                 twice Timeout). Writers use BEGIN IMMEDIATE.
 *                 Power loss (the driver runs "PRAGMA synchronous = <the
 *                 SyncPragma text>" on connect; without it, NORMAL):
 *                 WAL + NORMAL   the file stays intact, but the commits
 *                                since the last checkpoint may be gone
 *                                (the WAL is synced at checkpoints only):
 *                                an enqueue goes with its business change,
 *                                never one without the other; an ack may
 *                                be undone, so the message comes again.
 *                                A process crash loses nothing.
 *                 WAL + FULL     a commit that returned is on the storage
 *                                (one sync per commit: slower on flash).
 *                 no JournalMode the driver's rollback journal: NORMAL may
 *                                corrupt the file on power loss: always
 *                                set JournalMode=WAL. OFF: never.
 *     PostgreSQL  driver odbc-postgresql: "Driver={PostgreSQL Unicode};
 *                 Server=h;Port=5432;Database=d;Uid=u;Pwd=p;"
 *                 The library appends "Protocol=7.4-1;" when the string
 *                 does not set Protocol: without it psqlODBC wraps every
 *                 statement in a savepoint (half the speed). Its own
 *                 sessions set jit = off: JIT compiled the keyed claim's
 *                 prepared plan at every run on a large table (30 times
 *                 its cost).
 *                 Failover: psqlODBC hands pqopt to libpq, so
 *                 "Driver={PostgreSQL Unicode};Database=d;Uid=u;Pwd=p;
 *                 pqopt={host=h1,h2 port=5432,5432
 *                 target_session_attrs=read-write};" reaches whichever
 *                 server is the primary, on every reconnect (leave Server
 *                 and Port out: psqlODBC refuses a host in pqopt beside
 *                 Server, and cuts Port to 9 characters). Behind PgBouncer
 *                 in transaction mode add "UseServerSidePrepare=0;" (the
 *                 error says so when it is missing).
 *     MariaDB     driver odbc-mariadb: "Driver={MariaDB Unicode};
 *                 Server=h;Port=3306;Database=d;Uid=u;Pwd=p;CHARSET=utf8mb4;"
 *                 MariaDB 10.7+ (SKIP LOCKED, JSON_TABLE, the UUID type
 *                 of storage layout 2's keys). The library
 *                 appends "OPTION=2;" (row counts are rows matched, as on
 *                 the other databases); its times are UTC whatever the
 *                 session's time zone. Needs no sql_mode of its own. A claim
 *                 is two statements in one transaction (a pick with FOR
 *                 UPDATE SKIP LOCKED that returns the rows, the update; a
 *                 read-back only where the update marked fewer: Galera):
 *                 no RETURNING.
 *                 The store's own connection rests in autocommit, so a
 *                 one-statement step is one round trip (a caller's
 *                 connection given as hdbc stays in manual commit).
 *                 Tables are utf8mb4_nopad_bin (byte-exact keys, trailing
 *                 spaces count). New tables store the state columns
 *                 (ReadyRank, LeasedUntil, DoneAt, DeadAt) PERSISTENT, so
 *                 InnoDB's purge never computes an indexed virtual column
 *                 (the step behind MDEV-38140's index corruption); a table
 *                 of an earlier release keeps them VIRTUAL until converted
 *                 by one ALTER (a table copy, writers wait: 15 to 21 s per
 *                 million rows; docs/RELIABILITY.md). A statement stopped by max_statement_time
 *                 is OBX_ERR_DB_TRANSIENT, and the store reconnects before
 *                 its next call (the driver's session is out of step). MySQL 8 is detected as the same dialect,
 *                 untested (it has neither that collation nor RETURNING).
 *     SQL Server  NOT YET RUN AGAINST A SERVER: written to the seeds and
 *                 Microsoft's documentation, checked through the fake ODBC
 *                 layer and a T-SQL parser only. SQL Server 2016 SP1+
 *                 (CREATE OR ALTER; OPENJSON needs compatibility level 130).
 *                 FreeTDS (tdsodbc): "Driver={FreeTDS};Server=h;Port=1433;
 *                 Database=d;UID=u;PWD=p;TDS_Version=7.4;ClientCharset=UTF-8;"
 *                 (ClientCharset=UTF-8 or text is converted to a code page).
 *                 Text limits count characters (code points); NVARCHAR
 *                 counts UTF-16 units, so 255 characters beyond U+FFFF
 *                 (emoji) are 510 units: the server refuses such a text
 *                 (truncation, a permanent OBX_ERR_DB) although the
 *                 library's check passed it.
 *                 Microsoft (msodbcsql18): "Driver={ODBC Driver 18 for SQL
 *                 Server};Server=h,1433;Database=d;UID=u;PWD=p;Encrypt=yes;"
 *                 (char data in the locale's code set: keep it UTF-8).
 *                 Text binds as NVARCHAR(4000) or NVARCHAR(MAX). The
 *                 claim and the settles are the procedures <table>_Claim,
 *                 _Ack, _Abandon, _Fail, _ReapExpired (one round trip each);
 *                 our connections run SET XACT_ABORT ON. The join triggers
 *                 need the server option "nested triggers" on (the default).
 *                 A connection passed in (hdbc) must not SET NOCOUNT ON.
 *                 Inbox keys ending in a space are refused (SQL Server
 *                 compares "a" = "a "). The files in sql/sqlserver run
 *                 with sqlcmd -b -I -i outbox.sql (or in SSMS).
 *   A connection passed in (hdbc) must have autocommit off (SQLite: on);
 *   a wrong mode is refused with OBX_ERR_STATE naming it. Avoid unixODBC
 *   connection pooling: it hands out connections with the previous user's
 *   open transaction.
 *   Your own driver: a program that writes its data through libpq, the
 *   sqlite3 C API or MariaDB Connector/C (not ODBC) enqueues in that
 *   driver's transaction: include the driver's header before obx.h, then
 *       BEGIN (sqlite3: BEGIN IMMEDIATE; MariaDB: START TRANSACTION)
 *       ... your writes ...
 *       obx_enqueue_pq(store, conn, msgs, n, ids)     (PGconn *)
 *       obx_enqueue_sqlite3(store, db, msgs, n, ids)  (sqlite3 *)
 *       obx_enqueue_mysql(store, mysql, msgs, n, ids) (MYSQL *)
 *       COMMIT, then obx_notify(store)
 *   These are static inline, compiled only after their driver's header: no
 *   link dependency for anyone else. Any other driver: obx_enqueue_sql
 *   gives the statements and values obx_enqueue_tx would run (the same
 *   text: recorded from it), to run on your connection. The store keeps
 *   its own ODBC connection to the same database to deliver. Examples:
 *   examples/native_sqlite.c, examples/native_libpq.c.
 *
 * 7. TESTING WITH THE FAKE ODBC LAYER --------------------------------------
 *   tests/fake_odbc.c defines the SQL* functions this file calls; link it
 *   instead of -lodbc to script results and faults. Nothing in this file
 *   exists only for tests.
 */
/* >>common-begin features */
/* POSIX 2008 for the implementation (clock_gettime, pthread_condattr_setclock,
 * nanosleep). In strict ISO mode (-std=c99/c11/..., __STRICT_ANSI__) glibc,
 * musl and newlib hide POSIX unless a feature-test macro asks for it, so the
 * file that defines OBX_IMPLEMENTATION asks for it here, before any
 * #include fixes the feature set (a <features.h> seen means one did: the
 * check after the implementation's includes then says what to add). Never
 * in GNU mode (-std=gnu99, the default): _POSIX_C_SOURCE would take
 * _DEFAULT_SOURCE's features away from the rest of that file. Not on
 * Windows, Apple or the BSDs: they show POSIX 2008 by default, and the
 * macro would hide their own extensions. */
#if defined(OBX_IMPLEMENTATION) && !defined(OBX__IMPLEMENTED) && defined(__STRICT_ANSI__) && \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) && \
    !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE) && !defined(_SVID_SOURCE) && \
    !defined(_FEATURES_H) && !defined(_SYS_FEATURES_H) && \
    !defined(_WIN32) && !defined(__APPLE__) && !defined(__FreeBSD__) && !defined(__NetBSD__) && \
    !defined(__OpenBSD__) && !defined(__DragonFly__)
#define _POSIX_C_SOURCE 200809L
#endif
/* >>common-end features */
#ifndef OBX_H_INCLUDED
#define OBX_H_INCLUDED

/* >>common-begin api */

/* Semantic versioning (CHANGELOG.md). While the major version is 0, a minor
 * version may change the API or the schema, each change marked in the
 * changelog with how to migrate; a patch version never does. Compare
 * OBX_VERSION_NUMBER in #if: MAJOR * 1000000 + MINOR * 1000 + PATCH. */
#define OBX_VERSION_MAJOR 0
#define OBX_VERSION_MINOR 2
#define OBX_VERSION_PATCH 0
#define OBX_VERSION_STRING "0.2.0"
#define OBX_VERSION_NUMBER (OBX_VERSION_MAJOR * 1000000 + OBX_VERSION_MINOR * 1000 + OBX_VERSION_PATCH)

#include <stddef.h>
#include <stdint.h>
#include <signal.h> /* sig_atomic_t: the dispatcher's stop flag, set from a signal handler */

#ifndef OBX_API
#if defined(OBX_STATIC) && (defined(__GNUC__) || defined(__clang__))
#define OBX_API static __attribute__((unused)) /* a program need not call them all */
#elif defined(OBX_STATIC)
#define OBX_API static
#else
#define OBX_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif


/* Result of every call. Zero is success, positive values are non-error
 * outcomes, negative values are errors. */
typedef enum obx_result {
    OBX_OK = 0,
    OBX_EMPTY = 1,               /* success, nothing there (no row, no message) */
    OBX_ERR_INVALID_ARG = -1,    /* NULL, empty or malformed argument (named in the error) */
    OBX_ERR_OUT_OF_RANGE = -2,   /* a number outside its allowed range */
    OBX_ERR_NOT_FOUND = -3,      /* the thing asked for does not exist */
    OBX_ERR_NO_MEMORY = -4,      /* the allocator returned NULL */
    OBX_ERR_DB = -5,             /* permanent database error: syntax, constraint, permission */
    OBX_ERR_DB_TRANSIENT = -6,   /* deadlock, serialization, lock/query timeout, busy, lost connection */
    OBX_ERR_STATE = -7,          /* call not valid now (e.g. store without a connection) */
    OBX_ERR_UNSUPPORTED = -8,    /* dialect or feature not supported (yet) */
    OBX_ERR_FULL = -9            /* the store holds max_pending unfinished messages: nothing
                                    was enqueued; try again once the queue drains */
} obx_result;

/* Details of the last error on a handle. Strings are always NUL-terminated. */
typedef struct obx_error {
    obx_result result;           /* the code that was returned */
    char sqlstate[6];            /* ODBC SQLSTATE of the first error record, "" if none */
    long native;                 /* driver's native error code, 0 if none */
    int connection_lost;         /* nonzero: the connection is gone (reconnect on next call) */
    char where[96];              /* the ODBC call or argument, e.g. "obx_store_open: connection_string" */
    char message[512];           /* human-readable; all diagnostic records joined by " | " */
} obx_error;

/* Limits of the work queue, the same in both headers. Each call that takes
 * one of these refuses a value outside it with OBX_ERR_OUT_OF_RANGE naming
 * the argument, before any SQL runs. */
#define OBX_BATCH_MAX 10000                     /* messages per claim, rows per cleanup batch */
#define OBX_LEASE_MAX_SECONDS 86400             /* a lease of at most a day */
#define OBX_DELAY_BACKOFF (-1)                  /* abandon: each message's default backoff */
#define OBX_DELAY_MAX_MS 3153600000000LL        /* abandon delay: at most 100 years */
#define OBX_RETENTION_MAX_MS 3153600000000LL    /* cleanup retention: at most 100 years */
#define OBX_DISCOVER_MAX 100000                 /* databases one discovery may return */
#define OBX_TIME_MAX_MS 253402300799999LL       /* latest due time: 9999-12-31 23:59:59.999 UTC,
                                                   what every supported database can store */

/* Log levels. Zero in obx_logger.min_level means the default: the level the
 * environment variable OBX_LOG_LEVEL names when the store (or dispatcher,
 * provider) is opened -- debug, info, warn, error or off, any case -- else
 * INFO. A level the program sets is kept whatever the environment says. */
typedef enum obx_log_level {
    OBX_LOG_DEBUG = 1,
    OBX_LOG_INFO = 2,
    OBX_LOG_WARN = 3,
    OBX_LOG_ERROR = 4,
    OBX_LOG_OFF = 5
} obx_log_level;

/* Memory. Give all three functions or none (then malloc/realloc/free). */
typedef struct obx_allocator {
    void *(*alloc)(size_t size, void *user);
    void *(*realloc)(void *ptr, size_t size, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} obx_allocator;

/* Time. Each NULL member falls back to its default. Wall time is UTC
 * milliseconds since the Unix epoch; monotonic time only measures intervals. */
typedef struct obx_clock {
    int64_t (*now_utc_ms)(void *user);
    int64_t (*monotonic_ms)(void *user);
    void (*sleep_ms)(int64_t ms, void *user);
    void *user;
} obx_clock;

/* Logging. `store_id` names the store the line is about (never NULL);
 * `message` is one line without a newline and never contains payloads.
 * The default logger writes one line per event to stderr:
 *   2026-11-27T10:47:19.123Z obx[4242] WARN  [outbox] <message>
 * (UTC time with milliseconds, the process id, the level, the store). */
typedef struct obx_logger {
    void (*log)(obx_log_level level, const char *store_id, const char *message, void *user);
    void *user;
    obx_log_level min_level;     /* lines below this level are not formatted at all */
} obx_logger;

/* Randomness for UUIDs, owner tokens and backoff jitter. */
typedef struct obx_random {
    uint64_t (*next_u64)(void *user);
    void *user;
} obx_random;

/* All hooks together; all-zero means every default. */
typedef struct obx_hooks {
    obx_allocator allocator;
    obx_clock clock;
    obx_logger logger;
    obx_random random;
} obx_hooks;

/* SQL dialects. AUTO (zero) detects from SQLGetInfo(SQL_DBMS_NAME). */
typedef enum obx_dialect {
    OBX_DIALECT_AUTO = 0,
    OBX_DIALECT_SQLITE = 1,
    OBX_DIALECT_POSTGRESQL = 2,
    OBX_DIALECT_MARIADB = 3,
    OBX_DIALECT_SQLSERVER = 4
} obx_dialect;

/* Jittered exponential backoff (base/max/jitter, seed 002 §13). All-zero
 * means the defaults: base 200 ms, max 60 s, jitter factor 0.5 to 1.5. */
typedef struct obx_backoff_policy {
    int64_t base_ms;
    int64_t max_ms;
    double jitter_min;
    double jitter_max;
} obx_backoff_policy;

/* Which store a multi-store dispatcher polls next. */
typedef enum obx_selection {
    OBX_SELECT_ROUND_ROBIN = 0,  /* one batch from each store in turn */
    OBX_SELECT_DRAIN_FIRST = 1   /* stay on a store until it returns nothing */
} obx_selection;

/* Selection state machine; initialise with obx_selector_init(). */
typedef struct obx_selector {
    obx_selection kind;
    int store_count;
    int current;                 /* the store obx_selector_next() returns */
    int empty_streak;            /* consecutive reports of zero messages */
} obx_selector;

/* One database of many (tenant, site): a stable identifier, which is also
 * its routing key and its store's name in every log line, and how to reach it. */
typedef struct obx_database {
    const char *id;
    const char *connection_string;
} obx_database;

/* Discovery, the callback's protocol (as snprintf's): return how many
 * databases there are, N, and write the first min(N, cap) of them into
 * `out`. When N > cap the provider calls again at once with cap >= N (up to
 * OBX_DISCOVER_MAX), so a list of any length is served whole; an answer of
 * exactly cap is asked again with more room too, so a callback that stops
 * at cap loses nothing either. Return a negative number when the databases
 * cannot be listed now (a lookup failed): the current set is kept, and the
 * failure is logged at WARN (once, until discovery works again) and is the
 * dispatcher's last error. Ids must be unique and non-empty, every database
 * needs a connection string: a list that breaks this is refused whole, as a
 * failure. The strings must stay valid until the next call. Called from the
 * thread that uses the provider (create, refresh, its dispatcher). More
 * than OBX_DISCOVER_MAX is a failure; exactly that many is served, with a
 * WARN that the cap is reached. */
typedef int (*obx_discover_fn)(obx_database *out, int cap, void *user);

/* Format 16 bytes as a canonical lower-case GUID text (8-4-4-4-12, bytes in
 * order) into out[37]. */
typedef struct obx_guid {
    unsigned char bytes[16];
} obx_guid;

/* Monotonic UUIDv7 generator state; all-zero is a valid start. */
typedef struct obx_uuid_state {
    int64_t last_ms;
    uint64_t counter;
} obx_uuid_state;

/* ---- Common functions (pure unless said otherwise) ----------------------- */

/* Version of the implementation, OBX_VERSION_STRING of the header it was built
 * from (e.g. "0.2.0"); never NULL. */
OBX_API const char *obx_version(void);

/* Name of a result code, e.g. "OBX_ERR_INVALID_ARG"; "OBX_(unknown)" for a
 * value that is not a result code. Never NULL. */
OBX_API const char *obx_result_str(obx_result result);

/* Lower-case dialect name: "sqlite", "postgresql", "mariadb", "sqlserver",
 * "auto"; "unknown" otherwise. Never NULL. */
OBX_API const char *obx_dialect_name(obx_dialect dialect);

/* The default retry delay: min(2^attempt seconds, 60 seconds), in ms.
 * attempt < 0 counts as 0 (1 s). Never overflows. */
OBX_API int64_t obx_backoff_default_ms(int attempt);

/* Jittered delay: min(max, base * 2^(attempt-1)) * jitter, where jitter is
 * jitter_min + (jitter_max - jitter_min) * u and u in [0,1) is taken from
 * the top 53 bits of `random_bits`. attempt < 1 counts as 1 (base delay).
 * policy NULL or all-zero means the defaults. As the seed defines it, the
 * jitter applies after the cap, so a result may reach 1.5 x max. Never
 * negative: a negative or non-finite (NaN, infinite) product gives 0. */
OBX_API int64_t obx_backoff_jitter_ms(const obx_backoff_policy *policy, int attempt,
                                      uint64_t random_bits);

/* Start a selector over `store_count` stores at store 0. A count below 0
 * counts as 0 (then obx_selector_next() returns -1). */
OBX_API void obx_selector_init(obx_selector *selector, obx_selection kind, int store_count);

/* The store to poll now, 0 .. store_count-1, or -1 when there is none. */
OBX_API int obx_selector_next(const obx_selector *selector);

/* Tell the selector that `store` returned `claimed` messages. Round-robin
 * moves to the next store whatever the count; drain-first stays while
 * claimed > 0 and moves on at 0. A report for a store other than the
 * current one only updates the empty streak. */
OBX_API void obx_selector_report(obx_selector *selector, int store, int claimed);

/* Nonzero when every store answered empty since the last message: time for
 * the idle backoff. */
OBX_API int obx_selector_all_idle(const obx_selector *selector);

/* Change the number of stores (discovery added or removed some); the
 * current position is kept when still valid, else wraps to 0. */
OBX_API void obx_selector_resize(obx_selector *selector, int store_count);

/* Format a time-ordered UUIDv7 (RFC 9562) as 36 lower-case characters plus
 * NUL into `out`. UUIDs made from one `state` sort strictly ascending, as
 * text and as bytes, even within one millisecond or when `unix_ms` goes
 * backwards. `random_a` and `random_b` supply the random bits. */
OBX_API void obx_uuid_v7(obx_uuid_state *state, int64_t unix_ms, uint64_t random_a,
                         uint64_t random_b, char out[37]);

/* The canonical text of a GUID routing key, e.g. "6f1c2a3b-4d5e-4f60-...". */
OBX_API void obx_guid_text(const obx_guid *guid, char out[37]);

/* Nonzero when `text` is a UUID in 8-4-4-4-12 hex form (either case). */
OBX_API int obx_uuid_is_valid(const char *text);

/* Check a schema or table name: 1 to 63 characters of [A-Za-z0-9_], not
 * starting with a digit. Returns OBX_OK or OBX_ERR_INVALID_ARG. Names are
 * also quoted when used, but nothing else ever reaches SQL text. */
OBX_API obx_result obx_identifier_check(const char *name);

/* The envelope (seed 002 section 6): optional metadata a message carries
 * beside its payload, each in a column of its own, returned by get and
 * claim and so given to handlers. Limits in characters (UTF-8 code points;
 * SQL Server counts a character outside the BMP as two). */
#define OBX_TENANT_MAX 64            /* tenant_id */
#define OBX_AGGREGATE_TYPE_MAX 64    /* aggregate_type */
#define OBX_AGGREGATE_ID_MAX 128     /* aggregate_id */
#define OBX_HEADERS_MAX 64           /* header pairs per message */
#define OBX_HEADER_KEY_MAX 128       /* one header key, 1..128 characters */
#define OBX_HEADER_VALUE_MAX 4096    /* one header value, 0..4096 characters */
#define OBX_HEADERS_BYTES_MAX 16384  /* all keys and values of a message, in bytes */

/* One header of a message: a string key and a string value (e.g.
 * {"traceparent", "00-4bf9...-01"}). Keys are case-sensitive. */
typedef struct obx_header {
    const char *key;
    const char *value;
} obx_header;

/* The envelope's fields, the last of obx_new_message (to enqueue) and of
 * obx_message (as get and claim return it). */
#define OBX__ENVELOPE_NEW_FIELDS                                                                \
    const char *tenant_id;       /* <= OBX_TENANT_MAX characters; carried, never filtered on */ \
    const char *aggregate_type;  /* <= OBX_AGGREGATE_TYPE_MAX characters */                    \
    const char *aggregate_id;    /* <= OBX_AGGREGATE_ID_MAX characters */                      \
    const obx_header *headers;   /* header_count pairs (NULL when 0), stored as one JSON       \
                                    object in their order; a key given twice is refused */      \
    int header_count;            /* 0..OBX_HEADERS_MAX */
#define OBX__ENVELOPE_FIELDS                                                                    \
    const char *tenant_id;       /* NULL when none */                                           \
    const char *aggregate_type;  /* NULL when none */                                           \
    const char *aggregate_id;    /* NULL when none */                                           \
    int header_count;            /* headers: read them with obx_message_header(_at) */          \
    const char *headers_packed;  /* header_count pairs as "key\0value\0key\0value\0..." in    \
                                    their enqueue order; NULL when none */

/* >>common-end api */

/* ---- Store ---------------------------------------------------------------- */

typedef struct obx_store obx_store;

/* Counted events (seed 002 section 16). */
typedef enum obx_metric {
    OBX_METRIC_ENQUEUED = 0,     /* messages committed by enqueue (own transaction) or
                                    written into a caller's transaction */
    OBX_METRIC_DISPATCHED = 1,   /* messages whose handlers all succeeded (acked) */
    OBX_METRIC_RETRIED = 2,      /* messages abandoned for a later attempt */
    OBX_METRIC_DEAD = 3,         /* messages failed permanently */
    OBX_METRIC_REAPED = 4,       /* expired leases released */
    OBX_METRIC_CLEANED_UP = 5,   /* done messages deleted by cleanup: their retention ended */
    OBX_METRIC_EXPIRED_UNHANDLED = 6, /* messages past expires_utc_ms when claimed: ended Dead
                                    ("expired"), never handled; also counted in DEAD */
    OBX_METRIC_COUNT_ = 7
} obx_metric;
#define OBX_METRIC_EXPIRED OBX_METRIC_CLEANED_UP /* the old name, until 0.3 (CHANGELOG.md) */
#define OBX_METRIC_FAILED OBX_METRIC_RETRIED /* the old name: it counts retries, not the dead */

/* Called after each counted event with how many it counted; keep it
 * cheap (it runs on the calling thread, inside the dispatch loop). */
typedef struct obx_metrics_hook {
    void (*count)(obx_metric metric, int64_t n, const char *store_id, void *user);
    void *user;
} obx_metrics_hook;

/* How to open a store. All-zero fields take the defaults shown. */
typedef struct obx_store_desc {
    const char *connection_string; /* ODBC connection string; or: */
    void *hdbc;                  /* a connected SQLHDBC (OBX_SQLITE3_API: a sqlite3 *) the caller
                                    owns (not closed by us). The
                                    store then commits and rolls back on it: have no
                                    transaction of your own open while calling the store
                                    (use obx_enqueue_tx for that), and set autocommit as the
                                    dialect wants (off; SQLite: on, writers use BEGIN IMMEDIATE) */
    obx_dialect dialect;         /* AUTO: detect from the driver */
    const char *schema;          /* default "dbo" where the dialect has schemas; ignored by SQLite */
    const char *table;           /* default "Outbox" */
    const char *store_id;        /* name on every log line; default "outbox" */
    int deploy_schema;           /* nonzero: create tables, indexes, functions if missing,
                                    upgrade an older release's table (obx_store_deploy) */
    const char *worker_name;     /* ProcessedBy on ack, 1..100 characters of UTF-8;
                                    default: the owner token */
    obx_hooks hooks;             /* allocator, clock, logger, random (all-zero: defaults) */
    obx_metrics_hook metrics;    /* counters as they happen (all-zero: none) */
    int statement_timeout_seconds; /* default 0: none. A statement that has no answer after
                                    this long fails as OBX_ERR_DB_TRANSIENT, saying so:
                                    PostgreSQL cancels it on the server (which a frozen
                                    server cannot do); MariaDB's driver stops waiting for the
                                    socket (READ_TIMEOUT/WRITE_TIMEOUT, added to the
                                    connection string), which also ends a wait on a frozen
                                    server; SQLite and SQL Server drivers: as they honour
                                    SQL_ATTR_QUERY_TIMEOUT */
    int login_timeout_seconds;   /* default 10: give up connecting (and reconnecting) after
                                    this long, so an unreachable or frozen server is an error
                                    (OBX_ERR_DB_TRANSIENT), not a hang (MariaDB: its driver's
                                    CONN_TIMEOUT, unless set); -1: the driver's own */
    obx_log_level message_log_level; /* default OBX_LOG_DEBUG: the level of the lines logged
                                    per message (each enqueue, and each handler invocation
                                    of a dispatcher on this store); OBX_LOG_INFO for an
                                    audit trail at INFO */
    const char *wake_path;       /* optional (POSIX): after each enqueue it commits, the store
                                    sends a wake byte to a dispatcher listening at this Unix
                                    socket path (its desc's wake_path), in any process of
                                    this host: claimed at once instead of at the next poll.
                                    obx_notify() does it after your own commit of a _tx call */
    int64_t max_pending;         /* default 0: no cap. Backpressure: an enqueue that would
                                    take the unfinished messages (Ready or Leased) past this
                                    many is refused with OBX_ERR_FULL and changes nothing,
                                    so a gateway offline for days stops before its flash is
                                    full. Exact for one producer, also one that enqueues many
                                    in one transaction (a _tx call counts in the caller's
                                    transaction); each store counts near the cap and at most
                                    once a second (obx_pending_count), so other producers may
                                    pass it by what they enqueue within that second */
    int ordering_dead_holds;     /* default 0: a Dead message lets its ordering key move on
                                    (the key's next message is handled). Nonzero: the key
                                    waits until the dead one is replayed or purged. Applies
                                    to the claims of this store */
    int max_starts;              /* default 0: 3 (1..1000). Crash-loop quarantine: a message
                                    claimed this many times without an outcome (its handler
                                    killed the process, or its lease expired) ends Dead at
                                    the reap that finds its last lease expired, with a
                                    last_error that says so, and is never claimed again.
                                    Ack, abandon (retry, wait, pause) and fail are outcomes;
                                    obx_dead_replay starts the count again */
} obx_store_desc;

/* ---- Messages ----------------------------------------------------------------- */

/* payload_len value meaning "up to the NUL terminator". */
#define OBX_NTS ((size_t)-1)

/* Largest topic, correlation id and ordering key, in characters (UTF-8 code points). */
#define OBX_TOPIC_MAX 255
#define OBX_CORRELATION_MAX 255
#define OBX_ORDERING_KEY_MAX 255
/* Message priority (obx_new_message.priority): OBX_PRIORITY_MIN..MAX, 0 (the
 * middle) by default. Aging: one level is worth OBX_PRIORITY_AGING_MS of
 * waiting (part of the schema's claim index, not a runtime knob). */
#define OBX_PRIORITY_MIN (-5)
#define OBX_PRIORITY_MAX 5
#define OBX_PRIORITY_AGING_MS 10000

/* Retention of obx_cleanup() and the dispatcher's cleanup when given as 0:
 * none, every done message may go. */
#define OBX_DEFAULT_RETENTION_MS ((int64_t)0)

/* Message states (the Status column). */
typedef enum obx_status {
    OBX_STATUS_READY = 0,        /* waiting; claimable once next_attempt_ms has passed */
    OBX_STATUS_IN_PROGRESS = 1,  /* claimed, under a lease */
    OBX_STATUS_DONE = 2,         /* acknowledged */
    OBX_STATUS_FAILED = 3        /* failed permanently (dead) */
} obx_status;

/* A message to enqueue. Zero fields are the defaults. */
typedef struct obx_new_message {
    const char *topic;           /* required, 1..255 characters, case-sensitive */
    const void *payload;         /* required (may be empty); text, no NUL byte inside */
    size_t payload_len;          /* bytes, or OBX_NTS for a NUL-terminated payload */
    const char *correlation_id;  /* optional; "" is stored as NULL; <= 255 characters */
    int64_t due_utc_ms;          /* optional: not claimable before this UTC time (Unix ms); 0 = now */
    const char *ordering_key;    /* optional; "" is stored as NULL; <= 255 characters. Messages
                                    of one key are handled one at a time, in enqueue order: no
                                    handler starts one while an earlier one of its key is not
                                    yet Done or Dead (in flight, waiting for a retry, or due
                                    later). Other keys, and messages without one, are not held
                                    up. A Dead message lets its key move on (unless the store
                                    has ordering_dead_holds); a replayed one is handled before
                                    the key's later messages that have not started, after the
                                    running one. Two claims of one key serialise (PostgreSQL:
                                    a transaction-scoped advisory lock of the key, two int4
                                    keys: the table's and the key's hashes; MariaDB: a locking
                                    re-check; SQLite: its single writer): see "Ordered delivery
                                    per key" in the header's outbox statements. The order
                                    between two producers whose transactions overlap is their
                                    commit race's; a producer that commits before it enqueues
                                    again keeps its order. A message waiting behind a busy key
                                    (PostgreSQL, MariaDB) is woken by the ack or fail that
                                    ends its predecessor. When its producer's transaction was
                                    still open at that moment (common under load), or on
                                    MariaDB when the predecessor was settled by another
                                    store, obxctl or SQL, a dispatcher wakes it the next time
                                    a claim of its comes back short of its batch: at once for
                                    the keys of its previous batch, else within a poll
                                    interval or so (its idle wait; see obx_dispatcher_desc);
                                    a program that claims by itself has obx_reap do it.
                                    See docs/FEATURES.md, "Ordered delivery per key" */
    /* The envelope, all optional ("" and NULL are stored as NULL; none of
     * them costs anything when absent). The library copies what it needs
     * before returning: the caller's strings and array may change after. */
    OBX__ENVELOPE_NEW_FIELDS
    /* Expiry: a message not handled by this UTC time (Unix ms, the database
     * clock) is never given to a handler: a dispatcher checks it before
     * each handler call (not only at the claim: a batch's earlier messages
     * may run long), ends it Dead with last_error "expired" and counts it in
     * OBX_METRIC_EXPIRED_UNHANDLED. A handler already running goes on past
     * it. obx_dead_replay drops it. 0 = never; else 1..OBX_TIME_MAX_MS and
     * not before due_utc_ms. */
    int64_t expires_utc_ms;
    /* Priority: OBX_PRIORITY_MIN (-5) .. OBX_PRIORITY_MAX (5), 0 = the
     * default (the middle). Among due messages a claim takes the one with
     * the smallest "due time - priority x OBX_PRIORITY_AGING_MS" first: a
     * higher priority goes first, and one level is worth 10 s of waiting
     * (aging), so no message starves: one that became due d ms earlier
     * goes before one k levels higher whenever d > k x 10 s, so a
     * lowest-priority message waits at most 100 s behind any flood of
     * later, higher ones. Within an ordering key, key order wins: a key's
     * messages are still handled one at a time in enqueue order, whatever
     * their priorities (a message's priority only places its key's head
     * among other due messages). SQL Server stores it but claims by due
     * time alone. See docs/FEATURES.md, "Priority". */
    int priority;
} obx_new_message;

/* A stored message, as claim and get return it. Strings are NUL-terminated
 * and owned by the store: a claim's messages stay valid until the next
 * claim on that store (a handler may call get meanwhile), a get's until the
 * next get, and all until close. Times are UTC Unix milliseconds from the
 * database clock; 0 = NULL. */
typedef struct obx_message {
    char id[37];                 /* work item id (UUID): what ack/abandon/fail take */
    char message_id[37];         /* logical message id (UUID), stable across retries */
    const char *topic;
    const char *payload;
    size_t payload_len;
    const char *correlation_id;  /* NULL when none */
    int64_t created_at_ms;
    int64_t due_time_ms;         /* 0 when enqueued without a due time */
    int retry_count;             /* abandons so far */
    const char *last_error;      /* NULL when none */
    obx_status status;
    int is_processed;
    int64_t processed_at_ms;
    const char *processed_by;    /* NULL until acknowledged */
    int64_t locked_until_ms;
    char owner_token[37];        /* "" when not leased */
    int64_t next_attempt_ms;     /* OBX_TIME_MAX_MS + 1 while parked behind an earlier message
                                    of its ordering key (SQL Server excepted; docs/FEATURES.md) */
    int starts;                  /* claims without an outcome, this one included: 2 and more
                                    after a crash or an expired lease (see max_starts) */
    obx_store *store;            /* the store it came from: enqueue follow-ups there */
    const char *ordering_key;    /* NULL when enqueued without one */
    OBX__ENVELOPE_FIELDS
    int64_t expires_ms;          /* expires_utc_ms as enqueued; 0 = never. obx_claim returns
                                    expired messages too (it reports what it claimed): a
                                    caller of its own checks this against locked_until_ms
                                    less the lease plus the time since its claim, as the
                                    dispatcher does before each handler call */
    int priority;                /* as enqueued (obx_new_message.priority); 0 on SQL Server */
} obx_message;

/* Enqueue one message in its own transaction, committed before return
 * (OBX-002). *out_id (if not NULL) receives the new work item id.
 * Returns OBX_OK; OBX_ERR_INVALID_ARG (store or message NULL; topic NULL,
 * empty or too long; payload NULL or containing a NUL byte; correlation id,
 * ordering key, tenant id, aggregate type or id too long or not UTF-8;
 * header_count not 0..OBX_HEADERS_MAX, headers NULL with a count, a key
 * NULL, empty, given twice or too long, a value NULL or too long, all
 * headers over OBX_HEADERS_BYTES_MAX: the error names the argument, e.g.
 * "headers[2].key", and no SQL runs);
 * OBX_ERR_OUT_OF_RANGE (due_utc_ms or expires_utc_ms not 0..OBX_TIME_MAX_MS, or expires_utc_ms
 * before due_utc_ms, or priority not OBX_PRIORITY_MIN..MAX: named as above);
 * OBX_ERR_DB / OBX_ERR_DB_TRANSIENT. */
OBX_API obx_result obx_enqueue(obx_store *store, const obx_new_message *message, char out_id[37]);

/* Enqueue inside the caller's transaction on `hdbc` (an SQLHDBC with
 * autocommit off, or for SQLite inside the caller's BEGIN IMMEDIATE). The
 * library never commits or rolls back `hdbc` (OBX-003): a rollback by the
 * caller leaves no message. `hdbc` must be connected to the same database
 * as the store. Results as obx_enqueue, plus OBX_ERR_STATE naming hdbc
 * when its autocommit mode is not the one above (nothing is written: in
 * autocommit the message would commit apart from the caller's work), and
 * OBX_ERR_DB_TRANSIENT with connection_lost set when the driver knows the
 * connection is lost although the statements reported success (psqlODBC
 * at its default statement-level rollback; its COMMIT would then report
 * success and commit nothing): roll back and reconnect. The same check
 * before your own COMMIT on psqlODBC (SQL_ATTR_CONNECTION_DEAD) covers
 * statements of yours after this call.
 * Isolation: a message with an ordering key needs READ COMMITTED
 * (PostgreSQL, MariaDB). On MariaDB any other level is refused
 * (OBX_ERR_STATE, "hdbc: isolation", nothing written): at REPEATABLE READ
 * (MariaDB's default) the key's state would be read from the transaction's
 * snapshot, which may predate the commit of a message it must follow; at
 * SERIALIZABLE InnoDB would read it with shared locks held to the caller's
 * commit, stalling the key's claims and acks. On PostgreSQL, at REPEATABLE
 * READ a keyed message is ordered as if it were enqueued when its
 * transaction took its snapshot. Messages without a key: any level. */
OBX_API obx_result obx_enqueue_tx(obx_store *store, void *hdbc, const obx_new_message *message,
                                  char out_id[37]);

/* Enqueue `count` messages in one transaction: the caller's on `hdbc`, or
 * the store's own (committed) when hdbc is NULL. All or nothing: one bad
 * message rejects the batch before any SQL runs. out_ids (if not NULL)
 * receives count ids, written only on success. Results as obx_enqueue
 * (and obx_enqueue_tx with hdbc); count < 0 or messages NULL with
 * count > 0 is OBX_ERR_INVALID_ARG. A batch travels as few statements of
 * up to 1,000 messages and about 1 MiB of values each (MariaDB: a packet
 * of at most about 1 MiB, 6 MiB where a message has an ordering key, so
 * max_allowed_packet's default of 16 MiB holds any batch). */
OBX_API obx_result obx_enqueue_batch(obx_store *store, void *hdbc,
                                     const obx_new_message *messages, int count,
                                     char (*out_ids)[37]);

/* Mark messages done (processed now, by desc.worker_name or the token).
 * Ids that do not exist or that `owner_token` does not hold are ignored
 * (OBX-031); *changed (if not NULL) says how many rows changed, so a
 * caller can treat "fewer than asked" as an error. One statement for the
 * whole batch. count 0 is OBX_OK without touching the database.
 * Returns OBX_OK; OBX_ERR_INVALID_ARG (bad token, an id that is not a UUID
 * (the error names its index), count < 0); OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_ack(obx_store *store, const char *owner_token, const char *const *ids,
                           int count, int64_t *changed);

/* Release messages for a retry: lease cleared, retry count + 1, last error
 * recorded when `last_error` is not NULL or empty, next attempt after
 * `delay_ms` (0..OBX_DELAY_MAX_MS; 0: claimable again at once), or with
 * OBX_DELAY_BACKOFF after the default backoff min(2^retry_count s, 60 s)
 * computed per message from its retry count before this abandon.
 * Ownership and results as obx_ack, plus OBX_ERR_OUT_OF_RANGE for any
 * other delay_ms (checked after the ids) and OBX_ERR_INVALID_ARG for a
 * last_error that is not valid UTF-8. */
OBX_API obx_result obx_abandon(obx_store *store, const char *owner_token,
                               const char *const *ids, int count, const char *last_error,
                               int64_t delay_ms, int64_t *changed);

/* Extend the leases of messages `owner_token` holds to `lease_seconds` from
 * now (the database clock). A dispatcher renews its batches' leases by
 * itself (max_handler_ms); a handler that works on without a dispatcher,
 * or on a caller's connection, calls this. Ids the token no longer holds
 * (the lease ran out and was reaped) are left alone: *changed counts the
 * extended ones, so fewer than asked means "stop: another worker may have
 * the message". Ownership and results as obx_ack, plus
 * OBX_ERR_OUT_OF_RANGE (lease_seconds not 1..OBX_LEASE_MAX_SECONDS). */
OBX_API obx_result obx_lease_extend(obx_store *store, const char *owner_token,
                                    const char *const *ids, int count, int lease_seconds,
                                    int64_t *changed);

/* Fail messages permanently (never claimed again), recording `last_error`
 * (NULL or "" stores no text; not valid UTF-8: OBX_ERR_INVALID_ARG).
 * Ownership and results as obx_ack. */
OBX_API obx_result obx_fail(obx_store *store, const char *owner_token, const char *const *ids,
                            int count, const char *last_error, int64_t *changed);

/* Read one message by work item id into *message (strings owned by the
 * store, valid until the next claim/get/close). Returns OBX_OK,
 * OBX_ERR_NOT_FOUND, OBX_ERR_INVALID_ARG (id not a UUID), OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_get(obx_store *store, const char *id, obx_message *message);

/* Which dead messages obx_dead_list, obx_dead_replay and obx_dead_purge
 * take. Every field is optional (NULL or 0: no condition); the given ones
 * must all hold. A NULL filter is every dead message. */
typedef struct obx_dead_filter {
    const char *topic;           /* exactly this topic */
    const char *error_contains;  /* the last error contains this text (byte for byte) */
    int64_t created_from_ms;     /* enqueued at or after (UTC Unix ms) ... */
    int64_t created_before_ms;   /* ... and before this */
    const char *id;              /* just this message (work item id) */
} obx_dead_filter;

/* >>common-begin api-engine */

#ifndef OBX_NO_ENVELOPE
/* The value of header `key` (case-sensitive) of a message from get or
 * claim (a handler's), or NULL when it has none, or message or key is
 * NULL. Valid as long as the message's strings; allocates nothing. */
OBX_API const char *obx_message_header(const obx_message *message, const char *key);

/* Header `index` (0..header_count-1) of a message, in enqueue order: sets
 * *key and *value (either may be NULL) and returns OBX_OK; OBX_ERR_INVALID_ARG
 * when message is NULL; OBX_ERR_NOT_FOUND when index is out of range. */
OBX_API obx_result obx_message_header_at(const obx_message *message, int index, const char **key,
                                         const char **value);
#endif /* OBX_NO_ENVELOPE */

/* ---- Store, work queue, dispatcher: the same in both headers ------------------- */

/* What a store is connected to. */
typedef struct obx_store_info {
    obx_dialect dialect;
    char dbms_name[64];          /* SQL_DBMS_NAME, e.g. "PostgreSQL" */
    char dbms_version[64];       /* the server's own version (asked by SQL) */
    char driver_name[64];        /* SQL_DRIVER_NAME, e.g. "psqlodbcw.so" */
    char store_id[64];
} obx_store_info;

/* Open a store: connect (or adopt desc->hdbc), detect or force the dialect,
 * and prepare the session (isolation, autocommit, time zone). Touches the
 * database. On success *out is the store; on failure *out is still a store
 * handle when one could be allocated (so obx_store_last_error() explains
 * the failure; close it) and NULL only on OBX_ERR_NO_MEMORY, a NULL desc or
 * a half-set allocator hook. Returns OBX_OK; OBX_ERR_INVALID_ARG (desc/out
 * NULL, neither or both of connection_string and hdbc, a bad name or
 * path (schema, table, store_id, ...), a dialect that is not an
 * obx_dialect, an allocator with some but not all functions);
 * OBX_ERR_OUT_OF_RANGE (max_pending, max_starts, statement_timeout_seconds
 * or login_timeout_seconds outside what its field says, message_log_level
 * not 0 or an obx_log_level), naming the field; OBX_ERR_DB or
 * OBX_ERR_DB_TRANSIENT (connect failed); OBX_ERR_NO_MEMORY. */
OBX_API obx_result obx_store_open(const obx_store_desc *desc, obx_store **out);

/* Close a store and its connection (a caller's hdbc is left open). A store
 * with an open unit of work is rolled back first. NULL is a no-op. Destroy
 * the dispatchers over it first (a dispatcher keeps the pointer; a running
 * one must have returned from run()); a provider's stores are closed by
 * obx_provider_destroy, never by this. */
OBX_API void obx_store_close(obx_store *store);

/* Fill *info. Returns OBX_OK or OBX_ERR_INVALID_ARG (NULL argument).
 * Does not touch the database. */
OBX_API obx_result obx_store_get_info(const obx_store *store, obx_store_info *info);

/* The store's last error (result OBX_OK when the last call succeeded).
 * Valid until the next call on the store. NULL store gives a static
 * "store is NULL" error. */
OBX_API const obx_error *obx_store_last_error(const obx_store *store);

/* The schema as SQL text for `dialect` with the given schema and table
 * names (NULL: the defaults of obx_store_desc), exactly what deployment
 * runs: tables, indexes and, where the dialect has them, triggers and
 * procedures. Statements end with ";" and a newline; SQL Server's are
 * batches ended by a "GO" line (for sqlcmd or SSMS); a MariaDB trigger
 * whose body holds ";" is set off by DELIMITER lines (for the mariadb
 * client). Writes at most `cap` bytes including the NUL into `out` (may
 * be NULL with cap 0) and the full size including the NUL into *needed
 * (if not NULL). The text creates new
 * tables complete and, except on SQLite, also adds the columns an older
 * release's table lacks (ALTER ... IF NOT EXISTS, SQL Server: IF
 * COL_LENGTH); obx_store_deploy upgrades on every dialect. Returns OBX_OK;
 * OBX_ERR_INVALID_ARG (bad names); OBX_ERR_OUT_OF_RANGE (buffer too small:
 * *needed says how much); OBX_ERR_UNSUPPORTED (OBX_DIALECT_AUTO or not an
 * obx_dialect value). Pure; does not touch a database. */
OBX_API obx_result obx_schema_sql(obx_dialect dialect, const char *schema, const char *table,
                                  char *out, size_t cap, size_t *needed);

/* Create the schema objects if they are missing, and upgrade in place a
 * table an older release deployed: columns added since are added (with
 * their defaults on existing rows; nothing is dropped or rewritten),
 * missing indexes created, functions, procedures and triggers replaced by
 * today's. Looks before it changes: each column, index, function and
 * trigger that a statement would lock the table for, even with nothing to
 * do, is first looked up in the catalog, so an up-to-date schema is only
 * read and takes no lock that blocks writers. A change that is needed is
 * logged (INFO) and waits for its table lock at most 5 s (PostgreSQL
 * lock_timeout, MariaDB lock_wait_timeout; writers queue behind it no
 * longer), then fails with OBX_ERR_DB_TRANSIENT and a WARN line: deploy
 * again when the long transactions end. What an upgrade locks, per
 * database: section 3 of the manual, "Schema". What desc.deploy_schema
 * does at open. Needs CREATE and, for an upgrade, ALTER on the table.
 * Touches the database, own transaction (MariaDB commits each DDL
 * statement on its own). Returns OBX_OK, OBX_ERR_DB, OBX_ERR_DB_TRANSIENT,
 * OBX_ERR_INVALID_ARG (store NULL), OBX_ERR_STATE (store not open),
 * OBX_ERR_NO_MEMORY. */
OBX_API obx_result obx_store_deploy(obx_store *store);

/* The explicit steps of an upgrade to storage layout 2 (docs/UPGRADING.md),
 * on a table that a release before it deployed and obx_store_deploy has
 * upgraded in place. MariaDB has both, an outbox on PostgreSQL the drop;
 * elsewhere, and on a table that has them done, nothing happens (OBX_OK,
 * *steps 0). Flags:
 * OBX_UPGRADE_KEYS converts the keys (CHAR(36)) to the UUID type: a copy
 * of the table, reads go on but writers wait for all of it (about 30 s per
 * million rows, measured); the previous release keeps working after it.
 * OBX_UPGRADE_DROP_OLD drops the indexes this release no longer reads
 * (instant; writes get cheaper), so run it once no program of the previous
 * release is left: on MariaDB layout 1's indexes that lead with Status (the
 * previous release's claims fail, "Key ... doesn't exist": they force
 * them); on a PostgreSQL outbox IX_<table>_Ready (the previous release's
 * stats and wake scan the table without it; a plain DROP INDEX, in the
 * step's transaction, whose exclusive lock of the table lasts the catalog
 * change only). Each step is logged (INFO),
 * looked up in the catalog first (a step done is skipped, so an
 * interrupted run is resumed by running it again), and waits for its
 * table lock at most 5 s, as obx_store_deploy. *steps (if not NULL) gets
 * the number of steps run. Touches the database; each step commits on its
 * own. Returns OBX_OK, OBX_ERR_INVALID_ARG (store NULL, flags 0 or
 * unknown), OBX_ERR_STATE (store not open), OBX_ERR_DB(_TRANSIENT) (the
 * steps before stay done), OBX_ERR_NO_MEMORY. */
#define OBX_UPGRADE_KEYS 1u
#define OBX_UPGRADE_DROP_OLD 2u
OBX_API obx_result obx_store_upgrade(obx_store *store, unsigned flags, int *steps);

/* PostgreSQL: rewrite a message table an older release created into this
 * release's column order (fixed-width hot columns first, as new tables
 * are: a little less server CPU per message; docs/design/LAYOUT2.md).
 * Deploy never does this. One transaction: a new table, the rows copied,
 * the old table dropped and the new one renamed, then its indexes, other
 * constraints, triggers, grants, owner, storage options and comment, and
 * the functions that return or take its rows (<table>_Claim), made again
 * as they were; then ANALYZE. Writers wait for all of it, readers from the
 * swap to the commit, the index builds (docs/UPGRADING.md: writers about
 * 15 s per million rows): a quiet window or after a cleanup. The table lock is awaited 10 s at most, then
 * OBX_ERR_DB_TRANSIENT (nothing changed). Refused, nothing changed
 * (OBX_ERR_DB, the server's message): a view or another table's foreign
 * key depends on the table; it is partitioned, inherited, published or
 * under row security; its columns are not this release's (deploy first).
 * *rows (if not NULL) gets the rows copied. Returns OBX_OK, OBX_EMPTY (the
 * order is this release's already: nothing done), OBX_ERR_UNSUPPORTED (not
 * PostgreSQL: statements name their columns, so other databases keep the
 * order a table was created with), OBX_ERR_DB, OBX_ERR_DB_TRANSIENT,
 * OBX_ERR_INVALID_ARG (store NULL), OBX_ERR_STATE (store not open),
 * OBX_ERR_NO_MEMORY. Needs ownership of the table. */
OBX_API obx_result obx_store_rewrite(obx_store *store, int64_t *rows);

/* A new owner token (time-ordered UUIDv7 text) for a worker. Pure apart
 * from the store's clock and random hooks. Returns OBX_OK or
 * OBX_ERR_INVALID_ARG (NULL argument). */
OBX_API obx_result obx_owner_token(obx_store *store, char out[37]);

/* Claim up to `batch_size` ready messages (due, not leased, not done or
 * dead) for `owner_token`, leasing them for `lease_seconds`, in one round
 * trip. *messages points at an array of *count messages owned by the store
 * (valid until the next claim/close). Two workers never hold the same
 * message while its lease lasts; after it expires (a crash, or a handler
 * slower than the lease) it is delivered again: an outbox message once a
 * reap has released it (a dispatcher reaps at its first round and every
 * reap_interval_ms), an inbox message by the next claim, reap or not.
 * Until then its holder's ack, abandon or fail still count (nobody else
 * holds it). Messages past their
 * expires_ms are returned like the others (this reports what was claimed):
 * the dispatcher ends those Dead ("expired") unhandled; a caller handling
 * claims itself checks expires_ms. Each message's status and owner_token
 * are what the claim set (filled in, not read back). Returns OBX_OK (count >= 1)
 * or OBX_EMPTY (count 0); OBX_ERR_INVALID_ARG (owner token not a UUID, the
 * empty one or one of version 0: the inbox's mark, see ibx_enqueue; NULL pointers); OBX_ERR_OUT_OF_RANGE (lease_seconds not
 * 1..OBX_LEASE_MAX_SECONDS, batch_size not 1..OBX_BATCH_MAX);
 * OBX_ERR_DB / OBX_ERR_DB_TRANSIENT. */
OBX_API obx_result obx_claim(obx_store *store, const char *owner_token, int lease_seconds,
                             int batch_size, const obx_message **messages, int *count);

/* Release every expired lease (claimed, lease in the past): the messages
 * become claimable again, their attempt counts unchanged, except those
 * claimed max_starts times without an outcome (a crash loop), which end
 * dead, saying so in last_error. Done and dead messages are never touched.
 * Where messages wait parked behind their ordering key (the outbox on
 * PostgreSQL and MariaDB), it also wakes any key left with only parked
 * messages (a wake that a concurrent enqueue or settle missed, or that no
 * ack or fail of this library ran; not counted). A dispatcher also does
 * that when a claim comes back short of its batch, at most once per
 * poll_interval_ms (and for at most a twentieth of its time: the wake reads
 * every parked message), after waking the keys of its previous batch
 * again: a producer that commits just after the ack of its key's last
 * running message waits an idle poll, not a reap interval. On PostgreSQL it also
 * analyzes a table grown to twice the size its statistics know (a new
 * table above all), which autovacuum may not do for a minute: plans made
 * meanwhile read every Ready row per claim. A dispatcher reaps at its
 * first round, then every reap_interval_ms.
 * *reaped (if not NULL) receives the count, the dead included.
 * Returns OBX_OK or OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_reap(obx_store *store, int64_t *reaped);

/* Delete done messages older than `retention_ms` (0: OBX_DEFAULT_RETENTION_MS),
 * in batches of `batch_size` rows (0: 1000), each its own transaction,
 * until none are left. Ready, claimed and dead messages are never deleted.
 * *deleted (if not NULL) receives the total. Returns OBX_OK;
 * OBX_ERR_OUT_OF_RANGE (retention_ms not 0..OBX_RETENTION_MAX_MS,
 * batch_size not 0..OBX_BATCH_MAX); OBX_ERR_DB(_TRANSIENT) (rows deleted by
 * earlier batches stay deleted). */
OBX_API obx_result obx_cleanup(obx_store *store, int64_t retention_ms, int batch_size,
                               int64_t *deleted);

/* Running totals of the counted events since the store was opened,
 * indexed by obx_metric. Does not touch the database. Returns OBX_OK or
 * OBX_ERR_INVALID_ARG (NULL argument). */
OBX_API obx_result obx_store_counters(const obx_store *store, int64_t counters[OBX_METRIC_COUNT_]);

/* Queue depth now: messages ready to claim (due, not leased) and how long
 * the oldest of them has been ready, in ms (0 when none), by the database
 * clock. Touches the database (one read). Returns OBX_OK,
 * OBX_ERR_INVALID_ARG, OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_queue_stats(obx_store *store, int64_t *ready, int64_t *oldest_ready_ms);

/* The fill level a store's max_pending caps: messages enqueued and not yet
 * finished (waiting, due later, or in a handler), counted now. Touches the
 * database (one read). Returns OBX_OK, OBX_ERR_INVALID_ARG (NULL store or
 * pending), OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_pending_count(obx_store *store, int64_t *pending);

#ifndef OBX_NO_METRICS_TEXT
/* The store's metrics in the Prometheus text exposition format (0.0.4), for
 * node_exporter's textfile collector or a scrape endpoint of your own:
 *   obx_messages_*_total, obx_leases_reaped_total  counters since open
 *                                   (obx_store_counters), one per obx_metric
 *                                   (obx_messages_expired_total: the old name of
 *                                   _cleaned_up_total, printed too until 0.3)
 *   obx_queue_ready_messages, _in_flight_messages, _dead_messages,
 *   _scheduled_messages (not due yet), _expired_leases (in flight, lease
 *   run out), obx_queue_oldest_ready_age_seconds   gauges, read now (one query)
 *   obx_handler_duration_seconds    histogram per topic of the handlers a
 *                                   dispatcher on this store ran (all of a
 *                                   message's handlers together); after 100
 *                                   topics the rest count as topic "(other)"
 * Every sample has the label store="<store_id>" (and topic="..."), escaped
 * as the format says (backslash, double quote, newline). As obx_schema_sql:
 * writes at most `cap` bytes including the NUL into `out` (may be NULL with
 * cap 0) and the full size including the NUL into *needed (if not NULL);
 * 4 KB plus 1 KB per topic is plenty. Touches the database (one read).
 * Returns OBX_OK; OBX_ERR_OUT_OF_RANGE (buffer too small: *needed says how
 * much the text took; the gauges may differ on the next call);
 * OBX_ERR_INVALID_ARG (store NULL, out NULL with cap > 0);
 * OBX_ERR_NO_MEMORY; OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_metrics_text(obx_store *store, char *out, size_t cap, size_t *needed);
#endif

/* What a handler says about a message. */
typedef enum obx_outcome {
    OBX_DONE = 0,                /* handled: the message is acknowledged */
    OBX_RETRY = 1,               /* transient failure: retried after a backoff */
    OBX_DEAD = 2,                /* permanent failure: dead at once, never retried */
    OBX_WAIT = 3,                /* not ready yet (e.g. a join): retried later, never counted
                                    as a failed attempt; the delay is the backoff, capped at 5 s */
    OBX_PAUSE = 4,               /* the downstream is unavailable (broker down, uplink off):
                                    the message goes back without using an attempt and its
                                    topic is paused (see pause_ms in obx_dispatcher_desc) */
    OBX_CONFLICT = 5             /* transactional handlers only (obx_dispatcher_on_tx): a
                                    statement of the handler's transaction hit a deadlock,
                                    serialization failure or lock timeout (obx_tx_conflict
                                    says which errors are): rolled back and run again, no
                                    attempt used; from any other handler it is not an
                                    outcome (the message ends dead) */
} obx_outcome;

/* Room for a handler's error text, with its NUL. */
#define OBX_HANDLER_ERROR_MAX 256

/* A handler, the callback's protocol. It gets the whole message: the
 * message and everything it points to are valid during the call only (copy
 * what you keep). It is called on the thread that runs the dispatcher, one
 * message at a time, and returns one of obx_outcome's values; any other
 * value makes the message dead, with the value as the reason. `error`
 * (error_size bytes, zeroed before the call) takes a short reason for
 * RETRY, DEAD or PAUSE; it is stored as the last error and logged, so it
 * must not contain the payload (a byte that starts no UTF-8 character, as
 * when snprintf cuts one, is stored as '?'). It may enqueue follow-ups on
 * message->store; it must not claim or list on that store (its claim
 * buffer holds the batch) nor run or destroy its dispatcher. Handlers must
 * be idempotent: delivery is at least once. */
typedef obx_outcome (*obx_handler)(const obx_message *message, char *error, size_t error_size,
                                   void *user);

/* One message's outcome in a batch handler's call (see obx_dispatcher_on_batch). */
typedef struct obx_batch_result {
    obx_outcome outcome;         /* preset OBX_RETRY: set OBX_DONE for each message delivered */
    char error[OBX_HANDLER_ERROR_MAX]; /* preset "": the reason for RETRY, DEAD or PAUSE,
                                    stored as the last error and logged (never the payload) */
} obx_batch_result;

/* A batch handler, the same protocol for `count` messages (1..batch_size)
 * of one topic, in claim order, and one result per message (results[i] is
 * messages[i]'s, preset OBX_RETRY with no reason: a message it leaves alone
 * is retried). It owns none of them: both arrays are valid during the call
 * only. A result set to a value that is no obx_outcome makes its message
 * dead. */
typedef void (*obx_batch_handler)(const obx_message *const *messages, obx_batch_result *results,
                                  int count, void *user);

/* Delay in ms before the next attempt of a message that has failed
 * `attempts` times before this one. Values outside the range abandon
 * accepts are clamped to it. */
typedef int64_t (*obx_backoff_fn)(int attempts, void *user);

typedef struct obx_dispatcher obx_dispatcher;

/* The stores of many databases (one per tenant or site), kept open. */
typedef struct obx_provider obx_provider;

#ifndef OBX_NO_MULTI_STORE
/* A fixed list of databases, or a discovery callback that the provider
 * calls every refresh interval. All-zero fields take the defaults. */
typedef struct obx_provider_desc {
    obx_store_desc store;        /* template for every store; connection_string and store_id
                                    come from each database, hdbc must be NULL */
    const obx_database *databases; /* a fixed list (copied) ... */
    int database_count;
    obx_discover_fn discover;    /* ... or discovery (then databases must be NULL) */
    void *discover_user;
    int64_t refresh_interval_ms; /* default 300000 (5 min): discovery this often; also the
                                    longest wait between two attempts to open a database */
} obx_provider_desc;

/* Create a provider and open a store per database (discovery is called
 * once now). A database whose store cannot be opened is logged and left
 * out, and tried again on its own backoff: 1 s, then twice as long after
 * each failure, up to refresh_interval_ms. Each attempt is made by
 * obx_provider_refresh or a dispatcher's round when due, on a thread of
 * its own (one attempt at a time, its result taken in at a later round),
 * so a database that is down, however slow to refuse, never holds up the
 * others; without threads (OBX_NO_THREADS) at most one attempt runs per
 * round. That thread calls the template's hooks: they must be thread-safe
 * (the defaults are). Returns OBX_OK; OBX_ERR_INVALID_ARG (both or
 * neither of databases and discover, database_count < 0, a NULL or empty
 * or duplicate id, desc->store.hdbc set, a half-set allocator);
 * OBX_ERR_OUT_OF_RANGE (refresh_interval_ms < 0); OBX_ERR_DB (the first
 * discovery failed: *out is a provider with no stores, refreshed later);
 * OBX_ERR_NO_MEMORY. On the other errors *out is NULL, so the refusal is
 * logged at ERROR through desc->store.hooks' logger, naming the field
 * (e.g. "obx_provider_create: refresh_interval_ms: must be >= 0"). */
OBX_API obx_result obx_provider_create(const obx_provider_desc *desc, obx_provider **out);

/* Close every store and free the provider. NULL is a no-op. */
OBX_API void obx_provider_destroy(obx_provider *provider);

/* Ask discovery now: new databases get stores, removed ones are closed,
 * unchanged ones are kept as they are; a database that is down is not
 * tried again here before its backoff is over (see obx_provider_create).
 * Dispatchers call this themselves when the refresh interval has passed.
 * Ids are checked and found by sorting: the registry's own work for a
 * refresh of 100,000 unchanged databases is about 0.1 s. Returns OBX_OK, OBX_ERR_STATE (a
 * fixed list: nothing to refresh), OBX_ERR_DB (discovery failed, or said
 * more than OBX_DISCOVER_MAX: the current set is kept), OBX_ERR_INVALID_ARG
 * (discovery returned a bad entry: the current set is kept),
 * OBX_ERR_NO_MEMORY. */
OBX_API obx_result obx_provider_refresh(obx_provider *provider);

/* Number of open stores, and the store at `index` (NULL when out of range)
 * with its stable identifier. Valid until the next refresh or round of its
 * dispatcher (a database that opens late is appended). */
OBX_API int obx_provider_count(const obx_provider *provider);
OBX_API obx_store *obx_provider_store(const obx_provider *provider, int index);
OBX_API const char *obx_provider_store_id(const obx_provider *provider, int index);

/* Details of the provider's last error. */
OBX_API const obx_error *obx_provider_last_error(const obx_provider *provider);

/* The store for a routing key: the database id, exactly. No database is
 * opened: the provider's stores are reused. Returns OBX_OK;
 * OBX_ERR_INVALID_ARG (provider, key or out NULL, key empty);
 * OBX_ERR_NOT_FOUND (no database with that id). */
OBX_API obx_result obx_router_get(obx_provider *provider, const char *key, obx_store **out);

/* The same for a GUID key: the database whose id is that GUID's text, in
 * any case, with or without braces ("6f1c2a3b-...", "6F1C2A3B-...",
 * "{6f1c2a3b-...}"). */
OBX_API obx_result obx_router_get_guid(obx_provider *provider, const obx_guid *key, obx_store **out);
#endif /* OBX_NO_MULTI_STORE */

/* A selection strategy of your own: which store to poll next, and what it
 * returned. */
typedef struct obx_strategy {
    int (*next)(void *user, int store_count);
    void (*report)(void *user, int store, int claimed);
    void *user;
} obx_strategy;

/* Counts of one obx_dispatcher_run_once() call. */
typedef struct obx_run_stats {
    int claimed;                 /* messages claimed */
    int done;                    /* acknowledged */
    int retried;                 /* abandoned for a later attempt */
    int dead;                    /* failed permanently (DEAD, or out of attempts) */
    int no_handler;              /* of the retried: no handler for their topic */
    int64_t reaped;              /* expired leases released by a periodic reap */
    int paused;                  /* put back, attempts unchanged, because their topic is
                                    paused (OBX_PAUSE); not counted in `retried` */
    int lease_lost;              /* transactional handlers (obx_dispatcher_on_tx) whose
                                    message was no longer leased to this worker at the
                                    settle: everything rolled back, no attempt used */
    int conflicts;               /* transactional handlers' transactions rolled back by a
                                    deadlock or serialization failure and run again */
} obx_run_stats;

/* How to dispatch. All-zero fields take the defaults shown. */
typedef struct obx_dispatcher_desc {
    obx_store *store;            /* one store, or: */
    obx_provider *provider;      /* many: each round polls the store the strategy picks */
    obx_selection selection;     /* default round-robin; or drain-first */
    obx_strategy strategy;       /* a strategy of your own (next set): replaces selection */
    int64_t cleanup_interval_ms; /* 0: no automatic cleanup; else every store, this often ... */
    int64_t cleanup_retention_ms;/* ... deleting done messages older than this
                                    (0: OBX_DEFAULT_RETENTION_MS) */
    const char *owner_token;     /* default: a new UUIDv7 per dispatcher (not the empty UUID nor
                                    one of version 0, see obx_claim) */
    int batch_size;              /* default 50, at most OBX_BATCH_MAX */
    int lease_seconds;           /* default 30, at most OBX_LEASE_MAX_SECONDS; longer than a
                                    handler may take */
    int max_attempts;            /* default 10: a handler runs at most this many times for a
                                    message (a lease that expires does not count here: see
                                    the store's max_starts) */
    obx_backoff_fn backoff;      /* default min(2^attempts s, 60 s) */
    void *backoff_user;
    int64_t poll_interval_ms;    /* default 500: wait after an empty claim ... */
    int64_t idle_max_ms;         /* default 2000: ... doubling while idle up to this */
    int64_t reap_interval_ms;    /* default 30000: reap expired leases this often (the wake of
                                    parked keyed messages runs sooner: see obx_reap) */
    int64_t startup_delay_ms;    /* default 0: wait before the first claim */
    int64_t error_delay_ms;      /* default 30000: wait after a failed round; a transient
                                    failure (lost connection, server restarting) is retried
                                    sooner: 100 ms doubling up to 1 s (at most this) */
    obx_log_level message_log_level; /* the level of the line logged as each message is
                                    handed to its handlers (topic and id); default: the
                                    store's message_log_level, OBX_LOG_DEBUG with a provider */
    int64_t max_handler_ms;      /* default 300000 (5 min): while a batch is handled, a thread
                                    of the dispatcher renews its leases every third of the
                                    lease on a connection of its own, for at most this long
                                    (then it stops, logged, and the messages may be delivered
                                    again). Needs threads and a store opened from a
                                    connection string; the hooks must then be thread-safe */
    int no_lease_renewal;        /* nonzero: no renewal thread; handlers must finish within
                                    the lease (or call obx_lease_extend themselves) */
    volatile sig_atomic_t *stop_flag; /* optional: run() stops when *stop_flag becomes nonzero
                                    (safe to set from a signal handler; seen within one wait) */
    int64_t pause_ms;            /* default 1000: a handler's OBX_PAUSE pauses its topic this
                                    long; each further OBX_PAUSE in a row doubles it ... */
    int64_t pause_max_ms;        /* default 60000: ... up to this. The first OBX_DONE of the
                                    topic ends the pause. While paused, the topic's claimed
                                    messages go back unhandled, due when the pause ends (so
                                    other dispatchers wait too), their attempts unchanged;
                                    other topics flow. Pauses are per dispatcher and topic
                                    (with a provider: the topic on every store) */
    const char *wake_path;       /* optional (POSIX): while run() runs, listen on a Unix
                                    datagram socket at this path and claim at once when a
                                    producer's store with the same wake_path commits, in any
                                    process of this host. One dispatcher listens per path: a
                                    socket file nobody listens on is replaced; anything else
                                    there (a live socket, a file that is not a socket) is
                                    left alone and this dispatcher polls (WARN). When run()
                                    returns it removes the socket file it bound, if that is
                                    still the one at the path */
} obx_dispatcher_desc;
/* Intervals are saturating: a huge one (INT64_MAX) means "never again". */

/* Create a dispatcher over desc->store or desc->provider (exactly one).
 * Reap (and cleanup, when asked) run for every store, on their own
 * schedules. Does not touch the database. Returns OBX_OK;
 * OBX_ERR_INVALID_ARG (desc or out NULL; neither or both of store and
 * provider; owner_token not a UUID; built with OBX_NO_POSIX_CLOCK and no
 * clock hook with sleep_ms); OBX_ERR_OUT_OF_RANGE (a negative or too large
 * number); OBX_ERR_NO_MEMORY. The error, on the store (with a provider: on
 * the provider), names the field, e.g. "obx_dispatcher_create:
 * lease_seconds"; with neither store nor provider there is nowhere to say. */
OBX_API obx_result obx_dispatcher_create(const obx_dispatcher_desc *desc, obx_dispatcher **out);

/* The description a dispatcher would run with: a copy of *desc (NULL: all
 * zero) with every zero field replaced by its default, the same function
 * obx_dispatcher_create uses. Pure; no checks (create does those). */
OBX_API obx_dispatcher_desc obx_dispatcher_desc_defaults(const obx_dispatcher_desc *desc);

/* Free a dispatcher (not its store). Must not be running. NULL is a no-op. */
OBX_API void obx_dispatcher_destroy(obx_dispatcher *dispatcher);

/* Register `handler` for `topic` (exact, case-sensitive), or for every
 * topic with "*". A message runs its topic's handlers in registration
 * order, then the "*" ones; the first that does not return OBX_DONE decides
 * the message's fate. A message with no handler at all is logged as a
 * warning and retried later. Returns OBX_OK, OBX_ERR_INVALID_ARG (NULL,
 * empty, not UTF-8 or over-long topic, NULL handler, a topic with a batch
 * handler), OBX_ERR_NO_MEMORY. Does not touch the database. */
OBX_API obx_result obx_dispatcher_on(obx_dispatcher *dispatcher, const char *topic,
                                     obx_handler handler, void *user);

/* Register a batch handler for `topic` (exact, case-sensitive), or for
 * every topic that has no handler of its own with "*": the messages of
 * that topic in a claim (up to batch_size) are handed to it in one call,
 * in claim order, and it sets one outcome per message (done, retry with a
 * reason, dead, wait, pause); messages of other topics go to their own
 * handlers. A topic has one batch handler, or per-message handlers
 * (obx_dispatcher_on), not both. Returns OBX_OK, OBX_ERR_INVALID_ARG (as
 * obx_dispatcher_on; the topic already has a handler of the other kind or
 * a batch handler), OBX_ERR_NO_MEMORY. Does not touch the database. */
OBX_API obx_result obx_dispatcher_on_batch(obx_dispatcher *dispatcher, const char *topic,
                                           obx_batch_handler handler, void *user);

/* A transactional handler (obx_dispatcher_on_tx): a handler (see
 * obx_handler) that also gets the store's own connection, `hdbc`, inside a
 * transaction the dispatcher opened for this message: an SQLHDBC, or with
 * OBX_SQLITE3_API the sqlite3 *. What it writes there commits together with
 * the message's settle, or not at all. Never commit, roll back, change the
 * autocommit mode or close it; never keep it past the call. */
typedef obx_outcome (*obx_tx_handler)(const obx_message *message, void *hdbc, char *error,
                                      size_t error_size, void *user);

/* Register a transactional handler for `topic` (exact, case-sensitive), or
 * for every topic that has no handler of its own with "*". For each
 * message the dispatcher opens a transaction on the store's connection,
 * calls the handler, and:
 *   OBX_DONE      acks the message in that transaction (the ack checks that
 *                 the message is still leased to this dispatcher: its owner
 *                 token still on the row, in flight) and commits: the
 *                 handler's writes and Done commit together, exactly once.
 *                 A lease lost meanwhile (reaped, claimed by another
 *                 worker) rolls everything back: no effect, no attempt used,
 *                 counted in obx_run_stats.lease_lost and logged (WARN).
 *   OBX_RETRY, OBX_DEAD, OBX_WAIT, OBX_PAUSE   roll back the handler's
 *                 writes, then settle as for any handler (a retry uses an
 *                 attempt; dead is dead with no effect).
 *   OBX_CONFLICT  (or a deadlock, serialization failure or busy database
 *                 in the ack or the commit) roll back and run the handler
 *                 again at once, up to 3 times in all, without using an
 *                 attempt (obx_run_stats.conflicts); then the message goes
 *                 back, due after the backoff, attempts unchanged.
 * A failure of the database in the dispatcher's part (begin, ack, commit)
 * rolls back and retries the message with that error (an attempt). A
 * connection lost there uses no attempt (the handler did its part): the
 * message goes back due after the backoff (as OBX_WAIT), or, lost at the
 * commit, the database has the outcome: Done with its effects, or back
 * without them and delivered again (OBX-TXH-LOST-CONNECTION). Calls on
 * message->store inside the handler (obx_enqueue of follow-ups) run in
 * the handler's transaction: they commit with it or not at all; not
 * obx_lease_extend (it would lock the message's row until the commit, and
 * the renewal already extends it). Effects outside this database (a mail,
 * an HTTP call) stay at least once. The transaction is the connection's
 * default isolation (READ COMMITTED on PostgreSQL and the store's
 * MariaDB connection). While it is open the message's row is not locked,
 * so the lease renewal (its own connection) and other workers' claims do
 * not wait for it; on SQLite it is deferred: it takes the database's write
 * lock at the handler's first write (or at the ack) and holds it to the
 * commit, so every other writer (renewal, claims, producers) waits for it
 * up to their busy timeout: keep such handlers short. A topic has
 * transactional handlers or handlers of another kind, not both, and one
 * transactional handler. Needs the store's own connection (a store opened
 * on a caller's hdbc is refused when the message comes: OBX_RETRY with the
 * reason). Returns OBX_OK, OBX_ERR_INVALID_ARG (as obx_dispatcher_on; the
 * topic already has a handler), OBX_ERR_NO_MEMORY. Does not touch the
 * database. */
OBX_API obx_result obx_dispatcher_on_tx(obx_dispatcher *dispatcher, const char *topic,
                                        obx_tx_handler handler, void *user);

/* A transactional batch handler (obx_dispatcher_on_batch_tx): a batch
 * handler (see obx_batch_handler) that also gets the store's connection
 * inside a transaction, as obx_tx_handler does. results[i] may also be
 * OBX_CONFLICT (the whole call is then rolled back and run again). */
typedef void (*obx_batch_tx_handler)(const obx_message *const *messages, obx_batch_result *results, int count,
                                     void *hdbc, void *user);

/* Register a transactional batch handler for `topic` ("*": every topic
 * without a handler of its own): a claim's messages of the topic in one
 * call, as obx_dispatcher_on_batch, inside one transaction, as
 * obx_dispatcher_on_tx. When every result is OBX_DONE, the messages are
 * acked in that transaction and it commits: their writes and Done
 * together. Any other result rolls the whole call back: the messages with
 * another outcome are settled with it (no effect), and those that were
 * done are handed to the handler again, alone, in a new transaction (a
 * handler writes for every message it is given, and for them only). A
 * result OBX_CONFLICT, or a conflict at the ack or the commit, runs the
 * same call again (3 runs in all, no attempt used). When the ack finds a
 * message no longer leased to this dispatcher, all is rolled back: the
 * lost ones are counted in lease_lost, the others released unhandled
 * without using an attempt. Returns as obx_dispatcher_on_batch. */
OBX_API obx_result obx_dispatcher_on_batch_tx(obx_dispatcher *dispatcher, const char *topic,
                                              obx_batch_tx_handler handler, void *user);

/* Whether a database error a transactional handler got on its hdbc is one
 * to answer with OBX_CONFLICT: a deadlock, serialization failure, lock wait
 * timeout or busy database, as the store's dialect reports them (SQLSTATE
 * class 40, 55P03; MariaDB 1205, 1213, 1020; SQLite 5 SQLITE_BUSY, 6
 * SQLITE_LOCKED as native). `sqlstate` may be NULL. 1 or 0; 0 for a NULL
 * store. */
OBX_API int obx_tx_conflict(const obx_store *store, const char *sqlstate, long native_error);

/* One round: reap if the reap interval has passed, claim one batch, run
 * the handlers, then settle: all successes in one ack, each failure
 * abandoned (with backoff) or failed, the messages of a paused topic put
 * back in one statement per topic. *stats (if not NULL) gets the counts.
 * Returns OBX_OK (messages handled), OBX_EMPTY (nothing to claim), or the
 * database error of the claim or a settle (messages not settled stay
 * leased and are retried after their lease expires: nothing is lost). */
OBX_API obx_result obx_dispatcher_run_once(obx_dispatcher *dispatcher, obx_run_stats *stats);

/* Loop run_once() until obx_dispatcher_stop() or *stop_flag: after an
 * empty round wait poll_interval_ms (doubling up to idle_max_ms), after a
 * database error wait error_delay_ms, and wake at once on
 * obx_dispatcher_wake(). Returns OBX_OK when stopped.
 * With one store, a batch's successes are acked with the next round's
 * claim (on PostgreSQL in its statement: one round trip and one commit per
 * batch), which follows at once; they are acked on their own before
 * housekeeping, when that claim fails, and before run() returns. Messages
 * with an ordering key are acked at once, as run_once() acks everything. */
OBX_API obx_result obx_dispatcher_run(obx_dispatcher *dispatcher);

/* Ask run() to return after the current round. Final: a stop given
 * before run() starts is kept (run() then returns at once), and every
 * later run() returns OBX_OK at once, handling nothing (run_once() still
 * works); to dispatch again, create a new dispatcher. Thread-safe (not
 * async-signal-safe: from a signal handler use desc.stop_flag). */
OBX_API void obx_dispatcher_stop(obx_dispatcher *dispatcher);

/* Tell a waiting run() that messages were just committed, so it claims now
 * instead of at the next poll (the producer's "hot path"; the database
 * stays the only source of truth). Call it after your commit. Thread-safe;
 * cheap when the dispatcher is busy. Producers in other processes are seen
 * at the next poll. */
OBX_API void obx_dispatcher_wake(obx_dispatcher *dispatcher);

/* Wake the dispatcher listening at the store's wake_path (see the store
 * desc), in this or another process. The store does it by itself after
 * each enqueue it commits; call it when messages reached the table another
 * way (after you commit a transaction that enqueued through a _tx call, or
 * rows written with SQL). Never blocks; no listener is not an error.
 * Returns OBX_OK, or OBX_ERR_INVALID_ARG for a NULL store. */
OBX_API obx_result obx_notify(obx_store *store);

/* ---- Your own driver: the statements, run in your transaction ---------------- */

/* For a program whose business writes go through its own driver (libpq,
 * the sqlite3 C API, MariaDB Connector/C, ...) and not ODBC: the library
 * gives the statements an _tx call would run, with their values, and the
 * program runs them on its own connection inside its own transaction
 * (obx_enqueue_sql). They do exactly what the _tx call does on `hdbc`,
 * rows and ordering keys alike. The program commits or rolls back; after a
 * commit, obx_notify(store) wakes a dispatcher as after any _tx call. The
 * conveniences below (obx_enqueue_sqlite3, obx_enqueue_pq,
 * obx_enqueue_mysql) do all of it for one driver each. */

/* One value of a statement, in the order of its markers (a value a
 * statement uses twice is given twice). */
typedef struct obx_sql_param {
    const char *value;  /* the value as text (an integer in decimal), NUL-terminated;
                           NULL: SQL NULL */
    size_t length;      /* bytes of value without the NUL; 0 for NULL */
    int is_int;         /* a 64-bit integer (i64; NULL or not): bind it typed where the
                           driver types values (libpq: int8, OID 20), else as text */
    int64_t i64;        /* the integer when is_int and value is not NULL */
    int is_blob;        /* bytes, any of them (a content hash): bind as binary (libpq:
                           bytea, OID 17, binary format); still NUL-terminated */
} obx_sql_param;

/* One statement of the store's dialect, to run in order. */
typedef struct obx_sql_stmt {
    const char *sql;             /* the text, markers as asked (OBX_SQL_MARKERS_*) */
    int param_count;
    const obx_sql_param *params; /* param_count values */
    int check_column;            /* 0: returns no row (ignore any count). N > 0: returns one
                                    row; pass its column N (as text, NULL if SQL NULL) to
                                    obx_sql_check, and go on only on OBX_OK */
    int counts;                  /* 1: its count is the call's outcome (the inbox: 1 when the
                                    message is new): the first column of the row it returns,
                                    or, returning none, the rows it changed */
} obx_sql_stmt;

/* Statements to run, from obx_enqueue_sql; free with obx_sql_free. */
typedef struct obx_sql obx_sql;

#define OBX_SQL_MARKERS_QUESTION 0 /* "?": sqlite3, MariaDB Connector/C, ODBC */
#define OBX_SQL_MARKERS_DOLLAR 1   /* "$1", "$2", ...: libpq */

/* How many statements `sql` holds (0 for NULL), and statement i of them
 * (NULL when out of range): valid until obx_sql_free. */
OBX_API int obx_sql_count(const obx_sql *sql);
OBX_API const obx_sql_stmt *obx_sql_at(const obx_sql *sql, int i);

/* The row of a statement with check_column: `value` is its column
 * check_column. Returns OBX_OK to go on; OBX_ERR_STATE, where "hdbc:
 * isolation", when the transaction may not take the message (MariaDB: a
 * keyed message needs READ COMMITTED, see obx_enqueue_tx) -- then roll
 * back, nothing of the message is meant to commit; OBX_ERR_INVALID_ARG for
 * a NULL store or stmt, or a stmt without check_column. */
OBX_API obx_result obx_sql_check(obx_store *store, const obx_sql_stmt *stmt, const char *value);

/* The id of message i of the statements (the work item id the _tx call
 * would give), NUL-terminated; NULL when out of range. */
OBX_API const char *obx_sql_id(const obx_sql *sql, int i);

/* Record a failure as the store's last error (obx_store_last_error), for
 * a program's driver code (the conveniences use it). With `result`
 * OBX_ERR_DB the failure is classified as the library classifies its own:
 * `sqlstate` (5 characters, or NULL/"" if the driver has none) and
 * `native` (the driver's code: MariaDB's error number, SQLite's result
 * code, 0 if none) make it OBX_ERR_DB_TRANSIENT (deadlock, serialization
 * failure, busy, lost connection: roll back and retry) or leave it
 * OBX_ERR_DB; any other result is recorded as given. `where` and `message`
 * are copied. Returns the recorded code, or OBX_ERR_INVALID_ARG for a NULL
 * store. */
OBX_API obx_result obx_sql_error(obx_store *store, obx_result result, const char *where, const char *sqlstate,
                                 long native, const char *message);

/* Free statements from obx_enqueue_sql (NULL is a no-op). */
OBX_API void obx_sql_free(obx_sql *sql);

/* The dispatcher's last error: with one store it is that store's error;
 * with a provider, the error of the last round that failed (copied, so it
 * outlives a store that discovery has since closed), of the last discovery
 * that failed (where "obx_provider_refresh: discover"; the round itself
 * goes on with the current set) or of the last obx_dispatcher_on. NULL
 * gives a static "store is NULL" error. */
OBX_API const obx_error *obx_dispatcher_last_error(const obx_dispatcher *dispatcher);

#ifndef OBX_NO_DEAD_LETTERS
/* ---- Dead letters: list, replay, purge --------------------------------------------- */

/* List dead messages matching `filter` (NULL: all), oldest first (by
 * creation, then key), skipping `offset` (>= 0) and returning at most
 * `limit` (1..OBX_BATCH_MAX). *messages points at *count messages in the
 * store's claim buffer: valid until the next claim or list on this store
 * (so not from a handler of a dispatcher on the same store). Pages are by
 * offset: after a replay or purge, start again from 0. Touches the
 * database (one read). Returns OBX_OK (count >= 1), OBX_EMPTY (none);
 * OBX_ERR_INVALID_ARG (NULL pointers, a filter text empty, not UTF-8 or
 * too long, a key that is not one); OBX_ERR_OUT_OF_RANGE (limit, offset,
 * a time outside 0..OBX_TIME_MAX_MS); OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_dead_list(obx_store *store, const obx_dead_filter *filter, int offset,
                                 int limit, const obx_message **messages, int *count);

/* Replay dead messages matching `filter` (NULL: all): ready again at once,
 * attempts reset to 0, their last error kept for the record until a new
 * one replaces it, their expiry dropped (a replay is the decision to run
 * it: an expired message would go dead again at once, and under
 * ordering_dead_holds keep its key waiting). One statement: a message is
 * replayed once, whatever other callers do meanwhile (a purge running at
 * the same time deletes it only if it is still dead), and dispatchers never
 * touch dead ones. A join step it already counted as failed stays failed. *replayed (if not
 * NULL) gets the count. Returns OBX_OK; the errors of obx_dead_list but
 * OBX_EMPTY. */
OBX_API obx_result obx_dead_replay(obx_store *store, const obx_dead_filter *filter, int64_t *replayed);

/* Delete dead messages matching `filter` (NULL: all), in transactions of
 * at most 1000 rows each until none is left; *purged (if
 * not NULL) gets the count. Done messages are deleted by obx_cleanup.
 * Returns as obx_dead_replay (rows deleted by earlier batches stay
 * deleted after an error). */
OBX_API obx_result obx_dead_purge(obx_store *store, const obx_dead_filter *filter, int64_t *purged);
#endif /* OBX_NO_DEAD_LETTERS */


/* ---- Running statements on three drivers --------------------------------------------
 * Where the program included a driver's header before this one: the
 * statements of an obx_sql run on that driver's connection, inside the
 * transaction open on it, as static inline functions (no link dependency
 * for anyone else). The header's own calls (obx_enqueue_sqlite3 and its
 * kin) are built on them. `fn` names the caller in errors; *count (if not
 * NULL) receives the count of the statement with `counts` set. */
#if defined(SQLITE3_H) || defined(_SQLITE3_H_) || defined(SQLITE_VERSION_NUMBER) || defined(LIBPQ_FE_H) || \
    defined(_mysql_h)
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* atoll */
#include <string.h> /* memcpy, strlen */
#endif

#if (defined(SQLITE3_H) || defined(_SQLITE3_H_) || defined(SQLITE_VERSION_NUMBER)) && !defined(OBX__SQLITE3_RUN)
#define OBX__SQLITE3_RUN
static inline obx_result obx__sql_sqlite3(obx_store *store, const char *fn, sqlite3 *db, const obx_sql *sql,
                                          int64_t *count) {
    char where[96];
    const obx_sql_stmt *s;
    obx_result r = OBX_OK;
    int i, k;
    snprintf(where, sizeof where, "%s: db", fn);
    if (sqlite3_get_autocommit(db))
        return obx_sql_error(store, OBX_ERR_STATE, where, NULL, 0,
                             "db is in autocommit: BEGIN IMMEDIATE first (the message must commit with your work)");
    snprintf(where, sizeof where, "%s: sqlite3_step", fn);
    for (i = 0; r == OBX_OK && (s = obx_sql_at(sql, i)) != NULL; i++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, s->sql, -1, &st, NULL);
        for (k = 0; rc == SQLITE_OK && k < s->param_count; k++) {
            const obx_sql_param *p = &s->params[k];
            rc = !p->value   ? sqlite3_bind_null(st, k + 1)
               : p->is_int  ? sqlite3_bind_int64(st, k + 1, (sqlite3_int64)p->i64)
               : p->is_blob ? sqlite3_bind_blob(st, k + 1, p->value, (int)p->length, SQLITE_STATIC)
                            : sqlite3_bind_text(st, k + 1, p->value, (int)p->length, SQLITE_STATIC);
        }
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        if (rc == SQLITE_ROW && s->check_column > 0)
            r = obx_sql_check(store, s, (const char *)sqlite3_column_text(st, s->check_column - 1));
        else if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            r = obx_sql_error(store, OBX_ERR_DB, where, NULL, sqlite3_errcode(db), sqlite3_errmsg(db));
        else if (s->counts && count)
            *count = rc == SQLITE_ROW ? (int64_t)sqlite3_column_int64(st, 0) : (int64_t)sqlite3_changes(db);
        sqlite3_finalize(st);
    }
    return r;
}
#endif

#if defined(LIBPQ_FE_H) && !defined(OBX__PQ_RUN)
#define OBX__PQ_RUN
static inline obx_result obx__sql_pq(obx_store *store, const char *fn, PGconn *conn, const obx_sql *sql,
                                     int64_t *count) {
    char where[96];
    const obx_sql_stmt *s;
    obx_result r = OBX_OK;
    int i, k;
    snprintf(where, sizeof where, "%s: conn", fn);
    if (PQtransactionStatus(conn) != PQTRANS_INTRANS)
        return obx_sql_error(store, OBX_ERR_STATE, where, NULL, 0,
                             PQtransactionStatus(conn) == PQTRANS_INERROR
                                 ? "conn's transaction has failed: roll it back"
                                 : "conn is not in a transaction: BEGIN first (the message must commit with your work)");
    snprintf(where, sizeof where, "%s: PQexecParams", fn);
    for (i = 0; r == OBX_OK && (s = obx_sql_at(sql, i)) != NULL; i++) {
        const char *values[64];
        Oid types[64];
        int lengths[64], formats[64];
        PGresult *res = NULL;
        ExecStatusType st;
        for (k = 0; k < s->param_count && k < 64; k++) {
            values[k] = s->params[k].value;
            lengths[k] = (int)s->params[k].length;
            formats[k] = s->params[k].is_blob; /* bytes as bytes; the rest as text */
            types[k] = s->params[k].is_int ? 20 : s->params[k].is_blob ? 17 : 0; /* int8, bytea, inferred */
        }
        if (s->param_count <= 64)
            res = PQexecParams(conn, s->sql, s->param_count, types, values, lengths, formats, 0);
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st == PGRES_TUPLES_OK && s->check_column > 0)
            r = obx_sql_check(store, s, PQntuples(res) < 1 || PQgetisnull(res, 0, s->check_column - 1)
                                            ? NULL : PQgetvalue(res, 0, s->check_column - 1));
        else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            r = obx_sql_error(store, OBX_ERR_DB, where, res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL, 0,
                              res ? PQresultErrorMessage(res) : "more than 64 parameters");
        else if (s->counts && count)
            *count = st == PGRES_TUPLES_OK && PQntuples(res) > 0 ? atoll(PQgetvalue(res, 0, 0))
                                                                 : atoll(PQcmdTuples(res));
        PQclear(res);
    }
    return r;
}
#endif

#if defined(_mysql_h) && !defined(OBX__MYSQL_RUN)
#define OBX__MYSQL_RUN
/* A statement's one row, columns as text, into col; 0 when it has none. */
static inline int obx__sql_mysql_row(MYSQL_STMT *st, char col[8][64], my_bool nulls[8]) {
    MYSQL_BIND c[8];
    unsigned long len[8];
    unsigned n = mysql_stmt_field_count(st), k;
    int f;
    memset(c, 0, sizeof c);
    for (k = 0; k < n && k < 8; k++) {
        c[k].buffer_type = MYSQL_TYPE_STRING;
        c[k].buffer = col[k];
        c[k].buffer_length = 63;
        c[k].length = &len[k];
        c[k].is_null = &nulls[k];
    }
    if (n == 0 || n > 8 || mysql_stmt_bind_result(st, c) != 0) return 0;
    f = mysql_stmt_fetch(st);
    for (k = 0; (f == 0 || f == MYSQL_DATA_TRUNCATED) && k < n; k++) col[k][len[k] < 63 ? len[k] : 63] = '\0';
    while (f == 0 && mysql_stmt_fetch(st) == 0) {
    }
    return f == 0 || f == MYSQL_DATA_TRUNCATED;
}

static inline obx_result obx__sql_mysql(obx_store *store, const char *fn, MYSQL *mysql, const obx_sql *sql,
                                        int64_t *count) {
    char where[96];
    const obx_sql_stmt *s;
    obx_result r = OBX_OK;
    int i, k;
    snprintf(where, sizeof where, "%s: mysql", fn);
    if ((mysql->server_status & SERVER_STATUS_AUTOCOMMIT) && !(mysql->server_status & SERVER_STATUS_IN_TRANS))
        return obx_sql_error(store, OBX_ERR_STATE, where, NULL, 0,
                             "mysql is in autocommit: START TRANSACTION first (the message must commit with your work)");
    snprintf(where, sizeof where, "%s: mysql_stmt_execute", fn);
    for (i = 0; r == OBX_OK && (s = obx_sql_at(sql, i)) != NULL; i++) {
        MYSQL_STMT *st = mysql_stmt_init(mysql);
        MYSQL_BIND b[64];
        unsigned long len[64];
        char col[8][64];
        my_bool nulls[8] = {0};
        int ok = st && s->param_count <= 64 && mysql_stmt_prepare(st, s->sql, (unsigned long)strlen(s->sql)) == 0;
        memset(b, 0, sizeof b);
        for (k = 0; ok && k < s->param_count; k++) {
            const obx_sql_param *p = &s->params[k];
            len[k] = (unsigned long)p->length;
            b[k].buffer_type = !p->value   ? MYSQL_TYPE_NULL
                             : p->is_int  ? MYSQL_TYPE_LONGLONG
                             : p->is_blob ? MYSQL_TYPE_BLOB : MYSQL_TYPE_STRING;
            b[k].buffer = p->is_int ? (void *)(uintptr_t)&p->i64 : (void *)(uintptr_t)p->value;
            b[k].buffer_length = len[k];
            b[k].length = &len[k];
        }
        ok = ok && mysql_stmt_bind_param(st, b) == 0 && mysql_stmt_execute(st) == 0;
        if (ok && (s->check_column > 0 || mysql_stmt_field_count(st) > 0)) { /* one row */
            ok = obx__sql_mysql_row(st, col, nulls) && (unsigned)s->check_column <= mysql_stmt_field_count(st);
            if (ok && s->check_column > 0)
                r = obx_sql_check(store, s, nulls[s->check_column - 1] ? NULL : col[s->check_column - 1]);
            if (ok && s->counts && count) *count = nulls[0] ? 0 : atoll(col[0]);
        } else if (ok && s->counts && count) {
            *count = (int64_t)mysql_stmt_affected_rows(st);
        }
        if (!ok && r == OBX_OK)
            r = obx_sql_error(store, OBX_ERR_DB, where, st ? mysql_stmt_sqlstate(st) : mysql_sqlstate(mysql),
                              (long)(st ? mysql_stmt_errno(st) : mysql_errno(mysql)),
                              st ? mysql_stmt_error(st) : mysql_error(mysql));
        if (st) mysql_stmt_close(st);
    }
    return r;
}
#endif

/* >>common-end api-engine */

#ifndef OBX_NO_DEAD_LETTERS
/* Operator actions on one message (obxctl cancel, dead move, run). */

/* Move message `id` (a work item id) to Dead now, with `reason` as its
 * last error: a Ready message (due or scheduled, parked ones included),
 * and with `in_flight` non-zero also one in flight (its lease ends: the
 * holder's ack, abandon or fail then changes nothing). Done and Dead
 * messages are left as they are. The messages of its ordering key after
 * it move on as after a fail. *moved (if not NULL) gets 1, or 0 when
 * there is no such message in a state it may leave. Returns OBX_OK;
 * OBX_ERR_INVALID_ARG (id not a UUID; reason NULL, empty, not UTF-8 or
 * over 255 characters); OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_dead_move(obx_store *store, const char *id, const char *reason, int in_flight,
                                 int64_t *moved);

/* Make Ready message `id`, waiting for its due time or a retry's backoff,
 * claimable now (its next attempt: the database's clock). One parked
 * behind an earlier message of its ordering key, in flight, Done or Dead
 * is left as it is (*changed 0); a parked one runs when the key's earlier
 * messages are Done or Dead. *changed (if not NULL) gets 1 or 0. Returns
 * as obx_dead_move. */
OBX_API obx_result obx_run_now(obx_store *store, const char *id, int64_t *changed);
#endif /* OBX_NO_DEAD_LETTERS */

#ifndef OBX_NO_JOIN
/* ---- Joins (fan-in) --------------------------------------------------------------- */

/* Join states (the OutboxJoin.Status column). */
typedef enum obx_join_status {
    OBX_JOIN_PENDING = 0,
    OBX_JOIN_COMPLETED = 1,
    OBX_JOIN_FAILED = 2,
    OBX_JOIN_CANCELLED = 3
} obx_join_status;

/* A join as obx_join_get reads it; strings owned by the store (valid until
 * the next get/claim on it). */
typedef struct obx_join {
    char id[37];
    const char *grouping_key;    /* NULL when none */
    int expected_steps, completed_steps, failed_steps;
    obx_join_status status;
    const char *metadata;        /* NULL when none */
    int64_t created_ms, updated_ms;
} obx_join;

/* Start a join of `expected_steps` (>= 1) steps (OBX-080..082), with an
 * optional grouping key (<= 255 characters) and metadata; *out_join_id gets
 * its id. Counters start at 0. Touches the database (own transaction).
 * Returns OBX_OK, OBX_ERR_INVALID_ARG (out_join_id NULL, a grouping key not
 * UTF-8 or too long, metadata not UTF-8), OBX_ERR_OUT_OF_RANGE (steps < 1),
 * OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_join_start(obx_store *store, const char *grouping_key, int expected_steps,
                                  const char *metadata, char out_join_id[37]);

/* Attach a message to a join by its work item id: the id obx_enqueue
 * returned, obx_message.id (not obx_message.message_id: the triggers
 * count settles by work item id). Attaching again has no effect. An id no
 * row has yet is accepted (its enqueue may be in a transaction not yet
 * committed) and counts once such a message is settled. A message may be
 * in several joins. When it is
 * acknowledged or failed, every one of its joins counts a completed or
 * failed step in the same transaction (done by triggers in the database).
 * A message already acknowledged or failed when it is attached counts at
 * once, exactly once (the attach locks the message row, so a concurrent
 * settle comes wholly before or after it). Counters never exceed the
 * expected steps. Returns OBX_OK, OBX_ERR_NOT_FOUND (no such join),
 * OBX_ERR_INVALID_ARG (ids not UUIDs), OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_join_attach(obx_store *store, const char *join_id, const char *message_id);

/* obx_join_attach in the caller's transaction on `hdbc` (as obx_enqueue_tx:
 * never committed or rolled back here), so that an enqueue and its attach
 * are one atomic step. Returns as obx_join_attach; OBX_ERR_INVALID_ARG
 * when hdbc is NULL; OBX_ERR_STATE in the wrong autocommit mode (as
 * obx_enqueue_tx). */
OBX_API obx_result obx_join_attach_tx(obx_store *store, void *hdbc, const char *join_id,
                                      const char *message_id);

/* Report a step by hand (OBX-085..088): completed (failed = 0) or failed,
 * for a message named by its work item id as in obx_join_attach.
 * Idempotent per message: a step reported twice, or also acked, counts
 * once; a message not attached yet is attached. Returns OBX_OK,
 * OBX_ERR_NOT_FOUND (no such join), OBX_ERR_INVALID_ARG, OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_join_report(obx_store *store, const char *join_id, const char *message_id,
                                   int failed);

/* obx_join_report in the caller's transaction on `hdbc`. Returns as
 * obx_join_report; OBX_ERR_INVALID_ARG when hdbc is NULL; OBX_ERR_STATE in
 * the wrong autocommit mode (as obx_enqueue_tx). */
OBX_API obx_result obx_join_report_tx(obx_store *store, void *hdbc, const char *join_id,
                                      const char *message_id, int failed);

/* Read a join. Returns OBX_OK, OBX_ERR_NOT_FOUND, OBX_ERR_INVALID_ARG,
 * OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_join_get(obx_store *store, const char *join_id, obx_join *join);

/* Cancel a pending join (Pending -> Cancelled): its join.wait messages
 * then end (OBX_DONE) without enqueuing their on-complete or on-fail
 * message, whether the steps are in or not. A race with a join.wait that
 * is finishing the join has one winner: the join is then Cancelled, or
 * Completed/Failed with its follow-up enqueued. Steps may still be
 * reported (counted, nothing follows). Touches the database (own
 * transaction). Returns OBX_OK (cancelled now, or before); OBX_ERR_STATE
 * (already Completed or Failed); OBX_ERR_NOT_FOUND; OBX_ERR_INVALID_ARG
 * (join_id not a UUID); OBX_ERR_DB(_TRANSIENT). */
OBX_API obx_result obx_join_cancel(obx_store *store, const char *join_id);

/* What a join.wait message does when its join has all its steps. */
typedef struct obx_join_wait {
    const char *join_id;             /* required */
    int fail_if_any_step_failed;     /* a failed step fails the join (OBX-092) */
    const char *on_complete_topic;   /* optional message enqueued on success (OBX-093) */
    const char *on_complete_payload;
    const char *on_fail_topic;       /* optional message enqueued on failure (OBX-094) */
    const char *on_fail_payload;
} obx_join_wait;

/* Enqueue a "join.wait" message for `wait` (Appendix D's EnqueueJoinWait),
 * in the caller's transaction on `hdbc` or (NULL) its own. Register
 * obx_join_wait_handler for the topic "join.wait" on a dispatcher. Returns
 * as obx_enqueue; OBX_ERR_INVALID_ARG (no join id, a join id that is not a
 * UUID, a follow-up topic over 255 characters or a follow-up topic or
 * payload not UTF-8, each named). */
OBX_API obx_result obx_join_enqueue_wait(obx_store *store, void *hdbc, const obx_join_wait *wait,
                                         char out_id[37]);

/* The handler for "join.wait" messages (OBX-090..094): not all steps in
 * yet: OBX_WAIT (retried later, never counted as a failed attempt, however
 * long the steps take); all in: the join becomes Completed, or Failed when
 * asked to and a step failed, and the on-complete or on-fail message is
 * enqueued, in one transaction and only once. `user` is unused. */
OBX_API obx_outcome obx_join_wait_handler(const obx_message *message, char *error,
                                          size_t error_size, void *user);
#endif /* OBX_NO_JOIN */

/* ---- Your own driver: the outbox's statements -------------------------------------- */

/* Enqueue `count` messages (0..) in a transaction of the program's own
 * driver: *out_sql receives the statements that do exactly what
 * obx_enqueue_batch(store, hdbc, ...) (count 1: obx_enqueue_tx) does on
 * `hdbc`, ordering keys and the envelope included, with their values, in
 * the store's dialect and with `markers` (OBX_SQL_MARKERS_QUESTION or
 * OBX_SQL_MARKERS_DOLLAR). Nothing is sent to the database for them: run
 * them in order on your connection inside your transaction (not in
 * autocommit: the messages would commit apart from your work), check the
 * row of any statement with check_column (obx_sql_check), then commit or
 * roll back yourself, and obx_sql_free them. After the commit,
 * obx_notify(store) wakes a dispatcher (in this process or through
 * wake_path) as after any _tx call. The ids are minted now: out_ids (if
 * not NULL) receives count ids, and obx_sql_id gives them too. Isolation
 * and max_pending as obx_enqueue_tx (max_pending counts on the store's
 * own connection). Run the statements of one call once: their ids are
 * unique.
 * Returns OBX_OK; the argument errors of obx_enqueue_batch ("obx_enqueue_sql:
 * messages[2].topic" and so on, before anything is made);
 * OBX_ERR_INVALID_ARG naming out_sql (NULL) or markers (not one of the
 * two); OBX_ERR_STATE (store not open); OBX_ERR_FULL (max_pending);
 * OBX_ERR_NO_MEMORY; OBX_ERR_DB(_TRANSIENT) only from max_pending's count.
 * On error *out_sql and out_ids are left as they were. */
OBX_API obx_result obx_enqueue_sql(obx_store *store, const obx_new_message *messages, int count,
                                   int markers, obx_sql **out_sql, char (*out_ids)[37]);

/* ---- The conveniences for three drivers --------------------------------------------
 * Each is compiled only where the program included its driver's header
 * before obx.h (<sqlite3.h>, <libpq-fe.h>, MariaDB Connector/C's
 * <mysql.h>), as a static inline function built on obx_enqueue_sql: the
 * header adds no link dependency to anyone else. Each runs the statements
 * on the given connection, inside the transaction the program opened on it
 * (it neither begins, commits nor rolls back), and writes out_ids (if not
 * NULL, count ids) only on success. Commit, then obx_notify(store).
 * Returns OBX_OK; OBX_ERR_INVALID_ARG for a NULL store or connection
 * (named: "obx_enqueue_sqlite3: db") and every error of obx_enqueue_sql,
 * all before anything is sent; OBX_ERR_STATE naming the connection when it
 * is not inside a transaction (or, libpq, in a failed one), before
 * anything is sent, and "hdbc: isolation" as obx_enqueue_tx; OBX_ERR_DB /
 * OBX_ERR_DB_TRANSIENT with the driver's message and codes: roll back
 * (after OBX_ERR_DB_TRANSIENT: retry the whole transaction). */
#define OBX__SQL_ENQUEUE(fn, conn, markers, run)                                                       \
    obx_sql *sql = NULL;                                                                              \
    obx_result r;                                                                                     \
    int i;                                                                                            \
    if (!store) return OBX_ERR_INVALID_ARG;                                                           \
    if (!(conn)) return obx_sql_error(store, OBX_ERR_INVALID_ARG, fn ": " #conn, NULL, 0, #conn " must not be NULL"); \
    r = obx_enqueue_sql(store, messages, count, markers, &sql, NULL);                                 \
    if (r == OBX_OK) r = run(store, fn, conn, sql, NULL);                                             \
    for (i = 0; r == OBX_OK && out_ids && i < count; i++) {                                           \
        const char *id = obx_sql_id(sql, i);                                                          \
        if (id) memcpy(out_ids[i], id, 37);                                                           \
    }                                                                                                 \
    obx_sql_free(sql);                                                                                \
    return r;

#ifdef OBX__SQLITE3_RUN
/* obx_enqueue_batch for the sqlite3 C API: in the transaction open on `db`
 * (BEGIN IMMEDIATE: a deferred one may meet SQLITE_BUSY at its first
 * write). Results: see above; the native code is SQLite's result code. */
static inline obx_result obx_enqueue_sqlite3(obx_store *store, sqlite3 *db, const obx_new_message *messages,
                                             int count, char (*out_ids)[37]) {
    OBX__SQL_ENQUEUE("obx_enqueue_sqlite3", db, OBX_SQL_MARKERS_QUESTION, obx__sql_sqlite3)
}
#endif

#ifdef OBX__PQ_RUN
/* obx_enqueue_batch for libpq: in the transaction open on `conn` (after
 * BEGIN; READ COMMITTED for keyed messages, as obx_enqueue_tx). Results:
 * see above; the SQLSTATE is the server's. */
static inline obx_result obx_enqueue_pq(obx_store *store, PGconn *conn, const obx_new_message *messages, int count,
                                        char (*out_ids)[37]) {
    OBX__SQL_ENQUEUE("obx_enqueue_pq", conn, OBX_SQL_MARKERS_DOLLAR, obx__sql_pq)
}
#endif

#ifdef OBX__MYSQL_RUN
/* obx_enqueue_batch for MariaDB Connector/C: in the transaction open on
 * `mysql` (START TRANSACTION, or autocommit off; the connection's
 * character set utf8mb4; READ COMMITTED for keyed messages, refused
 * otherwise as by obx_enqueue_tx). Results: see above; the native code is
 * the server's error number. */
static inline obx_result obx_enqueue_mysql(obx_store *store, MYSQL *mysql, const obx_new_message *messages,
                                           int count, char (*out_ids)[37]) {
    OBX__SQL_ENQUEUE("obx_enqueue_mysql", mysql, OBX_SQL_MARKERS_QUESTION, obx__sql_mysql)
}
#endif

/* >>common-begin head */
#ifdef __cplusplus
}
#endif
#endif /* OBX_H_INCLUDED */

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#if defined(OBX_IMPLEMENTATION) && !defined(OBX__IMPLEMENTED)
#define OBX__IMPLEMENTED

/* MAINTAINER NOTES
 * Tools and callbacks go through the library. The operator's tool
 * never re-implements a library operation in its own SQL: every change it
 * makes (dead replay and purge, reap, cleanup, deploy) is a call of this
 * API, so what a statement here promises (a replay resets the start count;
 * a purge runs in bounded batches; the table's column types) holds for the
 * tool too, and a fix here reaches it. A tool's own SQL only reads what the
 * API does not offer (counts per topic, listings). An operation a tool
 * needs and the API lacks is added here first. Likewise a callback
 * contract (discovery, handlers) has one protocol, documented where its
 * type is declared and followed by the examples. Checked by
 * the tool's own tests (the one named NO-DML fails on any DML or DDL in
 * its source) and
 * tests/example_protocols.c (EXAMPLE-DISCOVERY: the multi-tenant example's
 * discovery, run through a provider, serves 300 tenants).
 *
 * Statements declare their parameters: count and kinds once, in
 * obx__stmt_args_rows beside the statements; every dialect's text must take
 * exactly those (CORE-STMT-PARAMS; debug builds check at open and bind).
 *
 * One place decides how a unit of work runs: obx__unit_mode (see "odbc:
 * transactions and units of work"); begin, commit and rollback assert it
 * (CORE-UNIT-MODE). */

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
/* Windows' ODBC headers need <windows.h> first (lean: no winsock, no GDI). */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#define OBX__LEAN_HERE
#endif
#include <windows.h>
#ifdef OBX__LEAN_HERE
#undef WIN32_LEAN_AND_MEAN
#undef OBX__LEAN_HERE
#endif
#include <process.h> /* _getpid, _beginthreadex */
#else
#include <unistd.h> /* getpid */
#endif
#ifdef OBX_SQLITE3_API
#include <sqlite3.h>
#if !defined(SQL_NULL_DATA) /* <sql.h> not included (nor by the other header): the few ODBC
                               types and constants the engine names, as ODBC defines them */
typedef unsigned char SQLCHAR;
typedef short SQLSMALLINT;
typedef unsigned short SQLUSMALLINT;
typedef int SQLINTEGER;
typedef unsigned int SQLUINTEGER;
typedef long SQLLEN;
typedef unsigned long SQLULEN;
typedef long long SQLBIGINT;
typedef short SQLRETURN;
typedef void *SQLPOINTER;
typedef void *SQLHANDLE;
typedef SQLHANDLE SQLHENV;
typedef SQLHANDLE SQLHDBC;
typedef SQLHANDLE SQLHSTMT;
#define SQL_NULL_DATA (-1)
#define SQL_C_CHAR 1
#define SQL_C_BINARY (-2)
#define SQL_C_SBIGINT (-25)
#define SQL_VARCHAR 12
#define SQL_LONGVARCHAR (-1)
#define SQL_WVARCHAR (-9)
#define SQL_WLONGVARCHAR (-10)
#define SQL_BIGINT (-5)
#define SQL_VARBINARY (-3)
#define SQL_LONGVARBINARY (-4)
#define SQL_COMMIT 0
#define SQL_ROLLBACK 1
#define SQL_TXN_READ_COMMITTED 2
#endif
#else
#include <sql.h>
#include <sqlext.h>
#endif
#if !defined(OBX_NO_THREADS) && !defined(_WIN32)
#include <pthread.h>
#endif

/* The feature set of this file is fixed by now (see "features" at the top):
 * POSIX 2008 must be in it. glibc says so itself (__USE_XOPEN2K8); elsewhere
 * CLOCK_MONOTONIC is the sign. */
#if !(defined(OBX_NO_POSIX_CLOCK) && defined(OBX_NO_THREADS) && defined(OBX_NO_WAKE_SOCKET)) && !defined(_WIN32) && \
    ((defined(__GLIBC__) && !defined(__USE_XOPEN2K8)) || (!defined(OBX_NO_POSIX_CLOCK) && !defined(CLOCK_MONOTONIC)))
#error "obx: the implementation needs POSIX 2008, which this file's feature set hides (strict ISO C, and a system header included before obx.h, or a _POSIX_C_SOURCE below 200809L): in the file that defines OBX_IMPLEMENTATION, include obx.h (with that define) before any other header, or compile that file with -D_POSIX_C_SOURCE=200809L"
#endif

/* Portable fallbacks, for systems without a call used by default: taken on
 * Apple, forced anywhere by OBX_PORTABLE_FALLBACKS (so Linux tests them).
 * Condition variables wait on CLOCK_REALTIME deadlines (no
 * pthread_condattr_setclock); the random seed comes from arc4random_buf, not
 * /dev/urandom. Each is compiled out where unused. */
#if defined(OBX_PORTABLE_FALLBACKS) || defined(__APPLE__)
#define OBX__FALLBACKS 1
#else
#define OBX__FALLBACKS 0
#endif

/* arc4random_buf (the fallback's seed): stdlib.h declares it only with the
 * system's extensions on (glibc 2.36+: _DEFAULT_SOURCE; macOS: no
 * _POSIX_C_SOURCE, or _DARWIN_C_SOURCE); else declared here, and maybe by
 * both headers (harmless: the same prototype). */
#if OBX__FALLBACKS && ((defined(__GLIBC__) && !defined(__USE_MISC)) || \
                       (defined(__APPLE__) && defined(_POSIX_C_SOURCE) && !defined(_DARWIN_C_SOURCE)))
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wredundant-decls"
#endif
#ifdef __cplusplus
extern "C"
#endif
void arc4random_buf(void *buf, size_t n);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/* Core functions are static; some are used by only one of the two headers,
 * so tell the compiler that an unused one is not a mistake. */
#if defined(__GNUC__) || defined(__clang__)
#define OBX__PRIVATE static __attribute__((unused))
#define OBX__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define OBX__PRIVATE static
#define OBX__PRINTF(f, a)
#endif

/* Threads: pthreads, or on Windows (MSVC and mingw-w64 alike, no
 * winpthreads) a thin layer over Win32 in the same shape: SRW locks,
 * condition variables, _beginthreadex, one-time initialization. Results as
 * pthreads gives them where the code looks (0 = done). A condition's
 * deadline (obx__deadline) is a timespec on POSIX, GetTickCount64()
 * milliseconds on Windows; obx__cond_init and obx__cond_deadline are below,
 * with the clocks. */
#ifndef OBX_NO_THREADS
#ifdef _WIN32
typedef SRWLOCK obx__mutex_t;
typedef CONDITION_VARIABLE obx__cond_t;
typedef INIT_ONCE obx__once_t;
typedef ULONGLONG obx__deadline;
typedef struct obx__thread_t {
    HANDLE handle;
    void *(*fn)(void *);
    void *arg;
} obx__thread_t;
#define OBX__MUTEX_INIT SRWLOCK_INIT
#define OBX__ONCE_INIT INIT_ONCE_STATIC_INIT
#define obx__mutex_init(m) InitializeSRWLock(m)
#define obx__mutex_destroy(m) ((void)(m))
#define obx__mutex_lock(m) AcquireSRWLockExclusive(m)
#define obx__mutex_unlock(m) ReleaseSRWLockExclusive(m)
#define obx__mutex_trylock(m) (TryAcquireSRWLockExclusive(m) ? 0 : 1)
#define obx__cond_destroy(c) ((void)(c))
#define obx__cond_signal(c) WakeConditionVariable(c)
#define obx__cond_broadcast(c) WakeAllConditionVariable(c)
#define obx__cond_wait(c, m) ((void)SleepConditionVariableSRW(c, m, INFINITE, 0))
/* 0 when signalled (or woken spuriously: callers loop), else timed out. */
OBX__PRIVATE int obx__cond_timedwait(obx__cond_t *c, obx__mutex_t *m, const obx__deadline *d) {
    ULONGLONG now = GetTickCount64();
    return now >= *d || !SleepConditionVariableSRW(c, m, (DWORD)(*d - now), 0);
}
OBX__PRIVATE unsigned __stdcall obx__thread_main(void *arg) {
    obx__thread_t *t = (obx__thread_t *)arg; /* lives in the caller's object until joined */
    t->fn(t->arg);
    return 0;
}
OBX__PRIVATE int obx__thread_create(obx__thread_t *t, void *(*fn)(void *), void *arg) {
    uintptr_t h;
    t->fn = fn;
    t->arg = arg;
    h = _beginthreadex(NULL, 0, obx__thread_main, t, 0, NULL);
    t->handle = (HANDLE)h;
    return h ? 0 : 1;
}
OBX__PRIVATE void obx__thread_join(obx__thread_t *t) {
    WaitForSingleObject(t->handle, INFINITE);
    CloseHandle(t->handle);
}
typedef struct obx__once_fn { void (*fn)(void); } obx__once_fn;
OBX__PRIVATE BOOL CALLBACK obx__once_main(PINIT_ONCE once, PVOID box, PVOID *ctx) {
    (void)once;
    (void)ctx;
    ((obx__once_fn *)box)->fn();
    return TRUE;
}
OBX__PRIVATE void obx__once(obx__once_t *once, void (*fn)(void)) {
    obx__once_fn box;
    box.fn = fn;
    InitOnceExecuteOnce(once, obx__once_main, &box, NULL);
}
#else
typedef pthread_mutex_t obx__mutex_t;
typedef pthread_cond_t obx__cond_t;
typedef pthread_once_t obx__once_t;
typedef pthread_t obx__thread_t;
typedef struct timespec obx__deadline;
#define OBX__MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define OBX__ONCE_INIT PTHREAD_ONCE_INIT
#define obx__mutex_init(m) pthread_mutex_init(m, NULL)
#define obx__mutex_destroy(m) pthread_mutex_destroy(m)
#define obx__mutex_lock(m) pthread_mutex_lock(m)
#define obx__mutex_unlock(m) pthread_mutex_unlock(m)
#define obx__mutex_trylock(m) pthread_mutex_trylock(m)
#define obx__cond_destroy(c) pthread_cond_destroy(c)
#define obx__cond_signal(c) pthread_cond_signal(c)
#define obx__cond_broadcast(c) pthread_cond_broadcast(c)
#define obx__cond_wait(c, m) pthread_cond_wait(c, m)
#define obx__cond_timedwait(c, m, d) pthread_cond_timedwait(c, m, d)
#define obx__thread_create(t, fn, arg) pthread_create(t, NULL, fn, arg)
#define obx__thread_join(t) pthread_join(*(t), NULL)
#define obx__once(o, fn) pthread_once(o, fn)
#endif
#endif

/* rand_s (Windows' seed: the system's random source, in the C runtime
 * since XP) is declared by <stdlib.h> only under _CRT_RAND_S, which had to
 * come before it; else declared here. */
#if defined(_WIN32) && !defined(_CRT_RAND_S)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wredundant-decls"
#endif
#ifdef __cplusplus
extern "C"
#endif
int __cdecl rand_s(unsigned int *value);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/* One definition for the whole program, whichever file comes first: weak
 * where the compiler has it (else one per file). */
#if defined(__GNUC__) || defined(__clang__)
#define OBX__SHARED __attribute__((weak))
#else
#define OBX__SHARED static
#endif

/* >>common-end head */

/* The lock around connecting (see obx__driver_connect), shared by obx.h and
 * ibx.h in one program: in one file through the guard, in two through a
 * weak symbol that the linker makes one (OBX__SHARED, above). */
#if !defined(OBX_NO_THREADS) && !defined(OBX_IBX_CONNECT_LOCK_DEFINED)
#define OBX_IBX_CONNECT_LOCK_DEFINED
OBX__SHARED obx__mutex_t obx_ibx_connect_lock = OBX__MUTEX_INIT;
#endif
#define OBX__CONNECT_LOCK obx_ibx_connect_lock

/* >>common-begin core */



#ifndef OBX_ASSERT
#if defined(OBX_TERSE_MESSAGES) && !defined(NDEBUG)
/* Terse: the line names the invariant; the expression's text, the
 * function's name and the file's path are left out. */
#define OBX_ASSERT(c) ((c) ? (void)0 : obx__assert_failed(__LINE__))
OBX__PRIVATE void obx__assert_failed(int line) {
    fprintf(stderr, "obx.h:%d: internal assertion failed\n", line);
    abort();
}
#else
#include <assert.h>
#define OBX_ASSERT(c) assert(c)
#endif
#endif

/* A wrong unixodbc.h (copied from another architecture) or
 * BUILD_LEGACY_64_BIT_MODE silently breaks the driver ABI: stop the build. */
typedef char obx__check_sqlbigint[(sizeof(SQLBIGINT) == 8) ? 1 : -1];
typedef char obx__check_sqllen[(sizeof(SQLLEN) == sizeof(void *)) ? 1 : -1];

/* ODBC takes non-const SQLCHAR* even for input strings. */
#define OBX__SQLTEXT(s) ((SQLCHAR *)(uintptr_t)(const void *)(s))

/* >> hooks ------------------------------------------------------------------ */

/* The resolved hooks of one store: every member set. */
typedef struct obx__hooks {
    obx_allocator alloc;
    obx_clock clock;
    obx_logger log;
    obx_random rng;
    uint64_t rng_state; /* state of the default random source */
    int env_level_bad;  /* OBX_LOG_LEVEL named no level (said once per store or provider) */
} obx__hooks;

static void *obx__default_alloc(size_t size, void *user) { (void)user; return malloc(size); }
static void *obx__default_realloc(void *ptr, size_t size, void *user) { (void)user; return realloc(ptr, size); }
static void obx__default_free(void *ptr, void *user) { (void)user; free(ptr); }

/* Waits are cut into slices of at most an hour: a 32-bit time_t (armhf)
 * cannot hold a deadline near INT64_MAX ms ("never again"), and one that
 * wrapped would be in the past: a wait that never waits. */
#define OBX__WAIT_SLICE_MAX_MS 3600000
#if defined(OBX_NO_POSIX_CLOCK)
static int64_t obx__default_now_utc_ms(void *user) { (void)user; return (int64_t)time(NULL) * 1000; }
static int64_t obx__default_monotonic_ms(void *user) { (void)user; return (int64_t)time(NULL) * 1000; }
static void obx__default_sleep_ms(int64_t ms, void *user) { (void)ms; (void)user; }
#elif defined(_WIN32)
/* Windows: the system time (100 ns since 1601) and the performance counter. */
static int64_t obx__default_now_utc_ms(void *user) {
    FILETIME ft;
    ULARGE_INTEGER t;
    (void)user;
    GetSystemTimeAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    return (int64_t)(t.QuadPart / 10000) - INT64_C(11644473600000);
}
static int64_t obx__mono_us_now(void) {
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (int64_t)(c.QuadPart / f.QuadPart * 1000000 + c.QuadPart % f.QuadPart * 1000000 / f.QuadPart);
}
static int64_t obx__default_monotonic_ms(void *user) { (void)user; return obx__mono_us_now() / 1000; }
static void obx__default_sleep_ms(int64_t ms, void *user) {
    (void)user;
    while (ms > 0) {
        int64_t slice = ms < OBX__WAIT_SLICE_MAX_MS ? ms : OBX__WAIT_SLICE_MAX_MS;
        Sleep((DWORD)slice);
        ms -= slice;
    }
}
#else
static int64_t obx__clock_ms(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}
static int64_t obx__mono_us_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000 + (int64_t)(ts.tv_nsec / 1000);
}
static int64_t obx__default_now_utc_ms(void *user) { (void)user; return obx__clock_ms(CLOCK_REALTIME); }
static int64_t obx__default_monotonic_ms(void *user) { (void)user; return obx__clock_ms(CLOCK_MONOTONIC); }
static void obx__default_sleep_ms(int64_t ms, void *user) {
    (void)user;
    while (ms > 0) {
        int64_t slice = ms < OBX__WAIT_SLICE_MAX_MS ? ms : OBX__WAIT_SLICE_MAX_MS;
        struct timespec ts;
        ts.tv_sec = (time_t)(slice / 1000);
        ts.tv_nsec = (long)(slice % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) != 0) { /* interrupted by a signal: sleep the rest */ }
        ms -= slice;
    }
}
#endif

#if !defined(OBX_NO_THREADS) && defined(_WIN32)
/* Windows: deadlines on GetTickCount64 (monotonic; ~16 ms steps, fine for
 * slices of 100 ms and more). */
OBX__PRIVATE void obx__cond_init(obx__cond_t *c) { InitializeConditionVariable(c); }
OBX__PRIVATE void obx__cond_deadline(obx__deadline *d, int64_t ms) { *d = GetTickCount64() + (ULONGLONG)ms; }
#elif !defined(OBX_NO_THREADS)
/* Condition variables with deadlines `ms` from now. By default they wait on
 * CLOCK_MONOTONIC (pthread_condattr_setclock: immune to wall-clock steps).
 * The fallback (OBX__FALLBACKS: macOS has no such call) waits on
 * CLOCK_REALTIME: a wall-clock step then lengthens or shortens one wait, and
 * every wait is a short slice (100 ms renewer, 250 ms with a stop flag, at
 * most an hour). */
OBX__PRIVATE void obx__cond_init(obx__cond_t *c) {
#if OBX__FALLBACKS
    pthread_cond_init(c, NULL);
#else
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
#endif
}

OBX__PRIVATE void obx__cond_deadline(obx__deadline *ts, int64_t ms) {
    clock_gettime(OBX__FALLBACKS ? CLOCK_REALTIME : CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}
#endif

static const char *obx__level_name(obx_log_level level) {
    switch (level) {
    case OBX_LOG_DEBUG: return "DEBUG";
    case OBX_LOG_INFO: return "INFO";
    case OBX_LOG_WARN: return "WARN";
    case OBX_LOG_ERROR: return "ERROR";
    case OBX_LOG_OFF: break;
    }
    return "?";
}

/* "2026-11-27T10:47:19.123Z" for Unix time `ms` (UTC; years 0..9999): the
 * civil date from the day count, without gmtime (not in C99, not reentrant). */
OBX__PRIVATE void obx__utc_text(int64_t ms, char out[32]) {
    /* 64-bit only where a value needs it: a 32-bit target divides those by
     * a library call. doe and rem (and all that comes of them) fit in 32. */
    int64_t days = ms / 86400000, era, y;
    int32_t rem = (int32_t)(ms % 86400000), doe, yoe, doy, mp, m, d;
    if (rem < 0) { rem += 86400000; days--; }
    days += 719468; /* days from 0000-03-01 to 1970-01-01: years start in March */
    era = (days >= 0 ? days : days - 146096) / 146097;
    doe = (int32_t)(days - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    d = doy - (153 * mp + 2) / 5 + 1;
    m = mp < 10 ? mp + 3 : mp - 9;
    y = yoe + era * 400 + (m <= 2);
    {   /* digit by digit: every field has its width, whatever the compiler thinks int may hold */
        static const struct { char sep; int width; } f[7] = {{0, 4}, {'-', 2}, {'-', 2}, {'T', 2}, {':', 2},
                                                              {':', 2}, {'.', 3}};
        int32_t v[7];
        size_t n = 0;
        int i, k;
        v[0] = y < 0 ? 0 : y > 9999 ? 9999 : (int32_t)y;
        v[1] = m, v[2] = d, v[3] = rem / 3600000, v[4] = rem / 60000 % 60, v[5] = rem / 1000 % 60, v[6] = rem % 1000;
        for (i = 0; i < 7; i++) {
            if (f[i].sep) out[n++] = f[i].sep;
            for (k = f[i].width - 1; k >= 0; k--, v[i] /= 10) out[n + (size_t)k] = (char)('0' + v[i] % 10);
            n += (size_t)f[i].width;
        }
        out[n++] = 'Z';
        out[n] = '\0';
    }
}

static long obx__pid(void) {
#ifdef _WIN32
    return (long)_getpid();
#else
    return (long)getpid();
#endif
}

static void obx__default_log(obx_log_level level, const char *store_id, const char *message,
                             void *user) {
    char when[32];
    (void)user;
    obx__utc_text(obx__default_now_utc_ms(NULL), when);
    fprintf(stderr, "%s obx[%ld] %-5s [%s] %s\n", when, obx__pid(), obx__level_name(level), store_id, message);
}

/* The level OBX_LOG_LEVEL names (any case), 0 when it is unset, -1 when it
 * names none. */
OBX__PRIVATE int obx__env_level(void) {
    static const struct { const char *name; obx_log_level level; } levels[] = {
        {"debug", OBX_LOG_DEBUG}, {"info", OBX_LOG_INFO}, {"warn", OBX_LOG_WARN},
        {"warning", OBX_LOG_WARN}, {"error", OBX_LOG_ERROR}, {"off", OBX_LOG_OFF}};
    const char *v = getenv("OBX_LOG_LEVEL");
    size_t i, k;
    if (!v || !*v) return 0;
    for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        const char *n = levels[i].name;
        for (k = 0; n[k] && v[k] && (v[k] | 0x20) == n[k]; k++) {}
        if (!n[k] && !v[k]) return (int)levels[i].level;
    }
    return -1;
}

/* splitmix64: tiny, fast, and good enough for jitter and UUID randomness.
 * The default source is shared by every thread that uses one set of hooks
 * (the renewal thread's retry jitter, a handler's new ids): the state
 * takes one atomic step per draw, so two draws at once never race. */
static uint64_t obx__default_random(void *user) {
    uint64_t z;
#if defined(__GNUC__) || defined(__clang__)
    z = __atomic_add_fetch((uint64_t *)user, 0x9E3779B97F4A7C15ULL, __ATOMIC_RELAXED);
#elif !defined(OBX_NO_THREADS)
    static obx__mutex_t lock = OBX__MUTEX_INIT;
    obx__mutex_lock(&lock);
    z = (*(uint64_t *)user += 0x9E3779B97F4A7C15ULL);
    obx__mutex_unlock(&lock);
#else
    z = (*(uint64_t *)user += 0x9E3779B97F4A7C15ULL);
#endif
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t obx__random_seed(const void *salt) {
    uint64_t seed = 0;
#if defined(_WIN32)
    unsigned int part[2];
    if (rand_s(&part[0]) == 0 && rand_s(&part[1]) == 0) seed = (uint64_t)part[0] << 32 | part[1];
#elif OBX__FALLBACKS
    arc4random_buf(&seed, sizeof seed); /* never fails, needs no device file */
#else
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&seed, sizeof seed, 1, f) != 1) seed = 0;
        fclose(f);
    }
#endif
    /* No /dev/urandom (chroot, firmware): mix time and an address, so two
     * processes started in the same second still differ. */
    if (seed == 0) seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)salt << 16) ^ (uint64_t)clock();
    return seed;
}

/* Fill `h` from the caller's hooks (may be NULL), defaulting what is unset.
 * `h` must not move afterwards: the default random source points into it. */
/* The hooks in force: each one given, or its default. An allocator is
 * given whole or not at all: a half-set one is refused (OBX_ERR_INVALID_ARG)
 * rather than silently mixed with malloc. */
OBX__PRIVATE obx_result obx__hooks_resolve(obx__hooks *h, const obx_hooks *given) {
    obx_hooks none;
    const obx_allocator *a;
    memset(&none, 0, sizeof none);
    if (!given) given = &none;
    a = &given->allocator;
    if (a->alloc && a->realloc && a->free) {
        h->alloc = given->allocator;
    } else {
        h->alloc.alloc = obx__default_alloc;
        h->alloc.realloc = obx__default_realloc;
        h->alloc.free = obx__default_free;
        h->alloc.user = NULL;
    }
    h->clock = given->clock;
    if (!h->clock.now_utc_ms) h->clock.now_utc_ms = obx__default_now_utc_ms;
    if (!h->clock.monotonic_ms) h->clock.monotonic_ms = obx__default_monotonic_ms;
    if (!h->clock.sleep_ms) h->clock.sleep_ms = obx__default_sleep_ms;
    h->log = given->logger;
    if (!h->log.log) { h->log.log = obx__default_log; h->log.user = NULL; }
    if (h->log.min_level == 0) {
        int env = obx__env_level();
        h->log.min_level = env > 0 ? (obx_log_level)env : OBX_LOG_INFO;
        h->env_level_bad = env < 0;
    }
    h->rng = given->random;
    if (!h->rng.next_u64) {
        h->rng_state = obx__random_seed(h);
        h->rng.next_u64 = obx__default_random;
        h->rng.user = &h->rng_state;
    }
    return (a->alloc || a->realloc || a->free) && !(a->alloc && a->realloc && a->free)
               ? OBX_ERR_INVALID_ARG : OBX_OK;
}

OBX__PRIVATE void *obx__alloc(const obx__hooks *h, size_t size) {
    return h->alloc.alloc(size ? size : 1, h->alloc.user);
}
OBX__PRIVATE void *obx__realloc(const obx__hooks *h, void *ptr, size_t size) {
    return h->alloc.realloc(ptr, size ? size : 1, h->alloc.user);
}
OBX__PRIVATE void obx__free(const obx__hooks *h, void *ptr) {
    if (ptr) h->alloc.free(ptr, h->alloc.user);
}
OBX__PRIVATE char *obx__strdup(const obx__hooks *h, const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = (char *)obx__alloc(h, n);
    if (copy) memcpy(copy, s, n);
    return copy;
}
OBX__PRIVATE int64_t obx__now_ms(const obx__hooks *h) { return h->clock.now_utc_ms(h->clock.user); }
OBX__PRIVATE int64_t obx__mono_ms(const obx__hooks *h) { return h->clock.monotonic_ms(h->clock.user); }
/* Microseconds for handler durations: the default clock's own resolution,
 * a clock hook's milliseconds otherwise. */
OBX__PRIVATE int64_t obx__mono_us(const obx__hooks *h) {
#ifndef OBX_NO_POSIX_CLOCK
    if (h->clock.monotonic_ms == obx__default_monotonic_ms) return obx__mono_us_now();
#endif
    return obx__mono_ms(h) * 1000;
}
OBX__PRIVATE void obx__sleep_ms(const obx__hooks *h, int64_t ms) { h->clock.sleep_ms(ms, h->clock.user); }
OBX__PRIVATE uint64_t obx__random(const obx__hooks *h) { return h->rng.next_u64(h->rng.user); }

OBX__PRIVATE int obx__log_enabled(const obx__hooks *h, obx_log_level level) {
    return level >= h->log.min_level && h->log.min_level != OBX_LOG_OFF;
}

/* A log line stays one line: a control character in the text (a handler's
 * error, a driver message, a name) becomes '?', so nothing can forge a line. */
OBX__PRIVATE void obx__unforgeable(char *line) {
    for (; *line; line++)
        if ((unsigned char)*line < 0x20 || *line == 0x7F) *line = '?';
}

OBX__PRINTF(4, 5)

OBX__PRIVATE void obx__log(const obx__hooks *h, obx_log_level level, const char *store_id,
                           const char *fmt, ...) {
    char line[768];
    va_list ap;
    if (!obx__log_enabled(h, level)) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    obx__unforgeable(line);
    h->log.log(level, store_id ? store_id : "-", line, h->log.user);
}

/* Copy with truncation; always NUL-terminates a non-empty destination. */
/* strnlen() is POSIX 2008, not C99. */
OBX__PRIVATE size_t obx__strnlen(const char *s, size_t cap) {
    const char *nul = (const char *)memchr(s, 0, cap);
    return nul ? (size_t)(nul - s) : cap;
}

OBX__PRIVATE void obx__copy(char *dst, size_t cap, const char *src) {
    size_t n;
    if (cap == 0) return;
    n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A value for a key=value field of a log line: as it is when it is plain
 * (letters, digits, . _ - : / @ +, UTF-8), else in double quotes with " and \
 * escaped and control bytes as \n, \r, \t or \xHH, so that a parser finds the
 * field's end whatever a topic or an id holds. Cut at `cap`, ending in "..". */
#define OBX__KV_CAP 160
OBX__PRIVATE const char *obx__kv(char out[OBX__KV_CAP], const char *value) {
    static const char plain[] = "._-:/@+";
    const unsigned char *v = (const unsigned char *)(value ? value : "");
    size_t n = 0, i;
    int quote = !*v;
    for (i = 0; v[i] && !quote; i++)
        quote = !(v[i] >= 0x80 || (v[i] >= '0' && v[i] <= '9') || ((v[i] | 0x20) >= 'a' && (v[i] | 0x20) <= 'z') ||
                  strchr(plain, v[i]));
    if (!quote) {
        obx__copy(out, OBX__KV_CAP, (const char *)v);
        return out;
    }
    out[n++] = '"';
    for (i = 0; v[i] && n < OBX__KV_CAP - 8; i++) {
        if (v[i] == '"' || v[i] == '\\') { out[n++] = '\\'; out[n++] = (char)v[i]; }
        else if (v[i] == '\n') { out[n++] = '\\'; out[n++] = 'n'; }
        else if (v[i] == '\r') { out[n++] = '\\'; out[n++] = 'r'; }
        else if (v[i] == '\t') { out[n++] = '\\'; out[n++] = 't'; }
        else if (v[i] < 0x20 || v[i] == 0x7F) n += (size_t)snprintf(out + n, 5, "\\x%02X", v[i]);
        else out[n++] = (char)v[i];
    }
    if (v[i]) { out[n++] = '.'; out[n++] = '.'; }
    out[n++] = '"';
    out[n] = '\0';
    return out;
}

/* >> results and errors ------------------------------------------------------ */

OBX__PRIVATE const char *obx__result_str(obx_result r) {
    switch (r) {
    case OBX_OK: return "OBX_OK";
    case OBX_EMPTY: return "OBX_EMPTY";
    case OBX_ERR_INVALID_ARG: return "OBX_ERR_INVALID_ARG";
    case OBX_ERR_OUT_OF_RANGE: return "OBX_ERR_OUT_OF_RANGE";
    case OBX_ERR_NOT_FOUND: return "OBX_ERR_NOT_FOUND";
    case OBX_ERR_NO_MEMORY: return "OBX_ERR_NO_MEMORY";
    case OBX_ERR_DB: return "OBX_ERR_DB";
    case OBX_ERR_DB_TRANSIENT: return "OBX_ERR_DB_TRANSIENT";
    case OBX_ERR_STATE: return "OBX_ERR_STATE";
    case OBX_ERR_UNSUPPORTED: return "OBX_ERR_UNSUPPORTED";
    case OBX_ERR_FULL: return "OBX_ERR_FULL";
    }
    return "OBX_(unknown)";
}

OBX__PRIVATE void obx__error_clear(obx_error *e) {
    memset(e, 0, sizeof *e);
}

/* OBX_TERSE_MESSAGES (a gateway short of flash): an error or log text keeps
 * what names the failure - the call and argument (`where`), the cause in a
 * word or two, the numbers, the database's own diagnostic - and drops the
 * sentence that explains it, written OBX__WHY("...") at the call site. The
 * default build's texts stay as they are. */
#ifdef OBX_TERSE_MESSAGES
#define OBX__WHY(text) ""
#define OBX__WHY_ARG(arg)
#else
#define OBX__WHY(text) text
#define OBX__WHY_ARG(arg) , arg
#endif

/* Record an error that did not come from the driver; returns `r`. */
OBX__PRINTF(4, 5)
OBX__PRIVATE obx_result obx__fail(obx_error *e, obx_result r, const char *where, const char *fmt,
                                  ...) {
    va_list ap;
    obx__error_clear(e);
    e->result = r;
    obx__copy(e->where, sizeof e->where, where);
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return r;
}

/* An argument out of range: `where` "<fn>: <name>", the message "<name>
 * must be <rule>, got <value>"; one format for several checks. */
OBX__PRIVATE obx_result obx__range_fail(obx_error *e, const char *fn, const char *name,
                                        const char *rule, long long value) {
    char where[96];
    snprintf(where, sizeof where, "%s: %s", fn, name);
    return obx__fail(e, OBX_ERR_OUT_OF_RANGE, where, "%s must be %s, got %lld", name, rule, value);
}

/* >> pure functions: backoff -------------------------------------------------- */

OBX__PRIVATE int64_t obx__backoff_default_ms(int attempt) {
    if (attempt < 0) attempt = 0;
    if (attempt >= 6) return 60000; /* 2^6 s already exceeds the 60 s cap */
    return ((int64_t)1 << attempt) * 1000;
}

OBX__PRIVATE int64_t obx__backoff_jitter_ms(const obx_backoff_policy *policy, int attempt,
                                            uint64_t random_bits) {
    int64_t base = 200, max = 60000, delay;
    double jmin = 0.5, jmax = 1.5, u, result;
    int i;
    if (policy) {
        if (policy->base_ms > 0) base = policy->base_ms;
        if (policy->max_ms > 0) max = policy->max_ms;
        if (policy->jitter_min != 0.0 || policy->jitter_max != 0.0) {
            jmin = policy->jitter_min;
            jmax = policy->jitter_max;
        }
    }
    if (attempt < 1) attempt = 1;
    delay = base < max ? base : max;
    for (i = 1; i < attempt && delay < max; i++) delay = delay > max / 2 ? max : delay * 2;
    u = (double)(random_bits >> 11) * (1.0 / 9007199254740992.0); /* 2^-53: u in [0,1) */
    result = (double)delay * (jmin + (jmax - jmin) * u);
    if (!(result >= 0.0)) return 0; /* negative, or NaN from non-finite factors */
    if (result > 9.0e18) return INT64_MAX;
    return (int64_t)result;
}

/* >> pure functions: selection ------------------------------------------------ */

OBX__PRIVATE void obx__selector_init(obx_selector *s, obx_selection kind, int store_count) {
    s->kind = kind;
    s->store_count = store_count > 0 ? store_count : 0;
    s->current = 0;
    s->empty_streak = 0;
}

OBX__PRIVATE int obx__selector_next(const obx_selector *s) {
    return s->store_count > 0 ? s->current : -1;
}

OBX__PRIVATE void obx__selector_report(obx_selector *s, int store, int claimed) {
    if (s->store_count <= 0) return;
    if (claimed > 0) s->empty_streak = 0;
    else if (s->empty_streak < INT_MAX) s->empty_streak++;
    if (store != s->current) return;
    if (s->kind == OBX_SELECT_DRAIN_FIRST && claimed > 0) return;
    s->current = (s->current + 1) % s->store_count;
}

OBX__PRIVATE int obx__selector_all_idle(const obx_selector *s) {
    return s->store_count <= 0 || s->empty_streak >= s->store_count;
}

OBX__PRIVATE void obx__selector_resize(obx_selector *s, int store_count) {
    s->store_count = store_count > 0 ? store_count : 0;
    if (s->current >= s->store_count) s->current = 0;
    s->empty_streak = 0;
}

/* >> pure functions: UUIDs and identifiers ------------------------------------ */

/* UUIDv7 layout used here (RFC 9562 §6.2 method 1): 48-bit Unix ms, version
 * 7, a 42-bit counter split over rand_a (12 bits) and the top of rand_b
 * (30 bits), then 32 random bits. The counter starts at a random value with
 * its top bit clear (room to count) each new millisecond. */
OBX__PRIVATE void obx__uuid_v7(obx_uuid_state *st, int64_t unix_ms, uint64_t random_a,
                               uint64_t random_b, char out[37]) {
    static const char hex[] = "0123456789abcdef";
    const uint64_t counter_limit = (uint64_t)1 << 42;
    unsigned char b[16];
    uint64_t ms, c;
    int i, o = 0;
    if (unix_ms < 0) unix_ms = 0;
    if (unix_ms > st->last_ms) {
        st->last_ms = unix_ms;
        st->counter = random_a & ((counter_limit >> 1) - 1);
    } else if (++st->counter >= counter_limit) {
        st->last_ms++; /* counter exhausted: borrow the next millisecond */
        st->counter = 0;
    }
    ms = (uint64_t)st->last_ms & 0xFFFFFFFFFFFFULL;
    c = st->counter;
    for (i = 0; i < 6; i++) b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | ((c >> 38) & 0x0F));
    b[7] = (unsigned char)(c >> 30);
    b[8] = (unsigned char)(0x80 | ((c >> 24) & 0x3F));
    b[9] = (unsigned char)(c >> 16);
    b[10] = (unsigned char)(c >> 8);
    b[11] = (unsigned char)c;
    for (i = 0; i < 4; i++) b[12 + i] = (unsigned char)(random_b >> (24 - 8 * i));
    for (i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

OBX__PRIVATE void obx__guid_text(const unsigned char b[16], char out[37]) {
    static const char hex[] = "0123456789abcdef";
    int i, o = 0;
    for (i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

OBX__PRIVATE int obx__is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

OBX__PRIVATE int obx__uuid_is_valid(const char *s) {
    int i;
    if (!s) return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!obx__is_hex(s[i])) {
            return 0;
        }
    }
    return s[36] == '\0';
}

#define OBX__IDENTIFIER_MAX 63

OBX__PRIVATE obx_result obx__identifier_check(const char *name) {
    size_t i;
    if (!name || !name[0]) return OBX_ERR_INVALID_ARG;
    for (i = 0; name[i]; i++) {
        char c = name[i];
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        int digit = c >= '0' && c <= '9';
        if (i >= OBX__IDENTIFIER_MAX || !(letter || (digit && i > 0))) return OBX_ERR_INVALID_ARG;
    }
    return OBX_OK;
}

/* >> dialects ------------------------------------------------------------------ */

/* How a failure is classified. All but PERMANENT give OBX_ERR_DB_TRANSIENT;
 * only TRANSIENT (deadlock, serialization, busy, lock wait) is redone at
 * once: a timed-out statement would likely time out again, and after a
 * lost connection the commit's outcome is unknown. */
/* LOST_PERMANENT: the server dropped the connection over a statement that
 * can never succeed (a packet over max_allowed_packet): reconnect, but do
 * not call it transient. */
/* TIMEOUT_RESET: a timeout after which the driver's session is out of step
 * (MariaDB's Connector/ODBC answers the next statement with "malformed
 * packet"): reported as a timeout, and the connection is reopened before
 * the next unit of work. */
/* READ_ONLY: the server takes no writes (a standby, a read-only or
 * non-primary node): nothing was written, so it is not "lost" to the
 * caller, but the connection is reopened before the next unit, so that a
 * multi-host connection string (target_session_attrs=read-write) or a
 * moved address finds the writable server. */
enum { OBX__FAULT_PERMANENT = 0, OBX__FAULT_TRANSIENT = 1, OBX__FAULT_TIMEOUT = 2, OBX__FAULT_LOST = 3,
       OBX__FAULT_LOST_PERMANENT = 4, OBX__FAULT_TIMEOUT_RESET = 5, OBX__FAULT_READ_ONLY = 6 };

typedef struct obx__native_fault {
    long native;
    int fault;
} obx__native_fault;

/* Everything that differs between databases outside the statements
 * themselves. The headers' statement tables are indexed by the same id. */
typedef struct obx__dialect {
    /* Pointers first, then the flags as bytes (112 bytes on a 64-bit
     * target; its name and how it is detected are in obx__dialect_names). */
    obx_dialect id;
    const char *begin_sql;      /* opens a write transaction when tx_by_sql or own_tx_by_sql */
    const char *connect_key;    /* connection-string key the dialect wants set ... */
    const char *connect_extra;  /* ... and what to append when the caller did not set it */
    const char *session_sql;    /* run once after connecting (our own connections), or NULL */
    const char *version_sql;    /* returns the server version as one text column */
    const obx__native_fault *natives; /* native codes that are not permanent; {0,0} ends */
    const char *statement_end;  /* ends each statement of a schema text */
    const char *timeout_keys;   /* connection-string keys (space-separated) that make the
                                   driver stop waiting for the socket after N s, or NULL */
    /* Schema upgrades (obx__deploy_columns): {C} the quoted column, {K} its
     * bare name, {D} its type, and the store's names. The probe counts the
     * column (NULL: the add tests for it itself); it comes first because an
     * ALTER locks the table even when there is nothing to add (PostgreSQL:
     * ACCESS EXCLUSIVE, queued behind every open transaction on it). */
    const char *column_probe;
    const char *column_add;
    SQLULEN isolation;          /* set on our own connections; 0 = leave the driver's */
    unsigned char tx_by_sql;    /* autocommit stays on; BEGIN/COMMIT/ROLLBACK issued as SQL
                                   (on every connection: a caller's must be in autocommit) */
    unsigned char has_schemas;  /* tables are qualified by a schema */
    char quote_open, quote_close;
    unsigned char wide_text;    /* text binds as SQL_WVARCHAR: NVARCHAR columns keep every
                                   character (SQL_VARCHAR would pass the server code page) */
    unsigned char max_types;    /* one declared size per type, (N)VARCHAR(4000) /
                                   VARBINARY(8000), longer values size 0 = (MAX): not the
                                   deprecated ntext/image (which JSON functions refuse), and
                                   one cached plan instead of one per length */
    unsigned char dead_flag_is_local; /* SQL_ATTR_CONNECTION_DEAD costs no round trip (MariaDB's
                                   driver pings), so it may be asked before every commit */
    unsigned char pads_text;    /* "m1" = "m1 " in every collation (SQL Server): text keys
                                   ending in a space are refused, or they would collide */
    unsigned char autocommit_is_local; /* switching SQL_ATTR_AUTOCOMMIT costs no round trip
                                   (psqlODBC): one-statement units run in autocommit */
    unsigned char batch_as_json_rows; /* a multi-row INSERT takes one JSON array of rows, read in
                                   one pass (json_each, JSON_TABLE), not a list per column */
    unsigned char own_tx_by_sql; /* tx_by_sql on our own connections only (MariaDB: switching
                                   autocommit costs a round trip, so ours rest in autocommit
                                   and a unit of several statements opens with begin_sql;
                                   not with a statement timeout, see obx__db_setup) */
    const char *deploy_lock_sql;   /* before a deploy's first change: its lock timeout, or NULL */
    const char *deploy_unlock_sql; /* after that deploy: the connection's own again, or NULL */
} obx__dialect;

/* How long a schema change waits for its table lock, in seconds (text). */
#define OBX__DEPLOY_LOCK_WAIT "5"

static const obx__native_fault obx__sqlite_natives[] = {
    {5, OBX__FAULT_TRANSIENT}, /* SQLITE_BUSY: another writer holds the lock */
    {6, OBX__FAULT_TRANSIENT}, /* SQLITE_LOCKED */
    {0, 0}};
#ifndef OBX_NO_MARIADB
static const obx__native_fault obx__mariadb_natives[] = {
    {1205, OBX__FAULT_TRANSIENT}, /* lock wait timeout (SQLSTATE HY000) */
    {1213, OBX__FAULT_TRANSIENT}, /* deadlock: the whole transaction was rolled back */
    {1020, OBX__FAULT_TRANSIENT}, /* record changed since last read (snapshot isolation) */
    {1969, OBX__FAULT_TIMEOUT_RESET}, /* max_statement_time exceeded (HY018) */
    {2027, OBX__FAULT_LOST},      /* malformed packet: the session is out of step */
    {2002, OBX__FAULT_TRANSIENT}, /* cannot connect: server not (yet) there */
    {1927, OBX__FAULT_LOST},      /* connection killed */
    {2006, OBX__FAULT_LOST},      /* server has gone away */
    {2013, OBX__FAULT_LOST},      /* lost connection during query */
    {4031, OBX__FAULT_LOST},      /* disconnected by the server (idle timeout) */
    {5014, OBX__FAULT_LOST},      /* write error: broken pipe (HY000) */
    {1153, OBX__FAULT_LOST_PERMANENT}, /* packet over max_allowed_packet (08S01): never fits */
    {1290, OBX__FAULT_READ_ONLY}, /* running with --read-only (HY000) */
    {1792, OBX__FAULT_READ_ONLY}, /* read-only transaction (25006) */
    {0, 0}};
#endif
#ifndef OBX_NO_SQLSERVER
/* A query timeout is HYT00 with native 0 (by SQLSTATE below). */
static const obx__native_fault obx__sqlserver_natives[] = {
    {1205, OBX__FAULT_TRANSIENT},  /* deadlock victim (40001; FreeTDS says 42000) */
    {1222, OBX__FAULT_TRANSIENT},  /* lock request timed out (HY000 or HYT00) */
    {233, OBX__FAULT_LOST},        /* no process on the other end of the pipe */
    {10053, OBX__FAULT_LOST},      /* connection aborted */
    {10054, OBX__FAULT_LOST},      /* connection reset by peer */
    {0, 0}};
#endif
#ifndef OBX_NO_POSTGRESQL
static const obx__native_fault obx__no_natives[] = {{0, 0}};
#endif

#ifndef OBX_NO_SQLITE
static const obx__dialect obx__sqlite_dialect = {
    OBX_DIALECT_SQLITE, "BEGIN IMMEDIATE", NULL, NULL, NULL, "SELECT sqlite_version()",
    obx__sqlite_natives, ";\n", NULL,
    "SELECT COUNT(*) FROM pragma_table_info('{N}') WHERE name = '{K}'",
    "ALTER TABLE {T} ADD COLUMN {C} {D}", 0, 1, 0, '"', '"', 0, 0, 1, 0, 0, 1, 1, NULL, NULL};
#define OBX__SQLITE_DIALECT &obx__sqlite_dialect
#else
#define OBX__SQLITE_DIALECT NULL
#endif

#ifndef OBX_NO_POSTGRESQL
/* psqlODBC's default Protocol wraps each statement in a savepoint: twice
 * the round trips, and a failed statement would not abort the unit.
 * 7.4-1 rolls the whole transaction back on error, which is what we do
 * anyway. The session: times in UTC, and no JIT. The planner compiles a
 * statement whose estimated cost passes jit_above_cost, and a prepared
 * statement's generic plan does it at every run: the keyed claim's walk of
 * the claim index is estimated at the whole index's cost (its LIMIT is a
 * fraction of an estimate of one row), which passed 100,000 on a table of
 * 50,000 rows, and each claim then spent 100 ms compiling itself for a
 * batch that takes 3 (docs/PERFORMANCE.md). */
static const obx__dialect obx__postgresql_dialect = {
    OBX_DIALECT_POSTGRESQL, NULL, "Protocol=", "Protocol=7.4-1;", "SET TIME ZONE 'UTC'; SET jit = off",
    "SHOW server_version", obx__no_natives, ";\n", NULL,
    "SELECT COUNT(*) FROM pg_attribute WHERE attrelid = to_regclass('{T}') AND attname = '{K}' "
    "AND NOT attisdropped",
    "ALTER TABLE {T} ADD COLUMN IF NOT EXISTS {C} {D}", SQL_TXN_READ_COMMITTED, 0, 1, '"', '"', 0,
    0, 1, 0, 1, 0, 0, "SET LOCAL lock_timeout = '" OBX__DEPLOY_LOCK_WAIT "s'", NULL};
#define OBX__POSTGRESQL_DIALECT &obx__postgresql_dialect
#else
#define OBX__POSTGRESQL_DIALECT NULL
#endif

#ifndef OBX_NO_MARIADB
/* READ COMMITTED: at REPEATABLE READ a claim's gap locks block producers. */
/* OPTION=2 (CLIENT_FOUND_ROWS): row counts are rows matched, as elsewhere.
 * The database of the connection string is the schema. */
static const obx__dialect obx__mariadb_dialect = {
    OBX_DIALECT_MARIADB, "START TRANSACTION", "OPTION=", "OPTION=2;", "SET time_zone = '+00:00'",
    "SELECT VERSION()", obx__mariadb_natives, ";\n", "READ_TIMEOUT WRITE_TIMEOUT",
    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
    "AND TABLE_NAME = '{N}' AND COLUMN_NAME = '{K}'",
    "ALTER TABLE {T} ADD COLUMN IF NOT EXISTS {C} {D}", SQL_TXN_READ_COMMITTED, 0, 0, '`', '`', 0,
    0, 0, 0, 0, 1, 1,
    "SET @obx_lock_wait = @@SESSION.lock_wait_timeout, SESSION lock_wait_timeout = " OBX__DEPLOY_LOCK_WAIT,
    "SET SESSION lock_wait_timeout = @obx_lock_wait"};
#define OBX__MARIADB_DIALECT &obx__mariadb_dialect
#else
#define OBX__MARIADB_DIALECT NULL
#endif

#ifndef OBX_NO_SQLSERVER
/* XACT_ABORT: any error ends the whole transaction, as elsewhere.
 * NOCOUNT OFF: plain statements report their row counts. A schema
 * text is batches for sqlcmd/SSMS, each ended by GO. */
static const obx__dialect obx__sqlserver_dialect = {
    OBX_DIALECT_SQLSERVER, NULL, NULL, NULL, "SET XACT_ABORT ON; SET NOCOUNT OFF",
    "SELECT CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(64))", obx__sqlserver_natives,
    "\nGO\n", NULL, NULL, "IF COL_LENGTH(N'{T}', N'{K}') IS NULL ALTER TABLE {T} ADD {C} {D}",
    SQL_TXN_READ_COMMITTED, 0, 1, '[', ']', 1, 1, 1, 1, 0, 0, 0, NULL, NULL};
#define OBX__SQLSERVER_DIALECT &obx__sqlserver_dialect
#else
#define OBX__SQLSERVER_DIALECT NULL
#endif

/* Every dialect, built in or not, indexed by obx_dialect: its name, which
 * an SQL_DBMS_NAME starts with (case-insensitive), or the other name it
 * may start with (or NULL); upper-cased, the name is the option that
 * leaves it out. A store on a left-out one is detected and refused by
 * name (obx__db_setup). */
typedef struct obx__dialect_id {
    const char *name, *dbms_match;
} obx__dialect_id;
static const obx__dialect_id obx__dialect_names[] = {
    {"auto", NULL}, {"sqlite", NULL}, {"postgresql", NULL}, {"mariadb", "MySQL"},
    {"sqlserver", "Microsoft SQL Server"}};
/* The dialects built in, by obx_dialect; NULL: auto, or left out. */
static const obx__dialect *const obx__dialects[] = {NULL, OBX__SQLITE_DIALECT, OBX__POSTGRESQL_DIALECT,
                                                    OBX__MARIADB_DIALECT, OBX__SQLSERVER_DIALECT};
#define OBX__DIALECT_COUNT ((int)(sizeof obx__dialects / sizeof obx__dialects[0]))

/* With SQLite the only dialect built in, OBX__ONE(d)->flag is SQLite's
 * flag, a constant, and the code only other dialects need folds away (the
 * claim in three statements, batches as one list per column, PostgreSQL's
 * arrays, SQL Server's types): a store's dialect is always a built-in one
 * (obx__db_setup refuses the others). */
#if defined(OBX_NO_POSTGRESQL) && defined(OBX_NO_MARIADB) && defined(OBX_NO_SQLSERVER) && \
    !defined(OBX_NO_SQLITE)
#define OBX__SQLITE_ONLY 1
#define OBX__ONE(d) ((void)(d), &obx__sqlite_dialect)
#else
#define OBX__SQLITE_ONLY 0
#define OBX__ONE(d) (d)
#endif

/* Statement q of store s, or NULL where its dialect has none. With SQLite
 * the only dialect, a statement SQLite lacks (OBX__SQLITE_LACKS, beside
 * each header's statements) is NULL at compile time, so the code that runs
 * it folds away like the dialect's flags. */
#if OBX__SQLITE_ONLY
#define OBX__SQL(s, q) (OBX__SQLITE_LACKS(q) ? (char *)0 : (s)->sql[q])
#else
#define OBX__SQL(s, q) ((s)->sql[q])
#endif

/* Text of a statement that only the envelope needs: with OBX_NO_ENVELOPE
 * its columns stay NULL, and a statement may leave them out. */
#ifdef OBX_NO_ENVELOPE
#define OBX__ENV(text) ""
#else
#define OBX__ENV(text) text
#endif

/* A built-in dialect, or NULL (auto, unknown, or left out). */
OBX__PRIVATE const obx__dialect *obx__dialect_get(obx_dialect id) {
    int i = (int)id;
    return (i > 0 && i < OBX__DIALECT_COUNT) ? obx__dialects[i] : NULL;
}

OBX__PRIVATE const char *obx__dialect_name(obx_dialect id) {
    int i = (int)id;
    return (i >= 0 && i < OBX__DIALECT_COUNT) ? obx__dialect_names[i].name : "unknown";
}

OBX__PRIVATE int obx__starts_with_nocase(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++) {
        char a = *s, b = *prefix;
        if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
        if (a != b) return 0;
    }
    return 1;
}

OBX__PRIVATE int obx__contains_nocase(const char *s, const char *needle) {
    for (; *s; s++)
        if (obx__starts_with_nocase(s, needle)) return 1;
    return 0;
}

/* The dialect of an SQL_DBMS_NAME, built in or not, or OBX_DIALECT_AUTO
 * when none matches. */
OBX__PRIVATE obx_dialect obx__dialect_detect(const char *dbms_name) {
    int i;
    for (i = 1; i < OBX__DIALECT_COUNT; i++) {
        const obx__dialect_id *n = &obx__dialect_names[i];
        if (obx__starts_with_nocase(dbms_name, n->name) ||
            (n->dbms_match && obx__starts_with_nocase(dbms_name, n->dbms_match)))
            return (obx_dialect)i;
    }
    return OBX_DIALECT_AUTO;
}

/* Classify a failure. A lost connection (class 08) first, then the
 * dialect's native codes (drivers report SQLite's busy, MariaDB's lock wait
 * timeout, SQL Server's deadlock under FreeTDS and its lock timeout as
 * HY000, 42000 or HYT00), then the portable SQLSTATE classes. */
OBX__PRIVATE int obx__classify(const obx__dialect *d, const char *sqlstate, long native) {
    const obx__native_fault *n;
    if (d && native != 0)
        for (n = OBX__ONE(d)->natives; n->native != 0; n++)
            if (n->native == native && n->fault == OBX__FAULT_LOST_PERMANENT) return n->fault;
    if (strncmp(sqlstate, "08", 2) == 0) return OBX__FAULT_LOST;         /* connection exception */
    if (strcmp(sqlstate, "57P01") == 0 || strcmp(sqlstate, "57P02") == 0) /* admin shutdown, crash */
        return OBX__FAULT_LOST;
    if (d && native != 0)
        for (n = OBX__ONE(d)->natives; n->native != 0; n++)
            if (n->native == native) return n->fault;
    if (strncmp(sqlstate, "40", 2) == 0) return OBX__FAULT_TRANSIENT;    /* 40001, 40P01, 40003 */
    if (strcmp(sqlstate, "25006") == 0) return OBX__FAULT_READ_ONLY;     /* a standby answered */
    if (strcmp(sqlstate, "57014") == 0 || strcmp(sqlstate, "HYT00") == 0 ||
        strcmp(sqlstate, "HYT01") == 0)
        return OBX__FAULT_TIMEOUT; /* statement cancelled by a timeout */
    if (strcmp(sqlstate, "55P03") == 0 || strcmp(sqlstate, "57P03") == 0 ||
        strncmp(sqlstate, "53", 2) == 0)
        return OBX__FAULT_TRANSIENT; /* lock not available, cannot connect now, resources */
    return OBX__FAULT_PERMANENT;
}

/* Expand a statement template: "{X}" with X in A..Z is replaced by
 * names[X - 'A'] (already validated and quoted by the caller); any other
 * text is copied. Returns a new string from the allocator, or NULL. */
OBX__PRIVATE char *obx__sql_expand(const obx__hooks *h, const char *tmpl,
                                   const char *const names[26]) {
    size_t len = 0, o = 0;
    const char *p;
    char *out;
    for (p = tmpl; *p; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'Z' && p[2] == '}' && names[p[1] - 'A']) {
            len += strlen(names[p[1] - 'A']);
            p += 2;
        } else {
            len++;
        }
    }
    out = (char *)obx__alloc(h, len + 1);
    if (!out) return NULL;
    for (p = tmpl; *p; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'Z' && p[2] == '}' && names[p[1] - 'A']) {
            size_t n = strlen(names[p[1] - 'A']);
            memcpy(out + o, names[p[1] - 'A'], n);
            o += n;
            p += 2;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return out;
}

/* Quote a validated identifier, optionally qualified: "schema"."table". */
OBX__PRIVATE char *obx__quote_name(const obx__hooks *h, const obx__dialect *d, const char *schema,
                                   const char *name) {
    size_t n = strlen(name) + (schema ? strlen(schema) + 3 : 0) + 3;
    char *out = (char *)obx__alloc(h, n);
    if (!out) return NULL;
    if (schema)
        snprintf(out, n, "%c%s%c.%c%s%c", d->quote_open, schema, d->quote_close, d->quote_open,
                 name, d->quote_close);
    else
        snprintf(out, n, "%c%s%c", d->quote_open, name, d->quote_close);
    return out;
}

/* One statement of a dialect, found by its id: a dialect lists only the
 * statements it has, in any order, so adding one shifts no other. */
typedef struct obx__stmt_row {
    int id;
    const char *sql;
} obx__stmt_row;

/* A column added to the message table after the first release: how a
 * table deployed by an older release is upgraded in place (see
 * obx__deploy_columns). */
typedef struct obx__column {
    const char *name;            /* bare name */
    const char *type;            /* the dialect's type; NOT NULL needs a DEFAULT */
} obx__column;
#define OBX__COLUMNS_MAX 16

/* A dialect's schema and statements, as each header writes them. */
typedef struct obx__sqlset {
    const char *now_ms;          /* {W}: the database clock in Unix ms */
    const char *const *ddl;      /* the schema, one statement each, NULL-terminated */
    const obx__stmt_row *rows;   /* the statements, by name; {id, NULL} ends */
    /* Columns of the message table added since the first release, oldest
     * first, {NULL, NULL} ends. Adding a column is one entry here per
     * dialect, nothing else: the message table's CREATE TABLE gets it at
     * its "{A}" (new tables), and deploy adds it to an existing table right
     * after that statement (old tables), so later DDL (an index on it) and
     * statements may use it. A new index, trigger or function is one more
     * ddl entry that is idempotent on its own (IF NOT EXISTS, OR REPLACE,
     * the dialect's test); a function whose signature changes needs a DROP
     * ... IF EXISTS of the old signature before it; a changed trigger that
     * cannot be replaced in place without a lock (MariaDB, SQLite) gets a
     * new name, and its DROP TRIGGER IF EXISTS of the old name comes after
     * it (MariaDB commits each DDL statement: a settle between a DROP and
     * a CREATE would run with neither; test CORE-TRIGGER-ORDER). Where a
     * statement would lock its table even with nothing to do, deploy asks
     * the catalog first (obx__ddl_probe). */
    const obx__column *columns;
    /* The claim returns whole message rows (obx__read_message), not the
     * short row of obx__read_claimed: SQL Server's comes from a deployed
     * procedure, which workers of the previous release still call while
     * an upgrade replaces it. */
    int claim_full_rows;
    /* The explicit steps of a storage-layout upgrade (obx_store_upgrade),
     * in order; {NULL, NULL, 0} ends; NULL: none for this dialect. */
    const struct obx__contract *contract;
} obx__sqlset;

/* Only SQL Server's claim returns whole rows: built without it, every
 * claim reads the short row, and obx__read_message serves the reads alone. */
#ifdef OBX_NO_SQLSERVER
#define OBX__FULL_ROWS(q) ((void)(q), 0)
#else
#define OBX__FULL_ROWS(q) ((q)->claim_full_rows)
#endif

/* One step of obx_store_upgrade: `probe` a count, above 0 when the step is
 * done (NULL: the step is idempotent and cheap); `flag` the
 * OBX_UPGRADE_* flag that asks for it. */
typedef struct obx__contract {
    const char *probe, *change;
    unsigned flag;
} obx__contract;

/* Expand a statement template with a store's names: {T} the quoted table,
 * {S} the quoted schema, {N} the bare table name, {W} the dialect's "now"
 * in Unix ms, and for each "<letter><suffix>" of `more` (NULL-terminated)
 * {<letter>} the quoted table named table + suffix. Returns text from the
 * allocator, or NULL when out of memory. */
OBX__PRIVATE char *obx__expand_names(const obx__hooks *h, const obx__dialect *d, const obx__sqlset *q,
                                     const char *schema, const char *table, const char *tmpl,
                                     const char *const *more) {
    const char *names[26];
    char *quoted[26], name[80], *out = NULL;
    int i, ok = 1;
    memset((void *)names, 0, sizeof names);
    memset(quoted, 0, sizeof quoted);
    if (!OBX__ONE(d)->has_schemas) schema = NULL;
    quoted['T' - 'A'] = obx__quote_name(h, d, schema, table);
    if (schema) quoted['S' - 'A'] = obx__quote_name(h, d, NULL, schema);
    ok = quoted['T' - 'A'] && (quoted['S' - 'A'] || !schema);
    for (i = 0; ok && more && more[i]; i++) {
        snprintf(name, sizeof name, "%s%s", table, more[i] + 1);
        ok = (quoted[more[i][0] - 'A'] = obx__quote_name(h, d, schema, name)) != NULL;
    }
    for (i = 0; i < 26; i++) names[i] = quoted[i];
    names['N' - 'A'] = table;
    names['W' - 'A'] = q->now_ms;
    if (ok) out = obx__sql_expand(h, tmpl, names);
    for (i = 0; i < 26; i++) obx__free(h, quoted[i]);
    return out;
}

/* SQL Server: the first batch of every deploy. Deploys serialize on a lock
 * that ends with the transaction. In the library, manual commit is
 * IMPLICIT_TRANSACTIONS, which EXEC does not start (a CREATE does); sqlcmd
 * and SSMS run in autocommit, so the file opens a transaction and its last
 * batch commits it. QUOTED_IDENTIFIER: filtered indexes need it, and sqlcmd
 * without -I has it off. */
#define OBX__MS_DEPLOY_LOCK                                                                      \
    "SET QUOTED_IDENTIFIER ON; SET ANSI_NULLS ON; SET XACT_ABORT ON;\n"                          \
    "DECLARE @lock INT;\n"                                                                       \
    "IF @@TRANCOUNT = 0 AND (@@OPTIONS & 2) = 0 BEGIN TRANSACTION;\n"                            \
    "IF @@TRANCOUNT = 0 BEGIN CREATE TABLE #obx_deploy (x INT); DROP TABLE #obx_deploy; END;\n"   \
    "IF @@TRANCOUNT = 0 THROW 50000, N'obx deploy: no transaction for the deploy lock', 1;\n"      \
    "EXEC @lock = sp_getapplock @Resource = N'obx deploy {T}', @LockMode = N'Exclusive', "          \
    "@LockOwner = N'Transaction';\n"                                                             \
    "IF @lock < 0 THROW 50000, N'obx deploy: the deploy lock was not granted', 1;"

/* >> growable buffers and list literals -------------------------------------------- */

/* A byte buffer that only grows; reused across calls so that steady-state
 * work allocates nothing. */
typedef struct obx__buf {
    char *data;
    size_t len;
    size_t cap;
} obx__buf;

/* Room for `extra` more bytes and a NUL; 0 when out of memory, or when the
 * size would pass SIZE_MAX / 2 (a 32-bit gateway: the doubling below must
 * not wrap). */
OBX__PRIVATE int obx__buf_reserve(const obx__hooks *h, obx__buf *b, size_t extra) {
    size_t want, cap = b->cap ? b->cap : 256;
    char *grown;
    if (extra > SIZE_MAX / 2 - 1 - b->len) return 0;
    want = b->len + extra + 1;
    if (want <= b->cap) return 1;
    while (cap < want) cap *= 2;
    grown = (char *)obx__realloc(h, b->data, cap);
    if (!grown) return 0;
    b->data = grown;
    b->cap = cap;
    return 1;
}

OBX__PRIVATE int obx__buf_add(const obx__hooks *h, obx__buf *b, const void *bytes, size_t n) {
    if (!obx__buf_reserve(h, b, n)) return 0;
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 1;
}

OBX__PRIVATE void obx__buf_free(const obx__hooks *h, obx__buf *b) {
    obx__free(h, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A list of values passed as one text parameter, so that a whole batch is
 * one statement: PostgreSQL array literal {"a","b"} (CAST(? AS uuid[])),
 * elsewhere a JSON array ["a","b"] (json_each, JSON_TABLE, OPENJSON). */
/* Append s[0..n) quoted: a JSON string, or (pg) an element of a
 * PostgreSQL array literal, which escapes only '"' and '\\'. */
OBX__PRIVATE int obx__quoted_add(const obx__hooks *h, obx__buf *b, const char *s, size_t n, int pg) {
    static const char hex[] = "0123456789abcdef";
    size_t i;
    if (n > SIZE_MAX / 8) return 0; /* n * 6 would wrap (32 bits) */
    if (!obx__buf_reserve(h, b, n * 6 + 2)) return 0; /* worst case: all \u00XX */
    b->data[b->len++] = '"';
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            b->data[b->len++] = '\\';
            b->data[b->len++] = (char)c;
        } else if (c < 0x20 && !pg) {
            memcpy(b->data + b->len, "\\u00", 4);
            b->data[b->len + 4] = hex[c >> 4];
            b->data[b->len + 5] = hex[c & 15];
            b->len += 6;
        } else {
            b->data[b->len++] = (char)c;
        }
    }
    b->data[b->len++] = '"';
    b->data[b->len] = '\0';
    return 1;
}

OBX__PRIVATE int obx__list_add(const obx__hooks *h, obx__buf *b, const obx__dialect *d,
                               const char *s, size_t n) {
    int pg = OBX__ONE(d)->id == OBX_DIALECT_POSTGRESQL;
    if (n > SIZE_MAX / 8) return 0; /* refused before anything is written */
    if (b->len == 0 && !obx__buf_add(h, b, pg ? "{" : "[", 1)) return 0;
    if (b->len > 1 && !obx__buf_add(h, b, ",", 1)) return 0;
    return obx__quoted_add(h, b, s, n, pg);
}

/* A NULL element. */
OBX__PRIVATE int obx__list_add_null(const obx__hooks *h, obx__buf *b, const obx__dialect *d) {
    int pg = OBX__ONE(d)->id == OBX_DIALECT_POSTGRESQL;
    if (b->len == 0 && !obx__buf_add(h, b, pg ? "{" : "[", 1)) return 0;
    if (b->len > 1 && !obx__buf_add(h, b, ",", 1)) return 0;
    return obx__buf_add(h, b, pg ? "NULL" : "null", 4);
}

OBX__PRIVATE int obx__list_end(const obx__hooks *h, obx__buf *b, const obx__dialect *d) {
    int pg = OBX__ONE(d)->id == OBX_DIALECT_POSTGRESQL;
    if (b->len == 0) return obx__buf_add(h, b, pg ? "{}" : "[]", 2);
    return obx__buf_add(h, b, pg ? "}" : "]", 1);
}

/* >> odbc: connection state ----------------------------------------------------- */

#define OBX__MAX_STMTS 48
#define OBX__MAX_MARKERS 24
#define OBX__UNIT_RETRIES 3

/* One ODBC connection with its dialect, prepared statements and the place
 * its errors go. Owned by a store. */
typedef struct obx__db {
    const obx__hooks *hooks;
    const char *store_id;        /* for log lines */
    obx_error *err;              /* the owning handle's last error */
    const obx__dialect *d;
    SQLHENV env;
    SQLHDBC dbc;
    int own_connection;          /* opened from a string: ours to close and reopen */
    char *connstr;               /* the string actually used, kept for reconnects */
    obx_dialect forced;          /* dialect the caller forced, or AUTO */
    long login_timeout_s;        /* SQL_ATTR_LOGIN_TIMEOUT before each connect; 0: the driver's */
    long statement_timeout_s;    /* a statement's limit (see obx__stmt, connect); 0: none */
    int connected;
    int lost;                    /* the connection died: reopen before the next use */
    int reconnects_failed;       /* in a row: an outage logs its first attempt at WARN only */
    int in_tx;                   /* a unit of work is open */
    int tx_by_sql;               /* this connection rests in autocommit; units open with
                                    the dialect's begin_sql (obx__dialect) */
    int autocommit_on;           /* left on by a one-statement unit (not tx_by_sql): off
                                    again before the next unit of several statements */
    int unit;                    /* OBX__RUN_* of the current (or last) unit of work */
    int callers_tx;              /* the caller's connection, in its transaction */
    int fault;                   /* OBX__FAULT_* of the last diagnosed failure */
    struct obx_sql *capture;     /* set: statements are recorded, not run (obx__capture_add) */
    char *const *sql;            /* the store's statements by id: checked against their
                                    declared arguments when run (OBX__CHECK_ARGS) */
    int connect_no_wait;         /* a connect fails at once while another thread connects */
    int connect_busy;            /* ... and the last one did */
    char dbms_name[64];
    char dbms_version[64];
    char driver_name[64];
    SQLHSTMT stmt[OBX__MAX_STMTS]; /* prepared once, reused; freed on close or loss */
    unsigned char markers[OBX__MAX_STMTS][OBX__MAX_MARKERS]; /* see obx__plain_markers */
#ifdef OBX_SQLITE3_API
    sqlite3_stmt *tx_stmt[4];    /* BEGIN IMMEDIATE, COMMIT, ROLLBACK and a transactional
                                    handler's BEGIN: prepared once, as db->stmt
                                    (obx__exec_direct) */
#endif
} obx__db;

/* The database interface. The engine reaches its database only through
 * obx__db and the functions below, which have two implementations: ODBC
 * (the default, every dialect: the "odbc:" sections) and, with
 * OBX_SQLITE3_API, SQLite's own C API (section "sqlite3 api"; there dbc is
 * the sqlite3 *, a SQLHSTMT an obx__sq_cur, and the ODBC types and
 * constants that obx__param and the engine name are this file's when
 * <sql.h> is not included). What is common (obx__exec's timeouts,
 * obx__db_ensure's reconnect, the unit modes) is written
 * once, over them.
 *   connection   obx__db_connect (a string), obx__db_adopt (the caller's
 *                handle: used, never closed), obx__db_close; under them
 *                obx__driver_connect, obx__db_setup (dialect and session),
 *                obx__db_disconnect, obx__check_autocommit,
 *                obx__db_free_statements
 *   statements   obx__exec_once: the statement of a slot, prepared once per
 *                connection and kept in db->stmt, obx__param bound in order
 *                (or as "?N" numbers them) and run; *rows the affected count,
 *                or *cursor left open for obx__fetch, obx__get_i64,
 *                obx__get_text, obx__get_append, obx__bind_head (columns
 *                filled by each fetch), obx__unbind, obx__close;
 *                obx__exec_direct and obx__query_text run text uncached (DDL,
 *                transaction control, one value)
 *   transactions obx__end_tran, obx__autocommit_off, under the common
 *                obx__unit_mode, obx__begin, obx__commit, obx__rollback (the
 *                SQLite API: always tx_by_sql, BEGIN IMMEDIATE by SQL)
 *   errors       in db->err: the result (OBX_ERR_DB, or _DB_TRANSIENT as the
 *                dialect's natives and the SQLSTATE class say), an SQLSTATE
 *                (the SQLite API: HY000, 23000 for a constraint), the native
 *                code (SQLite's primary result code), the message and the
 *                call; db->fault and db->lost for the unit's retry. */
#ifdef OBX_SQLITE3_API /* bodies in "sqlite3 api" */
OBX__PRIVATE obx_result obx__driver_connect(obx__db *db, const char *connstr);
OBX__PRIVATE obx_result obx__db_setup(obx__db *db);
OBX__PRIVATE void obx__db_disconnect(obx__db *db);
OBX__PRIVATE obx_result obx__check_autocommit(obx__db *db);
OBX__PRIVATE obx_result obx__autocommit_off(obx__db *db);
OBX__PRIVATE obx_result obx__fetch(obx__db *db, SQLHSTMT st);
OBX__PRIVATE void obx__close(SQLHSTMT st);
OBX__PRIVATE obx_result obx__get_text(obx__db *db, SQLHSTMT st, int col, char *out, size_t cap, SQLLEN *ind);
#endif

/* >> odbc: diagnostics ------------------------------------------------------------ */

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Read every diagnostic record of `handle` into db->err and classify the
 * failure. SQLGetDiagRec returns SQL_SUCCESS_WITH_INFO for a truncated
 * message: that is still a record, not the end. Returns the result code. */
/* Read every diagnostic record of `handle` into db->err (SQLSTATE and
 * native code of the first record that is not a warning, all messages
 * joined) and return the worst fault class among them. */
OBX__PRIVATE int obx__diag_records(obx__db *db, SQLSMALLINT type, SQLHANDLE handle) {
    obx_error *e = db->err;
    SQLSMALLINT rec;
    size_t used = 0;
    int fault = OBX__FAULT_PERMANENT, have_primary = 0;
    for (rec = 1; rec < 64; rec++) {
        SQLCHAR state[6], text[SQL_MAX_MESSAGE_LENGTH];
        SQLINTEGER native = 0;
        SQLSMALLINT text_len = 0;
        SQLRETURN rc = SQLGetDiagRec(type, handle, rec, state, &native, text,
                                     (SQLSMALLINT)sizeof text, &text_len);
        int f;
        if (rc != SQL_SUCCESS && rc != SQL_SUCCESS_WITH_INFO) break;
        state[5] = '\0';
        f = obx__classify(db->d, (const char *)state, (long)native);
        if (f > fault) fault = f;
        /* The first record that is not a warning (class 01) is the cause;
         * with only warnings, the first one's codes are kept. */
        if (!have_primary && (strncmp((const char *)state, "01", 2) != 0 || rec == 1)) {
            obx__copy(e->sqlstate, sizeof e->sqlstate, (const char *)state);
            e->native = (long)native;
            have_primary = strncmp((const char *)state, "01", 2) != 0;
        }
        if (used + 4 < sizeof e->message) {
            int n = snprintf(e->message + used, sizeof e->message - used, "%s[%s/%ld] %s",
                             used ? " | " : "", (const char *)state, (long)native,
                             (const char *)text);
            used = n < 0 ? used : used + (size_t)n;
            if (used >= sizeof e->message) used = sizeof e->message - 1;
        }
    }
    if (rec == 1) obx__copy(e->message, sizeof e->message, "no diagnostic record from the driver");
    return fault;
}

OBX__PRIVATE obx_result obx__diag(obx__db *db, SQLSMALLINT type, SQLHANDLE handle,
                                  const char *where) {
    obx_error *e = db->err;
    int fault;
    char *c;
    obx__error_clear(e);
    obx__copy(e->where, sizeof e->where, where);
    fault = obx__diag_records(db, type, handle);
    for (c = e->message; *c; c++) /* one line: drivers put newlines into messages */
        if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
#ifndef OBX_NO_POSTGRESQL
    /* psqlODBC's named server-side statements live in a server session; a
     * pooler in transaction mode hands each transaction another one. */
    if (db->d && OBX__ONE(db->d)->id == OBX_DIALECT_POSTGRESQL && strstr(e->message, "_PLAN") &&
        (strcmp(e->sqlstate, "26000") == 0 || strcmp(e->sqlstate, "42P05") == 0)) {
        size_t used = strlen(e->message);
        snprintf(e->message + used, sizeof e->message - used, "%s",
                 " -- behind a pooler in transaction mode (PgBouncer)? add UseServerSidePrepare=0; to the "
                 "connection string");
    }
#endif
#ifndef OBX_NO_MARIADB
    /* InnoDB refuses a table for good once it marks one of its indexes
     * corrupted (seen once in a soak, after crash recovery, on an indexed
     * VIRTUAL column: a server defect); deploy builds a dropped one again. */
    if (db->d && db->d->id == OBX_DIALECT_MARIADB && e->native == 1712) {
        size_t used = strlen(e->message);
        snprintf(e->message + used, sizeof e->message - used, "%s",
                 " -- InnoDB marked an index corrupted (the server's error log names it): drop it (DROP INDEX "
                 "name ON table) and deploy again (obxctl deploy), which builds it again online");
    }
#endif
    /* A driver may report a dead connection with an ordinary code; ask. */
    if (db->dbc && db->connected) {
        SQLUINTEGER dead = 0;
        if (SQL_SUCCEEDED(SQLGetConnectAttr(db->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
            dead == SQL_CD_TRUE && fault != OBX__FAULT_LOST_PERMANENT)
            fault = OBX__FAULT_LOST;
    }
    if (fault == OBX__FAULT_LOST || fault == OBX__FAULT_LOST_PERMANENT) {
        e->connection_lost = 1;
        db->lost = 1;
    }
    if (fault == OBX__FAULT_TIMEOUT_RESET || fault == OBX__FAULT_READ_ONLY) {
        db->lost = 1; /* nothing was committed: not "lost" to the caller */
        if (fault == OBX__FAULT_TIMEOUT_RESET) fault = OBX__FAULT_TIMEOUT;
    }
    e->result = fault == OBX__FAULT_PERMANENT || fault == OBX__FAULT_LOST_PERMANENT ? OBX_ERR_DB
                                                                                   : OBX_ERR_DB_TRANSIENT;
    db->fault = fault;
    obx__log(db->hooks, OBX_LOG_DEBUG, db->store_id, "%s failed: %s", where, e->message);
    return e->result;
}

/* OBX_OK for a successful return code, else the diagnosed error. */
OBX__PRIVATE obx_result obx__check(obx__db *db, SQLRETURN rc, SQLSMALLINT type, SQLHANDLE h,
                                   const char *where) {
    if (rc == SQL_SUCCESS || rc == SQL_SUCCESS_WITH_INFO) return OBX_OK;
    if (rc == SQL_INVALID_HANDLE)
        return obx__fail(db->err, OBX_ERR_STATE, where, "invalid ODBC handle");
    return obx__diag(db, type, h, where);
}

#endif /* !OBX_SQLITE3_API */

/* >> odbc: connect ---------------------------------------------------------------- */

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
OBX__PRIVATE void obx__db_free_statements(obx__db *db) {
    int i;
    for (i = 0; i < OBX__MAX_STMTS; i++) {
        if (db->stmt[i]) SQLFreeHandle(SQL_HANDLE_STMT, db->stmt[i]);
        db->stmt[i] = NULL;
    }
}

/* One text value from SQLGetInfo into a fixed buffer ("" when unknown). */
/* One SQLGetInfo text into out ("" when the driver fails to say). */
OBX__PRIVATE obx_result obx__get_info(obx__db *db, SQLUSMALLINT what, char *out, size_t cap) {
    SQLCHAR buf[128];
    SQLSMALLINT len = 0;
    obx_result r = obx__check(db, SQLGetInfo(db->dbc, what, buf, (SQLSMALLINT)sizeof buf, &len),
                              SQL_HANDLE_DBC, db->dbc, "SQLGetInfo");
    out[0] = '\0';
    if (r == OBX_OK) {
        buf[sizeof buf - 1] = '\0';
        obx__copy(out, cap, (const char *)buf);
    }
    return r;
}

#endif /* !OBX_SQLITE3_API */

OBX__PRIVATE obx_result obx__exec_direct(obx__db *db, const char *sql, const char *where);
OBX__PRIVATE obx_result obx__end_tran(obx__db *db, SQLSMALLINT completion, const char *where);
OBX__PRIVATE obx_result obx__query_text(obx__db *db, const char *sql, char *out, size_t cap);

/* After connecting: detect the dialect, then (own connections only) set the
 * session up. Leaves no transaction open. */
OBX__PRIVATE obx_result obx__sqlite_not_temporary(obx__db *db);

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
OBX__PRIVATE obx_result obx__db_setup(obx__db *db) {
    const obx__dialect *d;
    obx_dialect id;
    obx_result r;
    /* The name decides the dialect: a driver that cannot say it (a
     * connection lost at once) is that error, not "unknown database". */
    r = obx__get_info(db, SQL_DBMS_NAME, db->dbms_name, sizeof db->dbms_name);
    if (r != OBX_OK) return r;
    if (obx__get_info(db, SQL_DRIVER_NAME, db->driver_name, sizeof db->driver_name) != OBX_OK ||
        obx__get_info(db, SQL_DBMS_VER, db->dbms_version, sizeof db->dbms_version) != OBX_OK)
        obx__error_clear(db->err); /* only for log lines */
    id = db->forced != OBX_DIALECT_AUTO ? db->forced : obx__dialect_detect(db->dbms_name);
    if (id == OBX_DIALECT_AUTO)
        return obx__fail(db->err, OBX_ERR_UNSUPPORTED, "SQLGetInfo(SQL_DBMS_NAME)",
                         "unknown database '%s' (driver %s)"
                         OBX__WHY("; force a dialect if it speaks one of sqlite, postgresql, mariadb, sqlserver"),
                         db->dbms_name, db->driver_name);
    d = obx__dialect_get(id);
    if (!d) {
        const char *name = obx__dialect_names[id].name;
        char macro[16];
        size_t i;
        for (i = 0; name[i] && i + 1 < sizeof macro; i++) macro[i] = (char)(name[i] - 'a' + 'A');
        macro[i] = '\0';
        return obx__fail(db->err, OBX_ERR_UNSUPPORTED, "obx_store_open: dialect",
                         "%s was left out of this build (OBX_NO_%s)", name, macro);
    }
    db->d = d;
    /* Not with a client-side statement timeout: a statement the driver gave
     * up on runs on at the server, and in autocommit it would commit; in a
     * transaction, the server rolls it back when it sees the socket closed. */
    db->autocommit_on = 0;
    db->tx_by_sql = OBX__ONE(d)->tx_by_sql || (db->own_connection && OBX__ONE(d)->own_tx_by_sql &&
                                               !(db->statement_timeout_s > 0 && OBX__ONE(d)->timeout_keys));
    if (!db->own_connection) return OBX_OK; /* the caller's session is the caller's */
    r = obx__check(db,
                   SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                     (SQLPOINTER)(uintptr_t)(db->tx_by_sql ? SQL_AUTOCOMMIT_ON
                                                                          : SQL_AUTOCOMMIT_OFF),
                                     SQL_IS_UINTEGER),
                   SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(AUTOCOMMIT)");
    if (r == OBX_OK && OBX__ONE(d)->isolation)
        r = obx__check(db,
                       SQLSetConnectAttr(db->dbc, SQL_ATTR_TXN_ISOLATION,
                                         (SQLPOINTER)(uintptr_t)OBX__ONE(d)->isolation, SQL_IS_UINTEGER),
                       SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(TXN_ISOLATION)");
    if (r == OBX_OK && OBX__ONE(d)->session_sql) r = obx__exec_direct(db, OBX__ONE(d)->session_sql, "session setup");
    if (r == OBX_OK && !db->tx_by_sql) r = obx__end_tran(db, SQL_COMMIT, "session setup commit");
    if (r == OBX_OK && OBX__ONE(d)->id == OBX_DIALECT_SQLITE) r = obx__sqlite_not_temporary(db);
    if (r == OBX_OK && OBX__ONE(d)->version_sql) {
        /* Best effort: SQL_DBMS_VER stays when the server will not say. */
        char version[64];
        if (obx__query_text(db, OBX__ONE(d)->version_sql, version, sizeof version) == OBX_OK)
            obx__copy(db->dbms_version, sizeof db->dbms_version, version);
        else
            obx__error_clear(db->err);
        if (!db->tx_by_sql) obx__end_tran(db, SQL_ROLLBACK, "version query end");
    }
    return r;
}

#endif /* !OBX_SQLITE3_API */

/* The value of `key` in a connection string, braces taken off ("" when
 * the string has no such key). */
OBX__PRIVATE void obx__connstr_value(const char *connstr, const char *key, char *out, size_t cap) {
    const char *p = connstr;
    size_t klen = strlen(key), n;
    out[0] = '\0';
    while (p && *p) {
        const char *k = p, *v = p;
        while (*k == ' ') k++;
        if (obx__starts_with_nocase(k, key)) /* only then is k + klen inside the string */
            for (v = k + klen; *v == ' '; v++) {}
        if (v != p && *v == '=') {
            for (v++; *v == ' '; v++) {}
            n = *v == '{' ? strcspn(++v, "}") : strcspn(v, ";");
            while (n > 0 && v[n - 1] == ' ') n--;
            snprintf(out, cap, "%.*s", (int)n, v);
            return;
        }
        for (; *p && *p != ';'; p++) /* to the next pair; braces may hold ';' */
            if (*p == '{' && strchr(p, '}')) p = strchr(p, '}');
        if (*p == ';') p++;
    }
}

/* SQLite opens a temporary file, deleted at close, when it is given no
 * file name: a DSN whose odbc.ini entry has no Database=, or any string
 * without one where the driver is linked in without a driver manager
 * (sqliteodbc then ignores DSN= and Driver=). Everything enqueued would
 * vanish with the connection, so it is refused; an in-memory database is
 * allowed when the connection string says so. A driver that cannot answer
 * leaves the check undone (best effort, like the version). */
OBX__PRIVATE obx_result obx__sqlite_not_temporary(obx__db *db) {
    char file[8];
    if (obx__contains_nocase(db->connstr, ":memory:") || obx__contains_nocase(db->connstr, "mode=memory"))
        return OBX_OK;
    if (obx__query_text(db, "SELECT file FROM pragma_database_list WHERE name = 'main'", file, sizeof file) !=
        OBX_OK) {
        obx__error_clear(db->err);
        return OBX_OK;
    }
    if (file[0]) return OBX_OK;
    obx__fail(db->err, OBX_ERR_DB, "connection_string",
              "the SQLite database would be a temporary file, deleted at close: neither the connection "
              "string nor its DSN names a Database="
              OBX__WHY(" (give the file's path, or Database=:memory: for a database in memory; "
                       "where the driver is linked in without a driver manager, no DSN is read)"));
    db->fault = OBX__FAULT_PERMANENT;
    return OBX_ERR_DB;
}

/* sqliteodbc, given neither DSN= nor Database=, opens a file named after
 * the whole connection string: refused before it is created. */
OBX__PRIVATE int obx__sqlite_without_file(const char *connstr) {
    char driver[96], dsn[8], file[8];
    obx__connstr_value(connstr, "Driver", driver, sizeof driver);
    obx__connstr_value(connstr, "DSN", dsn, sizeof dsn);
    obx__connstr_value(connstr, "Database", file, sizeof file);
    return obx__contains_nocase(driver, "sqlite") && !dsn[0] && !file[0];
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* A failed connect, explained: the driver manager says "Data source name
 * not found" for a missing DSN and for a string without DSN= or Driver=
 * alike, psqlODBC reports every refusal as 08001 (connection failed), and
 * sqliteodbc only "connect failed". Names what was asked for and where to
 * look, in front of the driver's own words; what no retry mends (a missing
 * DSN, driver or database, a refused login, a file that cannot be opened)
 * becomes OBX_ERR_DB, not transient. Never copies the string itself: it
 * may hold a password. */
OBX__PRIVATE void obx__connect_explain(obx__db *db, const char *connstr) {
    obx_error *e = db->err;
    const char *m = e->message;
    char dsn[96], driver[96], file[160], why[720], joined[sizeof e->message];
    const char *sysini = getenv("ODBCSYSINI"), *ini = getenv("ODBCINI");
    char env[200];
    size_t used;
    why[0] = '\0';
    obx__connstr_value(connstr, "DSN", dsn, sizeof dsn);
    obx__connstr_value(connstr, "Driver", driver, sizeof driver);
    snprintf(env, sizeof env, "%s%s%s%s%s", sysini || ini ? " (" : "", sysini ? "ODBCSYSINI=" : "",
             sysini ? sysini : "", ini ? (sysini ? ", ODBCINI=" : "ODBCINI=") : "", ini ? ini : "");
    if (env[0]) obx__copy(env + strlen(env), sizeof env - strlen(env), ")");
    if (strcmp(e->sqlstate, "IM002") == 0 && dsn[0])
        snprintf(why, sizeof why, "DSN '%s' is not defined"
                 OBX__WHY(": `odbcinst -q -s` lists the DSNs the driver manager knows, `odbcinst -j` the files it read%s"),
                 dsn OBX__WHY_ARG(env));
    else if (strcmp(e->sqlstate, "IM002") == 0 && !driver[0])
        snprintf(why, sizeof why, "the connection string names neither DSN= nor Driver="
                 OBX__WHY(" (malformed? it is KEY=value; pairs, e.g. Driver={SQLite3};Database=app.db;)"));
    else if (strstr(m, "Can't open lib") || strcmp(e->sqlstate, "IM002") == 0 || strcmp(e->sqlstate, "IM003") == 0)
        snprintf(why, sizeof why, "%s%s%s could not be loaded"
                 OBX__WHY(": `odbcinst -q -d` lists the drivers the driver manager knows, `odbcinst -j` the file "
                          "it read%s; a driver given by path must exist"),
                 driver[0] ? "driver '" : "the driver of DSN '", driver[0] ? driver : dsn, "'" OBX__WHY_ARG(env));
    else if (!OBX__SQLITE_ONLY && /* a server's refusals: folded away with SQLite only */
             ((strstr(m, "FATAL:") && (strstr(m, "does not exist") || strstr(m, "authentication failed") ||
                                      strstr(m, "no pg_hba.conf entry"))) ||
             ((strcmp(e->sqlstate, "28000") == 0 || strcmp(e->sqlstate, "42000") == 0) &&
              (e->native == 1044 || e->native == 1045 || e->native == 1049 || e->native == 1698))))
        snprintf(why, sizeof why, "the server refused the database or the login"
                 OBX__WHY(" (not tried again: fix the connection string or the server's grants)"));
    else if ((strstr(m, "[SQLite]") || strstr(m, "connect failed")) && e->native == 14) { /* SQLITE_CANTOPEN;
                                                 linked in without a driver manager, no "[SQLite]" */
        obx__connstr_value(connstr, "Database", file, sizeof file);
        snprintf(why, sizeof why, "cannot open the SQLite file '%s'"
                 OBX__WHY(": does its directory exist, and may this process write there?"), file);
    }
    if (!why[0]) return;
    obx__copy(joined, sizeof joined, why); /* what is wrong first: the driver's words may be cut */
    used = strlen(joined);
    memcpy(joined + used, ": ", 3);
    obx__copy(joined + used + 2, sizeof joined - used - 2, m);
    obx__copy(e->message, sizeof e->message, joined);
    e->result = OBX_ERR_DB;
    e->connection_lost = 0;
    db->fault = OBX__FAULT_PERMANENT;
}

/* psqlODBC rewrites process-wide settings while it connects: two threads
 * connecting at once read freed memory (seen under ASan). Connecting is
 * rare; it is done one thread at a time, under OBX__CONNECT_LOCK (one lock
 * for both headers together, defined above the core). */

OBX__PRIVATE obx_result obx__driver_connect(obx__db *db, const char *connstr) {
    SQLCHAR out[1024];
    SQLSMALLINT out_len = 0;
    SQLRETURN rc;
    if (db->login_timeout_s > 0) /* a driver that cannot is still connected, without it */
        SQLSetConnectAttr(db->dbc, SQL_ATTR_LOGIN_TIMEOUT, (SQLPOINTER)(uintptr_t)db->login_timeout_s, 0);
    db->connect_busy = 0;
#ifndef OBX_NO_THREADS
    if (!db->connect_no_wait) {
        obx__mutex_lock(&OBX__CONNECT_LOCK);
    } else if (obx__mutex_trylock(&OBX__CONNECT_LOCK) != 0) {
        db->connect_busy = 1; /* the renewal thread: a connect to a frozen server must not hold it up */
        return obx__fail(db->err, OBX_ERR_DB_TRANSIENT, "SQLDriverConnect",
                         "another thread is connecting" OBX__WHY("; tried again shortly"));
    }
#endif
    rc = SQLDriverConnect(db->dbc, NULL, OBX__SQLTEXT(connstr), SQL_NTS, out, (SQLSMALLINT)sizeof out,
                          &out_len, SQL_DRIVER_NOPROMPT);
#ifndef OBX_NO_THREADS
    obx__mutex_unlock(&OBX__CONNECT_LOCK);
#endif
    if (!SQL_SUCCEEDED(rc)) {
        obx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLDriverConnect");
        obx__connect_explain(db, connstr);
        return db->err->result;
    }
    db->connected = 1;
    db->lost = 0;
    return OBX_OK;
}

OBX__PRIVATE void obx__db_disconnect(obx__db *db) {
    obx__db_free_statements(db);
    if (db->connected) {
        /* SQLite refuses to disconnect with an open transaction. */
        if (db->in_tx) SQLEndTran(SQL_HANDLE_DBC, db->dbc, SQL_ROLLBACK);
        SQLDisconnect(db->dbc);
    }
    db->connected = 0;
    db->in_tx = 0;
}

/* Connect with a connection string. When the detected dialect wants a key
 * the caller did not set (psqlODBC's Protocol), reconnect once with it. */
/* What the dialect wants in the connection string when the caller did not
 * say it: its keys (connect_extra), and the statement timeout as socket
 * timeouts. Returns 1 when db->connstr grew (then reconnect), 0 when
 * nothing was added, -1 when out of memory. */
/* MariaDB's driver bounds only the TCP connect by SQL_ATTR_LOGIN_TIMEOUT,
 * then waits for the server's greeting without end (a frozen server, a
 * port that accepts and never answers): its CONN_TIMEOUT key bounds both.
 * Before the first connect (d NULL: the dialect is not known yet) it is
 * added when the string or the forced dialect says MariaDB or MySQL. */
OBX__PRIVATE int obx__connstr_extras(obx__db *db, const obx__dialect *d) {
    const char *extra = d && d->connect_extra && !obx__contains_nocase(db->connstr, d->connect_key)
                            ? d->connect_extra : "";
    const char *k = d && db->statement_timeout_s > 0 && d->timeout_keys ? d->timeout_keys : "";
#ifdef OBX_NO_MARIADB
    int my = 0; /* and the code below folds away */
#else
    int my = d ? d->id == OBX_DIALECT_MARIADB
               : db->forced == OBX_DIALECT_MARIADB || obx__contains_nocase(db->connstr, "mariadb") ||
                     obx__contains_nocase(db->connstr, "mysql");
#endif
    char timeouts[128], *longer;
    size_t used = 0, n = strlen(db->connstr);
    timeouts[0] = '\0';
    if (my && db->login_timeout_s > 0 && !obx__contains_nocase(db->connstr, "CONN_TIMEOUT=")) {
        int w = snprintf(timeouts, sizeof timeouts, "CONN_TIMEOUT=%ld;", db->login_timeout_s);
        used = w > 0 ? (size_t)w : 0;
    }
    while (*k && used < sizeof timeouts) { /* "KEY=<s>;" for each key the caller did not set */
        size_t len = strcspn(k, " ");
        char key[32];
        snprintf(key, sizeof key, "%.*s=", (int)len, k);
        if (!obx__contains_nocase(db->connstr, key)) {
            int w = snprintf(timeouts + used, sizeof timeouts - used, "%s%ld;", key, db->statement_timeout_s);
            used += w > 0 ? (size_t)w : 0;
        }
        k += len + (k[len] == ' ');
    }
    if (!extra[0] && !timeouts[0]) return 0;
    longer = (char *)obx__alloc(db->hooks, n + strlen(extra) + strlen(timeouts) + 2);
    if (!longer) return -1;
    memcpy(longer, db->connstr, n);
    longer[n] = '\0';
    if (n > 0 && longer[n - 1] != ';') strcat(longer, ";");
    strcat(longer, extra);
    strcat(longer, timeouts);
    obx__free(db->hooks, db->connstr);
    db->connstr = longer;
    return 1;
}

OBX__PRIVATE obx_result obx__db_connect(obx__db *db, const char *connstr) {
    obx_result r;
    int grown;
    db->own_connection = 1;
    if (!db->env) {
        if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &db->env))) {
            db->env = NULL;
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "SQLAllocHandle(ENV)",
                             "cannot allocate an ODBC environment" OBX__WHY(" (is a driver manager installed?)"));
        }
        r = obx__check(db,
                       SQLSetEnvAttr(db->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0),
                       SQL_HANDLE_ENV, db->env, "SQLSetEnvAttr(ODBC_VERSION)");
        if (r != OBX_OK) return r;
    }
    if (!db->dbc && !SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, db->env, &db->dbc))) {
        db->dbc = NULL;
        return obx__diag(db, SQL_HANDLE_ENV, db->env, "SQLAllocHandle(DBC)");
    }
    if (!db->connstr) {
        db->connstr = obx__strdup(db->hooks, connstr);
#ifdef OBX_NO_MARIADB
        if (!db->connstr) /* only MariaDB's driver wants a key before it connects */
#else
        if (!db->connstr || obx__connstr_extras(db, NULL) < 0)
#endif
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    }
    if (obx__sqlite_without_file(db->connstr))
        return obx__fail(db->err, OBX_ERR_DB, "connection_string",
                         "the connection string names the SQLite driver and no Database= (nor a DSN)"
                         OBX__WHY(": the driver would take the whole string for a file name; give the file's "
                                  "path, or Database=:memory: for a database in memory"));
    r = obx__driver_connect(db, db->connstr);
    if (r == OBX_OK) r = obx__db_setup(db);
    if (r != OBX_OK) return r;
    grown = obx__connstr_extras(db, OBX__ONE(db->d));
    if (grown < 0) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    if (grown == 0) return OBX_OK;
    obx__db_disconnect(db);
    r = obx__driver_connect(db, db->connstr);
    return r == OBX_OK ? obx__db_setup(db) : r;
}

/* Use a connection the caller opened; it stays theirs. */
/* A caller's connection must be in the autocommit mode the dialect's
 * units of work assume: with autocommit on where they commit by hand, a
 * claim's pick and its update would be two transactions, and two workers
 * could claim one row. Asked of the driver manager: no round trip. */
OBX__PRIVATE obx_result obx__check_autocommit(obx__db *db) {
    SQLUINTEGER mode = 0;
    SQLUINTEGER want = db->tx_by_sql ? SQL_AUTOCOMMIT_ON : SQL_AUTOCOMMIT_OFF;
    obx_result r = obx__check(db, SQLGetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT, &mode, 0, NULL),
                              SQL_HANDLE_DBC, db->dbc, "SQLGetConnectAttr(AUTOCOMMIT)");
    if (r != OBX_OK || mode == want) return r;
    return obx__fail(db->err, OBX_ERR_STATE, "hdbc: autocommit",
                     "the caller's connection has autocommit %s; on %s the store needs it %s"
                     OBX__WHY(" (SQLSetConnectAttr(SQL_ATTR_AUTOCOMMIT, SQL_AUTOCOMMIT_%s))"),
                     mode == SQL_AUTOCOMMIT_ON ? "on" : "off", obx__dialect_name(db->d->id),
                     want == SQL_AUTOCOMMIT_ON ? "on" : "off"
#ifndef OBX_TERSE_MESSAGES
                     , want == SQL_AUTOCOMMIT_ON ? "ON" : "OFF"
#endif
                     );
}

OBX__PRIVATE obx_result obx__db_adopt(obx__db *db, void *hdbc) {
    obx_result r;
    db->own_connection = 0;
    db->dbc = (SQLHDBC)hdbc;
    db->connected = 1;
    r = obx__db_setup(db);
    return r == OBX_OK ? obx__check_autocommit(db) : r;
}

#endif /* !OBX_SQLITE3_API */

/* Reopen a lost connection of our own before the next unit of work. */
OBX__PRIVATE obx_result obx__db_ensure(obx__db *db) {
    obx_result r;
    if (!db->lost && db->connected) return db->own_connection ? OBX_OK : obx__check_autocommit(db);
    if (!db->own_connection)
        return obx__fail(db->err, OBX_ERR_DB_TRANSIENT, "connection",
                         "the caller's connection was lost" OBX__WHY("; reconnect it and open the store again"));
    obx__log(db->hooks, db->reconnects_failed ? OBX_LOG_DEBUG : OBX_LOG_WARN, db->store_id,
             "reconnecting" OBX__WHY(" (the connection was lost, or left out of step by a timeout)"));
    obx__db_disconnect(db);
    r = obx__driver_connect(db, db->connstr);
    if (r == OBX_OK) r = obx__db_setup(db);
    if (r != OBX_OK) { /* a half-set-up session is not usable: try again next time */
        obx__db_disconnect(db);
        db->lost = 1;
        db->reconnects_failed++;
        return r;
    }
    obx__log(db->hooks, OBX_LOG_INFO, db->store_id, "reconnected after %d failed attempt(s)", db->reconnects_failed);
    db->reconnects_failed = 0;
    return r;
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
OBX__PRIVATE void obx__db_close(obx__db *db) {
    if (db->own_connection) {
        obx__db_disconnect(db);
        if (db->dbc) SQLFreeHandle(SQL_HANDLE_DBC, db->dbc);
        if (db->env) SQLFreeHandle(SQL_HANDLE_ENV, db->env);
    } else {
        obx__db_free_statements(db);
    }
    obx__free(db->hooks, db->connstr);
    db->connstr = NULL;
    db->dbc = NULL;
    db->env = NULL;
    db->connected = 0;
}

#endif /* !OBX_SQLITE3_API */

/* >> odbc: statements and parameters ------------------------------------------------- */

/* A parameter value; bound by obx__exec. Text and blobs point at the
 * caller's memory, which must stay valid until the statement has run. */
typedef struct obx__param {
    SQLSMALLINT c_type;
    SQLSMALLINT sql_type;
    SQLULEN size;
    SQLPOINTER ptr;
    SQLLEN ind;
    SQLBIGINT i64;
} obx__param;

#ifdef OBX_SQLITE3_API /* the interface's statement run (see "odbc: connection state") */
static obx_result obx__exec_once(obx__db *db, int slot, const char *sql, obx__param *ps, int n,
                                 int64_t *rows, SQLHSTMT *cursor);
#endif

/* Text of `len` bytes (len (size_t)-1: up to the NUL); NULL text binds SQL NULL. */
OBX__PRIVATE void obx__p_text(obx__param *p, const char *text, size_t len) {
    if (text && len == (size_t)-1) len = strlen(text);
    p->c_type = SQL_C_CHAR;
    p->sql_type = len > 4000 ? SQL_LONGVARCHAR : SQL_VARCHAR;
    p->size = text ? (len ? (SQLULEN)len : 1) : 1;
    p->ptr = (SQLPOINTER)(uintptr_t)(const void *)text;
    p->ind = text ? (SQLLEN)len : SQL_NULL_DATA;
    p->i64 = 0;
}

OBX__PRIVATE void obx__p_i64(obx__param *p, int64_t v) {
    p->c_type = SQL_C_SBIGINT;
    p->sql_type = SQL_BIGINT;
    p->size = 0;
    p->i64 = (SQLBIGINT)v;
    p->ptr = NULL; /* pointed at p->i64 when bound: the struct may be copied before */
    p->ind = 0;
}

OBX__PRIVATE void obx__p_blob(obx__param *p, const void *data, size_t len) {
    p->c_type = SQL_C_BINARY;
    p->sql_type = len > 8000 ? SQL_LONGVARBINARY : SQL_VARBINARY;
    p->size = len ? (SQLULEN)len : 1;
    p->ptr = (SQLPOINTER)(uintptr_t)data;
    p->ind = data ? (SQLLEN)len : SQL_NULL_DATA;
    p->i64 = 0;
}

/* Statements declare their arguments: each header's obx__stmt_args_rows
 * (obx__stmt_args: a dialect's variant) gives one letter per argument, in
 * binding order: i an integer, t a text, b bytes, l a list (one text of
 * many values: a key list or a batch column, see obx__list_add), j rows as
 * one JSON array; upper case where a dialect's numbered markers may leave
 * the argument out. Every dialect's text must take exactly those: checked
 * when a store opens and when a statement is bound (OBX__CHECK_ARGS), and
 * for every dialect by CORE-STMT-PARAMS. */
#if !defined(NDEBUG) && !defined(OBX_TERSE_MESSAGES)
#define OBX__CHECK_ARGS 1 /* debug builds; the terse ones are short of flash */
#else
#define OBX__CHECK_ARGS 0
#endif
static const char *obx__stmt_args(const obx__dialect *d, int id);

/* Does statement text `sql` (expanded) take the arguments `args` declares?
 * NULL if so, else `why`, saying what is wrong. The markers are counted as
 * obx__plain_markers reads them: plain "?"s, one per argument in order, or
 * numbered "?N"s, each naming an argument, every lower-case one at least
 * once; never both kinds in one text. */
OBX__PRIVATE const char *obx__args_check(const char *sql, const char *args, char *why, size_t cap) {
    size_t n = args ? strlen(args) : 0, plain = 0, numbered = 0, i;
    unsigned long used = 0;
    if (!args) return snprintf(why, cap, "no declared arguments"), why;
    while (*sql) {
        unsigned arg;
        if (*sql++ != '?') continue;
        if (*sql < '1' || *sql > '9') {
            plain++;
            continue;
        }
        arg = (unsigned)(*sql++ - '0');
        if (*sql >= '0' && *sql <= '9') arg = arg * 10 + (unsigned)(*sql++ - '0');
        if (arg > n) return snprintf(why, cap, "marker ?%u, %u argument(s) declared", arg, (unsigned)n), why;
        used |= 1ul << (arg - 1);
        numbered++;
    }
    if (plain && numbered) return snprintf(why, cap, "plain and numbered markers mixed"), why;
    if (numbered > OBX__MAX_MARKERS) return snprintf(why, cap, "%u numbered markers", (unsigned)numbered), why;
    if (!numbered && plain != n)
        return snprintf(why, cap, "%u marker(s), %u argument(s) declared", (unsigned)plain, (unsigned)n), why;
    for (i = 0; numbered && i < n; i++)
        if (args[i] >= 'a' && !(used & (1ul << i)))
            return snprintf(why, cap, "argument %u (%c) has no marker", (unsigned)i + 1, args[i]), why;
    return NULL;
}

/* The cached statement for `slot`, prepared from `sql` on first use. */
/* A statement may number its markers, "?2": argument 2 is bound there, so a
 * dialect can take the canonical arguments in its own order (MariaDB's
 * multi-table UPDATE names the id list first) or use one twice. Returns the
 * text with plain "?"s (from the allocator) and fills map with the
 * 1-based argument of each marker; NULL when out of memory, or "" when a
 * number is out of range (a statement bug). */
OBX__PRIVATE char *obx__plain_markers(const obx__hooks *h, const char *sql,
                                      unsigned char map[OBX__MAX_MARKERS]) {
    size_t o = 0, k = 0;
    char *out = (char *)obx__alloc(h, strlen(sql) + 1);
    if (!out) return NULL;
    while (*sql) {
        out[o++] = *sql;
        if (*sql++ == '?' && *sql >= '1' && *sql <= '9') {
            unsigned arg = (unsigned)(*sql++ - '0');
            if (*sql >= '0' && *sql <= '9') arg = arg * 10 + (unsigned)(*sql++ - '0'); /* ?10..?99 */
            if (k == OBX__MAX_MARKERS || (*sql >= '0' && *sql <= '9')) {
                out[0] = '\0';
                return out;
            }
            map[k++] = (unsigned char)arg;
        }
    }
    out[o] = '\0';
    return out;
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
OBX__PRIVATE obx_result obx__stmt(obx__db *db, int slot, const char *sql, SQLHSTMT *out) {
    SQLHSTMT st;
    obx_result r;
    char *plain = NULL;
    OBX_ASSERT(slot >= 0 && slot < OBX__MAX_STMTS);
    if (db->stmt[slot]) {
        *out = db->stmt[slot];
        return OBX_OK;
    }
    /* Once per statement and connection: the copy costs nothing that matters. */
    memset(db->markers[slot], 0, sizeof db->markers[slot]);
    plain = obx__plain_markers(db->hooks, sql, db->markers[slot]);
    if (!plain) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "SQLPrepare", "out of memory");
    if (!plain[0]) {
        obx__free(db->hooks, plain);
        return obx__fail(db->err, OBX_ERR_STATE, "SQLPrepare", "bad numbered marker in statement %d", slot);
    }
    sql = plain;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st))) {
        obx__free(db->hooks, plain);
        return obx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    }
    if (db->statement_timeout_s > 0) /* honoured by psqlODBC; others ignore it or warn */
        SQLSetStmtAttr(st, SQL_ATTR_QUERY_TIMEOUT, (SQLPOINTER)(uintptr_t)db->statement_timeout_s, 0);
    r = obx__check(db, SQLPrepare(st, OBX__SQLTEXT(sql), SQL_NTS), SQL_HANDLE_STMT, st,
                   "SQLPrepare");
    obx__free(db->hooks, plain);
    if (r != OBX_OK) {
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        return r;
    }
    db->stmt[slot] = st;
    *out = st;
    return OBX_OK;
}

/* Bind ps[0..n) to the markers in order, or as map says (obx__stmt). */
OBX__PRIVATE obx_result obx__bind(obx__db *db, SQLHSTMT st, obx__param *ps, int n,
                                  const unsigned char map[OBX__MAX_MARKERS]) {
    int i, markers = n;
    if (map[0]) {
        for (markers = 0; markers < OBX__MAX_MARKERS && map[markers]; markers++)
            if (map[markers] > n)
                return obx__fail(db->err, OBX_ERR_STATE, "SQLBindParameter",
                                 "marker ?%d but only %d arguments", map[markers], n);
    }
    for (i = 0; i < markers; i++) {
        obx__param *p = &ps[map[0] ? map[i] - 1 : i];
        SQLPOINTER ptr = p->c_type == SQL_C_SBIGINT ? (SQLPOINTER)&p->i64 : p->ptr;
        SQLLEN buflen = p->c_type == SQL_C_SBIGINT ? 0 : (p->ind > 0 ? p->ind : 0);
        SQLSMALLINT sql_type = p->sql_type;
        SQLULEN size = p->size;
        SQLRETURN rc;
        if (db->d && OBX__ONE(db->d)->max_types && p->c_type != SQL_C_SBIGINT) {
            int text = p->c_type == SQL_C_CHAR;
            sql_type = text ? SQL_VARCHAR : SQL_VARBINARY;
            size = p->size <= (text ? 4000u : 8000u) ? (text ? 4000u : 8000u) : 0;
        }
        /* psqlODBC (BoolsAsChar, its default) takes a VARCHAR(5) parameter
         * for a boolean and describes the statement first, in a round trip
         * of its own: slower, and through PgBouncer in transaction pooling
         * the describe and the execute reach different servers (26000). */
        if (sql_type == SQL_VARCHAR && size == 5) size = 6;
        if (db->d && OBX__ONE(db->d)->wide_text)
            sql_type = sql_type == SQL_VARCHAR ? SQL_WVARCHAR
                     : sql_type == SQL_LONGVARCHAR ? SQL_WLONGVARCHAR : sql_type;
        rc = SQLBindParameter(st, (SQLUSMALLINT)(i + 1), SQL_PARAM_INPUT, p->c_type, sql_type,
                              size, 0, ptr, buflen, &p->ind);
        obx_result r = obx__check(db, rc, SQL_HANDLE_STMT, st, "SQLBindParameter");
        if (r != OBX_OK) return r;
    }
    return OBX_OK;
}

/* Run the statement in `slot` with `n` parameters. With `cursor` NULL the
 * statement must not return rows; *rows (if given) receives the affected
 * count (or, when the statement returns a row, its first column), and
 * SQL_NO_DATA (a zero-row UPDATE/DELETE on PostgreSQL and SQLite) is
 * success with 0 rows. With `cursor` set, the result set is left
 * open for obx__fetch; close it with obx__close. */
/* How many rows the statement just run changed. Not knowing is an error,
 * never "0 rows": the unit rolls back rather than commit a miscounted
 * settle. A statement whose driver row count would be ambiguous (a MariaDB
 * upsert counts an insert and an untouched row alike) returns its count as
 * the first column of its one row. */
static obx_result obx__affected_rows(obx__db *db, SQLHSTMT st, int64_t *rows) {
    SQLLEN count = 0;
    SQLSMALLINT cols = 0;
    SQLRETURN rc;
    obx_result r = obx__check(db, SQLNumResultCols(st, &cols), SQL_HANDLE_STMT, st, "SQLNumResultCols");
    if (r != OBX_OK) return r;
    if (cols > 0) {
        SQLBIGINT v = 0;
        SQLLEN ind = 0;
        rc = SQLFetch(st);
        if (SQL_SUCCEEDED(rc))
            r = obx__check(db, SQLGetData(st, 1, SQL_C_SBIGINT, &v, 0, &ind), SQL_HANDLE_STMT, st,
                           "SQLGetData(count)");
        else if (rc != SQL_NO_DATA)
            r = obx__check(db, rc, SQL_HANDLE_STMT, st, "SQLFetch(count)");
        if (r == OBX_OK) *rows = SQL_SUCCEEDED(rc) && ind != SQL_NULL_DATA && v > 0 ? (int64_t)v : 0;
        return r;
    }
    r = obx__check(db, SQLRowCount(st, &count), SQL_HANDLE_STMT, st, "SQLRowCount");
    if (r == OBX_OK) *rows = count < 0 ? 0 : (int64_t)count;
    return r;
}

#endif /* !OBX_SQLITE3_API */

#if OBX__CHECK_ARGS
/* Arguments ps[0..n) for text `sql` in `slot`: as many as its markers take,
 * and, for a statement of the store's (db->sql), of the declared kinds. */
static int obx__args_bound(const obx__db *db, int slot, const char *sql, const obx__param *ps, int n) {
    const char *args = db->d ? obx__stmt_args(db->d, slot) : NULL;
    char why[80], any[OBX__MAX_MARKERS + 1];
    int i;
    if (!(args && db->sql && db->sql[slot] == sql)) {
        if (n > OBX__MAX_MARKERS) return 1; /* not the store's: only counted, up to this many */
        for (i = 0; i < n; i++) any[i] = 'T';
        any[n] = '\0';
        return !obx__args_check(sql, any, why, sizeof why);
    }
    if ((int)strlen(args) != n) return 0;
    for (i = 0; i < n; i++) {
        int kind = args[i] | 0x20; /* lower case */
        if (ps[i].c_type != (kind == 'i' ? SQL_C_SBIGINT : kind == 'b' ? SQL_C_BINARY : SQL_C_CHAR)) return 0;
    }
    return 1;
}
#endif

/* Statements for the caller's own driver (obx_sql, obx_enqueue_sql): a
 * unit of work run on a db whose `capture` is set records each statement
 * with its values instead of running it, so the texts and the values are
 * the ones the ODBC path binds, never a second copy. While recording, the
 * texts and values are offsets into `text` (it grows); obx__capture_end
 * turns them into the public pointers. */
typedef struct obx__cap_stmt {
    size_t sql;
    int first, count, check_column, counts;
} obx__cap_stmt;

typedef struct obx__cap_param {
    size_t off, len;
    int is_null, is_int, is_blob;
    int64_t i64;
} obx__cap_param;

struct obx_sql {
    obx__hooks hooks;    /* the store's, copied: the statements may outlive it */
    int markers;         /* OBX_SQL_MARKERS_* */
    obx__buf text;       /* texts and values, each NUL-terminated */
    obx__buf stmts_raw;  /* obx__cap_stmt records while recording */
    obx__buf params_raw; /* obx__cap_param records while recording */
    int count, param_count;
    obx_sql_stmt *stmts; /* filled by obx__capture_end */
    obx_sql_param *params;
    char (*ids)[37];     /* the messages' ids (obx_sql_id), id_count of them */
    int id_count;
    /* obx__capture_add, set by obx__unit_capture: the statement runners
     * call it through here, so that a program without an *_enqueue_sql
     * call links none of the recording (--gc-sections). */
    obx_result (*add)(obx__db *db, const char *sql, const obx__param *ps, int n, int check_column, int counts);
};

static int obx__cap_text(obx_sql *c, const char *s, size_t n, size_t *off) {
    *off = c->text.len;
    return obx__buf_add(&c->hooks, &c->text, s, n) && obx__buf_add(&c->hooks, &c->text, "", 1);
}

/* Record statement `sql` with ps[0..n): as plain markers, each marker's
 * value in order (obx__plain_markers' map), "$k" for libpq. */
OBX__PRIVATE obx_result obx__capture_add(obx__db *db, const char *sql, const obx__param *ps, int n,
                                         int check_column, int counts) {
    obx_sql *c = db->capture;
    unsigned char map[OBX__MAX_MARKERS];
    char *plain;
    const char *q;
    obx__cap_stmt st;
    int k = 0, ok = 1;
    memset(map, 0, sizeof map);
    plain = obx__plain_markers(db->hooks, sql, map);
    if (!plain) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_sql", "out of memory");
    st.sql = c->text.len;
    st.first = c->param_count;
    st.check_column = check_column;
    st.counts = counts;
    for (q = plain; *q && ok; q++) {
        char num[16];
        if (*q != '?') {
            ok = obx__buf_add(&c->hooks, &c->text, q, 1);
            continue;
        }
        k++;
        if (c->markers == OBX_SQL_MARKERS_DOLLAR) {
            snprintf(num, sizeof num, "$%d", k);
            ok = obx__buf_add(&c->hooks, &c->text, num, strlen(num));
        } else {
            ok = obx__buf_add(&c->hooks, &c->text, "?", 1);
        }
    }
    obx__free(db->hooks, plain);
    ok = ok && obx__buf_add(&c->hooks, &c->text, "", 1);
    st.count = k;
    for (k = 0; k < st.count && ok; k++) {
        int a = map[0] ? map[k] - 1 : k;
        const obx__param *p = &ps[a];
        obx__cap_param v;
        char num[24];
        memset(&v, 0, sizeof v);
        if (a < 0 || a >= n) return obx__fail(db->err, OBX_ERR_STATE, "obx_sql", "marker %d has no argument", k + 1);
        v.is_int = p->c_type == SQL_C_SBIGINT;
        v.is_blob = p->c_type == SQL_C_BINARY;
        v.is_null = p->ind == SQL_NULL_DATA;
        v.i64 = v.is_int ? (int64_t)p->i64 : 0;
        if (v.is_null) v.i64 = 0;
        else if (v.is_int) {
            snprintf(num, sizeof num, "%lld", (long long)p->i64);
            ok = obx__cap_text(c, num, strlen(num), &v.off);
            v.len = strlen(num);
        } else {
            v.len = (size_t)p->ind;
            ok = obx__cap_text(c, (const char *)p->ptr, v.len, &v.off);
        }
        ok = ok && obx__buf_add(&c->hooks, &c->params_raw, &v, sizeof v);
    }
    ok = ok && obx__buf_add(&c->hooks, &c->stmts_raw, &st, sizeof st);
    if (!ok) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_sql", "out of memory");
    c->param_count += st.count;
    c->count++;
    return OBX_OK;
}

/* The ids of the messages the recorded statements write (obx_sql_id). */
OBX__PRIVATE obx_result obx__capture_ids(obx__db *db, char (*ids)[37], int n) {
    obx_sql *c = db->capture;
    if (n <= 0) return OBX_OK;
    c->ids = (char (*)[37])obx__alloc(&c->hooks, 37 * (size_t)n);
    if (!c->ids) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_sql", "out of memory");
    memcpy(c->ids, ids, 37 * (size_t)n);
    c->id_count = n;
    return OBX_OK;
}

/* The recorded statements as the public arrays; 0 when out of memory. */
OBX__PRIVATE int obx__capture_end(obx_sql *c) {
    int i;
    c->stmts = (obx_sql_stmt *)obx__alloc(&c->hooks, sizeof *c->stmts * (size_t)(c->count + 1));
    c->params = (obx_sql_param *)obx__alloc(&c->hooks, sizeof *c->params * (size_t)(c->param_count + 1));
    if (!c->stmts || !c->params) return 0;
    for (i = 0; i < c->param_count; i++) {
        obx__cap_param v;
        memcpy(&v, c->params_raw.data + sizeof v * (size_t)i, sizeof v);
        c->params[i].value = v.is_null ? NULL : c->text.data + v.off;
        c->params[i].length = v.is_null ? 0 : v.len;
        c->params[i].is_int = v.is_int;
        c->params[i].i64 = v.i64;
        c->params[i].is_blob = v.is_blob;
    }
    for (i = 0; i < c->count; i++) {
        obx__cap_stmt st;
        memcpy(&st, c->stmts_raw.data + sizeof st * (size_t)i, sizeof st);
        c->stmts[i].sql = c->text.data + st.sql;
        c->stmts[i].param_count = st.count;
        c->stmts[i].params = c->params + st.first;
        c->stmts[i].check_column = st.check_column;
        c->stmts[i].counts = st.counts;
    }
    return 1;
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
static obx_result obx__exec_once(obx__db *db, int slot, const char *sql, obx__param *ps, int n,
                                 int64_t *rows, SQLHSTMT *cursor) {
    SQLHSTMT st = NULL;
    SQLRETURN rc;
    obx_result r;
#if OBX__CHECK_ARGS
    OBX_ASSERT(obx__args_bound(db, slot, sql, ps, n));
#endif
    if (db->capture) { /* recorded for the caller's driver: a statement of rows cannot be */
        if (cursor) return obx__fail(db->err, OBX_ERR_STATE, "obx_sql", "statement %d reads", slot);
        if (rows) *rows = 0; /* the caller's driver counts (obx_sql_stmt.counts) */
        return db->capture->add(db, sql, ps, n, 0, rows != NULL);
    }
    r = obx__stmt(db, slot, sql, &st);
    if (r != OBX_OK) return r;
    SQLFreeStmt(st, SQL_CLOSE); /* a cursor left open by an earlier failure */
    r = obx__bind(db, st, ps, n, db->markers[slot]);
    if (r != OBX_OK) return r;
    rc = SQLExecute(st);
    if (rc == SQL_NO_DATA) {
        if (rows) *rows = 0;
        if (cursor) *cursor = st; /* fetch will report the end at once */
        return OBX_OK;
    }
    r = obx__check(db, rc, SQL_HANDLE_STMT, st, "SQLExecute");
    if (r != OBX_OK) {
        /* Prepare afresh next time: after a failure (a schema change, a
         * dropped function) the server-side plan may be stale, and
         * psqlODBC keeps memory of a failed execution until the handle
         * is freed. */
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        db->stmt[slot] = NULL;
        return r;
    }
    if (cursor) {
        *cursor = st;
        return OBX_OK;
    }
    r = rows ? obx__affected_rows(db, st, rows) : OBX_OK;
    SQLFreeStmt(st, SQL_CLOSE);
    return r;
}

#endif /* !OBX_SQLITE3_API */

/* Run the statement in `slot` (obx__exec_once). With a statement timeout,
 * a call that fails only after the timeout has passed says so: drivers
 * report it as a lost connection (MariaDB's socket timeout) or a cancel. */
OBX__PRIVATE obx_result obx__exec(obx__db *db, int slot, const char *sql, obx__param *ps, int n,
                                  int64_t *rows, SQLHSTMT *cursor) {
    int64_t t0 = db->statement_timeout_s > 0 ? obx__mono_ms(db->hooks) : 0, waited;
    obx_result r = obx__exec_once(db, slot, sql, ps, n, rows, cursor);
    if (r != OBX_ERR_DB_TRANSIENT || db->statement_timeout_s <= 0) return r;
    waited = obx__mono_ms(db->hooks) - t0;
    if (waited >= (int64_t)db->statement_timeout_s * 900) { /* 90 %: timers are coarse */
        char text[sizeof db->err->message];
        snprintf(text, sizeof text, "statement timeout: no answer in %lld ms (limit %ld s): %.400s",
                 (long long)waited, db->statement_timeout_s, db->err->message);
        obx__copy(db->err->message, sizeof db->err->message, text);
        obx__log(db->hooks, OBX_LOG_WARN, db->store_id, "%s", text);
    }
    return r;
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* OBX_OK with a row, OBX_EMPTY at the end of the result set, or an error. */
OBX__PRIVATE obx_result obx__fetch(obx__db *db, SQLHSTMT st) {
    SQLRETURN rc = SQLFetch(st);
    if (rc == SQL_NO_DATA) return OBX_EMPTY;
    /* 24000: an UPDATE … RETURNING that matched nothing left no cursor. */
    if (rc == SQL_ERROR) {
        SQLCHAR state[6];
        SQLINTEGER native = 0;
        SQLSMALLINT len = 0;
        if (SQL_SUCCEEDED(SQLGetDiagRec(SQL_HANDLE_STMT, st, 1, state, &native, NULL, 0, &len)) &&
            memcmp(state, "24000", 5) == 0)
            return OBX_EMPTY;
    }
    return obx__check(db, rc, SQL_HANDLE_STMT, st, "SQLFetch");
}

OBX__PRIVATE void obx__close(SQLHSTMT st) {
    if (st) SQLFreeStmt(st, SQL_CLOSE);
}

/* Column `col` (1-based) as text into out (cut to cap), *ind its length or
 * SQL_NULL_DATA (then out is left as it was). */
OBX__PRIVATE obx_result obx__get_text(obx__db *db, SQLHSTMT st, int col, char *out, size_t cap, SQLLEN *ind) {
    return obx__check(db, SQLGetData(st, (SQLUSMALLINT)col, SQL_C_CHAR, out, (SQLLEN)cap, ind), SQL_HANDLE_STMT,
                      st, "SQLGetData");
}

/* Forget the columns obx__bind_head bound: their memory is about to go. */
OBX__PRIVATE void obx__unbind(SQLHSTMT st) {
    if (st) SQLFreeStmt(st, SQL_UNBIND);
}

#endif /* !OBX_SQLITE3_API */

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Column `col` (1-based) as a 64-bit integer; *is_null set when given. */
OBX__PRIVATE obx_result obx__get_i64(obx__db *db, SQLHSTMT st, int col, int64_t *out,
                                     int *is_null) {
    SQLBIGINT v = 0;
    SQLLEN ind = 0;
    obx_result r = obx__check(db, SQLGetData(st, (SQLUSMALLINT)col, SQL_C_SBIGINT, &v, 0, &ind),
                              SQL_HANDLE_STMT, st, "SQLGetData");
    if (r != OBX_OK) return r;
    if (is_null) *is_null = ind == SQL_NULL_DATA;
    *out = ind == SQL_NULL_DATA ? 0 : (int64_t)v;
    return OBX_OK;
}

/* Column `col` appended to `buf` (NUL-terminated there); *offset is where
 * it starts, or (size_t)-1 for SQL NULL. Offsets, not pointers: the buffer
 * may move while later columns are read. */
OBX__PRIVATE obx_result obx__get_append(obx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type,
                                        obx__buf *buf, size_t *offset, size_t *out_len) {
    const size_t term = c_type == SQL_C_CHAR ? 1 : 0;
    size_t start = buf->len;
    int first = 1, truncated;
    for (;;) {
        SQLLEN ind = 0;
        size_t room, got;
        SQLRETURN rc;
        if (!obx__buf_reserve(db->hooks, buf, 1024))
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
        room = buf->cap - buf->len;
        rc = SQLGetData(st, (SQLUSMALLINT)col, c_type, buf->data + buf->len, (SQLLEN)room, &ind);
        if (rc == SQL_NO_DATA) break;
        if (!SQL_SUCCEEDED(rc)) {
            buf->len = start;
            return obx__diag(db, SQL_HANDLE_STMT, st, "SQLGetData");
        }
        if (ind == SQL_NULL_DATA) {
            buf->len = start;
            *offset = (size_t)-1;
            if (out_len) *out_len = 0;
            return OBX_OK;
        }
        truncated = rc == SQL_SUCCESS_WITH_INFO && (ind == SQL_NO_TOTAL || (size_t)ind > room - term);
        if (truncated) got = room - term;
        else if (term) got = obx__strnlen(buf->data + buf->len, room);
        else got = (ind != SQL_NO_TOTAL && (size_t)ind <= room) ? (size_t)ind : room;
        buf->len += got;
        if (!truncated) break;
        /* Truncated: the first indicator usually tells the whole size. */
        if (first && ind != SQL_NO_TOTAL && (size_t)ind > got &&
            !obx__buf_reserve(db->hooks, buf, (size_t)ind - got + 1))
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
        first = 0;
    }
    if (!obx__buf_reserve(db->hooks, buf, 1))
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
    buf->data[buf->len++] = '\0';
    *offset = start;
    if (out_len) *out_len = buf->len - start - 1;
    return OBX_OK;
}

#endif /* !OBX_SQLITE3_API */

/* A claimed row's fixed-size columns, bound so that one SQLFetch fills
 * them all: `texts` short texts (UUIDs) first, then integers. Its variable
 * texts come after them and are read with SQLGetData in column order, which
 * every driver allows after the last bound column. A claim of 100 rows took
 * 22 SQLGetData calls per row, each through the driver manager. */
#define OBX__HEAD_INTS 10
typedef struct obx__row_head {
    char text[2][40];
    SQLLEN text_ind[2];
    SQLBIGINT v[OBX__HEAD_INTS];
    SQLLEN ind[OBX__HEAD_INTS];
} obx__row_head;

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
OBX__PRIVATE obx_result obx__bind_head(obx__db *db, SQLHSTMT st, obx__row_head *h, int texts, int ints) {
    int i;
    OBX_ASSERT(texts <= 2 && ints <= OBX__HEAD_INTS);
    for (i = 0; i < texts + ints; i++) {
        SQLRETURN rc = i < texts ? SQLBindCol(st, (SQLUSMALLINT)(i + 1), SQL_C_CHAR, h->text[i],
                                              (SQLLEN)sizeof h->text[i], &h->text_ind[i])
                                 : SQLBindCol(st, (SQLUSMALLINT)(i + 1), SQL_C_SBIGINT, &h->v[i - texts], 0,
                                              &h->ind[i - texts]);
        obx_result r = obx__check(db, rc, SQL_HANDLE_STMT, st, "SQLBindCol");
        if (r != OBX_OK) return r;
    }
    return OBX_OK;
}

#endif /* !OBX_SQLITE3_API */

/* Integer k of the bound head; 0 for NULL. */
OBX__PRIVATE int64_t obx__head_int(const obx__row_head *h, int k) {
    return h->ind[k] == SQL_NULL_DATA ? 0 : (int64_t)h->v[k];
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Run one statement that returns nothing, outside the cache (DDL,
 * transaction control, session settings). */
OBX__PRIVATE obx_result obx__exec_direct(obx__db *db, const char *sql, const char *where) {
    SQLHSTMT st;
    SQLRETURN rc;
    obx_result r;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return obx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    rc = SQLExecDirect(st, OBX__SQLTEXT(sql), SQL_NTS);
    r = rc == SQL_NO_DATA ? OBX_OK : obx__check(db, rc, SQL_HANDLE_STMT, st, where);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

/* First column of the first row of `sql` as text into a fixed buffer. */
OBX__PRIVATE obx_result obx__query_text(obx__db *db, const char *sql, char *out, size_t cap) {
    SQLHSTMT st;
    SQLLEN ind = 0;
    obx_result r;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return obx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    r = obx__check(db, SQLExecDirect(st, OBX__SQLTEXT(sql), SQL_NTS), SQL_HANDLE_STMT, st,
                   "SQLExecDirect");
    if (r == OBX_OK) r = obx__fetch(db, st);
    if (r == OBX_OK)
        r = obx__check(db, SQLGetData(st, 1, SQL_C_CHAR, out, (SQLLEN)cap, &ind), SQL_HANDLE_STMT,
                       st, "SQLGetData");
    if (r == OBX_OK && ind == SQL_NULL_DATA) out[0] = '\0';
    if (r == OBX_EMPTY) r = obx__fail(db->err, OBX_ERR_NOT_FOUND, sql, "query returned no row");
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

#endif /* !OBX_SQLITE3_API */

/* >> odbc: transactions and units of work ------------------------------------------- */

/* Rule: one place decides how a unit of work runs. A connection rests in
 * one autocommit mode, chosen when it is set up (obx__db_setup: tx_by_sql);
 * each unit then runs in one of the modes below, chosen by obx__unit_mode
 * and by nothing else: obx__begin, obx__commit and obx__rollback do what
 * the unit's mode (db->unit) says and assert it; obx__unit_or_caller asks
 * it too. A new way to run a unit is a new mode there, not a test of
 * tx_by_sql, autocommit_on or own_connection somewhere else. */
enum {
    OBX__RUN_NONE = 0,
    OBX__RUN_AUTOCOMMIT, /* one statement that commits by itself: no BEGIN, no COMMIT */
    OBX__RUN_SQL,        /* a transaction by SQL: the dialect's begin_sql, COMMIT, ROLLBACK,
                            on a connection that rests in autocommit (tx_by_sql) */
    OBX__RUN_SQL_READ,   /* a reader there: no BEGIN, each statement its own snapshot, no
                            write lock (SQLite); its end only checks the connection */
    OBX__RUN_ODBC,       /* an ODBC transaction: autocommit off, SQLEndTran */
    OBX__RUN_CALLER      /* the caller's transaction on its hdbc: nothing is begun,
                            committed or rolled back here */
};

enum { OBX__UNIT_READ = 0, OBX__UNIT_WRITE = 1, OBX__UNIT_ONE_STATEMENT = 2 };

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
OBX__PRIVATE obx_result obx__end_tran(obx__db *db, SQLSMALLINT completion, const char *where) {
    return obx__check(db, SQLEndTran(SQL_HANDLE_DBC, db->dbc, completion), SQL_HANDLE_DBC, db->dbc,
                      where);
}

#endif /* !OBX_SQLITE3_API */

/* How a unit with `flags` runs on db: the one place that decides.
 * A unit of exactly one statement needs no BEGIN and COMMIT of its own: it
 * runs in autocommit, one round trip instead of three (psqlODBC sends
 * BEGIN and COMMIT apart). Only for a statement after which nothing can
 * fail that would need it undone (a count, a read), and only on our own
 * connections, where switching is free: tx_by_sql connections rest in
 * autocommit; psqlODBC switches locally (done here: where it fails, the
 * unit runs as a transaction). The switch back waits for the next unit of
 * several statements (obx__begin), where a failure is that unit's error. */
OBX__PRIVATE int obx__unit_mode(obx__db *db, int flags) {
    if (db->callers_tx) return OBX__RUN_CALLER;
    if ((flags & OBX__UNIT_ONE_STATEMENT) && db->own_connection) {
        if (db->tx_by_sql || db->autocommit_on) return OBX__RUN_AUTOCOMMIT;
#ifndef OBX_SQLITE3_API
        if (OBX__ONE(db->d)->autocommit_is_local &&
            SQL_SUCCEEDED(SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                            (SQLPOINTER)(uintptr_t)SQL_AUTOCOMMIT_ON, SQL_IS_UINTEGER))) {
            db->autocommit_on = 1;
            return OBX__RUN_AUTOCOMMIT;
        }
#endif
    }
    /* SQLite readers need no write lock: without BEGIN each statement is
     * its own snapshot, and a writer elsewhere does not block them. */
    if (db->tx_by_sql) return (flags & OBX__UNIT_WRITE) ? OBX__RUN_SQL : OBX__RUN_SQL_READ;
    return OBX__RUN_ODBC;
}

#ifndef OBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Manual commit again before a unit of several statements: they must never
 * run as several transactions. */
OBX__PRIVATE obx_result obx__autocommit_off(obx__db *db) {
    obx_result r = obx__check(db,
                              SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                                (SQLPOINTER)(uintptr_t)SQL_AUTOCOMMIT_OFF, SQL_IS_UINTEGER),
                              SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(AUTOCOMMIT)");
    if (r == OBX_OK) db->autocommit_on = 0;
    return r;
}

#endif /* !OBX_SQLITE3_API */

/* Open a unit in `mode` (obx__unit_mode). */
OBX__PRIVATE obx_result obx__begin(obx__db *db, int mode) {
    obx_result r = OBX_OK;
    OBX_ASSERT(mode != OBX__RUN_NONE && mode != OBX__RUN_CALLER);
    OBX_ASSERT((mode == OBX__RUN_SQL || mode == OBX__RUN_SQL_READ) == (db->tx_by_sql != 0) ||
               mode == OBX__RUN_AUTOCOMMIT);
    db->unit = mode;
    if (mode == OBX__RUN_ODBC && db->autocommit_on) r = obx__autocommit_off(db);
    /* SQLite: a deferred transaction that later writes can deadlock and burn
     * the whole busy timeout, so writers take the lock up front. */
    if (r == OBX_OK && mode == OBX__RUN_SQL) r = obx__exec_direct(db, OBX__ONE(db->d)->begin_sql, "BEGIN");
    if (r == OBX_OK && (mode == OBX__RUN_SQL || mode == OBX__RUN_ODBC)) db->in_tx = 1;
    return r;
}

/* Open a transactional handler's transaction (obx__handle_tx) as a unit
 * that writes, except on SQLite: there a plain (deferred) BEGIN, so that the
 * write lock, which holds back every other writer, is taken only at the
 * handler's first write or at the ack, not while it reads or waits. */
OBX__PRIVATE obx_result obx__begin_handler(obx__db *db) {
    int mode = obx__unit_mode(db, OBX__UNIT_WRITE);
    obx_result r;
    if (mode != OBX__RUN_SQL || OBX__ONE(db->d)->id != OBX_DIALECT_SQLITE) return obx__begin(db, mode);
    db->unit = mode;
    r = obx__exec_direct(db, "BEGIN", "BEGIN");
    if (r == OBX_OK) db->in_tx = 1;
    return r;
}

OBX__PRIVATE obx_result obx__commit(obx__db *db) {
#ifndef OBX_SQLITE3_API
    SQLUINTEGER dead = 0;
#endif
    obx_result r;
    OBX_ASSERT(db->unit == OBX__RUN_SQL || db->unit == OBX__RUN_SQL_READ || db->unit == OBX__RUN_ODBC);
    /* psqlODBC reports a successful COMMIT on a connection it already knows
     * is dead; believe the dead flag, not the commit. (Where asking costs a
     * round trip, a dead connection fails the COMMIT itself.) */
#ifndef OBX_SQLITE3_API
    if (OBX__ONE(db->d)->dead_flag_is_local &&
        SQL_SUCCEEDED(SQLGetConnectAttr(db->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
        dead == SQL_CD_TRUE) {
        db->lost = 1;
        db->in_tx = 0;
        r = obx__fail(db->err, OBX_ERR_DB_TRANSIENT, "commit",
                      "connection lost before commit" OBX__WHY("; the transaction was not committed"));
        db->err->connection_lost = 1;
        return r;
    }
#endif
    if (db->unit == OBX__RUN_SQL_READ) return OBX_OK; /* a read unit: nothing to commit */
    r = db->unit == OBX__RUN_SQL ? obx__exec_direct(db, "COMMIT", "COMMIT")
                                 : obx__end_tran(db, SQL_COMMIT, "SQLEndTran(COMMIT)");
    /* A failed SQL COMMIT (SQLite BUSY) leaves the transaction open: keep
     * in_tx so that the rollback really runs and releases the lock. */
    if (r == OBX_OK || db->unit != OBX__RUN_SQL) db->in_tx = 0;
    if (r != OBX_OK && db->err->connection_lost)
        obx__copy(db->err->message + strlen(db->err->message),
                  sizeof db->err->message - strlen(db->err->message),
                  " (connection lost during commit: outcome unknown)");
    return r;
}

/* Roll back, keeping the error that caused it. */
OBX__PRIVATE void obx__rollback(obx__db *db) {
    obx_error saved = *db->err;
    OBX_ASSERT(db->unit != OBX__RUN_NONE && db->unit != OBX__RUN_CALLER);
    if (db->connected && !db->lost) {
        /* An ODBC unit ends by SQLEndTran; so does one in autocommit on a
         * connection that rests in manual commit (a no-op there, kept). */
        if (db->unit == OBX__RUN_ODBC || (db->unit == OBX__RUN_AUTOCOMMIT && db->autocommit_on))
            obx__end_tran(db, SQL_ROLLBACK, "SQLEndTran(ROLLBACK)");
        else if (db->in_tx)
            obx__exec_direct(db, "ROLLBACK", "ROLLBACK");
    }
    db->in_tx = 0;
    *db->err = saved;
}

typedef obx_result (*obx__unit_fn)(obx__db *db, void *ctx);

/* Run `fn` as one unit of work on our own connection (or a store's adopted
 * one), in the mode obx__unit_mode chooses: begin, fn, commit.
 * Any error rolls the whole unit back (never commit after a failed
 * statement: psqlODBC would commit the statements before it). A deadlock,
 * serialization failure or busy/lock timeout redoes the unit up to
 * OBX__UNIT_RETRIES times with a short jittered pause; a lost connection is
 * reported at once (the next call reconnects). Returns fn's result.
 * flags: OBX__UNIT_WRITE (SQLite readers take no write lock), and
 * OBX__UNIT_ONE_STATEMENT when fn runs exactly one statement. */
OBX__PRIVATE obx_result obx__unit_run(obx__db *db, obx__unit_fn fn, void *ctx, const char *what,
                                      int flags) {
    obx_result r;
    int attempt, mode;
    /* A transactional handler's transaction is open on the store's own
     * connection (obx__handle_tx): the store's calls made inside it (its
     * ack, the handler's follow-up enqueues) run in it, and commit with it. */
    if (db->callers_tx) return fn(db, ctx);
    for (attempt = 0;; attempt++) {
        r = obx__db_ensure(db);
        if (r != OBX_OK) return r;
        db->fault = OBX__FAULT_PERMANENT;
        mode = obx__unit_mode(db, flags);
        OBX_ASSERT(mode != OBX__RUN_CALLER); /* obx__unit_or_caller runs those */
        r = obx__begin(db, mode);
        if (r == OBX_OK) r = fn(db, ctx);

        if (r >= 0) {
            obx_result c = mode == OBX__RUN_AUTOCOMMIT ? OBX_OK : obx__commit(db);
            if (c == OBX_OK) {
                if (db->err->result != OBX_OK) obx__error_clear(db->err);
                return r;
            }
            r = c;
        }
        obx__rollback(db);
        if (r != OBX_ERR_DB_TRANSIENT || db->fault != OBX__FAULT_TRANSIENT || db->lost ||
            attempt >= OBX__UNIT_RETRIES)
            break;
        {
            obx_backoff_policy pause = {20, 500, 0.5, 1.5};
            int64_t ms = obx__backoff_jitter_ms(&pause, attempt + 1, obx__random(db->hooks));
            obx__log(db->hooks, OBX_LOG_WARN, db->store_id,
                     "%s: transient failure [%s/%ld], retrying in %lld ms (retry %d of %d)", what,
                     db->err->sqlstate, db->err->native, (long long)ms, attempt + 1,
                     OBX__UNIT_RETRIES);
            obx__sleep_ms(db->hooks, ms);
        }
    }
    if (r < 0)
        obx__log(db->hooks, OBX_LOG_ERROR, db->store_id, "%s failed: %s: %s (%s)", what,
                 obx__result_str(r), db->err->message, db->err->where);
    return r;
}

OBX__PRIVATE obx_result obx__unit(obx__db *db, obx__unit_fn fn, void *ctx, const char *what) {
    return obx__unit_run(db, fn, ctx, what, OBX__UNIT_WRITE);
}

/* A unit of one statement that only reads (SQLite takes no write lock). */
OBX__PRIVATE obx_result obx__unit_read(obx__db *db, obx__unit_fn fn, void *ctx, const char *what) {
    return obx__unit_run(db, fn, ctx, what, OBX__UNIT_READ | OBX__UNIT_ONE_STATEMENT);
}

/* A unit of exactly one statement that writes. */
OBX__PRIVATE obx_result obx__unit_one(obx__db *db, obx__unit_fn fn, void *ctx, const char *what) {
    return obx__unit_run(db, fn, ctx, what, OBX__UNIT_WRITE | OBX__UNIT_ONE_STATEMENT);
}


/* >> sqlite3 api: the database interface on SQLite's own C API ----------------------- */

#ifdef OBX_SQLITE3_API
/* OBX_SQLITE3_API: the functions of the database interface (see "odbc:
 * connection state") on the sqlite3 C API, no driver manager or ODBC driver.
 * db->dbc is the sqlite3 *, db->stmt[slot] an obx__sq_cur: the slot's
 * statement, prepared once per connection and reset, rebound and stepped for
 * each use (sqliteodbc compiled it again at each execute). The dialect is
 * SQLite's, its statement texts the same rows; "?N" markers are SQLite's own.
 * Connections rest in autocommit; units are BEGIN IMMEDIATE / COMMIT /
 * ROLLBACK as SQL (tx_by_sql), as through sqliteodbc. */

enum { OBX__SQ_IDLE = 0, OBX__SQ_PENDING, OBX__SQ_ROW, OBX__SQ_DONE };

/* A statement and where its cursor stands: a step that found a row leaves
 * it PENDING for the first obx__fetch, which makes it the current ROW. */
typedef struct obx__sq_cur {
    sqlite3_stmt *st;
    int state;
    obx__row_head *head; /* obx__bind_head: filled at each fetch */
    int head_texts, head_ints;
} obx__sq_cur;

/* A failed sqlite3 call, diagnosed as an ODBC one would be: the primary
 * result code is the native code (the dialect's natives classify it: BUSY
 * and LOCKED are transient), SQLSTATE HY000 (23000 for a constraint). */
OBX__PRIVATE obx_result obx__sq_fail(obx__db *db, int rc, const char *where) {
    obx_error *e = db->err;
    sqlite3 *h = (sqlite3 *)db->dbc;
    int primary = rc & 0xff, fault;
    const char *state = primary == SQLITE_CONSTRAINT ? "23000" : "HY000";
    obx__error_clear(e);
    obx__copy(e->where, sizeof e->where, where);
    obx__copy(e->sqlstate, sizeof e->sqlstate, state);
    e->native = primary;
    snprintf(e->message, sizeof e->message, "[SQLite][%s/%d] %s", state, rc,
             h && (sqlite3_extended_errcode(h) & 0xff) == primary ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
    fault = obx__classify(db->d, state, primary);
    e->result = primary == SQLITE_NOMEM ? OBX_ERR_NO_MEMORY
              : fault == OBX__FAULT_PERMANENT || fault == OBX__FAULT_LOST_PERMANENT ? OBX_ERR_DB
                                                                                   : OBX_ERR_DB_TRANSIENT;
    db->fault = fault;
    obx__log(db->hooks, OBX_LOG_DEBUG, db->store_id, "%s failed: %s", where, e->message);
    return e->result;
}

OBX__PRIVATE void obx__db_free_statements(obx__db *db) {
    int i;
    for (i = 0; i < OBX__MAX_STMTS; i++) {
        obx__sq_cur *c = (obx__sq_cur *)db->stmt[i];
        if (c) {
            sqlite3_finalize(c->st);
            obx__free(db->hooks, c);
        }
        db->stmt[i] = NULL;
    }
    for (i = 0; i < (int)(sizeof db->tx_stmt / sizeof db->tx_stmt[0]); i++) {
        sqlite3_finalize(db->tx_stmt[i]); /* NULL: a no-op */
        db->tx_stmt[i] = NULL;
    }
}

/* The dialect is SQLite's; a forced other one cannot be spoken here. */
OBX__PRIVATE obx_result obx__db_setup(obx__db *db) {
    const obx__dialect *d = obx__dialect_get(OBX_DIALECT_SQLITE);
    obx_result r = OBX_OK;
    if (!d || (db->forced != OBX_DIALECT_AUTO && db->forced != OBX_DIALECT_SQLITE))
        return obx__fail(db->err, OBX_ERR_UNSUPPORTED, "obx_store_open: dialect",
                         "this build reaches SQLite through its C API (OBX_SQLITE3_API)%s",
                         d ? ": it speaks only sqlite" : " and leaves SQLite out (OBX_NO_SQLITE)");
    db->d = d;
    obx__copy(db->dbms_name, sizeof db->dbms_name, "SQLite");
    obx__copy(db->dbms_version, sizeof db->dbms_version, sqlite3_libversion());
    obx__copy(db->driver_name, sizeof db->driver_name, "sqlite3 C API");
    db->autocommit_on = 0;
    db->tx_by_sql = 1;
    if (!db->own_connection) return OBX_OK; /* the caller's session is the caller's */
    if (OBX__ONE(d)->session_sql) r = obx__exec_direct(db, OBX__ONE(d)->session_sql, "session setup");
    return r == OBX_OK ? obx__sqlite_not_temporary(db) : r;
}

/* A connection string is a file name, a "file:" URI (SQLite's defaults,
 * busy timeout 100000 ms), or ODBC's key=value; pairs as sqliteodbc reads
 * them, so that a string means the same database and settings either way:
 * Database= (the file), Timeout= (the busy timeout in ms, default 100000),
 * JournalMode=, SyncPragma= (default NORMAL); other keys (Driver=, DSN=)
 * are ignored. */
OBX__PRIVATE obx_result obx__driver_connect(obx__db *db, const char *connstr) {
    char file[1024], value[32], sql[64];
    const char *path = connstr;
    long timeout_ms = 100000;
    sqlite3 *h = NULL;
    int rc, pairs = strncmp(connstr, "file:", 5) != 0 && strchr(connstr, '=') != NULL;
    if (pairs) {
        obx__connstr_value(connstr, "Database", file, sizeof file);
        path = file;
        obx__connstr_value(connstr, "Timeout", value, sizeof value);
        if (value[0]) timeout_ms = strtol(value, NULL, 10);
    }
    rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL);
    db->dbc = h;
    if (rc != SQLITE_OK) {
        obx__sq_fail(db, rc, "sqlite3_open_v2");
        if ((rc & 0xff) == SQLITE_CANTOPEN) {
            char text[sizeof db->err->message];
            snprintf(text, sizeof text, "cannot open the SQLite file '%.150s'"
                     OBX__WHY(": does its directory exist, and may this process write there?") ": %.250s",
                     path, db->err->message);
            obx__copy(db->err->message, sizeof db->err->message, text);
            db->err->result = OBX_ERR_DB;
            db->fault = OBX__FAULT_PERMANENT;
        }
        sqlite3_close(h);
        db->dbc = NULL;
        return db->err->result;
    }
    sqlite3_extended_result_codes(h, 1);
    sqlite3_busy_timeout(h, timeout_ms < 0 ? 0 : timeout_ms > INT_MAX ? INT_MAX : (int)timeout_ms);
    db->connected = 1;
    db->lost = 0;
    if (pairs) { /* sqliteodbc's pragmas: a value is a word, never more SQL */
        static const char *const keys[2][2] = {{"JournalMode", "journal_mode"}, {"SyncPragma", "synchronous"}};
        int k;
        for (k = 0; k < 2; k++) {
            obx__connstr_value(connstr, keys[k][0], value, sizeof value);
            if (!value[0] && k == 1) obx__copy(value, sizeof value, "NORMAL");
            if (!value[0]) continue;
            if (strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != strlen(value))
                return obx__fail(db->err, OBX_ERR_INVALID_ARG, "connection_string",
                                 "%s=%s is not a word" OBX__WHY(" (e.g. JournalMode=WAL;SyncPragma=NORMAL;)"),
                                 keys[k][0], value);
            snprintf(sql, sizeof sql, "PRAGMA %s = %s", keys[k][1], value);
            if ((rc = sqlite3_exec(h, sql, NULL, NULL, NULL)) != SQLITE_OK) return obx__sq_fail(db, rc, keys[k][0]);
        }
    }
    return OBX_OK;
}

OBX__PRIVATE void obx__db_disconnect(obx__db *db) {
    obx__db_free_statements(db);
    if (db->connected && db->dbc) {
        if (!sqlite3_get_autocommit((sqlite3 *)db->dbc))
            sqlite3_exec((sqlite3 *)db->dbc, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close_v2((sqlite3 *)db->dbc);
        db->dbc = NULL;
    }
    db->connected = 0;
    db->in_tx = 0;
}

OBX__PRIVATE obx_result obx__db_connect(obx__db *db, const char *connstr) {
    obx_result r;
    db->own_connection = 1;
    if (!db->connstr && !(db->connstr = obx__strdup(db->hooks, connstr)))
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    if (obx__sqlite_without_file(db->connstr)) /* as through ODBC: say so, open no temporary file */
        return obx__fail(db->err, OBX_ERR_DB, "connection_string",
                         "the connection string names the SQLite driver and no Database= (nor a DSN)"
                         OBX__WHY(": give the file's path, or Database=:memory: for a database in memory"));
    r = obx__driver_connect(db, db->connstr);
    return r == OBX_OK ? obx__db_setup(db) : r;
}

/* A sqlite3 handle has no autocommit mode apart from its transaction: an
 * application's BEGIN is its own, and the store's units begin by SQL. */
OBX__PRIVATE obx_result obx__check_autocommit(obx__db *db) {
    (void)db;
    return OBX_OK;
}

/* hdbc is the application's sqlite3 *: used, never closed, its settings
 * (busy timeout, extended codes) left as they are. */
OBX__PRIVATE obx_result obx__db_adopt(obx__db *db, void *hdbc) {
    db->own_connection = 0;
    db->dbc = hdbc;
    db->connected = 1;
    return obx__db_setup(db);
}

OBX__PRIVATE void obx__db_close(obx__db *db) {
    if (db->own_connection) obx__db_disconnect(db);
    else obx__db_free_statements(db);
    obx__free(db->hooks, db->connstr);
    db->connstr = NULL;
    db->dbc = NULL;
    db->env = NULL;
    db->connected = 0;
}

OBX__PRIVATE int obx__sq_bind(sqlite3_stmt *st, int k, const obx__param *p) {
    if (p->ind == SQL_NULL_DATA) return sqlite3_bind_null(st, k);
    if (p->c_type == SQL_C_SBIGINT) return sqlite3_bind_int64(st, k, (sqlite3_int64)p->i64);
    if (p->c_type == SQL_C_BINARY)
        return sqlite3_bind_blob64(st, k, p->ptr, (sqlite3_uint64)p->ind, SQLITE_STATIC);
    return sqlite3_bind_text64(st, k, (const char *)p->ptr, (sqlite3_uint64)p->ind, SQLITE_STATIC, SQLITE_UTF8);
}

/* Run the statement of `slot`, prepared on first use and kept (the
 * interface: see obx__exec). A row where none is read: the first column
 * is the count (as through ODBC). */
static obx_result obx__exec_once(obx__db *db, int slot, const char *sql, obx__param *ps, int n,
                                 int64_t *rows, SQLHSTMT *cursor) {
    sqlite3 *h = (sqlite3 *)db->dbc;
    obx__sq_cur *c = (obx__sq_cur *)db->stmt[slot];
    obx_result r;
    int rc, i, markers;
#if OBX__CHECK_ARGS
    OBX_ASSERT(obx__args_bound(db, slot, sql, ps, n));
#endif
    OBX_ASSERT(slot >= 0 && slot < OBX__MAX_STMTS);
    if (db->capture) { /* recorded for the caller's driver, as through ODBC */
        if (cursor) return obx__fail(db->err, OBX_ERR_STATE, "obx_sql", "statement %d reads", slot);
        if (rows) *rows = 0;
        return db->capture->add(db, sql, ps, n, 0, rows != NULL);
    }
    if (!c) {
        sqlite3_stmt *st = NULL;
        c = (obx__sq_cur *)obx__alloc(db->hooks, sizeof *c);
        if (!c) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "sqlite3_prepare_v3", "out of memory");
        rc = sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
        if (rc != SQLITE_OK) {
            obx__free(db->hooks, c);
            return obx__sq_fail(db, rc, "sqlite3_prepare_v3");
        }
        memset(c, 0, sizeof *c);
        c->st = st;
        db->stmt[slot] = c;
    }
    sqlite3_reset(c->st); /* a cursor left open by an earlier failure */
    c->state = OBX__SQ_IDLE;
    c->head = NULL;
    markers = sqlite3_bind_parameter_count(c->st);
    if (markers > n)
        return obx__fail(db->err, OBX_ERR_STATE, "sqlite3_bind", "marker ?%d but only %d arguments", markers, n);
    for (i = 0; i < markers; i++)
        if ((rc = obx__sq_bind(c->st, i + 1, &ps[i])) != SQLITE_OK) return obx__sq_fail(db, rc, "sqlite3_bind");
    rc = sqlite3_step(c->st);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        if (cursor) {
            c->state = rc == SQLITE_ROW ? OBX__SQ_PENDING : OBX__SQ_DONE;
            *cursor = c;
            return OBX_OK;
        }
        if (rows && rc == SQLITE_ROW)
            *rows = sqlite3_column_type(c->st, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(c->st, 0);
        else if (rows)
            *rows = sqlite3_column_count(c->st) > 0 ? 0 : (int64_t)sqlite3_changes(h);
        if (rows && *rows < 0) *rows = 0;
        sqlite3_reset(c->st);
        return OBX_OK;
    }
    r = obx__sq_fail(db, rc, "sqlite3_step");
    sqlite3_reset(c->st);
    return r;
}

/* The bound head's columns from the current row (obx__bind_head). */
OBX__PRIVATE void obx__sq_fill_head(obx__sq_cur *c) {
    obx__row_head *h = c->head;
    int i;
    for (i = 0; i < c->head_texts; i++) {
        const unsigned char *t = sqlite3_column_text(c->st, i);
        h->text_ind[i] = t ? (SQLLEN)sqlite3_column_bytes(c->st, i) : SQL_NULL_DATA;
        obx__copy(h->text[i], sizeof h->text[i], t ? (const char *)t : "");
    }
    for (i = 0; i < c->head_ints; i++) {
        int null = sqlite3_column_type(c->st, c->head_texts + i) == SQLITE_NULL;
        h->ind[i] = null ? SQL_NULL_DATA : 0;
        h->v[i] = null ? 0 : (SQLBIGINT)sqlite3_column_int64(c->st, c->head_texts + i);
    }
}

OBX__PRIVATE obx_result obx__fetch(obx__db *db, SQLHSTMT st) {
    obx__sq_cur *c = (obx__sq_cur *)st;
    if (c->state == OBX__SQ_PENDING) {
        c->state = OBX__SQ_ROW;
    } else if (c->state == OBX__SQ_ROW) {
        int rc = sqlite3_step(c->st);
        if (rc != SQLITE_ROW) {
            c->state = OBX__SQ_DONE;
            return rc == SQLITE_DONE ? OBX_EMPTY : obx__sq_fail(db, rc, "sqlite3_step");
        }
    } else {
        return OBX_EMPTY;
    }
    if (c->head) obx__sq_fill_head(c);
    return OBX_OK;
}

OBX__PRIVATE void obx__close(SQLHSTMT st) {
    obx__sq_cur *c = (obx__sq_cur *)st;
    if (!c) return;
    sqlite3_reset(c->st); /* ends its read: a finished statement holds no snapshot */
    c->state = OBX__SQ_IDLE;
    c->head = NULL;
}

OBX__PRIVATE void obx__unbind(SQLHSTMT st) {
    if (st) ((obx__sq_cur *)st)->head = NULL;
}

OBX__PRIVATE obx_result obx__get_text(obx__db *db, SQLHSTMT st, int col, char *out, size_t cap, SQLLEN *ind) {
    sqlite3_stmt *s = ((obx__sq_cur *)st)->st;
    const unsigned char *t = sqlite3_column_text(s, col - 1);
    if (!t && sqlite3_errcode(sqlite3_db_handle(s)) == SQLITE_NOMEM)
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "sqlite3_column_text", "out of memory");
    *ind = t ? (SQLLEN)sqlite3_column_bytes(s, col - 1) : SQL_NULL_DATA;
    if (t) obx__copy(out, cap, (const char *)t);
    return OBX_OK;
}

OBX__PRIVATE obx_result obx__get_i64(obx__db *db, SQLHSTMT st, int col, int64_t *out, int *is_null) {
    sqlite3_stmt *s = ((obx__sq_cur *)st)->st;
    int null = sqlite3_column_type(s, col - 1) == SQLITE_NULL;
    (void)db;
    if (is_null) *is_null = null;
    *out = null ? 0 : (int64_t)sqlite3_column_int64(s, col - 1);
    return OBX_OK;
}

OBX__PRIVATE obx_result obx__get_append(obx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type,
                                        obx__buf *buf, size_t *offset, size_t *out_len) {
    sqlite3_stmt *s = ((obx__sq_cur *)st)->st;
    const void *v;
    size_t n;
    if (sqlite3_column_type(s, col - 1) == SQLITE_NULL) {
        *offset = (size_t)-1;
        if (out_len) *out_len = 0;
        return OBX_OK;
    }
    v = c_type == SQL_C_BINARY ? sqlite3_column_blob(s, col - 1) : (const void *)sqlite3_column_text(s, col - 1);
    n = (size_t)sqlite3_column_bytes(s, col - 1);
    if ((!v && n) || !obx__buf_reserve(db->hooks, buf, n + 1))
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "sqlite3_column", "out of memory");
    if (n) memcpy(buf->data + buf->len, v, n);
    buf->data[buf->len + n] = '\0';
    *offset = buf->len;
    if (out_len) *out_len = n;
    buf->len += n + 1;
    return OBX_OK;
}

OBX__PRIVATE obx_result obx__bind_head(obx__db *db, SQLHSTMT st, obx__row_head *h, int texts, int ints) {
    obx__sq_cur *c = (obx__sq_cur *)st;
    (void)db;
    OBX_ASSERT(texts <= 2 && ints <= OBX__HEAD_INTS);
    c->head = h;
    c->head_texts = texts;
    c->head_ints = ints;
    if (c->state == OBX__SQ_ROW) obx__sq_fill_head(c);
    return OBX_OK;
}

/* Text run once (DDL, settings) is compiled and run by sqlite3_exec; the
 * transaction control of every unit is prepared once per connection
 * (db->tx_stmt), as the statements are: compiling "COMMIT" cost as much as
 * running it. */
OBX__PRIVATE obx_result obx__exec_direct(obx__db *db, const char *sql, const char *where) {
    sqlite3 *h = (sqlite3 *)db->dbc;
    sqlite3_stmt **st = strcmp(sql, "COMMIT") == 0                     ? &db->tx_stmt[1]
                      : strcmp(sql, "ROLLBACK") == 0                   ? &db->tx_stmt[2]
                      : strcmp(sql, "BEGIN") == 0                      ? &db->tx_stmt[3] /* obx__begin_handler */
                      : db->d && db->d->begin_sql && strcmp(sql, db->d->begin_sql) == 0 ? &db->tx_stmt[0]
                                                                       : NULL;
    obx_result r = OBX_OK;
    int rc;
    if (!st) {
        rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? OBX_OK : obx__sq_fail(db, rc, where);
    }
    if (!*st && (rc = sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL)) != SQLITE_OK)
        return obx__sq_fail(db, rc, where);
    rc = sqlite3_step(*st);
    if (rc != SQLITE_DONE) r = obx__sq_fail(db, rc, where); /* before the reset: its message */
    sqlite3_reset(*st);
    return r;
}

OBX__PRIVATE obx_result obx__query_text(obx__db *db, const char *sql, char *out, size_t cap) {
    sqlite3_stmt *st = NULL;
    obx_result r = OBX_OK;
    int rc = sqlite3_prepare_v2((sqlite3 *)db->dbc, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        obx__copy(out, cap, t ? (const char *)t : "");
    } else if (rc == SQLITE_DONE) {
        r = obx__fail(db->err, OBX_ERR_NOT_FOUND, sql, "query returned no row");
    } else {
        r = obx__sq_fail(db, rc, "sqlite3_step");
    }
    sqlite3_finalize(st);
    return r;
}

/* The ODBC commit and rollback of a connection outside a transaction are
 * no-ops; so are these. */
OBX__PRIVATE obx_result obx__end_tran(obx__db *db, SQLSMALLINT completion, const char *where) {
    if (sqlite3_get_autocommit((sqlite3 *)db->dbc)) return OBX_OK;
    return obx__exec_direct(db, completion == SQL_COMMIT ? "COMMIT" : "ROLLBACK", where);
}

OBX__PRIVATE obx_result obx__autocommit_off(obx__db *db) {
    db->autocommit_on = 0; /* never on: every unit here is tx_by_sql */
    return OBX_OK;
}
#endif /* OBX_SQLITE3_API */

/* >> priority: the claim's order (both headers) --------------------------------------- */

/* A due message's rank is its NextAttemptAt less Priority x
 * OBX_PRIORITY_AGING_MS; a claim takes the smallest rank first: the higher
 * priority first among messages due at the same time, and one that has
 * waited k x 10 s longer before one k levels higher, so none starves.
 * Priority 0, the default, ranks by NextAttemptAt alone: unprioritised
 * messages keep their order. The rank is an index of the table's
 * claimable rows (IX_{N}_Claim: SQLite and PostgreSQL an expression index,
 * MariaDB the generated column ClaimRank), walked in order from its start;
 * the walk's range ends where a lowest-priority message due now would rank
 * (now + 50 s), so an idle claim reads no further than what comes due in
 * the next 50 to 100 s, and a claim of a backlog reads its batch. The
 * ORDER BY texts below, with the range that bounds the walk, are the
 * claims' whole order: `c` is the table's alias ("c." or ""). */
#define OBX__PRIORITY_AGING_S "10"   /* OBX_PRIORITY_AGING_MS in seconds */
#define OBX__PRIORITY_HORIZON_S "50" /* -OBX_PRIORITY_MIN levels of aging */
#define OBX__SQLITE_RANK_OF(next, c) next " - " c "Priority * " OBX__PRIORITY_AGING_S "000"
#define OBX__SQLITE_RANK(c) OBX__SQLITE_RANK_OF(c "NextAttemptAt", c)
#define OBX__SQLITE_CLAIM_ORDER(c)                                                                \
    "AND " OBX__SQLITE_RANK(c) " <= {W} + " OBX__PRIORITY_HORIZON_S "000 ORDER BY " OBX__SQLITE_RANK(c)
/* PostgreSQL: timestamptz less an interval is not immutable (a day's
 * length depends on the zone): the rank is UTC wall time, which is. */
#define OBX__PG_RANK_OF(next, c)                                                                  \
    "((" next " AT TIME ZONE 'UTC') - " c "\"Priority\" * interval '" OBX__PRIORITY_AGING_S " seconds')"
#define OBX__PG_RANK(c) OBX__PG_RANK_OF(c "\"NextAttemptAt\"", c)
#define OBX__PG_CLAIM_ORDER(c)                                                                    \
    "AND " OBX__PG_RANK(c) " <= (now() AT TIME ZONE 'UTC') + interval '" OBX__PRIORITY_HORIZON_S " seconds' "  \
    "ORDER BY " OBX__PG_RANK(c)
/* MariaDB (storage layout 2): the VIRTUAL column ReadyRank, the rank of a
 * claimable row and NULL for every other, so that one index of it alone is
 * both the ready index and the claim's order, and a claim moves its entry
 * and the leased index's only (layout 1's indexes all led with Status:
 * each claim and ack moved four). Parked rows keep their time: the last
 * day of 9999 less an interval would overflow. `ready` is the dialect's
 * claimable-row test. VIRTUAL: added to an existing table instantly, its
 * index built online (PERSISTENT would copy the table); a new table makes
 * it PERSISTENT (obx__ddl_text). */
#define OBX__MY_READY_RANK(ready)                                                                 \
    "DATETIME(6) AS (IF(" ready ", IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - "   \
    "INTERVAL (`Priority` * " OBX__PRIORITY_AGING_S ") SECOND), NULL)) VIRTUAL"
#define OBX__MY_CLAIM_ORDER(c)                                                                    \
    "AND " c "`ReadyRank` <= UTC_TIMESTAMP(6) + INTERVAL " OBX__PRIORITY_HORIZON_S " SECOND ORDER BY " c "`ReadyRank`"
/* Layout 2's state indexes (both headers' MariaDB DDL; NextAttemptAt
 * beside the rank: the claim tests it without the row), built online on an
 * existing table; and obx_store_upgrade's step dropping one of layout 1's. */
#define OBX__MY_STATE_INDEXES                                                                     \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_ReadyRank` ON {T} (`ReadyRank`, `NextAttemptAt`) ALGORITHM=INPLACE LOCK=NONE", \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_LeasedUntil` ON {T} (`LeasedUntil`) ALGORITHM=INPLACE LOCK=NONE",           \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_DoneAt` ON {T} (`DoneAt`) ALGORITHM=INPLACE LOCK=NONE",                     \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_DeadAt` ON {T} (`DeadAt`) ALGORITHM=INPLACE LOCK=NONE"
/* The cleanup of Done rows and the count of pending ones (Ready or leased),
 * through the state columns' indexes. */
#define OBX__MY_CLEANUP                                                                           \
    "DELETE FROM {T} WHERE `DoneAt` < UTC_TIMESTAMP(6) - INTERVAL ? * 1000 MICROSECOND ORDER BY `DoneAt` LIMIT ?"
#define OBX__MY_PENDING                                                                           \
    "SELECT (SELECT COUNT(*) FROM {T} WHERE `ReadyRank` IS NOT NULL) + "                          \
    "(SELECT COUNT(*) FROM {T} WHERE `LeasedUntil` IS NOT NULL)"
#define OBX__MY_NO_INDEX(ix)                                                                      \
    "SELECT COUNT(*) = 0 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND " \
    "TABLE_NAME = '{N}' AND INDEX_NAME = 'IX_{N}_" ix "'", "DROP INDEX IF EXISTS `IX_{N}_" ix "` ON {T}", OBX_UPGRADE_DROP_OLD

/* A full row's Priority column; SQL Server's rows have none (it stores the
 * column but claims by due time alone): 0 there. */
OBX__PRIVATE obx_result obx__get_priority(obx__db *db, SQLHSTMT st, int col, int *out) {
    int64_t v = 0;
    obx_result r;
    if (OBX__ONE(db->d)->id == OBX_DIALECT_SQLSERVER) return OBX_OK;
    r = obx__get_i64(db, st, col, &v, NULL);
    if (r == OBX_OK) *out = (int)v;
    return r;
}

/* >> registry of many databases ---------------------------------------------------- */

/* One database's store and its housekeeping schedule. */
typedef struct obx__entry {
    char *id;
    char *connstr;
    void *store;                 /* NULL: listed but not open (down) */
    int64_t next_reap_ms;        /* monotonic; 0 = at once */
    int64_t next_cleanup_ms;
    int64_t next_wake_ms;        /* monotonic: a short claim's wake of every key (obx__wake_missed) */
    int64_t retry_ms;            /* down: the next attempt to open it (monotonic) */
    int seen;                    /* in the latest discovery result: 1 kept, 2 new */
    int failures;                /* dispatch rounds failed in a row (for the log) */
    int open_failures;           /* down: attempts to open it failed in a row */
} obx__entry;

#ifndef OBX_NO_MULTI_STORE
/* An id and its entry: items[at] when at >= 0, down[-1 - at] when below. */
typedef struct obx__slot {
    const char *id;
    int at;
} obx__slot;

/* One attempt to open a down database, run off the dispatching thread: a
 * connect may last a login timeout (a frozen server), under the
 * process-wide connect lock, and the open stores are served meanwhile.
 * The dispatching thread starts it and takes its result; the opening
 * thread touches only this struct (under `lock`) and the provider's
 * template, which nobody changes after create. */
typedef struct obx__opening {
    char *id, *connstr;          /* copies: discovery may drop the entry meanwhile */
    void *store;                 /* the result: NULL when it failed (logged by open) */
    int busy;                    /* an attempt is out (dispatching thread only) */
    int done;                    /* its result is ready (under lock) */
    void *(*open)(void *ctx, const char *id, const char *connstr);
    void *ctx;
#ifndef OBX_NO_THREADS
    int threaded;                /* started on a thread of its own: join it */
    obx__thread_t thread;
    obx__mutex_t lock;
#endif
} obx__opening;

/* The stores of a provider, opened and closed through callbacks so that
 * both headers share the bookkeeping. Used by one thread at a time (the
 * provider's), but for `opening`. */
typedef struct obx__registry {
    const obx__hooks *hooks;
    obx__entry *items;           /* the open stores, in discovery order */
    int count, cap;
    obx__entry *down;            /* listed, not open: each tried again on its own backoff */
    int down_count, down_cap;
    int64_t retry_due_ms;        /* no down entry is due before this (0: look) */
    int64_t retry_max_ms;        /* the longest wait between two attempts to open */
    obx__slot *index;            /* items by id, sorted: lookups in O(log n) */
    int indexed, index_cap;      /* slots in it (below count only when out of memory) */
    obx__opening opening;
    void *(*open)(void *ctx, const char *id, const char *connstr); /* NULL on failure (logged) */
    void (*close)(void *ctx, void *store);
    void *ctx;
    const char *name;            /* for log lines */
} obx__registry;

static int obx__slot_cmp(const void *a, const void *b) {
    return strcmp(((const obx__slot *)a)->id, ((const obx__slot *)b)->id);
}

/* The slot of `id` in slots sorted by id, or -1. */
OBX__PRIVATE int obx__slot_find(const obx__slot *s, int n, const char *id) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(s[mid].id, id);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* The open store of `id`: its index in items, or -1. */
OBX__PRIVATE int obx__registry_find(const obx__registry *r, const char *id) {
    int k = obx__slot_find(r->index, r->indexed, id);
    return k < 0 ? -1 : r->index[k].at;
}

/* Room for `n` entries in *items (capacity *cap). 0: out of memory. */
OBX__PRIVATE int obx__entries_reserve(const obx__hooks *h, obx__entry **items, int *cap, int n) {
    obx__entry *grown;
    int want = *cap ? *cap : 8;
    if (n <= *cap) return 1;
    while (want < n) want = want > INT_MAX / 2 ? n : want * 2;
    grown = (obx__entry *)obx__realloc(h, *items, sizeof *grown * (size_t)want);
    if (!grown) return 0;
    *items = grown;
    *cap = want;
    return 1;
}

/* Sort the index of the open stores again after items changed. 0: out of
 * memory (then lookups find nothing until the next rebuild). */
OBX__PRIVATE int obx__registry_reindex(obx__registry *r) {
    int i;
    r->indexed = 0;
    if (r->count > r->index_cap) {
        obx__slot *grown = (obx__slot *)obx__realloc(r->hooks, r->index, sizeof *grown * (size_t)r->cap);
        if (!grown) return 0;
        r->index = grown;
        r->index_cap = r->cap;
    }
    r->indexed = r->count;
    for (i = 0; i < r->count; i++) {
        r->index[i].id = r->items[i].id;
        r->index[i].at = i;
    }
    if (r->count > 1) qsort(r->index, (size_t)r->count, sizeof *r->index, obx__slot_cmp);
    return 1;
}

OBX__PRIVATE void obx__entry_free(obx__registry *r, obx__entry *e) {
    if (e->store) r->close(r->ctx, e->store);
    obx__free(r->hooks, e->id);
    obx__free(r->hooks, e->connstr);
    memset(e, 0, sizeof *e);
}

/* A database that could not be opened waits 1 s, then twice as long after
 * each failure, up to retry_max_ms, before it is tried again. */
OBX__PRIVATE void obx__registry_failed(obx__registry *r, obx__entry *e) {
    int64_t wait = e->open_failures < 30 ? (int64_t)1000 << e->open_failures : INT64_MAX;
    e->open_failures++;
    if (wait > r->retry_max_ms) wait = r->retry_max_ms;
    e->retry_ms = obx__mono_ms(r->hooks);
    e->retry_ms = e->retry_ms > INT64_MAX - wait ? INT64_MAX : e->retry_ms + wait;
    if (r->retry_due_ms > e->retry_ms) r->retry_due_ms = e->retry_ms;
    obx__log(r->hooks, e->open_failures == 1 ? OBX_LOG_WARN : OBX_LOG_DEBUG, e->id,
             "%s: could not be opened (%d time(s) in a row); trying again in %lld ms", r->name,
             e->open_failures, (long long)wait);
}

/* A database list is usable: every id and connection string given, ids
 * unique (found by sorting: a list may hold OBX_DISCOVER_MAX). Returns 1,
 * 0 (not usable) or -1 (out of memory). */
OBX__PRIVATE int obx__registry_valid(const obx__hooks *h, const obx_database *dbs, int n) {
    obx__slot *s;
    int i, ok = 1;
    for (i = 0; i < n; i++)
        if (!dbs[i].id || !dbs[i].id[0] || !dbs[i].connection_string || !dbs[i].connection_string[0])
            return 0;
    if (n < 2) return 1;
    s = (obx__slot *)obx__alloc(h, sizeof *s * (size_t)n);
    if (!s) return -1;
    for (i = 0; i < n; i++) {
        s[i].id = dbs[i].id;
        s[i].at = i;
    }
    qsort(s, (size_t)n, sizeof *s, obx__slot_cmp);
    for (i = 1; i < n && ok; i++) ok = strcmp(s[i - 1].id, s[i].id) != 0;
    obx__free(h, s);
    return ok;
}

/* The entry for one listed database, found at `at` (a slot's; INT_MIN:
 * new): kept when unchanged (a down one waits for its next attempt),
 * opened again when its connection string changed, else appended (seen =
 * 2) and opened. 0: out of memory. */
OBX__PRIVATE int obx__registry_entry(obx__registry *r, const obx_database *db, int at) {
    obx__entry *e = at == INT_MIN ? NULL : at >= 0 ? &r->items[at] : &r->down[-1 - at];
    if (e && strcmp(e->connstr, db->connection_string) == 0) {
        e->seen = 1; /* unchanged: keep the open store, or the down one's schedule */
        return 1;
    }
    if (e) { /* moved: reopen */
        obx__log(r->hooks, OBX_LOG_INFO, db->id, "%s: connection string changed, reopening", r->name);
        if (e->store) r->close(r->ctx, e->store);
        e->store = NULL;
        e->seen = 1;
        e->open_failures = 0;
    } else {
        if (!obx__entries_reserve(r->hooks, &r->items, &r->cap, r->count + 1)) return 0;
        e = &r->items[r->count];
        memset(e, 0, sizeof *e);
        e->id = obx__strdup(r->hooks, db->id);
        if (!e->id) return 0;
        r->count++;
        e->seen = 2;
    }
    obx__free(r->hooks, e->connstr);
    e->connstr = obx__strdup(r->hooks, db->connection_string);
    if (!e->connstr) return 0;
    e->store = r->open(r->ctx, db->id, db->connection_string);
    e->next_reap_ms = e->next_cleanup_ms = 0;
    if (!e->store) obx__registry_failed(r, e);
    return 1;
}

/* Find each listed database among those known (open or down: `known`
 * has room for them all, and is freed) and update or add its entry
 * (obx__registry_entry); marks every listed one seen. */
OBX__PRIVATE obx_result obx__registry_match(obx__registry *r, const obx_database *dbs, int n,
                                            obx__slot *known) {
    obx_result res = OBX_OK;
    int i, k, nk = r->count + r->down_count;
    for (i = 0; i < nk; i++) {
        obx__entry *e = i < r->count ? &r->items[i] : &r->down[i - r->count];
        known[i].id = e->id;
        known[i].at = i < r->count ? i : -1 - (i - r->count);
        e->seen = 0;
    }
    qsort(known, (size_t)nk, sizeof *known, obx__slot_cmp);
    for (i = 0; i < n && res == OBX_OK; i++) {
        k = obx__slot_find(known, nk, dbs[i].id);
        if (!obx__registry_entry(r, &dbs[i], k < 0 ? INT_MIN : known[k].at)) res = OBX_ERR_NO_MEMORY;
    }
    obx__free(r->hooks, known);
    if (res != OBX_OK) /* out of memory part way: keep what is listed so far, drop nothing */
        for (i = 0; i < r->count + r->down_count; i++) {
            obx__entry *e = i < r->count ? &r->items[i] : &r->down[i - r->count];
            if (!e->seen) e->seen = 1;
        }
    return res;
}

/* After matching: close what is no longer listed, move what did not open
 * to down and what opened to items. Room is reserved first, so that no
 * entry is lost between the two lists. */
OBX__PRIVATE obx_result obx__registry_sort_out(obx__registry *r, int *add, int *drop) {
    obx_result res = OBX_OK;
    int i, j;
    if (!obx__entries_reserve(r->hooks, &r->down, &r->down_cap, r->down_count + r->count) ||
        !obx__entries_reserve(r->hooks, &r->items, &r->cap, r->count + r->down_count))
        res = OBX_ERR_NO_MEMORY;
    for (i = j = 0; i < r->count; i++) {
        obx__entry *e = &r->items[i];
        if (!e->seen) {
            obx__log(r->hooks, OBX_LOG_INFO, e->id, "%s: removed by discovery, closing", r->name);
            (*drop)++;
        } else if (e->store) {
            *add += e->seen == 2;
            if (i != j) r->items[j] = *e;
            j++;
            continue;
        } else if (e->id && e->connstr && r->down_count < r->down_cap) {
            r->down[r->down_count++] = *e; /* not open: tried again on its backoff */
            continue;
        }
        obx__entry_free(r, e);
    }
    r->count = j;
    for (i = j = 0; i < r->down_count; i++) {
        obx__entry *e = &r->down[i];
        if (!e->seen) {
            obx__log(r->hooks, OBX_LOG_INFO, e->id, "%s: removed by discovery", r->name);
            (*drop)++;
            obx__entry_free(r, e);
        } else if (e->store && r->count < r->cap) { /* its new connection string worked */
            (*add)++;
            e->open_failures = 0;
            r->items[r->count++] = *e;
        } else {
            if (i != j) r->down[j] = *e;
            j++;
        }
    }
    r->down_count = j;
    r->retry_due_ms = 0;
    return res;
}

/* Make the registry hold exactly `dbs`: new ids get a store, ids no longer
 * listed are closed, an id whose connection string changed is reopened, and
 * every other store is kept as it is (not reopened). Order is stable: kept
 * stores keep their place, new ones are appended. A listed database that
 * cannot be opened is kept aside (down) and tried again on its own backoff
 * by obx__registry_retry, not at each refresh. *added counts new databases
 * now open, *removed those no longer listed. Returns OBX_OK,
 * OBX_ERR_INVALID_ARG (a NULL or empty id or connection string, a
 * duplicate id: nothing changed) or OBX_ERR_NO_MEMORY. */
OBX__PRIVATE obx_result obx__registry_apply(obx__registry *r, const obx_database *dbs, int n,
                                            int *added, int *removed) {
    int add = 0, drop = 0, valid = obx__registry_valid(r->hooks, dbs, n);
    obx__slot *known;
    obx_result res, sorted;
    if (valid <= 0) return valid < 0 ? OBX_ERR_NO_MEMORY : OBX_ERR_INVALID_ARG;
    known = (obx__slot *)obx__alloc(r->hooks, sizeof *known * (size_t)(r->count + r->down_count + 1));
    if (!known) return OBX_ERR_NO_MEMORY; /* nothing changed */
    res = obx__registry_match(r, dbs, n, known);
    sorted = obx__registry_sort_out(r, &add, &drop);
    if (!obx__registry_reindex(r)) sorted = OBX_ERR_NO_MEMORY;
    if (added) *added = add;
    if (removed) *removed = drop;
    return res != OBX_OK ? res : sorted;
}

#ifndef OBX_NO_THREADS
static void *obx__opening_main(void *arg) {
    obx__opening *o = (obx__opening *)arg;
    void *store = o->open(o->ctx, o->id, o->connstr);
    obx__mutex_lock(&o->lock);
    o->store = store;
    o->done = 1;
    obx__mutex_unlock(&o->lock);
    return NULL;
}
#endif

/* The attempt is over: its store goes to the entry it was for, if that is
 * still down with the same connection string, else it is closed. */
OBX__PRIVATE void obx__registry_take(obx__registry *r) {
    obx__opening *o = &r->opening;
    int i;
#ifndef OBX_NO_THREADS
    if (o->threaded) obx__thread_join(&o->thread);
    o->threaded = 0;
#endif
    for (i = 0; i < r->down_count; i++)
        if (strcmp(r->down[i].id, o->id) == 0 && strcmp(r->down[i].connstr, o->connstr) == 0) break;
    if (i < r->down_count && o->store && obx__entries_reserve(r->hooks, &r->items, &r->cap, r->count + 1)) {
        obx__entry *e = &r->items[r->count++];
        *e = r->down[i];
        e->store = o->store;
        e->next_reap_ms = e->next_cleanup_ms = 0;
        obx__log(r->hooks, OBX_LOG_INFO, e->id, "%s: opened after %d failed attempt(s)", r->name,
                 e->open_failures);
        e->open_failures = e->failures = 0;
        r->down[i] = r->down[--r->down_count];
        if (!obx__registry_reindex(r))
            obx__log(r->hooks, OBX_LOG_ERROR, e->id, "%s: out of memory for the routing index", r->name);
    } else {
        if (o->store) r->close(r->ctx, o->store);
        if (i < r->down_count) obx__registry_failed(r, &r->down[i]);
    }
    obx__free(r->hooks, o->id);
    obx__free(r->hooks, o->connstr);
    o->id = o->connstr = NULL;
    o->store = NULL;
    o->busy = o->done = 0;
}

/* Take the result of the attempt that is out when it is over, then start
 * one for the down database whose wait is over first. Never waits for a
 * connect: with threads the attempt runs on a thread of its own (one at a
 * time: so at most one connect of this provider holds the process-wide
 * connect lock); without, it runs here. */
OBX__PRIVATE void obx__registry_retry(obx__registry *r) {
    obx__opening *o = &r->opening;
    int64_t now, next = INT64_MAX;
    int i, due = -1;
    if (o->busy) {
        int done = 1;
#ifndef OBX_NO_THREADS
        obx__mutex_lock(&o->lock);
        done = o->done;
        obx__mutex_unlock(&o->lock);
#endif
        if (!done) return;
        obx__registry_take(r);
    }
    if (r->down_count == 0) return;
    now = obx__mono_ms(r->hooks);
    if (now < r->retry_due_ms) return;
    for (i = 0; i < r->down_count; i++) {
        if (r->down[i].retry_ms <= now && (due < 0 || r->down[i].retry_ms < r->down[due].retry_ms)) due = i;
        if (r->down[i].retry_ms < next) next = r->down[i].retry_ms;
    }
    if (due < 0) {
        r->retry_due_ms = next;
        return;
    }
    r->retry_due_ms = 0; /* look again at the next call */
    o->id = obx__strdup(r->hooks, r->down[due].id);
    o->connstr = obx__strdup(r->hooks, r->down[due].connstr);
    o->open = r->open;
    o->ctx = r->ctx;
    o->store = NULL;
    o->done = 0;
    o->busy = 1;
    if (!o->id || !o->connstr) { /* counted as a failed attempt */
        obx__free(r->hooks, o->id);
        obx__free(r->hooks, o->connstr);
        o->id = o->connstr = NULL;
        o->busy = 0;
        obx__registry_failed(r, &r->down[due]);
        return;
    }
    r->down[due].retry_ms = INT64_MAX; /* out: not started twice */
#ifndef OBX_NO_THREADS
    o->threaded = obx__thread_create(&o->thread, obx__opening_main, o) == 0;
    if (o->threaded) return;
#endif
    o->store = r->open(r->ctx, o->id, o->connstr);
    obx__registry_take(r);
}

OBX__PRIVATE void obx__registry_init(obx__registry *r) {
#ifndef OBX_NO_THREADS
    obx__mutex_init(&r->opening.lock);
#else
    (void)r;
#endif
}

/* Close every store; an attempt that is out is waited for (at most a login
 * timeout) and its store closed. */
OBX__PRIVATE void obx__registry_free(obx__registry *r) {
    int i;
    for (i = 0; i < r->down_count; i++) obx__entry_free(r, &r->down[i]);
    r->down_count = 0; /* so an attempt that is out closes its store */
    if (r->opening.busy) obx__registry_take(r);
#ifndef OBX_NO_THREADS
    obx__mutex_destroy(&r->opening.lock);
#endif
    for (i = 0; i < r->count; i++) obx__entry_free(r, &r->items[i]);
    obx__free(r->hooks, r->items);
    obx__free(r->hooks, r->down);
    obx__free(r->hooks, r->index);
    r->items = r->down = NULL;
    r->index = NULL;
    r->count = r->cap = r->down_count = r->down_cap = r->indexed = r->index_cap = 0;
}
#endif /* OBX_NO_MULTI_STORE */

/* >> dispatch loop: routes, waiting, waking ---------------------------------------- */

/* Handlers by topic. Stored as a generic function pointer; each header
 * casts back to its own handler type. */
typedef void (*obx__any_fn)(void);
typedef struct obx__route {
    char *topic;                 /* "*" matches every topic */
    obx__any_fn fn;
    void *user;
    int batch;                   /* OBX__ROUTE_BATCH: a batch handler (takes all of a claim's
                                    messages of a topic); OBX__ROUTE_TX, _BATCH_TX: transactional */
} obx__route;

enum { OBX__ROUTE_ONE = 0, OBX__ROUTE_BATCH = 1, OBX__ROUTE_TX = 2, OBX__ROUTE_BATCH_TX = 3 };

typedef struct obx__routes {
    obx__route *items;
    int count, cap;
    int batches;                 /* how many are batch routes, transactional or not (0: the
                                    per-message path only) */
    int txs;                     /* how many are transactional routes */
} obx__routes;

OBX__PRIVATE obx_result obx__routes_add(const obx__hooks *h, obx__routes *r, const char *topic,
                                        obx__any_fn fn, void *user, int batch) {
    if (r->count == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        obx__route *grown = (obx__route *)obx__realloc(h, r->items, sizeof *grown * (size_t)cap);
        if (!grown) return OBX_ERR_NO_MEMORY;
        r->items = grown;
        r->cap = cap;
    }
    r->items[r->count].topic = obx__strdup(h, topic);
    if (!r->items[r->count].topic) return OBX_ERR_NO_MEMORY;
    r->items[r->count].fn = fn;
    r->items[r->count].user = user;
    r->items[r->count].batch = batch;
    r->batches += batch == OBX__ROUTE_BATCH || batch == OBX__ROUTE_BATCH_TX;
    r->txs += batch == OBX__ROUTE_TX;
    r->count++;
    return OBX_OK;
}

OBX__PRIVATE void obx__routes_free(const obx__hooks *h, obx__routes *r) {
    int i;
    for (i = 0; i < r->count; i++) obx__free(h, r->items[i].topic);
    obx__free(h, r->items);
    r->items = NULL;
    r->count = r->cap = r->batches = r->txs = 0;
}

/* The next per-message route for `topic`: exact matches in registration
 * order, then the "*" ones. Start with *cursor = 0; NULL at the end. */
OBX__PRIVATE const obx__route *obx__routes_next(const obx__routes *r, const char *topic,
                                                int *cursor) {
    while (*cursor < 2 * r->count) {
        int pass = *cursor / r->count, i = *cursor % r->count;
        const obx__route *route = &r->items[i];
        int wildcard = route->topic[0] == '*' && route->topic[1] == '\0';
        (*cursor)++;
        if (route->batch) continue;
        if (pass == 0 ? (!wildcard && strcmp(route->topic, topic) == 0) : wildcard) return route;
    }
    return NULL;
}

/* The first route registered for exactly `topic` ("*" only for "*") of the
 * given kind (OBX__ROUTE_*), or NULL. */
OBX__PRIVATE const obx__route *obx__routes_find(const obx__routes *r, const char *topic, int batch) {
    int i;
    for (i = 0; i < r->count; i++)
        if (r->items[i].batch == batch && strcmp(r->items[i].topic, topic) == 0) return &r->items[i];
    return NULL;
}

/* The batch route (transactional or not) for a message of `topic`: its
 * own, else the "*" one when the topic has no per-message handler at all;
 * NULL: per message. */
OBX__PRIVATE const obx__route *obx__routes_batch(const obx__routes *r, const char *topic) {
    const obx__route *b;
    int cursor = 0;
    if (!r->batches) return NULL;
    if ((b = obx__routes_find(r, topic, OBX__ROUTE_BATCH)) != NULL) return b;
    if ((b = obx__routes_find(r, topic, OBX__ROUTE_BATCH_TX)) != NULL) return b;
    if (r->txs && obx__routes_find(r, topic, OBX__ROUTE_TX)) return NULL;
    if (obx__routes_next(r, topic, &cursor)) return NULL;
    if ((b = obx__routes_find(r, "*", OBX__ROUTE_BATCH)) != NULL) return b;
    return obx__routes_find(r, "*", OBX__ROUTE_BATCH_TX);
}

/* The transactional route for a message of `topic`: its own, else the "*"
 * one when the topic has no handler of its own of another kind. */
OBX__PRIVATE const obx__route *obx__routes_tx(const obx__routes *r, const char *topic) {
    const obx__route *t;
    if (!r->txs) return NULL;
    if ((t = obx__routes_find(r, topic, OBX__ROUTE_TX)) != NULL) return t;
    if (obx__routes_find(r, topic, OBX__ROUTE_ONE) || obx__routes_find(r, topic, OBX__ROUTE_BATCH) ||
        obx__routes_find(r, topic, OBX__ROUTE_BATCH_TX))
        return NULL;
    return obx__routes_find(r, "*", OBX__ROUTE_TX);
}

/* Waiting between rounds, interruptible by wake and stop. Without threads
 * or without a POSIX monotonic clock it sleeps in 50 ms slices instead. */
#if defined(OBX_NO_THREADS) || defined(OBX_NO_POSIX_CLOCK)
#define OBX__LOOP_SLICED 1
#endif
typedef struct obx__loop {
    const obx__hooks *hooks;
    volatile int stopping;
    volatile sig_atomic_t *stop_flag; /* the caller's, e.g. set by a signal handler */
    int use_hook_sleep;          /* a custom clock: sleep through it, not a condition variable */
#ifndef OBX__LOOP_SLICED
    obx__mutex_t mutex;
    obx__cond_t cond;
    int woken;
#endif
} obx__loop;

OBX__PRIVATE void obx__loop_init(obx__loop *l, const obx__hooks *h,
                                 volatile sig_atomic_t *stop_flag) {
    l->hooks = h;
    l->stopping = 0;
    l->stop_flag = stop_flag;
    l->use_hook_sleep = h->clock.sleep_ms != obx__default_sleep_ms;
#ifndef OBX__LOOP_SLICED
    obx__mutex_init(&l->mutex);
    obx__cond_init(&l->cond);
    l->woken = 0;
#endif
}

OBX__PRIVATE void obx__loop_destroy(obx__loop *l) {
#ifndef OBX__LOOP_SLICED
    obx__mutex_destroy(&l->mutex);
    obx__cond_destroy(&l->cond);
#else
    (void)l;
#endif
}

OBX__PRIVATE int obx__loop_stopped(obx__loop *l) {
    int stopping;
#ifndef OBX__LOOP_SLICED
    obx__mutex_lock(&l->mutex);
    stopping = l->stopping;
    obx__mutex_unlock(&l->mutex);
#else
    stopping = l->stopping;
#endif
    return stopping || (l->stop_flag && *l->stop_flag);
}

/* Wait up to `ms`, returning early on wake or stop; nonzero when woken. */
OBX__PRIVATE int obx__loop_wait(obx__loop *l, int64_t ms) {
#ifndef OBX__LOOP_SLICED
    if (!l->use_hook_sleep) {
        int woken = 0;
        /* In slices of at most 250 ms: a signal handler's stop_flag does
         * not signal the condition, so it is looked at between slices. */
        while (ms > 0 && !woken) {
            int64_t slice = l->stop_flag && ms > 250 ? 250 : ms;
            obx__deadline deadline;
            if (slice > OBX__WAIT_SLICE_MAX_MS) slice = OBX__WAIT_SLICE_MAX_MS; /* 32-bit time_t */
            obx__cond_deadline(&deadline, slice);
            obx__mutex_lock(&l->mutex);
            while (!l->woken && !l->stopping)
                if (obx__cond_timedwait(&l->cond, &l->mutex, &deadline) != 0) break;
            woken = l->woken;
            l->woken = 0;
            if (l->stopping) ms = 0;
            obx__mutex_unlock(&l->mutex);
            if (l->stop_flag && *l->stop_flag) ms = 0;
            ms -= slice;
        }
        return woken;
    }
#endif
    while (ms > 0 && !obx__loop_stopped(l)) {
        int64_t slice = ms < 50 ? ms : 50;
        obx__sleep_ms(l->hooks, slice);
        ms -= slice;
    }
    return 0;
}

OBX__PRIVATE void obx__loop_wake(obx__loop *l) {
#ifndef OBX__LOOP_SLICED
    obx__mutex_lock(&l->mutex);
    l->woken = 1;
    obx__cond_signal(&l->cond);
    obx__mutex_unlock(&l->mutex);
#else
    (void)l;
#endif
}

OBX__PRIVATE void obx__loop_stop(obx__loop *l) {
#ifndef OBX__LOOP_SLICED
    obx__mutex_lock(&l->mutex);
    l->stopping = 1;
    obx__cond_broadcast(&l->cond);
    obx__mutex_unlock(&l->mutex);
#else
    l->stopping = 1;
#endif
}

/* >> cross-process wake-up: a Unix datagram socket ---------------------------------- */

/* A producer in another process tells a waiting dispatcher that work was
 * committed by sending one byte to the dispatcher's socket path; the
 * database stays the only source of truth (a lost byte costs one poll).
 * POSIX; OBX_NO_WAKE_SOCKET leaves it out, and so does Windows. */
#if !defined(OBX_NO_WAKE_SOCKET) && !defined(_WIN32)
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#define OBX__WAKE_SOCKET 1
#define OBX__WAKE_PATH_MAX ((int)sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
#else
#define OBX__WAKE_SOCKET 0
#define OBX__WAKE_PATH_MAX 107
#endif

/* A wake_path as given in a desc: none, or a path a socket can have. */
OBX__PRIVATE obx_result obx__wake_path_check(obx_error *err, const char *where, const char *path) {
    if (!path) return OBX_OK;
    if (!OBX__WAKE_SOCKET)
#ifdef _WIN32
        return obx__fail(err, OBX_ERR_UNSUPPORTED, where,
                         "no wake socket on Windows (Unix datagram sockets); leave wake_path NULL: "
                         "the dispatcher polls");
#else
        return obx__fail(err, OBX_ERR_UNSUPPORTED, where, "built with OBX_NO_WAKE_SOCKET");
#endif
    if (!path[0] || strlen(path) > (size_t)OBX__WAKE_PATH_MAX)
        return obx__fail(err, OBX_ERR_INVALID_ARG, where,
                         "a socket path of 1..%d bytes, got %lu", OBX__WAKE_PATH_MAX,
                         (unsigned long)strlen(path));
    return OBX_OK;
}

#if OBX__WAKE_SOCKET
OBX__PRIVATE void obx__wake_addr(const char *path, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path, path, strlen(path) + 1); /* length checked by obx__wake_path_check */
}

/* A datagram socket that never blocks and is not inherited by exec. */
OBX__PRIVATE int obx__wake_socket(void) {
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd >= 0 && (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
                    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Send the wake byte to `path`; *fd is the sender's socket, made on first
 * use. Never blocks: no listener, or a full queue (a wake is pending
 * anyway), is not an error. */
OBX__PRIVATE void obx__wake_send(int *fd, const char *path) {
    struct sockaddr_un a;
    if (!path) return;
    if (*fd < 0) *fd = obx__wake_socket();
    if (*fd < 0) return;
    obx__wake_addr(path, &a);
    (void)sendto(*fd, "w", 1, 0, (const struct sockaddr *)&a, (socklen_t)sizeof a);
}

/* 1 when `a` names a socket file nobody listens on (connect says
 * ECONNREFUSED), its device and inode in *st; 0 for anything else: a live
 * socket, a regular file, a socket this process may not write to. */
OBX__PRIVATE int obx__wake_stale(const struct sockaddr_un *a, struct stat *st) {
    int probe, refused;
    if (lstat(a->sun_path, st) != 0 || !S_ISSOCK(st->st_mode) || (probe = obx__wake_socket()) < 0) return 0;
    refused = connect(probe, (const struct sockaddr *)a, (socklen_t)sizeof *a) != 0 && errno == ECONNREFUSED;
    close(probe);
    return refused;
}

/* Replace a stale socket file at `a` and bind `fd` there. Dispatchers take
 * over only holding an flock on the path's directory and remove only the
 * inode they saw refuse a connect; a live socket accepts connects until its
 * owner, after unlinking it, closes it. So two dispatchers racing for one
 * path never remove each other's socket. */
OBX__PRIVATE int obx__wake_take_over(int fd, const struct sockaddr_un *a) {
    char dir[OBX__WAKE_PATH_MAX + 1], *slash;
    struct stat seen, now;
    int dfd, bound = 0;
    obx__copy(dir, sizeof dir, a->sun_path);
    slash = strrchr(dir, '/');
    if (!slash) obx__copy(dir, sizeof dir, ".");
    else slash[slash == dir] = '\0'; /* "/x" -> "/" */
    if ((dfd = open(dir, O_RDONLY | O_CLOEXEC)) < 0) return 0;
    if (flock(dfd, LOCK_EX) == 0) {
        if (obx__wake_stale(a, &seen) && lstat(a->sun_path, &now) == 0 && now.st_dev == seen.st_dev &&
            now.st_ino == seen.st_ino && unlink(a->sun_path) == 0)
            bound = bind(fd, (const struct sockaddr *)a, (socklen_t)sizeof *a) == 0;
        (void)flock(dfd, LOCK_UN);
    }
    close(dfd);
    return bound;
}

/* Bind a socket at `path` to receive wake bytes; *at gets the socket file's
 * device and inode (what obx__wake_unbind may remove). A socket file left by
 * a process that died is replaced; anything else there (a live socket, a
 * file that is not a socket) is left alone (-1 then: this dispatcher polls). */
OBX__PRIVATE int obx__wake_bind(const obx__hooks *h, const char *who, const char *path, struct stat *at) {
    struct sockaddr_un a;
    int fd = obx__wake_socket(), e = 0;
    if (fd < 0) return -1;
    obx__wake_addr(path, &a);
    if (bind(fd, (const struct sockaddr *)&a, (socklen_t)sizeof a) == 0 ||
        ((e = errno) == EADDRINUSE && obx__wake_take_over(fd, &a))) {
        if (lstat(path, at) != 0) memset(at, 0, sizeof *at); /* then never removed */
        return fd;
    }
    if (e != EADDRINUSE)
        obx__log(h, OBX_LOG_WARN, who, "wake_path %s: cannot listen (%s)" OBX__WHY("; this dispatcher relies on polling"),
                 path, strerror(e));
    else
        obx__log(h, OBX_LOG_WARN, who, "wake_path %s: taken (another process listens there, or it is not a"
                 " socket)" OBX__WHY("; this dispatcher relies on polling"), path);
    close(fd);
    return -1;
}

/* Stop listening: remove the socket file only while it is still the one
 * bound (same device and inode), and before closing, so that nobody sees it
 * refuse a connect and takes the path over in between. */
OBX__PRIVATE void obx__wake_unbind(int fd, const char *path, const struct stat *at) {
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_dev == at->st_dev && now.st_ino == at->st_ino) unlink(path);
    close(fd);
}
#else
#define obx__wake_send(fd, path) ((void)(fd), (void)(path))
#endif

typedef struct obx__loop_timing {
    int64_t poll_ms, idle_max_ms, error_ms, startup_ms;
} obx__loop_timing;

/* The wait after the n-th failed round in a row (n >= 1). A transient
 * failure (a lost connection, a server restarting) is retried fast, 100 ms
 * doubling up to 1 s (and never beyond error_ms), so that work resumes
 * within a second or two of the database coming back; other failures wait
 * error_ms. Pure. */
OBX__PRIVATE int64_t obx__error_wait_ms(obx_result r, int n, int64_t error_ms) {
    int64_t wait = 100, cap = error_ms < 1000 ? error_ms : 1000;
    if (r != OBX_ERR_DB_TRANSIENT) return error_ms;
    while (--n > 0 && wait < cap) wait *= 2;
    return wait < cap ? wait : cap;
}

/* Call `round` until stopped: at once after work (OBX_OK), after an empty
 * round wait poll_ms doubling up to idle_max_ms (back to poll_ms on a
 * wake-up), after a failure as obx__error_wait_ms says. A run of failures
 * logs its first at ERROR, then one WARN line a minute, and its end. */
OBX__PRIVATE void obx__loop_run(obx__loop *l, const obx__loop_timing *t,
                                obx_result (*round)(void *ctx), void *ctx, const char *store_id,
                                const obx_error *err) {
    int64_t idle = t->poll_ms, failing_since = 0, next_report = 0;
    int failures = 0;
    /* stop() is final: a stop before run() is not forgotten. */
    if (t->startup_ms > 0) obx__loop_wait(l, t->startup_ms);
    while (!obx__loop_stopped(l)) {
        obx_result r = round(ctx);
        int64_t now = obx__mono_ms(l->hooks), wait;
        if (r >= 0 && failures > 0) {
            obx__log(l->hooks, OBX_LOG_INFO, store_id, "dispatch works again after %d failed round(s), %lld ms",
                     failures, (long long)(now - failing_since));
            failures = 0;
        }
        if (r == OBX_OK) {
            idle = t->poll_ms;
        } else if (r == OBX_EMPTY) {
            if (obx__loop_wait(l, idle)) idle = t->poll_ms; /* a producer spoke */
            else idle = idle > t->idle_max_ms / 2 ? t->idle_max_ms : idle * 2;
        } else {
            if (failures++ == 0) failing_since = next_report = now;
            wait = obx__error_wait_ms(r, failures, t->error_ms);
            if (now >= next_report) {
                obx__log(l->hooks, failures == 1 ? OBX_LOG_ERROR : OBX_LOG_WARN, store_id,
                         "dispatch round failed%s: %s: %s (%s); next try in %lld ms", failures == 1 ? "" : " again",
                         obx__result_str(r), err->message, err->where, (long long)wait);
                next_report = now + 60000;
            }
            obx__loop_wait(l, wait);
        }
    }
}

/* Where a row's envelope strings sit in the read buffer (each header's
 * row offsets hold one). */
typedef struct obx__envelope_offsets {
    size_t tenant, aggregate_type, aggregate_id, headers;
} obx__envelope_offsets;

/* >>common-end core */

/* >>common-begin public */

/* Public faces of the core's pure functions: thin, so the core stays
 * static and both headers can live in one program. */
OBX_API const char *obx_version(void) { return OBX_VERSION_STRING; }
OBX_API const char *obx_result_str(obx_result result) { return obx__result_str(result); }
OBX_API const char *obx_dialect_name(obx_dialect dialect) { return obx__dialect_name(dialect); }
OBX_API int64_t obx_backoff_default_ms(int attempt) { return obx__backoff_default_ms(attempt); }
OBX_API int64_t obx_backoff_jitter_ms(const obx_backoff_policy *policy, int attempt,
                                      uint64_t random_bits) {
    return obx__backoff_jitter_ms(policy, attempt, random_bits);
}
OBX_API void obx_selector_init(obx_selector *selector, obx_selection kind, int store_count) {
    if (selector) obx__selector_init(selector, kind, store_count);
}
OBX_API int obx_selector_next(const obx_selector *selector) {
    return selector ? obx__selector_next(selector) : -1;
}
OBX_API void obx_selector_report(obx_selector *selector, int store, int claimed) {
    if (selector) obx__selector_report(selector, store, claimed);
}
OBX_API int obx_selector_all_idle(const obx_selector *selector) {
    return selector ? obx__selector_all_idle(selector) : 1;
}
OBX_API void obx_selector_resize(obx_selector *selector, int store_count) {
    if (selector) obx__selector_resize(selector, store_count);
}
OBX_API void obx_uuid_v7(obx_uuid_state *state, int64_t unix_ms, uint64_t random_a,
                         uint64_t random_b, char out[37]) {
    if (state && out) obx__uuid_v7(state, unix_ms, random_a, random_b, out);
}
OBX_API int obx_uuid_is_valid(const char *text) { return obx__uuid_is_valid(text); }
OBX_API void obx_guid_text(const obx_guid *guid, char out[37]) {
    if (guid && out) obx__guid_text(guid->bytes, out);
}
OBX_API obx_result obx_identifier_check(const char *name) { return obx__identifier_check(name); }

/* >>common-end public */

/* >> outbox statements ------------------------------------------------------------ */

/* Statement templates. {T} is the quoted, qualified outbox table, {J} and
 * {M} the join and join-member tables, {S} the quoted schema, {N} the bare
 * table name (for derived names), {W} the dialect's "now" in Unix ms.
 *
 * Rule: statements declare their parameters. What each statement binds is
 * declared once, in obx__stmt_args_rows below (count and kinds, the names in
 * its comment), in the same order in every dialect; a dialect's text takes
 * exactly those (markers counted after {O} and the other names are
 * expanded). A new statement or dialect text that disagrees fails at store
 * open in debug builds, at bind (obx__exec), and for every dialect, SQL
 * Server included, in CORE-STMT-PARAMS (make test). */
enum {
    OBX__Q_INSERT,
    OBX__Q_CLAIM,    /* -> message rows */
    OBX__Q_ACK,      /* -> count */
    OBX__Q_ABANDON,  /* -> count */
    OBX__Q_FAIL,     /* -> count */
    OBX__Q_EXTEND,   /* -> count: leases renewed */
    OBX__Q_REAP,     /* -> count */
    OBX__Q_GET,      /* -> message row */
    OBX__Q_CLEANUP,  /* -> count */
    OBX__Q_STATS,    /* -> ready count, oldest ready age in ms */
    OBX__Q_PENDING,  /* -> unfinished messages (Ready or Leased): max_pending's count */
    OBX__Q_INSERT_MANY, /* NULL where the dialect inserts a batch row by row */
    OBX__Q_JOIN_START,
    OBX__Q_JOIN_ATTACH, /* -> rowcount (0: attached before, or no join) */
    OBX__Q_JOIN_REPORT, /* -> rowcount */
    OBX__Q_JOIN_MESSAGE, /* -> its Status, the row locked until the unit ends (an attach and
                            a settle of one message are serialized) */
    OBX__Q_JOIN_GET,    /* -> id, grouping key, expected, completed, failed, status,
                           metadata, created, updated */
    OBX__Q_JOIN_FINISH, /* -> rowcount (0: finished before) */
    OBX__Q_CLAIM_PICK,  /* -> the claim's short rows, locked (FOR UPDATE SKIP LOCKED); where
                           set, the claim is pick, then CLAIM: for dialects without UPDATE ...
                           RETURNING. See obx__claim_pick, obx__claim_picked */
    OBX__Q_CLAIM_READ,  /* -> the rows of these ids the owner holds (where CLAIM marked fewer
                           than were picked) */
    OBX__Q_GAUGES,      /* -> ready count, oldest ready age in ms, in flight, dead, scheduled,
                           expired leases */
    OBX__Q_DEAD_LIST,   /* -> message rows */
    OBX__Q_DEAD_REPLAY, /* -> count */
    OBX__Q_DEAD_PURGE,  /* -> count */
    OBX__Q_MOVE,        /* -> count: to Dead (obx_dead_move) */
    OBX__Q_RUN_NOW,     /* -> count: a waiting Ready message due now (obx_run_now) */
    OBX__Q_CLAIM_HOLD,  /* CLAIM, where a Dead message holds its key (ordering_dead_holds) and
                           the statement cannot say it with {H} (SQL Server's procedure call) */
    OBX__Q_INSERT_KEYED, /* INSERT with an ordering key or an envelope */
    OBX__Q_INSERT_MANY_KEYED, /* INSERT_MANY where a message has an ordering key or an envelope */
    OBX__Q_WAKE,        /* -> count: parked messages whose wake was missed (OBX__PARKED_MS);
                           where WAKE_IDS is set, a read of the ids to wake instead */
    OBX__Q_WAKE_SETTLED, /* -> count: where no trigger can (MariaDB), the wake of the keys
                            of messages an ack or fail just finished (OBX__MY_PARKED); where
                            WAKE_IDS is set, a read of the ids to wake instead */
    OBX__Q_WAKE_IDS,    /* -> count: the parked rows WAKE_SETTLED read, woken */
    OBX__Q_WAKE_AGAIN,  /* -> count: the wake of the keys of messages a dispatcher settled,
                           again (obx__wake_missed); where WAKE_IDS is set, a read of the
                           ids to wake instead */
    OBX__Q_ANALYZE,     /* statistics refreshed where stale (PostgreSQL; see obx_reap) */
    OBX__Q_CLAIM_CHECK, /* -> ids: in the claim's transaction, after it holds its rows, the
                           keyed ones just claimed whose key has another message in flight
                           (PostgreSQL: released by this statement); NULL where claims of a
                           key cannot overlap (SQLite) or the claim itself serialises them */
    OBX__Q_CLAIM_RELEASE, /* -> count: the claim's rows CLAIM_CHECK named, Ready again, the
                             start taken back (MariaDB; PostgreSQL's check does it) */
    OBX__Q_KEY_READ,    /* -> the session's isolation level; before INSERT_KEYED where its own
                           reads of the key would lock (MariaDB): the key's next OrderingSeq
                           and whether it is busy, read without locks into the session's
                           variables the insert reads */
    OBX__Q_INSERT_VALUES, /* a batch without keys as this row repeated (obx__insert_values) */
    OBX__Q_INSERT_VALUES_ENV, /* the same with the envelope and the expiry */
    OBX__Q_INSERT_VALUES_KEYED, /* INSERT_VALUES with ordering keys, their OrderingSeq and parking
                                   computed by the client from KEY_MAXIMA (obx__insert_keyed) */
    OBX__Q_INSERT_VALUES_KEYED_ENV, /* the same with the envelope and the expiry */
    OBX__Q_KEY_MAXIMA,  /* -> per key of a list, in its order, the largest OrderingSeq Ready,
                           in flight and Dead (0: none), read without locks, and the
                           isolation level: a keyed batch's KEY_READ */
    OBX__Q_CLAIM_ACK,   /* -> CLAIM's rows, then the count ACK changed: a dispatcher's ack of
                           its last batch and its next claim, one statement (PostgreSQL;
                           made of ACK and CLAIM at store open, obx__claim_ack_sql) */
    OBX__Q_CLAIM_CARRY, /* -> message rows: CLAIM where it carries keyed acks, run before
                           them in their unit (OBX__ORDERED_CARRY); NULL: after them */
    OBX__Q_OWNED,       /* not a statement: {O} in the others, the rows of an id list the
                           owner holds (the settles' shared condition), written once */
    OBX__Q_COUNT
};

/* The statements SQLite has none of (OBX__SQL: with SQLite the only
 * dialect, the code that runs them folds away); obx__store_prepare_sql
 * asserts that SQLite's rows name none of them. */
#define OBX__SQLITE_LACKS(q)                                                                          \
    ((q) == OBX__Q_CLAIM_PICK || (q) == OBX__Q_CLAIM_READ || (q) == OBX__Q_CLAIM_HOLD ||             \
     (q) == OBX__Q_WAKE || (q) == OBX__Q_WAKE_SETTLED || (q) == OBX__Q_WAKE_IDS ||                    \
     (q) == OBX__Q_WAKE_AGAIN || (q) == OBX__Q_ANALYZE || (q) == OBX__Q_CLAIM_CHECK ||               \
     (q) == OBX__Q_CLAIM_RELEASE || (q) == OBX__Q_KEY_READ || (q) == OBX__Q_INSERT_VALUES ||         \
     (q) == OBX__Q_INSERT_VALUES_ENV || (q) == OBX__Q_CLAIM_ACK || (q) == OBX__Q_INSERT_VALUES_KEYED || \
     (q) == OBX__Q_INSERT_VALUES_KEYED_ENV || (q) == OBX__Q_KEY_MAXIMA)

/* What each statement binds (the letters: obx__args_check; obx__stmt_args
 * gives a dialect's variant). A dead filter is topic, error text, created
 * from, created before, id, and one unused (the inbox's second key). */
static const obx__stmt_row obx__stmt_args_rows[] = {
    {OBX__Q_INSERT, "tttttii"},     /* id, message_id, topic, payload, correlation, due, next_attempt */
    {OBX__Q_INSERT_KEYED, "tttttiittttti" "i"}, /* INSERT's, then the ordering key, tenant, aggregate
                                                    type, aggregate id, headers (JSON), expiry, priority */
    {OBX__Q_INSERT_MANY, "llllll"}, /* lists of: ids, message_ids, topics, payloads, correlations,
                                       dues; or (batch_as_json_rows) "j", one JSON array of rows */
    {OBX__Q_INSERT_MANY_KEYED, "llllllllllll" "l"}, /* seven more lists (JSON rows: seven more
                                                       elements), the last the priorities */
    {OBX__Q_CLAIM, "tii"},          /* owner, lease_seconds, batch; after a CLAIM_PICK, CLAIM_READ's */
    {OBX__Q_CLAIM_HOLD, "tii"},     /* CLAIM's */
    {OBX__Q_CLAIM_PICK, "ii"},      /* batch, window */
    {OBX__Q_CLAIM_READ, "tIl"},     /* owner, lease (unused), ids */
    {OBX__Q_ACK, "ttl"},            /* processed_by, owner, ids */
    {OBX__Q_ABANDON, "iittl"},      /* delay_ms (NULL: default backoff), retries (1, or 0 for a
                                       wait), last_error, owner, ids */
    {OBX__Q_FAIL, "ttl"},           /* last_error, owner, ids */
    {OBX__Q_EXTEND, "itl"},         /* lease_seconds, owner, ids */
    {OBX__Q_REAP, ""},
    {OBX__Q_GET, "t"},              /* id */
    {OBX__Q_CLEANUP, "ii"},         /* retention_ms, batch */
    {OBX__Q_STATS, ""},
    {OBX__Q_PENDING, ""},
    {OBX__Q_GAUGES, ""},
    {OBX__Q_JOIN_START, "ttit"},    /* join_id, grouping_key, expected_steps, metadata */
    {OBX__Q_JOIN_ATTACH, "tt"},     /* message_id, join_id */
    {OBX__Q_JOIN_REPORT, "itt"},    /* status (1 done, 2 failed), join_id, message_id */
    {OBX__Q_JOIN_MESSAGE, "t"},     /* message id */
    {OBX__Q_JOIN_GET, "t"},         /* join_id */
    {OBX__Q_JOIN_FINISH, "it"},     /* status, join_id */
    {OBX__Q_DEAD_LIST, "ttiitTii"}, /* dead filter, limit, offset */
    {OBX__Q_DEAD_REPLAY, "ttiitTII"}, /* dead filter, two unused */
    {OBX__Q_DEAD_PURGE, "ttiitTiI"}, /* dead filter, batch, unused */
    {OBX__Q_MOVE, "tti"},           /* reason, id, in flight too (0/1) */
    {OBX__Q_RUN_NOW, "t"},          /* id */
    {OBX__Q_WAKE, ""},
    {OBX__Q_WAKE_SETTLED, "l"},     /* ids */
    {OBX__Q_WAKE_IDS, "l"},         /* ids */
    {OBX__Q_WAKE_AGAIN, "l"},       /* ids */
    {OBX__Q_ANALYZE, ""},
    {OBX__Q_CLAIM_CHECK, "tl"},     /* owner, ids */
    {OBX__Q_CLAIM_RELEASE, "tl"},   /* owner, ids */
    {OBX__Q_KEY_READ, "t"},         /* the ordering key */
    {OBX__Q_INSERT_VALUES, "tttttii"}, /* one row: INSERT's */
    {OBX__Q_CLAIM_ACK, "ttltii"},   /* ACK's, then CLAIM's */
    {OBX__Q_CLAIM_CARRY, "tiil"},   /* CLAIM's, then the acked ids */
    {OBX__Q_INSERT_VALUES_ENV, "tttttiitttti" "i"}, /* INSERT's, then tenant, aggregate type,
                                                      aggregate id, headers (JSON), expiry, priority */
    {OBX__Q_INSERT_VALUES_KEYED, "tttttii" "ti"}, /* INSERT's (next_attempt in us: the parked
                                                     time where parked), the key, its OrderingSeq */
    {OBX__Q_INSERT_VALUES_KEYED_ENV, "tttttii" "ti" "tttti" "i"}, /* INSERT_VALUES_KEYED's, then
                                                                    VALUES_ENV's */
    {OBX__Q_KEY_MAXIMA, "l"},       /* ordering keys */
    {OBX__Q_COUNT, NULL}};
/* Batch inserts take one JSON array of rows where the dialect reads a batch so. */
#define OBX__ARGS_JSON_ROWS(id) ((id) == OBX__Q_INSERT_MANY || (id) == OBX__Q_INSERT_MANY_KEYED)

/* Ordered delivery per key (obx_new_message.ordering_key).
 * The order of a key is ("OrderingSeq", "Id"). An enqueue sets OrderingSeq
 * to 1 + the largest OrderingSeq of the key's rows that are not Done (plus
 * the row's place in a batch statement), read in the insert itself; Done
 * rows never come back, every other row of the key is counted, so a message
 * enqueued after another's commit sorts after it, whatever the producers'
 * clocks. Two transactions enqueuing one key at the same time may read the
 * same largest value: Id (unique) breaks the tie, so the order is total, and
 * which of the two goes first is as undefined as their commit order.
 * The claim takes a keyed row only when no other row of its key is in
 * flight (Status 1) and none is Ready (Status 0: due later, waiting for a
 * retry) with a smaller (OrderingSeq, Id). Why two workers never start two
 * messages of one key:
 *  - only the smallest Ready row of a key passes, so one claim statement
 *    takes at most one row per key;
 *  - a claim decides from a snapshot, and a row can become the key's head
 *    after it: a producer that read the same largest OrderingSeq commits
 *    late (its smaller Id sorts first), or a dead message is replayed,
 *    while another claim is taking the key's next row. So claims of one
 *    key serialise, and each looks again, after it holds the key, at what
 *    committed before it did:
 *    PostgreSQL: the claim takes a transaction-scoped advisory lock of the
 *    key (OBX__PG_KEY_LOCK; a key another claim holds is skipped this
 *    round, like a locked row), then, in a statement of its own (READ
 *    COMMITTED: a new snapshot, taken after the lock was granted), releases
 *    a row whose key has another message in flight (OBX__Q_CLAIM_CHECK).
 *    Another claim of the key held the lock while we tried (we skip), or
 *    committed before we got it (our check sees it), or locks after we
 *    commit (its check sees us). The lock alone would not do: the claim
 *    statement's snapshot is taken before the lock is granted.
 *    MariaDB: the claim updates its rows (Status 1: the rows and their
 *    index entries locked until commit), then reads the key's in-flight
 *    entries with a locking read (OBX__Q_CLAIM_CHECK, FOR UPDATE NOWAIT),
 *    which reads the latest version and meets another claim's uncommitted
 *    update as a lock: a row of the key in flight releases ours
 *    (OBX__Q_CLAIM_RELEASE), a lock held elsewhere rolls the claim back and
 *    redoes it. Both claims write before they read, so of two overlapping
 *    claims of a key the one that checks second meets the other's row.
 *    SQLite has one writer at a time: a claim sees every commit before it.
 *    SQL Server's READPAST skips a held row while the check, without
 *    READPAST, waits for a claim's uncommitted update of a row of the
 *    same key (or reads its committed version under
 *    READ_COMMITTED_SNAPSHOT, still Ready: blocked).
 *  - the loser of an enqueue race that commits after a later row started,
 *    and a dead message replayed while its successor runs, wait for the
 *    running one: order between overlapping producers is their commit
 *    race's; a producer that commits before it enqueues again is ordered.
 * Dead (Status 3) rows do not hold their key back: the key moves on; a
 * store with ordering_dead_holds counts them as waiting, so its claims
 * leave the key alone until the dead one is replayed or purged. Rows
 * without a key skip the check at its first term. The index of keyed rows
 * that are not Done serves both the insert's largest value and the
 * claim's check (SQLite, PostgreSQL, SQL Server: a partial index; MariaDB
 * has none: a generated column that is NULL for those rows, so rows
 * without a key never change that index). */
/* PostgreSQL: the key's advisory lock, per table (two int4 keys: the
 * table's name hashed, the key hashed; a hash collision only makes a claim
 * skip a key for one round). Held to the claim's commit. */
#define OBX__PG_KEY_LOCK                                                                          \
    "(\"OrderingKey\" IS NULL OR pg_try_advisory_xact_lock(hashtext('{S}.{N}'), hashtext(\"OrderingKey\")))"
/* The id of key k's first Ready row, and whether the key has a row in
 * flight: each the first entry of a range of the index of keyed rows. */
#define OBX__KEY_FIRST_READY(k)                                                                   \
    "(SELECT o.\"Id\" FROM {T} AS o WHERE o.\"OrderingKey\" = " k " AND o.\"Status\" <> 2 AND "             \
    "o.\"Status\" = 0 ORDER BY o.\"OrderingSeq\", o.\"Id\" LIMIT 1)"
#define OBX__KEY_IN_FLIGHT(k)                                                                     \
    "EXISTS (SELECT 1 FROM {T} AS o WHERE o.\"OrderingKey\" = " k " AND o.\"Status\" <> 2 AND "             \
    "o.\"Status\" = 1)"
/* PostgreSQL: whether key k has a row in flight, as a range of the index of
 * keyed rows. "Status" = 1 would prove the predicate of IX_{N}_Leased,
 * which the planner, from statistics of a table with few rows in flight,
 * took instead and walked whole for each key: an ack of 100 keyed messages
 * (its wake) and the claim's check each cost 1.5-2 ms of server time, ten
 * thousand rows compared. The same state as a range proves no partial
 * index but the keyed rows'. `other`: a condition on o ("" for none). */
#define OBX__PG_KEY_IN_FLIGHT_IF(k, other)                                                        \
    "EXISTS (SELECT 1 FROM {T} AS o WHERE o.\"OrderingKey\" = " k " AND o.\"Status\" <> 2 AND "           \
    "o.\"Status\" >= 1 AND o.\"Status\" <= 1" other ")"
#define OBX__PG_KEY_IN_FLIGHT(k) OBX__PG_KEY_IN_FLIGHT_IF(k, "")
#define OBX__PG_KEY_IN_FLIGHT_OTHER(t)                                                           \
    OBX__PG_KEY_IN_FLIGHT_IF(t ".\"OrderingKey\"", " AND o.\"Id\" <> " t ".\"Id\"")
#define OBX__ORDERED_CHECK_IF(dead_waits, busy)                                                   \
    "(c.\"OrderingKey\" IS NULL OR (c.\"Id\" = " OBX__KEY_FIRST_READY("c.\"OrderingKey\"") " " dead_waits      \
    "AND NOT " busy "))"
#define OBX__ORDERED_CHECK(dead_waits) OBX__ORDERED_CHECK_IF(dead_waits, OBX__KEY_IN_FLIGHT("c.\"OrderingKey\""))
/* Ready rows wait: c must be the first Ready row of its key, asked as the
 * first entry of an index range (ORDER BY ... LIMIT 1), which PostgreSQL
 * plans as an index probe whatever the statistics; as "no earlier Ready
 * row exists" it scanned the whole table per candidate once a few keys
 * held most rows. With ordering_dead_holds, Dead ones wait too: no Dead
 * row of the key may come before c. In the claim statements {E} is the
 * store's choice (obx__store_own_names): 3, or NULL, which matches no
 * row and which the planners fold away. */
#define OBX__ORDERED_HEAD OBX__ORDERED_CHECK("")
#define OBX__DEAD_WAITS                                                                           \
    "AND NOT coalesce((SELECT o.\"OrderingSeq\" < c.\"OrderingSeq\" OR (o.\"OrderingSeq\" = "                  \
    "c.\"OrderingSeq\" AND o.\"Id\" < c.\"Id\") FROM {T} AS o WHERE o.\"OrderingKey\" = "                       \
    "c.\"OrderingKey\" AND o.\"Status\" <> 2 AND o.\"Status\" = {E} ORDER BY o.\"OrderingSeq\", "                \
    "o.\"Id\" LIMIT 1), false) "
#define OBX__ORDERED_CLAIM OBX__ORDERED_CHECK(OBX__DEAD_WAITS)
/* A claim that carries keyed acks (OBX__Q_CLAIM_CARRY) runs before them in
 * their transaction: the acked rows (ours, in flight, listed in `acked`, a
 * condition on o) do not make their keys busy to it, so it takes each
 * acked key's next message itself, parked or not, with the checks above;
 * the ack after it then finds those keys busy again and wakes nothing (a
 * probe of the key: SQLite's trigger in its WHEN, its body not run). A key
 * whose next message the claim leaves (the batch full, not due yet) is
 * woken by the ack as before. Without it, every keyed message was written
 * three times on its way out: parked, woken, claimed (docs/PERFORMANCE.md). */
#define OBX__CARRY_BUSY(acked)                                                                    \
    "EXISTS (SELECT 1 FROM {T} AS o WHERE o.\"OrderingKey\" = c.\"OrderingKey\" AND o.\"Status\" <> 2 AND "     \
    "o.\"Status\" = 1 AND NOT (" acked "))"
#define OBX__ORDERED_CARRY(acked) OBX__ORDERED_CHECK_IF(OBX__DEAD_WAITS, OBX__CARRY_BUSY(acked))
/* The same for a key's first Ready row (OBX__CARRIED_HEADS). */
#define OBX__CARRY_HEAD(acked) "(1 = 1 " OBX__DEAD_WAITS "AND NOT " OBX__CARRY_BUSY(acked) ")"
/* The acked keys' first Ready rows (the acked rows' ids in `ids`, ours and
 * in flight: the claim is in the acks' transaction, before them). */
#define OBX__CARRIED_HEADS(ids, owner)                                                            \
    "SELECT " OBX__KEY_FIRST_READY("a.\"OrderingKey\"") " FROM {T} AS a WHERE a.\"Id\" " ids " AND "           \
    "a.\"OwnerToken\" = " owner " AND a.\"Status\" = 1 AND a.\"OrderingKey\" IS NOT NULL"
/* The claim's order: priority with aging (OBX__SQLITE_CLAIM_ORDER and the
 * other dialects', in the common core), alias c. The index IX_{N}_Claim's
 * predicate is the claim's own, IsProcessed too, so that no other
 * statement's planner takes it for the Ready index. PostgreSQL: the claim's
 * due test, in a form no index serves (IS TRUE is no operator an index
 * takes; NextAttemptAt is never NULL): as a plain comparison it let a
 * planner with few statistics take the Ready index's range and sort it
 * (CORE-PLANS, a table analyzed empty), where IX_{N}_Claim is the order. */
#define OBX__PG_DUE "(c.\"NextAttemptAt\" <= now()) IS TRUE"

/* The next OrderingSeq of key `k` (an expression): NULL without a key. One
 * probe per state that counts, each the top of an index range, the state
 * spelled by S: SQLite's is the literal (OBX__STATE), PostgreSQL's a
 * one-row subquery (OBX__PG_STATE). PostgreSQL keeps a prepared
 * statement's generic plan, made at its sixth run, until the table's next
 * ANALYZE. Made while a new table was small and never analyzed, a literal
 * state let it probe the Ready or Leased partial index (the literal proves
 * its predicate) and filter by key, then walk every Ready row per probe
 * as the table grew: 20,000 messages of distinct keys enqueued into a new
 * table at 426 msg/s. A subquery proves no predicate: only the index of
 * keyed rows serves these probes, at any size (CORE-PLANS, its new-table
 * state). The claim's checks keep literals: there the statistics, which
 * the reap refreshes (obx_reap), know how rare a key in flight is, and
 * with a subquery PostgreSQL chose to scan for one. */
#define OBX__STATE(n) #n
#define OBX__PG_STATE(n) "(SELECT " #n ")"
#define OBX__ORDERED_MAX(k, st)                                                                   \
    "coalesce((SELECT max(o.\"OrderingSeq\") FROM {T} AS o WHERE o.\"OrderingKey\" = " k " AND "         \
    "o.\"Status\" <> 2 AND o.\"Status\" = " st "), 0)"
#define OBX__ORDERED_NEXT_S(k, S)                                                                 \
    "CASE WHEN " k " IS NULL THEN NULL ELSE (SELECT max(v) + 1 FROM (SELECT " OBX__ORDERED_MAX(k, S(0))  \
    " AS v UNION ALL SELECT " OBX__ORDERED_MAX(k, S(1)) " UNION ALL SELECT " OBX__ORDERED_MAX(k, S(3))     \
    ") AS m) END"
#define OBX__ORDERED_NEXT(k) OBX__ORDERED_NEXT_S(k, OBX__STATE)

/* The OrderingSeq an insert stores: with OBX_NO_ORDERING_KEYS no key is
 * enqueued, so none (and none of the key's SQL in the build). */
#ifdef OBX_NO_ORDERING_KEYS
#define OBX__SEQ(next) "NULL"
#else
#define OBX__SEQ(next) next
#endif

/* With neither ordering keys nor the envelope, the extended inserts differ
 * from the plain ones only by columns left NULL and the expiry: they take
 * every message, and the plain ones are left out (fewer parameters were
 * all they saved). */
#if defined(OBX_NO_ORDERING_KEYS) && defined(OBX_NO_ENVELOPE)
#define OBX__PLAIN_INSERT 0
#else
#define OBX__PLAIN_INSERT 1
#endif

/* SQLite parks a keyed message enqueued while an earlier one of its key is
 * Ready or in flight: its NextAttemptAt is OBX__PARKED_MS, after any due
 * time, so a claim's walk of the ready index stops before it instead of
 * reading past every message queued behind a busy key (a backlog of a few
 * keys cost each claim the whole backlog). The trigger {N}_OrderingWake2
 * gives the key's first Ready message its place back (its due time, else
 * its enqueue time) when it is parked and nothing of the key is in flight
 * any more: unparked messages of a key always come before its parked ones
 * (a message is parked behind an earlier one, and woken first in order).
 * SQLite has one writer at a time, so an enqueue and a wake never miss
 * each other. Parking is only a shortcut: the claim's check
 * (OBX__ORDERED_HEAD) decides as before; a message another release left
 * unparked is merely read past. `later`: an earlier message of the same
 * key in the same statement. */
#define OBX__PARKED_MS "253402300800000"
#ifdef OBX_NO_ORDERING_KEYS
#define OBX__PARK_S(k, due, later, parked, S) due
#else
#define OBX__PARK_S(k, due, later, parked, S)                                                     \
    "CASE WHEN " k " IS NOT NULL AND (" later " OR " OBX__ORDERED_MAX(k, S(0)) " > 0 OR "               \
    OBX__ORDERED_MAX(k, S(1)) " > 0) THEN " parked " ELSE " due " END"
#endif
#define OBX__PARK(k, due, later, parked) OBX__PARK_S(k, due, later, parked, OBX__STATE)
/* The wake: the key's first Ready row back in its place when it is parked
 * and nothing of the key is in flight; `which` names the row(s). */
#define OBX__UNPARK(parked, which)                                                                \
    "UPDATE {T} SET \"NextAttemptAt\" = coalesce(\"DueTimeUtc\", \"CreatedAt\") WHERE \"NextAttemptAt\" = "  \
    parked " AND \"Id\" " which

/* PostgreSQL parks as SQLite does, but there an enqueue and a settle run at
 * the same time: an enqueue that read the key busy may commit after the
 * last busy message's wake looked for it, and two messages of a key in
 * flight at once (a replay) may each see the other still running. Either
 * leaves a key with only parked messages. Under load it is the common case
 * (4 producers of 5 keys: every key was left so within a second), so a
 * dispatcher's short claim wakes them (obx__wake_missed), and obx_reap
 * (OBX__Q_WAKE) for a program that claims by itself. Locking the key in the
 * enqueue instead would hold a key's running message for as long as any
 * producer's transaction, and a claim skips locked rows. */
#define OBX__PG_PARKED "CAST('10000-01-01 00:00:00+00' AS timestamptz)"
/* As OBX__SQLITE_UNPARKED and OBX__SQLITE_ACKED. */
#define OBX__PG_UNPARKED(c)                                                                       \
    "CASE WHEN " c "\"NextAttemptAt\" = " OBX__PG_PARKED " THEN coalesce(" c "\"DueTimeUtc\", " c "\"CreatedAt\") " \
    "ELSE " c "\"NextAttemptAt\" END"
#define OBX__PG_ACKED "o.\"OwnerToken\" = CAST(?1 AS uuid) AND o.\"Id\" = ANY (CAST(?4 AS uuid[]))"
/* The PostgreSQL wake of the keys `keys` (a query of column k) names the
 * rows by an array, an init plan, so that no statistics make the update
 * walk the table to match them. */
#define OBX__PG_WAKE(keys)                                                                        \
    OBX__UNPARK(OBX__PG_PARKED, "= ANY (ARRAY(SELECT " OBX__KEY_FIRST_READY("pk.k") " FROM (" keys ") AS pk " \
                "WHERE NOT " OBX__PG_KEY_IN_FLIGHT("pk.k") "))")

/* Columns of a message row, in the order obx__read_message expects. */
#define OBX__SQLITE_COLS                                                                  \
    "Id, MessageId, Topic, Payload, CorrelationId, CreatedAt, "     \
    "DueTimeUtc, RetryCount, LastError, Status, ProcessedAt, "          \
    "ProcessedBy, LockedUntil, OwnerToken, NextAttemptAt, Starts, OrderingKey, " \
    "TenantId, AggregateType, AggregateId, Headers, ExpiresAt, Priority"
#define OBX__PG_MS(c) "CAST(floor(EXTRACT(EPOCH FROM \"" c "\") * 1000) AS bigint)"
#define OBX__PG_COLS                                                                      \
    "CAST(\"Id\" AS text), CAST(\"MessageId\" AS text), \"Topic\", \"Payload\", "           \
    "\"CorrelationId\", " OBX__PG_MS("CreatedAt") ", " OBX__PG_MS("DueTimeUtc") ", "        \
    "\"RetryCount\", \"LastError\", \"Status\", " OBX__PG_MS("ProcessedAt") ", "            \
    "\"ProcessedBy\", " OBX__PG_MS("LockedUntil") ", CAST(\"OwnerToken\" AS text), "        \
    OBX__PG_MS("NextAttemptAt") ", \"Starts\", \"OrderingKey\", \"TenantId\", \"AggregateType\", "      \
    "\"AggregateId\", CAST(\"Headers\" AS text), " OBX__PG_MS("ExpiresAt") ", \"Priority\""
/* A claim's short row (obx__read_claimed): what the claim did not set, the
 * fixed-size columns first (bound), then a mask of the optional texts that
 * are not NULL (read only those) with the priority + 8 above its 7 bits,
 * then the texts. nn writes one bit (OBX__NN,
 * or OBX__NN_INT), o and c quote a name. */
#define OBX__NN(col, bit) "(CASE WHEN " col " IS NULL THEN 0 ELSE " bit " END)"
/* SQLite gives a comparison's truth as 1 or 0: a shorter bit there. */
#define OBX__NN_INT(col, bit) "(" col " IS NOT NULL) * " bit
#define OBX__CLAIM_MASK(nn, o, c)                                                                     \
    nn(o "CorrelationId" c, "1") " + " nn(o "LastError" c, "2") " + "                     \
    nn(o "OrderingKey" c, "4") " + " nn(o "TenantId" c, "8") " + "                        \
    nn(o "AggregateType" c, "16") " + " nn(o "AggregateId" c, "32") " + "                 \
    nn(o "Headers" c, "64") " + (" o "Priority" c " + 8) * 128"
#define OBX__SQLITE_CLAIM_COLS                                                                    \
    "Id, MessageId, CreatedAt, DueTimeUtc, RetryCount, LockedUntil, "       \
    "NextAttemptAt, Starts, ExpiresAt, " OBX__CLAIM_MASK(OBX__NN_INT, "", "") ", Topic, "      \
    "Payload, CorrelationId, LastError, OrderingKey, TenantId, AggregateType, " \
    "AggregateId, Headers"
#define OBX__PG_CLAIM_COLS                                                                        \
    "CAST(\"Id\" AS text), CAST(\"MessageId\" AS text), " OBX__PG_MS("CreatedAt") ", "            \
    OBX__PG_MS("DueTimeUtc") ", \"RetryCount\", " OBX__PG_MS("LockedUntil") ", "                   \
    OBX__PG_MS("NextAttemptAt") ", \"Starts\", " OBX__PG_MS("ExpiresAt") ", "                      \
    OBX__CLAIM_MASK(OBX__NN, "\"", "\"") ", \"Topic\", \"Payload\", \"CorrelationId\", \"LastError\", "          \
    "\"OrderingKey\", \"TenantId\", \"AggregateType\", \"AggregateId\", CAST(\"Headers\" AS text)"

/* Crash-loop quarantine (max_starts, {Q}): the claim counts a start
 * ("Starts" + 1) in its own statement; an abandon, the one outcome that
 * makes a message claimable again, takes it back (a retry, a wait, a pause
 * or a release was an outcome); the reap of an expired lease ends the
 * message Dead when it has {Q} starts without an outcome, else makes it
 * Ready. Ready is reached no other way with that many, so the claim needs
 * no condition and an N+1st start never happens, across processes too:
 * the check and the move are one UPDATE of the row. */
#define OBX__CRASH_LOOP "crash loop: claimed {Q} times without an outcome" OBX__WHY(" (the handler crashed or was killed, or its lease expired)")

#ifndef OBX_NO_SQLITE
/* A row's NextAttemptAt as the wake would set it (OBX__UNPARK), and the
 * claim's check of a claim carrying keyed acks (?1 the owner, ?4 their ids). */
#define OBX__SQLITE_UNPARKED(c)                                                                   \
    "iif(" c "NextAttemptAt = " OBX__PARKED_MS ", coalesce(" c "DueTimeUtc, " c "CreatedAt), " c "NextAttemptAt)"
#define OBX__SQLITE_ACKED "o.OwnerToken = ?1 AND o.Id IN (SELECT value FROM json_each(?4))"
/* The dead-letter filter (obx__dead_params): NULL arguments match all. */
#define OBX__SQLITE_DEAD                                                                          \
    "Status = 3 AND Topic = coalesce(?1, Topic) AND (?2 IS NULL OR "                    \
    "instr(coalesce(LastError, ''), ?2) > 0) AND CreatedAt >= coalesce(?3, CreatedAt) "   \
    "AND (?4 IS NULL OR CreatedAt < ?4) AND Id = coalesce(?5, Id)"
static const obx__stmt_row obx__sqlite_outbox_rows[] = {
    {OBX__Q_OWNED, "OwnerToken = ? AND Status = 1 AND Id IN (SELECT value FROM json_each(?))"},
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT,
     "INSERT INTO {T} (Id, MessageId, Topic, Payload, CorrelationId, "
     "DueTimeUtc, NextAttemptAt) VALUES (?, ?, ?, ?, ?, ?, coalesce(?, {W}))"},
#endif
    {OBX__Q_INSERT_KEYED,
     "INSERT INTO {T} (Id, MessageId, Topic, Payload, CorrelationId, "
     "DueTimeUtc, NextAttemptAt, OrderingKey, OrderingSeq, TenantId, AggregateType, "
     "AggregateId, Headers, ExpiresAt, Priority) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
     OBX__PARK("?8", "coalesce(?7, {W})", "0", OBX__PARKED_MS) ", ?8, " OBX__SEQ(OBX__ORDERED_NEXT("?8")) ", ?9, ?10, "
     "?11, ?12, ?13, ?14)"},
    /* sqliteodbc shows RETURNING rows only for statements that start
     * with SELECT or WITH: hence the empty CTE. */
    {OBX__Q_CLAIM,
     "WITH _ AS (SELECT 1) UPDATE {T} SET Status = 1, OwnerToken = ?, "
     "LockedUntil = {W} + CAST(? AS INTEGER) * 1000, Starts = Starts + 1 "
     "WHERE Id IN (SELECT c.Id FROM {T} AS c INDEXED BY \"IX_{N}_Claim\" WHERE c.Status = 0 AND "
     "c.NextAttemptAt <= {W} AND c.IsProcessed = 0 AND " OBX__ORDERED_CLAIM " " OBX__SQLITE_CLAIM_ORDER("c.") " LIMIT ?) "
     "RETURNING " OBX__SQLITE_CLAIM_COLS},
#ifndef OBX_NO_ORDERING_KEYS
    /* CLAIM, carrying keyed acks (OBX__ORDERED_CARRY): the acked keys' next
     * messages (woken in the same update when parked) and the walk of the
     * claim index, in rank order. */
    {OBX__Q_CLAIM_CARRY,
     "WITH _ AS (SELECT 1) UPDATE {T} SET Status = 1, OwnerToken = ?1, "
     "LockedUntil = {W} + CAST(?2 AS INTEGER) * 1000, Starts = Starts + 1, NextAttemptAt = "
     OBX__SQLITE_UNPARKED("") " WHERE Id IN (SELECT Id FROM (SELECT c.Id, " OBX__SQLITE_RANK_OF(OBX__SQLITE_UNPARKED("c."), "c.")
     " AS r FROM {T} AS c WHERE c.Id IN (" OBX__CARRIED_HEADS("IN (SELECT value FROM json_each(?4))", "?1") ") "
     "AND c.Status = 0 AND c.IsProcessed = 0 AND " OBX__SQLITE_UNPARKED("c.") " <= {W} AND " OBX__CARRY_HEAD(OBX__SQLITE_ACKED)
     " UNION SELECT Id, r FROM (SELECT c.Id, " OBX__SQLITE_RANK("c.") " AS r FROM {T} AS c INDEXED BY \"IX_{N}_Claim\" "
     "WHERE c.Status = 0 AND c.NextAttemptAt <= {W} AND c.IsProcessed = 0 AND " OBX__ORDERED_CARRY(OBX__SQLITE_ACKED) " "
     OBX__SQLITE_CLAIM_ORDER("c.") " LIMIT ?3)) ORDER BY r LIMIT ?3) RETURNING " OBX__SQLITE_CLAIM_COLS},
#endif
    {OBX__Q_ACK,
     "UPDATE {T} SET Status = 2, IsProcessed = 1, ProcessedAt = {W}, "
     "ProcessedBy = ?, LockedUntil = NULL "
     "WHERE {O}"},
    {OBX__Q_ABANDON,
     "UPDATE {T} SET NextAttemptAt = {W} + coalesce(?, min(60000, 1000 * (1 << min(RetryCount, 6)))), "
     "RetryCount = RetryCount + ?, LastError = coalesce(?, LastError), "
     "Status = 0, OwnerToken = NULL, LockedUntil = NULL, Starts = max(Starts - 1, 0) "
     "WHERE {O}"},
    {OBX__Q_FAIL,
     "UPDATE {T} SET Status = 3, LockedUntil = NULL, LastError = ? "
     "WHERE {O}"},
    {OBX__Q_EXTEND,
     "UPDATE {T} SET LockedUntil = {W} + CAST(? AS INTEGER) * 1000 "
     "WHERE {O}"},
    {OBX__Q_REAP,
     "UPDATE {T} SET Status = iif(Starts >= {Q}, 3, 0), LastError = "
     "iif(Starts >= {Q}, '" OBX__CRASH_LOOP "', LastError), "
     "OwnerToken = NULL, LockedUntil = NULL WHERE Status = 1 AND LockedUntil < {W}"},
    {OBX__Q_GET,
     "SELECT " OBX__SQLITE_COLS " FROM {T} WHERE Id = ?"},
    {OBX__Q_CLEANUP,
     "DELETE FROM {T} WHERE Id IN (SELECT Id FROM {T} WHERE Status = 2 AND "
     "ProcessedAt < {W} - ? ORDER BY ProcessedAt LIMIT ?)"},
    {OBX__Q_STATS,
     "SELECT COUNT(*), {W} - MIN(NextAttemptAt) FROM {T} "
     "WHERE Status = 0 AND NextAttemptAt <= {W}"},
    {OBX__Q_PENDING,
     "SELECT (SELECT COUNT(*) FROM {T} WHERE Status = 0) + (SELECT COUNT(*) FROM {T} WHERE Status = 1)"},
#ifndef OBX_NO_METRICS_TEXT
    {OBX__Q_GAUGES,
     "SELECT COUNT(*), {W} - MIN(NextAttemptAt), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 1), (SELECT COUNT(*) FROM {T} WHERE Status = 3), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 0 AND NextAttemptAt > {W}), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 1 AND LockedUntil < {W}) "
     "FROM {T} WHERE Status = 0 AND NextAttemptAt <= {W}"},
#endif
    /* A whole batch in one statement: sqliteodbc costs three times the C
     * API per execute, so one execute per row is the slow part. */
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT_MANY,
     "INSERT INTO {T} (Id, MessageId, Topic, Payload, CorrelationId, "
     "DueTimeUtc, NextAttemptAt) SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
     "json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'), "
     "json_extract(value, '$[5]'), coalesce(json_extract(value, '$[5]'), {W}) FROM json_each(?)"},
#endif
    {OBX__Q_INSERT_MANY_KEYED,
     "INSERT INTO {T} (Id, MessageId, Topic, Payload, CorrelationId, "
     "DueTimeUtc, NextAttemptAt, OrderingKey, OrderingSeq, TenantId, AggregateType, "
     "AggregateId, Headers, ExpiresAt, Priority) SELECT json_extract(j.value, '$[0]'), "
     "json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'), "
     "json_extract(j.value, '$[4]'), json_extract(j.value, '$[5]'), "
     OBX__PARK("json_extract(j.value, '$[6]')", "coalesce(json_extract(j.value, '$[5]'), {W})",
               "row_number() OVER (PARTITION BY json_extract(j.value, '$[6]') ORDER BY j.key) > 1", OBX__PARKED_MS) ", "
     "json_extract(j.value, '$[6]'), " OBX__SEQ(OBX__ORDERED_NEXT("json_extract(j.value, '$[6]')")) " + j.key, "
     "json_extract(j.value, '$[7]'), json_extract(j.value, '$[8]'), json_extract(j.value, '$[9]'), "
     "json_extract(j.value, '$[10]'), json_extract(j.value, '$[11]'), json_extract(j.value, '$[12]') "
     "FROM json_each(?) AS j"},
#ifndef OBX_NO_JOIN
    {OBX__Q_JOIN_START,
     "INSERT INTO {J} (JoinId, GroupingKey, ExpectedSteps, Metadata) VALUES (?, ?, ?, ?)"},
    {OBX__Q_JOIN_ATTACH,
     "INSERT INTO {M} (JoinId, OutboxMessageId) SELECT JoinId, ? FROM {J} "
     "WHERE JoinId = ? ON CONFLICT DO NOTHING"},
    {OBX__Q_JOIN_MESSAGE,
     "SELECT Status FROM {T} WHERE Id = ?"},
    {OBX__Q_JOIN_REPORT,
     "UPDATE {M} SET Status = ? WHERE JoinId = ? AND OutboxMessageId = ? AND Status = 0"},
    {OBX__Q_JOIN_GET,
     "SELECT JoinId, GroupingKey, ExpectedSteps, CompletedSteps, FailedSteps, "
     "Status, Metadata, CreatedUtc, LastUpdatedUtc FROM {J} WHERE JoinId = ?"},
    {OBX__Q_JOIN_FINISH,
     "UPDATE {J} SET Status = ?, LastUpdatedUtc = {W} WHERE JoinId = ? AND Status = 0"},
#endif
#ifndef OBX_NO_DEAD_LETTERS
    {OBX__Q_DEAD_LIST,
     "SELECT " OBX__SQLITE_COLS " FROM {T} WHERE " OBX__SQLITE_DEAD " ORDER BY CreatedAt, Id "
     "LIMIT ?7 OFFSET ?8"},
    {OBX__Q_DEAD_REPLAY,
     "UPDATE {T} SET Status = 0, RetryCount = 0, Starts = 0, NextAttemptAt = {W}, "
     "OwnerToken = NULL, LockedUntil = NULL, ExpiresAt = NULL WHERE " OBX__SQLITE_DEAD},
    {OBX__Q_DEAD_PURGE,
     "DELETE FROM {T} WHERE Id IN (SELECT Id FROM {T} WHERE " OBX__SQLITE_DEAD " LIMIT ?7)"},
    {OBX__Q_MOVE,
     "UPDATE {T} SET Status = 3, LastError = ?1, OwnerToken = NULL, LockedUntil = NULL "
     "WHERE Id = ?2 AND (Status = 0 OR (Status = 1 AND ?3 = 1))"},
    {OBX__Q_RUN_NOW,
     "UPDATE {T} SET NextAttemptAt = {W} WHERE Id = ?1 AND Status = 0 AND NextAttemptAt > {W} "
     "AND NextAttemptAt < " OBX__PARKED_MS},
#endif
    {OBX__Q_COUNT, NULL}};

static const char *const obx__sqlite_outbox_ddl[] = {
    /* The integers a claim or a settle reads or writes first, the texts
     * after (docs/design/LAYOUT2.md); older tables keep their order. */
    "CREATE TABLE IF NOT EXISTS {T} (\n"
    "    Id            TEXT NOT NULL PRIMARY KEY,\n"
    "    Status        INTEGER NOT NULL DEFAULT 0,\n"
    "    NextAttemptAt INTEGER NOT NULL DEFAULT ({W}),\n"
    "    LockedUntil   INTEGER NULL,\n"
    "    IsProcessed   INTEGER NOT NULL DEFAULT 0,\n"
    "    ProcessedAt   INTEGER NULL,\n"
    "    RetryCount    INTEGER NOT NULL DEFAULT 0,\n"
    "    Starts        INTEGER NOT NULL DEFAULT 0,\n"
    "    Priority      INTEGER NOT NULL DEFAULT 0,\n"
    "    CreatedAt     INTEGER NOT NULL DEFAULT ({W}),\n"
    "    OwnerToken    TEXT NULL,\n"
    "    MessageId     TEXT NOT NULL,\n"
    "    Topic         TEXT NOT NULL,\n"
    "    Payload       TEXT NOT NULL,\n"
    "    ProcessedBy   TEXT NULL,\n"
    "    LastError     TEXT NULL,\n"
    "    CorrelationId TEXT NULL,\n"
    "    DueTimeUtc    INTEGER NULL{A}\n"
    ")",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Ready\" ON {T} (NextAttemptAt) WHERE Status = 0",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Claim\" ON {T} (" OBX__SQLITE_RANK("") ") WHERE Status = 0 AND IsProcessed = 0",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Ordering\" ON {T} (OrderingKey, Status, OrderingSeq) "
    "WHERE OrderingKey IS NOT NULL AND Status <> 2",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Leased\" ON {T} (LockedUntil) WHERE Status = 1",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Done\" ON {T} (ProcessedAt) WHERE Status = 2",
#ifndef OBX_NO_JOIN
    "CREATE TABLE IF NOT EXISTS {J} (\n"
    "    JoinId         TEXT NOT NULL PRIMARY KEY,\n"
    "    GroupingKey    TEXT NULL,\n"
    "    ExpectedSteps  INTEGER NOT NULL,\n"
    "    CompletedSteps INTEGER NOT NULL DEFAULT 0,\n"
    "    FailedSteps    INTEGER NOT NULL DEFAULT 0,\n"
    "    Status         INTEGER NOT NULL DEFAULT 0,\n"
    "    CreatedUtc     INTEGER NOT NULL DEFAULT ({W}),\n"
    "    LastUpdatedUtc INTEGER NOT NULL DEFAULT ({W}),\n"
    "    Metadata       TEXT NULL\n"
    ")",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}Join_GroupingKey\" ON {J} (GroupingKey) "
    "WHERE GroupingKey IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS {M} (\n"
    "    JoinId          TEXT NOT NULL REFERENCES {J} (JoinId) ON DELETE CASCADE,\n"
    "    OutboxMessageId TEXT NOT NULL,\n"
    "    Status          INTEGER NOT NULL DEFAULT 0,\n"
    "    CreatedUtc      INTEGER NOT NULL DEFAULT ({W}),\n"
    "    PRIMARY KEY (JoinId, OutboxMessageId)\n"
    ")",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}JoinMember_Message\" ON {M} (OutboxMessageId)",
    /* Join counters follow acks and fails in the database itself (OBX-089),
     * in the same transaction (OBX-034/047): a message's state change marks
     * its join members, and a member that leaves Pending counts once. The
     * EXISTS keeps a message that is no member from running the member
     * UPDATE at all: with JoinCount on that table the UPDATE cannot be done
     * in one pass, and each run opened a temporary b-tree (about 40% of
     * an ack's cost, and 8 of its 9 heap allocations per message). A
     * changed trigger gets a new name (2: the EXISTS), the old one dropped
     * after it in the same deploy transaction (CORE-JOIN-STEP-GUARD). */
    "CREATE TRIGGER IF NOT EXISTS \"{N}_JoinStep2\" AFTER UPDATE OF Status ON {T}\n"
    "WHEN NEW.Status IN (2, 3) AND OLD.Status <> NEW.Status\n"
    "    AND EXISTS (SELECT 1 FROM {M} WHERE OutboxMessageId = NEW.Id AND Status = 0)\n"
    "BEGIN\n"
    "    UPDATE {M} SET Status = CASE NEW.Status WHEN 2 THEN 1 ELSE 2 END\n"
    "     WHERE OutboxMessageId = NEW.Id AND Status = 0;\n"
    "END",
    "DROP TRIGGER IF EXISTS \"{N}_JoinStep\"",
    "CREATE TRIGGER IF NOT EXISTS \"{N}_JoinCount\" AFTER UPDATE OF Status ON {M}\n"
    "WHEN OLD.Status = 0 AND NEW.Status IN (1, 2)\n"
    "BEGIN\n"
    "    UPDATE {J} SET\n"
    "        CompletedSteps = CompletedSteps + (NEW.Status = 1 AND CompletedSteps + FailedSteps < ExpectedSteps),\n"
    "        FailedSteps = FailedSteps + (NEW.Status = 2 AND CompletedSteps + FailedSteps < ExpectedSteps),\n"
    "        LastUpdatedUtc = {W}\n"
    "     WHERE JoinId = NEW.JoinId;\n"
    "END",
#endif
    /* Parked messages (OBX__PARKED_MS): the next of the key gets its place.
     * The WHEN tests the key busy: a row trigger's body is a subprogram
     * call per acked row, and in a busy drain the carried claim has taken
     * most acked keys' next message already (OBX__Q_CLAIM_CARRY). 2: the
     * busy test moved into the WHEN; the old trigger is dropped after it,
     * and where both run (an older release's deploy made the old one
     * again) the second wake finds the row unparked and writes nothing. */
    "CREATE TRIGGER IF NOT EXISTS \"{N}_OrderingWake2\" AFTER UPDATE OF Status ON {T}\n"
    "WHEN NEW.OrderingKey IS NOT NULL AND OLD.Status IN (0, 1) AND NEW.Status IN (2, 3)\n"
    "    AND NOT " OBX__KEY_IN_FLIGHT("NEW.OrderingKey") "\n"
    "BEGIN\n"
    "    " OBX__UNPARK(OBX__PARKED_MS, "= " OBX__KEY_FIRST_READY("NEW.OrderingKey")) ";\n"
    "END",
    "DROP TRIGGER IF EXISTS \"{N}_OrderingWake\"",
        NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (obx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * OrderingKey, OrderingSeq: ordered delivery per key (OBX__ORDERED_HEAD).
 * TenantId .. Headers: the envelope (NULL when a message has none).
 * ExpiresAt: expires_utc_ms (NULL: never), checked after a claim.
 * Priority: obx_new_message.priority (OBX__SQLITE_CLAIM_ORDER). */
static const obx__column obx__sqlite_outbox_columns[] = {
    {"Starts", "INTEGER NOT NULL DEFAULT 0"}, {"OrderingKey", "TEXT NULL"}, {"OrderingSeq", "INTEGER NULL"},
    {"TenantId", "TEXT NULL"}, {"AggregateType", "TEXT NULL"}, {"AggregateId", "TEXT NULL"},
    {"Headers", "TEXT NULL"}, {"ExpiresAt", "INTEGER NULL"}, {"Priority", "INTEGER NOT NULL DEFAULT 0"},
    {NULL, NULL}};
static const obx__sqlset obx__sqlite_outbox = {
    "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    obx__sqlite_outbox_ddl,
    obx__sqlite_outbox_rows,
    obx__sqlite_outbox_columns,
    0, /* claim_full_rows: the short row */
    NULL /* contract: none */
};
#define OBX__SQLITE_SET &obx__sqlite_outbox
#endif

/* The dead-letter filter (obx__dead_params): NULL arguments match all. */
#define OBX__PG_DEAD                                                                               \
    "\"Status\" = 3 AND \"Topic\" = coalesce(CAST(?1 AS text), \"Topic\") AND (CAST(?2 AS text) IS NULL "  \
    "OR strpos(coalesce(\"LastError\", ''), CAST(?2 AS text)) > 0) AND \"CreatedAt\" >= "                \
    "coalesce(to_timestamp(CAST(?3 AS bigint) / 1000.0), \"CreatedAt\") AND \"CreatedAt\" < "            \
    "coalesce(to_timestamp(CAST(?4 AS bigint) / 1000.0), 'infinity') AND "                             \
    "\"Id\" = coalesce(CAST(?5 AS uuid), \"Id\")"
/* PostgreSQL: the work-queue operations are also functions in the schema
 * (OBX-112), for SQL users; the library sends the same statements itself,
 * prepared: a function call costs twice a prepared UPDATE. The claim's
 * pick is an ARRAY(...) of ids: an init plan run once, so the update finds
 * its rows by primary key whatever the statistics say (an "IN (SELECT
 * ...)" or a join is planned from them, and on a large table may become a
 * sequential scan). */
#define OBX__PG_BY_IDS "\"OwnerToken\" = CAST(? AS uuid) AND \"Status\" = 1 AND \"Id\" = ANY (CAST(? AS uuid[]))"
/* PostgreSQL: the Ready rows through the claim's index, IX_{N}_Claim, the
 * one ready index of a table this release creates (IX_{N}_Ready, by due
 * time, was a second entry per enqueue and state change: a quarter of a
 * batch insert's server time, docs/PERFORMANCE.md). Its
 * predicate, NOT IsProcessed too, is spelled out; rows Ready and processed
 * are none this library writes. The rank is the due time less at most 50 s
 * (OBX_PRIORITY_MAX levels of aging) and more at most 50 s, so each filter
 * on the due time below is also a range of the index: a walk of what it
 * asks for and of what comes due within 100 s of its edge. On a table of
 * an older release IX_{N}_Claim serves them too, and IX_{N}_Ready stays
 * for the previous release's programs until obx_store_upgrade
 * (OBX_UPGRADE_DROP_OLD) drops it. */
#define OBX__PG_READY "\"Status\" = 0 AND NOT \"IsProcessed\""
#define OBX__PG_RANK_UTC(op, t, sign)                                                             \
    OBX__PG_RANK("") " " op " (" t " AT TIME ZONE 'UTC') " sign " interval '" OBX__PRIORITY_HORIZON_S " seconds'"
#define OBX__PG_READY_DUE                                                                         \
    OBX__PG_READY " AND " OBX__PG_RANK_UTC("<=", "now()", "+") " AND \"NextAttemptAt\" <= now()"
#ifndef OBX_NO_POSTGRESQL
static const obx__stmt_row obx__postgresql_outbox_rows[] = {
    /* Statistics older than half the table (see obx_reap). */
    {OBX__Q_ANALYZE,
     "DO $$ BEGIN IF (SELECT c.relpages < pg_relation_size(c.oid) / current_setting('block_size')::integer / 2 "
     "FROM pg_class AS c WHERE c.oid = CAST('{T}' AS regclass)) THEN ANALYZE {T}; END IF; END $$"},
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT,
     "INSERT INTO {T} (\"Id\", \"MessageId\", \"Topic\", \"Payload\", \"CorrelationId\", "
     "\"DueTimeUtc\", \"NextAttemptAt\") VALUES (CAST(? AS uuid), CAST(? AS uuid), ?, ?, ?, "
     "to_timestamp(CAST(? AS bigint) / 1000.0), "
     "coalesce(to_timestamp(CAST(? AS bigint) / 1000.0), now()))"},
#endif
    {OBX__Q_INSERT_KEYED,
     "INSERT INTO {T} (\"Id\", \"MessageId\", \"Topic\", \"Payload\", \"CorrelationId\", "
     "\"DueTimeUtc\", \"NextAttemptAt\", \"OrderingKey\", \"OrderingSeq\", \"TenantId\", \"AggregateType\", "
     "\"AggregateId\", \"Headers\", \"ExpiresAt\", \"Priority\") VALUES (CAST(?1 AS uuid), "
     "CAST(?2 AS uuid), ?3, ?4, ?5, to_timestamp(CAST(?6 AS bigint) / 1000.0), "
     OBX__PARK_S("CAST(?8 AS varchar)", "coalesce(to_timestamp(CAST(?7 AS bigint) / 1000.0), now())", "false",
                 OBX__PG_PARKED, OBX__PG_STATE)
     ", CAST(?8 AS varchar), " OBX__SEQ(OBX__ORDERED_NEXT_S("CAST(?8 AS varchar)", OBX__PG_STATE)) ", CAST(?9 AS varchar), CAST(?10 AS varchar), "
     "CAST(?11 AS varchar), CAST(CAST(?12 AS text) AS json), to_timestamp(CAST(?13 AS bigint) / 1000.0), "
     "CAST(?14 AS smallint))"},
    {OBX__Q_CLAIM,
     "UPDATE {T} SET \"Status\" = 1, \"OwnerToken\" = CAST(? AS uuid), "
     "\"LockedUntil\" = now() + make_interval(secs => CAST(? AS integer)), \"Starts\" = \"Starts\" + 1 "
     "WHERE \"Id\" = ANY (ARRAY(SELECT c.\"Id\" FROM {T} AS c WHERE c.\"Status\" = 0 AND "
     OBX__PG_DUE " AND NOT c.\"IsProcessed\" AND " OBX__ORDERED_CLAIM " "
     OBX__PG_CLAIM_ORDER("c.") " LIMIT CAST(? AS integer) FOR UPDATE OF c SKIP LOCKED)) "
     "AND " OBX__PG_KEY_LOCK " RETURNING " OBX__PG_CLAIM_COLS},
#ifndef OBX_NO_ORDERING_KEYS
    /* CLAIM, carrying keyed acks (OBX__ORDERED_CARRY), as SQLite's; each
     * part locks its rows (a locking clause is not allowed in a UNION's
     * member, it is in a WITH query's). */
    {OBX__Q_CLAIM_CARRY,
     "UPDATE {T} SET \"Status\" = 1, \"OwnerToken\" = CAST(?1 AS uuid), "
     "\"LockedUntil\" = now() + make_interval(secs => CAST(?2 AS integer)), \"Starts\" = \"Starts\" + 1, "
     "\"NextAttemptAt\" = " OBX__PG_UNPARKED("") " WHERE \"Id\" = ANY (ARRAY(WITH h AS (SELECT c.\"Id\", "
     OBX__PG_RANK_OF(OBX__PG_UNPARKED("c."), "c.") " AS r FROM {T} AS c WHERE c.\"Id\" = ANY (ARRAY("
     OBX__CARRIED_HEADS("= ANY (CAST(?4 AS uuid[]))", "CAST(?1 AS uuid)") ")) AND c.\"Status\" = 0 AND NOT "
     "c.\"IsProcessed\" AND (" OBX__PG_UNPARKED("c.") " <= now()) IS TRUE AND " OBX__CARRY_HEAD(OBX__PG_ACKED) " FOR UPDATE OF c SKIP LOCKED), "
     "w AS (SELECT c.\"Id\", " OBX__PG_RANK("c.") " AS r FROM {T} AS c WHERE c.\"Status\" = 0 AND " OBX__PG_DUE
     " AND NOT c.\"IsProcessed\" AND " OBX__ORDERED_CARRY(OBX__PG_ACKED) " " OBX__PG_CLAIM_ORDER("c.")
     " LIMIT CAST(?3 AS integer) FOR UPDATE OF c SKIP LOCKED) SELECT u.\"Id\" FROM (SELECT * FROM h UNION "
     "SELECT * FROM w) AS u ORDER BY u.r LIMIT CAST(?3 AS integer))) AND " OBX__PG_KEY_LOCK " RETURNING " OBX__PG_CLAIM_COLS},
#endif
    /* See OBX__PG_KEY_LOCK. */
    {OBX__Q_CLAIM_CHECK,
     "UPDATE {T} AS t SET \"Status\" = 0, \"OwnerToken\" = NULL, \"LockedUntil\" = NULL, "
     "\"Starts\" = greatest(t.\"Starts\" - 1, 0) WHERE t.\"OwnerToken\" = CAST(? AS uuid) AND t.\"Status\" = 1 "
     "AND t.\"Id\" = ANY (CAST(? AS uuid[])) AND " OBX__PG_KEY_IN_FLIGHT_OTHER("t") " RETURNING CAST(t.\"Id\" AS text)"},
    {OBX__Q_ACK,
     "UPDATE {T} SET \"Status\" = 2, \"IsProcessed\" = true, \"ProcessedAt\" = now(), "
     "\"ProcessedBy\" = CAST(? AS varchar), \"LockedUntil\" = NULL WHERE " OBX__PG_BY_IDS},
    {OBX__Q_ABANDON,
     "UPDATE {T} SET \"NextAttemptAt\" = now() + make_interval(secs => coalesce(CAST(? AS bigint) / 1000.0, "
     "least(60, 1 << least(\"RetryCount\", 6)))), \"RetryCount\" = \"RetryCount\" + CAST(? AS integer), "
     "\"LastError\" = coalesce(CAST(? AS text), \"LastError\"), \"Status\" = 0, \"OwnerToken\" = NULL, "
     "\"LockedUntil\" = NULL, \"Starts\" = greatest(\"Starts\" - 1, 0) WHERE " OBX__PG_BY_IDS},
    {OBX__Q_FAIL,
     "UPDATE {T} SET \"Status\" = 3, \"LockedUntil\" = NULL, \"LastError\" = CAST(? AS text) "
     "WHERE " OBX__PG_BY_IDS},
    {OBX__Q_EXTEND,
     "UPDATE {T} SET \"LockedUntil\" = now() + make_interval(secs => CAST(? AS bigint)) "
     "WHERE " OBX__PG_BY_IDS},
    {OBX__Q_REAP,
     "UPDATE {T} SET \"Status\" = CASE WHEN \"Starts\" >= {Q} THEN 3 ELSE 0 END, \"LastError\" = "
     "CASE WHEN \"Starts\" >= {Q} THEN '" OBX__CRASH_LOOP "' ELSE \"LastError\" END, "
     "\"OwnerToken\" = NULL, \"LockedUntil\" = NULL WHERE \"Status\" = 1 AND \"LockedUntil\" < now()"},
    {OBX__Q_GET,
     "SELECT " OBX__PG_COLS " FROM {T} WHERE \"Id\" = CAST(? AS uuid)"},
    /* The keys with parked messages: the range of the claim's index where
     * parked rows rank. */
    {OBX__Q_WAKE,
     OBX__PG_WAKE("SELECT DISTINCT \"OrderingKey\" AS k FROM {T} WHERE " OBX__PG_READY " AND "
                  OBX__PG_RANK_UTC(">=", OBX__PG_PARKED, "-") " AND \"NextAttemptAt\" = " OBX__PG_PARKED)},
    {OBX__Q_WAKE_AGAIN,
     OBX__PG_WAKE("SELECT DISTINCT w.\"OrderingKey\" AS k FROM {T} AS w WHERE w.\"Id\" = ANY (CAST(? AS uuid[])) "
                  "AND w.\"OrderingKey\" IS NOT NULL")},
    {OBX__Q_CLEANUP,
     "DELETE FROM {T} WHERE \"Id\" = ANY (ARRAY(SELECT \"Id\" FROM {T} WHERE \"Status\" = 2 "
     "AND \"ProcessedAt\" < now() - make_interval(secs => CAST(? AS bigint) / 1000.0) "
     "ORDER BY \"ProcessedAt\" LIMIT CAST(? AS integer)))"},
    {OBX__Q_STATS,
     "SELECT COUNT(*), CAST(floor(EXTRACT(EPOCH FROM now() - MIN(\"NextAttemptAt\")) * 1000) "
     "AS bigint) FROM {T} WHERE " OBX__PG_READY_DUE},
    {OBX__Q_PENDING,
     "SELECT (SELECT COUNT(*) FROM {T} WHERE " OBX__PG_READY ") + (SELECT COUNT(*) FROM {T} WHERE \"Status\" = 1)"},
#ifndef OBX_NO_METRICS_TEXT
    {OBX__Q_GAUGES,
     "SELECT COUNT(*), CAST(floor(EXTRACT(EPOCH FROM now() - MIN(\"NextAttemptAt\")) * 1000) AS bigint), "
     "(SELECT COUNT(*) FROM {T} WHERE \"Status\" = 1), (SELECT COUNT(*) FROM {T} WHERE \"Status\" = 3), "
     "(SELECT COUNT(*) FROM {T} WHERE " OBX__PG_READY " AND " OBX__PG_RANK_UTC(">", "now()", "-")
     " AND \"NextAttemptAt\" > now()), "
     "(SELECT COUNT(*) FROM {T} WHERE \"Status\" = 1 AND \"LockedUntil\" < now()) "
     "FROM {T} WHERE " OBX__PG_READY_DUE},
#endif
    /* A whole batch in one statement: array literals unnested by the
     * server (psqlODBC's own array binding sends one INSERT per row). */
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT_MANY,
     "INSERT INTO {T} (\"Id\", \"MessageId\", \"Topic\", \"Payload\", \"CorrelationId\", "
     "\"DueTimeUtc\", \"NextAttemptAt\") SELECT u.id, u.mid, u.topic, u.payload, u.corr, "
     "to_timestamp(u.due / 1000.0), coalesce(to_timestamp(u.due / 1000.0), now()) "
     "FROM unnest(CAST(? AS uuid[]), CAST(? AS uuid[]), CAST(? AS text[]), CAST(? AS text[]), "
     "CAST(? AS text[]), CAST(? AS bigint[])) AS u(id, mid, topic, payload, corr, due)"},
#endif
    {OBX__Q_INSERT_MANY_KEYED,
     "INSERT INTO {T} (\"Id\", \"MessageId\", \"Topic\", \"Payload\", \"CorrelationId\", "
     "\"DueTimeUtc\", \"NextAttemptAt\", \"OrderingKey\", \"OrderingSeq\", \"TenantId\", \"AggregateType\", "
     "\"AggregateId\", \"Headers\", \"ExpiresAt\", \"Priority\") SELECT u.id, u.mid, u.topic, "
     "u.payload, u.corr, to_timestamp(u.due / 1000.0), "
     OBX__PARK_S("u.okey", "coalesce(to_timestamp(u.due / 1000.0), now())",
                 "row_number() OVER (PARTITION BY u.okey ORDER BY u.n) > 1", OBX__PG_PARKED, OBX__PG_STATE) ", "
     "u.okey, " OBX__SEQ(OBX__ORDERED_NEXT_S("u.okey", OBX__PG_STATE)) " + u.n - 1, u.tenant, u.atype, u.aid, CAST(u.hdr AS json), "
     "to_timestamp(u.exp / 1000.0), u.prio "
     "FROM unnest(CAST(? AS uuid[]), CAST(? AS uuid[]), CAST(? AS text[]), CAST(? AS text[]), "
     "CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), "
     "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS smallint[])) WITH ORDINALITY "
     "AS u(id, mid, topic, payload, corr, due, okey, tenant, atype, aid, hdr, exp, prio, n)"},
#ifndef OBX_NO_JOIN
    {OBX__Q_JOIN_START,
     "INSERT INTO {J} (\"JoinId\", \"GroupingKey\", \"ExpectedSteps\", \"Metadata\") "
     "VALUES (CAST(? AS uuid), ?, CAST(? AS integer), ?)"},
    {OBX__Q_JOIN_ATTACH,
     "INSERT INTO {M} (\"JoinId\", \"OutboxMessageId\") SELECT \"JoinId\", CAST(? AS uuid) FROM {J} "
     "WHERE \"JoinId\" = CAST(? AS uuid) ON CONFLICT DO NOTHING"},
    {OBX__Q_JOIN_MESSAGE,
     "SELECT \"Status\" FROM {T} WHERE \"Id\" = CAST(? AS uuid) FOR UPDATE"},
    {OBX__Q_JOIN_REPORT,
     "UPDATE {M} SET \"Status\" = CAST(? AS smallint) WHERE \"JoinId\" = CAST(? AS uuid) AND "
     "\"OutboxMessageId\" = CAST(? AS uuid) AND \"Status\" = 0"},
    {OBX__Q_JOIN_GET,
     "SELECT CAST(\"JoinId\" AS text), \"GroupingKey\", \"ExpectedSteps\", \"CompletedSteps\", "
     "\"FailedSteps\", \"Status\", \"Metadata\", " OBX__PG_MS("CreatedUtc") ", " OBX__PG_MS("LastUpdatedUtc")
     " FROM {J} WHERE \"JoinId\" = CAST(? AS uuid)"},
    {OBX__Q_JOIN_FINISH,
     "UPDATE {J} SET \"Status\" = CAST(? AS smallint), \"LastUpdatedUtc\" = now() "
     "WHERE \"JoinId\" = CAST(? AS uuid) AND \"Status\" = 0"},
#endif
#ifndef OBX_NO_DEAD_LETTERS
    {OBX__Q_DEAD_LIST,
     "SELECT " OBX__PG_COLS " FROM {T} WHERE " OBX__PG_DEAD " ORDER BY \"CreatedAt\", \"Id\" "
     "LIMIT CAST(?7 AS bigint) OFFSET CAST(?8 AS bigint)"},
    {OBX__Q_DEAD_REPLAY,
     "UPDATE {T} SET \"Status\" = 0, \"RetryCount\" = 0, \"Starts\" = 0, \"NextAttemptAt\" = now(), "
     "\"OwnerToken\" = NULL, \"LockedUntil\" = NULL, \"ExpiresAt\" = NULL WHERE " OBX__PG_DEAD},
    /* The filter again on the row itself: a row a replay changed while the
     * DELETE waited for it is re-checked on its latest version (READ
     * COMMITTED re-evaluates only the target row's own conditions; the
     * subquery's "Dead" is its snapshot's). */
    {OBX__Q_DEAD_PURGE,
     "DELETE FROM {T} WHERE \"Id\" IN (SELECT \"Id\" FROM {T} WHERE " OBX__PG_DEAD
     " LIMIT CAST(?7 AS bigint)) AND " OBX__PG_DEAD},
    {OBX__Q_MOVE,
     "UPDATE {T} SET \"Status\" = 3, \"LastError\" = CAST(?1 AS text), \"OwnerToken\" = NULL, "
     "\"LockedUntil\" = NULL WHERE \"Id\" = CAST(?2 AS uuid) AND (\"Status\" = 0 OR "
     "(\"Status\" = 1 AND CAST(?3 AS integer) = 1))"},
    {OBX__Q_RUN_NOW,
     "UPDATE {T} SET \"NextAttemptAt\" = now() WHERE \"Id\" = CAST(?1 AS uuid) AND \"Status\" = 0 "
     "AND \"NextAttemptAt\" > now() AND \"NextAttemptAt\" < " OBX__PG_PARKED},
#endif
    {OBX__Q_COUNT, NULL}};

static const char *const obx__postgresql_outbox_ddl[] = {
    "SELECT pg_advisory_xact_lock(hashtext('obx deploy {T}'))",
    "CREATE SCHEMA IF NOT EXISTS {S}",
    /* Fixed-width hot columns first, the texts after (docs/design/LAYOUT2.md:
     * a column after a variable-width one is found by walking the tuple).
     * Tables of older releases keep their order: obxctl rewrite. */
    "CREATE TABLE IF NOT EXISTS {T} (\n"
    "    \"Id\"            uuid NOT NULL PRIMARY KEY,\n"
    "    \"NextAttemptAt\" timestamptz NOT NULL DEFAULT now(),\n"
    "    \"LockedUntil\"   timestamptz NULL,\n"
    "    \"ProcessedAt\"   timestamptz NULL,\n"
    "    \"CreatedAt\"     timestamptz NOT NULL DEFAULT now(),\n"
    "    \"OwnerToken\"    uuid NULL,\n"
    "    \"MessageId\"     uuid NOT NULL,\n"
    "    \"RetryCount\"    integer NOT NULL DEFAULT 0,\n"
    "    \"Starts\"        integer NOT NULL DEFAULT 0,\n"
    "    \"Status\"        smallint NOT NULL DEFAULT 0,\n"
    "    \"Priority\"      smallint NOT NULL DEFAULT 0,\n"
    "    \"IsProcessed\"   boolean NOT NULL DEFAULT false,\n"
    "    \"Topic\"         varchar(255) NOT NULL,\n"
    "    \"Payload\"       text NOT NULL,\n"
    "    \"ProcessedBy\"   varchar(100) NULL,\n"
    "    \"LastError\"     text NULL,\n"
    "    \"CorrelationId\" varchar(255) NULL,\n"
    "    \"DueTimeUtc\"    timestamptz NULL{A}\n"
    ")",
    /* The one ready index (OBX__PG_READY); older tables keep IX_{N}_Ready
     * beside it until obx_store_upgrade drops it. */
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Claim\" ON {T} (" OBX__PG_RANK("") ") WHERE " OBX__PG_READY,
    /* Its order whole (OrderingSeq, Id): a key's first Ready row is one
     * index entry whatever the statistics; IX_{N}_Ordering, which stopped
     * at OrderingSeq, made a plan without statistics sort every Ready row
     * of the key per claim candidate (CORE-PLANS). */
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_OrderingId\" ON {T} (\"OrderingKey\", \"Status\", \"OrderingSeq\", \"Id\") "
    "WHERE \"OrderingKey\" IS NOT NULL AND \"Status\" <> 2",
    "DROP INDEX IF EXISTS {S}.\"IX_{N}_Ordering\"",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Leased\" ON {T} (\"LockedUntil\") WHERE \"Status\" = 1",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}_Done\" ON {T} (\"ProcessedAt\") WHERE \"Status\" = 2",
#ifndef OBX_NO_JOIN
    "CREATE TABLE IF NOT EXISTS {J} (\n"
    "    \"JoinId\"         uuid NOT NULL PRIMARY KEY,\n"
    "    \"GroupingKey\"    varchar(255) NULL,\n"
    "    \"ExpectedSteps\"  integer NOT NULL,\n"
    "    \"CompletedSteps\" integer NOT NULL DEFAULT 0,\n"
    "    \"FailedSteps\"    integer NOT NULL DEFAULT 0,\n"
    "    \"Status\"         smallint NOT NULL DEFAULT 0,\n"
    "    \"CreatedUtc\"     timestamptz NOT NULL DEFAULT now(),\n"
    "    \"LastUpdatedUtc\" timestamptz NOT NULL DEFAULT now(),\n"
    "    \"Metadata\"       text NULL\n"
    ")",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}Join_GroupingKey\" ON {J} (\"GroupingKey\") "
    "WHERE \"GroupingKey\" IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS {M} (\n"
    "    \"JoinId\"          uuid NOT NULL REFERENCES {J} (\"JoinId\") ON DELETE CASCADE,\n"
    "    \"OutboxMessageId\" uuid NOT NULL,\n"
    "    \"Status\"          smallint NOT NULL DEFAULT 0,\n"
    "    \"CreatedUtc\"      timestamptz NOT NULL DEFAULT now(),\n"
    "    PRIMARY KEY (\"JoinId\", \"OutboxMessageId\")\n"
    ")",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}JoinMember_Message\" ON {M} (\"OutboxMessageId\")",
    "CREATE INDEX IF NOT EXISTS \"IX_{N}JoinMember_Pending\" ON {M} (\"OutboxMessageId\") "
    "WHERE \"Status\" = 0",
    /* Join counters follow acks and fails in the database itself (OBX-089),
     * in the same transaction (OBX-034/047). One statement-level trigger per
     * settle marks the members; a member leaving Pending counts once, under
     * the join row's lock, so concurrent acks add up exactly. It runs on
     * every claim and ack: with no member pending anywhere (a look into the
     * empty Pending index) it returns before the join of the transition
     * tables, which made an ack of 100 cost 1.35-1.6 times the ideal's
     * server time instead of about 1.25 (make bench, BENCH_STMTS=1). A
     * member attached concurrently holds the message's row lock until it
     * commits, so it is visible here; one attached before the message was
     * committed locked nothing: JoinLate counts it at its own commit. */
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_JoinStep\"() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "    IF NOT EXISTS (SELECT 1 FROM {M} WHERE \"Status\" = 0) THEN RETURN NULL; END IF;\n"
    "    UPDATE {M} AS m SET \"Status\" = CASE n.\"Status\" WHEN 2 THEN 1 ELSE 2 END\n"
    "      FROM new_rows AS n JOIN old_rows AS o ON o.\"Id\" = n.\"Id\"\n"
    "     WHERE n.\"Status\" IN (2, 3) AND o.\"Status\" <> n.\"Status\"\n"
    "       AND m.\"OutboxMessageId\" = n.\"Id\" AND m.\"Status\" = 0;\n"
    "    RETURN NULL;\n"
    "END $$",
    "CREATE OR REPLACE TRIGGER \"{N}_JoinStep\" AFTER UPDATE ON {T}\n"
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows\n"
    "FOR EACH STATEMENT EXECUTE FUNCTION {S}.\"{N}_JoinStep\"()",
#endif
    /* Parked messages (OBX__PG_PARKED): the next of each key that a
     * statement finished gets its place. One statement per settle, not one
     * per row: a row trigger's call cost an ack of 100 keyed messages 5 ms
     * against 0.6 without; this one about 3, most of it the woken rows'
     * writes. Statements that finish no keyed message leave at the first
     * line. */
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_OrderingWake\"() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE \"OrderingKey\" IS NOT NULL AND \"Status\" IN (2, 3)) THEN\n"
    "        RETURN NULL;\n"
    "    END IF;\n"
    "    " OBX__PG_WAKE("SELECT DISTINCT n.\"OrderingKey\" AS k FROM new_rows AS n JOIN old_rows AS p ON "
                      "p.\"Id\" = n.\"Id\" WHERE n.\"OrderingKey\" IS NOT NULL AND n.\"Status\" IN (2, 3) AND "
                      "p.\"Status\" IN (0, 1)") ";\n"
    "    RETURN NULL;\n"
    "END $$",
    "CREATE OR REPLACE TRIGGER \"{N}_OrderingWake\" AFTER UPDATE ON {T}\n"
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows\n"
    "FOR EACH STATEMENT EXECUTE FUNCTION {S}.\"{N}_OrderingWake\"()",
#ifndef OBX_NO_JOIN
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_JoinCount\"() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "    UPDATE {J} SET\n"
    "        \"CompletedSteps\" = \"CompletedSteps\" + CASE WHEN NEW.\"Status\" = 1 AND \"CompletedSteps\" + \"FailedSteps\" < \"ExpectedSteps\" THEN 1 ELSE 0 END,\n"
    "        \"FailedSteps\" = \"FailedSteps\" + CASE WHEN NEW.\"Status\" = 2 AND \"CompletedSteps\" + \"FailedSteps\" < \"ExpectedSteps\" THEN 1 ELSE 0 END,\n"
    "        \"LastUpdatedUtc\" = now()\n"
    "     WHERE \"JoinId\" = NEW.\"JoinId\";\n"
    "    RETURN NULL;\n"
    "END $$",
    "CREATE OR REPLACE TRIGGER \"{N}_JoinCount\" AFTER UPDATE OF \"Status\" ON {M}\n"
    "FOR EACH ROW WHEN (OLD.\"Status\" = 0 AND NEW.\"Status\" IN (1, 2))\n"
    "EXECUTE FUNCTION {S}.\"{N}_JoinCount\"()",
    /* An attach whose message it could not see (enqueued in a transaction
     * not yet committed) locked nothing: that message may be committed,
     * claimed and settled before the attach commits, and the settle's
     * JoinStep cannot see the uncommitted member. So at the attach's
     * commit (a deferred trigger) the message row is locked, waiting for a
     * settle in progress, and read anew (READ COMMITTED: each statement
     * its own snapshot): already finished, the member is counted here; not
     * yet, the settle that comes later sees the committed member. The
     * guard Status = 0 makes the two paths count once. */
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_JoinLate\"() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "DECLARE st smallint;\n"
    "BEGIN\n"
    "    SELECT \"Status\" INTO st FROM {T} WHERE \"Id\" = NEW.\"OutboxMessageId\" FOR UPDATE;\n"
    "    IF st IN (2, 3) THEN\n"
    "        UPDATE {M} SET \"Status\" = CASE st WHEN 2 THEN 1 ELSE 2 END\n"
    "         WHERE \"JoinId\" = NEW.\"JoinId\" AND \"OutboxMessageId\" = NEW.\"OutboxMessageId\" AND \"Status\" = 0;\n"
    "    END IF;\n"
    "    RETURN NULL;\n"
    "END $$",
    /* No OR REPLACE for a constraint trigger: created where missing. */
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{N}_JoinLate' AND "
    "tgrelid = CAST('{M}' AS regclass)) THEN CREATE CONSTRAINT TRIGGER \"{N}_JoinLate\" AFTER INSERT ON {M} "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {S}.\"{N}_JoinLate\"(); END IF; END $$",
#endif
    /* The library's claim as one call: the key lock, then the check in a
     * statement of its own (plpgsql at READ COMMITTED: a new snapshot per
     * statement), as OBX__Q_CLAIM and OBX__Q_CLAIM_CHECK, the check's key
     * probe the same range (OBX-112-KEY-PROBE). */
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_Claim\"(p_owner uuid, p_lease_seconds integer, "
    "p_batch integer)\n"
    "RETURNS SETOF {T} LANGUAGE plpgsql AS $$\n"
    "DECLARE v_ids uuid[];\n"
    "BEGIN\n"
    "    WITH u AS (UPDATE {T} SET \"Status\" = 1, \"OwnerToken\" = p_owner,\n"
    "           \"LockedUntil\" = now() + make_interval(secs => p_lease_seconds), \"Starts\" = \"Starts\" + 1\n"
    "     WHERE \"Id\" = ANY (ARRAY(\n"
    "        SELECT c.\"Id\" FROM {T} AS c\n"
    "         WHERE c.\"Status\" = 0 AND " OBX__PG_DUE " AND NOT c.\"IsProcessed\"\n"
    "           AND " OBX__ORDERED_HEAD "\n"
    "           " OBX__PG_CLAIM_ORDER("c.") " LIMIT p_batch\n"
    "           FOR UPDATE OF c SKIP LOCKED)) AND " OBX__PG_KEY_LOCK "\n"
    "    RETURNING \"Id\") SELECT array_agg(\"Id\") INTO v_ids FROM u;\n"
    "    UPDATE {T} AS t SET \"Status\" = 0, \"OwnerToken\" = NULL, \"LockedUntil\" = NULL,\n"
    "           \"Starts\" = greatest(t.\"Starts\" - 1, 0)\n"
    "     WHERE t.\"Id\" = ANY (v_ids) AND t.\"OwnerToken\" = p_owner AND t.\"Status\" = 1\n"
    "       AND " OBX__PG_KEY_IN_FLIGHT_OTHER("t") ";\n"
    "    RETURN QUERY SELECT * FROM {T} WHERE \"Id\" = ANY (v_ids) AND \"OwnerToken\" = p_owner AND \"Status\" = 1;\n"
    "END $$",
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_Ack\"(p_processed_by varchar, p_owner uuid, "
    "p_ids uuid[])\n"
    "RETURNS integer LANGUAGE sql AS $$\n"
    "    WITH changed AS (\n"
    "        UPDATE {T} SET \"Status\" = 2, \"IsProcessed\" = true, \"ProcessedAt\" = now(),\n"
    "               \"ProcessedBy\" = p_processed_by, \"LockedUntil\" = NULL\n"
    "         WHERE \"OwnerToken\" = p_owner AND \"Status\" = 1 AND \"Id\" = ANY (p_ids)\n"
    "        RETURNING 1)\n"
    "    SELECT CAST(count(*) AS integer) FROM changed\n"
    "$$",
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_Abandon\"(p_retries integer, p_last_error text, "
    "p_delay_ms bigint, p_owner uuid, p_ids uuid[])\n"
    "RETURNS integer LANGUAGE sql AS $$\n"
    "    WITH changed AS (\n"
    "        UPDATE {T} SET \"Status\" = 0, \"OwnerToken\" = NULL, \"LockedUntil\" = NULL,\n"
    "               \"Starts\" = greatest(\"Starts\" - 1, 0), \"RetryCount\" = \"RetryCount\" + p_retries,\n"
    "               \"LastError\" = coalesce(p_last_error, \"LastError\"),\n"
    "               \"NextAttemptAt\" = now() + make_interval(secs => coalesce(p_delay_ms / 1000.0,\n"
    "                   least(60, 1 << least(\"RetryCount\", 6))))\n"
    "         WHERE \"OwnerToken\" = p_owner AND \"Status\" = 1 AND \"Id\" = ANY (p_ids)\n"
    "        RETURNING 1)\n"
    "    SELECT CAST(count(*) AS integer) FROM changed\n"
    "$$",
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_Fail\"(p_last_error text, p_owner uuid, p_ids uuid[])\n"
    "RETURNS integer LANGUAGE sql AS $$\n"
    "    WITH changed AS (\n"
    "        UPDATE {T} SET \"Status\" = 3, \"LockedUntil\" = NULL, \"LastError\" = p_last_error\n"
    "         WHERE \"OwnerToken\" = p_owner AND \"Status\" = 1 AND \"Id\" = ANY (p_ids)\n"
    "        RETURNING 1)\n"
    "    SELECT CAST(count(*) AS integer) FROM changed\n"
    "$$",
    /* The first release's took no argument: dropped, or a call without
     * one would be ambiguous. */
    "DROP FUNCTION IF EXISTS {S}.\"{N}_ReapExpired\"()",
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_ReapExpired\"(p_max_starts integer DEFAULT 3)\n"
    "RETURNS integer LANGUAGE sql AS $$\n"
    "    WITH changed AS (\n"
    "        UPDATE {T} SET \"Status\" = CASE WHEN \"Starts\" >= p_max_starts THEN 3 ELSE 0 END,\n"
    "               \"LastError\" = CASE WHEN \"Starts\" >= p_max_starts THEN 'crash loop: claimed '\n"
    "                   || p_max_starts || ' times without an outcome (the handler crashed or was killed, '\n"
    "                   || 'or its lease expired)' ELSE \"LastError\" END,\n"
    "               \"OwnerToken\" = NULL, \"LockedUntil\" = NULL\n"
    "         WHERE \"Status\" = 1 AND \"LockedUntil\" < now()\n"
    "        RETURNING 1)\n"
    "    SELECT CAST(count(*) AS integer) FROM changed\n"
    "$$",
    "CREATE OR REPLACE FUNCTION {S}.\"{N}_Cleanup\"(p_retention_ms bigint, p_batch integer)\n"
    "RETURNS integer LANGUAGE sql AS $$\n"
    "    WITH gone AS (\n"
    "        DELETE FROM {T} WHERE \"Id\" IN (\n"
    "            SELECT \"Id\" FROM {T} WHERE \"Status\" = 2\n"
    "               AND \"ProcessedAt\" < now() - make_interval(secs => p_retention_ms / 1000.0)\n"
    "             ORDER BY \"ProcessedAt\" LIMIT p_batch)\n"
    "        RETURNING 1)\n"
    "    SELECT CAST(count(*) AS integer) FROM gone\n"
    "$$",
        NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (obx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * OrderingKey, OrderingSeq: ordered delivery per key (OBX__ORDERED_HEAD).
 * TenantId .. Headers: the envelope; json keeps the text as written.
 * ExpiresAt: expires_utc_ms (NULL: never), checked after a claim.
 * Priority: obx_new_message.priority (OBX__PG_CLAIM_ORDER). */
static const obx__column obx__postgresql_outbox_columns[] = {
    {"Starts", "integer NOT NULL DEFAULT 0"}, {"OrderingKey", "varchar(255) NULL"},
    {"OrderingSeq", "bigint NULL"}, {"TenantId", "varchar(64) NULL"}, {"AggregateType", "varchar(64) NULL"},
    {"AggregateId", "varchar(128) NULL"}, {"Headers", "json NULL"},
    {"ExpiresAt", "timestamptz NULL"}, {"Priority", "smallint NOT NULL DEFAULT 0"},
    {NULL, NULL}};
/* obx_store_upgrade (OBX_UPGRADE_DROP_OLD) on a table of an older release:
 * IX_{N}_Ready, which the previous release's stats and wake read (without
 * it they scan the table), dropped. A plain DROP INDEX: the step runs in
 * the upgrade's transaction, where DROP INDEX CONCURRENTLY cannot; its
 * ACCESS EXCLUSIVE lock on the table is for the catalog change alone (no
 * data is read), taken within the 5 s lock wait as deploy's. */
static const obx__contract obx__postgresql_outbox_contract[] = {
    {"SELECT CAST(to_regclass('{S}.\"IX_{N}_Ready\"') IS NULL AS integer)",
     "DROP INDEX IF EXISTS {S}.\"IX_{N}_Ready\"", OBX_UPGRADE_DROP_OLD},
    {NULL, NULL, 0}};
static const obx__sqlset obx__postgresql_outbox = {
    "now()",
    obx__postgresql_outbox_ddl,
    obx__postgresql_outbox_rows,
    obx__postgresql_outbox_columns,
    0, /* claim_full_rows: the short row */
    obx__postgresql_outbox_contract
};
#define OBX__POSTGRESQL_SET &obx__postgresql_outbox
#endif

/* DATETIME(6) holds UTC; these never pass through the session's time zone
 * (UNIX_TIMESTAMP and FROM_UNIXTIME would, on a caller's connection too). */
#define OBX__MY_MS(c) "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `" c "`) DIV 1000 AS SIGNED)"
#define OBX__MY_FROM_MS(p) "TIMESTAMPADD(MICROSECOND, " p " * 1000, '1970-01-01 00:00:00')"
#define OBX__MY_COLS                                                                        \
    "`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, " OBX__MY_MS("CreatedAt") ", "   \
    OBX__MY_MS("DueTimeUtc") ", `RetryCount`, `LastError`, `Status`, " OBX__MY_MS("ProcessedAt") \
    ", `ProcessedBy`, " OBX__MY_MS("LockedUntil") ", `OwnerToken`, " OBX__MY_NEXT_ATTEMPT_MS \
    ", `Starts`, `OrderingKey`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`, " OBX__MY_MS("ExpiresAt") \
    ", `Priority`"
/* A claim's short row with `locked` as its lease: the read-back's stored
 * one, or the pick's time (OBX__MY_NOW_MS; obx__claim_picked adds the
 * lease, and Starts + 1, to the row the pick read before its UPDATE). */
#define OBX__MY_CLAIM_COLS_AT(locked)                                                             \
    "`Id`, `MessageId`, " OBX__MY_MS("CreatedAt") ", " OBX__MY_MS("DueTimeUtc") ", `RetryCount`, "   \
    locked ", " OBX__MY_MS("NextAttemptAt") ", `Starts`, " OBX__MY_MS("ExpiresAt") \
    ", " OBX__CLAIM_MASK(OBX__NN, "`", "`") ", `Topic`, `Payload`, `CorrelationId`, `LastError`, `OrderingKey`, " \
    "`TenantId`, `AggregateType`, `AggregateId`, `Headers`"
#define OBX__MY_CLAIM_COLS OBX__MY_CLAIM_COLS_AT(OBX__MY_MS("LockedUntil"))
#define OBX__MY_NOW_MS "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
/* Ordered delivery (see OBX__ORDERED_HEAD): `OrderingLive` is the key of a
 * row that is not Done, `OrderingState` its Status, both else NULL. */
#define OBX__MY_ORDERED_CHECK(waits)                                                              \
    "(c.`OrderingKey` IS NULL OR (NOT EXISTS (SELECT 1 FROM {T} AS o WHERE o.`OrderingLive` = "      \
    "c.`OrderingKey` AND o.`OrderingState` " waits " AND o.`OrderingSeq` <= c.`OrderingSeq` AND "           \
    "(o.`OrderingSeq` < c.`OrderingSeq` OR o.`Id` < c.`Id`)) AND NOT EXISTS (SELECT 1 FROM {T} AS o "  \
    "WHERE o.`OrderingLive` = c.`OrderingKey` AND o.`OrderingState` = 1)))"
#define OBX__MY_ORDERED_MAX(k, st)                                                                \
    "COALESCE((SELECT MAX(o.`OrderingSeq`) FROM {T} AS o WHERE o.`OrderingLive` = " k " AND "        \
    "o.`OrderingState` = " st "), 0)"
#define OBX__MY_ORDERED_NEXT(k)                                                                   \
    "IF(" k " IS NULL, NULL, GREATEST(" OBX__MY_ORDERED_MAX(k, "0") ", " OBX__MY_ORDERED_MAX(k, "1")    \
    ", " OBX__MY_ORDERED_MAX(k, "3") ") + 1)"
/* MariaDB parks as SQLite and PostgreSQL do (OBX__PARK), at the last
 * microsecond a DATETIME(6) holds: after any due time, those being whole
 * milliseconds; read back as OBX_TIME_MAX_MS + 1 like the others. Its
 * triggers cannot update their own table, so the wake is a statement of
 * its own after each ack and fail that finished a keyed message
 * (OBX__Q_WAKE_SETTLED, obx__settle), and a dispatcher's short claim or
 * the reap wakes what a concurrent enqueue or another program's update hid
 * from it (obx__wake_missed, OBX__Q_WAKE), as on PostgreSQL. */
#define OBX__MY_PARKED "'9999-12-31 23:59:59.999999'"
#ifdef OBX_NO_ORDERING_KEYS
#define OBX__MY_PARK_IF(k, due, busy) due
#define OBX__MY_KEY_COLUMNS(k, n) ""
#else
#define OBX__MY_PARK_IF(k, due, busy) "IF(" k " IS NOT NULL AND (" busy "), " OBX__MY_PARKED ", " due ")"
/* A batch reads each key's three maxima once, for its seq and its park,
 * and numbers the rows of a key (`rn` > 1: parked behind one of the same
 * batch). The window is a column of its own: MariaDB 10.11 gave a wrong
 * ROW_NUMBER() inside IF(... OR ...) over this derived table. */
#define OBX__MY_KEY_COLUMNS(k, n)                                                                 \
    ", " OBX__MY_ORDERED_MAX(k, "0") " AS `m0`, " OBX__MY_ORDERED_MAX(k, "1") " AS `m1`, "             \
    OBX__MY_ORDERED_MAX(k, "3") " AS `m3`, ROW_NUMBER() OVER (PARTITION BY " k " ORDER BY " n ") AS `rn`"
#endif
#define OBX__MY_NEXT_ATTEMPT_MS                                                                   \
    "IF(`NextAttemptAt` = " OBX__MY_PARKED ", " OBX__PARKED_MS ", " OBX__MY_MS("NextAttemptAt") ")"
/* The wake of keys `keys` (a query of column k): the id of each key's
 * first Ready row where nothing of the key is in flight, a plain read;
 * OBX__Q_WAKE_IDS puts those still parked back in their place. An UPDATE
 * joined to this read it locked and waited for every producer of the key
 * with a transaction open (a dispatcher stalled until the lock wait
 * timeout). A parked row not yet committed is missed: a later wake (a
 * dispatcher's short claim, the reap) finds it. */
#define OBX__MY_WAKE_READ(keys)                                                                   \
    "SELECT (SELECT o.`Id` FROM {T} AS o WHERE o.`OrderingLive` = pk.k AND o.`OrderingState` = 0 ORDER BY " \
    "o.`OrderingSeq`, o.`Id` LIMIT 1) AS `id` FROM (" keys ") AS pk WHERE NOT EXISTS (SELECT 1 FROM {T} AS o " \
    "WHERE o.`OrderingLive` = pk.k AND o.`OrderingState` = 1)"
#define OBX__MY_WAKE_SETTLED                                                                      \
    OBX__MY_WAKE_READ("SELECT DISTINCT s.`OrderingKey` AS k FROM JSON_TABLE(?, '$[*]' COLUMNS (`obx_id` "        \
                      "CHAR(36) PATH '$')) AS j STRAIGHT_JOIN {T} AS s FORCE INDEX (PRIMARY) ON s.`Id` = "          \
                      "j.`obx_id` WHERE s.`OrderingKey` IS NOT NULL")
/* The rows an id list names, by primary key: MariaDB 10.11 runs "Id IN
 * (SELECT ... JSON_TABLE)" in an UPDATE as a scan that also waits on other
 * workers' row locks, so settles join the list first (its marker is
 * numbered, see obx__plain_markers), forcing the key: on a small table the
 * optimizer would scan, and wait on rows other workers hold. */
#define OBX__MY_BY_IDS(marker)                                                                  \
    "JSON_TABLE(" marker ", '$[*]' COLUMNS (`obx_id` CHAR(36) PATH '$')) AS j STRAIGHT_JOIN {T} " \
    "FORCE INDEX (PRIMARY) ON {T}.`Id` = j.`obx_id`"

/* MariaDB (and MySQL 8): no UPDATE ... RETURNING, so a claim picks with
 * FOR UPDATE SKIP LOCKED, updates, and reads back, in one transaction at
 * READ COMMITTED (REPEATABLE READ gap locks would block producers). A
 * single-table UPDATE assigns left to right, a multi-table one may not: a
 * column is assigned after every expression that reads its old value,
 * which is right either way. Tables are utf8mb4_nopad_bin: keys and
 * topics compare byte for byte, trailing spaces included (utf8mb4_bin pads:
 * "m1" = "m1 "). No partial indexes: a state column is NULL outside its
 * state (see the DDL). */
#ifndef OBX_NO_MARIADB
/* The dead-letter filter (obx__dead_params): NULL arguments match all. */
#define OBX__MY_DUE                                                                               \
    "`ReadyRank` <= UTC_TIMESTAMP(6) + INTERVAL " OBX__PRIORITY_HORIZON_S " SECOND AND `NextAttemptAt` <= " \
    "UTC_TIMESTAMP(6)"
#define OBX__MY_DEAD                                                                              \
    "`DeadAt` IS NOT NULL AND `Topic` = COALESCE(?1, `Topic`) AND (?2 IS NULL OR "                        \
    "LOCATE(?2, COALESCE(`LastError`, '')) > 0) AND `CreatedAt` >= COALESCE(" OBX__MY_FROM_MS("?3") \
    ", `CreatedAt`) AND (?4 IS NULL OR `CreatedAt` < " OBX__MY_FROM_MS("?4") ") AND "                \
    "`Id` = COALESCE(?5, `Id`)"
#define OBX__MY_KEY_LAST(st)                                                                      \
    "COALESCE((SELECT o.`OrderingSeq` FROM {T} AS o WHERE o.`OrderingLive` = k.`v` AND o.`OrderingState` = " \
    st " ORDER BY o.`OrderingSeq` DESC LIMIT 1), 0)"
static const obx__stmt_row obx__mariadb_outbox_rows[] = {
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`) VALUES (?, ?, ?, ?, ?, " OBX__MY_FROM_MS("?") ", "
     "COALESCE(" OBX__MY_FROM_MS("?") ", UTC_TIMESTAMP(6)))"},
#endif
    {OBX__Q_INSERT_KEYED,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`, `OrderingKey`, `OrderingSeq`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`, "
     "`ExpiresAt`, `Priority`) VALUES (?1, ?2, ?3, ?4, ?5, " OBX__MY_FROM_MS("?6") ", "
     OBX__MY_PARK_IF("?8", "COALESCE(" OBX__MY_FROM_MS("?7") ", UTC_TIMESTAMP(6))", "@obx_busy") ", ?8, "
     OBX__SEQ("IF(?8 IS NULL, NULL, @obx_seq)") ", ?9, ?10, ?11, ?12, "
     OBX__MY_FROM_MS("?13") ", ?14)"},
#ifndef OBX_NO_ORDERING_KEYS
    /* InnoDB reads the subqueries of an INSERT with shared locks, at READ
     * COMMITTED too: held to the producer's commit, they stalled the key's
     * ack and claims and deadlocked producers at REPEATABLE READ. A plain
     * SELECT reads without locks (at SERIALIZABLE it would lock: refused,
     * see obx_enqueue_tx). Two producers of a key may now read the same
     * largest OrderingSeq, as on PostgreSQL: the claim's check covers it. */
    {OBX__Q_KEY_READ,
     "SELECT @obx_seq := " OBX__MY_ORDERED_NEXT("?1") ", @obx_busy := (" OBX__MY_ORDERED_MAX("?1", "0")
     " > 0 OR " OBX__MY_ORDERED_MAX("?1", "1") " > 0), @@session.tx_isolation"},
#endif
    /* The update checks the row again and the read takes only rows that
     * carry our token: where row locks are per node (Galera), two nodes
     * can pick one row, and the one that updates second must not get it. */
    {OBX__Q_CLAIM,
     "UPDATE " OBX__MY_BY_IDS("?3") " SET `Status` = 1, `OwnerToken` = ?1, "
     "`LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL ?2 SECOND, `Starts` = `Starts` + 1 WHERE {T}.`Status` = 0"},
    {OBX__Q_ACK,
     "UPDATE " OBX__MY_BY_IDS("?3") " SET `IsProcessed` = 1, `ProcessedAt` = UTC_TIMESTAMP(6), "
     "`ProcessedBy` = ?1, `LockedUntil` = NULL, `Status` = 2 WHERE `OwnerToken` = ?2 AND `Status` = 1"},
    {OBX__Q_ABANDON,
     "UPDATE " OBX__MY_BY_IDS("?5") " SET `NextAttemptAt` = UTC_TIMESTAMP(6) + INTERVAL "
     "COALESCE(?1, LEAST(60000, 1000 * (1 << LEAST(`RetryCount`, 6)))) * 1000 MICROSECOND, "
     "`RetryCount` = `RetryCount` + ?2, `LastError` = COALESCE(?3, `LastError`), "
     "`OwnerToken` = NULL, `LockedUntil` = NULL, `Starts` = GREATEST(`Starts` - 1, 0), `Status` = 0 "
     "WHERE `OwnerToken` = ?4 AND `Status` = 1"},
    {OBX__Q_FAIL,
     "UPDATE " OBX__MY_BY_IDS("?3") " SET `LockedUntil` = NULL, `LastError` = ?1, `Status` = 3 "
     "WHERE `OwnerToken` = ?2 AND `Status` = 1"},
    {OBX__Q_EXTEND,
     "UPDATE " OBX__MY_BY_IDS("?3") " SET `LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL ?1 SECOND "
     "WHERE `OwnerToken` = ?2 AND `Status` = 1"},
    {OBX__Q_REAP,
     "UPDATE {T} SET `OwnerToken` = NULL, `LockedUntil` = NULL, `LastError` = IF(`Starts` >= {Q}, '"
     OBX__CRASH_LOOP "', `LastError`), `Status` = IF(`Starts` >= {Q}, 3, 0) "
     "WHERE `LeasedUntil` < UTC_TIMESTAMP(6)"},
    {OBX__Q_GET,
     "SELECT " OBX__MY_COLS " FROM {T} WHERE `Id` = ?"},
    /* The keys with parked messages: a range of the ready index (forced:
     * with most Ready rows parked the optimizer would scan the table; a
     * parked row's rank is its NextAttemptAt). Kept without ordering keys
     * too: other builds may enqueue keyed ones. */
    {OBX__Q_WAKE,
     OBX__MY_WAKE_READ("SELECT DISTINCT `OrderingKey` AS k FROM {T} FORCE INDEX (`IX_{N}_ReadyRank`) WHERE "
                       "`ReadyRank` = " OBX__MY_PARKED)},
    /* The keys of the messages an ack or fail finished (and again, a
     * round later: obx__wake_missed). */
    {OBX__Q_WAKE_SETTLED, OBX__MY_WAKE_SETTLED},
    {OBX__Q_WAKE_AGAIN, OBX__MY_WAKE_SETTLED},
    {OBX__Q_WAKE_IDS,
     "UPDATE " OBX__MY_BY_IDS("?1") " SET `NextAttemptAt` = COALESCE(`DueTimeUtc`, `CreatedAt`) "
     "WHERE `Status` = 0 AND `NextAttemptAt` = " OBX__MY_PARKED},
    {OBX__Q_CLEANUP, OBX__MY_CLEANUP},
    /* Through the state columns' indexes: a due row ranks at most 50 s
     * after now (priority >= OBX_PRIORITY_MIN). */
    {OBX__Q_STATS,
     "SELECT COUNT(*), CAST(FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(`NextAttemptAt`), UTC_TIMESTAMP(6)) "
     "/ 1000) AS SIGNED) FROM {T} WHERE " OBX__MY_DUE},
    {OBX__Q_PENDING, OBX__MY_PENDING},
#ifndef OBX_NO_METRICS_TEXT
    {OBX__Q_GAUGES,
     "SELECT COUNT(*), CAST(FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(`NextAttemptAt`), UTC_TIMESTAMP(6)) "
     "/ 1000) AS SIGNED), (SELECT COUNT(*) FROM {T} WHERE `LeasedUntil` IS NOT NULL), "
     "(SELECT COUNT(*) FROM {T} WHERE `DeadAt` IS NOT NULL), "
     "(SELECT COUNT(*) FROM {T} WHERE `ReadyRank` IS NOT NULL AND `NextAttemptAt` > UTC_TIMESTAMP(6)), "
     "(SELECT COUNT(*) FROM {T} WHERE `LeasedUntil` < UTC_TIMESTAMP(6)) "
     "FROM {T} WHERE " OBX__MY_DUE},
#endif
    /* A batch without ordering keys: one row of these per message, one
     * multi-row VALUES, prepared once per row count (obx__insert_values):
     * the server reads the values as sent, where JSON_TABLE's rows cost it
     * about a fifth more CPU per message. */
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT_VALUES,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`) VALUES (?, ?, ?, ?, ?, " OBX__MY_FROM_MS("?") ", "
     "COALESCE(" OBX__MY_FROM_MS("?") ", UTC_TIMESTAMP(6)))"},
#endif
    {OBX__Q_INSERT_VALUES_ENV,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`, `ExpiresAt`, `Priority`) VALUES (?, "
     "?, ?, ?, ?, " OBX__MY_FROM_MS("?") ", COALESCE(" OBX__MY_FROM_MS("?") ", UTC_TIMESTAMP(6)), ?, ?, ?, ?, "
     OBX__MY_FROM_MS("?") ", ?)"},
#ifndef OBX_NO_ORDERING_KEYS
    /* A batch with ordering keys: the keys' maxima read first, without
     * locks as OBX__Q_KEY_READ does, and a multi-row VALUES whose
     * OrderingSeq and parking the client computes from them as
     * OBX__Q_INSERT_MANY_KEYED does (obx__insert_keyed). The server
     * reads the values as sent and does no key work per row: about half
     * the CPU per message of the JSON rows, flat in a key's backlog
     * (docs/PERFORMANCE.md).
     * The maxima: the last entry of the ordering index per key and state
     * (a MAX there read the key's every entry, a GROUP BY too unless the
     * statistics chose its loose scan). The keys compare as the column
     * does, byte for byte ("k" is neither "K" nor "k "). */
    {OBX__Q_KEY_MAXIMA,
     "SELECT " OBX__MY_KEY_LAST("0") ", " OBX__MY_KEY_LAST("1") ", " OBX__MY_KEY_LAST("3") ", "
     "@@session.tx_isolation FROM JSON_TABLE(?, '$[*]' COLUMNS (`n` FOR ORDINALITY, `v` VARCHAR(255) "
     "CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PATH '$')) AS k ORDER BY k.`n`"},
    {OBX__Q_INSERT_VALUES_KEYED,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`, `OrderingKey`, `OrderingSeq`) VALUES (?, ?, ?, ?, ?, " OBX__MY_FROM_MS("?") ", "
     "COALESCE(TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00'), UTC_TIMESTAMP(6)), ?, ?)"},
    {OBX__Q_INSERT_VALUES_KEYED_ENV,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`, `OrderingKey`, `OrderingSeq`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`, "
     "`ExpiresAt`, `Priority`) VALUES (?, ?, ?, ?, ?, " OBX__MY_FROM_MS("?") ", COALESCE(TIMESTAMPADD("
     "MICROSECOND, ?, '1970-01-01 00:00:00'), UTC_TIMESTAMP(6)), ?, ?, ?, ?, ?, ?, " OBX__MY_FROM_MS("?") ", ?)"},
#endif
    /* A batch with ordering keys in one statement, read from one JSON
     * array of rows: each key's maxima and the rows' order within it are
     * a derived table over the rows. Kept for the caller's driver
     * (obx_enqueue_sql), where no statement can read another's result.
     * The key compares as the column does (its window too: "k" and "K"
     * are two keys). */
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT_MANY,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`) SELECT j.`id`, j.`mid`, j.`topic`, j.`payload`, j.`corr`, "
     OBX__MY_FROM_MS("j.`due`") ", COALESCE(" OBX__MY_FROM_MS("j.`due`") ", UTC_TIMESTAMP(6)) "
     "FROM JSON_TABLE(?, '$[*]' COLUMNS (`id` CHAR(36) PATH '$[0]', `mid` CHAR(36) PATH '$[1]', "
     "`topic` VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[2]', "
     "`payload` LONGTEXT CHARACTER SET utf8mb4 PATH '$[3]', "
     "`corr` VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[4]', `due` BIGINT PATH '$[5]')) AS j"},
#endif
    {OBX__Q_INSERT_MANY_KEYED,
     "INSERT INTO {T} (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, "
     "`NextAttemptAt`, `OrderingKey`, `OrderingSeq`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`, "
     "`ExpiresAt`, `Priority`) SELECT j.`id`, j.`mid`, j.`topic`, j.`payload`, j.`corr`, "
     OBX__MY_FROM_MS("j.`due`") ", "
     OBX__MY_PARK_IF("j.`okey`", "COALESCE(" OBX__MY_FROM_MS("j.`due`") ", UTC_TIMESTAMP(6))",
                     "j.`rn` > 1 OR j.`m0` > 0 OR j.`m1` > 0")
     ", j.`okey`, " OBX__SEQ("IF(j.`okey` IS NULL, NULL, GREATEST(j.`m0`, j.`m1`, j.`m3`) + 1)")
     " + j.`n` - 1, j.`tenant`, j.`atype`, j.`aid`, j.`hdr`, " OBX__MY_FROM_MS("j.`exp`") ", j.`prio` "
     "FROM (SELECT jt.*" OBX__MY_KEY_COLUMNS("jt.`okey`", "jt.`n`") " FROM JSON_TABLE(?, '$[*]' COLUMNS (`id` CHAR(36) PATH '$[0]', `mid` CHAR(36) PATH '$[1]', "
     "`topic` VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[2]', "
     "`payload` LONGTEXT CHARACTER SET utf8mb4 PATH '$[3]', "
     "`corr` VARCHAR(255) CHARACTER SET utf8mb4 PATH '$[4]', `due` BIGINT PATH '$[5]', "
     "`okey` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PATH '$[6]', "
     "`tenant` VARCHAR(64) CHARACTER SET utf8mb4 PATH '$[7]', "
     "`atype` VARCHAR(64) CHARACTER SET utf8mb4 PATH '$[8]', "
     "`aid` VARCHAR(128) CHARACTER SET utf8mb4 PATH '$[9]', "
     "`hdr` LONGTEXT CHARACTER SET utf8mb4 PATH '$[10]', `exp` BIGINT PATH '$[11]', "
     "`prio` SMALLINT PATH '$[12]', `n` FOR ORDINALITY)) AS jt) AS j"},
#ifndef OBX_NO_JOIN
    {OBX__Q_JOIN_START,
     "INSERT INTO {J} (`JoinId`, `GroupingKey`, `ExpectedSteps`, `Metadata`) VALUES (?, ?, ?, ?)"},
    {OBX__Q_JOIN_ATTACH,
     "INSERT IGNORE INTO {M} (`JoinId`, `OutboxMessageId`) SELECT `JoinId`, ? FROM {J} WHERE `JoinId` = ?"},
    {OBX__Q_JOIN_MESSAGE,
     "SELECT `Status` FROM {T} WHERE `Id` = ? FOR UPDATE"},
    {OBX__Q_JOIN_REPORT,
     "UPDATE {M} SET `Status` = ? WHERE `JoinId` = ? AND `OutboxMessageId` = ? AND `Status` = 0"},
    {OBX__Q_JOIN_GET,
     "SELECT `JoinId`, `GroupingKey`, `ExpectedSteps`, `CompletedSteps`, `FailedSteps`, `Status`, "
     "`Metadata`, " OBX__MY_MS("CreatedUtc") ", " OBX__MY_MS("LastUpdatedUtc") " FROM {J} WHERE `JoinId` = ?"},
    {OBX__Q_JOIN_FINISH,
     "UPDATE {J} SET `Status` = ?, `LastUpdatedUtc` = UTC_TIMESTAMP(6) WHERE `JoinId` = ? AND `Status` = 0"},
#endif
    /* The head of the ready index is read without locks (a window of
     * ids), then those rows are locked by primary key and checked again.
     * A locking read of the index walks every entry a claim or ack has
     * moved since InnoDB's last purge (about once a second): 3 page reads
     * each, 4-17 ms per pick; the window makes it 0.6 ms, and the drain
     * 1.8x. The index is forced: a scan and sort would read every row.
     * The locked rows come back as the claim's short row (`Id` is t's: the
     * window's column is named apart), so that the claim needs no read. */
    {OBX__Q_CLAIM_PICK,
     "SELECT " OBX__MY_CLAIM_COLS_AT(OBX__MY_NOW_MS) " FROM (SELECT c.`Id` AS `obx_pick` FROM {T} AS c "
     "FORCE INDEX (`IX_{N}_ReadyRank`) WHERE "
     "c.`NextAttemptAt` <= UTC_TIMESTAMP(6) AND " OBX__MY_ORDERED_CHECK("{H}") " "
     OBX__MY_CLAIM_ORDER("c.") " LIMIT ?2) AS c STRAIGHT_JOIN {T} AS t FORCE INDEX (PRIMARY) ON t.`Id` = c.`obx_pick` "
     "WHERE t.`Status` = 0 AND t.`NextAttemptAt` <= UTC_TIMESTAMP(6) AND t.`IsProcessed` = 0 "
     "LIMIT ?1 FOR UPDATE SKIP LOCKED"},
    {OBX__Q_CLAIM_READ,
     "SELECT " OBX__MY_CLAIM_COLS " FROM " OBX__MY_BY_IDS("?3") " WHERE {T}.`OwnerToken` = ?1"},
    /* The key's in-flight entries, read locked: another claim's uncommitted
     * row is a lock (NOWAIT: error 1205 at once), a committed one a row. */
    {OBX__Q_CLAIM_CHECK,
     "SELECT c.`Id` FROM JSON_TABLE(?2, '$[*]' COLUMNS (`obx_id` CHAR(36) PATH '$')) AS j STRAIGHT_JOIN "
     "{T} AS c FORCE INDEX (PRIMARY) ON c.`Id` = j.`obx_id` STRAIGHT_JOIN {T} AS o FORCE INDEX "
     "(`IX_{N}_Ordering`) ON o.`OrderingLive` = c.`OrderingKey` AND o.`OrderingState` = 1 "
     "WHERE c.`OwnerToken` = ?1 AND c.`Status` = 1 AND o.`Id` <> c.`Id` FOR UPDATE NOWAIT"},
    {OBX__Q_CLAIM_RELEASE,
     "UPDATE " OBX__MY_BY_IDS("?2") " SET `OwnerToken` = NULL, `LockedUntil` = NULL, "
     "`Starts` = GREATEST(`Starts` - 1, 0), `Status` = 0 WHERE `OwnerToken` = ?1 AND `Status` = 1"},
#ifndef OBX_NO_DEAD_LETTERS
    {OBX__Q_DEAD_LIST,
     "SELECT " OBX__MY_COLS " FROM {T} WHERE " OBX__MY_DEAD " ORDER BY `DeadAt`, `Id` LIMIT ?7 OFFSET ?8"},
    {OBX__Q_DEAD_REPLAY,
     "UPDATE {T} SET `RetryCount` = 0, `Starts` = 0, `NextAttemptAt` = UTC_TIMESTAMP(6), `OwnerToken` = NULL, "
     "`LockedUntil` = NULL, `ExpiresAt` = NULL, `Status` = 0 WHERE " OBX__MY_DEAD},
    {OBX__Q_DEAD_PURGE,
     "DELETE FROM {T} WHERE " OBX__MY_DEAD " ORDER BY `DeadAt` LIMIT ?7"},
    {OBX__Q_MOVE,
     "UPDATE {T} SET `LastError` = ?1, `OwnerToken` = NULL, `LockedUntil` = NULL, `Status` = 3 "
     "WHERE `Id` = ?2 AND (`Status` = 0 OR (`Status` = 1 AND ?3 = 1))"},
    {OBX__Q_RUN_NOW,
     "UPDATE {T} SET `NextAttemptAt` = UTC_TIMESTAMP(6) WHERE `Id` = ?1 AND `Status` = 0 "
     "AND `NextAttemptAt` > UTC_TIMESTAMP(6) AND `NextAttemptAt` < " OBX__MY_PARKED},
#endif
    {OBX__Q_COUNT, NULL}};

/* Storage layout 2 (docs/UPGRADING.md): keys of MariaDB's UUID type (16
 * bytes, read and written as text, so that the statements serve a table of
 * layout 1's CHAR(36) keys as well), the fixed-width hot columns first, and
 * no index that leads with Status: the state columns ReadyRank,
 * LeasedUntil, DoneAt and DeadAt are NULL except in their state, each
 * indexed alone, so a claim moves two secondary entries (ready out, leased
 * in) and an ack two (leased out, done in). A new table has them
 * PERSISTENT (obx__ddl_text). An existing table gets them by online steps
 * only: VIRTUAL columns are instant, their indexes built with
 * ALGORITHM=INPLACE, LOCK=NONE (writers go on), and it keeps them VIRTUAL
 * (docs/RELIABILITY.md: converting is a table copy). It keeps its CHAR(36)
 * keys and layout 1's Status-led indexes, which the previous release's
 * statements force; `obxctl upgrade-keys` converts the keys and drops those
 * indexes when no such program runs (a table copy: writers wait). */
static const char *const obx__mariadb_outbox_ddl[] = {
    "CREATE TABLE IF NOT EXISTS {T} (\n"
    "    `Id`            UUID NOT NULL PRIMARY KEY,\n"
    "    `NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
    "    `LockedUntil`   DATETIME(6) NULL,\n"
    "    `ProcessedAt`   DATETIME(6) NULL,\n"
    "    `CreatedAt`     DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
    "    `OwnerToken`    UUID NULL,\n"
    "    `MessageId`     UUID NOT NULL,\n"
    "    `RetryCount`    INT NOT NULL DEFAULT 0,\n"
    "    `Starts`        INT NOT NULL DEFAULT 0,\n"
    "    `Status`        TINYINT NOT NULL DEFAULT 0,\n"
    "    `IsProcessed`   TINYINT NOT NULL DEFAULT 0,\n"
    "    `Priority`      TINYINT NOT NULL DEFAULT 0,\n"
    "    `Topic`         VARCHAR(255) NOT NULL,\n"
    "    `Payload`       LONGTEXT NOT NULL,\n"
    "    `ProcessedBy`   VARCHAR(100) NULL,\n"
    "    `LastError`     LONGTEXT NULL,\n"
    "    `CorrelationId` VARCHAR(255) NULL,\n"
    "    `DueTimeUtc`    DATETIME(6) NULL{A}\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin",
    "CREATE INDEX IF NOT EXISTS `IX_{N}_Ordering` ON {T} (`OrderingLive`, `OrderingState`, `OrderingSeq`)",
    OBX__MY_STATE_INDEXES,
#ifndef OBX_NO_JOIN
    "CREATE TABLE IF NOT EXISTS {J} (\n"
    "    `JoinId`         UUID NOT NULL PRIMARY KEY,\n"
    "    `GroupingKey`    VARCHAR(255) NULL,\n"
    "    `ExpectedSteps`  INT NOT NULL,\n"
    "    `CompletedSteps` INT NOT NULL DEFAULT 0,\n"
    "    `FailedSteps`    INT NOT NULL DEFAULT 0,\n"
    "    `Status`         TINYINT NOT NULL DEFAULT 0,\n"
    "    `CreatedUtc`     DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
    "    `LastUpdatedUtc` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
    "    `Metadata`       LONGTEXT NULL,\n"
    "    KEY `IX_{N}Join_GroupingKey` (`GroupingKey`)\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin",
    "CREATE TABLE IF NOT EXISTS {M} (\n"
    "    `JoinId`          UUID NOT NULL,\n"
    "    `OutboxMessageId` UUID NOT NULL,\n"
    "    `Status`          TINYINT NOT NULL DEFAULT 0,\n"
    "    `CreatedUtc`      DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
    "    PRIMARY KEY (`JoinId`, `OutboxMessageId`),\n"
    "    KEY `IX_{N}JoinMember_Message` (`OutboxMessageId`),\n"
    "    CONSTRAINT `FK_{N}JoinMember_Join` FOREIGN KEY (`JoinId`) REFERENCES {J} (`JoinId`) ON DELETE CASCADE\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin",
    /* Join counters follow acks and fails in the database (OBX-089), in the
     * settle's own transaction; a member leaving Pending counts once. The
     * IF keeps claims (and every other update) from running the member
     * UPDATE at all: as a WHERE condition it ran 100 times per claim; and
     * acks of messages no member names (12-14 us each, docs/PERFORMANCE.md).
     * The flag is the row's own, read under the ack's row lock: an attach
     * (which locks the row first, OBX__Q_JOIN_MESSAGE) either committed it
     * before, or waits and finds the message settled. A read of the member
     * table here could miss a member committed while the ack waited.
     * A changed trigger gets a new name (JoinStep2: the IF; JoinStep2Flag:
     * the flag), created before the old name is dropped: each DDL
     * statement commits on its own, and a settle queued behind a DROP first
     * would run with neither trigger (both at once is harmless: the member
     * update is guarded by its Status; a previous release's deploy makes its
     * own again). CREATE OR REPLACE would lock the table on every deploy,
     * and IF NOT EXISTS alone would keep an old table's trigger as it was. */
    "CREATE TRIGGER IF NOT EXISTS `{N}_JoinStep2Flag` AFTER UPDATE ON {T} FOR EACH ROW\n"
    "    IF NEW.`HasJoin` <> 0 AND NEW.`Status` IN (2, 3) AND OLD.`Status` <> NEW.`Status` THEN\n"
    "        UPDATE {M} SET `Status` = IF(NEW.`Status` = 2, 1, 2)\n"
    "         WHERE `OutboxMessageId` = NEW.`Id` AND `Status` = 0;\n"
    "    END IF",
    "DROP TRIGGER IF EXISTS `{N}_JoinStep2`",
    "DROP TRIGGER IF EXISTS `{N}_JoinStep`",
    /* A message row's HasJoin is 1 once a join member names it: set by
     * the member's insert, under the message row's lock, from any release
     * (a trigger). Rows from before the column hold 1 (its first default),
     * so the step above runs for all of them as JoinStep2 did; the default
     * becomes 0 only after this trigger exists, and creating it waited for
     * every transaction that had inserted a member without it (metadata
     * lock): a row with 0 has no member from before. Created after the old
     * JoinStep is gone: its member UPDATE ran unguarded, and a member
     * insert whose flag UPDATE fired it would fail (error 1442). */
    "CREATE TRIGGER IF NOT EXISTS `{N}_JoinFlag` AFTER INSERT ON {M} FOR EACH ROW\n"
    "    UPDATE {T} SET `HasJoin` = 1 WHERE `Id` = NEW.`OutboxMessageId`",
    "ALTER TABLE {T} ALTER COLUMN `HasJoin` SET DEFAULT 0",
    "CREATE TRIGGER IF NOT EXISTS `{N}_JoinCount` AFTER UPDATE ON {M} FOR EACH ROW\n"
    "    UPDATE {J} SET\n"
    "        `LastUpdatedUtc` = UTC_TIMESTAMP(6),\n"
    "        `FailedSteps` = `FailedSteps` + (NEW.`Status` = 2 AND `CompletedSteps` + `FailedSteps` < `ExpectedSteps`),\n"
    "        `CompletedSteps` = `CompletedSteps` + (NEW.`Status` = 1 AND `CompletedSteps` + `FailedSteps` < `ExpectedSteps`)\n"
    "     WHERE `JoinId` = NEW.`JoinId` AND OLD.`Status` = 0 AND NEW.`Status` IN (1, 2)",
#endif
    NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (obx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * OrderingKey, OrderingSeq: ordered delivery per key (OBX__ORDERED_HEAD);
 * OrderingLive, OrderingState: their index's columns (MariaDB has no
 * partial index: NULL for rows without a key or Done).
 * TenantId .. Headers: the envelope (NULL when a message has none).
 * ExpiresAt: expires_utc_ms (NULL: never), checked after a claim.
 * Priority: obx_new_message.priority.
 * ReadyRank, LeasedUntil, DoneAt, DeadAt: layout 2's state columns (see
 * the DDL above), ReadyRank the claim's order (OBX__MY_CLAIM_ORDER).
 * HasJoin: a join member may name the row (the join step's guard).
 * Layout 1's ClaimRank (PERSISTENT) is not added: nothing reads it. */
static const obx__column obx__mariadb_outbox_columns[] = {
    {"Starts", "INT NOT NULL DEFAULT 0"}, {"OrderingKey", "VARCHAR(255) NULL"}, {"OrderingSeq", "BIGINT NULL"},
    {"OrderingLive", "VARCHAR(255) AS (IF(`Status` <> 2, `OrderingKey`, NULL)) PERSISTENT"},
    {"OrderingState", "TINYINT AS (IF(`Status` <> 2 AND `OrderingKey` IS NOT NULL, `Status`, NULL)) PERSISTENT"},
    {"TenantId", "VARCHAR(64) NULL"}, {"AggregateType", "VARCHAR(64) NULL"}, {"AggregateId", "VARCHAR(128) NULL"},
    {"Headers", "JSON NULL"}, {"ExpiresAt", "DATETIME(6) NULL"},
    {"Priority", "TINYINT NOT NULL DEFAULT 0"}, {"ReadyRank", OBX__MY_READY_RANK("`Status` = 0 AND `IsProcessed` = 0")},
    {"LeasedUntil", "DATETIME(6) AS (IF(`Status` = 1, `LockedUntil`, NULL)) VIRTUAL"},
    {"DoneAt", "DATETIME(6) AS (IF(`Status` = 2, `ProcessedAt`, NULL)) VIRTUAL"},
    {"DeadAt", "DATETIME(6) AS (IF(`Status` = 3, `CreatedAt`, NULL)) VIRTUAL"},
    {"HasJoin", "TINYINT NOT NULL DEFAULT 1"}, /* 1 for the rows it finds; see {N}_JoinFlag */
    {NULL, NULL}};
/* obx_store_upgrade on a table deployed before layout 2: its keys to the
 * UUID type (table copies: writers wait, docs/UPGRADING.md; the join
 * tables' foreign key cannot span a type change, so it is dropped and put
 * back), then layout 1's Status-led indexes dropped (instant). Layout 1's
 * ClaimRank column stays: dropping it copies the table (26 s per million
 * rows, writers waiting), and unindexed it costs a computed value per
 * write of NextAttemptAt or Priority. */
#define OBX__MY_UUID(t, c)                                                                        \
    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '" t \
    "' AND COLUMN_NAME = '" c "' AND DATA_TYPE = 'uuid'"
#define OBX__MY_COPY ", ALGORITHM=COPY, LOCK=SHARED"
static const obx__contract obx__mariadb_outbox_contract[] = {
    {OBX__MY_UUID("{N}", "Id"), "ALTER TABLE {T} MODIFY `Id` UUID NOT NULL, MODIFY `OwnerToken` UUID NULL, "
     "MODIFY `MessageId` UUID NOT NULL" OBX__MY_COPY, OBX_UPGRADE_KEYS},
#ifndef OBX_NO_JOIN
    {OBX__MY_UUID("{N}JoinMember", "JoinId"), "ALTER TABLE {M} DROP FOREIGN KEY IF EXISTS `FK_{N}JoinMember_Join`",
     OBX_UPGRADE_KEYS},
    {OBX__MY_UUID("{N}Join", "JoinId"), "ALTER TABLE {J} MODIFY `JoinId` UUID NOT NULL" OBX__MY_COPY, OBX_UPGRADE_KEYS},
    {OBX__MY_UUID("{N}JoinMember", "JoinId"), "ALTER TABLE {M} MODIFY `JoinId` UUID NOT NULL, "
     "MODIFY `OutboxMessageId` UUID NOT NULL" OBX__MY_COPY, OBX_UPGRADE_KEYS},
    {"SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE() "
     "AND CONSTRAINT_NAME = 'FK_{N}JoinMember_Join'",
     "ALTER TABLE {M} ADD CONSTRAINT `FK_{N}JoinMember_Join` FOREIGN KEY (`JoinId`) REFERENCES {J} (`JoinId`) "
     "ON DELETE CASCADE", OBX_UPGRADE_KEYS},
#endif
    {OBX__MY_NO_INDEX("Claim")}, {OBX__MY_NO_INDEX("Ready")}, {OBX__MY_NO_INDEX("Leased")},
    {OBX__MY_NO_INDEX("Done")},
    {NULL, NULL, 0}};
static const obx__sqlset obx__mariadb_outbox = {
    "UTC_TIMESTAMP(6)",
    obx__mariadb_outbox_ddl,
    obx__mariadb_outbox_rows,
    obx__mariadb_outbox_columns,
    0, /* claim_full_rows: the short row */
    obx__mariadb_outbox_contract
};
#define OBX__MARIADB_SET &obx__mariadb_outbox
#endif

/* SQL Server: Unix ms <-> time. DATETIMEOFFSET columns (the seed's) are
 * compared as instants and read as UTC, floored to the ms (a cast to
 * DATETIME2(3) would round); DATEADD takes an int, so whole days and the
 * rest are added apart. A marker used twice is numbered. */
#define OBX__MS_EPOCH "CAST('1970-01-01T00:00:00+00:00' AS DATETIMEOFFSET(3))"
#define OBX__MS_FROM_MS(v, base) \
    "DATEADD(MILLISECOND, CAST(" v " % 86400000 AS INT), DATEADD(DAY, CAST(" v " / 86400000 AS INT), " base "))"
#define OBX__MS_TO_MS(c) \
    "DATEDIFF_BIG(MILLISECOND, '19700101', CAST(SWITCHOFFSET(" c ", '+00:00') AS DATETIME2(7)))"
#define OBX__MS_UTC_MS(c) "DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), " c ")"
#define OBX__MS_GUID(c) "LOWER(CONVERT(NCHAR(36), " c "))"
#define OBX__MS_COLS                                                                               \
    OBX__MS_GUID("t.[Id]") ", " OBX__MS_GUID("t.[MessageId]") ", t.[Topic], t.[Payload], "            \
    "t.[CorrelationId], " OBX__MS_TO_MS("t.[CreatedAt]") ", " OBX__MS_TO_MS("t.[DueTimeUtc]") ", "     \
    "t.[RetryCount], t.[LastError], t.[Status], " OBX__MS_TO_MS("t.[ProcessedAt]") ", "              \
    "t.[ProcessedBy], " OBX__MS_UTC_MS("t.[LockedUntil]") ", " OBX__MS_GUID("t.[OwnerToken]") ", "    \
    OBX__MS_TO_MS("t.[NextAttemptAt]") ", t.[Starts], t.[OrderingKey], t.[TenantId], "                 \
    "t.[AggregateType], t.[AggregateId], t.[Headers], " OBX__MS_TO_MS("t.[ExpiresAt]")
/* Ordered delivery (see OBX__ORDERED_HEAD). The check reads without
 * READPAST: a row of the key that a concurrent claim holds is waited for,
 * not skipped as if it were not there. @DeadHolds (0 or 1) is the claim
 * procedure's: 1 counts Dead rows as waiting (ordering_dead_holds). */
#define OBX__MS_ORDERED_HEAD                                                                      \
    "(c.[OrderingKey] IS NULL OR (NOT EXISTS (SELECT 1 FROM {T} AS o WHERE o.[OrderingKey] IS NOT NULL " \
    "AND o.[OrderingKey] = c.[OrderingKey] AND o.[Status] <> 2 AND o.[Status] IN (0, 3 * @DeadHolds) AND " \
    "o.[OrderingSeq] <= c.[OrderingSeq] AND (o.[OrderingSeq] < c.[OrderingSeq] OR o.[Id] < c.[Id])) "     \
    "AND NOT EXISTS (SELECT 1 FROM {T} AS o WHERE o.[OrderingKey] IS NOT NULL AND "                     \
    "o.[OrderingKey] = c.[OrderingKey] AND o.[Status] <> 2 AND o.[Status] = 1)))"
#define OBX__MS_ORDERED_MAX(k, st)                                                                \
    "(SELECT MAX(o.[OrderingSeq]) FROM {T} AS o WHERE o.[OrderingKey] IS NOT NULL AND "              \
    "o.[OrderingKey] = " k " AND o.[Status] <> 2 AND o.[Status] = " st ")"
#define OBX__MS_ORDERED_NEXT(k)                                                                   \
    "CASE WHEN " k " IS NULL THEN NULL ELSE (SELECT COALESCE(MAX(m.[v]), 0) + 1 FROM (VALUES ("         \
    OBX__MS_ORDERED_MAX(k, "0") "), (" OBX__MS_ORDERED_MAX(k, "1") "), (" OBX__MS_ORDERED_MAX(k, "3")  \
    ")) AS m([v])) END"
/* The rows an id list (a JSON array) names. */
#define OBX__MS_BY_IDS(list) \
    "{T} AS t JOIN OPENJSON(" list ") AS j ON t.[Id] = CAST(j.[value] AS UNIQUEIDENTIFIER)"
/* A settle procedure: one UPDATE of the caller's leased rows, then the count
 * as a row. OUTPUT needs INTO on a table with triggers (error 334). */
#define OBX__MS_SETTLE(name, params, set)                                                       \
    "CREATE OR ALTER PROCEDURE {S}.[{N}_" name "] " params " AS\n"                              \
    "BEGIN\n"                                                                                   \
    "    SET NOCOUNT ON;\n"                                                                     \
    "    DECLARE @changed TABLE ([ChangedId] UNIQUEIDENTIFIER);\n"                              \
    "    UPDATE t SET " set "\n"                                                                \
    "    OUTPUT inserted.[Id] INTO @changed\n"                                                  \
    "      FROM " OBX__MS_BY_IDS("@Ids") "\n"                                                   \
    "     WHERE t.[OwnerToken] = @OwnerToken AND t.[Status] = 1;\n"                            \
    "    SELECT COUNT(*) FROM @changed;\n"                                                      \
    "END"

/* SQL Server 2016 SP1+ (CREATE OR ALTER, OPENJSON: compatibility level 130),
 * the seed's tables, clustered on an identity column [Seq]: SQL Server
 * sorts a UNIQUEIDENTIFIER by its last, random, bytes, so a clustered UUIDv7
 * key would insert all over the table. The claim and the settles are the seed's procedures;
 * a claim locks with UPDLOCK, READPAST (a row another claimer holds is
 * skipped, never waited for), ROWLOCK, and READCOMMITTEDLOCK (READPAST
 * needs locking reads when READ_COMMITTED_SNAPSHOT is on). The join
 * triggers update join members from an outbox update: "nested triggers"
 * must be on (the server default). Written to the documentation; not yet
 * run against a server. */
#ifndef OBX_NO_SQLSERVER
/* The dead-letter filter (obx__dead_params): NULL arguments match all. */
#define OBX__MS_DEAD                                                                              \
    "t.[Status] = 3 AND t.[Topic] = COALESCE(?1, t.[Topic]) AND (?2 IS NULL OR "                   \
    "CHARINDEX(?2, COALESCE(t.[LastError], N'')) > 0) AND (?3 IS NULL OR t.[CreatedAt] >= "         \
    OBX__MS_FROM_MS("?3", OBX__MS_EPOCH) ") AND (?4 IS NULL OR t.[CreatedAt] < "                   \
    OBX__MS_FROM_MS("?4", OBX__MS_EPOCH) ") AND t.[Id] = COALESCE(CAST(?5 AS UNIQUEIDENTIFIER), t.[Id])"
static const obx__stmt_row obx__sqlserver_outbox_rows[] = {
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT,
     "INSERT INTO {T} ([Id], [MessageId], [Topic], [Payload], [CorrelationId], [DueTimeUtc], "
     "[NextAttemptAt]) VALUES (?1, ?2, ?3, ?4, ?5, " OBX__MS_FROM_MS("?6", OBX__MS_EPOCH) ", "
     "COALESCE(" OBX__MS_FROM_MS("?7", OBX__MS_EPOCH) ", SYSDATETIMEOFFSET()))"},
#endif
    {OBX__Q_INSERT_KEYED,
     "INSERT INTO {T} ([Id], [MessageId], [Topic], [Payload], [CorrelationId], [DueTimeUtc], "
     "[NextAttemptAt], [OrderingKey], [OrderingSeq], [TenantId], [AggregateType], [AggregateId], [Headers], "
     "[ExpiresAt], [Priority]) SELECT ?1, ?2, ?3, ?4, ?5, "
     OBX__MS_FROM_MS("?6", OBX__MS_EPOCH) ", COALESCE(" OBX__MS_FROM_MS("?7", OBX__MS_EPOCH) ", "
     "SYSDATETIMEOFFSET()), ?8, " OBX__SEQ(OBX__MS_ORDERED_NEXT("?8")) ", ?9, ?10, ?11, ?12, "
     OBX__MS_FROM_MS("?13", OBX__MS_EPOCH) ", ?14"},
    {OBX__Q_CLAIM,
     "{CALL {S}.[{N}_Claim](?, ?, ?)}"},
    {OBX__Q_CLAIM_HOLD,
     "{CALL {S}.[{N}_Claim](?, ?, ?, 1)}"},
    {OBX__Q_ACK,
     "{CALL {S}.[{N}_Ack](?, ?, ?)}"},
    {OBX__Q_ABANDON,
     "{CALL {S}.[{N}_Abandon](?, ?, ?, ?, ?)}"},
    {OBX__Q_FAIL,
     "{CALL {S}.[{N}_Fail](?, ?, ?)}"},
    {OBX__Q_EXTEND,
     "UPDATE t SET [LockedUntil] = DATEADD(SECOND, ?1, SYSUTCDATETIME()) FROM " OBX__MS_BY_IDS("?3") " "
     "WHERE t.[OwnerToken] = ?2 AND t.[Status] = 1"},
    {OBX__Q_REAP,
     "{CALL {S}.[{N}_ReapExpired]({Q})}"},
    {OBX__Q_GET,
     "SELECT " OBX__MS_COLS " FROM {T} AS t WHERE t.[Id] = ?"},
    {OBX__Q_CLEANUP,
     "WITH old AS (SELECT TOP (?2) [Id] FROM {T} WHERE [Status] = 2 AND [ProcessedAt] < "
     OBX__MS_FROM_MS("-?1", "SYSDATETIMEOFFSET()") " ORDER BY [ProcessedAt]) DELETE FROM old"},
    {OBX__Q_STATS,
     "SELECT COUNT_BIG(*), DATEDIFF_BIG(MILLISECOND, CAST(SWITCHOFFSET(MIN([NextAttemptAt]), '+00:00') "
     "AS DATETIME2(7)), SYSUTCDATETIME()) FROM {T} WHERE [Status] = 0 AND [NextAttemptAt] <= SYSDATETIMEOFFSET()"},
    {OBX__Q_PENDING,
     "SELECT (SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 0) + (SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 1)"},
#ifndef OBX_NO_METRICS_TEXT
    {OBX__Q_GAUGES,
     "SELECT COUNT_BIG(*), DATEDIFF_BIG(MILLISECOND, CAST(SWITCHOFFSET(MIN([NextAttemptAt]), '+00:00') "
     "AS DATETIME2(7)), SYSUTCDATETIME()), (SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 1), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 3), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 0 AND [NextAttemptAt] > SYSDATETIMEOFFSET()), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 1 AND [LockedUntil] < SYSDATETIMEOFFSET()) "
     "FROM {T} WHERE [Status] = 0 AND [NextAttemptAt] <= SYSDATETIMEOFFSET()"},
#endif
    /* A whole batch in one statement: the lists zipped by position. */
#if OBX__PLAIN_INSERT
    {OBX__Q_INSERT_MANY,
     "INSERT INTO {T} ([Id], [MessageId], [Topic], [Payload], [CorrelationId], [DueTimeUtc], "
     "[NextAttemptAt]) SELECT i.[value], m.[value], p.[value], b.[value], c.[value], x.[Due], "
     "COALESCE(x.[Due], SYSDATETIMEOFFSET()) FROM OPENJSON(?) AS i "
     "JOIN OPENJSON(?) AS m ON m.[key] = i.[key] JOIN OPENJSON(?) AS p ON p.[key] = i.[key] "
     "JOIN OPENJSON(?) AS b ON b.[key] = i.[key] JOIN OPENJSON(?) AS c ON c.[key] = i.[key] "
     "JOIN OPENJSON(?) AS d ON d.[key] = i.[key] "
     "CROSS APPLY (SELECT " OBX__MS_FROM_MS("CAST(d.[value] AS BIGINT)", OBX__MS_EPOCH) " AS [Due]) AS x"},
#endif
    {OBX__Q_INSERT_MANY_KEYED,
     "INSERT INTO {T} ([Id], [MessageId], [Topic], [Payload], [CorrelationId], [DueTimeUtc], "
     "[NextAttemptAt], [OrderingKey], [OrderingSeq], [TenantId], [AggregateType], [AggregateId], [Headers], "
     "[ExpiresAt], [Priority]) SELECT i.[value], m.[value], p.[value], b.[value], "
     "c.[value], x.[Due], COALESCE(x.[Due], SYSDATETIMEOFFSET()), k.[value], "
     OBX__SEQ(OBX__MS_ORDERED_NEXT("k.[value]")) " + CAST(i.[key] AS BIGINT), e1.[value], e2.[value], e3.[value], "
     "e4.[value], " OBX__MS_FROM_MS("CAST(e5.[value] AS BIGINT)", OBX__MS_EPOCH) ", CAST(e6.[value] AS SMALLINT) "
     "FROM OPENJSON(?) AS i "
     "JOIN OPENJSON(?) AS m ON m.[key] = i.[key] JOIN OPENJSON(?) AS p ON p.[key] = i.[key] "
     "JOIN OPENJSON(?) AS b ON b.[key] = i.[key] JOIN OPENJSON(?) AS c ON c.[key] = i.[key] "
     "JOIN OPENJSON(?) AS d ON d.[key] = i.[key] JOIN OPENJSON(?) AS k ON k.[key] = i.[key] "
     "JOIN OPENJSON(?) AS e1 ON e1.[key] = i.[key] JOIN OPENJSON(?) AS e2 ON e2.[key] = i.[key] "
     "JOIN OPENJSON(?) AS e3 ON e3.[key] = i.[key] JOIN OPENJSON(?) AS e4 ON e4.[key] = i.[key] "
     "JOIN OPENJSON(?) AS e5 ON e5.[key] = i.[key] JOIN OPENJSON(?) AS e6 ON e6.[key] = i.[key] CROSS APPLY (SELECT " OBX__MS_FROM_MS("CAST(d.[value] AS BIGINT)", OBX__MS_EPOCH) " AS [Due]) AS x"},
#ifndef OBX_NO_JOIN
    {OBX__Q_JOIN_START,
     "INSERT INTO {J} ([JoinId], [GroupingKey], [ExpectedSteps], [Metadata]) VALUES (?, ?, ?, ?)"},
    {OBX__Q_JOIN_ATTACH,
     "INSERT INTO {M} ([JoinId], [OutboxMessageId]) SELECT j.[JoinId], ?1 FROM {J} AS j "
     "WHERE j.[JoinId] = ?2 AND NOT EXISTS (SELECT 1 FROM {M} AS m WITH (UPDLOCK, HOLDLOCK) "
     "WHERE m.[JoinId] = ?2 AND m.[OutboxMessageId] = ?1)"},
    {OBX__Q_JOIN_MESSAGE,
     "SELECT [Status] FROM {T} WITH (UPDLOCK, ROWLOCK) WHERE [Id] = ?"},
    {OBX__Q_JOIN_REPORT,
     "UPDATE {M} SET [Status] = ? WHERE [JoinId] = ? AND [OutboxMessageId] = ? AND [Status] = 0"},
    {OBX__Q_JOIN_GET,
     "SELECT " OBX__MS_GUID("[JoinId]") ", [GroupingKey], [ExpectedSteps], [CompletedSteps], "
     "[FailedSteps], [Status], [Metadata], " OBX__MS_UTC_MS("[CreatedUtc]") ", "
     OBX__MS_UTC_MS("[LastUpdatedUtc]") " FROM {J} WHERE [JoinId] = ?"},
    {OBX__Q_JOIN_FINISH,
     "UPDATE {J} SET [Status] = ?, [LastUpdatedUtc] = SYSUTCDATETIME() WHERE [JoinId] = ? AND [Status] = 0"},
#endif
#ifndef OBX_NO_DEAD_LETTERS
    {OBX__Q_DEAD_LIST,
     "SELECT " OBX__MS_COLS " FROM {T} AS t WHERE " OBX__MS_DEAD " ORDER BY t.[CreatedAt], t.[Id] "
     "OFFSET ?8 ROWS FETCH NEXT ?7 ROWS ONLY"},
    {OBX__Q_DEAD_REPLAY,
     "UPDATE t SET [Status] = 0, [RetryCount] = 0, [Starts] = 0, [NextAttemptAt] = SYSDATETIMEOFFSET(), "
     "[OwnerToken] = NULL, [LockedUntil] = NULL, [ExpiresAt] = NULL FROM {T} AS t WHERE " OBX__MS_DEAD},
    {OBX__Q_DEAD_PURGE,
     "WITH d AS (SELECT TOP (?7) t.[Id] FROM {T} AS t WHERE " OBX__MS_DEAD ") DELETE FROM d"},
    /* SQL Server parks no message: every waiting Ready one may run now. */
    {OBX__Q_MOVE,
     "UPDATE t SET [Status] = 3, [LastError] = ?1, [OwnerToken] = NULL, [LockedUntil] = NULL "
     "FROM {T} AS t WHERE t.[Id] = CAST(?2 AS UNIQUEIDENTIFIER) AND (t.[Status] = 0 OR "
     "(t.[Status] = 1 AND ?3 = 1))"},
    {OBX__Q_RUN_NOW,
     "UPDATE t SET [NextAttemptAt] = SYSDATETIMEOFFSET() FROM {T} AS t WHERE "
     "t.[Id] = CAST(?1 AS UNIQUEIDENTIFIER) AND t.[Status] = 0 AND t.[NextAttemptAt] > SYSDATETIMEOFFSET()"},
#endif
    {OBX__Q_COUNT, NULL}};

static const char *const obx__sqlserver_outbox_ddl[] = {
    OBX__MS_DEPLOY_LOCK,
    "IF SCHEMA_ID(PARSENAME(N'{S}', 1)) IS NULL EXEC sp_executesql N'CREATE SCHEMA {S}'",
    "IF OBJECT_ID(N'{T}', N'U') IS NULL\n"
    "CREATE TABLE {T} (\n"
    "    [Id]            UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID(),\n"
    "    [Topic]         NVARCHAR(255) NOT NULL,\n"
    "    [Payload]       NVARCHAR(MAX) NOT NULL,\n"
    "    [CreatedAt]     DATETIMEOFFSET NOT NULL DEFAULT SYSDATETIMEOFFSET(),\n"
    "    [Status]        TINYINT NOT NULL DEFAULT 0,\n"
    "    [LockedUntil]   DATETIME2(3) NULL,\n"
    "    [OwnerToken]    UNIQUEIDENTIFIER NULL,\n"
    "    [IsProcessed]   BIT NOT NULL DEFAULT 0,\n"
    "    [ProcessedAt]   DATETIMEOFFSET NULL,\n"
    "    [ProcessedBy]   NVARCHAR(100) NULL,\n"
    "    [RetryCount]    INT NOT NULL DEFAULT 0,\n"
    "    [LastError]     NVARCHAR(MAX) NULL,\n"
    "    [NextAttemptAt] DATETIMEOFFSET NOT NULL DEFAULT SYSDATETIMEOFFSET(),\n"
    "    [MessageId]     UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID(),\n"
    "    [CorrelationId] NVARCHAR(255) NULL,\n"
    "    [DueTimeUtc]    DATETIMEOFFSET NULL{A},\n"
    "    [Seq]           BIGINT IDENTITY(1, 1) NOT NULL,\n"
    "    CONSTRAINT [PK_{N}] PRIMARY KEY NONCLUSTERED ([Id]),\n"
    "    CONSTRAINT [CX_{N}] UNIQUE CLUSTERED ([Seq])\n"
    ")",
    "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_Ready', 'IndexID') IS NULL\n"
    "CREATE INDEX [IX_{N}_Ready] ON {T} ([NextAttemptAt]) WHERE [Status] = 0",
    "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_Ordering', 'IndexID') IS NULL\n"
    "CREATE INDEX [IX_{N}_Ordering] ON {T} ([OrderingKey], [Status], [OrderingSeq]) "
    "WHERE [OrderingKey] IS NOT NULL AND [Status] <> 2",
    "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_Leased', 'IndexID') IS NULL\n"
    "CREATE INDEX [IX_{N}_Leased] ON {T} ([LockedUntil]) WHERE [Status] = 1",
    "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_Done', 'IndexID') IS NULL\n"
    "CREATE INDEX [IX_{N}_Done] ON {T} ([ProcessedAt]) WHERE [Status] = 2",
#ifndef OBX_NO_JOIN
    "IF OBJECT_ID(N'{J}', N'U') IS NULL\n"
    "CREATE TABLE {J} (\n"
    "    [JoinId]         UNIQUEIDENTIFIER NOT NULL PRIMARY KEY DEFAULT NEWID(),\n"
    "    [GroupingKey]    NVARCHAR(255) NULL,\n"
    "    [ExpectedSteps]  INT NOT NULL,\n"
    "    [CompletedSteps] INT NOT NULL DEFAULT 0,\n"
    "    [FailedSteps]    INT NOT NULL DEFAULT 0,\n"
    "    [Status]         TINYINT NOT NULL DEFAULT 0,\n"
    "    [CreatedUtc]     DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),\n"
    "    [LastUpdatedUtc] DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),\n"
    "    [Metadata]       NVARCHAR(MAX) NULL\n"
    ")",
    "IF INDEXPROPERTY(OBJECT_ID(N'{J}'), N'IX_{N}Join_GroupingKey', 'IndexID') IS NULL\n"
    "CREATE INDEX [IX_{N}Join_GroupingKey] ON {J} ([GroupingKey]) WHERE [GroupingKey] IS NOT NULL",
    "IF OBJECT_ID(N'{M}', N'U') IS NULL\n"
    "CREATE TABLE {M} (\n"
    "    [JoinId]          UNIQUEIDENTIFIER NOT NULL,\n"
    "    [OutboxMessageId] UNIQUEIDENTIFIER NOT NULL,\n"
    "    [Status]          TINYINT NOT NULL DEFAULT 0,\n"
    "    [CreatedUtc]      DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),\n"
    "    CONSTRAINT [PK_{N}JoinMember] PRIMARY KEY ([JoinId], [OutboxMessageId]),\n"
    "    CONSTRAINT [FK_{N}JoinMember_Join] FOREIGN KEY ([JoinId]) REFERENCES {J} ([JoinId]) "
    "ON DELETE CASCADE\n"
    ")",
    "IF INDEXPROPERTY(OBJECT_ID(N'{M}'), N'IX_{N}JoinMember_Message', 'IndexID') IS NULL\n"
    "CREATE INDEX [IX_{N}JoinMember_Message] ON {M} ([OutboxMessageId])",
    /* Join counters follow acks and fails in the database (OBX-089), in
     * the settle's own transaction, set-based: a member leaving Pending
     * counts once, under the join row's lock, never past ExpectedSteps
     * (one statement settles members one way, so the order in which the
     * room is filled does not arise). */
    "CREATE OR ALTER TRIGGER {S}.[{N}_JoinStep] ON {T} AFTER UPDATE AS\n"
    "BEGIN\n"
    "    SET NOCOUNT ON;\n"
    "    IF NOT EXISTS (SELECT 1 FROM inserted WHERE [Status] IN (2, 3)) RETURN; -- a claim, a reap\n"
    "    UPDATE m SET [Status] = CASE i.[Status] WHEN 2 THEN 1 ELSE 2 END\n"
    "      FROM {M} AS m JOIN inserted AS i ON m.[OutboxMessageId] = i.[Id]\n"
    "      JOIN deleted AS d ON d.[Id] = i.[Id]\n"
    "     WHERE i.[Status] IN (2, 3) AND d.[Status] <> i.[Status] AND m.[Status] = 0;\n"
    "END",
    "CREATE OR ALTER TRIGGER {S}.[{N}_JoinCount] ON {M} AFTER UPDATE AS\n"
    "BEGIN\n"
    "    SET NOCOUNT ON;\n"
    "    IF NOT EXISTS (SELECT 1 FROM inserted WHERE [Status] IN (1, 2)) RETURN;\n"
    "    UPDATE j SET [CompletedSteps] = j.[CompletedSteps] + c.[Done],\n"
    "           [FailedSteps] = j.[FailedSteps] + c.[Failed], [LastUpdatedUtc] = SYSUTCDATETIME()\n"
    "      FROM {J} AS j\n"
    "      JOIN (SELECT i.[JoinId], SUM(CASE i.[Status] WHEN 1 THEN 1 ELSE 0 END) AS [Done],\n"
    "                   SUM(CASE i.[Status] WHEN 2 THEN 1 ELSE 0 END) AS [Failed]\n"
    "              FROM inserted AS i JOIN deleted AS d\n"
    "                ON d.[JoinId] = i.[JoinId] AND d.[OutboxMessageId] = i.[OutboxMessageId]\n"
    "             WHERE d.[Status] = 0 AND i.[Status] IN (1, 2)\n"
    "             GROUP BY i.[JoinId]) AS moved ON moved.[JoinId] = j.[JoinId]\n"
    "      CROSS APPLY (SELECT CASE WHEN j.[ExpectedSteps] > j.[CompletedSteps] + j.[FailedSteps]\n"
    "                          THEN j.[ExpectedSteps] - j.[CompletedSteps] - j.[FailedSteps] ELSE 0 END AS [Room]) AS r\n"
    "      CROSS APPLY (SELECT CASE WHEN moved.[Done] < r.[Room] THEN moved.[Done] ELSE r.[Room] END AS [Done]) AS d1\n"
    "      CROSS APPLY (SELECT d1.[Done], CASE WHEN moved.[Failed] < r.[Room] - d1.[Done] THEN moved.[Failed]\n"
    "                          ELSE r.[Room] - d1.[Done] END AS [Failed]) AS c;\n"
    "END",
#endif
    "CREATE OR ALTER PROCEDURE {S}.[{N}_Claim] @OwnerToken UNIQUEIDENTIFIER, @LeaseSeconds INT, "
    "@BatchSize INT, @DeadHolds INT = 0 AS\n"
    "BEGIN\n"
    "    SET NOCOUNT ON;\n"
    "    DECLARE @claimed TABLE ([ClaimedId] UNIQUEIDENTIFIER PRIMARY KEY);\n"
    "    WITH picked AS (\n"
    "        SELECT TOP (@BatchSize) c.[Status], c.[OwnerToken], c.[LockedUntil], c.[Id], c.[NextAttemptAt], c.[Starts]\n"
    "          FROM {T} AS c WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)\n"
    "         WHERE c.[Status] = 0 AND c.[NextAttemptAt] <= SYSDATETIMEOFFSET() AND c.[IsProcessed] = 0\n"
    "           AND " OBX__MS_ORDERED_HEAD "\n"
    "         ORDER BY c.[NextAttemptAt])\n"
    "    UPDATE picked SET [Status] = 1, [OwnerToken] = @OwnerToken,\n"
    "           [LockedUntil] = DATEADD(SECOND, @LeaseSeconds, SYSUTCDATETIME()), [Starts] = [Starts] + 1\n"
    "    OUTPUT inserted.[Id] INTO @claimed;\n"
    "    SELECT " OBX__MS_COLS "\n"
    "      FROM {T} AS t JOIN @claimed AS c ON t.[Id] = c.[ClaimedId]\n"
    "     ORDER BY t.[NextAttemptAt];\n"
    "END",
    OBX__MS_SETTLE("Ack", "@ProcessedBy NVARCHAR(100), @OwnerToken UNIQUEIDENTIFIER, @Ids NVARCHAR(MAX)",
                   "[Status] = 2, [IsProcessed] = 1, [ProcessedAt] = SYSDATETIMEOFFSET(), "
                   "[ProcessedBy] = @ProcessedBy, [LockedUntil] = NULL"),
    /* No delay: the default backoff, min(60 s, 2^RetryCount s). */
    OBX__MS_SETTLE("Abandon", "@DelayMs BIGINT, @Retries INT, @LastError NVARCHAR(MAX), "
                   "@OwnerToken UNIQUEIDENTIFIER, @Ids NVARCHAR(MAX)",
                   "[Status] = 0, [OwnerToken] = NULL, [LockedUntil] = NULL, "
                   "[Starts] = CASE WHEN t.[Starts] > 0 THEN t.[Starts] - 1 ELSE 0 END, "
                   "[RetryCount] = t.[RetryCount] + @Retries, "
                   "[LastError] = COALESCE(@LastError, t.[LastError]), [NextAttemptAt] = "
                   OBX__MS_FROM_MS("COALESCE(@DelayMs, CASE WHEN t.[RetryCount] >= 6 THEN 60000 "
                                   "ELSE 1000 * POWER(2, t.[RetryCount]) END)", "SYSDATETIMEOFFSET()")),
    OBX__MS_SETTLE("Fail", "@LastError NVARCHAR(MAX), @OwnerToken UNIQUEIDENTIFIER, @Ids NVARCHAR(MAX)",
                   "[Status] = 3, [LockedUntil] = NULL, [LastError] = @LastError"),
    "CREATE OR ALTER PROCEDURE {S}.[{N}_ReapExpired] @MaxStarts INT = 3 AS\n"
    "BEGIN\n"
    "    SET NOCOUNT ON;\n"
    "    DECLARE @changed TABLE ([ChangedId] UNIQUEIDENTIFIER);\n"
    "    UPDATE {T} SET [Status] = CASE WHEN [Starts] >= @MaxStarts THEN 3 ELSE 0 END,\n"
    "           [LastError] = CASE WHEN [Starts] >= @MaxStarts THEN N'crash loop: claimed '\n"
    "               + CAST(@MaxStarts AS NVARCHAR(11)) + N' times without an outcome (the handler crashed "
    "or was killed, or its lease expired)' ELSE [LastError] END,\n"
    "           [OwnerToken] = NULL, [LockedUntil] = NULL\n"
    "    OUTPUT inserted.[Id] INTO @changed\n"
    "     WHERE [Status] = 1 AND [LockedUntil] < SYSUTCDATETIME();\n"
    "    SELECT COUNT(*) FROM @changed;\n"
    "END",
    "IF @@TRANCOUNT > 0 AND (@@OPTIONS & 2) = 0 COMMIT;", /* sqlcmd; the library commits itself */
        NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (obx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * OrderingKey, OrderingSeq: ordered delivery per key (OBX__ORDERED_HEAD).
 * TenantId .. Headers: the envelope (NULL when a message has none).
 * ExpiresAt: expires_utc_ms (NULL: never), checked after a claim. */
static const obx__column obx__sqlserver_outbox_columns[] = {
    {"Starts", "INT NOT NULL DEFAULT 0"}, {"OrderingKey", "NVARCHAR(255) NULL"}, {"OrderingSeq", "BIGINT NULL"},
    {"TenantId", "NVARCHAR(64) NULL"}, {"AggregateType", "NVARCHAR(64) NULL"},
    {"AggregateId", "NVARCHAR(128) NULL"}, {"Headers", "NVARCHAR(MAX) NULL"},
    {"ExpiresAt", "DATETIMEOFFSET NULL"},
    {"Priority", "SMALLINT NOT NULL DEFAULT 0"}, /* stored; the claim orders by due time alone */
    {NULL, NULL}};
static const obx__sqlset obx__sqlserver_outbox = {
    "SYSDATETIMEOFFSET()",
    obx__sqlserver_outbox_ddl,
    obx__sqlserver_outbox_rows,
    obx__sqlserver_outbox_columns,
    1, /* claim_full_rows: the rows of the deployed <table>_Claim */
    NULL /* contract: none */
};
#define OBX__SQLSERVER_SET &obx__sqlserver_outbox
#endif

/* >>common-begin sqlsets */

/* The statement sets by dialect (obx_dialect order); a dialect left out of
 * the build (OBX_NO_<DIALECT>) has none. */
#ifndef OBX__SQLITE_SET
#define OBX__SQLITE_SET NULL
#endif
#ifndef OBX__POSTGRESQL_SET
#define OBX__POSTGRESQL_SET NULL
#endif
#ifndef OBX__MARIADB_SET
#define OBX__MARIADB_SET NULL
#endif
#ifndef OBX__SQLSERVER_SET
#define OBX__SQLSERVER_SET NULL
#endif
static const obx__sqlset *const obx__sqlsets[] = {NULL, OBX__SQLITE_SET, OBX__POSTGRESQL_SET,
                                                    OBX__MARIADB_SET, OBX__SQLSERVER_SET};

/* >>common-end sqlsets */

/* Expand a template with the store's names; {J} and {M} are the join and
 * join-member tables (with OBX_NO_JOIN no template names them). */
static char *obx__expand(const obx__hooks *h, const obx__dialect *d, const obx__sqlset *q,
                         const char *schema, const char *table, const char *tmpl) {
#ifdef OBX_NO_JOIN
    return obx__expand_names(h, d, q, schema, table, tmpl, NULL);
#else
    static const char *const joins[] = {"JJoin", "MJoinMember", NULL};
    return obx__expand_names(h, d, q, schema, table, tmpl, joins);
#endif
}

/* >> the outbox's face: what the engine below needs of this header ------------- */


#define OBX__KEY_LISTS 1              /* a message's key is its id: one list */
#define OBX__KEYS_ARG "ids"           /* the settle calls' key argument */
#define OBX__NOUN "outbox"
#define OBX__DEFAULT_SCHEMA "dbo"
#define OBX__DEFAULT_TABLE "Outbox"
/* Table names get suffixes ("IX_<table>JoinMember_Message" is the longest,
 * 27 more characters): short enough for every derived name to fit 63. */
#define OBX__TABLE_MAX 36
#define OBX__ACK_NAMES_WORKER 1       /* ack records ProcessedBy */
#define OBX__DELAY_MIN_MS 0           /* abandon with delay 0: claimable again at once */
#define OBX__RETENTION_DEFAULT_MS OBX_DEFAULT_RETENTION_MS /* cleanup with retention 0 */
#define OBX__MSG_ATTEMPTS(m) ((m)->retry_count)
#define OBX__MSG_KEYED(m) ((m)->ordering_key != NULL)
#define OBX__CLAIM_TEXTS 2            /* a claim's short row: Id, MessageId, */
#define OBX__CLAIM_INTS 8             /* then 7 times and counts and the mask (OBX__CLAIM_MASK) */
#define OBX__CLAIM_COLS 19            /* and 9 texts (OBX__PG_CLAIM_COLS) */

/* Where each string of a message row sits in store->rows while reading. */
typedef struct obx__row_offsets {
    struct obx__envelope_offsets env;
    size_t topic, payload, correlation, last_error, processed_by, ordering_key;
} obx__row_offsets;

#ifndef OBX_NO_METRICS_TEXT
/* The counters as Prometheus metrics (obx_metrics_text): name after "obx_", help. */
static const char *const obx__metric_text[OBX_METRIC_COUNT_][2] = {
    {"messages_enqueued_total", "Messages enqueued (committed, or written into a caller's transaction)."},
    {"messages_dispatched_total", "Messages whose handlers all succeeded (acknowledged)."},
    {"messages_retried_total", "Messages released for a later attempt."},
    {"messages_dead_total", "Messages failed permanently."},
    {"leases_reaped_total", "Expired leases released, their messages claimable again."},
    {"messages_cleaned_up_total", "Done messages deleted by cleanup after their retention."},
    {"messages_expired_unhandled_total", "Messages past their expiry when claimed: dead, never handled."}};
/* The gauges (OBX__Q_GAUGES's columns, in order): name after "obx_", help. */
static const char *const obx__gauge_text[6][2] = {
    {"queue_ready_messages", "Messages ready to claim now (due, not leased)."},
    {"queue_oldest_ready_age_seconds", "How long the oldest ready message has waited."},
    {"queue_in_flight_messages", "Messages claimed by a worker, under a lease."},
    {"queue_dead_messages", "Messages failed permanently, kept for inspection or replay."},
    {"queue_scheduled_messages",
     "Messages not due yet: scheduled, waiting for a retry, or behind an earlier message of their key."},
    {"queue_expired_leases", "Claimed messages whose lease ran out, not yet reaped (also in flight)."}};
#endif

/* What only an outbox store keeps: the columns of a batch insert (one per
 * list of OBX__Q_INSERT_MANY_KEYED), a message's headers as JSON text, and
 * whether a Dead message holds its ordering key. */
#define OBX__INSERT_LISTS 13
typedef struct obx__store_own {
    obx__buf columns[OBX__INSERT_LISTS];
    obx__buf headers;
    obx__buf values;              /* the parameters of a multi-row VALUES (obx__insert_values) */
    int values_rows[4];           /* the row count of the statement prepared on the store's
                                     connection for OBX__Q_INSERT_VALUES(_ENV, _KEYED, _KEYED_ENV) */
    int values_last[4];           /* and of the last batch statement there */
    obx__buf wake;                /* the ids a MariaDB wake updates (OBX__Q_WAKE_IDS) */
    obx__buf wake_again;          /* ids of keyed messages a dispatcher settled (obx__wake_missed) */
    int dead_holds;
    int keyed_claims;             /* a claim returned a message with an ordering key */
} obx__store_own;

/* Where no trigger wakes the messages parked behind a key (MariaDB: see
 * OBX__MY_PARKED), a store that has claimed a keyed message runs the wake
 * after each ack and fail that finished messages (the ids in keys[0]);
 * obx__own_acked: in the unit of a claim that carried keyed acks, after
 * the ack, so that the claim takes the keys' next messages. */
#define obx__own_claimed(s, m) ((m)->ordering_key ? (void)((s)->own.keyed_claims = 1) : (void)0)
/* Whether a claim that carries keyed acks runs before them (OBX__Q_CLAIM_CARRY). */
#ifdef OBX_NO_ORDERING_KEYS
#define OBX__CARRY_FIRST(s) ((void)(s), 0)
#else
#define OBX__CARRY_FIRST(s) ((s)->sql[OBX__Q_CLAIM_CARRY] != NULL)
#endif
#ifdef OBX_NO_MARIADB
#define obx__own_settled(s, keys, kind, rows) ((void)(s), (void)(keys), (void)(kind), (void)(rows))
#define obx__own_acked(db, s, keys, rows) ((void)(db), (void)(s), (void)(keys), (void)(rows), OBX_OK)
#else
static void obx__own_settled(struct obx_store *s, const obx__buf *keys, int kind, int64_t rows);
static obx_result obx__own_acked(obx__db *db, struct obx_store *s, const obx__buf *keys, int64_t rows);
#endif
/* The wake of every key left with only parked messages (OBX__Q_WAKE, where
 * the dialect has it; `ids` NULL), or of the keys of the messages `ids`
 * lists (OBX__Q_WAKE_AGAIN): by the reap, and by a dispatcher whose store
 * has claimed a keyed message (obx__own_keyed) when a claim came back short. */
static obx_result obx__own_wake(struct obx_store *s, const obx__buf *ids, int64_t *woken);
/* A dispatcher's batch, settled: its keyed messages' ids kept (their keys
 * are woken again at the next short claim: obx__own_wake_again). */
static void obx__own_wake_later(struct obx_store *s, const obx_message *ms, int n);
static obx_result obx__own_wake_again(struct obx_store *s, int64_t *woken);
#define obx__own_keyed(s) ((s)->own.keyed_claims)
/* Where claims of one ordering key could overlap (OBX__Q_CLAIM_CHECK): in
 * the claim's transaction, after its rows are read, release the keyed ones
 * whose key another claim holds and drop them from the batch. */
#ifdef OBX_NO_ORDERING_KEYS
#define obx__claim_recheck(db, s, count) ((void)(db), (void)(s), (void)(count), OBX_OK)
#else
static obx_result obx__claim_recheck(obx__db *db, struct obx_store *s, int *count);
#endif


/* >>common-begin engine */

/* The engine: the store, its work queue (claim, settle, reap, cleanup),
 * providers, routers and the dispatcher. The same text in both headers;
 * what differs between them is the "face" defined just above: the
 * statements, the row layout, a message's key and a few constants. */

/* What each header defines for the engine (its face), below the engine. */
static void obx__store_own_free(const obx__hooks *h, obx__store_own *own);
/* The header's own options of a store description, kept at open. */
static void obx__store_own_open(obx__store_own *own, const obx_store_desc *desc);
/* The expanded statements, by id: the header may swap a statement for a
 * variant its options ask for. */
static void obx__store_own_sql(const obx__store_own *own, char **sql);
/* Names the header's own options give its statement templates ({H}...). */
static void obx__store_own_names(const obx__store_own *own, const char **names);
/* The current row (the dialect's message columns) into *m; its strings go
 * to buf, at offsets *o, and are pointed at by obx__point_strings once the
 * buffer stops moving. */
static obx_result obx__read_message(obx__db *db, SQLHSTMT st, obx_message *m, obx__buf *buf,
                                    obx__row_offsets *o);
static void obx__point_strings(const obx__buf *buf, obx_message *m, const obx__row_offsets *o);
/* A claim's short row: its head bound in `head` (OBX__CLAIM_TEXTS texts,
 * OBX__CLAIM_INTS integers, the last a mask of the optional texts that are
 * not NULL), then its texts; what the claim itself set (status, owner
 * `token`) filled in, not read. */
static obx_result obx__read_claimed(obx__db *db, SQLHSTMT st, const obx__row_head *head, const char *token,
                                    obx_message *m, obx__buf *buf, obx__row_offsets *o);
/* Add a claimed message's key to key lists `keys`; 0 when out of memory. */
static int obx__msg_key_add(const obx__hooks *h, const obx__dialect *d, obx__buf *keys,
                            const obx_message *m);
/* A message's name in log lines. */
static void obx__msg_name(const obx_message *m, char *out, size_t size);
#ifndef OBX_NO_DEAD_LETTERS
/* A dead-letter filter's key fields into p[0] and p[1] (SQL NULL where not
 * given), checked; `buf` holds a normalised copy. */
static obx_result obx__dead_key(obx_store *s, const char *fn, const obx_dead_filter *f,
                                obx__param p[2], char buf[37]);
#endif
/* The worker name of a store description (NULL where the header has none). */
static const char *obx__desc_worker(const obx_store_desc *desc);
#ifndef OBX_NO_MULTI_STORE
static void obx__desc_set_worker(obx_store_desc *desc, const char *worker);
#endif

/* Defaults and limits of the engine, used by code and docs alike. */
#define OBX__BATCH_DEFAULT 50              /* messages per claim */
#define OBX__LEASE_DEFAULT_SECONDS 30
#define OBX__MAX_ATTEMPTS_DEFAULT 10
#define OBX__POLL_DEFAULT_MS 500           /* wait after an empty claim ... */
#define OBX__IDLE_MAX_DEFAULT_MS 2000      /* ... doubling up to this */
#define OBX__ERROR_DELAY_DEFAULT_MS 30000  /* wait after a failed round */
#define OBX__REAP_DEFAULT_MS 30000         /* reap expired leases this often */
#define OBX__REFRESH_DEFAULT_MS 300000     /* discovery this often */
#define OBX__CLEANUP_BATCH_DEFAULT 1000    /* rows deleted per cleanup transaction */
#define OBX__WAIT_DELAY_MAX_MS 5000        /* a waiting message is looked at again this soon */
#define OBX__LEASE_MARGIN_MAX_MS 5000      /* no handler starts this close to the lease end */
#define OBX__HANDLER_ERROR_MAX 256         /* a handler's error text, with its NUL */
#define OBX__MSG_NAME_MAX 560              /* a message's name in log lines */
#define OBX__DISCOVER_FIRST 256            /* room given to discovery at first */
#define OBX__LOGIN_TIMEOUT_DEFAULT_S 10    /* connecting gives up after this long */
#define OBX__STALL_WARN_MS 3000            /* a dispatcher's database call this slow is logged */
#define OBX__MAX_HANDLER_DEFAULT_MS 300000 /* leases are renewed for handlers this long */
#define OBX__MAX_STARTS_DEFAULT 3          /* claims without an outcome before Dead ... */
#define OBX__MAX_STARTS_LIMIT 1000         /* ... settable up to this */
#define OBX__STR_(x) #x
#define OBX__STR(x) OBX__STR_(x) /* a number macro as text */
#define OBX__PAUSE_DEFAULT_MS 1000         /* a topic's first pause (OBX_PAUSE) ... */
#define OBX__PAUSE_MAX_DEFAULT_MS 60000    /* ... doubling up to this */
#ifdef OBX_NO_POSIX_CLOCK
#define OBX__DEFAULT_CLOCK_SLEEPS 0        /* without POSIX clocks the default sleep is a no-op */
#else
#define OBX__DEFAULT_CLOCK_SLEEPS 1
#endif
#ifndef OBX__LOOP_SLICED
#define OBX__RENEWAL 1                     /* threads: a dispatcher can renew leases */
#else
#define OBX__RENEWAL 0
#endif

/* >> store ---------------------------------------------------------------------- */

/* Handler durations of one topic (obx_metrics_text): bucket upper bounds
 * in ms, each bucket counting the runs that took at most that long. */
#define OBX__HIST_BUCKETS 13
#define OBX__HIST_TOPICS_MAX 100           /* more topics count as "(other)" */
#ifndef OBX_NO_METRICS_TEXT
static const int64_t obx__hist_bounds_ms[OBX__HIST_BUCKETS] = {5, 10, 25, 50, 100, 250, 500, 1000,
                                                                2500, 5000, 10000, 30000, 60000};
#endif
typedef struct obx__hist {
    char *topic;
    int64_t buckets[OBX__HIST_BUCKETS];
    int64_t count, sum_us;       /* microseconds: a fast handler's sum is not 0.000 s */
} obx__hist;

struct obx_store {
    obx__hooks hooks;
    obx__db db;
    obx_error err;
    char *schema, *table, *store_id, *worker_name;
    const obx__sqlset *q;
    char *sql[OBX__Q_COUNT];      /* expanded statements */
    obx__buf keys[OBX__KEY_LISTS]; /* a batch statement's key lists (obx__msg_key_add) */
    obx__buf carry[OBX__KEY_LISTS]; /* a dispatcher's acks carried into its next claim */
    int carry_count;              /* how many (0: none; obx__carry_flush) */
    int carry_keyed;              /* some of them have an ordering key (obx__carry) */
    obx__buf rows;                /* strings of the last claim's messages */
    obx__buf read_rows;           /* strings of the last get: apart, so a handler may read
                                     without spoiling the batch it was called from */
    obx_message *msgs;            /* the last claim's messages */
    obx__row_offsets *offsets;    /* where their strings sit in `rows` while reading */
    int msgs_cap;
    obx_uuid_state uuids;
    obx_metrics_hook metrics;
    obx_log_level message_log_level; /* per-message lines */
    int64_t counters[OBX_METRIC_COUNT_];
    obx__hist *hist;              /* handler durations per topic, hist_count of hist_cap */
    int hist_count, hist_cap;
    char token[37];               /* the owner token of the current call, lower case */
    char *wake_path;              /* where a dispatcher may listen (obx_notify), or NULL */
    int64_t max_pending;          /* enqueue refuses past this many unfinished; 0: no cap */
    int max_starts;               /* claims without an outcome before Dead ({Q} in statements) */
    int64_t pending_estimate;     /* the last count plus what this store enqueued since */
    int64_t pending_counted_ms;   /* when it was counted (monotonic) */
    int wake_fd;                  /* the sending socket, made at the first wake; -1 */
    obx__store_own own;           /* what only this header keeps */
};

static void obx__count(obx_store *s, obx_metric metric, int64_t n) {
    if (n <= 0) return;
    s->counters[metric] += n;
    if (s->metrics.count) s->metrics.count(metric, n, s->store_id, s->metrics.user);
}

/* The error of a NULL handle, filled once: an initialized obx_error is
 * 628 bytes of flash, nearly all zeros. GCC and Clang fill it before main
 * (a constructor: no lock, with or without threads); other compilers at
 * first use, under a once-only call (obx__once). */
#if defined(__GNUC__) || defined(__clang__) || !defined(OBX_NO_THREADS)
static obx_error obx__null_error_at;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((constructor))
#endif
static void obx__null_error_fill(void) {
    obx__null_error_at.result = OBX_ERR_INVALID_ARG;
    obx__copy(obx__null_error_at.where, sizeof obx__null_error_at.where, "store");
    obx__copy(obx__null_error_at.message, sizeof obx__null_error_at.message, "store is NULL");
}

#if defined(__GNUC__) || defined(__clang__)
#define obx__null_error() ((const obx_error *)&obx__null_error_at)
#else
static obx__once_t obx__null_error_once = OBX__ONCE_INIT;
static const obx_error *obx__null_error(void) {
    obx__once(&obx__null_error_once, obx__null_error_fill);
    return &obx__null_error_at;
}
#endif
#else
static const obx_error obx__null_error_at = {OBX_ERR_INVALID_ARG, "", 0, 0, "store", "store is NULL"};
#define obx__null_error() (&obx__null_error_at)
#endif

/* a + b for times and intervals, saturating: a huge interval means never. */
static int64_t obx__sat_add(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

/* The length of the valid UTF-8 character at s (`left` bytes there), or 0
 * when none starts there (overlong forms, surrogates, past U+10FFFF). */
static size_t obx__utf8_char(const unsigned char *s, size_t left) {
    unsigned long cp = s[0];
    size_t k, more;
    if (cp < 0x80) return 1;
    if (cp >= 0xC2 && cp <= 0xDF) more = 1;
    else if ((cp & 0xF0) == 0xE0) more = 2;
    else if (cp >= 0xF0 && cp <= 0xF4) more = 3;
    else return 0;
    if (more >= left) return 0;
    cp &= 0x3Fu >> more;
    for (k = 1; k <= more; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3Fu);
    }
    if ((more == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return more + 1;
}

/* Code points in UTF-8 text of n bytes, or -1 when it is not valid UTF-8:
 * such text could never match, and PostgreSQL and MariaDB refuse to store it. */
static long obx__utf8_length(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i, len;
    long chars = 0;
    for (i = 0; i < n; i += len, chars++)
        if (!(len = obx__utf8_char(s + i, n - i))) return -1;
    return chars;
}

/* A handler's error text made valid UTF-8 in place (each byte that starts
 * no character becomes '?'): stored as the last error, text that is not
 * (bytes from a device, a message cut by snprintf inside a character)
 * would make PostgreSQL and MariaDB refuse the settle, again at every
 * redelivery, and the message would never use up its attempts. */
static void obx__utf8_repair(char *text) {
    unsigned char *s = (unsigned char *)text;
    size_t n = strlen(text), i, len;
    for (i = 0; i < n; i += len)
        if (!(len = obx__utf8_char(s + i, n - i))) {
            s[i] = '?';
            len = 1;
        }
}

/* An optional text argument (NULL passes) that is stored: valid UTF-8. */
static obx_result obx__check_utf8(obx_error *err, const char *fn, const char *arg, const char *value) {
    char where[96];
    if (!value || obx__utf8_length(value, strlen(value)) >= 0) return OBX_OK;
    snprintf(where, sizeof where, "%s: %s", fn, arg);
    return obx__fail(err, OBX_ERR_INVALID_ARG, where, "%s must be valid UTF-8", arg);
}

/* Whether text is valid UTF-8 of at most `max` characters. */
OBX__PRIVATE int obx__text_fits(const char *text, long max) {
    long chars = obx__utf8_length(text, strlen(text));
    return chars >= 0 && chars <= max;
}

/* A required text argument: not NULL or empty, valid UTF-8, at most `max`
 * characters. */
static obx_result obx__check_text(obx_error *err, const char *fn, const char *arg, const char *value,
                                  long max) {
    char where[96];
    long chars;
    snprintf(where, sizeof where, "%s: %s", fn, arg);
    if (!value || !value[0])
        return obx__fail(err, OBX_ERR_INVALID_ARG, where, "%s must not be NULL or empty", arg);
    chars = obx__utf8_length(value, strlen(value));
    if (chars < 0) return obx__fail(err, OBX_ERR_INVALID_ARG, where, "%s is not valid UTF-8", arg);
    if (chars > max)
        return obx__fail(err, OBX_ERR_INVALID_ARG, where, "%s is longer than %ld characters", arg, max);
    return OBX_OK;
}

static obx_result obx__check_names(obx_error *err, const char *fn, const char *schema,
                                   const char *table) {
    char where[96];
    if (obx__identifier_check(schema) != OBX_OK) {
        snprintf(where, sizeof where, "%s: schema", fn);
        return obx__fail(err, OBX_ERR_INVALID_ARG, where,
                         "schema must be 1-63 characters"
                         OBX__WHY(" of A-Z, a-z, 0-9, _ and not start with a digit"));
    }
    if (obx__identifier_check(table) != OBX_OK || strlen(table) > OBX__TABLE_MAX) {
        snprintf(where, sizeof where, "%s: table", fn);
        return obx__fail(err, OBX_ERR_INVALID_ARG, where,
                         "table must be 1-%d characters"
                         OBX__WHY(" of A-Z, a-z, 0-9, _ and not start with a digit (derived index names must fit 63)"),
                         OBX__TABLE_MAX);
    }
    return OBX_OK;
}

/* A name that reaches log lines and metrics labels (worker_name also a
 * column): valid UTF-8 of 1..max characters and at most max_bytes bytes,
 * no control characters. Not UTF-8, worker_name made every ack fail on
 * PostgreSQL and MariaDB. */
static int obx__name_ok(const char *text, long max, size_t max_bytes) {
    long chars = obx__utf8_length(text, strlen(text));
    if (chars < 1 || chars > max || strlen(text) > max_bytes) return 0;
    for (; *text; text++)
        if ((unsigned char)*text < 0x20 || *text == 0x7F) return 0;
    return 1;
}

static obx_result obx__store_names(obx_store *s, const obx_store_desc *desc) {
    const char *schema = desc->schema ? desc->schema : OBX__DEFAULT_SCHEMA;
    const char *table = desc->table ? desc->table : OBX__DEFAULT_TABLE;
    const char *id = desc->store_id ? desc->store_id : OBX__NOUN;
    const char *worker = obx__desc_worker(desc);
    obx_result r = obx__check_names(&s->err, "obx_store_open", schema, table);
    if (r != OBX_OK) return r;
    if (!obx__name_ok(id, 63, 63)) /* obx_store_info.store_id holds 63 bytes */
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, "obx_store_open: store_id",
                         "store_id must be 1-63 bytes of UTF-8" OBX__WHY(", none of them control characters"));
    if (worker && !obx__name_ok(worker, 100, 400))
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, "obx_store_open: worker_name",
                         "worker_name must be 1-100 characters of UTF-8" OBX__WHY(", none of them control characters"));
    s->schema = obx__strdup(&s->hooks, schema);
    s->table = obx__strdup(&s->hooks, table);
    s->store_id = obx__strdup(&s->hooks, id);
    s->worker_name = worker ? obx__strdup(&s->hooks, worker) : NULL;
    if (!s->schema || !s->table || !s->store_id || (worker && !s->worker_name))
        return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_store_open", "out of memory");
    return OBX_OK;
}

/* Statement `id`'s arguments on dialect d, as the header declares them
 * (obx__stmt_args_rows), or NULL. */
OBX__PRIVATE const char *obx__stmt_args(const obx__dialect *d, int id) {
    const obx__sqlset *q = obx__sqlsets[d->id];
    const obx__stmt_row *row;
    if (id == OBX__Q_CLAIM && q) /* a claim that picks first names the picked keys */
        for (row = q->rows; row->sql; row++)
            if (row->id == OBX__Q_CLAIM_PICK) id = OBX__Q_CLAIM_READ;
    if (OBX__ARGS_JSON_ROWS(id) && OBX__ONE(d)->batch_as_json_rows) return "j";
    for (row = obx__stmt_args_rows; row->sql; row++)
        if (row->id == id) return row->sql;
    return NULL;
}

/* OBX__Q_CLAIM_ACK on PostgreSQL: a dispatcher's ack of its last batch and
 * its next claim as one statement, made of the store's own ACK and CLAIM
 * (so the claim's ordering and locks are written once): one round trip and
 * one commit per batch instead of two of each. Both halves see the
 * statement's one snapshot: the ack's rows are in flight there, the claim
 * picks Ready ones, so they never meet, and a key whose message is acked
 * here looks busy to this claim (the dispatcher carries no keyed acks). The
 * count row: with nothing claimed, one row of NULLs still brings it. */
static obx_result obx__claim_ack_sql(obx_store *s) {
    static const char head[] = "WITH a AS (", mid[] = " RETURNING 1), c AS (",
                      tail[] = ") SELECT c.*, k.n FROM (SELECT count(*) AS n FROM a) AS k LEFT JOIN c ON true";
    size_t n;
    char *t;
    if (OBX__ONE(s->db.d)->id != OBX_DIALECT_POSTGRESQL || !s->sql[OBX__Q_ACK] || !s->sql[OBX__Q_CLAIM] ||
        OBX__SQL(s, OBX__Q_CLAIM_PICK) || OBX__FULL_ROWS(s->q))
        return OBX_OK;
    n = sizeof head + strlen(s->sql[OBX__Q_ACK]) + sizeof mid + strlen(s->sql[OBX__Q_CLAIM]) + sizeof tail;
    if (!(t = (char *)obx__alloc(&s->hooks, n))) return OBX_ERR_NO_MEMORY;
    snprintf(t, n, "%s%s%s%s%s", head, s->sql[OBX__Q_ACK], mid, s->sql[OBX__Q_CLAIM], tail);
    s->sql[OBX__Q_CLAIM_ACK] = t;
    return OBX_OK;
}

static obx_result obx__store_prepare_sql(obx_store *s) {
    const obx__stmt_row *row;
    const char *names[26];
    char limit[16];
    s->q = obx__sqlsets[s->db.d->id]; /* built in: obx__db_setup refused a left-out one */
    snprintf(limit, sizeof limit, "%d", s->max_starts);
    memset((void *)names, 0, sizeof names);
    names['Q' - 'A'] = limit; /* {Q}: max_starts, a literal of the store's statements */
    obx__store_own_names(&s->own, names);
    for (row = s->q->rows; row->sql; row++) /* {O}: a condition several statements share */
        if (row->id == OBX__Q_OWNED) names['O' - 'A'] = row->sql;
    for (row = s->q->rows; row->sql; row++) { /* a statement a dialect lacks stays NULL */
        char *own;
        if (row->id == OBX__Q_OWNED) continue;
        own = obx__sql_expand(&s->hooks, row->sql, names);
        OBX_ASSERT(row->id >= 0 && row->id < OBX__Q_COUNT && !s->sql[row->id]);
        OBX_ASSERT(s->db.d->id != OBX_DIALECT_SQLITE || !OBX__SQLITE_LACKS(row->id));
        s->sql[row->id] = own ? obx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, own) : NULL;
        obx__free(&s->hooks, own);
        if (!s->sql[row->id])
            return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_store_open", "out of memory");
    }
    obx__store_own_sql(&s->own, s->sql);
    if (obx__claim_ack_sql(s) != OBX_OK) return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_store_open", "out of memory");
#if OBX__CHECK_ARGS
    { /* every statement takes what it declares (obx__args_check) */
        int i;
        char why[80];
        for (i = 0; i < OBX__Q_COUNT; i++)
            if (s->sql[i] && obx__args_check(s->sql[i], obx__stmt_args(s->db.d, i), why, sizeof why))
                return obx__fail(&s->err, OBX_ERR_STATE, "obx_store_open", "statement %d on %s: %s", i,
                                 obx__dialect_name(s->db.d->id), why);
    }
    s->db.sql = s->sql;
#endif
    return OBX_OK;
}

/* Whether a CREATE TABLE template declares column `name` itself: a line
 * "    name ..." or "    <quoted name> ...". */
static int obx__ddl_declares(const obx__dialect *d, const char *tmpl, const char *name) {
    char bare[80], quoted[80];
    snprintf(bare, sizeof bare, "\n    %s ", name);
    snprintf(quoted, sizeof quoted, "\n    %c%s%c ", d->quote_open, name, d->quote_close);
    return strstr(tmpl, bare) || strstr(tmpl, quoted);
}

/* One DDL statement with a store's names. "{A}", in the message table's
 * CREATE TABLE, becomes the columns added since the first release, so a
 * new table has them all; one the template declares itself (to place a hot
 * column before the texts) is left out there. On MariaDB a generated
 * column added VIRTUAL (instant on an existing table) is PERSISTENT in a
 * new one: InnoDB's purge then never computes a value to find an index
 * entry, the step behind known index corruptions (MDEV-38140, MDEV-29666;
 * docs/RELIABILITY.md); it costs 8 bytes a row in its state. */
static char *obx__ddl_text(const obx__hooks *h, const obx__dialect *d, const obx__sqlset *q,
                           const char *schema, const char *table, const char *tmpl) {
    const char *names[26];
    obx__buf cols = {NULL, 0, 0};
    char *full, *out;
    int i, ok = 1;
    if (!strstr(tmpl, "{A}")) return obx__expand(h, d, q, schema, table, tmpl);
    for (i = 0; ok && i < OBX__COLUMNS_MAX && q->columns[i].name; i++) {
        const char *type = q->columns[i].type;
        char quoted[80], line[320];
        if (obx__ddl_declares(d, tmpl, q->columns[i].name)) continue;
        snprintf(quoted, sizeof quoted, "%c%s%c", d->quote_open, q->columns[i].name, d->quote_close);
#ifndef OBX_NO_MARIADB
        if (OBX__ONE(d)->id == OBX_DIALECT_MARIADB && strlen(type) > 8 &&
            strcmp(type + strlen(type) - 8, " VIRTUAL") == 0)
            snprintf(line, sizeof line, ",\n    %-15s %.*s PERSISTENT", quoted, (int)(strlen(type) - 8), type);
        else
#endif
            snprintf(line, sizeof line, ",\n    %-15s %s", quoted, type);
        ok = obx__buf_add(h, &cols, line, strlen(line));
    }
    memset((void *)names, 0, sizeof names);
    names['A' - 'A'] = cols.data ? cols.data : "";
    full = ok ? obx__sql_expand(h, tmpl, names) : NULL;
    out = full ? obx__expand(h, d, q, schema, table, full) : NULL;
    obx__free(h, full);
    obx__buf_free(h, &cols);
    return out;
}

/* A dialect's column template (probe or add) for one added column. */
static char *obx__column_text(const obx__hooks *h, const obx__dialect *d, const obx__sqlset *q,
                              const char *schema, const char *table, const char *tmpl,
                              const obx__column *c) {
    const char *names[26];
    char quoted[80], *full, *out;
    snprintf(quoted, sizeof quoted, "%c%s%c", d->quote_open, c->name, d->quote_close);
    memset((void *)names, 0, sizeof names);
    names['C' - 'A'] = quoted;
    names['K' - 'A'] = c->name;
    names['D' - 'A'] = c->type;
    full = obx__sql_expand(h, tmpl, names);
    out = full ? obx__expand(h, d, q, schema, table, full) : NULL;
    obx__free(h, full);
    return out;
}

/* The schema for one dialect and set of names as one text, each statement
 * followed by the dialect's statement end (what sql/<dialect>/ holds). The
 * column additions follow the message table's CREATE TABLE, so that the
 * text also upgrades an old table; SQLite has no conditional ALTER, so its
 * text only creates (deploy upgrades its old tables). */
static char *obx__schema_text(const obx__hooks *h, const obx__dialect *d, const obx__sqlset *q,
                              const char *schema, const char *table) {
    obx__buf text = {NULL, 0, 0};
    int i, c, ok = 1;
    for (i = 0; ok && q->ddl[i]; i++) {
        int adds = strstr(q->ddl[i], "{A}") && OBX__ONE(d)->id != OBX_DIALECT_SQLITE ? OBX__COLUMNS_MAX : 0;
        for (c = -1; ok && c < adds && (c < 0 || q->columns[c].name); c++) {
            char *one = c < 0 ? obx__ddl_text(h, d, q, schema, table, q->ddl[i])
                              : obx__column_text(h, d, q, schema, table, OBX__ONE(d)->column_add, &q->columns[c]);
            /* A MariaDB trigger with a compound body has ';' inside: the
             * mysql/mariadb client splits at each one unless DELIMITER says. */
            int compound = one && OBX__ONE(d)->id == OBX_DIALECT_MARIADB && strchr(one, ';');
            const char *open = compound ? "DELIMITER $$\n" : "";
            const char *end = compound ? "$$\nDELIMITER ;\n" : OBX__ONE(d)->statement_end;
            ok = one && obx__buf_add(h, &text, open, strlen(open)) &&
                 obx__buf_add(h, &text, one, strlen(one)) && obx__buf_add(h, &text, end, strlen(end));
            obx__free(h, one);
        }
    }
    if (!ok) obx__buf_free(h, &text);
    return ok ? text.data : NULL;
}

/* printf into memory from the allocator; NULL when out of memory. */
OBX__PRINTF(2, 3)
static char *obx__format(const obx__hooks *h, const char *fmt, ...) {
    va_list ap;
    char *out;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !(out = (char *)obx__alloc(h, (size_t)n + 1))) return NULL;
    va_start(ap, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return out;
}

/* The quoted name at p (quote characters q0, q1) into out; the text after it. */
static const char *obx__ddl_name(const char *p, char q0, char q1, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    if (!p || *p != q0) return NULL;
    for (p++; *p && *p != q1 && n + 1 < cap; p++) out[n++] = *p;
    out[n] = '\0';
    return *p == q1 ? p + 1 : NULL;
}

/* Look before changing (obx__deploy_unit). Some IF NOT EXISTS and OR REPLACE
 * statements lock their table even when there is nothing to do (PostgreSQL:
 * CREATE INDEX a SHARE lock, CREATE OR REPLACE TRIGGER SHARE ROW EXCLUSIVE;
 * MariaDB: CREATE TRIGGER an exclusive metadata lock), queued behind every
 * open transaction on the table and with every writer after them queued
 * behind them. Each such statement gets a catalog query, which locks
 * nothing and returns 1 when the object is there as the statement would
 * make it; the statement runs only otherwise. A PostgreSQL trigger's
 * definition is too far from its text to compare: its comment carries a
 * hash of the text (*after sets it). */
static char *obx__ddl_probe(const obx__hooks *h, const obx__dialect *d, const char *schema, const char *one,
                            char **after) {
    static const char *const pg_index[] = {"CREATE INDEX IF NOT EXISTS ", "CREATE UNIQUE INDEX IF NOT EXISTS ", NULL};
    char name[160], table[400], *out = NULL;
    const char *p, *on;
    size_t n;
    int i;
    *after = NULL;
    if (OBX__ONE(d)->id == OBX_DIALECT_POSTGRESQL) { /* SQLite only: folded away with MariaDB's */
        for (i = 0; pg_index[i]; i++)
            if (strncmp(one, pg_index[i], strlen(pg_index[i])) == 0 &&
                obx__ddl_name(one + strlen(pg_index[i]), '"', '"', name, sizeof name))
                return obx__format(h, "SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = "
                                   "c.relnamespace WHERE n.nspname = '%s' AND c.relname = '%s'", schema, name);
        if (strncmp(one, "CREATE OR REPLACE FUNCTION ", 27) == 0 &&
            (p = obx__ddl_name(one + 27, '"', '"', table, sizeof table)) && *p == '.' && /* table: its schema */
            obx__ddl_name(p + 1, '"', '"', name, sizeof name) && (p = strstr(one, "$$")) &&
            (on = strstr(p + 2, "$$")) && !strstr(one, "$obx$")) {
            while (strstr(on + 2, "$$")) on = strstr(on + 2, "$$");
            n = (size_t)(on - p - 2);
            return obx__format(h, "SELECT COUNT(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = "
                               "p.pronamespace WHERE n.nspname = '%s' AND p.proname = '%s' AND p.prosrc = "
                               "$obx$%.*s$obx$", table, name, (int)n, p + 2);
        }
        if (strncmp(one, "CREATE OR REPLACE TRIGGER ", 26) == 0 &&
            obx__ddl_name(one + 26, '"', '"', name, sizeof name) && (on = strstr(one, " ON ")) &&
            (n = strcspn(on + 4, " \n")) < sizeof table) {
            uint64_t hash = UINT64_C(14695981039346656037); /* FNV-1a of the text */
            for (p = one; *p; p++) hash = (hash ^ (unsigned char)*p) * UINT64_C(1099511628211);
            memcpy(table, on + 4, n);
            table[n] = '\0';
            *after = obx__format(h, "COMMENT ON TRIGGER \"%s\" ON %s IS 'obx %016llx'", name, table,
                                 (unsigned long long)hash);
            out = *after ? obx__format(h, "SELECT COUNT(*) FROM pg_trigger WHERE tgrelid = to_regclass('%s') "
                                       "AND tgname = '%s' AND obj_description(oid, 'pg_trigger') = "
                                       "'obx %016llx'", table, name, (unsigned long long)hash) : NULL;
            if (!out) obx__free(h, *after), *after = NULL;
            return out;
        }
    }
    if (OBX__ONE(d)->id == OBX_DIALECT_MARIADB) {
        if (strncmp(one, "CREATE TRIGGER IF NOT EXISTS ", 29) == 0 &&
            obx__ddl_name(one + 29, '`', '`', name, sizeof name))
            return obx__format(h, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE "
                               "TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = '%s'", name);
        if (strncmp(one, "DROP TRIGGER IF EXISTS ", 23) == 0 && obx__ddl_name(one + 23, '`', '`', name, sizeof name))
            return obx__format(h, "SELECT COUNT(*) = 0 FROM information_schema.TRIGGERS WHERE "
                               "TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = '%s'", name);
        /* ALTER TABLE `t` ALTER COLUMN `c` SET DEFAULT v: a metadata lock. */
        if (strncmp(one, "ALTER TABLE ", 12) == 0 && (p = obx__ddl_name(one + 12, '`', '`', table, sizeof table)) &&
            strncmp(p, " ALTER COLUMN ", 14) == 0 && (p = obx__ddl_name(p + 14, '`', '`', name, sizeof name)) &&
            strncmp(p, " SET DEFAULT ", 13) == 0 && strspn(p + 13, "0123456789") == strlen(p + 13))
            return obx__format(h, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                               "DATABASE() AND TABLE_NAME = '%s' AND COLUMN_NAME = '%s' AND COLUMN_DEFAULT = '%s'",
                               table, name, p + 13);
    }
    return NULL;
}

typedef struct obx__deploy_ctx {
    obx_store *s;
    int changing; /* a change ran in this attempt: the lock timeout is set */
    int timed;    /* it was set in some attempt: obx_store_deploy restores it */
    int changed;  /* something was created or changed (or may have been) */
} obx__deploy_ctx;

/* A statement without a probe (CREATE TABLE/INDEX/SCHEMA IF NOT EXISTS, an
 * unprobed ADD COLUMN IF NOT EXISTS) says nothing about what it did; a
 * figure of the catalog that every such change moves, read before and
 * after, does: SQLite's schema version, the objects and columns of the
 * schema elsewhere. NULL: unknown (every deploy counts as a change). */
static char *obx__deploy_census(const obx__hooks *h, const obx__dialect *d, const char *schema) {
    switch (OBX__ONE(d)->id) { /* SQLite only: the other cases fold away */
    case OBX_DIALECT_SQLITE: return obx__strdup(h, "PRAGMA schema_version");
    case OBX_DIALECT_POSTGRESQL:
        return obx__format(h, "SELECT (SELECT COUNT(*) FROM pg_namespace WHERE nspname = '%s') + "
                           "(SELECT COUNT(*) + COALESCE(SUM(c.relnatts), 0) FROM pg_class c JOIN pg_namespace n "
                           "ON n.oid = c.relnamespace WHERE n.nspname = '%s')", schema, schema);
    case OBX_DIALECT_MARIADB:
        return obx__strdup(h, "SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                              "DATABASE()) + (SELECT COUNT(*) FROM information_schema.STATISTICS WHERE "
                              "TABLE_SCHEMA = DATABASE())");
    default: return NULL;
    }
}

/* Before each change: say so, and before the first, set the dialect's lock
 * timeout, so that a change waits for its lock (and writers wait behind it)
 * at most OBX__DEPLOY_LOCK_WAIT seconds. */
static obx_result obx__deploy_change(obx__db *db, obx__deploy_ctx *c, const char *what) {
    obx_store *s = c->s;
    c->changed = 1;
    obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "schema change on %s: %.*s%s", s->table,
             (int)strcspn(what, "\n"), what,
             OBX__ONE(db->d)->deploy_lock_sql ? " (waits at most " OBX__DEPLOY_LOCK_WAIT " s for its lock)" : "");
    if (c->changing || !OBX__ONE(db->d)->deploy_lock_sql) return OBX_OK;
    c->changing = c->timed = 1;
    return obx__exec_direct(db, OBX__ONE(db->d)->deploy_lock_sql, "deploy: lock timeout");
}

/* A catalog count on the deploy path. A COUNT(*) always has its row, so a
 * missing one is the database's fault (OBX_ERR_DB, naming what was asked). */
static obx_result obx__deploy_count(obx__db *db, const char *sql, char *out, size_t cap, const char *what,
                                     const char *name) {
    obx_result r = obx__query_text(db, sql, out, cap);
    if (r == OBX_ERR_NOT_FOUND)
        r = obx__fail(db->err, OBX_ERR_DB, "obx_store_deploy", "the %s%.60s returned no row", what, name);
    return r;
}

/* Upgrade in place: add each column of q->columns the table lacks (one
 * deployed by an older release). The probe first, so that a table that has
 * them all is not locked. */
static obx_result obx__deploy_columns(obx__db *db, obx__deploy_ctx *dc) {
    obx_store *s = dc->s;
    obx_result r = OBX_OK;
    int i;
    for (i = 0; r == OBX_OK && i < OBX__COLUMNS_MAX && s->q->columns[i].name; i++) {
        const obx__column *c = &s->q->columns[i];
        char *probe = NULL, *add, found[32] = "0";
        if (OBX__ONE(db->d)->column_probe &&
            !(probe = obx__column_text(&s->hooks, db->d, s->q, s->schema, s->table, db->d->column_probe, c)))
            break;
        r = probe ? obx__deploy_count(db, probe, found, sizeof found, "catalog query for column ", c->name) : OBX_OK;
        obx__free(&s->hooks, probe);
        if (r != OBX_OK || atoi(found) > 0) continue;
        if (!(add = obx__column_text(&s->hooks, db->d, s->q, s->schema, s->table, OBX__ONE(db->d)->column_add, c)))
            break;
        if (OBX__ONE(db->d)->column_probe) r = obx__deploy_change(db, dc, add);
        if (r == OBX_OK) r = obx__exec_direct(db, add, "deploy: add column");
        if (r == OBX_ERR_DB_TRANSIENT && dc->changing) db->fault = OBX__FAULT_PERMANENT; /* as obx__deploy_one */
        obx__free(&s->hooks, add);
        if (r == OBX_OK && OBX__ONE(db->d)->column_probe)
            obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "schema upgraded: column %s added to %s",
                     c->name, s->table);
    }
    if (r == OBX_OK && i < OBX__COLUMNS_MAX && s->q->columns[i].name)
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_store_deploy", "out of memory");
    return r;
}

/* One DDL statement: looked up first where it has a probe (obx__ddl_probe),
 * run only when its object is missing or different. */
static obx_result obx__deploy_one(obx__db *db, obx__deploy_ctx *c, const char *one) {
    obx_store *s = c->s;
    char *after = NULL, *probe = obx__ddl_probe(&s->hooks, db->d, s->schema, one, &after), found[32] = "0";
    obx_result r = probe ? obx__deploy_count(db, probe, found, sizeof found, "catalog query for ", one) : OBX_OK;
    if (r == OBX_OK && !(probe && atoi(found) > 0)) {
        if (probe) r = obx__deploy_change(db, c, one);
        if (r == OBX_OK) r = obx__exec_direct(db, one, "deploy");
        if (r == OBX_OK && after) r = obx__exec_direct(db, after, "deploy: mark trigger");
        /* A lock timeout is not retried here: writers would queue behind
         * the change again. The caller deploys again later. */
        if (r == OBX_ERR_DB_TRANSIENT && c->changing) db->fault = OBX__FAULT_PERMANENT;
    }
    obx__free(&s->hooks, probe);
    obx__free(&s->hooks, after);
    return r;
}

static obx_result obx__deploy_unit(obx__db *db, void *ctx) {
    obx__deploy_ctx *c = (obx__deploy_ctx *)ctx;
    obx_store *s = c->s;
    obx_result r = OBX_OK;
    char *census = obx__deploy_census(&s->hooks, db->d, s->schema), before[32] = "", after[32] = "";
    int i;
    c->changing = 0; /* a retried unit sets its lock timeout again */
    c->changed = !census;
    if (census) r = obx__deploy_count(db, census, before, sizeof before, "schema census", "");
    for (i = 0; s->q->ddl[i] && r == OBX_OK; i++) {
        char *one = obx__ddl_text(&s->hooks, s->db.d, s->q, s->schema, s->table, s->q->ddl[i]);
        if (!one) {
            obx__free(&s->hooks, census);
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_store_deploy", "out of memory");
        }
        r = obx__deploy_one(db, c, one);
        obx__free(&s->hooks, one);
        if (r == OBX_OK && strstr(s->q->ddl[i], "{A}")) r = obx__deploy_columns(db, c);
    }
    if (r == OBX_OK && census) r = obx__deploy_count(db, census, after, sizeof after, "schema census", "");
    if (r == OBX_OK && strcmp(before, after) != 0) c->changed = 1;
    obx__free(&s->hooks, census);
    return r;
}

OBX_API obx_result obx_schema_sql(obx_dialect dialect, const char *schema, const char *table,
                                  char *out, size_t cap, size_t *needed) {
    obx__hooks h;
    obx_error err;
    const obx__dialect *d = obx__dialect_get(dialect);
    char *ddl;
    size_t n;
    obx_result r = obx__check_names(&err, "obx_schema_sql", schema ? schema : OBX__DEFAULT_SCHEMA,
                                    table ? table : OBX__DEFAULT_TABLE);
    if (r != OBX_OK) return r;
    if (!d || !obx__sqlsets[d->id]) return OBX_ERR_UNSUPPORTED; /* unknown, or left out */
    if (!out && cap > 0) return OBX_ERR_INVALID_ARG;
    obx__hooks_resolve(&h, NULL);
    ddl = obx__schema_text(&h, d, obx__sqlsets[d->id], schema ? schema : OBX__DEFAULT_SCHEMA,
                           table ? table : OBX__DEFAULT_TABLE);
    if (!ddl) return OBX_ERR_NO_MEMORY;
    n = strlen(ddl) + 1;
    if (needed) *needed = n;
    if (n > cap || !out) { /* !out: cap is 0 (checked above); said for the optimizer */
        obx__free(&h, ddl);
        return OBX_ERR_OUT_OF_RANGE;
    }
    memcpy(out, ddl, n);
    obx__free(&h, ddl);
    return OBX_OK;
}

OBX_API obx_result obx_store_deploy(obx_store *store) {
    obx__deploy_ctx c;
    obx_result r;
    if (!store) return OBX_ERR_INVALID_ARG;
    if (!store->q)
        return obx__fail(&store->err, OBX_ERR_STATE, "obx_store_deploy", "store is not open");
    c.s = store;
    c.changing = c.timed = c.changed = 0;
    r = obx__unit(&store->db, obx__deploy_unit, &c, "deploy schema");
    if (c.timed && OBX__ONE(store->db.d)->deploy_unlock_sql) /* our connection's own setting again */
        (void)obx__exec_direct(&store->db, OBX__ONE(store->db.d)->deploy_unlock_sql, "deploy: lock timeout");
    if (r == OBX_OK) /* at every start with deploy_schema: said at INFO only when it did something */
        obx__log(&store->hooks, c.changed ? OBX_LOG_INFO : OBX_LOG_DEBUG, store->store_id,
                 c.changed ? "schema deployed (table %s)" : "schema up to date (table %s)", store->table);
    else if (c.changing && r == OBX_ERR_DB_TRANSIENT)
        obx__log(&store->hooks, OBX_LOG_WARN, store->store_id, "schema change on %s did not get its lock within "
                 OBX__DEPLOY_LOCK_WAIT " s (transactions hold the table): deploy again when they end",
                 store->table);
    return r;
}

typedef struct obx__upgrade_ctx {
    obx__deploy_ctx dc;
    unsigned flags;
    int steps;
} obx__upgrade_ctx;

static obx_result obx__upgrade_unit(obx__db *db, void *ctx) {
    obx__upgrade_ctx *u = (obx__upgrade_ctx *)ctx;
    obx_store *s = u->dc.s;
    const obx__contract *k;
    obx_result r = OBX_OK;
    u->dc.changing = 0; /* a retried unit sets its lock timeout again */
    for (k = s->q->contract; k && k->change && r == OBX_OK; k++) {
        char found[32] = "0", *probe, *one;
        if (!(k->flag & u->flags)) continue;
        probe = k->probe ? obx__expand(&s->hooks, db->d, s->q, s->schema, s->table, k->probe) : NULL;
        one = obx__expand(&s->hooks, db->d, s->q, s->schema, s->table, k->change);
        if (!one || (k->probe && !probe)) r = obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_store_upgrade", "out of memory");
        if (r == OBX_OK && probe) r = obx__deploy_count(db, probe, found, sizeof found, "catalog query for ", one);
        if (r == OBX_OK && atoi(found) == 0) {
            r = obx__deploy_change(db, &u->dc, one);
            if (r == OBX_OK) r = obx__exec_direct(db, one, "upgrade");
            if (r == OBX_ERR_DB_TRANSIENT && u->dc.changing) db->fault = OBX__FAULT_PERMANENT; /* as deploy */
            if (r == OBX_OK) u->steps++;
        }
        obx__free(&s->hooks, probe);
        obx__free(&s->hooks, one);
    }
    return r;
}

OBX_API obx_result obx_store_upgrade(obx_store *store, unsigned flags, int *steps) {
    obx__upgrade_ctx u;
    obx_result r;
    if (!store) return OBX_ERR_INVALID_ARG;
    if (!store->q)
        return obx__fail(&store->err, OBX_ERR_STATE, "obx_store_upgrade", "store is not open");
    if (flags == 0 || (flags & ~(OBX_UPGRADE_KEYS | OBX_UPGRADE_DROP_OLD)))
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_store_upgrade: flags",
                         "not OBX_UPGRADE_KEYS and/or OBX_UPGRADE_DROP_OLD");
    memset(&u, 0, sizeof u);
    u.dc.s = store;
    u.flags = flags;
    r = obx__unit(&store->db, obx__upgrade_unit, &u, "upgrade schema");
    if (u.dc.timed && OBX__ONE(store->db.d)->deploy_unlock_sql)
        (void)obx__exec_direct(&store->db, OBX__ONE(store->db.d)->deploy_unlock_sql, "upgrade: lock timeout");
    if (r == OBX_OK && steps) *steps = u.steps;
    if (r == OBX_OK)
        obx__log(&store->hooks, u.steps ? OBX_LOG_INFO : OBX_LOG_DEBUG, store->store_id,
                 "schema upgrade of %s: %d step(s) run", store->table, u.steps);
    return r;
}

/* >> rewrite: an older table into this release's column order (PostgreSQL) */

/* The swap, after the new table {N}_rewrite is made and the old one locked.
 * What the drop takes with the old table is listed first (the primary
 * key's index comes with the new table) and made again after the rename.
 * The outcome goes back as a transaction-local setting: "current" or the
 * rows copied. */
static const char obx__pg_rewrite[] =
    "DO $rw$ DECLARE o oid := CAST('{T}' AS regclass); n oid := CAST('{S}.\"{N}_rewrite\"' AS regclass);\n"
    "oc name[] := ARRAY(SELECT attname FROM pg_attribute WHERE attrelid = o AND attnum > 0 AND NOT attisdropped ORDER BY attnum);\n"
    "nc name[] := ARRAY(SELECT attname FROM pg_attribute WHERE attrelid = n AND attnum > 0 AND NOT attisdropped ORDER BY attnum);\n"
    "again text[]; fns text[]; pk text; cols text; r bigint; i int;\n"
    "BEGIN\n"
    "IF EXISTS (SELECT 1 FROM pg_class WHERE oid = o AND (relkind <> 'r' OR relrowsecurity))\n"
    "   OR EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = o OR inhparent = o)\n"
    "   OR EXISTS (SELECT 1 FROM pg_publication_rel WHERE prrelid = o) OR EXISTS (SELECT 1 FROM pg_publication WHERE puballtables) THEN\n"
    "  RAISE EXCEPTION 'rewrite: {T} is partitioned, inherited, published or under row security: not rewritten';\n"
    "END IF;\n"
    "SELECT string_agg(x, ' ') INTO cols FROM (SELECT '+' || c AS x FROM unnest(nc) c WHERE c <> ALL (oc)\n"
    "  UNION ALL SELECT '-' || c FROM unnest(oc) c WHERE c <> ALL (nc)) AS d;\n"
    "IF cols IS NOT NULL THEN\n"
    "  RAISE EXCEPTION 'rewrite: {T} has other columns than this release (%: + missing, deploy first; - not the library''s)', cols;\n"
    "END IF;\n"
    "IF oc = nc THEN\n"
    "  EXECUTE 'DROP TABLE {S}.\"{N}_rewrite\"';\n"
    "  PERFORM set_config('obx.rewrite', 'current', true);\n"
    "  RETURN;\n"
    "END IF;\n"
    "SELECT array_agg(x.s ORDER BY x.k, x.s) INTO again FROM (\n"
    "  SELECT 1 AS k, pg_get_indexdef(i.indexrelid) AS s FROM pg_index i WHERE i.indrelid = o\n"
    "     AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid)\n"
    "  UNION ALL SELECT 2, format('ALTER TABLE {T} ADD CONSTRAINT %I %s', conname, pg_get_constraintdef(oid))\n"
    "    FROM pg_constraint WHERE conrelid = o AND contype IN ('c', 'f', 'u', 'x')\n"
    "  UNION ALL SELECT 3, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = o AND NOT tgisinternal\n"
    "  UNION ALL SELECT 4, pg_get_functiondef(p.oid) FROM pg_proc p, pg_class c WHERE c.oid = o\n"
    "     AND (p.prorettype = c.reltype OR c.reltype = ANY (CAST(p.proargtypes AS oid[])))\n"
    "  UNION ALL SELECT 5, format('GRANT %s ON TABLE {T} TO %s', a.privilege_type, CASE WHEN a.grantee = 0\n"
    "     THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END)\n"
    "    FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = o AND a.grantee <> c.relowner\n"
    "  UNION ALL SELECT 6, format('ALTER TABLE {T} OWNER TO %I', pg_get_userbyid(relowner)) FROM pg_class\n"
    "   WHERE oid = o AND relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)\n"
    "  UNION ALL SELECT 7, format('ALTER TABLE {T} SET (%s)', array_to_string(reloptions, ', ')) FROM pg_class\n"
    "   WHERE oid = o AND reloptions IS NOT NULL\n"
    "  UNION ALL SELECT 8, format('COMMENT ON TABLE {T} IS %L', obj_description(o, 'pg_class'))\n"
    "   WHERE obj_description(o, 'pg_class') IS NOT NULL) AS x;\n"
    "SELECT array_agg('DROP FUNCTION ' || CAST(CAST(p.oid AS regprocedure) AS text)) INTO fns FROM pg_proc p, pg_class c\n"
    " WHERE c.oid = o AND (p.prorettype = c.reltype OR c.reltype = ANY (CAST(p.proargtypes AS oid[])));\n"
    "SELECT quote_ident(conname) INTO pk FROM pg_constraint WHERE conrelid = o AND contype = 'p';\n"
    "SELECT string_agg(quote_ident(c), ', ') INTO cols FROM unnest(nc) c;\n"
    "EXECUTE format('INSERT INTO {S}.\"{N}_rewrite\" (%s) SELECT %s FROM {T}', cols, cols);\n"
    "GET DIAGNOSTICS r = ROW_COUNT;\n"
    "FOR i IN 1 .. coalesce(array_length(fns, 1), 0) LOOP EXECUTE fns[i]; END LOOP;\n"
    "EXECUTE 'DROP TABLE {T}';\n" /* no CASCADE: a view or a foreign key on it refuses */
    "EXECUTE 'ALTER TABLE {S}.\"{N}_rewrite\" RENAME TO \"{N}\"';\n"
    "SELECT quote_ident(conname) INTO cols FROM pg_constraint WHERE conrelid = n AND contype = 'p';\n"
    "IF pk <> cols THEN EXECUTE format('ALTER TABLE {T} RENAME CONSTRAINT %s TO %s', cols, pk); END IF;\n"
    "FOR i IN 1 .. coalesce(array_length(again, 1), 0) LOOP EXECUTE again[i]; END LOOP;\n"
    "PERFORM set_config('obx.rewrite', CAST(r AS text), true);\n"
    "END $rw$";

typedef struct obx__rewrite_ctx {
    obx_store *s;
    char outcome[32];
} obx__rewrite_ctx;

/* One statement of the rewrite: its table's names, {N}_rewrite's in `table`. */
static obx_result obx__rewrite_step(obx__db *db, obx_store *s, const char *table, const char *tmpl,
                                    const char *where) {
    char *one = obx__ddl_text(&s->hooks, db->d, s->q, s->schema, table, tmpl);
    obx_result r = one ? obx__exec_direct(db, one, where)
                       : obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_store_rewrite", "out of memory");
    obx__free(&s->hooks, one);
    /* Not retried: the writers would queue behind the lock again. */
    if (r == OBX_ERR_DB_TRANSIENT) db->fault = OBX__FAULT_PERMANENT;
    return r;
}

static obx_result obx__rewrite_unit(obx__db *db, void *ctx) {
    obx__rewrite_ctx *c = (obx__rewrite_ctx *)ctx;
    obx_store *s = c->s;
    char rw[OBX__TABLE_MAX + 16];
    obx_result r;
    int i;
    snprintf(rw, sizeof rw, "%s_rewrite", s->table);
    /* Deploys of the table wait (their advisory lock, the first DDL), then
     * its writers; SHARE lets readers on until the swap. 10 s: a long
     * transaction on the table would make every writer queue behind us. */
    r = obx__rewrite_step(db, s, s->table, "SET LOCAL lock_timeout = '10s'", "rewrite: lock timeout");
    if (r == OBX_OK) r = obx__rewrite_step(db, s, s->table, s->q->ddl[0], "rewrite: deploy lock");
    if (r == OBX_OK) r = obx__rewrite_step(db, s, s->table, "LOCK TABLE {T} IN SHARE MODE", "rewrite: table lock");
    for (i = 0; r == OBX_OK && s->q->ddl[i] && !strstr(s->q->ddl[i], "{A}"); i++) {}
    if (r == OBX_OK && s->q->ddl[i]) r = obx__rewrite_step(db, s, rw, s->q->ddl[i], "rewrite: new table");
    if (r == OBX_OK) r = obx__rewrite_step(db, s, s->table, obx__pg_rewrite, "rewrite");
    if (r == OBX_OK)
        r = obx__query_text(db, "SELECT current_setting('obx.rewrite', true)", c->outcome, sizeof c->outcome);
    return r;
}

OBX_API obx_result obx_store_rewrite(obx_store *store, int64_t *rows) {
    obx__rewrite_ctx c;
    obx_result r;
    if (!store) return OBX_ERR_INVALID_ARG;
    if (!store->q) return obx__fail(&store->err, OBX_ERR_STATE, "obx_store_rewrite", "store is not open");
    if (OBX__ONE(store->db.d)->id != OBX_DIALECT_POSTGRESQL)
        return obx__fail(&store->err, OBX_ERR_UNSUPPORTED, "obx_store_rewrite",
                         "only PostgreSQL tables are rewritten: statements name their columns, so a table "
                         "on this database keeps the column order it was created with");
    c.s = store;
    c.outcome[0] = '\0';
    r = obx__unit(&store->db, obx__rewrite_unit, &c, "rewrite table");
    if (r != OBX_OK) return r;
    if (strcmp(c.outcome, "current") == 0) return OBX_EMPTY;
    if (rows) *rows = (int64_t)strtoll(c.outcome, NULL, 10);
    obx__log(&store->hooks, OBX_LOG_INFO, store->store_id, "table %s rewritten into this release's column order "
             "(%s rows)", store->table, c.outcome);
    /* Statistics for the planner (the new table has none), outside the lock. */
    if (obx__rewrite_step(&store->db, store, store->table, "ANALYZE {T}", "rewrite: analyze") != OBX_OK)
        obx__log(&store->hooks, OBX_LOG_WARN, store->store_id, "rewrite: ANALYZE %s failed (%s): the "
                 "reap analyzes it later", store->table, store->err.message);
    return OBX_OK;
}

/* The checks of obx_store_open that need no allocation beyond the store. */
static obx_result obx__store_desc_check(obx_store *s, const obx_store_desc *desc) {
    static const char fn[] = "obx_store_open";
    if ((desc->connection_string != NULL) == (desc->hdbc != NULL))
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, "obx_store_open: connection_string",
                         "give exactly one of connection_string and hdbc");
    if (desc->connection_string && !desc->connection_string[0])
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, "obx_store_open: connection_string",
                         "connection_string is empty");
    if ((int)desc->dialect < 0 || (int)desc->dialect > (int)OBX_DIALECT_SQLSERVER)
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, "obx_store_open: dialect",
                         "dialect %d is not an obx_dialect value", (int)desc->dialect);
    if (obx__wake_path_check(&s->err, "obx_store_open: wake_path", desc->wake_path) != OBX_OK)
        return s->err.result;
    if (desc->wake_path && !(s->wake_path = obx__strdup(&s->hooks, desc->wake_path)))
        return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_store_open", "out of memory");
    if (desc->max_pending < 0)
        return obx__range_fail(&s->err, fn, "max_pending", "0 (no cap) or more", (long long)desc->max_pending);
    s->max_pending = desc->max_pending;
    if (desc->max_starts < 0 || desc->max_starts > OBX__MAX_STARTS_LIMIT)
        return obx__range_fail(&s->err, fn, "max_starts", "0 (the default, " OBX__STR(OBX__MAX_STARTS_DEFAULT)
                               ") or 1.." OBX__STR(OBX__MAX_STARTS_LIMIT), desc->max_starts);
    s->max_starts = desc->max_starts ? desc->max_starts : OBX__MAX_STARTS_DEFAULT;
    if (desc->statement_timeout_seconds < 0)
        return obx__range_fail(&s->err, fn, "statement_timeout_seconds", "0 (none) or more",
                               desc->statement_timeout_seconds);
    if (desc->login_timeout_seconds < -1)
        return obx__range_fail(&s->err, fn, "login_timeout_seconds",
                               "-1 (the driver's), 0 (the default) or more", desc->login_timeout_seconds);
    if ((int)desc->message_log_level < 0 || (int)desc->message_log_level > (int)OBX_LOG_OFF)
        return obx__range_fail(&s->err, fn, "message_log_level", "0 (the default) or an obx_log_level",
                               (int)desc->message_log_level);
    s->pending_estimate = INT64_MAX; /* unknown: the first enqueue counts */
    return obx__store_names(s, desc);
}

OBX_API obx_result obx_store_open(const obx_store_desc *desc, obx_store **out) {
    obx__hooks hooks;
    obx_store *s;
    obx_result r;
    if (!out) return OBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc) return OBX_ERR_INVALID_ARG;
    if (obx__hooks_resolve(&hooks, &desc->hooks) != OBX_OK) return OBX_ERR_INVALID_ARG;
    s = (obx_store *)obx__alloc(&hooks, sizeof *s);
    if (!s) return OBX_ERR_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->wake_fd = -1;
    obx__hooks_resolve(&s->hooks, &desc->hooks); /* again, in place: it must not move */
    if (s->hooks.env_level_bad) obx__log(&s->hooks, OBX_LOG_WARN, desc->store_id ? desc->store_id : OBX__NOUN,
                                         "OBX_LOG_LEVEL is not one of debug, info, warn, error, off: logging at INFO");
    s->db.hooks = &s->hooks;
    s->db.err = &s->err;
    s->db.store_id = OBX__NOUN;
    s->db.forced = desc->dialect;
    s->db.login_timeout_s = desc->login_timeout_seconds == 0 ? OBX__LOGIN_TIMEOUT_DEFAULT_S
                          : desc->login_timeout_seconds < 0 ? 0 : desc->login_timeout_seconds;
    s->db.statement_timeout_s = desc->statement_timeout_seconds > 0 ? desc->statement_timeout_seconds : 0;
    s->metrics = desc->metrics;
    s->message_log_level = desc->message_log_level ? desc->message_log_level : OBX_LOG_DEBUG;
    obx__store_own_open(&s->own, desc);
    *out = s;
    r = obx__store_desc_check(s, desc);
    if (r != OBX_OK) return r;
    s->db.store_id = s->store_id;
    r = desc->connection_string ? obx__db_connect(&s->db, desc->connection_string)
                                : obx__db_adopt(&s->db, desc->hdbc);
    if (r == OBX_OK) r = obx__store_prepare_sql(s);
    if (r == OBX_OK && desc->deploy_schema) r = obx_store_deploy(s);
    if (r != OBX_OK) {
        obx__log(&s->hooks, OBX_LOG_ERROR, s->store_id, "open failed: %s: %s (%s)",
                 obx__result_str(r), s->err.message, s->err.where);
        return r;
    }
    obx__error_clear(&s->err);
    obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "opened: %s %s via %s, table %s", s->db.dbms_name,
             s->db.dbms_version, s->db.driver_name, s->table);
    return OBX_OK;
}

OBX_API void obx_store_close(obx_store *store) {
    obx__hooks hooks;
    int i;
    if (!store) return;
    obx__db_close(&store->db);
    hooks = store->hooks;
    for (i = 0; i < OBX__Q_COUNT; i++) obx__free(&hooks, store->sql[i]);
    for (i = 0; i < OBX__KEY_LISTS; i++) obx__buf_free(&hooks, &store->keys[i]);
    for (i = 0; i < OBX__KEY_LISTS; i++) obx__buf_free(&hooks, &store->carry[i]);
    obx__store_own_free(&hooks, &store->own);
    obx__buf_free(&hooks, &store->rows);
    obx__buf_free(&hooks, &store->read_rows);
    obx__free(&hooks, store->msgs);
    obx__free(&hooks, store->offsets);
    for (i = 0; i < store->hist_count; i++) obx__free(&hooks, store->hist[i].topic);
    obx__free(&hooks, store->hist);
    obx__free(&hooks, store->schema);
    obx__free(&hooks, store->table);
    obx__free(&hooks, store->store_id);
    obx__free(&hooks, store->worker_name);
    obx__free(&hooks, store->wake_path);
#if OBX__WAKE_SOCKET
    if (store->wake_fd >= 0) close(store->wake_fd);
#endif
    obx__free(&hooks, store);
}

OBX_API obx_result obx_store_get_info(const obx_store *store, obx_store_info *info) {
    if (!store || !info) return OBX_ERR_INVALID_ARG;
    memset(info, 0, sizeof *info);
    info->dialect = store->db.d ? store->db.d->id : OBX_DIALECT_AUTO;
    obx__copy(info->dbms_name, sizeof info->dbms_name, store->db.dbms_name);
    obx__copy(info->dbms_version, sizeof info->dbms_version, store->db.dbms_version);
    obx__copy(info->driver_name, sizeof info->driver_name, store->db.driver_name);
    obx__copy(info->store_id, sizeof info->store_id, store->store_id ? store->store_id : OBX__NOUN);
    return OBX_OK;
}

OBX_API const obx_error *obx_store_last_error(const obx_store *store) {
    return store ? &store->err : obx__null_error();
}

OBX_API obx_result obx_store_counters(const obx_store *store, int64_t counters[OBX_METRIC_COUNT_]) {
    if (!store || !counters) return OBX_ERR_INVALID_ARG;
    memcpy(counters, store->counters, sizeof store->counters);
    return OBX_OK;
}

/* A store that can run statements, with its last error cleared. */
static obx_result obx__store_ready(obx_store *s, const char *fn) {
    if (!s) return OBX_ERR_INVALID_ARG;
    obx__error_clear(&s->err);
    if (!s->q) return obx__fail(&s->err, OBX_ERR_STATE, fn, "store is not open");
    return OBX_OK;
}

/* A new time-ordered id (UUIDv7) from the store's clock and random hooks. */
OBX__PRIVATE void obx__new_uuid(obx_store *s, char out[37]) {
    obx__uuid_v7(&s->uuids, obx__now_ms(&s->hooks), obx__random(&s->hooks), obx__random(&s->hooks), out);
}

OBX_API obx_result obx_owner_token(obx_store *store, char out[37]) {
    if (!store || !out) return OBX_ERR_INVALID_ARG;
    obx__new_uuid(store, out);
    return OBX_OK;
}

/* A UUID in lower case: SQLite compares text exactly, PostgreSQL does not. */
static void obx__lower_uuid(const char *in, char out[37]) {
    int i;
    for (i = 0; i < 36; i++) out[i] = in[i] >= 'A' && in[i] <= 'F' ? (char)(in[i] + 32) : in[i];
    out[36] = '\0';
}

/* An owner token: a UUID, not the empty one (it would match rows nobody
 * owns), nor one of version 0: the inbox marks a lease whose message was
 * redelivered with new content by setting the version digit to 0. */
static obx_result obx__check_token(obx_store *s, const char *fn, const char *token) {
    char where[96];
    snprintf(where, sizeof where, "%s: owner_token", fn);
    if (!obx__uuid_is_valid(token))
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where,
                         "owner_token must be a UUID" OBX__WHY(" (obx_owner_token)"));
    if (token[14] == '0')
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where,
                         "owner_token must not be the empty UUID nor of version 0 (its 15th character)");
    obx__lower_uuid(token, s->token);
    return OBX_OK;
}

/* Run `unit` in the caller's transaction on `hdbc` (statements are made and
 * freed on it per call, and nothing is committed or rolled back here), or,
 * with hdbc NULL, as a unit of work of the store's own (committed; `flags`
 * as for obx__unit_run). */
OBX__PRIVATE obx_result obx__unit_or_caller(obx_store *s, void *hdbc,
                                            obx_result (*unit)(obx__db *db, void *ctx), void *ctx,
                                            const char *what, int flags) {
    obx__db caller;
    obx_result r;
    if (!hdbc) return obx__unit_run(&s->db, unit, ctx, what, flags);
    memset(&caller, 0, sizeof caller);
    caller.hooks = &s->hooks;
    caller.store_id = s->store_id;
    caller.err = &s->err;
    caller.d = s->db.d;
    caller.dbc = (SQLHDBC)hdbc;
    caller.connected = 1;
    caller.tx_by_sql = caller.d->tx_by_sql;
    caller.sql = s->db.sql;
    caller.callers_tx = 1;
    caller.unit = obx__unit_mode(&caller, flags);
    OBX_ASSERT(caller.unit == OBX__RUN_CALLER);
    /* In autocommit (PostgreSQL, MariaDB) the write would commit at once,
     * apart from the caller's transaction, and survive its rollback. */
    r = obx__check_autocommit(&caller);
    if (r != OBX_OK) {
        snprintf(s->err.where, sizeof s->err.where, "%s: hdbc", what);
        return r;
    }
    r = unit(&caller, ctx);
    obx__db_free_statements(&caller);
    /* psqlODBC (statement-level rollback: an internal savepoint around each
     * statement) may lose the connection after a statement ran, report the
     * statement as successful and the caller's COMMIT too, which then
     * commits nothing. What the driver knows is dead is not OK. */
#ifndef OBX_SQLITE3_API
    {
        SQLUINTEGER dead = 0;
        if (r >= 0 && OBX__ONE(caller.d)->dead_flag_is_local &&
            SQL_SUCCEEDED(SQLGetConnectAttr(caller.dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
            dead == SQL_CD_TRUE) {
            r = obx__fail(&s->err, OBX_ERR_DB_TRANSIENT, what,
                          "the caller's connection was lost" OBX__WHY(": its transaction is gone; roll it back"));
            s->err.connection_lost = 1;
        }
    }
#endif
    return r;
}

/* The session's isolation level `level` (MariaDB's tx_isolation: NULL or
 * "" when unknown) for a keyed enqueue, in the caller's transaction: READ
 * COMMITTED, as obx_enqueue_tx says why. */
OBX__PRIVATE obx_result obx__isolation_check(obx_error *err, const char *level) {
    if (!level || !level[0] || strcmp(level, "READ-COMMITTED") == 0 || strcmp(level, "READ-UNCOMMITTED") == 0)
        return OBX_OK;
    return obx__fail(err, OBX_ERR_STATE, "hdbc: isolation",
                     "a keyed enqueue needs READ COMMITTED, not %s" OBX__WHY(": at REPEATABLE READ the "
                     "transaction's snapshot may predate a commit of the key it must follow, at SERIALIZABLE "
                     "the read would lock the key until the caller commits; SET SESSION TRANSACTION "
                     "ISOLATION LEVEL READ COMMITTED on the connection"), level);
}

/* Run `unit` recording its statements for the caller's driver (obx_sql):
 * *out gets them on success. */
OBX__PRIVATE obx_result obx__unit_capture(obx_store *s, obx_result (*unit)(obx__db *db, void *ctx), void *ctx,
                                          int markers, obx_sql **out) {
    obx__db caller;
    obx_sql *c = (obx_sql *)obx__alloc(&s->hooks, sizeof *c);
    obx_result r;
    if (!c) return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_sql", "out of memory");
    memset(c, 0, sizeof *c);
    c->hooks = s->hooks;
    c->markers = markers;
    c->add = obx__capture_add;
    memset(&caller, 0, sizeof caller);
    caller.hooks = &s->hooks;
    caller.store_id = s->store_id;
    caller.err = &s->err;
    caller.d = s->db.d;
    caller.sql = s->db.sql;
    caller.callers_tx = 1;
    caller.capture = c;
    r = unit(&caller, ctx);
    if (r == OBX_OK && !obx__capture_end(c)) r = obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_sql", "out of memory");
    if (r != OBX_OK) {
        obx_sql_free(c);
        return r;
    }
    *out = c;
    return OBX_OK;
}

/* obx__unit_capture, as the *_enqueue_sql calls pass it to the code they
 * share with the other enqueues: only they name it. */
typedef obx_result (*obx__capture_fn)(obx_store *s, obx_result (*unit)(obx__db *db, void *ctx), void *ctx,
                                      int markers, obx_sql **out);

/* The arguments every *_enqueue_sql call takes: out_sql and markers. */
OBX__PRIVATE obx_result obx__sql_args(obx_store *s, const char *fn, int markers, obx_sql **out_sql) {
    char where[96];
    if (!s) return OBX_ERR_INVALID_ARG;
    snprintf(where, sizeof where, "%s: %s", fn, out_sql ? "markers" : "out_sql");
    if (!out_sql) return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "out_sql must not be NULL");
    if (markers != OBX_SQL_MARKERS_QUESTION && markers != OBX_SQL_MARKERS_DOLLAR)
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where,
                         "markers must be OBX_SQL_MARKERS_QUESTION or OBX_SQL_MARKERS_DOLLAR");
    return OBX_OK;
}

OBX_API int obx_sql_count(const obx_sql *sql) {
    return sql ? sql->count : 0;
}

OBX_API const obx_sql_stmt *obx_sql_at(const obx_sql *sql, int i) {
    return sql && i >= 0 && i < sql->count ? &sql->stmts[i] : NULL;
}

OBX_API obx_result obx_sql_check(obx_store *store, const obx_sql_stmt *stmt, const char *value) {
    if (!store) return OBX_ERR_INVALID_ARG;
    if (!stmt || stmt->check_column <= 0)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_sql_check: stmt",
                         "stmt must be a statement with a check_column");
    return obx__isolation_check(&store->err, value);
}

OBX_API const char *obx_sql_id(const obx_sql *sql, int i) {
    return sql && i >= 0 && i < sql->id_count ? sql->ids[i] : NULL;
}

OBX_API obx_result obx_sql_error(obx_store *store, obx_result result, const char *where, const char *sqlstate,
                                 long native, const char *message) {
    int fault;
    if (!store) return OBX_ERR_INVALID_ARG;
    fault = result != OBX_ERR_DB ? OBX__FAULT_PERMANENT : obx__classify(store->db.d, sqlstate ? sqlstate : "", native);
    obx__error_clear(&store->err);
    obx__copy(store->err.where, sizeof store->err.where, where ? where : "");
    obx__copy(store->err.sqlstate, sizeof store->err.sqlstate, sqlstate ? sqlstate : "");
    obx__copy(store->err.message, sizeof store->err.message, message ? message : "");
    store->err.native = native;
    store->err.connection_lost = fault == OBX__FAULT_LOST || fault == OBX__FAULT_LOST_PERMANENT;
    store->err.result = result != OBX_ERR_DB ? result
                      : fault == OBX__FAULT_PERMANENT || fault == OBX__FAULT_LOST_PERMANENT ? OBX_ERR_DB
                                                                                            : OBX_ERR_DB_TRANSIENT;
    obx__log(&store->hooks, OBX_LOG_DEBUG, store->store_id, "%s failed: %s", store->err.where, store->err.message);
    return store->err.result;
}

OBX_API void obx_sql_free(obx_sql *sql) {
    obx__hooks h;
    if (!sql) return;
    h = sql->hooks;
    obx__buf_free(&h, &sql->text);
    obx__buf_free(&h, &sql->stmts_raw);
    obx__buf_free(&h, &sql->params_raw);
    obx__free(&h, sql->stmts);
    obx__free(&h, sql->params);
    obx__free(&h, sql->ids);
    obx__free(&h, sql);
}

/* >> claim ---------------------------------------------------------------------- */

static const char *obx__at(const obx__buf *b, size_t off) {
    return off == (size_t)-1 ? NULL : b->data + off;
}

enum { OBX__SETTLE_ACK, OBX__SETTLE_ABANDON, OBX__SETTLE_FAIL, OBX__SETTLE_EXTEND };
static int obx__settle_params(obx__param *p, int kind, const char *worker, const char *token,
                              const char *error, int64_t value, int attempts, const obx__buf *keys);

typedef struct obx__claim_ctx {
    obx_store *s;
    int lease_seconds, batch_size, count;
    int ack_count;               /* s->carry's acks to run first, in the claim's unit (0: none) */
    int ack_only;                /* run only them (the claim gave up: OBX__CLAIM_REDOS) */
    int ack_keyed;               /* some of them have an ordering key: acked before the claim */
    int64_t acked;               /* how many of them the ack changed */
    int ack_after;               /* keyed: the claim runs first (OBX__Q_CLAIM_CARRY), the acks
                                    after it has read its rows */
} obx__claim_ctx;

/* The first step of a claim in three statements (no UPDATE ... RETURNING):
 * the pick (arguments: the batch size, and the window: how many ready rows
 * it looks at, unlocked, before locking up to a batch of them) returns the
 * rows it locked as the claim's short row, as they are before the claim
 * (the lease column: the pick's time), read into the batch (c->count), and
 * their keys into s->keys, ended, ready to bind. The window is twice the
 * batch; when other claimers hold all of it, once more with twenty times. */
static obx_result obx__claim_pick(obx__db *db, obx__claim_ctx *c) {
    obx_store *s = c->s;
    obx__param p[2];
    obx__row_head head;
    SQLHSTMT cur;
    obx_result r = OBX_EMPTY;
    int k, pass;
    for (pass = 0; pass < 2 && c->count == 0 && r == OBX_EMPTY; pass++) {
        for (k = 0; k < OBX__KEY_LISTS; k++) s->keys[k].len = 0;
        s->rows.len = 0;
        obx__p_i64(&p[0], c->batch_size);
        obx__p_i64(&p[1], (int64_t)c->batch_size * (pass == 0 ? 2 : 20));
        cur = NULL; /* a failed execute frees the statement: never close the last pass's */
        r = obx__exec(db, OBX__Q_CLAIM_PICK, OBX__SQL(s, OBX__Q_CLAIM_PICK), p, 2, NULL, &cur);
        if (r == OBX_OK) r = obx__bind_head(db, cur, &head, OBX__CLAIM_TEXTS, OBX__CLAIM_INTS);
        while (r == OBX_OK && (r = obx__fetch(db, cur)) == OBX_OK) {
            obx_message *m;
            if (c->count >= c->batch_size) { /* see obx__claim_once */
                r = obx__fail(db->err, OBX_ERR_STATE, "obx_claim",
                              "the claim's pick returned more than %d rows" OBX__WHY("; rolled back"),
                              c->batch_size);
                break;
            }
            m = &s->msgs[c->count];
            r = obx__read_claimed(db, cur, &head, s->token, m, &s->rows, &s->offsets[c->count]);
            if (r != OBX_OK) break;
            /* Pointed for its key now, again once the buffer stops moving. */
            obx__point_strings(&s->rows, m, &s->offsets[c->count]);
            if (!obx__msg_key_add(db->hooks, db->d, s->keys, m))
                r = obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_claim", "out of memory");
            else
                c->count++;
        }
        obx__unbind(cur); /* `head` is about to go */
        obx__close(cur);
    }
    if (r != OBX_EMPTY) return r;
    for (k = 0; k < OBX__KEY_LISTS && c->count > 0; k++)
        if (!obx__list_end(db->hooks, &s->keys[k], db->d))
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_claim", "out of memory");
    return OBX_OK;
}

/* Where the dialect has no UPDATE ... RETURNING: pick and lock the rows
 * (obx__claim_pick), then mark them ours. When the UPDATE matched every
 * picked row (its count is rows matched, see OPTION=2), the picked rows
 * are the claim's, with Starts + 1 and the lease filled in here: the
 * pick's time + the lease, at most the two statements' distance before the
 * stored one, so a handler never counts on more than it holds. Where row
 * locks are per node (Galera), two nodes can pick one row, and the UPDATE
 * checks the row again: when it matched fewer, the rows that carry our
 * token are read back instead; *cur is that read's cursor. */
static obx_result obx__claim_picked(obx__db *db, obx__claim_ctx *c, SQLHSTMT *cur) {
    obx_store *s = c->s;
    obx__param p[2 + OBX__KEY_LISTS];
    int64_t marked = -1;
    int k, i;
    obx_result r = obx__claim_pick(db, c);
    if (r != OBX_OK || c->count == 0) return r;
    obx__p_text(&p[0], s->token, 36);
    obx__p_i64(&p[1], c->lease_seconds);
    for (k = 0; k < OBX__KEY_LISTS; k++) obx__p_text(&p[2 + k], s->keys[k].data, s->keys[k].len);
    r = obx__exec(db, OBX__Q_CLAIM, s->sql[OBX__Q_CLAIM], p, 2 + OBX__KEY_LISTS, &marked, NULL);
    if (r != OBX_OK) return r;
    if (marked == c->count) {
        for (i = 0; i < c->count; i++) {
            s->msgs[i].starts++;
            s->msgs[i].locked_until_ms += (int64_t)c->lease_seconds * 1000;
        }
        return OBX_OK;
    }
    obx__log(db->hooks, OBX_LOG_DEBUG, s->store_id, "claim: %lld of %d picked rows marked; reading them back",
             (long long)marked, c->count);
    c->count = 0;
    s->rows.len = 0;
    return obx__exec(db, OBX__Q_CLAIM_READ, OBX__SQL(s, OBX__Q_CLAIM_READ), p, 2 + OBX__KEY_LISTS, NULL, cur);
}

/* obx__claim_recheck: the claim was rolled back (another claim holds one
 * of its keys); run it again. */
#define OBX__CLAIM_REDO ((obx_result)15) /* no public result: within the enum's range for C++ */
#define OBX__CLAIM_REDOS 3

/* The claim's statements, up to the cursor of its rows (none after the
 * acks alone). The carried acks: in the claim's statement where one can
 * hold both (OBX__Q_CLAIM_ACK), else a statement before it in its
 * transaction; keyed ones where OBX__Q_CLAIM_CARRY is set, a statement
 * after it (c->ack_after: obx__claim_once, once the rows are read). */
static obx_result obx__claim_exec(obx__db *db, obx__claim_ctx *c, int fused, SQLHSTMT *cur) {
    obx_store *s = c->s;
    obx__param p[8 + OBX__KEY_LISTS];
    int n = 0;
    obx_result r;
    const int after = OBX__CARRY_FIRST(s) && c->ack_after;
    if (c->ack_count > 0)
        n = obx__settle_params(p, OBX__SETTLE_ACK, s->worker_name ? s->worker_name : s->token, s->token, NULL, 0,
                               0, s->carry);
    if (c->ack_count > 0 && !fused && !after) {
        r = obx__exec(db, OBX__Q_ACK, s->sql[OBX__Q_ACK], p, n, &c->acked, NULL);
        if (r == OBX_OK && c->ack_keyed) r = obx__own_acked(db, s, s->carry, c->acked);
        if (r != OBX_OK || c->ack_only) return r;
    }
    if (after) { /* the acked ids: s->carry[0] (no keyed acks in a claim that picks) */
        obx__p_text(&p[0], s->token, 36);
        obx__p_i64(&p[1], c->lease_seconds);
        obx__p_i64(&p[2], c->batch_size);
        obx__p_text(&p[3], s->carry[0].data, s->carry[0].len);
        r = obx__exec(db, OBX__Q_CLAIM_CARRY, s->sql[OBX__Q_CLAIM_CARRY], p, 4, NULL, cur);
    } else if (fused) {
        obx__p_text(&p[n], s->token, 36);
        obx__p_i64(&p[n + 1], c->lease_seconds);
        obx__p_i64(&p[n + 2], c->batch_size);
        r = obx__exec(db, OBX__Q_CLAIM_ACK, OBX__SQL(s, OBX__Q_CLAIM_ACK), p, n + 3, NULL, cur);
    } else if (OBX__SQL(s, OBX__Q_CLAIM_PICK)) {
        r = obx__claim_picked(db, c, cur);
    } else {
        obx__p_text(&p[0], s->token, 36);
        obx__p_i64(&p[1], c->lease_seconds);
        obx__p_i64(&p[2], c->batch_size);
        r = obx__exec(db, OBX__Q_CLAIM, s->sql[OBX__Q_CLAIM], p, 3, NULL, cur);
    }
    return r;
}

static obx_result obx__claim_once(obx__db *db, obx__claim_ctx *c) {
    obx_store *s = c->s;
    SQLHSTMT cur = NULL;
    obx__row_head head;
    const int short_rows = !OBX__FULL_ROWS(s->q);
    const int fused = c->ack_count > 0 && !c->ack_only && !c->ack_keyed && OBX__SQL(s, OBX__Q_CLAIM_ACK);
    int counted = 0;
    obx_result r;
    c->count = 0;
    c->acked = 0;
    c->ack_after = OBX__CARRY_FIRST(s) && c->ack_count > 0 && !c->ack_only && c->ack_keyed;
    s->rows.len = 0;
    r = obx__claim_exec(db, c, fused, &cur);
    if (c->ack_only) return r;
    if (r == OBX_OK && cur && short_rows) r = obx__bind_head(db, cur, &head, OBX__CLAIM_TEXTS, OBX__CLAIM_INTS);
    while (r == OBX_OK && cur && (r = obx__fetch(db, cur)) == OBX_OK) {
        if (fused && !counted) { /* the ack's count, in every row: read once (the last column) */
            const int empty = head.ind[OBX__CLAIM_INTS - 1] == SQL_NULL_DATA; /* no mask: nothing claimed */
            if (empty && (r = obx__get_i64(db, cur, OBX__CLAIM_COLS + 1, &c->acked, NULL)) != OBX_OK) break;
            counted = 1 + !empty;
            if (empty) continue;
        }
        /* More rows than asked is a statement bug (a LIMIT ... SKIP LOCKED
         * subquery run twice does it): roll the claim back, lose nothing. */
        if (c->count >= c->batch_size) {
            r = obx__fail(db->err, OBX_ERR_STATE, "obx_claim",
                          "the claim statement returned more than %d rows" OBX__WHY("; rolled back"),
                          c->batch_size);
            break;
        }
        r = short_rows ? obx__read_claimed(db, cur, &head, s->token, &s->msgs[c->count], &s->rows,
                                           &s->offsets[c->count])
                       : obx__read_message(db, cur, &s->msgs[c->count], &s->rows, &s->offsets[c->count]);
        if (r == OBX_OK && counted == 2) {
            r = obx__get_i64(db, cur, OBX__CLAIM_COLS + 1, &c->acked, NULL);
            counted = 1;
        }
        if (r == OBX_OK) c->count++;
    }
    if (short_rows) obx__unbind(cur); /* `head` is about to go */
    obx__close(cur);
    if (r == OBX_EMPTY) r = OBX_OK;
    if (r == OBX_OK && OBX__CARRY_FIRST(s) && c->ack_after) { /* before the check: they are Done there */
        obx__param p[8 + OBX__KEY_LISTS];
        const int n = obx__settle_params(p, OBX__SETTLE_ACK, s->worker_name ? s->worker_name : s->token, s->token,
                                         NULL, 0, 0, s->carry);
        r = obx__exec(db, OBX__Q_ACK, s->sql[OBX__Q_ACK], p, n, &c->acked, NULL);
    }
    return r == OBX_OK && c->count > 0 ? obx__claim_recheck(db, s, &c->count) : r;
}

static obx_result obx__claim_unit(obx__db *db, void *vctx) {
    obx__claim_ctx *c = (obx__claim_ctx *)vctx;
    const int mode = db->unit; /* the unit's, begun by obx__unit_run */
    obx_result r;
    int redo;
    for (redo = 0;; redo++) {
        r = obx__claim_once(db, c);
        if (r != OBX__CLAIM_REDO) return r;
        c->count = 0;
        if (redo + 1 >= OBX__CLAIM_REDOS && c->ack_count == 0) return OBX_OK; /* nothing claimed this round */
        if ((r = obx__begin(db, mode)) != OBX_OK) return r;
        if (redo + 1 >= OBX__CLAIM_REDOS) { /* the rollback took the carried acks too: those alone */
            c->ack_only = 1;
            return obx__claim_once(db, c);
        }
    }
}

/* A lease of 1..OBX_LEASE_MAX_SECONDS. */
static obx_result obx__check_lease(obx_store *s, const char *fn, int lease_seconds) {
    char where[96];
    if (lease_seconds >= 1 && lease_seconds <= OBX_LEASE_MAX_SECONDS) return OBX_OK;
    snprintf(where, sizeof where, "%s: lease_seconds", fn);
    return obx__fail(&s->err, OBX_ERR_OUT_OF_RANGE, where, "lease_seconds must be 1..%d, got %d",
                     OBX_LEASE_MAX_SECONDS, lease_seconds);
}

/* Room for batch_size messages; grows once, so steady state allocates nothing. */
static obx_result obx__claim_room(obx_store *s, int batch_size) {
    obx_message *grown;
    obx__row_offsets *offsets;
    if (batch_size <= s->msgs_cap) return OBX_OK;
    grown = (obx_message *)obx__realloc(&s->hooks, s->msgs, sizeof *grown * (size_t)batch_size);
    if (!grown) return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_claim", "out of memory");
    s->msgs = grown;
    offsets = (obx__row_offsets *)obx__realloc(&s->hooks, s->offsets, sizeof *offsets * (size_t)batch_size);
    if (!offsets) return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_claim", "out of memory");
    s->offsets = offsets;
    s->msgs_cap = batch_size;
    return OBX_OK;
}

/* obx_claim, after the store's carried acks (store->carry, `acks` of
 * them, `keyed` where some have an ordering key; their count changed in
 * *acked) in the same unit: all or nothing. */
static obx_result obx__claim_run(obx_store *store, const char *owner_token, int lease_seconds, int batch_size,
                                 int acks, int keyed, int64_t *acked, const obx_message **messages, int *count) {
    obx__claim_ctx ctx;
    obx_result r;
    int i;
    r = obx__store_ready(store, "obx_claim");
    if (r != OBX_OK) return r;
    if (!messages || !count)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_claim: messages",
                         "output pointers must not be NULL");
    if ((r = obx__check_token(store, "obx_claim", owner_token)) != OBX_OK) return r;
    if ((r = obx__check_lease(store, "obx_claim", lease_seconds)) != OBX_OK) return r;
    if (batch_size < 1 || batch_size > OBX_BATCH_MAX)
        return obx__fail(&store->err, OBX_ERR_OUT_OF_RANGE, "obx_claim: batch_size",
                         "batch_size must be 1..%d, got %d", OBX_BATCH_MAX, batch_size);
    if ((r = obx__claim_room(store, batch_size)) != OBX_OK) return r;
    ctx.s = store;
    ctx.lease_seconds = lease_seconds;
    ctx.batch_size = batch_size;
    ctx.count = 0;
    ctx.ack_count = acks;
    ctx.ack_only = 0;
    ctx.ack_keyed = acks > 0 && keyed;
    ctx.acked = 0;
    /* A transaction even where the claim is one statement: reading the
     * rows may still fail (memory, the driver), and then the claim must
     * not have happened; in autocommit its rows would stay leased to us. */
    r = obx__unit(&store->db, obx__claim_unit, &ctx, acks > 0 ? "ack and claim" : "claim");
    if (r != OBX_OK) return r;
    if (acks > 0) {
        obx__count(store, OBX_METRIC_DISPATCHED, ctx.acked);
        obx__log(&store->hooks, OBX_LOG_DEBUG, store->store_id, "ack: %lld of %d (with the claim)",
                 (long long)ctx.acked, acks);
        *acked = ctx.acked;
    }
    for (i = 0; i < ctx.count; i++) {
        obx__point_strings(&store->rows, &store->msgs[i], &store->offsets[i]);
        store->msgs[i].store = store;
        obx__own_claimed(store, &store->msgs[i]);
    }
    *messages = store->msgs;
    *count = ctx.count;
    obx__log(&store->hooks, OBX_LOG_DEBUG, store->store_id, "claimed %d message(s) for %s", ctx.count,
             store->token);
    return ctx.count > 0 ? OBX_OK : OBX_EMPTY;
}

OBX_API obx_result obx_claim(obx_store *store, const char *owner_token, int lease_seconds,
                             int batch_size, const obx_message **messages, int *count) {
    return obx__claim_run(store, owner_token, lease_seconds, batch_size, 0, 0, NULL, messages, count);
}

/* >> get ---------------------------------------------------------------------------- */

typedef struct obx__get_ctx {
    obx_store *s;
    obx__param *p;               /* the message's key, as the dialect's GET takes it */
    int n;
    obx_message *m;
    obx__row_offsets o;
    int found;
} obx__get_ctx;

static obx_result obx__get_unit(obx__db *db, void *vctx) {
    obx__get_ctx *c = (obx__get_ctx *)vctx;
    SQLHSTMT cur = NULL;
    obx_result r;
    c->s->read_rows.len = 0;
    c->found = 0;
    r = obx__exec(db, OBX__Q_GET, c->s->sql[OBX__Q_GET], c->p, c->n, NULL, &cur);
    if (r == OBX_OK) r = obx__fetch(db, cur);
    if (r == OBX_OK) {
        r = obx__read_message(db, cur, c->m, &c->s->read_rows, &c->o);
        c->found = r == OBX_OK;
    }
    obx__close(cur);
    return r == OBX_EMPTY ? OBX_OK : r;
}

/* Read the message whose key is in p[0..n) into *out, its strings in the
 * store's read_rows (apart from a claim's). OBX_EMPTY when there is none. */
static obx_result obx__get_by_key(obx_store *s, obx__param *p, int n, obx_message *out) {
    obx__get_ctx ctx;
    obx_message m;
    obx_result r;
    ctx.s = s;
    ctx.p = p;
    ctx.n = n;
    ctx.m = &m;
    r = obx__unit_read(&s->db, obx__get_unit, &ctx, "get");
    if (r != OBX_OK) return r;
    if (!ctx.found) return OBX_EMPTY;
    obx__point_strings(&s->read_rows, &m, &ctx.o);
    m.store = s;
    *out = m;
    return OBX_OK;
}

/* >> settle: ack, abandon, fail; reap, cleanup, stats ----------------------------- */

typedef struct obx__count_ctx {
    obx_store *s;
    int slot;
    obx__param *p;
    int n;
    int64_t count;
} obx__count_ctx;

/* Run a statement that reports how many rows it changed: as a row (a
 * function or procedure), or as the statement's row count (obx__exec). */
static obx_result obx__count_unit(obx__db *db, void *vctx) {
    obx__count_ctx *c = (obx__count_ctx *)vctx;
    return obx__exec(db, c->slot, c->s->sql[c->slot], c->p, c->n, &c->count, NULL);
}

static obx_result obx__run_count(obx_store *s, int slot, obx__param *p, int n, const char *what,
                                 int64_t *count) {
    obx__count_ctx ctx;
    obx_result r;
    ctx.s = s;
    ctx.slot = slot;
    ctx.p = p;
    ctx.n = n;
    ctx.count = 0;
    r = obx__unit_one(&s->db, obx__count_unit, &ctx, what);
    if (r == OBX_OK && count) *count = ctx.count;
    return r;
}

/* The checks every settle call starts with; the key lists are emptied
 * for the caller to fill (obx__key_lists_end closes them). */
static obx_result obx__settle_begin(obx_store *s, const char *fn, const char *owner, int count,
                                    const void *keys) {
    char where[96];
    int k;
    obx_result r = obx__store_ready(s, fn);
    if (r != OBX_OK) return r;
    if ((r = obx__check_token(s, fn, owner)) != OBX_OK) return r;
    snprintf(where, sizeof where, "%s: count", fn);
    if (count < 0) return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "count must be >= 0");
    snprintf(where, sizeof where, "%s: %s", fn, OBX__KEYS_ARG);
    if (count > 0 && !keys)
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, OBX__KEYS_ARG " must not be NULL");
    for (k = 0; k < OBX__KEY_LISTS; k++) s->keys[k].len = 0;
    return OBX_OK;
}

static obx_result obx__key_lists_end(obx_store *s, const char *fn) {
    int k;
    for (k = 0; k < OBX__KEY_LISTS; k++)
        if (!obx__list_end(&s->hooks, &s->keys[k], s->db.d))
            return obx__fail(&s->err, OBX_ERR_NO_MEMORY, fn, "out of memory");
    return OBX_OK;
}

/* A delay for abandon: OBX_DELAY_BACKOFF, or OBX__DELAY_MIN_MS..OBX_DELAY_MAX_MS. */
static obx_result obx__check_delay(obx_store *s, const char *fn, int64_t delay_ms) {
    char where[96];
    if (delay_ms == OBX_DELAY_BACKOFF || (delay_ms >= OBX__DELAY_MIN_MS && delay_ms <= OBX_DELAY_MAX_MS))
        return OBX_OK;
    snprintf(where, sizeof where, "%s: delay_ms", fn);
    return obx__fail(&s->err, OBX_ERR_OUT_OF_RANGE, where,
                     "delay_ms must be OBX_DELAY_BACKOFF or %d..%lld, got %lld",
                     OBX__DELAY_MIN_MS, (long long)OBX_DELAY_MAX_MS, (long long)delay_ms);
}

/* The parameters of a settle statement, in the order every dialect's
 * ACK / ABANDON / FAIL / EXTEND takes them; returns how many. `value` is
 * abandon's delay (OBX_DELAY_BACKOFF: the statement's default backoff) or
 * extend's lease in seconds. */
static int obx__settle_params(obx__param *p, int kind, const char *worker, const char *token,
                              const char *error, int64_t value, int attempts, const obx__buf *keys) {
    int n = 0, k;
    if (kind == OBX__SETTLE_ACK && OBX__ACK_NAMES_WORKER) obx__p_text(&p[n++], worker, (size_t)-1);
    if (kind == OBX__SETTLE_ABANDON || kind == OBX__SETTLE_EXTEND) {
        obx__p_i64(&p[n], value);
        if (kind == OBX__SETTLE_ABANDON && value == OBX_DELAY_BACKOFF) p[n].ind = SQL_NULL_DATA;
        n++;
    }
    if (kind == OBX__SETTLE_ABANDON) obx__p_i64(&p[n++], attempts);
    if (kind == OBX__SETTLE_ABANDON || kind == OBX__SETTLE_FAIL)
        obx__p_text(&p[n++], error && error[0] ? error : NULL, (size_t)-1);
    obx__p_text(&p[n++], token, 36);
    for (k = 0; k < OBX__KEY_LISTS; k++) obx__p_text(&p[n++], keys[k].data, keys[k].len);
    return n;
}

/* Settle (or extend the leases of) the `count` messages whose keys are in
 * s->keys, in one statement. Abandon takes a delay (OBX_DELAY_BACKOFF: the
 * default backoff per message) and whether it uses up an attempt (not when
 * a message only waits); extend takes the lease in seconds. */
static obx_result obx__settle_lists(obx_store *s, const obx__buf *keys, int kind, int count, const char *error,
                                   int64_t value, int attempts, int64_t *changed) {
    static const int slots[4] = {OBX__Q_ACK, OBX__Q_ABANDON, OBX__Q_FAIL, OBX__Q_EXTEND};
    static const char *const names[4] = {"ack", "abandon", "fail", "lease extend"};
    static const int metrics[4] = {OBX_METRIC_DISPATCHED, OBX_METRIC_RETRIED, OBX_METRIC_DEAD, -1};
    obx__param p[5 + OBX__KEY_LISTS];
    int64_t rows = 0;
    int n;
    obx_result r;
    if (count == 0) {
        if (changed) *changed = 0;
        return OBX_OK;
    }
    n = obx__settle_params(p, kind, s->worker_name ? s->worker_name : s->token, s->token, error, value,
                           attempts, keys);
    r = obx__run_count(s, slots[kind], p, n, names[kind], &rows);
    if (r != OBX_OK) return r;
    /* In a transactional handler's transaction: counted by its commit. */
    if (metrics[kind] >= 0 && !s->db.callers_tx) obx__count(s, (obx_metric)metrics[kind], rows);
    if (changed) *changed = rows;
    obx__log(&s->hooks, OBX_LOG_DEBUG, s->store_id, "%s: %lld of %d", names[kind], (long long)rows, count);
    if (keys == s->keys || (keys == s->carry && s->carry_keyed)) obx__own_settled(s, keys, kind, rows);
    return OBX_OK;
}

static obx_result obx__settle(obx_store *s, int kind, int count, const char *error, int64_t value, int attempts,
                              int64_t *changed) {
    return obx__settle_lists(s, s->keys, kind, count, error, value, attempts, changed);
}

/* Settle claimed messages ms[which[0..n)] (the dispatcher's path). */
static obx_result obx__settle_messages(obx_store *s, int kind, const obx_message *ms, const int *which,
                                       int n, const char *error, int64_t delay_ms, int attempts,
                                       int64_t *changed) {
    int i, k;
    for (k = 0; k < OBX__KEY_LISTS; k++) s->keys[k].len = 0;
    for (i = 0; i < n; i++)
        if (!obx__msg_key_add(&s->hooks, s->db.d, s->keys, &ms[which[i]]))
            return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "settle", "out of memory");
    if (obx__key_lists_end(s, "settle") != OBX_OK) return OBX_ERR_NO_MEMORY;
    return obx__settle(s, kind, n, error, delay_ms, attempts, changed);
}

OBX_API obx_result obx_reap(obx_store *store, int64_t *reaped) {
    int64_t n = 0;
    obx_result r = obx__store_ready(store, "obx_reap");
    if (r != OBX_OK) return r;
    r = obx__run_count(store, OBX__Q_REAP, NULL, 0, "reap", &n);
    if (r != OBX_OK) return r;
    if (OBX__SQL(store, OBX__Q_WAKE)) { /* parked messages a concurrent enqueue hid from their wake */
        int64_t woken = 0;
        /* The reap committed: its count is returned whatever the wake does
         * (the next reap wakes again). */
        if (obx__own_wake(store, NULL, &woken) != OBX_OK) {
            obx__log(&store->hooks, OBX_LOG_WARN, store->store_id, "waking parked messages failed: %s",
                     store->err.message);
            obx__error_clear(&store->err);
        }
        if (woken > 0)
            obx__log(&store->hooks, OBX_LOG_INFO, store->store_id,
                     "woke %lld ordering key(s) left with only parked messages", (long long)woken);
    }
    /* PostgreSQL plans by statistics that autovacuum refreshes a minute
     * apart at best, and keeps a prepared statement's plan until they
     * change. A table filled since (a new one above all: never analyzed)
     * got plans that sorted every Ready row per claim: 100,000 messages
     * enqueued into a new table drained at a third of their speed. So the
     * reap (a dispatcher's first round, then every reap interval) analyzes
     * the table where it has grown to twice the pages its statistics know:
     * a handful of times as a table grows from empty to any size. Not on
     * a caller's connection (its transaction is the caller's); where the
     * user may not analyze, PostgreSQL skips with a warning. */
#ifndef OBX_NO_POSTGRESQL
    if (OBX__SQL(store, OBX__Q_ANALYZE) && store->db.own_connection &&
        obx__run_count(store, OBX__Q_ANALYZE, NULL, 0, "analyze", NULL) != OBX_OK)
        obx__log(&store->hooks, OBX_LOG_WARN, store->store_id, "refreshing the table's statistics failed: %s",
                 store->err.message);
#endif
    obx__count(store, OBX_METRIC_REAPED, n);
    if (reaped) *reaped = n;
    obx__log(&store->hooks, n > 0 ? OBX_LOG_INFO : OBX_LOG_DEBUG, store->store_id,
             "reaped %lld expired lease(s)", (long long)n);
    return OBX_OK;
}

OBX_API obx_result obx_cleanup(obx_store *store, int64_t retention_ms, int batch_size,
                               int64_t *deleted) {
    obx__param p[2];
    int64_t total = 0, n;
    obx_result r = obx__store_ready(store, "obx_cleanup");
    if (r != OBX_OK) return r;
    if (retention_ms < 0 || retention_ms > OBX_RETENTION_MAX_MS)
        return obx__fail(&store->err, OBX_ERR_OUT_OF_RANGE, "obx_cleanup: retention_ms",
                         "retention_ms must be 0..%lld", (long long)OBX_RETENTION_MAX_MS);
    if (batch_size < 0 || batch_size > OBX_BATCH_MAX)
        return obx__fail(&store->err, OBX_ERR_OUT_OF_RANGE, "obx_cleanup: batch_size",
                         "batch_size must be 0..%d", OBX_BATCH_MAX);
    if (retention_ms == 0) retention_ms = OBX__RETENTION_DEFAULT_MS;
    if (batch_size == 0) batch_size = OBX__CLEANUP_BATCH_DEFAULT;
    do { /* one bounded transaction per batch */
        obx__p_i64(&p[0], retention_ms);
        obx__p_i64(&p[1], batch_size);
        n = 0;
        r = obx__run_count(store, OBX__Q_CLEANUP, p, 2, "cleanup", &n);
        total += n;
    } while (r == OBX_OK && n >= batch_size);
    if (deleted) *deleted = total;
    obx__count(store, OBX_METRIC_CLEANED_UP, total);
    if (r == OBX_OK && total > 0)
        obx__log(&store->hooks, OBX_LOG_INFO, store->store_id, "cleanup deleted %lld done message(s)",
                 (long long)total);
    return r;
}

typedef struct obx__stats_ctx {
    obx_store *s;
    int64_t ready, oldest;
} obx__stats_ctx;

static obx_result obx__stats_unit(obx__db *db, void *vctx) {
    obx__stats_ctx *c = (obx__stats_ctx *)vctx;
    SQLHSTMT cur = NULL;
    obx_result r = obx__exec(db, OBX__Q_STATS, c->s->sql[OBX__Q_STATS], NULL, 0, NULL, &cur);
    if (r == OBX_OK) r = obx__fetch(db, cur);
    if (r == OBX_OK) r = obx__get_i64(db, cur, 1, &c->ready, NULL);
    if (r == OBX_OK) r = obx__get_i64(db, cur, 2, &c->oldest, NULL);
    obx__close(cur);
    return r == OBX_EMPTY ? OBX_OK : r;
}

OBX_API obx_result obx_queue_stats(obx_store *store, int64_t *ready, int64_t *oldest_ready_ms) {
    obx__stats_ctx ctx;
    obx_result r = obx__store_ready(store, "obx_queue_stats");
    if (r != OBX_OK) return r;
    ctx.s = store;
    ctx.ready = ctx.oldest = 0;
    r = obx__unit_read(&store->db, obx__stats_unit, &ctx, "queue stats");
    if (r != OBX_OK) return r;
    if (ready) *ready = ctx.ready;
    if (oldest_ready_ms) *oldest_ready_ms = ctx.oldest > 0 ? ctx.oldest : 0;
    return OBX_OK;
}

#define OBX__PENDING_RECOUNT_MS 1000

static obx_result obx__pending_unit(obx__db *db, void *vctx) {
    obx__stats_ctx *c = (obx__stats_ctx *)vctx;
    SQLHSTMT cur = NULL;
    obx_result r = obx__exec(db, OBX__Q_PENDING, c->s->sql[OBX__Q_PENDING], NULL, 0, NULL, &cur);
    if (r == OBX_OK) r = obx__fetch(db, cur);
    if (r == OBX_OK) r = obx__get_i64(db, cur, 1, &c->ready, NULL);
    obx__close(cur);
    return r == OBX_EMPTY ? OBX_OK : r;
}

OBX_API obx_result obx_pending_count(obx_store *store, int64_t *pending) {
    obx__stats_ctx ctx;
    obx_result r = obx__store_ready(store, "obx_pending_count");
    if (r != OBX_OK) return r;
    if (!pending)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_pending_count: pending", "must not be NULL");
    ctx.s = store;
    ctx.ready = ctx.oldest = 0;
    r = obx__unit_read(&store->db, obx__pending_unit, &ctx, "pending count");
    if (r != OBX_OK) return r;
    *pending = ctx.ready;
    store->pending_estimate = ctx.ready;
    store->pending_counted_ms = obx__mono_ms(&store->hooks);
    return OBX_OK;
}

/* Backpressure (max_pending): room for n more unfinished messages? The
 * count runs when the estimate says the cap may be reached, and at most a
 * second after the last one (other producers' messages are seen then), so
 * a store with room pays one small read a second at most. An enqueue in
 * the caller's transaction (hdbc) is counted there: the store's own
 * connection cannot see that transaction's messages, so a producer
 * enqueuing many in one transaction would pass the cap unseen.
 * OBX_ERR_FULL names the fill level. */
static obx_result obx__pending_room(obx_store *s, void *hdbc, const char *fn, int64_t n) {
    int64_t now;
    obx_result r;
    if (s->max_pending <= 0) return OBX_OK;
    if (s->pending_estimate <= s->max_pending - n &&
        obx__mono_ms(&s->hooks) - s->pending_counted_ms < OBX__PENDING_RECOUNT_MS) {
        s->pending_estimate += n;
        return OBX_OK;
    }
    if (hdbc) {
        obx__stats_ctx ctx;
        ctx.s = s;
        ctx.ready = ctx.oldest = 0;
        if ((r = obx__unit_or_caller(s, hdbc, obx__pending_unit, &ctx, fn, OBX__UNIT_READ)) != OBX_OK) return r;
        now = ctx.ready;
    } else if ((r = obx_pending_count(s, &now)) != OBX_OK) {
        return r;
    }
    s->pending_counted_ms = obx__mono_ms(&s->hooks);
    s->pending_estimate = now;
    if (now > s->max_pending - n)
        return obx__fail(&s->err, OBX_ERR_FULL, fn,
                         "the store holds %lld unfinished message(s) of max_pending %lld: %lld more do not fit"
                         OBX__WHY("; enqueue again once the queue drains"),
                         (long long)now, (long long)s->max_pending, (long long)n);
    s->pending_estimate = now + n;
    return OBX_OK;
}

/* >> metrics: handler durations, Prometheus text ------------------------------------ */

#ifndef OBX_NO_METRICS_TEXT /* no one would read the histograms */
/* Count one handler run of `us` microseconds for `topic`. Best effort: out
 * of memory, the run is not counted (metrics never fail a dispatch). */
static void obx__hist_record(obx_store *s, const char *topic, int64_t us) {
    obx__hist *h = NULL;
    int i;
    if (s->hist_count >= OBX__HIST_TOPICS_MAX) topic = "(other)";
    for (i = 0; i < s->hist_count && !h; i++)
        if (strcmp(s->hist[i].topic, topic) == 0) h = &s->hist[i];
    if (!h) {
        if (s->hist_count == s->hist_cap) {
            int cap = s->hist_cap ? s->hist_cap * 2 : 8;
            obx__hist *grown = (obx__hist *)obx__realloc(&s->hooks, s->hist, (size_t)cap * sizeof *grown);
            if (!grown) return;
            s->hist = grown;
            s->hist_cap = cap;
        }
        h = &s->hist[s->hist_count];
        memset(h, 0, sizeof *h);
        if (!(h->topic = obx__strdup(&s->hooks, topic))) return;
        s->hist_count++;
    }
    if (us < 0) us = 0;
    for (i = 0; i < OBX__HIST_BUCKETS; i++)
        if (us <= obx__hist_bounds_ms[i] * 1000) h->buckets[i]++;
    h->count++;
    h->sum_us += us;
}
#else
#define obx__hist_record(s, topic, us) ((void)(s), (void)(topic), (void)(us))
#endif

#ifndef OBX_NO_METRICS_TEXT
/* Text being written; out of memory is noted once and checked at the end. */
typedef struct obx__text_buf {
    const obx__hooks *h;
    obx__buf b;
    int oom;
} obx__text_buf;

OBX__PRINTF(2, 3)
static void obx__text(obx__text_buf *t, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && !obx__buf_add(t->h, &t->b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1))
        t->oom = 1;
}

/* A label value as the exposition format wants it: \, \" and \n escaped. */
static void obx__text_label(obx__text_buf *t, const char *value) {
    const char *p;
    for (p = value; *p; p++) {
        if (*p == '\\' || *p == '"') obx__text(t, "\\%c", *p);
        else if (*p == '\n') obx__text(t, "\\n");
        else obx__text(t, "%c", *p);
    }
}

static void obx__text_family(obx__text_buf *t, const char *name, const char *type,
                             const char *help) {
    obx__text(t, "# HELP obx_%s %s\n# TYPE obx_%s %s\n", name, help, name, type);
}

/* One sample: name{store="...",<more>} value; `more` is ",topic=..." or "". */
static void obx__text_sample(obx_store *s, obx__text_buf *t, const char *name, const char *topic,
                             const char *le, const char *value) {
    obx__text(t, "obx_%s{store=\"", name);
    obx__text_label(t, s->store_id);
    if (topic) {
        obx__text(t, "\",topic=\"");
        obx__text_label(t, topic);
    }
    obx__text(t, "\"%s%s%s} %s\n", le ? ",le=\"" : "", le ? le : "", le ? "\"" : "", value);
}

static void obx__text_histograms(obx_store *s, obx__text_buf *t) {
    char le[32], v[32];
    int i, k;
    obx__text_family(t, "handler_duration_seconds", "histogram",
                     "Time the handlers of one message took, per topic.");
    for (i = 0; i < s->hist_count; i++) {
        const obx__hist *hg = &s->hist[i];
        for (k = 0; k <= OBX__HIST_BUCKETS; k++) {
            if (k < OBX__HIST_BUCKETS) snprintf(le, sizeof le, "%g", (double)obx__hist_bounds_ms[k] / 1000.0);
            else snprintf(le, sizeof le, "+Inf");
            snprintf(v, sizeof v, "%lld", (long long)(k < OBX__HIST_BUCKETS ? hg->buckets[k] : hg->count));
            obx__text_sample(s, t, "handler_duration_seconds_bucket", hg->topic, le, v);
        }
        snprintf(v, sizeof v, "%.6f", (double)hg->sum_us / 1e6);
        obx__text_sample(s, t, "handler_duration_seconds_sum", hg->topic, NULL, v);
        snprintf(v, sizeof v, "%lld", (long long)hg->count);
        obx__text_sample(s, t, "handler_duration_seconds_count", hg->topic, NULL, v);
    }
}

typedef struct obx__gauges_ctx {
    obx_store *s;
    int64_t v[6];                 /* ready, oldest ready ms, in flight, dead, scheduled,
                                     expired leases: OBX__Q_GAUGES's columns */
} obx__gauges_ctx;

static obx_result obx__gauges_unit(obx__db *db, void *vctx) {
    obx__gauges_ctx *c = (obx__gauges_ctx *)vctx;
    SQLHSTMT cur = NULL;
    int i;
    obx_result r = obx__exec(db, OBX__Q_GAUGES, c->s->sql[OBX__Q_GAUGES], NULL, 0, NULL, &cur);
    if (r == OBX_OK) r = obx__fetch(db, cur);
    for (i = 0; i < 6 && r == OBX_OK; i++) r = obx__get_i64(db, cur, (SQLUSMALLINT)(i + 1), &c->v[i], NULL);
    obx__close(cur);
    return r == OBX_EMPTY ? OBX_OK : r;
}

static void obx__text_metrics(obx_store *s, obx__text_buf *t, const int64_t *gauges) {
    char v[32];
    int i;
    for (i = 0; i < OBX_METRIC_COUNT_; i++) {
        obx__text_family(t, obx__metric_text[i][0], "counter", obx__metric_text[i][1]);
        snprintf(v, sizeof v, "%lld", (long long)s->counters[i]);
        obx__text_sample(s, t, obx__metric_text[i][0], NULL, NULL, v);
    }
    /* The counter's name before 0.2, kept until 0.3 (CHANGELOG.md). */
    obx__text_family(t, "messages_expired_total", "counter",
                    "Deprecated, removed in 0.3: the old name of obx_messages_cleaned_up_total.");
    snprintf(v, sizeof v, "%lld", (long long)s->counters[OBX_METRIC_CLEANED_UP]);
    obx__text_sample(s, t, "messages_expired_total", NULL, NULL, v);
    for (i = 0; i < 6; i++) {
        obx__text_family(t, obx__gauge_text[i][0], "gauge", obx__gauge_text[i][1]);
        if (i == 1) snprintf(v, sizeof v, "%.3f", (double)(gauges[i] > 0 ? gauges[i] : 0) / 1000.0);
        else snprintf(v, sizeof v, "%lld", (long long)gauges[i]);
        obx__text_sample(s, t, obx__gauge_text[i][0], NULL, NULL, v);
    }
    obx__text_histograms(s, t);
}

OBX_API obx_result obx_metrics_text(obx_store *store, char *out, size_t cap, size_t *needed) {
    obx__gauges_ctx ctx;
    obx__text_buf t;
    obx_result r = obx__store_ready(store, "obx_metrics_text");
    if (r != OBX_OK) return r;
    if (!out && cap > 0)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_metrics_text: out",
                         "out must not be NULL when cap > 0");
    memset(&ctx, 0, sizeof ctx);
    ctx.s = store;
    r = obx__unit_read(&store->db, obx__gauges_unit, &ctx, "metrics");
    if (r != OBX_OK) return r;
    memset(&t, 0, sizeof t);
    t.h = &store->hooks;
    obx__text_metrics(store, &t, ctx.v);
    if (t.oom || !t.b.data)
        r = obx__fail(&store->err, OBX_ERR_NO_MEMORY, "obx_metrics_text", "out of memory");
    else if (t.b.len + 1 > cap)
        r = obx__fail(&store->err, OBX_ERR_OUT_OF_RANGE, "obx_metrics_text: cap",
                      "the text needs %lu bytes, cap is %lu", (unsigned long)(t.b.len + 1),
                      (unsigned long)cap);
    else
        memcpy(out, t.b.data, t.b.len + 1);
    if (needed && !t.oom && t.b.data) *needed = t.b.len + 1;
    obx__buf_free(&store->hooks, &t.b);
    return r;
}
#endif /* OBX_NO_METRICS_TEXT */

/* >> providers and routers --------------------------------------------------------- */

#ifndef OBX_NO_MULTI_STORE
struct obx_provider {
    obx__hooks hooks;
    obx_error err;
    obx_store_desc base;         /* the template; strings below are our copies */
    char *schema, *table, *worker_name;
    obx__registry reg;
    obx_discover_fn discover;
    void *discover_user;
    int64_t refresh_ms, next_refresh_ms;
    obx_database *fixed;         /* a fixed list's copy, answered as discovery would */
    char **fixed_text;           /* its strings, ids then connection strings */
    int fixed_count;
    obx_result discovered;       /* how the last discovery went: its failures are logged once */
    unsigned closes;             /* stores closed so far (by refreshes) */
};

/* A fixed list is a discovery that always answers the same: asked once, at
 * create; a database that could not be opened is tried again on its own
 * backoff (obx__registry_retry), as discovery's are. */
static int obx__provider_fixed(obx_database *out, int cap, void *user) {
    const obx_provider *p = (const obx_provider *)user;
    int i;
    for (i = 0; i < p->fixed_count && i < cap; i++) out[i] = p->fixed[i];
    return p->fixed_count;
}

static int obx__provider_copy_list(obx_provider *p, const obx_database *dbs, int n) {
    int i;
    p->fixed = (obx_database *)obx__alloc(&p->hooks, sizeof *p->fixed * (size_t)(n + 1));
    p->fixed_text = (char **)obx__alloc(&p->hooks, sizeof *p->fixed_text * (size_t)(2 * n + 1));
    if (!p->fixed || !p->fixed_text) return 0;
    memset(p->fixed_text, 0, sizeof *p->fixed_text * (size_t)(2 * n + 1));
    p->fixed_count = n;
    for (i = 0; i < n; i++) {
        p->fixed[i].id = p->fixed_text[2 * i] = obx__strdup(&p->hooks, dbs[i].id);
        p->fixed[i].connection_string = p->fixed_text[2 * i + 1] =
            obx__strdup(&p->hooks, dbs[i].connection_string);
        if (!p->fixed_text[2 * i] || !p->fixed_text[2 * i + 1]) return 0;
    }
    p->discover = obx__provider_fixed;
    p->discover_user = p;
    return 1;
}

static void *obx__provider_open(void *ctx, const char *id, const char *connstr) {
    obx_provider *p = (obx_provider *)ctx;
    obx_store_desc desc = p->base;
    obx_store *s = NULL;
    desc.connection_string = connstr;
    desc.hdbc = NULL;
    desc.store_id = id;
    if (obx_store_open(&desc, &s) != OBX_OK) { /* open logged why */
        obx_store_close(s);
        return NULL;
    }
    return s;
}

static void obx__provider_close(void *ctx, void *store) {
    ((obx_provider *)ctx)->closes++; /* a dispatcher's renewal connection may serve it: see obx__renew_forget */
    obx_store_close((obx_store *)store);
}

/* Ask discovery for the databases (the protocol is at obx_discover_fn):
 * with room for OBX__DISCOVER_FIRST, then, when it says there are more, for
 * all of them. An answer that fills every place may have stopped there, so
 * it is asked again with twice the room: never a silent cap below
 * OBX_DISCOVER_MAX. */
static int obx__provider_ask(obx_provider *p, obx_database **found) {
    int cap = OBX__DISCOVER_FIRST, n;
    for (;;) {
        obx_database *room = (obx_database *)obx__realloc(&p->hooks, *found, sizeof **found * (size_t)cap);
        if (!room) return -2;
        *found = room;
        memset(room, 0, sizeof *room * (size_t)cap);
        n = p->discover(room, cap, p->discover_user);
        if (n < cap || cap == OBX_DISCOVER_MAX) return n;
        if (n == cap) n = cap < OBX_DISCOVER_MAX / 2 ? cap * 2 : OBX_DISCOVER_MAX;
        cap = n < OBX_DISCOVER_MAX ? n : OBX_DISCOVER_MAX;
    }
}

/* Run discovery into the registry. A failure keeps the current set; it is
 * logged at WARN when discovery starts failing or fails otherwise than
 * before (not at every refresh), and its recovery at INFO. */
static obx_result obx__provider_discover(obx_provider *p) {
    obx_database *found = NULL;
    int n, added = 0, removed = 0;
    obx_result r;
    p->next_refresh_ms = obx__sat_add(obx__mono_ms(&p->hooks), p->refresh_ms);
    n = obx__provider_ask(p, &found);
    if (n == -2) r = obx__fail(&p->err, OBX_ERR_NO_MEMORY, "obx_provider_refresh", "out of memory");
    else if (n < 0 || n > OBX_DISCOVER_MAX)
        r = obx__fail(&p->err, OBX_ERR_DB, "obx_provider_refresh: discover",
                      "discovery failed (returned %d; at most %d databases); keeping the %d current "
                      "database(s)", n, OBX_DISCOVER_MAX, p->reg.count);
    else if ((r = obx__registry_apply(&p->reg, found, n, &added, &removed)) == OBX_ERR_INVALID_ARG)
        obx__fail(&p->err, r, "obx_provider_refresh: discover",
                  "discovery returned a NULL, empty or duplicate id or connection string; keeping the "
                  "%d current database(s)", p->reg.count);
    else if (r != OBX_OK)
        obx__fail(&p->err, r, "obx_provider_refresh", "out of memory");
    else {
        if (n == OBX_DISCOVER_MAX)
            obx__log(&p->hooks, OBX_LOG_WARN, "provider",
                     "discovery returned %d databases, the most one discovery may: any past them "
                     "are not served (OBX_DISCOVER_MAX)", n);
        obx__log(&p->hooks, added || removed ? OBX_LOG_INFO : OBX_LOG_DEBUG, "provider",
                 "discovery: %d database(s) open, %d not open, %d added, %d removed", p->reg.count,
                 p->reg.down_count, added, removed);
    }
    if (r != OBX_OK && r != p->discovered)
        obx__log(&p->hooks, OBX_LOG_WARN, "provider", "%s: %s (%s)", p->err.where, p->err.message,
                 obx__result_str(r));
    else if (r == OBX_OK && p->discovered != OBX_OK)
        obx__log(&p->hooks, OBX_LOG_INFO, "provider", "discovery works again");
    p->discovered = r;
    obx__free(&p->hooks, found);
    return r;
}

/* The provider's own copies of the template's strings. */
static int obx__provider_copy_desc(obx_provider *p, const obx_store_desc *store) {
    const char *worker = obx__desc_worker(store);
    p->base = *store;
    p->schema = store->schema ? obx__strdup(&p->hooks, store->schema) : NULL;
    p->table = store->table ? obx__strdup(&p->hooks, store->table) : NULL;
    p->worker_name = worker ? obx__strdup(&p->hooks, worker) : NULL;
    p->base.schema = p->schema;
    p->base.table = p->table;
    obx__desc_set_worker(&p->base, p->worker_name);
    return (!store->schema || p->schema) && (!store->table || p->table) && (!worker || p->worker_name);
}

/* A refused provider description: no provider exists to hold the error,
 * so the refusal is logged, naming the field. */
static obx_result obx__provider_refuse(const obx__hooks *h, obx_result r, const char *field,
                                       const char *why) {
    obx__log(h, OBX_LOG_ERROR, "provider", "obx_provider_create: %s: %s (%s)", field, why, obx__result_str(r));
    return r;
}

OBX_API obx_result obx_provider_create(const obx_provider_desc *desc, obx_provider **out) {
    obx__hooks hooks;
    obx_provider *p;
    obx_result r;
    if (!out) return OBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc) return OBX_ERR_INVALID_ARG;
    if (obx__hooks_resolve(&hooks, &desc->store.hooks) != OBX_OK)
        return obx__provider_refuse(&hooks, OBX_ERR_INVALID_ARG, "store.hooks.allocator",
                                    "give all three functions or none");
    if ((desc->databases != NULL) == (desc->discover != NULL))
        return obx__provider_refuse(&hooks, OBX_ERR_INVALID_ARG, "databases",
                                    "give exactly one of databases and discover");
    if (desc->store.hdbc)
        return obx__provider_refuse(&hooks, OBX_ERR_INVALID_ARG, "store.hdbc",
                                    "must be NULL: each database is opened from its connection string");
    if (desc->database_count < 0)
        return obx__provider_refuse(&hooks, OBX_ERR_INVALID_ARG, "database_count", "must be >= 0");
    if (desc->refresh_interval_ms < 0)
        return obx__provider_refuse(&hooks, OBX_ERR_OUT_OF_RANGE, "refresh_interval_ms",
                                    "must be >= 0 (0: 5 minutes)");
    p = (obx_provider *)obx__alloc(&hooks, sizeof *p);
    if (!p) return OBX_ERR_NO_MEMORY;
    memset(p, 0, sizeof *p);
    obx__hooks_resolve(&p->hooks, &desc->store.hooks);
    if (p->hooks.env_level_bad) obx__log(&p->hooks, OBX_LOG_WARN, "provider",
                                         "OBX_LOG_LEVEL is not one of debug, info, warn, error, off: logging at INFO");
    p->reg.hooks = &p->hooks;
    p->reg.open = obx__provider_open;
    p->reg.close = obx__provider_close;
    p->reg.ctx = p;
    p->reg.name = "provider";
    obx__registry_init(&p->reg);
    p->discover = desc->discover;
    p->discover_user = desc->discover_user;
    p->refresh_ms = desc->refresh_interval_ms ? desc->refresh_interval_ms : OBX__REFRESH_DEFAULT_MS;
    p->reg.retry_max_ms = p->refresh_ms;
    if (!obx__provider_copy_desc(p, &desc->store)) {
        obx_provider_destroy(p);
        return OBX_ERR_NO_MEMORY;
    }
    *out = p;
    if (desc->databases && obx__registry_valid(&p->hooks, desc->databases, desc->database_count) > 0 &&
        !obx__provider_copy_list(p, desc->databases, desc->database_count)) {
        obx_provider_destroy(p);
        *out = NULL;
        return OBX_ERR_NO_MEMORY;
    }
    r = p->discover ? obx__provider_discover(p) /* an invalid fixed list: refused here */
                    : obx__registry_apply(&p->reg, desc->databases, desc->database_count, NULL, NULL);
    if (r == OBX_ERR_INVALID_ARG)
        obx__provider_refuse(&p->hooks, r, desc->discover ? "discover" : "databases",
                             desc->discover ? p->err.message
                                            : "every database needs a unique, non-empty id and a connection string");
    if (r != OBX_OK && r != OBX_ERR_DB) { /* a failed first discovery still gives a provider */
        obx_provider_destroy(p);
        *out = NULL;
    }
    return r;
}

OBX_API void obx_provider_destroy(obx_provider *p) {
    obx__hooks hooks;
    int i;
    if (!p) return;
    obx__registry_free(&p->reg);
    hooks = p->hooks;
    for (i = 0; p->fixed_text && i < 2 * p->fixed_count; i++) obx__free(&hooks, p->fixed_text[i]);
    obx__free(&hooks, p->fixed_text);
    obx__free(&hooks, p->fixed);
    obx__free(&hooks, p->schema);
    obx__free(&hooks, p->table);
    obx__free(&hooks, p->worker_name);
    obx__free(&hooks, p);
}

OBX_API obx_result obx_provider_refresh(obx_provider *p) {
    if (!p) return OBX_ERR_INVALID_ARG;
    obx__error_clear(&p->err);
    obx__registry_retry(&p->reg);
    if (p->fixed)
        return obx__fail(&p->err, OBX_ERR_STATE, "obx_provider_refresh", "a fixed list has no discovery");
    return obx__provider_discover(p);
}

OBX_API int obx_provider_count(const obx_provider *p) { return p ? p->reg.count : 0; }

OBX_API obx_store *obx_provider_store(const obx_provider *p, int index) {
    return p && index >= 0 && index < p->reg.count ? (obx_store *)p->reg.items[index].store : NULL;
}

OBX_API const char *obx_provider_store_id(const obx_provider *p, int index) {
    return p && index >= 0 && index < p->reg.count ? p->reg.items[index].id : NULL;
}

OBX_API const obx_error *obx_provider_last_error(const obx_provider *p) {
    return p ? &p->err : obx__null_error();
}

/* The store of routing key `key`, or OBX_ERR_NOT_FOUND. A GUID key also
 * finds a database whose id is the same GUID in upper case or in braces
 * (as SQL Server and .NET's "B" format write them): a GUID names one value
 * whatever its spelling. */
static obx_result obx__router_find(obx_provider *p, const char *fn, const char *key, int guid,
                             obx_store **out) {
    char where[96];
    int at, i, k;
    snprintf(where, sizeof where, "%s: key", fn);
    if (!p) return OBX_ERR_INVALID_ARG;
    obx__error_clear(&p->err);
    if (!out) return obx__fail(&p->err, OBX_ERR_INVALID_ARG, fn, "out must not be NULL");
    if (!key || !key[0]) return obx__fail(&p->err, OBX_ERR_INVALID_ARG, where, "key must not be NULL or empty");
    at = obx__registry_find(&p->reg, key);
    for (i = 0; at < 0 && guid && i < p->reg.count; i++) {
        const char *id = p->reg.items[i].id;
        size_t n = strlen(id);
        if (n == 38 && id[0] == '{' && id[37] == '}') id++;
        else if (n != 36) continue;
        for (k = 0; k < 36; k++) {
            char c = id[k] >= 'A' && id[k] <= 'F' ? (char)(id[k] + 32) : id[k];
            if (c != key[k]) break;
        }
        if (k == 36) at = i;
    }
    if (at < 0) return obx__fail(&p->err, OBX_ERR_NOT_FOUND, where, "no " OBX__NOUN " for routing key '%s'", key);
    *out = (obx_store *)p->reg.items[at].store;
    return OBX_OK;
}

OBX_API obx_result obx_router_get(obx_provider *p, const char *key, obx_store **out) {
    return obx__router_find(p, "obx_router_get", key, 0, out);
}

OBX_API obx_result obx_router_get_guid(obx_provider *p, const obx_guid *key, obx_store **out) {
    char text[37];
    if (p && key) obx__guid_text(key->bytes, text);
    else if (p) return obx__fail(&p->err, OBX_ERR_INVALID_ARG, "obx_router_get_guid: key", "key must not be NULL");
    return obx__router_find(p, "obx_router_get_guid", key ? text : NULL, 1, out);
}
#endif /* OBX_NO_MULTI_STORE */

/* >> dead letters: list, replay, purge ------------------------------------------------- */

#ifndef OBX_NO_DEAD_LETTERS
/* A filter's arguments as every dialect's DEAD_* statements take them:
 * topic, error text, created from, created before, two key slots (the
 * face's), then limit and offset. NULL texts and zero times bind SQL NULL. */
static obx_result obx__dead_params(obx_store *s, const char *fn, const obx_dead_filter *given,
                                   obx__param p[8], char buf[37]) {
    char where[96];
    obx_dead_filter f;
    obx_result r = obx__store_ready(s, fn);
    if (r != OBX_OK) return r;
    if (given) f = *given;
    else memset(&f, 0, sizeof f);
    if (f.topic && (r = obx__check_text(&s->err, fn, "filter.topic", f.topic, OBX_TOPIC_MAX)) != OBX_OK)
        return r;
    if (f.error_contains && (r = obx__check_text(&s->err, fn, "filter.error_contains", f.error_contains,
                                                 OBX__HANDLER_ERROR_MAX - 1)) != OBX_OK)
        return r;
    snprintf(where, sizeof where, "%s: filter", fn);
    if (f.created_from_ms < 0 || f.created_from_ms > OBX_TIME_MAX_MS || f.created_before_ms < 0 ||
        f.created_before_ms > OBX_TIME_MAX_MS)
        return obx__fail(&s->err, OBX_ERR_OUT_OF_RANGE, where,
                         "created_from_ms and created_before_ms must be 0..%lld", (long long)OBX_TIME_MAX_MS);
    obx__p_text(&p[0], f.topic, (size_t)-1);
    obx__p_text(&p[1], f.error_contains, (size_t)-1);
    obx__p_i64(&p[2], f.created_from_ms);
    obx__p_i64(&p[3], f.created_before_ms);
    if (!f.created_from_ms) p[2].ind = SQL_NULL_DATA;
    if (!f.created_before_ms) p[3].ind = SQL_NULL_DATA;
    obx__p_i64(&p[6], 0);
    obx__p_i64(&p[7], 0);
    if ((r = obx__dead_key(s, fn, &f, &p[4], buf)) != OBX_OK) return r;
    if (!s->sql[OBX__Q_DEAD_LIST])
        return obx__fail(&s->err, OBX_ERR_UNSUPPORTED, fn, "no dead-letter statements for %s",
                         obx__dialect_name(s->db.d->id));
    return OBX_OK;
}

typedef struct obx__list_ctx {
    obx_store *s;
    obx__param *p;
    int limit, count;
} obx__list_ctx;

static obx_result obx__dead_list_unit(obx__db *db, void *vctx) {
    obx__list_ctx *c = (obx__list_ctx *)vctx;
    obx_store *s = c->s;
    SQLHSTMT cur = NULL;
    obx_result r;
    c->count = 0;
    s->rows.len = 0;
    r = obx__exec(db, OBX__Q_DEAD_LIST, s->sql[OBX__Q_DEAD_LIST], c->p, 8, NULL, &cur);
    while (r == OBX_OK && c->count < c->limit && (r = obx__fetch(db, cur)) == OBX_OK) {
        r = obx__read_message(db, cur, &s->msgs[c->count], &s->rows, &s->offsets[c->count]);
        if (r == OBX_OK) c->count++;
    }
    obx__close(cur);
    return r == OBX_EMPTY ? OBX_OK : r;
}

OBX_API obx_result obx_dead_list(obx_store *store, const obx_dead_filter *filter, int offset,
                                 int limit, const obx_message **messages, int *count) {
    obx__param p[8];
    obx__list_ctx ctx;
    char buf[37];
    obx_result r = obx__dead_params(store, "obx_dead_list", filter, p, buf);
    int i;
    if (r != OBX_OK) return r;
    if (!messages || !count)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_dead_list: messages",
                         "output pointers must not be NULL");
    if (limit < 1 || limit > OBX_BATCH_MAX || offset < 0)
        return obx__fail(&store->err, OBX_ERR_OUT_OF_RANGE, "obx_dead_list: limit",
                         "limit must be 1..%d and offset >= 0, got %d and %d", OBX_BATCH_MAX, limit, offset);
    if ((r = obx__claim_room(store, limit)) != OBX_OK) return r;
    obx__p_i64(&p[6], limit);
    obx__p_i64(&p[7], offset);
    ctx.s = store;
    ctx.p = p;
    ctx.limit = limit;
    r = obx__unit_read(&store->db, obx__dead_list_unit, &ctx, "dead list");
    if (r != OBX_OK) return r;
    for (i = 0; i < ctx.count; i++) {
        obx__point_strings(&store->rows, &store->msgs[i], &store->offsets[i]);
        store->msgs[i].store = store;
    }
    *messages = store->msgs;
    *count = ctx.count;
    return ctx.count > 0 ? OBX_OK : OBX_EMPTY;
}

OBX_API obx_result obx_dead_replay(obx_store *store, const obx_dead_filter *filter, int64_t *replayed) {
    obx__param p[8];
    char buf[37];
    int64_t n = 0;
    obx_result r = obx__dead_params(store, "obx_dead_replay", filter, p, buf);
    if (r == OBX_OK) r = obx__run_count(store, OBX__Q_DEAD_REPLAY, p, 8, "dead replay", &n);
    if (r != OBX_OK) return r;
    obx__log(&store->hooks, n > 0 ? OBX_LOG_INFO : OBX_LOG_DEBUG, store->store_id,
             "replayed %lld dead message(s)", (long long)n);
    if (replayed) *replayed = n;
    return OBX_OK;
}

/* A purge racing a replay deletes a message only if it is still dead when
 * the delete holds its row: PostgreSQL's DELETE repeats the filter on the
 * row itself, which READ COMMITTED re-checks on the latest version after a
 * lock wait (the subquery's rows are its snapshot's); MariaDB's DELETE has
 * the filter on the row, checked by InnoDB on the latest version it locks;
 * SQL Server's delete scan reads the committed row under its update lock;
 * SQLite has one writer. OBX-DEAD-PURGE-REPLAYED, OBX-DEAD-PURGE-RACE. */
OBX_API obx_result obx_dead_purge(obx_store *store, const obx_dead_filter *filter, int64_t *purged) {
    obx__param p[8];
    char buf[37];
    int64_t total = 0, n = 0;
    obx_result r = obx__dead_params(store, "obx_dead_purge", filter, p, buf);
    obx__p_i64(&p[6], OBX__CLEANUP_BATCH_DEFAULT);
    while (r == OBX_OK) { /* one bounded transaction per batch */
        r = obx__run_count(store, OBX__Q_DEAD_PURGE, p, 8, "dead purge", &n);
        total += r == OBX_OK ? n : 0;
        if (n < OBX__CLEANUP_BATCH_DEFAULT) break;
    }
    if (total > 0 || r == OBX_OK)
        obx__log(&store->hooks, total > 0 ? OBX_LOG_INFO : OBX_LOG_DEBUG, store->store_id,
                 "purged %lld dead message(s)", (long long)total);
    if (r == OBX_OK && purged) *purged = total;
    return r;
}

/* obx_dead_move and obx_run_now once the face has checked the message's key
 * into p (after the reason's slot p[0] of a move): one statement, then a
 * moved head of an ordering key lets the messages parked behind it move on
 * (triggers do it where the dialect has them; else the reap's wake, now
 * rather than a reap interval later; if it fails, the reap does). */
static obx_result obx__one_message(obx_store *s, const char *fn, int slot, const char *reason, obx__param *p,
                                   int n, const char *name, int64_t *changed) {
    int64_t count = 0, woken = 0;
    obx_result r;
    if (slot == OBX__Q_MOVE &&
        (r = obx__check_text(&s->err, fn, "reason", reason, OBX__HANDLER_ERROR_MAX - 1)) != OBX_OK)
        return r;
    if (!s->sql[slot])
        return obx__fail(&s->err, OBX_ERR_UNSUPPORTED, fn, "no statement for %s", obx__dialect_name(s->db.d->id));
    if (slot == OBX__Q_MOVE) obx__p_text(&p[0], reason, (size_t)-1);
    if ((r = obx__run_count(s, slot, p, n, fn + 4, &count)) != OBX_OK) return r;
    if (slot == OBX__Q_MOVE && count > 0 && OBX__SQL(s, OBX__Q_WAKE) && obx__own_wake(s, NULL, &woken) != OBX_OK)
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "waking the messages parked behind %s failed: %s", name,
                 s->err.message);
    obx__log(&s->hooks, count > 0 ? OBX_LOG_INFO : OBX_LOG_DEBUG, s->store_id, "%s %s: %lld changed", fn + 4, name,
             (long long)count);
    if (changed) *changed = count;
    return OBX_OK;
}
#endif /* OBX_NO_DEAD_LETTERS */

/* >> lease renewal ------------------------------------------------------------------ */

/* While a batch's handlers run, a thread of the dispatcher's own renews the
 * leases of the whole batch (claimed and not yet settled) every third of
 * the lease (after a failure, a tenth), on a connection of its own, so
 * that a handler slower than its lease is never handed to a second worker
 * while it runs. It stops after
 * max_handler_ms (logged); then the messages may be delivered again.
 * Without threads, or on a caller's connection, there is no renewal: the
 * handler may call obx_lease_extend itself.
 *
 * Ownership: the renewer belongs to its dispatcher and lives as long as
 * it. It keeps no pointer into a store (a provider may close one at any
 * refresh): at obx__renew_begin it copies what it needs (connection string,
 * statement, store id, dialect, hooks) and opens its own connection from
 * those copies; it is closed when the batch's database differs, when the
 * provider closes a store (obx__renew_forget) and at destroy. The batch
 * itself (ms: the store's claim buffer) is read only between begin and
 * end, while the dispatcher stays inside that store's round. `mutex`
 * guards every field the two threads share (marked "shared"). */
#ifndef OBX__LOOP_SLICED
typedef struct obx__renewer {
    obx__thread_t thread;
    obx__mutex_t mutex;
    obx__cond_t cond;
    obx__hooks hooks;            /* a copy: outlives any store or provider */
    int warned;                  /* the dispatcher's thread only */
    /* shared: */
    int started, quit, active, busy;
    int64_t call_started_ms;     /* a dispatcher call into the database began (0: none) */
    int stall_logged;
    int watch_file;              /* that store is a file (SQLite): a stall is another writer's lock */
    char watch_id[64];           /* the store of that call, for the stall line */
    const obx_message *ms;       /* the messages renewed: stable while active */
    int n, lease_seconds;
    int starting;                /* handlers may still start: a renewal must find all n */
    int settled;                 /* of those n, settled by a transactional handler's commit:
                                    gone from the table's leases, not lost */
    unsigned epoch;              /* bumped whenever ms/n/starting change */
    int64_t max_ms, started_ms, next_ms;
    int64_t start_until_ms;      /* no handler starts at or past this (monotonic) */
    char owner[37];
    char *connstr, *sql, *store_id; /* the batch's database: copies (w->hooks) */
    obx_dialect dialect;
    long login_timeout_s, statement_timeout_s;
    int stale;                   /* the database changed: reconnect before renewing */
    /* the renewal thread's own (and destroy's, after the join): */
    obx__db side;                /* the renewal connection */
    obx_error side_err;
    char side_id[64];
    obx__buf keys[OBX__KEY_LISTS];
} obx__renewer;

/* Open (or keep) the renewal connection (the renewal thread, busy). */
static obx_result obx__renew_connect(obx__renewer *w, int stale) {
    if (!stale && w->side.connected && !w->side.lost) return OBX_OK;
    obx__db_close(&w->side);
    memset(&w->side, 0, sizeof w->side);
    obx__copy(w->side_id, sizeof w->side_id, w->store_id);
    w->side.hooks = &w->hooks;
    w->side.err = &w->side_err;
    w->side.store_id = w->side_id;
    w->side.forced = w->dialect;
    w->side.login_timeout_s = w->login_timeout_s;
    w->side.statement_timeout_s = w->statement_timeout_s;
    w->side.connect_no_wait = 1; /* never queue behind another thread's connect */
    return obx__db_connect(&w->side, w->connstr);
}

typedef struct obx__renew_ctx {
    obx__renewer *w;
    const char *owner;
    int lease_seconds;
    int64_t rows;
} obx__renew_ctx;

static obx_result obx__renew_unit(obx__db *db, void *ctx) {
    obx__renew_ctx *c = (obx__renew_ctx *)ctx;
    obx__param p[5 + OBX__KEY_LISTS];
    int n = obx__settle_params(p, OBX__SETTLE_EXTEND, NULL, c->owner, NULL, c->lease_seconds, 0, c->w->keys);
    c->rows = 0;
    return obx__exec(db, OBX__Q_EXTEND, c->w->sql, p, n, &c->rows, NULL);
}

/* Renew the leases of ms[0..n) once (the renewal thread, mutex not held);
 * the number of leases renewed into *rows. */
static obx_result obx__renew_once(obx__renewer *w, const obx_message *ms, int n, int stale, int64_t *rows) {
    obx__renew_ctx c;
    obx_result r = obx__renew_connect(w, stale);
    int i, k, ok = 1;
    c.w = w;
    c.owner = w->owner;
    c.lease_seconds = w->lease_seconds;
    c.rows = 0;
    if (r == OBX_OK) {
        for (k = 0; k < OBX__KEY_LISTS; k++) w->keys[k].len = 0;
        for (i = 0; i < n && ok; i++) ok = obx__msg_key_add(&w->hooks, w->side.d, w->keys, &ms[i]);
        for (k = 0; k < OBX__KEY_LISTS && ok; k++) ok = obx__list_end(&w->hooks, &w->keys[k], w->side.d);
        r = ok ? obx__unit(&w->side, obx__renew_unit, &c, "lease renewal")
               : obx__fail(&w->side_err, OBX_ERR_NO_MEMORY, "lease renewal", "out of memory");
    }
    *rows = c.rows;
    if (r != OBX_OK)
        obx__log(&w->hooks, OBX_LOG_WARN, w->side_id, "lease renewal failed: %s: %s"
                 OBX__WHY(" (handlers not started yet wait for a renewal that succeeds)"),
                 obx__result_str(r), w->side_err.message);
    else
        obx__log(&w->hooks, OBX_LOG_DEBUG, w->side_id, "renewed the leases of %lld of %d message(s)",
                 (long long)c.rows, n);
    return r;
}

/* One renewal from the thread's loop (mutex held on entry and exit). A
 * renewal that extended every message moves the start deadline to its own
 * lease; one that failed leaves it; one that found fewer messages than it
 * holds (a lease reaped, someone else's now) lets no further handler start. */
static void obx__renew_step(obx__renewer *w, int64_t now) {
    const obx_message *ms = w->ms;
    int n = w->n, stale = w->stale, held = w->n - w->settled;
    unsigned epoch = w->epoch;
    int64_t lease_ms = (int64_t)w->lease_seconds * 1000, rows = 0, margin, retry_ms;
    obx_result r;
    w->busy = 1;
    w->stale = 0;
    obx__mutex_unlock(&w->mutex);
    r = obx__renew_once(w, ms, n, stale, &rows);
    obx__mutex_lock(&w->mutex);
    w->busy = 0;
    margin = lease_ms / 5 < OBX__LEASE_MARGIN_MAX_MS ? lease_ms / 5 : OBX__LEASE_MARGIN_MAX_MS;
    if (r == OBX_OK && epoch == w->epoch && w->starting) {
        if (rows >= held) { /* every lease now runs from `now` (taken before the statement) */
            int64_t until = obx__sat_add(now, lease_ms - margin);
            int64_t cap = obx__sat_add(w->started_ms, w->max_ms);
            if (until > cap) until = cap;
            if (until > w->start_until_ms) w->start_until_ms = until;
        } else {
            obx__log(&w->hooks, OBX_LOG_WARN, w->side_id,
                     "lease renewal found %lld of %d message(s) still leased to this worker"
                     OBX__WHY(": a lease was lost (reaped?); the batch's handlers not started yet are not started"),
                     (long long)rows, held);
            w->start_until_ms = 0;
        }
    }
    /* A connect that found another thread connecting is tried again soon.
     * Any other failure is tried again after a tenth of the lease, not a
     * third: the third try of a third would come as the lease held runs
     * out, so two brief failures in a row (a connection the server had
     * dropped, then a refused connect) would hand the message to another
     * worker while its handler runs. */
    if (r == OBX_OK) retry_ms = lease_ms / 3;
    else if (w->side.connect_busy || lease_ms / 10 < 100) retry_ms = 100;
    else retry_ms = lease_ms / 10;
    w->next_ms = obx__sat_add(obx__mono_ms(&w->hooks), retry_ms);
    obx__cond_broadcast(&w->cond);
}

static void *obx__renew_main(void *arg) {
    obx__renewer *w = (obx__renewer *)arg;
    obx__mutex_lock(&w->mutex);
    while (!w->quit) {
        int64_t now = obx__mono_ms(&w->hooks);
        if (w->call_started_ms && !w->stall_logged && now - w->call_started_ms >= OBX__STALL_WARN_MS) {
            if (w->watch_file) /* SQLite waits for a lock in its busy handler, up to Timeout= */
                obx__log(&w->hooks, OBX_LOG_WARN, w->watch_id,
                         "still waiting for the database after %lld ms: the file is locked by another writer"
                         OBX__WHY(" (a long transaction in another connection or process?); the driver's Timeout= "
                                  "ends the wait with 'database is locked'"),
                         (long long)(now - w->call_started_ms));
            else
                obx__log(&w->hooks, OBX_LOG_WARN, w->watch_id,
                         "still waiting for the database after %lld ms"
                         OBX__WHY(" (a frozen or unreachable server? statement_timeout_seconds ends such a wait with an error)"),
                         (long long)(now - w->call_started_ms));
            w->stall_logged = 1;
        }
        if (w->active && now >= w->next_ms && now - w->started_ms >= w->max_ms) {
            obx__log(&w->hooks, OBX_LOG_WARN, w->store_id,
                     "handlers ran %lld ms, longer than max_handler_ms"
                     OBX__WHY(": leases are no longer renewed and the batch's messages may be delivered again"),
                     (long long)(now - w->started_ms));
            w->next_ms = INT64_MAX;
        } else if (w->active && now >= w->next_ms) {
            obx__renew_step(w, now);
        } else {
            /* Slices of at most 100 ms: the clock hook is read afresh each time. */
            obx__deadline deadline;
            int64_t ms = w->active ? w->next_ms - now : 100;
            if (ms > 100) ms = 100;
            obx__cond_deadline(&deadline, ms);
            obx__cond_timedwait(&w->cond, &w->mutex, &deadline);
        }
    }
    obx__mutex_unlock(&w->mutex);
    return NULL;
}

static obx__renewer *obx__renewer_create(const obx__hooks *h) {
    obx__renewer *w = (obx__renewer *)obx__alloc(h, sizeof *w);
    if (!w) return NULL;
    memset(w, 0, sizeof *w);
    w->hooks = *h;
    if (h->rng.user == &h->rng_state) { /* the default source: a state of its own */
        w->hooks.rng_state = obx__random(h);
        w->hooks.rng.user = &w->hooks.rng_state;
    }
    obx__mutex_init(&w->mutex);
    obx__cond_init(&w->cond);
    return w;
}

static void obx__renewer_destroy(obx__renewer *w) {
    obx__hooks h;
    int k;
    if (!w) return;
    if (w->started) {
        obx__mutex_lock(&w->mutex);
        w->quit = 1;
        obx__cond_broadcast(&w->cond);
        obx__mutex_unlock(&w->mutex);
        obx__thread_join(&w->thread);
    }
    obx__db_close(&w->side);
    for (k = 0; k < OBX__KEY_LISTS; k++) obx__buf_free(&w->hooks, &w->keys[k]);
    obx__free(&w->hooks, w->connstr);
    obx__free(&w->hooks, w->sql);
    obx__free(&w->hooks, w->store_id);
    obx__mutex_destroy(&w->mutex);
    obx__cond_destroy(&w->cond);
    h = w->hooks;
    obx__free(&h, w);
}

/* Whether a copy already holds `text` (NULL-safe); else replace it. 0: out of memory. */
static int obx__renew_keep(obx__renewer *w, char **copy, const char *text, int *changed) {
    char *fresh;
    if (*copy && text && strcmp(*copy, text) == 0) return 1;
    fresh = text ? obx__strdup(&w->hooks, text) : NULL;
    if (text && !fresh) return 0;
    obx__free(&w->hooks, *copy);
    *copy = fresh;
    *changed = 1;
    return 1;
}

/* Renew the leases of batch ms[0..n) of store s from now on (the
 * dispatcher's thread). Handlers may start until `start_until` (the
 * claim's lease less its margin), later only as renewals extend it.
 * Returns 1; 0 when there is no renewal (none, or the caller's
 * connection): then start_until stays the limit; -1 when it could not be
 * set up (out of memory, no thread): the batch must not run unrenewed. */
static int obx__renew_begin(obx__renewer *w, obx_store *s, const char *owner, const obx_message *ms,
                            int n, int lease_seconds, int64_t max_ms, int64_t start_until) {
    int changed = 0, ok;
    if (!w || n == 0) return 0;
    if (!s->db.own_connection || !s->db.connstr) {
        if (!w->warned++)
            obx__log(&w->hooks, OBX_LOG_WARN, s->store_id,
                     "leases are not renewed: the store uses the caller's connection"
                     OBX__WHY(" (a handler slower than the lease may run twice; it can call obx_lease_extend)"));
        return 0;
    }
    obx__mutex_lock(&w->mutex);
    if (!w->started)
        w->started = obx__thread_create(&w->thread, obx__renew_main, w) == 0;
    ok = w->started && obx__renew_keep(w, &w->connstr, s->db.connstr, &changed) &&
         obx__renew_keep(w, &w->sql, s->sql[OBX__Q_EXTEND], &changed) &&
         obx__renew_keep(w, &w->store_id, s->store_id, &changed);
    if (ok) {
        if (w->dialect != s->db.d->id || w->login_timeout_s != s->db.login_timeout_s ||
            w->statement_timeout_s != s->db.statement_timeout_s)
            changed = 1;
        w->dialect = s->db.d->id;
        w->login_timeout_s = s->db.login_timeout_s;
        w->statement_timeout_s = s->db.statement_timeout_s;
        w->stale |= changed;
        obx__copy(w->owner, sizeof w->owner, owner);
        w->ms = ms;
        w->n = n;
        w->settled = 0;
        w->starting = 1;
        w->epoch++;
        w->lease_seconds = lease_seconds;
        w->max_ms = max_ms;
        w->started_ms = obx__mono_ms(&w->hooks);
        w->start_until_ms = start_until;
        w->next_ms = obx__sat_add(w->started_ms, (int64_t)lease_seconds * 1000 / 3);
        w->active = 1;
        obx__cond_broadcast(&w->cond);
    } else {
        w->stale = 1; /* a copy may be missing */
    }
    obx__mutex_unlock(&w->mutex);
    return ok ? 1 : -1;
}

/* Until when (monotonic) a handler of the batch may start. */
static int64_t obx__renew_start_until(obx__renewer *w) {
    int64_t until;
    obx__mutex_lock(&w->mutex);
    until = w->start_until_ms;
    obx__mutex_unlock(&w->mutex);
    return until;
}

/* The messages renewed from now on are ms[0..n); `starting`: whether
 * handlers may still start (else the dispatcher settles, and a renewal
 * that finds fewer leases is no news). */
static void obx__renew_range(obx__renewer *w, const obx_message *ms, int n, int starting) {
    if (!w) return;
    obx__mutex_lock(&w->mutex);
    w->ms = ms;
    w->n = n;
    w->settled = 0;
    w->starting = starting;
    w->epoch++;
    obx__mutex_unlock(&w->mutex);
}

/* k messages of the batch are being settled in the middle of it (a
 * transactional handler's commit; -k: that commit failed, they are still
 * held). Said before the commit, so that a renewal on either side of it
 * finds at least the leases it expects; one in flight is not counted. */
static void obx__renew_settled(obx__renewer *w, int k) {
    if (!w) return;
    obx__mutex_lock(&w->mutex);
    w->settled += k;
    w->epoch++;
    obx__mutex_unlock(&w->mutex);
}

/* The dispatcher enters (on) or leaves a call into the database: a call
 * with no answer for OBX__STALL_WARN_MS is logged, so a frozen server is
 * never a silent block. Starts the thread when it is not running yet. */
static void obx__watch(obx__renewer *w, obx_store *s, int on) {
    if (!w) return;
    obx__mutex_lock(&w->mutex);
    if (!w->started) w->started = obx__thread_create(&w->thread, obx__renew_main, w) == 0;
    if (w->stall_logged && w->call_started_ms) /* the stall was said: so is its end, once */
        obx__log(&w->hooks, OBX_LOG_INFO, w->watch_id, "the database answered again after %lld ms",
                 (long long)(obx__mono_ms(&w->hooks) - w->call_started_ms));
    if (on) {
        obx__copy(w->watch_id, sizeof w->watch_id, s->store_id);
        w->watch_file = s->db.d && s->db.d->id == OBX_DIALECT_SQLITE;
    }
    w->call_started_ms = on ? obx__mono_ms(&w->hooks) : 0;
    w->stall_logged = 0;
    obx__mutex_unlock(&w->mutex);
}

/* The batch is settled: stop renewing, and wait out a renewal in flight
 * (the next claim reuses the memory the renewal reads). */
static void obx__renew_end(obx__renewer *w) {
    if (!w) return;
    obx__mutex_lock(&w->mutex);
    w->active = 0;
    w->ms = NULL;
    w->n = 0;
    while (w->busy) obx__cond_wait(&w->cond, &w->mutex);
    obx__mutex_unlock(&w->mutex);
}

#ifndef OBX_NO_MULTI_STORE
/* A store was closed (a provider's refresh): the renewal connection may
 * serve its database, which may be gone; close it (the dispatcher's
 * thread, between batches). */
static void obx__renew_forget(obx__renewer *w) {
    if (!w) return;
    obx__mutex_lock(&w->mutex);
    while (w->busy) obx__cond_wait(&w->cond, &w->mutex);
    obx__db_close(&w->side);
    memset(&w->side, 0, sizeof w->side);
    obx__mutex_unlock(&w->mutex);
}
#endif
#else
typedef struct obx__renewer obx__renewer; /* no threads: no renewal */
#define obx__renewer_create(h) ((obx__renewer *)NULL)
#define obx__renewer_destroy(w) ((void)(w))
#define obx__renew_begin(w, s, owner, ms, n, lease, max, until) ((void)(until), 0)
#define obx__renew_start_until(w) ((void)(w), (int64_t)0)
#define obx__renew_range(w, ms, n, starting) ((void)0)
#define obx__renew_settled(w, k) ((void)(w))
#define obx__renew_end(w) ((void)(w))
#define obx__renew_forget(w) ((void)(w))
#define obx__watch(w, s, on) ((void)(w))
#endif

/* >> dispatcher ------------------------------------------------------------------- */

/* Outcomes of the dispatcher's own beside a handler's obx_outcome. */
#define OBX__SKIPPED (-1)  /* left alone: its lease is about to end (or already settled) */
#define OBX__PENDING (-2)  /* not handled yet in this round */
#define OBX__HELD (-3)     /* not handed out: its topic is paused */
#define OBX__EXPIRED (-4)  /* not handed out: past its expires_ms when claimed */
#define OBX__SETTLED (-5)  /* settled in its transactional handler's transaction, or found
                              no longer ours there: nothing left to settle */
#define OBX__TX_TRIES 3    /* a transactional handler's runs for one message, conflicts included */

/* A topic paused by OBX_PAUSE: not handed out before until_ms (monotonic). */
typedef struct obx__pause {
    char *topic;
    int64_t until_ms;
    int64_t next_ms;             /* the length of its next pause, if paused again */
} obx__pause;

struct obx_dispatcher {
    obx_store *store;            /* single-store mode */
    obx_provider *provider;      /* or many */
    obx__entry single;           /* single-store mode's housekeeping schedule */
    const obx__hooks *hooks;
    obx_error *err;              /* the store's error in single-store mode, else own_err */
    obx_error own_err;           /* the dispatcher's own: a provider's stores come and go */
    char owner[37];
    int batch_size, lease_seconds, max_attempts;
    obx_backoff_fn backoff;
    void *backoff_user;
    int64_t reap_ms, cleanup_ms, retention_ms;
    obx_log_level message_log_level;
    obx__loop_timing timing;
    obx__loop loop;
    obx__routes routes;
    obx_selector selector;
    obx_strategy strategy;
    int empty_streak;
    int fail_streak;             /* rounds failed in a row, over a provider's stores */
    int carry;                   /* run() on one store: acks go with the next claim (obx__carry) */
    obx__renewer *renewer;       /* renews a batch's leases while it is handled; NULL: none */
    unsigned closes_seen;        /* the provider's store closes the renewer has been told of */
    int64_t max_handler_ms;
    int *acked;                  /* indexes of messages handled with success */
    int *failures;               /* indexes of messages that did not succeed */
    int *outcomes;               /* an obx_outcome, or OBX__SKIPPED / _PENDING / _HELD / _EXPIRED */
    char (*errors)[OBX__HANDLER_ERROR_MAX];
    const obx_message **group;   /* a batch handler's messages (allocated by on_batch) */
    int *group_index;            /* their indexes in the claim */
    obx_batch_result *results;   /* and their outcomes */
    obx__pause *pauses;          /* paused topics (none: no cost per message) */
    int pause_count, pause_cap;
    int64_t pause_ms, pause_max_ms;
    char wake_path[OBX__WAKE_PATH_MAX + 1]; /* empty: none */
    int wake_fd;                 /* listening while run() runs, else -1 */
#if OBX__WAKE_SOCKET && !defined(OBX_NO_THREADS)
    obx__thread_t wake_thread;
    struct stat wake_at;         /* the socket file it bound: the one it may remove */
#endif
};

static int64_t obx__default_backoff(int attempts, void *user) {
    (void)user;
    return obx__backoff_default_ms(attempts);
}

/* The numbers of a dispatcher description and their ranges (0 is always
 * allowed: the default), so that a refusal names the field. A range is an
 * index into obx__number_max: a row of 8 bytes instead of 16 (armhf). */
static const int64_t obx__number_max[] = {INT64_MAX, INT_MAX, OBX_BATCH_MAX, OBX_LEASE_MAX_SECONDS,
                                          OBX_RETENTION_MAX_MS, OBX_DELAY_MAX_MS};
static const struct {
    const char *name;
    unsigned short offset;
    unsigned char is_int;        /* an int; else an int64_t */
    unsigned char max;           /* obx__number_max[max] */
} obx__dispatcher_numbers[] = {
    {"batch_size", offsetof(obx_dispatcher_desc, batch_size), 1, 2},
    {"lease_seconds", offsetof(obx_dispatcher_desc, lease_seconds), 1, 3},
    {"max_attempts", offsetof(obx_dispatcher_desc, max_attempts), 1, 1},
    {"poll_interval_ms", offsetof(obx_dispatcher_desc, poll_interval_ms), 0, 0},
    {"idle_max_ms", offsetof(obx_dispatcher_desc, idle_max_ms), 0, 0},
    {"reap_interval_ms", offsetof(obx_dispatcher_desc, reap_interval_ms), 0, 0},
    {"startup_delay_ms", offsetof(obx_dispatcher_desc, startup_delay_ms), 0, 0},
    {"error_delay_ms", offsetof(obx_dispatcher_desc, error_delay_ms), 0, 0},
    {"cleanup_interval_ms", offsetof(obx_dispatcher_desc, cleanup_interval_ms), 0, 0},
    {"cleanup_retention_ms", offsetof(obx_dispatcher_desc, cleanup_retention_ms), 0, 4},
    {"max_handler_ms", offsetof(obx_dispatcher_desc, max_handler_ms), 0, 0},
    {"pause_ms", offsetof(obx_dispatcher_desc, pause_ms), 0, 5},
    {"pause_max_ms", offsetof(obx_dispatcher_desc, pause_max_ms), 0, 5}};

/* The checks of a dispatcher description, reported to `err`. */
static obx_result obx__dispatcher_desc_check(const obx_dispatcher_desc *desc, obx_error *err) {
    char where[64];
    const char *name = NULL;
    int64_t value = 0, max = 0;
    size_t i;
    if (desc->owner_token && (!obx__uuid_is_valid(desc->owner_token) || desc->owner_token[14] == '0'))
        return obx__fail(err, OBX_ERR_INVALID_ARG, "obx_dispatcher_create: owner_token",
                         "owner_token must be a UUID, not the empty one nor of version 0 (see obx_claim)");
    for (i = 0; !name && i < sizeof obx__dispatcher_numbers / sizeof obx__dispatcher_numbers[0]; i++) {
        const char *at = (const char *)desc + obx__dispatcher_numbers[i].offset;
        int v;
        if (obx__dispatcher_numbers[i].is_int) {
            memcpy(&v, at, sizeof v);
            value = v;
        } else {
            memcpy(&value, at, sizeof value);
        }
        max = obx__number_max[obx__dispatcher_numbers[i].max];
        if (value < 0 || value > max) name = obx__dispatcher_numbers[i].name;
    }
    if (!name && ((int)desc->message_log_level < 0 || (int)desc->message_log_level > (int)OBX_LOG_OFF))
        name = "message_log_level", value = (int)desc->message_log_level, max = OBX_LOG_OFF;
    if (!name && (int)desc->selection != OBX_SELECT_ROUND_ROBIN && (int)desc->selection != OBX_SELECT_DRAIN_FIRST)
        name = "selection", value = (int)desc->selection, max = OBX_SELECT_DRAIN_FIRST;
    if (!name) return OBX_OK;
    snprintf(where, sizeof where, "obx_dispatcher_create: %s", name);
    if (max >= INT_MAX)
        return obx__fail(err, OBX_ERR_OUT_OF_RANGE, where, "%s must not be negative (0: the default), got %lld", name,
                         (long long)value);
    return obx__fail(err, OBX_ERR_OUT_OF_RANGE, where, "%s must be 0..%lld (0: the default), got %lld", name,
                     (long long)max, (long long)value);
}

/* Defaults for every zero field (one place; see the desc's field docs). */
/* The defaults, in one place: a copy of *desc with every zero field set to
 * the value the dispatcher will use. */
OBX_API obx_dispatcher_desc obx_dispatcher_desc_defaults(const obx_dispatcher_desc *desc) {
    obx_dispatcher_desc r;
    if (desc) r = *desc;
    else memset(&r, 0, sizeof r);
    if (!r.batch_size) r.batch_size = OBX__BATCH_DEFAULT;
    if (!r.lease_seconds) r.lease_seconds = OBX__LEASE_DEFAULT_SECONDS;
    if (!r.max_attempts) r.max_attempts = OBX__MAX_ATTEMPTS_DEFAULT;
    if (!r.backoff) r.backoff = obx__default_backoff;
    if (!r.poll_interval_ms) r.poll_interval_ms = OBX__POLL_DEFAULT_MS;
    if (!r.idle_max_ms) r.idle_max_ms = OBX__IDLE_MAX_DEFAULT_MS;
    if (r.idle_max_ms < r.poll_interval_ms) r.idle_max_ms = r.poll_interval_ms;
    if (!r.error_delay_ms) r.error_delay_ms = OBX__ERROR_DELAY_DEFAULT_MS;
    if (!r.reap_interval_ms) r.reap_interval_ms = OBX__REAP_DEFAULT_MS;
    if (!r.cleanup_retention_ms) r.cleanup_retention_ms = OBX_DEFAULT_RETENTION_MS;
    if (!r.max_handler_ms) r.max_handler_ms = OBX__MAX_HANDLER_DEFAULT_MS;
    if (!r.message_log_level) r.message_log_level = r.store ? r.store->message_log_level : OBX_LOG_DEBUG;
    if (!r.pause_ms) r.pause_ms = OBX__PAUSE_DEFAULT_MS;
    if (!r.pause_max_ms) r.pause_max_ms = OBX__PAUSE_MAX_DEFAULT_MS;
    if (r.pause_max_ms < r.pause_ms) r.pause_max_ms = r.pause_ms;
    return r;
}

static void obx__dispatcher_defaults(obx_dispatcher *d, const obx_dispatcher_desc *given) {
    obx_dispatcher_desc desc = obx_dispatcher_desc_defaults(given);
    d->batch_size = desc.batch_size;
    d->lease_seconds = desc.lease_seconds;
    d->max_attempts = desc.max_attempts;
    d->backoff = desc.backoff;
    d->backoff_user = desc.backoff_user;
    d->timing.poll_ms = desc.poll_interval_ms;
    d->timing.idle_max_ms = desc.idle_max_ms;
    d->timing.startup_ms = desc.startup_delay_ms;
    d->timing.error_ms = desc.error_delay_ms;
    d->reap_ms = desc.reap_interval_ms;
    d->cleanup_ms = desc.cleanup_interval_ms;
    d->retention_ms = desc.cleanup_retention_ms;
    d->strategy = desc.strategy;
    d->max_handler_ms = desc.max_handler_ms;
    d->message_log_level = desc.message_log_level;
    d->pause_ms = desc.pause_ms;
    d->pause_max_ms = desc.pause_max_ms;
}

OBX_API obx_result obx_dispatcher_create(const obx_dispatcher_desc *desc, obx_dispatcher **out) {
    obx_dispatcher *d;
    const obx__hooks *h;
    obx_error *err;
    size_t b;
    if (!out) return OBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc || (!desc->store && !desc->provider)) return OBX_ERR_INVALID_ARG; /* nowhere to say why */
    if (desc->store && desc->provider)
        return obx__fail(&desc->store->err, OBX_ERR_INVALID_ARG, "obx_dispatcher_create: provider",
                         "give a store or a provider, not both");
#ifdef OBX_NO_MULTI_STORE
    if (desc->provider) return OBX_ERR_UNSUPPORTED; /* no provider can exist in this build */
    h = &desc->store->hooks;
    err = &desc->store->err;
#else
    h = desc->store ? &desc->store->hooks : &desc->provider->hooks;
    err = desc->store ? &desc->store->err : &desc->provider->err;
#endif
    if (obx__dispatcher_desc_check(desc, err) != OBX_OK) return err->result;
    if (obx__wake_path_check(err, "obx_dispatcher_create: wake_path", desc->wake_path) != OBX_OK)
        return err->result;
    if (!OBX__DEFAULT_CLOCK_SLEEPS && h->clock.sleep_ms == obx__default_sleep_ms)
        return obx__fail(err, OBX_ERR_INVALID_ARG, "obx_dispatcher_create: hooks.clock",
                         "built with OBX_NO_POSIX_CLOCK"
                         OBX__WHY(", the default clock cannot sleep: give the store a clock hook with sleep_ms (a "
                                  "dispatcher would poll without pause)"));
    d = (obx_dispatcher *)obx__alloc(h, sizeof *d);
    if (!d) return OBX_ERR_NO_MEMORY;
    memset(d, 0, sizeof *d);
    obx__loop_init(&d->loop, h, desc->stop_flag);
    d->store = desc->store;
    d->provider = desc->provider;
    d->hooks = h;
    d->err = desc->store ? err : &d->own_err;
    d->wake_fd = -1;
    if (desc->wake_path) obx__copy(d->wake_path, sizeof d->wake_path, desc->wake_path);
    if (desc->owner_token) {
        obx__lower_uuid(desc->owner_token, d->owner);
    } else {
        obx_uuid_state fresh = {0, 0};
        obx__uuid_v7(&fresh, obx__now_ms(h), obx__random(h), obx__random(h), d->owner);
    }
    obx__dispatcher_defaults(d, desc);
    obx__selector_init(&d->selector, desc->selection, 0);
    b = (size_t)d->batch_size;
    d->acked = (int *)obx__alloc(h, sizeof *d->acked * b);
    d->failures = (int *)obx__alloc(h, sizeof *d->failures * b);
    d->outcomes = (int *)obx__alloc(h, sizeof *d->outcomes * b);
    d->errors = (char (*)[OBX__HANDLER_ERROR_MAX])obx__alloc(h, OBX__HANDLER_ERROR_MAX * b);
    d->renewer = desc->no_lease_renewal ? NULL : obx__renewer_create(h);
    if (!d->acked || !d->failures || !d->outcomes || !d->errors ||
        (!d->renewer && !desc->no_lease_renewal && OBX__RENEWAL)) {
        obx_dispatcher_destroy(d);
        return OBX_ERR_NO_MEMORY;
    }
    *out = d;
    return OBX_OK;
}

OBX_API void obx_dispatcher_destroy(obx_dispatcher *d) {
    const obx__hooks *h;
    if (!d) return;
    h = d->hooks;
    obx__renewer_destroy(d->renewer);
    obx__routes_free(h, &d->routes);
    obx__free(h, d->acked);
    obx__free(h, d->failures);
    obx__free(h, d->outcomes);
    obx__free(h, d->errors);
    obx__free(h, d->group);
    obx__free(h, d->group_index);
    obx__free(h, d->results);
    while (d->pause_count > 0) obx__free(h, d->pauses[--d->pause_count].topic);
    obx__free(h, d->pauses);
    obx__loop_destroy(&d->loop);
    obx__free(h, d);
}

OBX_API const obx_error *obx_dispatcher_last_error(const obx_dispatcher *d) {
    return d ? d->err : obx__null_error();
}

/* Register a route of either kind, refusing a topic that already has a
 * handler of the other kind (or a second batch handler). */
static obx_result obx__dispatcher_route(obx_dispatcher *d, const char *fn, const char *topic,
                                       obx__any_fn handler, void *user, int batch) {
    static const char *const kinds[4] = {"per-message", "batch", "transactional", "transactional batch"};
    char where[64];
    const obx__route *had;
    obx_result r = obx__check_text(d->err, fn, "topic", topic, OBX_TOPIC_MAX);
    if (r != OBX_OK) return r;
    snprintf(where, sizeof where, "%s: handler", fn);
    if (!handler) return obx__fail(d->err, OBX_ERR_INVALID_ARG, where, "must not be NULL");
    snprintf(where, sizeof where, "%s: topic", fn);
    had = obx__routes_find(&d->routes, topic, OBX__ROUTE_BATCH);
    if (!had) had = obx__routes_find(&d->routes, topic, OBX__ROUTE_BATCH_TX);
    if (!had && batch != OBX__ROUTE_ONE) had = obx__routes_find(&d->routes, topic, OBX__ROUTE_ONE);
    if (!had) had = obx__routes_find(&d->routes, topic, OBX__ROUTE_TX);
    if (had)
        return obx__fail(d->err, OBX_ERR_INVALID_ARG, where, "topic %s already has a %s handler"
                         OBX__WHY(": a topic has one batch handler, one transactional handler or per-message "
                                  "handlers"), topic, kinds[had->batch]);
    if (obx__routes_add(d->hooks, &d->routes, topic, handler, user, batch) != OBX_OK)
        return obx__fail(d->err, OBX_ERR_NO_MEMORY, fn, "out of memory");
    return OBX_OK;
}

OBX_API obx_result obx_dispatcher_on(obx_dispatcher *d, const char *topic, obx_handler handler,
                                     void *user) {
    if (!d) return OBX_ERR_INVALID_ARG;
    return obx__dispatcher_route(d, "obx_dispatcher_on", topic, (obx__any_fn)handler, user, 0);
}

/* Room for a batch handler's group, allocated by the first batch route. */
static obx_result obx__group_room(obx_dispatcher *d, const char *fn) {
    size_t b = (size_t)d->batch_size;
    if (!d->group) { /* only dispatchers with batch handlers need room for a group */
        d->group = (const obx_message **)obx__alloc(d->hooks, sizeof *d->group * b);
        d->group_index = (int *)obx__alloc(d->hooks, sizeof *d->group_index * b);
        d->results = (obx_batch_result *)obx__alloc(d->hooks, sizeof *d->results * b);
    }
    if (!d->group || !d->group_index || !d->results) {
        obx__free(d->hooks, d->group);
        obx__free(d->hooks, d->group_index);
        obx__free(d->hooks, d->results);
        d->group = NULL;
        d->group_index = NULL;
        d->results = NULL;
        return obx__fail(d->err, OBX_ERR_NO_MEMORY, fn, "out of memory");
    }
    return OBX_OK;
}

OBX_API obx_result obx_dispatcher_on_batch(obx_dispatcher *d, const char *topic,
                                           obx_batch_handler handler, void *user) {
    if (!d) return OBX_ERR_INVALID_ARG;
    if (obx__group_room(d, "obx_dispatcher_on_batch") != OBX_OK) return OBX_ERR_NO_MEMORY;
    return obx__dispatcher_route(d, "obx_dispatcher_on_batch", topic, (obx__any_fn)handler, user, 1);
}

OBX_API obx_result obx_dispatcher_on_batch_tx(obx_dispatcher *d, const char *topic,
                                              obx_batch_tx_handler handler, void *user) {
    if (!d) return OBX_ERR_INVALID_ARG;
    if (obx__group_room(d, "obx_dispatcher_on_batch_tx") != OBX_OK) return OBX_ERR_NO_MEMORY;
    return obx__dispatcher_route(d, "obx_dispatcher_on_batch_tx", topic, (obx__any_fn)handler, user,
                                 OBX__ROUTE_BATCH_TX);
}

OBX_API obx_result obx_dispatcher_on_tx(obx_dispatcher *d, const char *topic, obx_tx_handler handler,
                                        void *user) {
    if (!d) return OBX_ERR_INVALID_ARG;
    return obx__dispatcher_route(d, "obx_dispatcher_on_tx", topic, (obx__any_fn)handler, user, OBX__ROUTE_TX);
}

OBX_API int obx_tx_conflict(const obx_store *store, const char *sqlstate, long native_error) {
    if (!store || !store->db.d) return 0;
    return obx__classify(store->db.d, sqlstate ? sqlstate : "", native_error) == OBX__FAULT_TRANSIENT;
}

static int obx__outcome_valid(int o) {
    return o == OBX_DONE || o == OBX_RETRY || o == OBX_DEAD || o == OBX_WAIT || o == OBX_PAUSE;
}

/* Run every handler for one message; the first that does not succeed decides. */
static obx_outcome obx__handle(obx_dispatcher *d, const obx_message *m, char *error, int *matched) {
    obx_outcome outcome = OBX_DONE;
    const obx__route *r;
    int cursor = 0;
    *matched = 0;
    while (outcome == OBX_DONE && (r = obx__routes_next(&d->routes, m->topic, &cursor)) != NULL) {
        (*matched)++;
        memset(error, 0, OBX__HANDLER_ERROR_MAX);
        outcome = ((obx_handler)r->fn)(m, error, OBX__HANDLER_ERROR_MAX, r->user);
        error[OBX__HANDLER_ERROR_MAX - 1] = '\0';
        if (!obx__outcome_valid((int)outcome)) {
            snprintf(error, OBX__HANDLER_ERROR_MAX, "handler returned %d, not an obx_outcome",
                     (int)outcome);
            outcome = OBX_DEAD;
        }
    }
    return outcome;
}

/* >> dispatcher: pauses (OBX_PAUSE) ------------------------------------------------- */

static obx__pause *obx__pause_find(obx_dispatcher *d, const char *topic) {
    int i;
    for (i = 0; i < d->pause_count; i++)
        if (strcmp(d->pauses[i].topic, topic) == 0) return &d->pauses[i];
    return NULL;
}

/* How long `topic` stays paused from `now` (monotonic); 0: not paused. */
static int64_t obx__pause_left(obx_dispatcher *d, const char *topic, int64_t now) {
    const obx__pause *p = d->pause_count ? obx__pause_find(d, topic) : NULL;
    return p && p->until_ms > now ? p->until_ms - now : 0;
}

/* A handler said the downstream of `topic` is unavailable: pause the topic
 * (once per round: a pause in force is not lengthened by its own batch),
 * each pause in a row twice the last, up to pause_max_ms. */
static void obx__pause_begin(obx_dispatcher *d, obx_store *s, const char *topic, const char *why) {
    int64_t now = obx__mono_ms(&s->hooks), length;
    obx__pause *p = obx__pause_find(d, topic);
    char quoted[OBX__KV_CAP];
    if (!p && d->pause_count == d->pause_cap) {
        int cap = d->pause_cap ? d->pause_cap * 2 : 4;
        obx__pause *grown = (obx__pause *)obx__realloc(d->hooks, d->pauses, sizeof *grown * (size_t)cap);
        if (!grown) return; /* unrecorded: its messages still go back for pause_ms */
        d->pauses = grown;
        d->pause_cap = cap;
    }
    if (!p) {
        p = &d->pauses[d->pause_count];
        p->topic = obx__strdup(d->hooks, topic);
        if (!p->topic) return;
        p->until_ms = 0;
        p->next_ms = d->pause_ms;
        d->pause_count++;
    }
    if (p->until_ms > now) return;
    length = p->next_ms;
    /* An outage is logged as it starts, then quietly once the pause is capped. */
    obx__log(&s->hooks, !p->until_ms ? OBX_LOG_WARN : length < d->pause_max_ms ? OBX_LOG_INFO : OBX_LOG_DEBUG,
             s->store_id, "topic %s paused for %lld ms: %s", obx__kv(quoted, topic), (long long)length,
             why[0] ? why : "handler returned OBX_PAUSE");
    p->until_ms = obx__sat_add(now, length);
    p->next_ms = length > d->pause_max_ms / 2 ? d->pause_max_ms : length * 2;
}

/* The first success of a paused topic ends its pauses. */
static void obx__pause_end(obx_dispatcher *d, obx_store *s, const char *topic) {
    obx__pause *p = obx__pause_find(d, topic);
    char quoted[OBX__KV_CAP];
    if (!p) return;
    obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "topic %s flows again", obx__kv(quoted, topic));
    obx__free(d->hooks, p->topic);
    *p = d->pauses[--d->pause_count];
}

/* Put back every paused message (the handler's OBX_PAUSE, or held because
 * its topic is paused), one statement per topic: no attempt used, due
 * when the pause ends. */
static obx_result obx__settle_paused(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n,
                                     obx_run_stats *st) {
    char reason[OBX__HANDLER_ERROR_MAX + 16];
    obx_result r = OBX_OK;
    int i, j, k;
    for (i = 0; i < n && r == OBX_OK; i++) {
        const char *why = NULL;
        int64_t delay;
        if (d->outcomes[i] != OBX_PAUSE && d->outcomes[i] != OBX__HELD) continue;
        for (j = i, k = 0; j < n; j++)
            if ((d->outcomes[j] == OBX_PAUSE || d->outcomes[j] == OBX__HELD) &&
                strcmp(ms[j].topic, ms[i].topic) == 0) {
                if (!why && d->outcomes[j] == OBX_PAUSE && d->errors[j][0]) why = d->errors[j];
                d->failures[k++] = j;
                d->outcomes[j] = OBX__SKIPPED;
            }
        snprintf(reason, sizeof reason, "paused: %s", why ? why : "downstream unavailable");
        delay = obx__pause_left(d, ms[i].topic, obx__mono_ms(&s->hooks));
        if (delay <= 0) delay = d->pause_ms;
        r = obx__settle_messages(s, OBX__SETTLE_ABANDON, ms, d->failures, k, reason,
                                 delay < OBX__DELAY_MIN_MS ? OBX__DELAY_MIN_MS : delay, 0, NULL);
        if (r == OBX_OK) st->paused += k;
    }
    return r;
}

/* >> dispatcher: handling a batch ----------------------------------------------------- */

/* After a message's handler: log a failure, pause or resume its topic. A
 * failure that will be tried again is an ERROR with the message's id and
 * the handler's error (OBX-105, a MUST of the contract); one that makes the
 * message dead is said once, at ERROR, by obx__settle_failure. */
static void obx__handled(obx_dispatcher *d, obx_store *s, const obx_message *m, int i) {
    int outcome = d->outcomes[i];
    const char *error = d->errors[i];
    char name[OBX__MSG_NAME_MAX], topic[OBX__KV_CAP];
    obx__utf8_repair(d->errors[i]);
    if (outcome == OBX_PAUSE) obx__pause_begin(d, s, m->topic, error);
    else if (outcome == OBX_DONE && d->pause_count) obx__pause_end(d, s, m->topic);
    if (outcome != OBX_RETRY || OBX__MSG_ATTEMPTS(m) + 1 >= d->max_attempts) return;
    obx__msg_name(m, name, sizeof name);
    obx__log(&s->hooks, OBX_LOG_ERROR, s->store_id, "handler failed for %s topic=%s attempt %d: %s", name,
             obx__kv(topic, m->topic), OBX__MSG_ATTEMPTS(m) + 1, error[0] ? error : "OBX_RETRY");
}

/* One message through its per-message handlers. */
static void obx__handle_one(obx_dispatcher *d, obx_store *s, const obx_message *m, int i,
                            obx_run_stats *st) {
    char name[OBX__MSG_NAME_MAX], topic[OBX__KV_CAP];
    char *error = d->errors[i];
    int matched = 0;
    int64_t started;
    obx_outcome outcome;
    /* The line's name and topic only when it is logged: formatting them
     * cost as much as a handler call of the bench. */
    if (obx__log_enabled(&s->hooks, d->message_log_level)) {
        obx__msg_name(m, name, sizeof name);
        obx__log(&s->hooks, d->message_log_level, s->store_id, "handling %s topic=%s attempt %d", name,
                 obx__kv(topic, m->topic), OBX__MSG_ATTEMPTS(m) + 1);
    }
    started = obx__mono_us(&s->hooks);
    outcome = obx__handle(d, m, error, &matched);
    if (matched) obx__hist_record(s, m->topic, obx__mono_us(&s->hooks) - started);
    d->outcomes[i] = (int)outcome;
    if (!matched) {
        obx__msg_name(m, name, sizeof name);
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id,
                 "no handler for topic %s (message %s)" OBX__WHY(": retrying later"), obx__kv(topic, m->topic), name);
        snprintf(error, OBX__HANDLER_ERROR_MAX, "no handler for topic %s", m->topic);
        d->outcomes[i] = (int)OBX_WAIT;
        st->no_handler++;
    }
    obx__handled(d, s, m, i);
}

/* Every unhandled message of ms[first]'s topic through one batch handler call. */
static void obx__handle_group(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n,
                              int first, const obx__route *route) {
    char name[OBX__MSG_NAME_MAX], topic[OBX__KV_CAP];
    int j, k = 0;
    for (j = first; j < n; j++) {
        if (d->outcomes[j] != OBX__PENDING || strcmp(ms[j].topic, ms[first].topic) != 0) continue;
        if (obx__log_enabled(&s->hooks, d->message_log_level)) { /* as obx__handle_one */
            obx__msg_name(&ms[j], name, sizeof name);
            obx__log(&s->hooks, d->message_log_level, s->store_id, "handling %s topic=%s attempt %d (batch)",
                     name, obx__kv(topic, ms[j].topic), OBX__MSG_ATTEMPTS(&ms[j]) + 1);
        }
        d->group[k] = &ms[j];
        d->group_index[k] = j;
        d->results[k].outcome = OBX_RETRY;
        memset(d->results[k].error, 0, sizeof d->results[k].error);
        k++;
    }
    {
        int64_t started = obx__mono_us(&s->hooks); /* one run of the histogram: the whole call */
        ((obx_batch_handler)route->fn)(d->group, d->results, k, route->user);
        obx__hist_record(s, ms[first].topic, obx__mono_us(&s->hooks) - started);
    }
    for (j = 0; j < k; j++) {
        int i = d->group_index[j], outcome = (int)d->results[j].outcome;
        memcpy(d->errors[i], d->results[j].error, OBX__HANDLER_ERROR_MAX);
        d->errors[i][OBX__HANDLER_ERROR_MAX - 1] = '\0';
        if (!obx__outcome_valid(outcome)) {
            snprintf(d->errors[i], OBX__HANDLER_ERROR_MAX, "batch handler set %d, not an obx_outcome",
                     outcome);
            outcome = OBX_DEAD;
        }
        d->outcomes[i] = outcome;
        obx__handled(d, s, &ms[i], i);
    }
}

/* >> dispatcher: transactional handlers -------------------------------------------- */

/* A transactional handler's transaction (obx_dispatcher_on_tx,
 * obx_dispatcher_on_batch_tx) on the store's own connection: the store's
 * calls made while it is open join it (db->callers_tx: see obx__unit_run),
 * its ack included. *begun: whether there is one to roll back. The
 * dispatcher's own calls here and in obx__tx_end are watched for a stall
 * (obx__watch) as its settles are; the handler's run between is not. */
static obx_result obx__tx_open(obx_dispatcher *d, obx_store *s, int *begun) {
    obx_result r;
    obx__watch(d->renewer, s, 1);
    r = obx__db_ensure(&s->db);
    if (r == OBX_OK) *begun = (r = obx__begin_handler(&s->db)) == OBX_OK || s->db.in_tx;
    if (r == OBX_OK) s->db.callers_tx = 1;
    obx__watch(d->renewer, s, 0);
    return r;
}

/* End it. With `ack`, the k messages ms[which[..]] are acked in it (the
 * ack checks the owner token: *changed says how many were still ours) and
 * it commits when all were. Otherwise, or when that fails (*r), it is
 * rolled back. Returns 1 when committed: the messages are settled. The
 * DEBUG lines before and after the commit mark the points a crash test
 * stops at. */
static int obx__tx_end(obx_dispatcher *d, obx_store *s, const obx_message *ms, const int *which, int k, int ack,
                       int begun, const char *what, obx_result *r, int64_t *changed, obx_run_stats *st) {
    int j;
    obx__watch(d->renewer, s, 1);
    if (ack) *r = obx__settle_messages(s, OBX__SETTLE_ACK, ms, which, k, NULL, 0, 0, changed);
    s->db.callers_tx = 0;
    if (ack && *r == OBX_OK && *changed == k) {
        obx__log(&s->hooks, OBX_LOG_DEBUG, s->store_id, "%s: acked in the handler's transaction, committing", what);
        obx__renew_settled(d->renewer, k);
        *r = obx__commit(&s->db);
        if (*r != OBX_OK) obx__renew_settled(d->renewer, -k);
        if (*r == OBX_OK) {
            obx__watch(d->renewer, s, 0);
            obx__log(&s->hooks, OBX_LOG_DEBUG, s->store_id, "%s: handler's transaction committed", what);
            if (s->err.result != OBX_OK) obx__error_clear(&s->err);
            for (j = 0; j < k; j++) d->outcomes[which[j]] = OBX__SETTLED;
            obx__count(s, OBX_METRIC_DISPATCHED, k);
            st->done += k;
            if (d->pause_count) obx__pause_end(d, s, ms[which[0]].topic);
            return 1;
        }
    }
    if (begun) obx__rollback(&s->db);
    obx__watch(d->renewer, s, 0);
    return 0;
}

/* Whether a rolled-back run was a conflict: the handler said so
 * (`said`), or the ack or commit met a deadlock, serialization failure
 * or busy database on a live connection (its text to `why`). */
static int obx__tx_conflicted(obx_store *s, obx_result r, int said, char *why) {
    if (!said && !(r == OBX_ERR_DB_TRANSIENT && s->db.fault == OBX__FAULT_TRANSIENT && !s->db.lost)) return 0;
    if (r != OBX_OK) snprintf(why, OBX__HANDLER_ERROR_MAX, "%.200s", s->err.message);
    obx__error_clear(&s->err);
    return 1;
}

/* After a conflict: whether to run the handler again (OBX__TX_TRIES runs
 * in all, while the lease has time: `w`/`deadline` as in
 * obx__handle_batch), after a short jittered pause. */
static int obx__tx_again(obx_store *s, obx__renewer *w, int64_t deadline, int tries, const char *what,
                         const char *why) {
    obx_backoff_policy pause = {20, 500, 0.5, 1.5};
    if (tries >= OBX__TX_TRIES || obx__mono_ms(&s->hooks) >= (w ? obx__renew_start_until(w) : deadline)) return 0;
    obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "%s: handler's transaction conflicted (%s), running it again "
             "(%d of %d)", what, why[0] ? why : "OBX_CONFLICT", tries + 1, OBX__TX_TRIES);
    obx__sleep_ms(&s->hooks, obx__backoff_jitter_ms(&pause, tries, obx__random(&s->hooks)));
    return 1;
}

/* "message <name>" of m for a log line, formed on first use only (what[0]
 * is '\0' until then), as obx__handle_one forms its name: formatting it
 * costs as much as a fast handler's call. */
static const char *obx__tx_what(const obx_message *m, char *what, size_t cap) {
    char name[OBX__MSG_NAME_MAX];
    if (!what[0]) {
        obx__msg_name(m, name, sizeof name);
        snprintf(what, cap, "message %s", name);
    }
    return what;
}

/* One message through its transactional handler: its writes and its ack
 * in one transaction. A lease lost at the ack rolls everything back
 * (counted, no attempt used); any other outcome rolls back first and is
 * settled with the batch as any handler's; a conflict runs it again. */
static void obx__handle_tx(obx_dispatcher *d, obx_store *s, const obx_message *ms, int i, const obx__route *route,
                           obx__renewer *w, int64_t deadline, obx_run_stats *st) {
    const obx_message *m = &ms[i];
    char what[OBX__MSG_NAME_MAX + 16] = "", topic[OBX__KV_CAP];
    char *error = d->errors[i];
    int tries, outcome = OBX_RETRY;
    /* The name only when a line will say it (DEBUG: obx__tx_end's lines too). */
    if (obx__log_enabled(&s->hooks, d->message_log_level) || obx__log_enabled(&s->hooks, OBX_LOG_DEBUG))
        obx__log(&s->hooks, d->message_log_level, s->store_id, "handling %s topic=%s attempt %d (transactional)",
                 obx__tx_what(m, what, sizeof what) + strlen("message "), obx__kv(topic, m->topic),
                 OBX__MSG_ATTEMPTS(m) + 1);
    for (tries = 1;; tries++) {
        int64_t changed = -1, started;
        int begun = 0;
        obx_result r = obx__tx_open(d, s, &begun);
        obx_outcome said;
        outcome = OBX_RETRY;
        memset(error, 0, OBX__HANDLER_ERROR_MAX);
        if (r == OBX_OK) {
            started = obx__mono_us(&s->hooks);
            said = ((obx_tx_handler)route->fn)(m, (void *)s->db.dbc, error, OBX__HANDLER_ERROR_MAX, route->user);
            obx__hist_record(s, m->topic, obx__mono_us(&s->hooks) - started);
            error[OBX__HANDLER_ERROR_MAX - 1] = '\0';
            outcome = (int)said;
            if (!obx__outcome_valid(outcome) && outcome != OBX_CONFLICT) {
                snprintf(error, OBX__HANDLER_ERROR_MAX, "handler returned %d, not an obx_outcome", outcome);
                outcome = OBX_DEAD;
            }
        }
        if (obx__tx_end(d, s, ms, &i, 1, r == OBX_OK && outcome == OBX_DONE, begun, what, &r, &changed, st)) return;
        if (outcome == OBX_DONE && r == OBX_OK && changed == 0) {
            obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "%s: no longer leased to this worker at its ack"
                     OBX__WHY(" (lease expired and reaped or claimed elsewhere)") "; its handler's transaction was "
                     "rolled back", obx__tx_what(m, what, sizeof what));
            d->outcomes[i] = OBX__SETTLED;
            st->lease_lost++;
            return;
        }
        if (!obx__tx_conflicted(s, r, outcome == OBX_CONFLICT, error)) {
            if (r != OBX_OK) { /* the database failed the dispatcher's part: retried with its reason */
                snprintf(error, OBX__HANDLER_ERROR_MAX, "handler's transaction: %.200s", s->err.message);
                outcome = s->err.connection_lost ? OBX_WAIT : OBX_RETRY; /* a lost connection is no try */
            }
            break;
        }
        st->conflicts++;
        if (obx__tx_again(s, w, deadline, tries, obx__tx_what(m, what, sizeof what), error)) continue;
        if (!error[0]) snprintf(error, OBX__HANDLER_ERROR_MAX, "transaction conflict");
        outcome = OBX_WAIT; /* back after the backoff, no attempt used */
        break;
    }
    d->outcomes[i] = outcome;
    obx__handled(d, s, m, i);
}

/* The pending messages of ms[first]'s topic into d->group; their count. */
static int obx__group_collect(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n, int first) {
    char name[OBX__MSG_NAME_MAX], topic[OBX__KV_CAP];
    int j, k = 0;
    for (j = first; j < n; j++) {
        if (d->outcomes[j] != OBX__PENDING || strcmp(ms[j].topic, ms[first].topic) != 0) continue;
        if (obx__log_enabled(&s->hooks, d->message_log_level)) { /* as obx__handle_one */
            obx__msg_name(&ms[j], name, sizeof name);
            obx__log(&s->hooks, d->message_log_level, s->store_id,
                     "handling %s topic=%s attempt %d (transactional batch)", name, obx__kv(topic, ms[j].topic),
                     OBX__MSG_ATTEMPTS(&ms[j]) + 1);
        }
        d->group[k] = &ms[j];
        d->group_index[k++] = j;
    }
    return k;
}

/* One call of a transactional batch handler on the group's k messages:
 * *done counts the results that are OBX_DONE, *conflict says whether one
 * is OBX_CONFLICT; a value that is no outcome makes its message dead. */
static void obx__group_tx_call(obx_dispatcher *d, obx_store *s, const obx__route *route, const char *topic, int k,
                               int *done, int *conflict) {
    int64_t started;
    int j;
    for (j = 0; j < k; j++) {
        d->results[j].outcome = OBX_RETRY;
        memset(d->results[j].error, 0, sizeof d->results[j].error);
    }
    started = obx__mono_us(&s->hooks);
    ((obx_batch_tx_handler)route->fn)(d->group, d->results, k, (void *)s->db.dbc, route->user);
    obx__hist_record(s, topic, obx__mono_us(&s->hooks) - started);
    for (j = 0; j < k; j++) {
        int o = (int)d->results[j].outcome;
        d->results[j].error[OBX__HANDLER_ERROR_MAX - 1] = '\0';
        if (o == OBX_CONFLICT) {
            *conflict = 1;
        } else if (!obx__outcome_valid(o)) {
            snprintf(d->results[j].error, OBX__HANDLER_ERROR_MAX, "batch handler set %d, not an obx_outcome", o);
            d->results[j].outcome = OBX_DEAD;
        }
        *done += d->results[j].outcome == OBX_DONE;
    }
}

/* The group's messages whose result is not `keep` take their outcome (or
 * `outcome` with `why`, when given), settled with the batch; the others
 * stay in the group. Returns how many stayed. */
static int obx__group_settle(obx_dispatcher *d, obx_store *s, const obx_message *ms, int k, int keep, int outcome,
                             const char *why) {
    int j, m = 0;
    for (j = 0; j < k; j++) {
        int i = d->group_index[j];
        if ((int)d->results[j].outcome == keep) {
            d->group[m] = d->group[j];
            d->group_index[m++] = i;
            continue;
        }
        if (why) snprintf(d->errors[i], OBX__HANDLER_ERROR_MAX, "%s", why);
        else memcpy(d->errors[i], d->results[j].error, OBX__HANDLER_ERROR_MAX);
        d->outcomes[i] = why ? outcome : (int)d->results[j].outcome;
        if (d->outcomes[i] == OBX__SKIPPED) continue; /* released unhandled */
        obx__handled(d, s, &ms[i], i);
    }
    return m;
}

/* Every pending message of ms[first]'s topic through one transactional
 * batch handler call, as obx__handle_tx for one: when every result is
 * OBX_DONE, one ack and one commit. Other results roll the call back:
 * they stand (settled with the batch), and the done messages run again
 * alone in a new transaction (the group only shrinks). A conflict runs
 * the same call again; a lease lost at the ack rolls back and releases the
 * group (no attempt used). */
static void obx__handle_group_tx(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n, int first,
                                 const obx__route *route, obx__renewer *w, int64_t deadline, obx_run_stats *st) {
    char what[OBX__KV_CAP + 32], topic[OBX__KV_CAP], why[OBX__HANDLER_ERROR_MAX];
    int k = obx__group_collect(d, s, ms, n, first), tries;
    for (tries = 1; k > 0; tries++) {
        int64_t changed = -1;
        int begun = 0, done = 0, conflict = 0;
        obx_result r = obx__tx_open(d, s, &begun);
        snprintf(what, sizeof what, "%d message(s) topic=%s", k, obx__kv(topic, ms[first].topic));
        if (r == OBX_OK) obx__group_tx_call(d, s, route, ms[first].topic, k, &done, &conflict);
        if (obx__tx_end(d, s, ms, d->group_index, k, r == OBX_OK && !conflict && done == k, begun, what, &r, &changed,
                        st))
            return;
        if (r == OBX_OK && !conflict && done == k) { /* changed < k: a lease lost */
            obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "%s: %d no longer leased to this worker at their ack"
                     OBX__WHY(" (lease expired and reaped or claimed elsewhere)") "; their handler's transaction "
                     "was rolled back, the others are released", what, k - (int)changed);
            st->lease_lost += k - (int)changed;
            obx__group_settle(d, s, ms, k, -1, OBX__SKIPPED, "");
            return;
        }
        snprintf(why, sizeof why, "transaction conflict");
        if (obx__tx_conflicted(s, r, conflict, why)) {
            st->conflicts++;
            if (!obx__tx_again(s, w, deadline, tries, what, why)) k = obx__group_settle(d, s, ms, k, -1, OBX_WAIT, why);
            continue;
        }
        if (r != OBX_OK) { /* the database failed the dispatcher's part: retried with its reason */
            snprintf(why, sizeof why, "handler's transaction: %.200s", s->err.message);
            k = obx__group_settle(d, s, ms, k, -1, s->err.connection_lost ? OBX_WAIT : OBX_RETRY, why);
        }
        k = obx__group_settle(d, s, ms, k, OBX_DONE, 0, NULL); /* the done ones run again */
        if (k > 0 && obx__mono_ms(&s->hooks) >= (w ? obx__renew_start_until(w) : deadline))
            k = obx__group_settle(d, s, ms, k, -1, OBX__SKIPPED, "");
    }
}

/* Whether a periodic task is due; a clock that stepped back never stalls it. */
static int obx__due(int64_t now, int64_t *next, int64_t interval) {
    if (now < *next && *next - now <= interval) return 0;
    *next = obx__sat_add(now, interval);
    return 1;
}

/* Whether obx__housekeep would run anything now. */
static int obx__housekeep_due(const obx_dispatcher *d, const obx__entry *e, int64_t now) {
    return !(now < e->next_reap_ms && e->next_reap_ms - now <= d->reap_ms) ||
           (d->cleanup_ms > 0 && !(now < e->next_cleanup_ms && e->next_cleanup_ms - now <= d->cleanup_ms));
}

/* Housekeeping of one store when due: reap (OBX-053), cleanup if asked. */
static obx_result obx__housekeep(obx_dispatcher *d, obx_store *s, obx__entry *e, obx_run_stats *st) {
    int64_t now = obx__mono_ms(&s->hooks);
    obx_result r = OBX_OK;
    if (obx__due(now, &e->next_reap_ms, d->reap_ms)) r = obx_reap(s, &st->reaped);
    if (r == OBX_OK && d->cleanup_ms > 0 && obx__due(now, &e->next_cleanup_ms, d->cleanup_ms))
        r = obx_cleanup(s, d->retention_ms, 0, NULL);
    return r;
}

/* Past its expiry, on the database clock: the claim set the lease to its
 * now plus lease_seconds, and the time since is this host's monotonic
 * clock's from before the claim was sent (never less than what passed),
 * so no clock of this host is compared. Asked before each handler call,
 * not only once per claim: the messages before may have run long. */
static int obx__expired(const obx_dispatcher *d, const obx_message *m, int64_t claimed, int64_t now) {
    return m->expires_ms > 0 &&
           m->expires_ms <= m->locked_until_ms - (int64_t)d->lease_seconds * 1000 + (now - claimed);
}

/* Hand each claimed message to its handlers, until `deadline` (monotonic;
 * with renewal `w`, the one its renewals have reached): past it the lease
 * may end under the handler, so the rest is skipped. Messages of a paused
 * topic are held; a topic with a batch handler goes to it in one call.
 * `claimed`: the monotonic time the claim was sent (obx__expired). */
static void obx__handle_batch(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n,
                              obx__renewer *w, int64_t claimed, int64_t deadline, obx_run_stats *st) {
    int i, j, skipped = 0;
    for (i = 0; i < n; i++) d->outcomes[i] = OBX__PENDING;
    for (i = 0; i < n; i++) {
        const obx__route *batch;
        int64_t now = obx__mono_ms(&s->hooks);
        if (d->outcomes[i] != OBX__PENDING) continue;
        if (obx__expired(d, &ms[i], claimed, now)) {
            d->outcomes[i] = OBX__EXPIRED;
            continue;
        }
        if (w) deadline = obx__renew_start_until(w);
        if (now >= deadline) {
            d->outcomes[i] = OBX__SKIPPED;
            skipped++;
        } else if (d->pause_count && obx__pause_left(d, ms[i].topic, now) > 0) {
            d->outcomes[i] = OBX__HELD;
        } else if ((batch = obx__routes_tx(&d->routes, ms[i].topic)) != NULL) {
            obx__handle_tx(d, s, ms, i, batch, w, deadline, st);
        } else if ((batch = obx__routes_batch(&d->routes, ms[i].topic)) != NULL) {
            for (j = i + 1; j < n; j++) /* the group's others, checked now too */
                if (d->outcomes[j] == OBX__PENDING && strcmp(ms[j].topic, ms[i].topic) == 0 &&
                    obx__expired(d, &ms[j], claimed, now))
                    d->outcomes[j] = OBX__EXPIRED;
            if (batch->batch == OBX__ROUTE_BATCH_TX) obx__handle_group_tx(d, s, ms, n, i, batch, w, deadline, st);
            else obx__handle_group(d, s, ms, n, i, batch);
        } else {
            obx__handle_one(d, s, &ms[i], i, st);
        }
    }
    if (skipped)
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id,
                 "%d message(s) not handled: their %d s lease was nearly over"
                 OBX__WHY(" (handlers too slow for the lease?); they are released for the next claim"), skipped,
                 d->lease_seconds);
}

/* The backoff for a message's next attempt, within what abandon accepts. */
static int64_t obx__next_delay(obx_dispatcher *d, const obx_message *m, int64_t cap) {
    int64_t delay = d->backoff(OBX__MSG_ATTEMPTS(m), d->backoff_user);
    if (delay < OBX__DELAY_MIN_MS) delay = OBX__DELAY_MIN_MS;
    return delay > cap ? cap : delay;
}

/* Settle one message that did not succeed: wait, retry or dead. */
static obx_result obx__settle_failure(obx_dispatcher *d, obx_store *s, const obx_message *ms, int i,
                                      obx_run_stats *st) {
    const obx_message *m = &ms[i];
    int outcome = d->outcomes[i], attempt = OBX__MSG_ATTEMPTS(m) + 1;
    const char *error = d->errors[i];
    char name[OBX__MSG_NAME_MAX], reason[OBX__HANDLER_ERROR_MAX + 64], topic[OBX__KV_CAP];
    obx_result r;
    obx__msg_name(m, name, sizeof name);
    if (!error[0]) error = outcome == OBX_DEAD ? "handler returned OBX_DEAD" : "handler returned OBX_RETRY";
    if (outcome == OBX_WAIT) { /* not a failure: waiting never uses up attempts */
        r = obx__settle_messages(s, OBX__SETTLE_ABANDON, ms, &i, 1, error,
                                 obx__next_delay(d, m, OBX__WAIT_DELAY_MAX_MS), 0, NULL);
        if (r == OBX_OK) st->retried++;
        return r;
    }
    if (outcome == OBX_RETRY && attempt < d->max_attempts) {
        int64_t delay = obx__next_delay(d, m, OBX_DELAY_MAX_MS);
        obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "message %s: attempt %d of %d failed; retry in %lld ms",
                 name, attempt, d->max_attempts, (long long)delay);
        r = obx__settle_messages(s, OBX__SETTLE_ABANDON, ms, &i, 1, error, delay, 1, NULL);
        if (r == OBX_OK) st->retried++;
        return r;
    }
    if (outcome == OBX_DEAD) snprintf(reason, sizeof reason, "%s", error);
    else snprintf(reason, sizeof reason, "gave up after %d attempts: %s", attempt, error);
    obx__log(&s->hooks, OBX_LOG_ERROR, s->store_id, "message %s topic=%s is dead: %s", name,
             obx__kv(topic, m->topic), reason);
    r = obx__settle_messages(s, OBX__SETTLE_FAIL, ms, &i, 1, reason, 0, 0, NULL);
    if (r == OBX_OK) st->dead++;
    return r;
}

/* A busy drain's round trips (issue 30): in run(), on one store, the acks
 * of a batch go with the next claim, in its statement (PostgreSQL,
 * OBX__Q_CLAIM_ACK) or its transaction, so that a batch costs one commit
 * (and on PostgreSQL one round trip) instead of two. run() loops at once
 * after a batch, and sends what is carried before housekeeping, when its
 * claim fails (both rolled back: the acks alone then) and when it stops;
 * run_once() never carries, so a round it reports is settled. Acks of
 * messages with an ordering key go in the claim's transaction, never in
 * its statement: in the fused statement's snapshot their keys are busy
 * and their next messages parked, so the claim would pass over them. Where
 * the dialect has OBX__Q_CLAIM_CARRY (SQLite, PostgreSQL) the claim runs
 * first and takes the acked keys' next messages itself, then the acks;
 * elsewhere the acks (and their wake, on MariaDB obx__own_acked) go first
 * and the claim takes the woken messages: either way at once, where acked
 * alone each key cost a commit more. Returns whether
 * ms[which[0..n)] are carried in s->carry. */
/* Where no one statement can (SQLite, MariaDB): the ack first in the
 * claim's transaction, one commit fewer; measured faster on both (docs/
 * PERFORMANCE.md); SQL Server, not measured, acks at once, as 0 makes
 * those two do. */
#ifndef OBX__CARRY_IN_TX
#define OBX__CARRY_IN_TX 1
#endif
static int obx__carry(obx_dispatcher *d, obx_store *s, const obx_message *ms, const int *which, int n) {
    int i, k, keyed = 0;
    const int in_tx = OBX__CARRY_IN_TX && (OBX__ONE(s->db.d)->id == OBX_DIALECT_SQLITE ||
                                           OBX__ONE(s->db.d)->id == OBX_DIALECT_MARIADB);
    if (!d->carry || d->store != s || s->carry_count > 0 || (!OBX__SQL(s, OBX__Q_CLAIM_ACK) && !in_tx)) return 0;
    for (i = 0; i < n && !keyed; i++) keyed = OBX__MSG_KEYED(&ms[which[i]]);
    /* Keyed acks before a claim in one transaction (MariaDB: no claim runs
     * first) make its key reads walk index pages that transaction just
     * changed, each record checked in the clustered index: measured 40-55
     * us of server CPU more per keyed message than acking them alone
     * (docs/PERFORMANCE.md, "Ordered delivery"). */
    if (keyed && !OBX__CARRY_FIRST(s)) return 0;
    for (k = 0; k < OBX__KEY_LISTS; k++) s->carry[k].len = 0;
    for (i = 0; i < n; i++)
        if (!obx__msg_key_add(&s->hooks, s->db.d, s->carry, &ms[which[i]])) return 0;
    for (k = 0; k < OBX__KEY_LISTS; k++)
        if (!obx__list_end(&s->hooks, &s->carry[k], s->db.d)) return 0;
    s->carry_count = n;
    s->carry_keyed = keyed;
    return 1;
}

/* The carried acks' outcome: counted, and said when some were no longer ours. */
static void obx__carried(obx_store *s, int64_t changed, int acks, obx_run_stats *st) {
    st->done += (int)changed;
    if (changed < acks)
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id,
                 "%d of %d handled messages were no longer leased to this worker"
                 OBX__WHY(" (lease expired during handling?); they will be delivered again"),
                 acks - (int)changed, acks);
}

/* Send the carried acks on their own; a failure is the caller's error. */
static obx_result obx__carry_flush(obx_store *s, obx_run_stats *st) {
    int64_t changed = 0;
    int acks = s->carry_count;
    obx_result r;
    if (acks == 0) return OBX_OK;
    s->carry_count = 0;
    r = obx__settle_lists(s, s->carry, OBX__SETTLE_ACK, acks, NULL, 0, 0, &changed);
    s->carry_keyed = 0;
    if (r == OBX_OK) obx__carried(s, changed, acks, st);
    return r;
}

/* Settle a handled batch: every success in one statement, then each failure. */
static obx_result obx__settle_batch(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n,
                                    obx_run_stats *st) {
    obx_result r = OBX_OK;
    int i, acks = 0, failures = 0, paused = 0, skipped = 0;
    for (i = 0; i < n; i++) /* expired ones first, in one statement (d->acked lent) */
        if (d->outcomes[i] == OBX__EXPIRED) d->acked[acks++] = i;
    if (acks > 0) {
        int64_t changed = 0;
        r = obx__settle_messages(s, OBX__SETTLE_FAIL, ms, d->acked, acks, "expired", 0, 0, &changed);
        if (r != OBX_OK) return r;
        obx__count(s, OBX_METRIC_EXPIRED_UNHANDLED, changed);
        st->dead += (int)changed;
        obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "%d message(s) past their expiry: dead, not handled",
                 acks);
        acks = 0;
    }
    for (i = 0; i < n; i++) { /* skipped ones fill d->failures from its end */
        if (d->outcomes[i] == OBX_DONE) d->acked[acks++] = i;
        else if (d->outcomes[i] == OBX_PAUSE || d->outcomes[i] == OBX__HELD) paused++;
        else if (d->outcomes[i] == OBX__SKIPPED) d->failures[n - ++skipped] = i;
        else if (d->outcomes[i] != OBX__EXPIRED && d->outcomes[i] != OBX__SETTLED) d->failures[failures++] = i;
    }
    if (acks > 0 && obx__carry(d, s, ms, d->acked, acks)) {
        acks = 0; /* they go with the next claim */
    } else if (acks > 0) {
        int64_t changed = 0;
        r = obx__settle_messages(s, OBX__SETTLE_ACK, ms, d->acked, acks, NULL, 0, 0, &changed);
        if (r == OBX_OK) st->done += (int)changed;
        if (r == OBX_OK && changed < acks)
            obx__log(&s->hooks, OBX_LOG_WARN, s->store_id,
                     "%d of %d handled messages were no longer leased to this worker"
                     OBX__WHY(" (lease expired during handling?); they will be delivered again"),
                     acks - (int)changed, acks);
    }
    for (i = 0; i < failures && r == OBX_OK; i++) r = obx__settle_failure(d, s, ms, d->failures[i], st);
    /* Never started: released now, their claim's start taken back (max_starts). */
    if (skipped && r == OBX_OK)
        r = obx__settle_messages(s, OBX__SETTLE_ABANDON, ms, d->failures + n - skipped, skipped, NULL,
                                 OBX__DELAY_MIN_MS, 0, NULL);
    if (paused && r == OBX_OK) r = obx__settle_paused(d, s, ms, n, st);
    return r;
}

/* Crash-loop isolation. A message claimed before without an outcome
 * (starts > 1) may be what killed the last worker, and a claim counts a
 * start for its whole batch. So the others are handled and settled first;
 * of such suspects only the first is kept, handled last and alone, and the
 * rest are released at once (an abandon, which takes back this claim's
 * count): a crash then costs its batch-mates nothing. Reorders s->msgs
 * (suspects last), shrinks *n, sets *first to the suspect (or *n). */
static obx_result obx__isolate(obx_dispatcher *d, obx_store *s, int *n, int *first) {
    obx_message *ms = s->msgs, t;
    int i, k = 0, released = 0;
    obx_result r = OBX_OK;
    for (i = 0; i < *n; i++) /* the others first, in their order */
        if (ms[i].starts <= 1) {
            t = ms[k];
            ms[k++] = ms[i];
            ms[i] = t;
        }
    *first = k;
    for (i = k + 1; i < *n; i++) d->acked[released++] = i;
    if (released > 0) {
        r = obx__settle_messages(s, OBX__SETTLE_ABANDON, ms, d->acked, released, NULL, OBX__DELAY_MIN_MS, 0, NULL);
        if (r == OBX_OK) *n = k + 1;
    }
    if (k < *n)
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "%d message(s) claimed before without an outcome"
                 OBX__WHY(" (a crash?)") ": one handled alone after the others, %d released", *n - k + released, released);
    return r;
}

/* A keyed enqueue that read its key busy may commit after the wake of the
 * key's last busy message looked for it (see OBX__PG_PARKED); nothing else
 * of the key would wake it before the reap. Producers whose transaction
 * is open while a message of their key is acked are the common case under
 * load, so a store that has claimed keyed messages, when a claim comes back
 * short of its batch (the parked ones could have filled it), wakes:
 * - the keys of the keyed messages of its previous batch, again
 *   (OBX__Q_WAKE_AGAIN): a probe per key, for the enqueues that committed
 *   since their settle;
 * - every key left with only parked messages (OBX__Q_WAKE), for an enqueue
 *   that committed later, at most once per poll interval and never more
 *   than a twentieth of the time: the read walks every parked message
 *   (100,000 of them: 40 ms on PostgreSQL, 0.4 s on MariaDB).
 * A missed wake costs an idle poll, not a reap interval. A store without
 * keys runs neither. Returns how many it woke; a failure is logged and
 * forgotten (the next short claim, or the reap, wakes them). */
static int64_t obx__wake_missed(obx_dispatcher *d, obx_store *s, obx__entry *e, int n) {
    int64_t woken = 0, more = 0, t0, gap;
    obx_result r;
    if (n >= d->batch_size || !OBX__SQL(s, OBX__Q_WAKE) || !obx__own_keyed(s)) return 0;
    r = obx__own_wake_again(s, &woken);
    t0 = obx__mono_ms(&s->hooks);
    /* The gap never exceeds the reap interval (whose reap wakes too), so
     * a later one is a clock that stepped back. */
    if (r == OBX_OK && (t0 >= e->next_wake_ms || e->next_wake_ms - t0 > d->reap_ms)) {
        r = obx__own_wake(s, NULL, &more);
        gap = (obx__mono_ms(&s->hooks) - t0) * 20;
        if (gap < d->timing.poll_ms) gap = d->timing.poll_ms;
        e->next_wake_ms = obx__sat_add(t0, gap < d->reap_ms ? gap : d->reap_ms);
        woken += more;
    }
    if (r != OBX_OK) {
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "waking parked messages failed: %s" OBX__WHY("; the reap wakes them"),
                 s->err.message);
        obx__error_clear(&s->err);
    }
    if (woken > 0)
        obx__log(&s->hooks, OBX_LOG_DEBUG, s->store_id, "woke %lld ordering key(s) left with only parked messages",
                 (long long)woken);
    return woken;
}

/* The dispatcher's claim, with the acks carried from its last batch. */
static obx_result obx__claim_carrying(obx_dispatcher *d, obx_store *s, obx_run_stats *st, const obx_message **ms,
                                      int *n) {
    int64_t acked = 0;
    int acks = s->carry_count;
    obx_error failed;
    obx_result r;
    if (acks == 0) return obx_claim(s, d->owner, d->lease_seconds, d->batch_size, ms, n);
    s->carry_count = 0;
    r = obx__claim_run(s, d->owner, d->lease_seconds, d->batch_size, acks, s->carry_keyed, &acked, ms, n);
    if (r == OBX_OK || r == OBX_EMPTY) {
        s->carry_keyed = 0;
        obx__carried(s, acked, acks, st);
        return r;
    }
    failed = s->err; /* both rolled back: the acks alone, and the claim's error */
    s->carry_count = acks;
    if (obx__carry_flush(s, st) != OBX_OK)
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "ack after a failed claim failed too: %s"
                 OBX__WHY("; those messages will be delivered again"), s->err.message);
    s->carry_count = 0;
    s->err = failed;
    return r;
}

/* The others of a batch are settled and a crash suspect runs next, alone
 * (obx__isolate): their carried acks go now, not with the next claim, which
 * waits for the suspect's handler (it may be slow, or crash) while their
 * leases are no longer renewed. A failure only costs a redelivery. */
static void obx__carry_before_suspect(obx_store *s, obx_run_stats *st) {
    if (s->carry_count == 0 || obx__carry_flush(s, st) == OBX_OK) return;
    obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "ack before a suspect's handler failed: %s"
             OBX__WHY("; those messages will be delivered again"), s->err.message);
    obx__error_clear(&s->err);
}

/* A batch whose lease renewal could not be set up (out of memory, no
 * thread): unrenewed, a slow handler would overlap the next owner's, so it
 * goes back unhandled, no attempt used; an error, so that run() backs off
 * rather than claim again at once. */
static obx_result obx__release_unrenewed(obx_dispatcher *d, obx_store *s, const obx_message *ms, int n,
                                         obx_run_stats *st) {
    obx_result r;
    int i;
    obx__log(&s->hooks, OBX_LOG_WARN, s->store_id,
             "lease renewal could not be set up (out of memory or no thread): %d message(s) released "
             "unhandled" OBX__WHY(", for the next claim; no attempt used"), n);
    for (i = 0; i < n; i++) d->outcomes[i] = OBX__SKIPPED;
    r = obx__settle_batch(d, s, ms, n, st);
    if (r != OBX_OK) return r;
    return obx__fail(&s->err, OBX_ERR_NO_MEMORY, "obx_dispatcher_run", "lease renewal could not be set up");
}

/* One batch from one store: housekeeping, claim, handle, settle. */
static obx_result obx__dispatch_store(obx_dispatcher *d, obx_store *s, obx__entry *e, obx_run_stats *st) {
    const obx_message *ms;
    int n = 0, first, from, to, renewed;
    int64_t lease_ms = (int64_t)d->lease_seconds * 1000, deadline, claimed;
    obx_result r;
    obx__watch(d->renewer, s, 1);
    if (s->carry_count > 0 && obx__housekeep_due(d, e, obx__mono_ms(&s->hooks)) &&
        (r = obx__carry_flush(s, st)) != OBX_OK) {
        obx__watch(d->renewer, s, 0);
        return r;
    }
    r = obx__housekeep(d, s, e, st);
    if (r < 0) {
        obx__watch(d->renewer, s, 0);
        return r;
    }
    /* The lease started no earlier than now: past its end less a margin a
     * message may be reclaimed by another worker, so it is not handled.
     * Renewals move this out, each as far as its own lease: only one that
     * extended every message of the batch (OBX-059). */
    deadline = obx__mono_ms(&s->hooks) + lease_ms -
               (lease_ms / 5 < OBX__LEASE_MARGIN_MAX_MS ? lease_ms / 5 : OBX__LEASE_MARGIN_MAX_MS);
    claimed = obx__mono_ms(&s->hooks);
    r = obx__claim_carrying(d, s, st, &ms, &n);
    if ((r == OBX_OK || r == OBX_EMPTY) && obx__wake_missed(d, s, e, n) > 0 && n == 0) {
        claimed = obx__mono_ms(&s->hooks); /* what it woke, claimed now (the deadline stays: earlier) */
        r = obx_claim(s, d->owner, d->lease_seconds, d->batch_size, &ms, &n);
    }
    obx__watch(d->renewer, s, 0);
    if (r != OBX_OK) return r;
    st->claimed = n;
    first = n;
    for (from = 0; from < n && ms[from].starts <= 1; from++) {}
    if (from < n && (r = obx__isolate(d, s, &n, &first)) != OBX_OK) return r;
    renewed = obx__renew_begin(d->renewer, s, d->owner, ms, n, d->lease_seconds, d->max_handler_ms, deadline);
    if (renewed < 0) r = obx__release_unrenewed(d, s, ms, n, st);
    for (from = renewed < 0 ? n : 0; from < n && r == OBX_OK; from = to) { /* the others, then a suspect */
        to = from < first ? first : n;
        if (from > 0) obx__renew_range(d->renewer, ms + from, n - from, 1); /* the suspect, alone now */
        obx__handle_batch(d, s, ms + from, to - from, renewed > 0 ? d->renewer : NULL, claimed, deadline, st);
        obx__renew_range(d->renewer, ms + from, n - from, 0); /* settling: fewer leases is no news */
        obx__watch(d->renewer, s, 1);
        r = obx__settle_batch(d, s, ms + from, to - from, st);
        if (r == OBX_OK && to < n) obx__carry_before_suspect(s, st);
        obx__watch(d->renewer, s, 0);
    }
    obx__renew_end(d->renewer);
    obx__own_wake_later(s, ms, n);
    if (r < 0 && s->carry_count > 0) { /* run() waits before the next claim: not the acks */
        obx_error failed = s->err;
        if (obx__carry_flush(s, st) != OBX_OK)
            obx__log(&s->hooks, OBX_LOG_WARN, s->store_id, "ack after a failed settle failed too: %s"
                     OBX__WHY("; those messages will be delivered again"), s->err.message);
        s->err = failed;
    }
    return r;
}

#ifndef OBX_NO_MULTI_STORE
/* One round over a provider's stores: refresh discovery when due, then
 * poll the store the strategy picks; housekeeping runs per store. */
/* A store of a provider failed a round: its error becomes the dispatcher's
 * (the store may be closed by the next discovery), logged on the first
 * failure in a row and then once every 60. */
static obx_result obx__store_failed(obx_dispatcher *d, obx__entry *e, obx_result r) {
    obx_store *s = (obx_store *)e->store;
    d->own_err = s->err;
    if (e->failures++ % 60 == 0)
        obx__log(d->hooks, e->failures == 1 ? OBX_LOG_ERROR : OBX_LOG_WARN, s->store_id,
                 "dispatch failed (%d in a row): %s: %s (%s)" OBX__WHY("; the other databases go on"),
                 e->failures, obx__result_str(r), s->err.message, s->err.where);
    return r;
}

static obx_result obx__dispatch_many(obx_dispatcher *d, obx_run_stats *st) {
    obx_provider *p = d->provider;
    obx_result r;
    int count, pick;
    obx__entry *e;
    if (!p->fixed && obx__mono_ms(d->hooks) >= p->next_refresh_ms &&
        obx__provider_discover(p) != OBX_OK) /* the current set is kept; logged */
        d->own_err = p->err;
    obx__registry_retry(&p->reg); /* a database not open, when its wait is over; never blocks */
    if (p->closes != d->closes_seen) { /* here, or by obx_provider_refresh between rounds */
        d->closes_seen = p->closes;
        obx__renew_forget(d->renewer);
    }
    count = p->reg.count;
    if (count != d->selector.store_count) {
        obx__selector_resize(&d->selector, count);
        d->empty_streak = 0;
    }
    if (count == 0) return OBX_EMPTY;
    pick = d->strategy.next ? d->strategy.next(d->strategy.user, count) : obx__selector_next(&d->selector);
    if (pick < 0 || pick >= count) pick = 0;
    e = &p->reg.items[pick];
    r = obx__dispatch_store(d, (obx_store *)e->store, e, st);
    if (d->strategy.report) d->strategy.report(d->strategy.user, pick, st->claimed);
    else obx__selector_report(&d->selector, pick, st->claimed);
    if (r < 0) {
        d->fail_streak++;
        return obx__store_failed(d, e, r);
    }
    if (e->failures > 0)
        obx__log(d->hooks, OBX_LOG_INFO, ((obx_store *)e->store)->store_id,
                 "dispatch works again after %d failed round(s)", e->failures);
    e->failures = 0;
    d->fail_streak = 0;
    d->empty_streak = st->claimed > 0 ? 0 : d->empty_streak + 1;
    /* Empty only when every store has answered empty in a row. */
    return st->claimed > 0 || d->empty_streak < count ? OBX_OK : OBX_EMPTY;
}
/* The number of stores a dispatcher serves now. */
#define OBX__STORE_COUNT(d) ((d)->store ? 1 : (d)->provider->reg.count)
#else
#define obx__dispatch_many(d, st) ((void)(st), OBX_ERR_UNSUPPORTED) /* never: create refuses */
#define OBX__STORE_COUNT(d) 1
#endif /* OBX_NO_MULTI_STORE */

OBX_API obx_result obx_dispatcher_run_once(obx_dispatcher *d, obx_run_stats *stats) {
    obx_run_stats st;
    obx_result r;
    memset(&st, 0, sizeof st);
    if (!d) return OBX_ERR_INVALID_ARG;
    r = d->store ? obx__dispatch_store(d, d->store, &d->single, &st) : obx__dispatch_many(d, &st);
    if (stats) *stats = st;
    return r;
}

/* One round of run(). With many databases, one that fails does not make
 * the others wait: the loop goes on at once until every database has
 * failed in a row, and only then waits as after a failed round. */
static obx_result obx__dispatch_round(void *vd) {
    obx_dispatcher *d = (obx_dispatcher *)vd;
    obx_result r = obx_dispatcher_run_once(d, NULL);
    if (r < 0 && d->provider && d->fail_streak < OBX__STORE_COUNT(d)) return OBX_OK;
    return r;
}

#if OBX__WAKE_SOCKET && !defined(OBX_NO_THREADS)
/* The listener: a wake byte on the socket wakes the loop. It polls in
 * 250 ms slices to see a stop; obx__wake_unlisten ends a slice at once. */
static void *obx__wake_main(void *arg) {
    obx_dispatcher *d = (obx_dispatcher *)arg;
    while (!obx__loop_stopped(&d->loop)) {
        struct pollfd p;
        char bytes[64];
        int got = 0;
        p.fd = d->wake_fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 250) <= 0) continue;
        while (recv(d->wake_fd, bytes, sizeof bytes, 0) > 0) got = 1;
        if (got) obx__loop_wake(&d->loop);
    }
    return NULL;
}

static void obx__wake_listen(obx_dispatcher *d, const char *name) {
    if (!d->wake_path[0]) return;
    d->wake_fd = obx__wake_bind(d->hooks, name, d->wake_path, &d->wake_at);
    if (d->wake_fd >= 0 && obx__thread_create(&d->wake_thread, obx__wake_main, d) != 0) {
        obx__wake_unbind(d->wake_fd, d->wake_path, &d->wake_at);
        d->wake_fd = -1;
    }
    if (d->wake_fd >= 0) obx__log(d->hooks, OBX_LOG_INFO, name, "listening for wake-ups at %s", d->wake_path);
}

static void obx__wake_unlisten(obx_dispatcher *d) {
    int self = -1;
    if (d->wake_fd < 0) return;
    obx__wake_send(&self, d->wake_path);
    if (self >= 0) close(self);
    obx__thread_join(&d->wake_thread);
    obx__wake_unbind(d->wake_fd, d->wake_path, &d->wake_at);
    d->wake_fd = -1;
}
#else
#define obx__wake_listen(d, name) ((void)(d), (void)(name))
#define obx__wake_unlisten(d) ((void)(d))
#endif

OBX_API obx_result obx_dispatcher_run(obx_dispatcher *d) {
    const char *name;
    if (!d) return OBX_ERR_INVALID_ARG;
    name = d->store ? d->store->store_id : "dispatcher";
    obx__wake_listen(d, name);
    obx__log(d->hooks, OBX_LOG_INFO, name,
             "dispatcher %s started: batch %d, lease %d s, poll %lld ms, %d handler(s), %d store(s)",
             d->owner, d->batch_size, d->lease_seconds, (long long)d->timing.poll_ms, d->routes.count,
             OBX__STORE_COUNT(d));
    d->carry = d->store != NULL;
    obx__loop_run(&d->loop, &d->timing, obx__dispatch_round, d, name, d->err);
    d->carry = 0;
    if (d->store && d->store->carry_count > 0) {
        obx_run_stats st;
        memset(&st, 0, sizeof st);
        if (obx__carry_flush(d->store, &st) != OBX_OK)
            obx__log(d->hooks, OBX_LOG_WARN, name, "the last acks failed: %s" OBX__WHY("; those messages will be delivered again"),
                     d->store->err.message);
    }
    obx__wake_unlisten(d);
    obx__log(d->hooks, OBX_LOG_INFO, name, "dispatcher %s stopped", d->owner);
    return OBX_OK;
}

OBX_API void obx_dispatcher_stop(obx_dispatcher *d) {
    if (d) obx__loop_stop(&d->loop);
}

OBX_API void obx_dispatcher_wake(obx_dispatcher *d) {
    if (d) obx__loop_wake(&d->loop);
}

OBX_API obx_result obx_notify(obx_store *s) {
    if (!s) return OBX_ERR_INVALID_ARG;
    obx__wake_send(&s->wake_fd, s->wake_path);
    return OBX_OK;
}

/* The envelope (seed 002 section 6), the same in both headers: checks,
 * the Headers column as JSON text (written by enqueue, decoded in place
 * when a row is read) and the lookups handlers use. */

/* Four hex digits at p as a number; -1 if any is not a hex digit (the
 * terminator included, so a short escape never reads past the text). */
OBX__PRIVATE long obx__hex4(const char *p) {
    long v = 0;
    int k;
    for (k = 0; k < 4; k++) {
        int d = (unsigned char)p[k], x;
        if (d >= '0' && d <= '9') x = d - '0';
        else if ((d | 32) >= 'a' && (d | 32) <= 'f') x = (d | 32) - 'a' + 10;
        else return -1;
        v = v * 16 + x;
    }
    return v;
}

/* A code point as UTF-8 into out (4 bytes of room); the byte count. */
OBX__PRIVATE size_t obx__utf8_put(unsigned long cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One escape at p (just after the backslash) into out; the bytes written,
 * 0 if malformed. *p is moved past the escape. */
OBX__PRIVATE size_t obx__json_unescape(const char **p, char out[4]) {
    const char *s = *p;
    long cp, low;
    switch (*s) {
    case '"': case '\\': case '/': out[0] = *s; break;
    case 'b': out[0] = '\b'; break;
    case 'f': out[0] = '\f'; break;
    case 'n': out[0] = '\n'; break;
    case 'r': out[0] = '\r'; break;
    case 't': out[0] = '\t'; break;
    case 'u':
        if ((cp = obx__hex4(s + 1)) < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return 0;
        s += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half */
            if (s[0] != '\\' || s[1] != 'u' || (low = obx__hex4(s + 2)) < 0xDC00 || low > 0xDFFF) return 0;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            s += 6;
        }
        *p = s;
        return obx__utf8_put((unsigned long)cp, out);
    default: return 0; /* the terminator included */
    }
    *p = s + 1;
    return 1;
}

/* An optional text: "" is stored as NULL. */
static const char *obx__opt_text(const char *text) { return text && text[0] ? text : NULL; }

/* Column `col` appended to buf (obx__get_append) where bit `bit` of
 * `present` says it is not NULL; else NULL without a driver call. */
static obx_result obx__get_opt(obx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type, unsigned present,
                               unsigned bit, obx__buf *buf, size_t *offset, size_t *out_len) {
    if (present & bit) return obx__get_append(db, st, col, c_type, buf, offset, out_len);
    *offset = (size_t)-1;
    if (out_len) *out_len = 0;
    return OBX_OK;
}

#ifndef OBX_NO_ENVELOPE
/* The JSON string that starts after the quote at p, decoded to *w (which
 * never runs ahead of p: a decoded string is shorter than its JSON) and
 * NUL-terminated; returns what follows its closing quote, or NULL when it
 * is not a JSON string or holds a NUL. */
static char *obx__json_string_in_place(char *p, char **w) {
    for (;;) {
        char one[4];
        size_t n;
        const char *q;
        unsigned char c = (unsigned char)*p++;
        if (c == '"') {
            *(*w)++ = '\0';
            return p;
        }
        if (c < 0x20) return NULL; /* the end of the text too */
        if (c != '\\') {
            *(*w)++ = (char)c;
            continue;
        }
        q = p;
        if ((n = obx__json_unescape(&q, one)) == 0 || one[0] == '\0') return NULL;
        p += q - p;
        memcpy(*w, one, n);
        *w += n;
    }
}

/* The Headers column, a JSON object of string values, turned in place into
 * "key\0value\0..." (what obx_message_header reads); returns the number of
 * pairs, or -1 when the text is not such an object (written by other
 * software: read as no headers). */
static int obx__headers_unpack(char *text) {
    char *p = text, *w = text;
    int n = 0;
#define OBX__WS() while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++
    OBX__WS();
    if (*p++ != '{') return -1;
    OBX__WS();
    if (*p == '}') return 0;
    for (;;) {
        if (*p != '"' || !(p = obx__json_string_in_place(p + 1, &w))) return -1;
        OBX__WS();
        if (*p++ != ':') return -1;
        OBX__WS();
        if (*p != '"' || !(p = obx__json_string_in_place(p + 1, &w))) return -1;
        n++;
        OBX__WS();
        if (*p == '}') return n;
        if (*p++ != ',') return -1;
        OBX__WS();
    }
#undef OBX__WS
}

/* Check a message's envelope; `item` ("messages[3]." or "") names it. */
static obx_result obx__check_envelope(obx_error *err, const char *fn, const char *item, const obx_new_message *m) {
    char where[96];
    size_t n = 0;
    int i;
#define OBX__BAD(arg, result, ...)                                           \
    do {                                                                     \
        snprintf(where, sizeof where, "%s: %s%s", fn, item, arg);            \
        return obx__fail(err, result, where, __VA_ARGS__);                   \
    } while (0)
    if (m->tenant_id && !obx__text_fits(m->tenant_id, OBX_TENANT_MAX))
        OBX__BAD("tenant_id", OBX_ERR_INVALID_ARG, "tenant_id must be valid UTF-8 of at most %d characters",
                 OBX_TENANT_MAX);
    if (m->aggregate_type && !obx__text_fits(m->aggregate_type, OBX_AGGREGATE_TYPE_MAX))
        OBX__BAD("aggregate_type", OBX_ERR_INVALID_ARG,
                 "aggregate_type must be valid UTF-8 of at most %d characters", OBX_AGGREGATE_TYPE_MAX);
    if (m->aggregate_id && !obx__text_fits(m->aggregate_id, OBX_AGGREGATE_ID_MAX))
        OBX__BAD("aggregate_id", OBX_ERR_INVALID_ARG,
                 "aggregate_id must be valid UTF-8 of at most %d characters", OBX_AGGREGATE_ID_MAX);
    if (m->header_count < 0 || m->header_count > OBX_HEADERS_MAX)
        OBX__BAD("header_count", OBX_ERR_INVALID_ARG, "header_count must be 0..%d", OBX_HEADERS_MAX);
    if (m->header_count > 0 && !m->headers)
        OBX__BAD("headers", OBX_ERR_INVALID_ARG, "headers must not be NULL when header_count > 0");
    for (i = 0; i < m->header_count; i++) {
        const obx_header *x = &m->headers[i];
        char arg[40];
        int j;
        snprintf(arg, sizeof arg, "headers[%d].key", i);
        if (!x->key || !x->key[0]) OBX__BAD(arg, OBX_ERR_INVALID_ARG, "a header key must not be NULL or empty");
        if (!obx__text_fits(x->key, OBX_HEADER_KEY_MAX))
            OBX__BAD(arg, OBX_ERR_INVALID_ARG, "a header key must be valid UTF-8 of at most %d characters",
                     OBX_HEADER_KEY_MAX);
        for (j = 0; j < i; j++)
            if (strcmp(m->headers[j].key, x->key) == 0)
                OBX__BAD(arg, OBX_ERR_INVALID_ARG, "key repeats headers[%d].key" OBX__WHY(" (keys are unique)"), j);
        snprintf(arg, sizeof arg, "headers[%d].value", i);
        if (!x->value) OBX__BAD(arg, OBX_ERR_INVALID_ARG, "a header value must not be NULL" OBX__WHY(" (\"\" is a value)"));
        if (!obx__text_fits(x->value, OBX_HEADER_VALUE_MAX))
            OBX__BAD(arg, OBX_ERR_INVALID_ARG, "a header value must be valid UTF-8 of at most %d characters",
                     OBX_HEADER_VALUE_MAX);
        n += strlen(x->key) + strlen(x->value);
    }
    if (n > OBX_HEADERS_BYTES_MAX)
        OBX__BAD("headers", OBX_ERR_INVALID_ARG, "keys and values take %lu bytes, over OBX_HEADERS_BYTES_MAX (%d)",
                 (unsigned long)n, OBX_HEADERS_BYTES_MAX);
#undef OBX__BAD
    return OBX_OK;
}

/* m's headers as one JSON object {"key":"value",...} in b (emptied first),
 * keys in their given order; 0 when out of memory. */
static int obx__headers_json(const obx__hooks *h, obx__buf *b, const obx_new_message *m) {
    int i, ok;
    b->len = 0;
    ok = obx__buf_add(h, b, "{", 1);
    for (i = 0; ok && i < m->header_count; i++) {
        const obx_header *x = &m->headers[i];
        ok = (i == 0 || obx__buf_add(h, b, ",", 1)) && obx__quoted_add(h, b, x->key, strlen(x->key), 0) &&
             obx__buf_add(h, b, ":", 1) && obx__quoted_add(h, b, x->value, strlen(x->value), 0);
    }
    return ok && obx__buf_add(h, b, "}", 1);
}

/* The envelope's four columns from `col` on, those whose bit (1, 2, 4, 8)
 * is in `present`: the strings to buf, the Headers object decoded in
 * place (text that is not one reads as none). */
static obx_result obx__read_envelope(obx__db *db, SQLHSTMT st, int col, unsigned present, obx__buf *buf,
                                     obx__envelope_offsets *o, int *header_count) {
    obx_result r;
    *header_count = 0;
    if ((r = obx__get_opt(db, st, col, SQL_C_CHAR, present, 1, buf, &o->tenant, NULL)) != OBX_OK ||
        (r = obx__get_opt(db, st, col + 1, SQL_C_CHAR, present, 2, buf, &o->aggregate_type, NULL)) != OBX_OK ||
        (r = obx__get_opt(db, st, col + 2, SQL_C_CHAR, present, 4, buf, &o->aggregate_id, NULL)) != OBX_OK ||
        (r = obx__get_opt(db, st, col + 3, SQL_C_CHAR, present, 8, buf, &o->headers, NULL)) != OBX_OK)
        return r;
    if (o->headers != (size_t)-1) {
        *header_count = obx__headers_unpack(buf->data + o->headers);
        if (*header_count <= 0) o->headers = (size_t)-1, *header_count = 0;
    }
    return OBX_OK;
}

/* A message's envelope strings, once the buffer no longer moves. */
static void obx__point_envelope(const obx__buf *buf, obx_message *m, const obx__envelope_offsets *o) {
    m->tenant_id = obx__at(buf, o->tenant);
    m->aggregate_type = obx__at(buf, o->aggregate_type);
    m->aggregate_id = obx__at(buf, o->aggregate_id);
    m->headers_packed = obx__at(buf, o->headers);
}

/* Whether m has an envelope: a message without one runs the plain statements. */
static int obx__has_envelope(const obx_new_message *m) {
    return obx__opt_text(m->tenant_id) || obx__opt_text(m->aggregate_type) || obx__opt_text(m->aggregate_id) ||
           m->header_count > 0;
}

/* Bind m's envelope as p[0..3], its headers' JSON made in `json`; 0 when
 * out of memory. */
static int obx__envelope_params(const obx__hooks *h, obx__buf *json, obx__param *p, const obx_new_message *m) {
    if (m->header_count > 0 && !obx__headers_json(h, json, m)) return 0;
    obx__p_text(&p[0], obx__opt_text(m->tenant_id), (size_t)-1);
    obx__p_text(&p[1], obx__opt_text(m->aggregate_type), (size_t)-1);
    obx__p_text(&p[2], obx__opt_text(m->aggregate_id), (size_t)-1);
    obx__p_text(&p[3], m->header_count > 0 ? json->data : NULL, (size_t)-1);
    return 1;
}


OBX_API obx_result obx_message_header_at(const obx_message *message, int index, const char **key,
                                         const char **value) {
    const char *at;
    int i;
    if (!message) return OBX_ERR_INVALID_ARG;
    if (index < 0 || index >= message->header_count || !message->headers_packed) return OBX_ERR_NOT_FOUND;
    at = message->headers_packed;
    for (i = 0; i < index; i++) at += strlen(at) + 1, at += strlen(at) + 1;
    if (key) *key = at;
    if (value) *value = at + strlen(at) + 1;
    return OBX_OK;
}

OBX_API const char *obx_message_header(const obx_message *message, const char *key) {
    const char *at;
    int i;
    if (!message || !key || !message->headers_packed) return NULL;
    at = message->headers_packed;
    for (i = 0; i < message->header_count; i++) {
        size_t n = strlen(at);
        if (strcmp(at, key) == 0) return at + n + 1;
        at += n + 1;
        at += strlen(at) + 1;
    }
    return NULL;
}
#else
/* OBX_NO_ENVELOPE: a message that sets a field is refused by name (""
 * is no value, as everywhere); rows are read without the envelope. */
static obx_result obx__check_envelope(obx_error *err, const char *fn, const char *item, const obx_new_message *m) {
    char where[96];
    const char *arg = obx__opt_text(m->tenant_id)        ? "tenant_id"
                      : obx__opt_text(m->aggregate_type) ? "aggregate_type"
                      : obx__opt_text(m->aggregate_id)   ? "aggregate_id"
                      : m->header_count != 0             ? "headers"
                                                         : NULL;
    if (!arg) return OBX_OK;
    snprintf(where, sizeof where, "%s: %s%s", fn, item, arg);
    return obx__fail(err, OBX_ERR_UNSUPPORTED, where, "%s: the envelope was left out of this build (OBX_NO_ENVELOPE)",
                     arg);
}

static int obx__has_envelope(const obx_new_message *m) {
    (void)m;
    return 0;
}

/* Never reached with a header (the check refused it); the inbox does not
 * call it. */
OBX__PRIVATE int obx__headers_json(const obx__hooks *h, obx__buf *b, const obx_new_message *m) {
    (void)h, (void)b, (void)m;
    return 0;
}

static obx_result obx__read_envelope(obx__db *db, SQLHSTMT st, int col, unsigned present, obx__buf *buf,
                                     obx__envelope_offsets *o, int *header_count) {
    (void)db, (void)st, (void)col, (void)present, (void)buf, (void)o;
    *header_count = 0;
    return OBX_OK;
}

static void obx__point_envelope(const obx__buf *buf, obx_message *m, const obx__envelope_offsets *o) {
    (void)buf, (void)m, (void)o;
}

static int obx__envelope_params(const obx__hooks *h, obx__buf *json, obx__param *p, const obx_new_message *m) {
    int i;
    (void)h, (void)json, (void)m;
    for (i = 0; i < 4; i++) obx__p_text(&p[i], NULL, (size_t)-1);
    return 1;
}
#endif /* OBX_NO_ENVELOPE */


/* >>common-end engine */


/* >> the outbox's messages: rows, keys, names ---------------------------------- */

static void obx__store_own_free(const obx__hooks *h, obx__store_own *own) {
    int i;
    for (i = 0; i < OBX__INSERT_LISTS; i++) obx__buf_free(h, &own->columns[i]);
    obx__buf_free(h, &own->headers);
    obx__buf_free(h, &own->values);
    obx__buf_free(h, &own->wake);
    obx__buf_free(h, &own->wake_again);
}

static void obx__store_own_open(obx__store_own *own, const obx_store_desc *desc) {
    own->dead_holds = desc->ordering_dead_holds != 0;
    own->keyed_claims = 0;
}

#ifndef OBX_NO_MARIADB
/* A MariaDB wake: a plain read of the rows to wake, then their update (see
 * OBX__Q_WAKE_SETTLED). `read`: OBX__Q_WAKE_SETTLED, the keys of the ids in
 * s->keys[0], or OBX__Q_WAKE, every key left with only parked messages. */
typedef struct obx__wake_ctx {
    obx_store *s;
    int read;
    const obx__buf *ids;         /* the read's list of ids, or NULL */
    int64_t woken;
} obx__wake_ctx;

static obx_result obx__wake_unit(obx__db *db, void *vctx) {
    obx__wake_ctx *w = (obx__wake_ctx *)vctx;
    obx_store *s = w->s;
    obx__param p[1];
    SQLHSTMT cur = NULL;
    obx_result r;
    int n = 0;
    w->woken = 0;
    if (w->ids) obx__p_text(&p[0], w->ids->data, w->ids->len);
    s->own.wake.len = 0;
    r = obx__exec(db, w->read, s->sql[w->read], p, w->ids ? 1 : 0, NULL, &cur);
    while (r == OBX_OK && (r = obx__fetch(db, cur)) == OBX_OK) {
        char id[40];
        SQLLEN ind = 0;
        r = obx__get_text(db, cur, 1, id, sizeof id, &ind);
        if (r == OBX_OK && ind != SQL_NULL_DATA) {
            if (!obx__list_add(db->hooks, &s->own.wake, db->d, id, strlen(id)))
                r = obx__fail(db->err, OBX_ERR_NO_MEMORY, "wake", "out of memory");
            n++;
        }
    }
    obx__close(cur);
    if (r != OBX_EMPTY || n == 0) return r == OBX_EMPTY ? OBX_OK : r;
    if (!obx__list_end(db->hooks, &s->own.wake, db->d)) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "wake", "out of memory");
    obx__p_text(&p[0], s->own.wake.data, s->own.wake.len);
    return obx__exec(db, OBX__Q_WAKE_IDS, OBX__SQL(s, OBX__Q_WAKE_IDS), p, 1, &w->woken, NULL);
}

/* Two statements, each whole on its own (the update checks the row is
 * still parked): no transaction of their own, two round trips less per
 * ack (on our own connections, as a one-statement unit). */
static obx_result obx__wake_read(obx_store *s, int read, const obx__buf *ids, int64_t *woken) {
    obx__wake_ctx w;
    obx_result r;
    w.s = s;
    w.read = read;
    w.ids = ids;
    w.woken = 0;
    r = obx__unit_run(&s->db, obx__wake_unit, &w, "wake parked", OBX__UNIT_WRITE | OBX__UNIT_ONE_STATEMENT);
    if (r == OBX_OK) *woken = w.woken;
    return r;
}

/* The wake after a carried keyed ack, in the claim's unit: a failure
 * fails the claim (the ack is rolled back with it and sent alone). */
static obx_result obx__own_acked(obx__db *db, obx_store *s, const obx__buf *keys, int64_t rows) {
    obx__wake_ctx w;
    if (rows <= 0 || !OBX__SQL(s, OBX__Q_WAKE_SETTLED) || !OBX__SQL(s, OBX__Q_WAKE_IDS)) return OBX_OK;
    w.s = s;
    w.read = OBX__Q_WAKE_SETTLED;
    w.ids = &keys[0];
    w.woken = 0;
    return obx__wake_unit(db, &w);
}

/* A failed wake is logged and forgotten: the ack or fail it follows
 * committed and returns OK, so the store's last error is cleared again
 * (a dispatcher's short claim or the reap wakes what this missed). */
static void obx__own_settled(obx_store *s, const obx__buf *keys, int kind, int64_t rows) {
    obx__param p[1];
    int64_t woken = 0;
    obx_result r;
    if ((kind != OBX__SETTLE_ACK && kind != OBX__SETTLE_FAIL) || rows <= 0 || !s->own.keyed_claims ||
        !OBX__SQL(s, OBX__Q_WAKE_SETTLED))
        return;
    if (OBX__SQL(s, OBX__Q_WAKE_IDS)) {
        r = obx__wake_read(s, OBX__Q_WAKE_SETTLED, &keys[0], &woken);
    } else {
        obx__p_text(&p[0], keys[0].data, keys[0].len);
        r = obx__run_count(s, OBX__Q_WAKE_SETTLED, p, 1, "wake parked", &woken);
    }
    if (r != OBX_OK) {
        obx__log(&s->hooks, OBX_LOG_WARN, s->store_id,
                 "waking the messages parked behind finished ones failed: %s" OBX__WHY("; the reap wakes them"),
                 s->err.message);
        obx__error_clear(&s->err);
    }
}
#endif

static obx_result obx__own_wake(obx_store *s, const obx__buf *ids, int64_t *woken) {
    obx__param p[1];
    int slot = ids ? OBX__Q_WAKE_AGAIN : OBX__Q_WAKE;
#ifndef OBX_NO_MARIADB
    if (OBX__SQL(s, OBX__Q_WAKE_IDS)) return obx__wake_read(s, slot, ids, woken);
#endif
    if (ids) obx__p_text(&p[0], ids->data, ids->len);
    return obx__run_count(s, slot, p, ids ? 1 : 0, "wake parked", woken);
}

/* Without room for the ids, their wake is left to the wake of every key. */
static void obx__own_wake_later(obx_store *s, const obx_message *ms, int n) {
    int i;
    obx__buf *b = &s->own.wake_again;
    b->len = 0;
    if (!OBX__SQL(s, OBX__Q_WAKE_AGAIN)) return;
    for (i = 0; i < n; i++)
        if (ms[i].ordering_key && !obx__list_add(&s->hooks, b, s->db.d, ms[i].id, strlen(ms[i].id))) {
            b->len = 0;
            return;
        }
    if (b->len > 0 && !obx__list_end(&s->hooks, b, s->db.d)) b->len = 0;
}

static obx_result obx__own_wake_again(obx_store *s, int64_t *woken) {
    obx_result r;
    if (s->own.wake_again.len == 0) return OBX_OK;
    r = obx__own_wake(s, &s->own.wake_again, woken);
    s->own.wake_again.len = 0;
    return r;
}

#ifndef OBX_NO_ORDERING_KEYS
/* Drop s->msgs[i] (and its offsets) from a claim's batch of *count. */
static void obx__claim_drop(obx_store *s, int i, int *count) {
    memmove(&s->msgs[i], &s->msgs[i + 1], sizeof *s->msgs * (size_t)(*count - i - 1));
    memmove(&s->offsets[i], &s->offsets[i + 1], sizeof *s->offsets * (size_t)(*count - i - 1));
    (*count)--;
}

/* See "Ordered delivery per key": the keyed messages just claimed, checked
 * again now that the claim holds their keys. s->keys[0] (the pick's lists
 * are spent) carries their ids, then the ids to release. */
static obx_result obx__claim_recheck(obx__db *db, obx_store *s, int *count) {
    obx__buf *ids = &s->keys[0];
    obx__param p[2];
    SQLHSTMT cur = NULL;
    int i, keyed = 0, released = 0;
    obx_result r;
    if (!OBX__SQL(s, OBX__Q_CLAIM_CHECK)) return OBX_OK;
    ids->len = 0;
    for (i = 0; i < *count; i++)
        if (s->offsets[i].ordering_key != (size_t)-1) {
            if (!obx__list_add(&s->hooks, ids, db->d, s->msgs[i].id, 36))
                return obx__fail(db->err, OBX_ERR_NO_MEMORY, "claim", "out of memory");
            keyed++;
        }
    if (keyed == 0) return OBX_OK;
    if (!obx__list_end(&s->hooks, ids, db->d)) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "claim", "out of memory");
    obx__p_text(&p[0], s->token, 36);
    obx__p_text(&p[1], ids->data, ids->len);
    r = obx__exec(db, OBX__Q_CLAIM_CHECK, OBX__SQL(s, OBX__Q_CLAIM_CHECK), p, 2, NULL, &cur);
    if (r != OBX_OK) {
        /* MariaDB's NOWAIT met another claim's lock on the key: undo the
         * whole claim (whatever the server rolled back) and redo it. */
        if (db->err->native != 1205 || db->lost) return r;
        obx__rollback(db);
        obx__error_clear(db->err);
        return OBX__CLAIM_REDO;
    }
    ids->len = 0;
    while ((r = obx__fetch(db, cur)) == OBX_OK) {
        char id[40];
        SQLLEN ind = 0;
        r = obx__get_text(db, cur, 1, id, sizeof id, &ind);
        if (r != OBX_OK) break;
        for (i = 0; i < *count; i++)
            if (strcmp(s->msgs[i].id, id) == 0) {
                if (!obx__list_add(&s->hooks, ids, db->d, s->msgs[i].id, 36)) {
                    obx__close(cur);
                    return obx__fail(db->err, OBX_ERR_NO_MEMORY, "claim", "out of memory");
                }
                obx__claim_drop(s, i, count);
                released++;
                break;
            }
    }
    obx__close(cur);
    if (r != OBX_EMPTY) return r;
    if (released == 0 || !OBX__SQL(s, OBX__Q_CLAIM_RELEASE)) return OBX_OK;
    if (!obx__list_end(&s->hooks, ids, db->d)) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "claim", "out of memory");
    obx__p_text(&p[1], ids->data, ids->len);
    return obx__exec(db, OBX__Q_CLAIM_RELEASE, OBX__SQL(s, OBX__Q_CLAIM_RELEASE), p, 2, NULL, NULL);
}
#endif

/* ordering_dead_holds, where a Dead message waits: {H} in MariaDB's claim
 * check (the states that wait), {E} in the others' (the Dead state, or
 * none), and SQL Server's claim variant. */
static void obx__store_own_names(const obx__store_own *own, const char **names) {
    names['H' - 'A'] = own->dead_holds ? "IN (0, 3)" : "= 0";
    names['E' - 'A'] = own->dead_holds ? "3" : "NULL";
}

static void obx__store_own_sql(const obx__store_own *own, char **sql) {
    char *t = sql[OBX__Q_CLAIM];
    if (!own->dead_holds || !sql[OBX__Q_CLAIM_HOLD]) return;
    sql[OBX__Q_CLAIM] = sql[OBX__Q_CLAIM_HOLD];
    sql[OBX__Q_CLAIM_HOLD] = t;
}

static int obx__msg_key_add(const obx__hooks *h, const obx__dialect *d, obx__buf *keys,
                            const obx_message *m) {
    return obx__list_add(h, &keys[0], d, m->id, 36);
}

static void obx__msg_name(const obx_message *m, char *out, size_t size) {
    snprintf(out, size, "%s", m->id);
}

static const char *obx__desc_worker(const obx_store_desc *desc) { return desc->worker_name; }

#ifndef OBX_NO_MULTI_STORE /* only a provider sets it */
static void obx__desc_set_worker(obx_store_desc *desc, const char *worker) {
    desc->worker_name = worker;
}
#endif

static obx_result obx__read_message(obx__db *db, SQLHSTMT st, obx_message *m, obx__buf *buf,
                                    obx__row_offsets *o) {
    char text[40];
    SQLLEN ind;
    int64_t v;
    int is_null;
    obx_result r;
    int col;
    memset(m, 0, sizeof *m);
    for (col = 1; col <= 2; col++) {
        r = obx__get_text(db, st, col, text, sizeof text, &ind);
        if (r != OBX_OK) return r;
        obx__copy(col == 1 ? m->id : m->message_id, 37, ind == SQL_NULL_DATA ? "" : text);
    }
    /* psqlODBC renders uuid in upper case; ids are lower case here. */
    for (col = 0; col < 36; col++) {
        if (m->id[col] >= 'A' && m->id[col] <= 'F') m->id[col] = (char)(m->id[col] + 32);
        if (m->message_id[col] >= 'A' && m->message_id[col] <= 'F')
            m->message_id[col] = (char)(m->message_id[col] + 32);
    }
    if ((r = obx__get_append(db, st, 3, SQL_C_CHAR, buf, &o->topic, NULL)) != OBX_OK ||
        (r = obx__get_append(db, st, 4, SQL_C_CHAR, buf, &o->payload, &m->payload_len)) != OBX_OK ||
        (r = obx__get_append(db, st, 5, SQL_C_CHAR, buf, &o->correlation, NULL)) != OBX_OK ||
        (r = obx__get_i64(db, st, 6, &m->created_at_ms, NULL)) != OBX_OK ||
        (r = obx__get_i64(db, st, 7, &m->due_time_ms, NULL)) != OBX_OK ||
        (r = obx__get_i64(db, st, 8, &v, NULL)) != OBX_OK)
        return r;
    m->retry_count = (int)v;
    if ((r = obx__get_append(db, st, 9, SQL_C_CHAR, buf, &o->last_error, NULL)) != OBX_OK ||
        (r = obx__get_i64(db, st, 10, &v, NULL)) != OBX_OK)
        return r;
    m->status = (obx_status)v;
    m->is_processed = v == OBX_STATUS_DONE;
    if ((r = obx__get_i64(db, st, 11, &m->processed_at_ms, &is_null)) != OBX_OK ||
        (r = obx__get_append(db, st, 12, SQL_C_CHAR, buf, &o->processed_by, NULL)) != OBX_OK ||
        (r = obx__get_i64(db, st, 13, &m->locked_until_ms, NULL)) != OBX_OK)
        return r;
    r = obx__get_text(db, st, 14, text, sizeof text, &ind);
    if (r != OBX_OK) return r;
    obx__copy(m->owner_token, sizeof m->owner_token, ind == SQL_NULL_DATA ? "" : text);
    for (col = 0; m->owner_token[col]; col++)
        if (m->owner_token[col] >= 'A' && m->owner_token[col] <= 'F')
            m->owner_token[col] = (char)(m->owner_token[col] + 32);
    if ((r = obx__get_i64(db, st, 15, &m->next_attempt_ms, NULL)) != OBX_OK ||
        (r = obx__get_i64(db, st, 16, &v, NULL)) != OBX_OK)
        return r;
    m->starts = (int)v;
    if ((r = obx__get_append(db, st, 17, SQL_C_CHAR, buf, &o->ordering_key, NULL)) != OBX_OK ||
        (r = obx__read_envelope(db, st, 18, 15, buf, &o->env, &m->header_count)) != OBX_OK)
        return r;
    if ((r = obx__get_i64(db, st, 22, &m->expires_ms, NULL)) != OBX_OK) /* after the envelope's 18..21 */
        return r;
    return obx__get_priority(db, st, 23, &m->priority);
}

static obx_result obx__read_claimed(obx__db *db, SQLHSTMT st, const obx__row_head *head, const char *token,
                                    obx_message *m, obx__buf *buf, obx__row_offsets *o) {
    const unsigned opt = (unsigned)obx__head_int(head, 7);
    obx_result r;
    int k, i;
    memset(m, 0, sizeof *m);
    for (k = 0; k < 2; k++) {
        char *out = k == 0 ? m->id : m->message_id;
        obx__copy(out, 37, head->text_ind[k] == SQL_NULL_DATA ? "" : head->text[k]);
        for (i = 0; out[i]; i++) /* psqlODBC renders uuid in upper case */
            if (out[i] >= 'A' && out[i] <= 'F') out[i] = (char)(out[i] + 32);
    }
    m->created_at_ms = obx__head_int(head, 0);
    m->due_time_ms = obx__head_int(head, 1);
    m->retry_count = (int)obx__head_int(head, 2);
    m->locked_until_ms = obx__head_int(head, 3);
    m->next_attempt_ms = obx__head_int(head, 4);
    m->starts = (int)obx__head_int(head, 5);
    m->expires_ms = obx__head_int(head, 6);
    m->status = OBX_STATUS_IN_PROGRESS; /* not processed: no ProcessedAt, ProcessedBy */
    obx__copy(m->owner_token, sizeof m->owner_token, token);
    o->processed_by = (size_t)-1;
    if ((r = obx__get_append(db, st, 11, SQL_C_CHAR, buf, &o->topic, NULL)) != OBX_OK ||
        (r = obx__get_append(db, st, 12, SQL_C_CHAR, buf, &o->payload, &m->payload_len)) != OBX_OK ||
        (r = obx__get_opt(db, st, 13, SQL_C_CHAR, opt, 1, buf, &o->correlation, NULL)) != OBX_OK ||
        (r = obx__get_opt(db, st, 14, SQL_C_CHAR, opt, 2, buf, &o->last_error, NULL)) != OBX_OK ||
        (r = obx__get_opt(db, st, 15, SQL_C_CHAR, opt, 4, buf, &o->ordering_key, NULL)) != OBX_OK)
        return r;
    m->priority = (int)(opt >> 7) - 8; /* above the mask's 7 bits (OBX__CLAIM_MASK) */
    return obx__read_envelope(db, st, 16, (opt >> 3) & 15u, buf, &o->env, &m->header_count);
}

static void obx__point_strings(const obx__buf *buf, obx_message *m, const obx__row_offsets *o) {
    m->topic = obx__at(buf, o->topic);
    m->payload = obx__at(buf, o->payload);
    m->correlation_id = obx__at(buf, o->correlation);
    m->last_error = obx__at(buf, o->last_error);
    m->processed_by = obx__at(buf, o->processed_by);
    m->ordering_key = obx__at(buf, o->ordering_key);
    obx__point_envelope(buf, m, &o->env);
}

/* >> enqueue ------------------------------------------------------------------------ */

/* Check one message; `fn` and `index` (-1: single) name it in the error. */
static obx_result obx__check_message(obx_error *err, const char *fn, int index,
                                     const obx_new_message *m, size_t *payload_len) {
    char where[96], item[24] = "";
    size_t n;
    const char *nul;
    /* item ("messages[3].") is written only where an error may need it:
     * a batch checked every message with a snprintf. */
#define OBX__ITEM() (index >= 0 ? (void)snprintf(item, sizeof item, "messages[%d].", index) : (void)0)
#define OBX__BAD(arg, result, ...)                                           \
    do {                                                                     \
        OBX__ITEM();                                                         \
        snprintf(where, sizeof where, "%s: %s%s", fn, item, arg);            \
        return obx__fail(err, result, where, __VA_ARGS__);                   \
    } while (0)
    if (!m->topic || !m->topic[0]) OBX__BAD("topic", OBX_ERR_INVALID_ARG, "topic must not be NULL or empty");
    if (!obx__text_fits(m->topic, OBX_TOPIC_MAX))
        OBX__BAD("topic", OBX_ERR_INVALID_ARG, "topic must be valid UTF-8 of at most %d characters",
                 OBX_TOPIC_MAX);
    if (!m->payload) OBX__BAD("payload", OBX_ERR_INVALID_ARG, "payload must not be NULL" OBX__WHY(" (use \"\" for none)"));
    n = m->payload_len == OBX_NTS ? strlen((const char *)m->payload) : m->payload_len;
    nul = (const char *)memchr(m->payload, 0, n);
    if (nul)
        OBX__BAD("payload", OBX_ERR_INVALID_ARG,
                 "payload has a NUL byte at offset %lu"
                 OBX__WHY("; the text column cannot store it (encode binary data, e.g. base64)"),
                 (unsigned long)(nul - (const char *)m->payload));
    *payload_len = n;
    if (m->correlation_id && !obx__text_fits(m->correlation_id, OBX_CORRELATION_MAX))
        OBX__BAD("correlation_id", OBX_ERR_INVALID_ARG,
                 "correlation_id must be valid UTF-8 of at most %d characters", OBX_CORRELATION_MAX);
#ifndef OBX_NO_ORDERING_KEYS
    if (m->ordering_key && !obx__text_fits(m->ordering_key, OBX_ORDERING_KEY_MAX))
        OBX__BAD("ordering_key", OBX_ERR_INVALID_ARG,
                 "ordering_key must be valid UTF-8 of at most %d characters", OBX_ORDERING_KEY_MAX);
#else
    if (obx__opt_text(m->ordering_key))
        OBX__BAD("ordering_key", OBX_ERR_UNSUPPORTED,
                 "ordering_key: ordering keys were left out of this build (OBX_NO_ORDERING_KEYS)");
#endif
    if (m->due_utc_ms < 0 || m->due_utc_ms > OBX_TIME_MAX_MS)
        OBX__BAD("due_utc_ms", OBX_ERR_OUT_OF_RANGE,
                 "due_utc_ms must be 0 (now) or a Unix time in ms up to OBX_TIME_MAX_MS" OBX__WHY(" (year 9999)"));
    if (m->expires_utc_ms < 0 || m->expires_utc_ms > OBX_TIME_MAX_MS)
        OBX__BAD("expires_utc_ms", OBX_ERR_OUT_OF_RANGE,
                 "expires_utc_ms must be 0 (never) or a Unix time in ms up to OBX_TIME_MAX_MS" OBX__WHY(" (year 9999)"));
    if (m->expires_utc_ms > 0 && m->expires_utc_ms < m->due_utc_ms)
        OBX__BAD("expires_utc_ms", OBX_ERR_OUT_OF_RANGE, "expires_utc_ms must not be before due_utc_ms");
    if (m->priority < OBX_PRIORITY_MIN || m->priority > OBX_PRIORITY_MAX)
        OBX__BAD("priority", OBX_ERR_OUT_OF_RANGE, "priority must be %d..%d (0: the default), not %d",
                 OBX_PRIORITY_MIN, OBX_PRIORITY_MAX, m->priority);
    if (m->tenant_id || m->aggregate_type || m->aggregate_id || m->header_count != 0) OBX__ITEM();
    return obx__check_envelope(err, fn, item, m);
#undef OBX__BAD
#undef OBX__ITEM
}

typedef struct obx__enqueue_ops obx__enqueue_ops;
typedef struct obx__enqueue_ctx {
    obx_store *s;
    const obx_new_message *msgs;
    const size_t *lens;
    int count;
    char (*ids)[37];
    const obx__enqueue_ops *ops; /* NULL: one message at a time */
} obx__enqueue_ctx;

/* A batch statement takes up to 1,000 rows and about 1 MiB of values,
 * counted with their ids and a per-row allowance for numbers and lengths.
 * MariaDB refuses a packet over max_allowed_packet: this is a conservative
 * bound rather than the server's value read per connection, so the split is
 * known before the unit begins (it decides whether the unit needs a
 * transaction) and costs no round trip. The packet is then at most about
 * 1 MiB (the values of a multi-row VALUES travel as they are, a keyed
 * batch's key read as much less) or 6 MiB (the JSON of a keyed batch for
 * the caller's driver may escape a byte as six), within MariaDB's
 * default of 16 MiB; a server set below that may refuse a large batch
 * with error 1153, as it refuses a large single message. */
#define OBX__INSERT_CHUNK 1000
#define OBX__INSERT_CHUNK_BYTES ((size_t)1 << 20)
#define OBX__INSERT_ROW_BYTES 160

/* How many of messages from.. the next batch statement takes. */
static int obx__chunk_end(const obx__enqueue_ctx *c, int from) {
    size_t bytes = 0;
    int i;
    for (i = from; i < c->count && i - from < OBX__INSERT_CHUNK; i++) {
        const obx_new_message *m = &c->msgs[i];
        int k;
        bytes += OBX__INSERT_ROW_BYTES + c->lens[i] + strlen(m->topic);
        if (m->correlation_id) bytes += strlen(m->correlation_id);
        if (m->ordering_key) bytes += strlen(m->ordering_key);
        if (m->tenant_id) bytes += strlen(m->tenant_id);
        if (m->aggregate_type) bytes += strlen(m->aggregate_type);
        if (m->aggregate_id) bytes += strlen(m->aggregate_id);
        for (k = 0; k < m->header_count; k++) bytes += strlen(m->headers[k].key) + strlen(m->headers[k].value) + 6;
        if (i > from && bytes > OBX__INSERT_CHUNK_BYTES) break;
    }
    return i;
}

/* Whether m sets a column beyond the key and the first release's: the
 * envelope, an expiry, a priority. */
static int obx__has_extras(const obx_new_message *m) {
    return obx__has_envelope(m) || m->expires_utc_ms > 0 || m->priority != 0;
}

/* Whether m needs the statements with the ordering key and the envelope:
 * messages without either take the plain ones, as before both existed. */
static int obx__extended(const obx_new_message *m) {
    return !OBX__PLAIN_INSERT || obx__opt_text(m->ordering_key) || obx__has_extras(m);
}

/* One message's columns as a JSON row: ["id","message id","topic",
 * "payload",correlation or null,due ms or null] and, in an extended batch,
 * the ordering key, tenant, aggregate type, aggregate id, headers (the
 * JSON object as a string) and expiry ms, each or null, and the priority. One loop over the
 * values: a call per element costs more code than the table. */
static int obx__json_row_add(const obx__hooks *h, obx__buf *b, const char *id, const char *message_id,
                             const obx_new_message *m, size_t payload_len, const char *corr, int ext,
                             const char *headers) {
    char due[24], exp[24], prio[8];
    const char *v[13];
    int i, ok;
    snprintf(due, sizeof due, "%lld", (long long)m->due_utc_ms);
    snprintf(exp, sizeof exp, "%lld", (long long)m->expires_utc_ms);
    snprintf(prio, sizeof prio, "%d", m->priority);
    v[0] = id, v[1] = message_id, v[2] = m->topic, v[3] = (const char *)m->payload, v[4] = corr;
    v[5] = m->due_utc_ms > 0 ? due : NULL; /* numbers: 5 and 11, not quoted */
    v[6] = obx__opt_text(m->ordering_key), v[7] = obx__opt_text(m->tenant_id);
    v[8] = obx__opt_text(m->aggregate_type), v[9] = obx__opt_text(m->aggregate_id), v[10] = headers;
    v[11] = m->expires_utc_ms > 0 ? exp : NULL, v[12] = prio;
    ok = obx__buf_add(h, b, b->len == 0 ? "[[" : ",[", 2);
    for (i = 0; ok && i < (ext ? 13 : 6); i++) {
        if (i > 0 && !obx__buf_add(h, b, ",", 1)) return 0;
        if (!v[i]) ok = obx__buf_add(h, b, "null", 4);
        else if (i == 5 || i >= 11) ok = obx__buf_add(h, b, v[i], strlen(v[i]));
        else ok = obx__quoted_add(h, b, v[i], i == 3 ? payload_len : strlen(v[i]), 0);
    }
    return ok && obx__buf_add(h, b, "]", 1);
}

/* An optional text to a column list: the element, or a NULL one. */
static int obx__list_opt_add(const obx__hooks *h, obx__buf *b, const obx__dialect *d, const char *s) {
    return s ? obx__list_add(h, b, d, s, strlen(s)) : obx__list_add_null(h, b, d);
}

/* MariaDB's multi-row VALUES batch: only ODBC reaches MariaDB. */
#if !defined(OBX_NO_MARIADB) && !defined(OBX_SQLITE3_API)
#define OBX__VALUES_BATCH 1
/* A statement with parameters run once: SQLExecDirect, which MariaDB's
 * driver sends as prepare and execute together, one round trip. */
static obx_result obx__exec_once_direct(obx__db *db, const char *sql, obx__param *ps, int n) {
    unsigned char in_order[OBX__MAX_MARKERS];
    SQLHSTMT st = NULL;
    SQLRETURN rc;
    obx_result r;
    if (db->capture) return db->capture->add(db, sql, ps, n, 0, 0); /* for the caller's driver */
    memset(in_order, 0, sizeof in_order);
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return obx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    if (db->statement_timeout_s > 0)
        SQLSetStmtAttr(st, SQL_ATTR_QUERY_TIMEOUT, (SQLPOINTER)(uintptr_t)db->statement_timeout_s, 0);
    r = obx__bind(db, st, ps, n, in_order);
    if (r == OBX_OK && (rc = SQLExecDirect(st, OBX__SQLTEXT(sql), SQL_NTS)) != SQL_NO_DATA)
        r = obx__check(db, rc, SQL_HANDLE_STMT, st, "SQLExecDirect");
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

/* Message i's row of a multi-row VALUES: 7 parameters; `ext` 1: 13, with
 * the envelope; `ext` 2: 9, with the ordering key (OBX__Q_INSERT_VALUES_KEYED:
 * `seq` and `parked` are the row's, of obx__insert_keyed); 3: both, 15. */
static void obx__values_row(obx__param *q, const obx__enqueue_ctx *c, int i, const char *message_id,
                            const char *headers, int ext, const int64_t *seq, const unsigned char *parked) {
    const obx_new_message *m = &c->msgs[i];
    obx__p_text(&q[0], c->ids[i], 36);
    obx__p_text(&q[1], message_id, 36);
    obx__p_text(&q[2], m->topic, (size_t)-1);
    obx__p_text(&q[3], (const char *)m->payload, c->lens[i]);
    obx__p_text(&q[4], obx__opt_text(m->correlation_id), (size_t)-1);
    obx__p_i64(&q[5], m->due_utc_ms);
    if (m->due_utc_ms <= 0) q[5].ind = SQL_NULL_DATA;
    q[6] = q[5];
    if (ext & 2) { /* next attempt in us (OBX__MY_PARKED where parked), the key, its seq; then VALUES_ENV's */
        obx__p_i64(&q[6], *parked ? (OBX_TIME_MAX_MS + 1) * 1000 - 1 : m->due_utc_ms * 1000);
        if (!*parked && m->due_utc_ms <= 0) q[6].ind = SQL_NULL_DATA;
        obx__p_text(&q[7], obx__opt_text(m->ordering_key), (size_t)-1);
        obx__p_i64(&q[8], *seq);
        if (q[7].ind == SQL_NULL_DATA) q[8].ind = SQL_NULL_DATA;
        q += 2;
    }
    if (!(ext & 1)) return;
    obx__p_text(&q[7], obx__opt_text(m->tenant_id), (size_t)-1);
    obx__p_text(&q[8], obx__opt_text(m->aggregate_type), (size_t)-1);
    obx__p_text(&q[9], obx__opt_text(m->aggregate_id), (size_t)-1);
    obx__p_text(&q[10], headers, (size_t)-1);
    obx__p_i64(&q[11], m->expires_utc_ms);
    if (m->expires_utc_ms <= 0) q[11].ind = SQL_NULL_DATA;
    obx__p_i64(&q[12], m->priority);
}

/* Messages from..to, none with an ordering key, as one multi-row VALUES:
 * the one-row statement OBX__Q_INSERT_VALUES(_ENV) with its row repeated,
 * 7 (13 with the envelope and priority) parameters a row; with ext & 2,
 * any message with an ordering key, OBX__Q_INSERT_VALUES_KEYED(_ENV)'s, with
 * the rows' `seq` and `parked` (obx__insert_keyed). A row count met twice in a
 * row on the store's connection is prepared there and kept (values_rows
 * says which count the slot holds; a failed one is freed by obx__exec), so
 * a steady stream of equal batches is parsed once; any other count runs
 * once (obx__exec_once_direct), still one round trip. */
static obx_result obx__insert_values(obx__db *db, obx__enqueue_ctx *c, int from, int to, int ext,
                                     const int64_t *seq, const unsigned char *parked) {
    obx_store *s = c->s;
    obx__buf *text = &s->own.columns[0], *aux = &s->own.columns[1];
    static const unsigned char slots[4] = {OBX__Q_INSERT_VALUES, OBX__Q_INSERT_VALUES_ENV, OBX__Q_INSERT_VALUES_KEYED,
                                           OBX__Q_INSERT_VALUES_KEYED_ENV};
    static const unsigned char pers[4] = {7, 13, 9, 15};
    const int slot = slots[ext], per = pers[ext];
    const int rows = to - from;
    const char *one = s->sql[slot], *row;
    size_t *hdr_at = NULL;
    obx__param *p;
    int i, ok;
    row = strstr(one, ") VALUES (");
    OBX_ASSERT(row != NULL);
    row += 9; /* "(?, ...)" */
    /* The text: the one-row statement, then ", (row)" for each further row. */
    text->len = 0;
    ok = obx__buf_add(db->hooks, text, one, strlen(one));
    for (i = 1; ok && i < rows; i++) ok = obx__buf_add(db->hooks, text, ", ", 2) && obx__buf_add(db->hooks, text, row, strlen(row));
    /* The message ids and the headers' JSON, in one buffer; pointed at once it stops growing. */
    aux->len = 0;
    s->own.values.len = 0;
    ok = ok && obx__buf_reserve(db->hooks, &s->own.values, sizeof *p * (size_t)rows * (size_t)per + sizeof(size_t) * (size_t)rows);
    if (ok) hdr_at = (size_t *)(void *)(s->own.values.data + sizeof *p * (size_t)rows * (size_t)per);
    for (i = 0; ok && i < rows; i++) { /* the message ids first: row i's at i * 36 */
        char message_id[37];
        obx__new_uuid(s, c->ids[from + i]);
        obx__new_uuid(s, message_id);
        ok = obx__buf_add(db->hooks, aux, message_id, 36);
    }
    for (i = 0; ok && i < rows; i++) {
        const obx_new_message *m = &c->msgs[from + i];
        hdr_at[i] = (size_t)-1;
        if ((ext & 1) && m->header_count > 0 && (ok = obx__headers_json(db->hooks, &s->own.headers, m)) != 0) {
            hdr_at[i] = aux->len;
            ok = obx__buf_add(db->hooks, aux, s->own.headers.data, s->own.headers.len + 1); /* with its NUL */
        }
    }
    if (!ok) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_enqueue_batch", "out of memory");
    p = (obx__param *)(void *)s->own.values.data;
    for (i = 0; i < rows; i++)
        obx__values_row(p + (size_t)i * (size_t)per, c, from + i, aux->data + (size_t)i * 36,
                        hdr_at[i] == (size_t)-1 ? NULL : aux->data + hdr_at[i], ext, seq ? seq + i : NULL,
                        parked ? parked + i : NULL);
    if (db != &s->db) return obx__exec_once_direct(db, text->data, p, rows * per);
    if (!(db->stmt[slot] && s->own.values_rows[ext] == rows)) {
        int again = s->own.values_last[ext] == rows;
        s->own.values_last[ext] = rows;
        if (!again) return obx__exec_once_direct(db, text->data, p, rows * per);
        if (db->stmt[slot]) SQLFreeHandle(SQL_HANDLE_STMT, db->stmt[slot]);
        db->stmt[slot] = NULL;
        s->own.values_rows[ext] = rows;
    }
    return obx__exec(db, slot, text->data, p, rows * per, NULL, NULL);
}

#ifndef OBX_NO_ORDERING_KEYS
/* FNV-1a of a key: its slot in obx__insert_keyed's table. */
static size_t obx__key_hash(const char *k, size_t mask) {
    uint32_t h = 2166136261u;
    while (*k) h = (h ^ (unsigned char)*k++) * 16777619u;
    return (size_t)h & mask;
}

/* The distinct key `k` of a batch in `tab` (mask + 1 slots of indexes into
 * keys, -1 empty): its index, added as *n when new (*added set). */
static int obx__key_slot(int *tab, size_t mask, const char **keys, int *n, const char *k, int *added) {
    size_t h = obx__key_hash(k, mask);
    while (tab[h] >= 0 && strcmp(keys[tab[h]], k) != 0) h = (h + 1) & mask;
    *added = tab[h] < 0;
    if (*added) keys[tab[h] = (*n)++] = k;
    return tab[h];
}

/* OBX__Q_KEY_MAXIMA for keys[0..n): max[i] their largest OrderingSeq
 * Ready, in flight and Dead; refused outside READ COMMITTED. */
static obx_result obx__key_maxima(obx__db *db, obx_store *s, const char **keys, int n, int64_t (*max)[3]) {
    obx__buf *text = &s->own.columns[3];
    obx__param p;
    SQLHSTMT cur = NULL;
    obx_result r;
    int k = 0, i;
    text->len = 0;
    for (i = 0; i < n; i++)
        if (!obx__list_add(db->hooks, text, db->d, keys[i], strlen(keys[i]))) k = 1;
    if (k || !obx__list_end(db->hooks, text, db->d))
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_enqueue_batch", "out of memory");
    obx__p_text(&p, text->data, text->len);
    r = obx__exec(db, OBX__Q_KEY_MAXIMA, s->sql[OBX__Q_KEY_MAXIMA], &p, 1, NULL, &cur);
    for (k = 0; r == OBX_OK && (r = obx__fetch(db, cur)) == OBX_OK; k++) { /* a row per key, in order */
        char level[32] = "";
        SQLLEN ind = 0;
        if (k >= n) {
            r = obx__fail(db->err, OBX_ERR_DB, "obx_enqueue_batch", "the keys' maxima: more rows than keys");
            break;
        }
        if ((r = obx__get_i64(db, cur, 1, &max[k][0], NULL)) != OBX_OK ||
            (r = obx__get_i64(db, cur, 2, &max[k][1], NULL)) != OBX_OK ||
            (r = obx__get_i64(db, cur, 3, &max[k][2], NULL)) != OBX_OK ||
            (k == 0 && (r = obx__get_text(db, cur, 4, level, sizeof level, &ind)) != OBX_OK))
            break;
        if (k == 0 && ind != SQL_NULL_DATA) r = obx__isolation_check(db->err, level);
    }
    obx__close(cur);
    if (r == OBX_EMPTY && k < n) r = obx__fail(db->err, OBX_ERR_DB, "obx_enqueue_batch", "the keys' maxima: a row missing");
    return r == OBX_EMPTY ? OBX_OK : r;
}

/* Messages from..to, some with an ordering key, as OBX__Q_INSERT_MANY_KEYED
 * numbers and parks them: a key's OrderingSeq is 1 + its largest not Done
 * + the message's place in the statement less 1; parked when the key has a
 * Ready or in-flight row, or an earlier one in the statement. The keys'
 * maxima come from OBX__Q_KEY_MAXIMA, a plain read (no locks, as
 * OBX__Q_KEY_READ; at SERIALIZABLE it would lock: refused), then the rows
 * go as one multi-row VALUES (obx__insert_values). */
static obx_result obx__insert_keyed(obx__db *db, obx__enqueue_ctx *c, int from, int to) {
    obx_store *s = c->s;
    obx__buf *b = &s->own.columns[2];
    const int rows = to - from;
    size_t mask = 1, i;
    int n = 0, *tab, *key_of, added = 0, env = 0;
    const char **keys;
    int64_t (*max)[3], *seq;
    unsigned char *parked;
    obx_result r;
    while (mask < 2 * (size_t)rows) mask <<= 1;
    /* One allocation: per key its maxima; per row its seq; the distinct
     * keys; their hash table; per row its key's index and its park. */
    b->len = 0;
    if (!obx__buf_reserve(db->hooks, b, (size_t)rows * (sizeof *max + sizeof *seq + sizeof *keys + sizeof(int) + 1) +
                                           mask * sizeof(int)))
        return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_enqueue_batch", "out of memory");
    max = (int64_t (*)[3])(void *)b->data;
    seq = (int64_t *)(max + rows);
    keys = (const char **)(void *)(seq + rows);
    tab = (int *)(void *)(keys + rows);
    key_of = tab + mask;
    parked = (unsigned char *)(key_of + rows);
    mask--;
    for (i = 0; i <= mask; i++) tab[i] = -1;
    for (i = 0; i < (size_t)rows; i++) {
        const obx_new_message *m = &c->msgs[from + (int)i];
        const char *key = obx__opt_text(m->ordering_key);
        env = env || obx__has_extras(m);
        key_of[i] = key ? obx__key_slot(tab, mask, keys, &n, key, &added) : -1;
        parked[i] = key && !added; /* behind an earlier one of the statement */
    }
    if ((r = obx__key_maxima(db, c->s, keys, n, max)) != OBX_OK) return r;
    for (i = 0; i < (size_t)rows; i++) {
        const int64_t *mk = key_of[i] >= 0 ? max[key_of[i]] : NULL;
        seq[i] = mk ? (mk[0] > mk[1] ? (mk[0] > mk[2] ? mk[0] : mk[2]) : (mk[1] > mk[2] ? mk[1] : mk[2])) + (int64_t)i + 1 : 0;
        parked[i] = mk && (parked[i] || mk[0] > 0 || mk[1] > 0);
    }
    return obx__insert_values(db, c, from, to, env ? 3 : 2, seq, parked);
}
#endif

#endif /* MariaDB's VALUES batch */

/* Messages from..to as one multi-row statement (dialects that have one):
 * one list per column, or one JSON array of rows, or (MariaDB, no ordering
 * key among them) a multi-row VALUES. The extended statement only where a
 * message has an ordering key or an envelope: the plain one does no key
 * work and binds no envelope. */
static obx_result obx__insert_chunk(obx__db *db, obx__enqueue_ctx *c, int from, int to) {
    obx_store *s = c->s;
    obx__buf *col = s->own.columns;
    obx__param p[OBX__INSERT_LISTS];
    int i, k, ok = 1, ext = 0, keyed = 0, rows = OBX__ONE(db->d)->batch_as_json_rows, lists;
    for (i = from; i < to; i++) {
        ext = ext || obx__extended(&c->msgs[i]);
        keyed = keyed || obx__opt_text(c->msgs[i].ordering_key) != NULL;
    }
#ifdef OBX__VALUES_BATCH
    if (!keyed && OBX__SQL(s, OBX__Q_INSERT_VALUES_ENV)) return obx__insert_values(db, c, from, to, ext, NULL, NULL);
#ifndef OBX_NO_ORDERING_KEYS
    /* The JSON rows for the caller's driver: no statement there reads another's result. */
    if (keyed && !db->capture && OBX__SQL(s, OBX__Q_INSERT_VALUES_KEYED)) return obx__insert_keyed(db, c, from, to);
#endif
#endif
    lists = rows ? 1 : ext ? OBX__INSERT_LISTS : 6;
    for (k = 0; k < OBX__INSERT_LISTS; k++) col[k].len = 0;
    for (i = from; i < to && ok; i++) {
        const obx_new_message *m = &c->msgs[i];
        char message_id[37], due[24], exp[24], prio[8];
        const char *corr = obx__opt_text(m->correlation_id), *headers = NULL;
        obx__new_uuid(s, c->ids[i]);
        obx__new_uuid(s, message_id);
        if (m->header_count > 0) {
            if (!(ok = obx__headers_json(db->hooks, &s->own.headers, m))) break;
            headers = s->own.headers.data;
        }
        if (rows) {
            ok = obx__json_row_add(db->hooks, &col[0], c->ids[i], message_id, m, c->lens[i], corr, ext, headers);
            continue;
        }
        snprintf(due, sizeof due, "%lld", (long long)m->due_utc_ms);
        snprintf(exp, sizeof exp, "%lld", (long long)m->expires_utc_ms);
        snprintf(prio, sizeof prio, "%d", m->priority);
        ok = obx__list_add(db->hooks, &col[0], db->d, c->ids[i], 36) &&
             obx__list_add(db->hooks, &col[1], db->d, message_id, 36) &&
             obx__list_add(db->hooks, &col[2], db->d, m->topic, strlen(m->topic)) &&
             obx__list_add(db->hooks, &col[3], db->d, (const char *)m->payload, c->lens[i]) &&
             obx__list_opt_add(db->hooks, &col[4], db->d, corr) &&
             obx__list_opt_add(db->hooks, &col[5], db->d, m->due_utc_ms > 0 ? due : NULL) &&
             (!ext || (obx__list_opt_add(db->hooks, &col[6], db->d, obx__opt_text(m->ordering_key)) &&
                       obx__list_opt_add(db->hooks, &col[7], db->d, obx__opt_text(m->tenant_id)) &&
                       obx__list_opt_add(db->hooks, &col[8], db->d, obx__opt_text(m->aggregate_type)) &&
                       obx__list_opt_add(db->hooks, &col[9], db->d, obx__opt_text(m->aggregate_id)) &&
                       obx__list_opt_add(db->hooks, &col[10], db->d, headers) &&
                       obx__list_opt_add(db->hooks, &col[11], db->d, m->expires_utc_ms > 0 ? exp : NULL) &&
                       obx__list_add(db->hooks, &col[12], db->d, prio, strlen(prio))));
    }
    for (k = 0; k < lists && ok; k++) {
        ok = obx__list_end(db->hooks, &col[k], db->d);
        obx__p_text(&p[k], col[k].data, col[k].len);
    }
    if (!ok) return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_enqueue_batch", "out of memory");
    k = ext ? OBX__Q_INSERT_MANY_KEYED : OBX__Q_INSERT_MANY;
    return obx__exec(db, k, s->sql[k], p, lists, NULL, NULL);
}


/* OBX__Q_KEY_READ for key p[0]: refused at SERIALIZABLE, where InnoDB
 * makes the read a locking one (see obx_enqueue_tx). */
static obx_result obx__key_read(obx__db *db, const char *sql, obx__param *key) {
    SQLHSTMT cur = NULL;
    char level[32] = "";
    SQLLEN ind = 0;
    obx_result r;
    if (db->capture) return db->capture->add(db, sql, key, 1, 3, 0); /* the caller checks column 3 */
    r = obx__exec(db, OBX__Q_KEY_READ, sql, key, 1, NULL, &cur);
    if (r == OBX_OK && (r = obx__fetch(db, cur)) == OBX_OK)
        r = obx__get_text(db, cur, 3, level, sizeof level, &ind);
    obx__close(cur);
    if (r == OBX_EMPTY) r = obx__fail(db->err, OBX_ERR_DB, "obx_enqueue", "the key's state read no row");
    if (r == OBX_OK && ind != SQL_NULL_DATA) r = obx__isolation_check(db->err, level);
    return r;
}

/* On SQLite's own C API a batch is one prepared single-row INSERT per
 * message in the unit's one transaction, as a SQLite program would do it:
 * nothing built or parsed per batch. The multi-row statements pack a
 * batch into one execute for ODBC, where every execute compiled its text
 * again; statements for the caller's driver (obx_enqueue_sql) keep them. */
#ifdef OBX_SQLITE3_API
#define OBX__ROW_INSERTS 1
#else
#define OBX__ROW_INSERTS 0
#endif

/* What only a batch (obx_enqueue_batch, obx_enqueue_sql) and the
 * recording (obx_enqueue_sql) need, reached through the table those calls
 * pass: a program that enqueues one message at a time links neither
 * (--gc-sections). */
struct obx__enqueue_ops {
    int (*chunk_end)(const obx__enqueue_ctx *c, int from);
    obx_result (*insert_chunk)(obx__db *db, obx__enqueue_ctx *c, int from, int to);
    obx__capture_fn capture;
};

static obx_result obx__insert_messages(obx__db *db, void *vctx) {
    obx__enqueue_ctx *c = (obx__enqueue_ctx *)vctx;
    int i;
    if (c->count > 1 && c->ops && c->s->sql[OBX__Q_INSERT_MANY_KEYED] && (!OBX__ROW_INSERTS || db->capture)) {
        obx_result r = OBX_OK;
        int to;
        for (i = 0; i < c->count && r == OBX_OK; i = to) {
            to = c->ops->chunk_end(c, i);
            r = c->ops->insert_chunk(db, c, i, to);
        }
        return r == OBX_OK && db->capture ? obx__capture_ids(db, c->ids, c->count) : r;
    }
    for (i = 0; i < c->count; i++) {
        const obx_new_message *m = &c->msgs[i];
        char message_id[37];
        obx__param p[14];
        const char *corr = obx__opt_text(m->correlation_id);
        obx_result r;
        obx__new_uuid(c->s, c->ids[i]);
        obx__new_uuid(c->s, message_id);
        obx__p_text(&p[0], c->ids[i], 36);
        obx__p_text(&p[1], message_id, 36);
        obx__p_text(&p[2], m->topic, (size_t)-1);
        obx__p_text(&p[3], (const char *)m->payload, c->lens[i]);
        obx__p_text(&p[4], corr, (size_t)-1);
        if (m->due_utc_ms > 0) {
            obx__p_i64(&p[5], m->due_utc_ms);
            obx__p_i64(&p[6], m->due_utc_ms);
        } else {
            obx__p_i64(&p[5], 0);
            p[5].ind = SQL_NULL_DATA;
            p[6] = p[5];
        }
        if (!obx__extended(m)) {
            r = obx__exec(db, OBX__Q_INSERT, c->s->sql[OBX__Q_INSERT], p, 7, NULL, NULL);
            if (r != OBX_OK) return r;
            continue;
        }
        /* A key (the statement that orders it) or an envelope. */
        if (!obx__envelope_params(db->hooks, &c->s->own.headers, &p[8], m))
            return obx__fail(db->err, OBX_ERR_NO_MEMORY, "obx_enqueue", "out of memory");
        obx__p_text(&p[7], obx__opt_text(m->ordering_key), (size_t)-1);
        if (p[7].ind != SQL_NULL_DATA && OBX__SQL(c->s, OBX__Q_KEY_READ) &&
            (r = obx__key_read(db, OBX__SQL(c->s, OBX__Q_KEY_READ), &p[7])) != OBX_OK)
            return r;
        obx__p_i64(&p[12], m->expires_utc_ms);
        if (m->expires_utc_ms <= 0) p[12].ind = SQL_NULL_DATA;
        obx__p_i64(&p[13], m->priority);
        r = obx__exec(db, OBX__Q_INSERT_KEYED, c->s->sql[OBX__Q_INSERT_KEYED], p, 14, NULL, NULL);
        if (r != OBX_OK) return r;
    }
    return db->capture ? obx__capture_ids(db, c->ids, c->count) : OBX_OK;
}

static void obx__enqueued_log(obx_store *s, const obx_new_message *msgs, char (*ids)[37], int count,
                              const char *how) {
    int i;
    for (i = 0; i < count && obx__log_enabled(&s->hooks, s->message_log_level); i++) {
        char topic[OBX__KV_CAP], correlation[OBX__KV_CAP];
        obx__log(&s->hooks, s->message_log_level, s->store_id, "enqueued %s topic=%s correlation=%s%s", ids[i],
                 obx__kv(topic, msgs[i].topic),
                 msgs[i].correlation_id && msgs[i].correlation_id[0] ? obx__kv(correlation, msgs[i].correlation_id) : "-",
                 how);
    }
}

/* Enqueue msgs[0..count) in the store's transaction (hdbc NULL), the
 * caller's on hdbc, or (out_sql set) as statements for the caller's own
 * driver, with `markers` (obx_enqueue_sql). `ops`: what a batch needs, and
 * the recording for out_sql; NULL for one message. */
static obx_result obx__enqueue_many(obx_store *s, void *hdbc, const obx_new_message *msgs,
                                    int count, char (*out_ids)[37], const char *fn, int markers,
                                    obx_sql **out_sql, const obx__enqueue_ops *ops) {
    size_t one_len;
    size_t *lens = &one_len;
    char one_id[37];
    char (*ids)[37] = NULL; /* copied to out_ids only on success */
    obx__enqueue_ctx ctx;
    obx_result r;
    int i;
    char where[64]; /* for the errors of msgs and count: written only for them */
    obx_sql *sql = NULL;
    r = obx__store_ready(s, fn);
    if (r != OBX_OK) return r;
    if (count < 0 || (count > 0 && !msgs))
        snprintf(where, sizeof where, "%s: %s", fn,
                 strcmp(fn, "obx_enqueue_batch") == 0 || out_sql ? "messages" : "message");
    if (count < 0) return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "count must be >= 0");
    if (count == 0 && !out_sql) return OBX_OK; /* nothing to do, whatever msgs is */
    ctx.s = s;
    ctx.msgs = msgs;
    ctx.lens = lens;
    ctx.count = count;
    ctx.ids = NULL;
    ctx.ops = ops;
    if (count == 0) return ops->capture(s, obx__insert_messages, &ctx, markers, out_sql); /* none */
    if (!msgs) return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "must not be NULL");
    if (count > 1) {
        lens = (size_t *)obx__alloc(&s->hooks, sizeof *lens * (size_t)count);
        if (!lens) return obx__fail(&s->err, OBX_ERR_NO_MEMORY, fn, "out of memory");
    }
    ids = count > 1 ? (char (*)[37])obx__alloc(&s->hooks, 37 * (size_t)count) : &one_id;
    if (!ids) r = obx__fail(&s->err, OBX_ERR_NO_MEMORY, fn, "out of memory");
    for (i = 0; r == OBX_OK && i < count; i++)
        r = obx__check_message(&s->err, fn, count > 1 ? i : -1, &msgs[i], &lens[i]);
    if (r == OBX_OK) r = obx__pending_room(s, hdbc, fn, count);
    if (r == OBX_OK) {
        ctx.lens = lens;
        ctx.ids = ids;
        int one = count == 1 || (!OBX__ROW_INSERTS && ops && s->sql[OBX__Q_INSERT_MANY_KEYED] &&
                             ops->chunk_end(&ctx, 0) == count);
        if (out_sql)
            r = ops->capture(s, obx__insert_messages, &ctx, markers, &sql);
        else
            r = obx__unit_or_caller(s, hdbc, obx__insert_messages, &ctx, fn,
                                    OBX__UNIT_WRITE | (one ? OBX__UNIT_ONE_STATEMENT : 0));
    }
    if (r == OBX_OK) {
        if (out_sql) *out_sql = sql;
        else if (!hdbc) obx__wake_send(&s->wake_fd, s->wake_path);
        if (out_ids) memcpy(out_ids, ids, 37 * (size_t)count);
        obx__count(s, OBX_METRIC_ENQUEUED, count);
        obx__enqueued_log(s, msgs, ids, count,
                          out_sql ? " (statements for the caller's driver)" : hdbc ? " (in caller's transaction)" : "");
    }
    if (lens != &one_len) obx__free(&s->hooks, lens);
    if (ids != &one_id) obx__free(&s->hooks, ids);
    return r;
}

OBX_API obx_result obx_enqueue(obx_store *store, const obx_new_message *message, char out_id[37]) {
    return obx__enqueue_many(store, NULL, message, 1, (char (*)[37])out_id, "obx_enqueue", 0, NULL, NULL);
}

OBX_API obx_result obx_enqueue_tx(obx_store *store, void *hdbc, const obx_new_message *message,
                                  char out_id[37]) {
    if (store && !hdbc)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_enqueue_tx: hdbc",
                         "hdbc must be the caller's connection");
    return obx__enqueue_many(store, hdbc, message, 1, (char (*)[37])out_id, "obx_enqueue_tx", 0, NULL, NULL);
}

static const obx__enqueue_ops obx__batch_ops = {obx__chunk_end, obx__insert_chunk, NULL};
static const obx__enqueue_ops obx__sql_ops = {obx__chunk_end, obx__insert_chunk, obx__unit_capture};

OBX_API obx_result obx_enqueue_batch(obx_store *store, void *hdbc,
                                     const obx_new_message *messages, int count,
                                     char (*out_ids)[37]) {
    return obx__enqueue_many(store, hdbc, messages, count, out_ids, "obx_enqueue_batch", 0, NULL, &obx__batch_ops);
}

OBX_API obx_result obx_enqueue_sql(obx_store *store, const obx_new_message *messages, int count,
                                   int markers, obx_sql **out_sql, char (*out_ids)[37]) {
    obx_result r = obx__sql_args(store, "obx_enqueue_sql", markers, out_sql);
    if (r != OBX_OK) return r;
    return obx__enqueue_many(store, NULL, messages, count, out_ids, "obx_enqueue_sql", markers, out_sql,
                             &obx__sql_ops);
}

/* >> get ---------------------------------------------------------------------------- */

#ifndef OBX_NO_DEAD_LETTERS
/* The outbox's dead-letter key: a work item id. */
static obx_result obx__dead_key(obx_store *s, const char *fn, const obx_dead_filter *f,
                                obx__param p[2], char buf[37]) {
    char where[96];
    obx__p_text(&p[1], NULL, 0);
    if (!f->id) {
        obx__p_text(&p[0], NULL, 0);
        return OBX_OK;
    }
    if (!obx__uuid_is_valid(f->id)) {
        snprintf(where, sizeof where, "%s: filter.id", fn);
        return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "id must be a UUID");
    }
    obx__lower_uuid(f->id, buf);
    obx__p_text(&p[0], buf, 36);
    return OBX_OK;
}
#endif

#ifndef OBX_NO_DEAD_LETTERS
/* The outbox's key of obx_dead_move and obx_run_now: a work item id, into p[k]. */
static obx_result obx__one_key(obx_store *s, const char *fn, const char *id, obx__param *p, char lower[37]) {
    char where[96];
    obx_result r = obx__store_ready(s, fn);
    if (r != OBX_OK) return r;
    snprintf(where, sizeof where, "%s: id", fn);
    if (!obx__uuid_is_valid(id)) return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "id must be a UUID");
    obx__lower_uuid(id, lower);
    obx__p_text(p, lower, 36);
    return OBX_OK;
}

OBX_API obx_result obx_dead_move(obx_store *store, const char *id, const char *reason, int in_flight,
                                 int64_t *moved) {
    obx__param p[3];
    char lower[37];
    obx_result r = obx__one_key(store, "obx_dead_move", id, &p[1], lower);
    if (r != OBX_OK) return r;
    obx__p_i64(&p[2], in_flight ? 1 : 0);
    return obx__one_message(store, "obx_dead_move", OBX__Q_MOVE, reason, p, 3, lower, moved);
}

OBX_API obx_result obx_run_now(obx_store *store, const char *id, int64_t *changed) {
    obx__param p[1];
    char lower[37];
    obx_result r = obx__one_key(store, "obx_run_now", id, &p[0], lower);
    if (r != OBX_OK) return r;
    return obx__one_message(store, "obx_run_now", OBX__Q_RUN_NOW, NULL, p, 1, lower, changed);
}
#endif

OBX_API obx_result obx_get(obx_store *store, const char *id, obx_message *message) {
    obx__param p[1];
    char lower[37];
    obx_result r = obx__store_ready(store, "obx_get");
    if (r != OBX_OK) return r;
    if (!message) return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_get: message", "must not be NULL");
    if (!obx__uuid_is_valid(id)) return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_get: id", "id must be a UUID");
    obx__lower_uuid(id, lower);
    obx__p_text(&p[0], lower, 36);
    r = obx__get_by_key(store, p, 1, message);
    if (r == OBX_EMPTY) return obx__fail(&store->err, OBX_ERR_NOT_FOUND, "obx_get: id", "no message %s", id);
    return r;
}

/* >> ack, abandon, fail ------------------------------------------------------------ */

/* Check a settle call's ids and put them in the store's key list. */
static obx_result obx__settle_ids(obx_store *s, const char *fn, const char *owner,
                                  const char *const *ids, int count) {
    char where[96], lower[37];
    int i;
    obx_result r = obx__settle_begin(s, fn, owner, count, ids);
    if (r != OBX_OK) return r;
    for (i = 0; i < count; i++) {
        if (!obx__uuid_is_valid(ids[i])) {
            snprintf(where, sizeof where, "%s: ids[%d]", fn, i);
            return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "not a UUID");
        }
        obx__lower_uuid(ids[i], lower);
        if (!obx__list_add(&s->hooks, &s->keys[0], s->db.d, lower, 36))
            return obx__fail(&s->err, OBX_ERR_NO_MEMORY, fn, "out of memory");
    }
    return obx__key_lists_end(s, fn);
}

OBX_API obx_result obx_ack(obx_store *store, const char *owner_token, const char *const *ids,
                           int count, int64_t *changed) {
    obx_result r = obx__settle_ids(store, "obx_ack", owner_token, ids, count);
    return r != OBX_OK ? r : obx__settle(store, OBX__SETTLE_ACK, count, NULL, 0, 0, changed);
}

OBX_API obx_result obx_abandon(obx_store *store, const char *owner_token,
                               const char *const *ids, int count, const char *last_error,
                               int64_t delay_ms, int64_t *changed) {
    obx_result r = obx__settle_ids(store, "obx_abandon", owner_token, ids, count);
    if (r == OBX_OK) r = obx__check_delay(store, "obx_abandon", delay_ms);
    if (r == OBX_OK) r = obx__check_utf8(&store->err, "obx_abandon", "last_error", last_error);
    return r != OBX_OK ? r : obx__settle(store, OBX__SETTLE_ABANDON, count, last_error, delay_ms, 1, changed);
}

OBX_API obx_result obx_lease_extend(obx_store *store, const char *owner_token,
                                    const char *const *ids, int count, int lease_seconds,
                                    int64_t *changed) {
    obx_result r = obx__settle_ids(store, "obx_lease_extend", owner_token, ids, count);
    if (r == OBX_OK) r = obx__check_lease(store, "obx_lease_extend", lease_seconds);
    return r != OBX_OK ? r : obx__settle(store, OBX__SETTLE_EXTEND, count, NULL, lease_seconds, 0, changed);
}

OBX_API obx_result obx_fail(obx_store *store, const char *owner_token, const char *const *ids,
                            int count, const char *last_error, int64_t *changed) {
    obx_result r = obx__settle_ids(store, "obx_fail", owner_token, ids, count);
    if (r == OBX_OK) r = obx__check_utf8(&store->err, "obx_fail", "last_error", last_error);
    return r != OBX_OK ? r : obx__settle(store, OBX__SETTLE_FAIL, count, last_error, 0, 0, changed);
}

#ifndef OBX_NO_JOIN
/* >> joins ------------------------------------------------------------------------- */

static obx_result obx__check_uuid_arg(obx_store *s, const char *fn, const char *arg, const char *value) {
    char where[96];
    if (obx__uuid_is_valid(value)) return OBX_OK;
    snprintf(where, sizeof where, "%s: %s", fn, arg);
    return obx__fail(&s->err, OBX_ERR_INVALID_ARG, where, "%s must be a UUID", arg);
}

OBX_API obx_result obx_join_start(obx_store *store, const char *grouping_key, int expected_steps,
                                  const char *metadata, char out_join_id[37]) {
    obx__param p[4];
    char id[37];
    obx_result r = obx__store_ready(store, "obx_join_start");
    if (r != OBX_OK) return r;
    if (!out_join_id) /* a join nobody could name would wait for ever */
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_start: out_join_id", "must not be NULL");
    if (expected_steps < 1)
        return obx__fail(&store->err, OBX_ERR_OUT_OF_RANGE, "obx_join_start: expected_steps",
                         "expected_steps must be >= 1, got %d", expected_steps);
    if (grouping_key && !obx__text_fits(grouping_key, 255))
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_start: grouping_key",
                         "grouping_key must be valid UTF-8 of at most 255 characters");
    if ((r = obx__check_utf8(&store->err, "obx_join_start", "metadata", metadata)) != OBX_OK) return r;
    obx__new_uuid(store, id);
    obx__p_text(&p[0], id, 36);
    obx__p_text(&p[1], grouping_key && grouping_key[0] ? grouping_key : NULL, (size_t)-1);
    obx__p_i64(&p[2], expected_steps);
    obx__p_text(&p[3], metadata, (size_t)-1);
    r = obx__run_count(store, OBX__Q_JOIN_START, p, 4, "join start", NULL);
    if (r != OBX_OK) return r;
    {
        char key[OBX__KV_CAP];
        obx__log(&store->hooks, OBX_LOG_INFO, store->store_id, "join %s started: %d step(s), key=%s", id,
                 expected_steps, grouping_key && grouping_key[0] ? obx__kv(key, grouping_key) : "-");
    }
    memcpy(out_join_id, id, 37);
    return OBX_OK;
}

typedef struct obx__join_ctx {
    obx_store *s;
    const char *join_id;
    obx_join *join;
    int found;
} obx__join_ctx;

static obx_result obx__join_read(obx__db *db, void *vctx) {
    obx__join_ctx *c = (obx__join_ctx *)vctx;
    obx_store *s = c->s;
    obx__param p[1];
    SQLHSTMT cur = NULL;
    char text[40];
    SQLLEN ind = 0;
    size_t key_off = (size_t)-1, meta_off = (size_t)-1;
    int64_t v[4];
    obx_result r;
    int i;
    c->found = 0;
    s->read_rows.len = 0;
    obx__p_text(&p[0], c->join_id, 36);
    r = obx__exec(db, OBX__Q_JOIN_GET, s->sql[OBX__Q_JOIN_GET], p, 1, NULL, &cur);
    if (r == OBX_OK) r = obx__fetch(db, cur);
    if (r == OBX_OK)
        r = obx__get_text(db, cur, 1, text, sizeof text, &ind);
    if (r == OBX_OK) r = obx__get_append(db, cur, 2, SQL_C_CHAR, &s->read_rows, &key_off, NULL);
    for (i = 0; r == OBX_OK && i < 4; i++) r = obx__get_i64(db, cur, 3 + i, &v[i], NULL);
    if (r == OBX_OK) r = obx__get_append(db, cur, 7, SQL_C_CHAR, &s->read_rows, &meta_off, NULL);
    if (r == OBX_OK) r = obx__get_i64(db, cur, 8, &c->join->created_ms, NULL);
    if (r == OBX_OK) r = obx__get_i64(db, cur, 9, &c->join->updated_ms, NULL);
    obx__close(cur);
    if (r == OBX_EMPTY) return OBX_OK;
    if (r != OBX_OK) return r;
    c->found = 1;
    obx__copy(c->join->id, sizeof c->join->id, text);
    for (i = 0; c->join->id[i]; i++)
        if (c->join->id[i] >= 'A' && c->join->id[i] <= 'F') c->join->id[i] = (char)(c->join->id[i] + 32);
    c->join->grouping_key = obx__at(&s->read_rows, key_off);
    c->join->expected_steps = (int)v[0];
    c->join->completed_steps = (int)v[1];
    c->join->failed_steps = (int)v[2];
    c->join->status = (obx_join_status)v[3];
    c->join->metadata = obx__at(&s->read_rows, meta_off);
    return OBX_OK;
}

OBX_API obx_result obx_join_get(obx_store *store, const char *join_id, obx_join *join) {
    obx__join_ctx ctx;
    obx_join j;
    char lower[37];
    obx_result r = obx__store_ready(store, "obx_join_get");
    if (r != OBX_OK) return r;
    if ((r = obx__check_uuid_arg(store, "obx_join_get", "join_id", join_id)) != OBX_OK) return r;
    if (!join) return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_get: join", "must not be NULL");
    memset(&j, 0, sizeof j);
    obx__lower_uuid(join_id, lower);
    ctx.s = store;
    ctx.join_id = lower;
    ctx.join = &j;
    r = obx__unit_read(&store->db, obx__join_read, &ctx, "join get");
    if (r != OBX_OK) return r;
    if (!ctx.found) return obx__fail(&store->err, OBX_ERR_NOT_FOUND, "obx_join_get", "no join %s", join_id);
    *join = j;
    return OBX_OK;
}

typedef struct obx__attach_ctx {
    obx_store *s;
    const char *join_id, *message_id;
    int status;                  /* 0: attach only; 1/2: report */
    int missing;                 /* the join does not exist */
} obx__attach_ctx;

/* The message's status, its row locked for the rest of the unit (-1: no
 * such message yet, e.g. enqueued in a transaction not committed). */
static obx_result obx__attach_lock_message(obx__db *db, obx__attach_ctx *c, int64_t *status) {
    obx__param p[1];
    SQLHSTMT cur = NULL;
    obx_result r;
    *status = -1;
    obx__p_text(&p[0], c->message_id, 36);
    r = obx__exec(db, OBX__Q_JOIN_MESSAGE, c->s->sql[OBX__Q_JOIN_MESSAGE], p, 1, NULL, &cur);
    if (r == OBX_OK) r = obx__fetch(db, cur);
    if (r == OBX_OK) r = obx__get_i64(db, cur, 1, status, NULL);
    obx__close(cur);
    return r == OBX_EMPTY ? OBX_OK : r;
}

/* Attach (and report): the message row is locked first, so that a settle
 * of the same message runs wholly before or after. A member attached after
 * its message was acked or failed counts at once (its trigger ran before
 * the member existed); one attached before is counted by that trigger.
 * A message enqueued in a transaction not yet committed: MariaDB's locking
 * read waits for that commit (SQL Server's UPDLOCK read should too, on the
 * insert's key lock: not verified on a server); SQLite has one writer; PostgreSQL's finds no row and locks nothing, so its JoinLate
 * trigger looks again at the attach's commit (OBX-JOIN-ATTACH-RACE). */
static obx_result obx__attach_unit(obx__db *db, void *vctx) {
    obx__attach_ctx *c = (obx__attach_ctx *)vctx;
    obx_store *s = c->s;
    obx__param p[3];
    int64_t rows = 0, message_status = -1;
    int report = c->status;
    obx_result r = obx__attach_lock_message(db, c, &message_status);
    obx__p_text(&p[0], c->message_id, 36);
    obx__p_text(&p[1], c->join_id, 36);
    if (r == OBX_OK) r = obx__exec(db, OBX__Q_JOIN_ATTACH, s->sql[OBX__Q_JOIN_ATTACH], p, 2, &rows, NULL);
    if (r == OBX_OK && rows == 0) { /* attached before, or no such join? */
        obx_join j;
        obx__join_ctx jc;
        jc.s = s;
        jc.join_id = c->join_id;
        jc.join = &j;
        r = obx__join_read(db, &jc);
        c->missing = r == OBX_OK && !jc.found;
    }
    if (!report && rows > 0 && message_status == OBX_STATUS_DONE) report = 1;
    if (!report && rows > 0 && message_status == OBX_STATUS_FAILED) report = 2;
    if (r == OBX_OK && !c->missing && report) {
        /* Pending -> done/failed once; the member trigger counts it. */
        obx__p_i64(&p[0], report);
        obx__p_text(&p[1], c->join_id, 36);
        obx__p_text(&p[2], c->message_id, 36);
        r = obx__exec(db, OBX__Q_JOIN_REPORT, s->sql[OBX__Q_JOIN_REPORT], p, 3, NULL, NULL);
    }
    return r;
}

static obx_result obx__attach(obx_store *store, void *hdbc, const char *fn, const char *join_id,
                              const char *message_id, int status) {
    obx__attach_ctx ctx;
    char join_lower[37], message_lower[37];
    obx_result r = obx__store_ready(store, fn);
    if (r != OBX_OK) return r;
    if ((r = obx__check_uuid_arg(store, fn, "join_id", join_id)) != OBX_OK ||
        (r = obx__check_uuid_arg(store, fn, "message_id", message_id)) != OBX_OK)
        return r;
    obx__lower_uuid(join_id, join_lower);
    obx__lower_uuid(message_id, message_lower);
    ctx.s = store;
    ctx.join_id = join_lower;
    ctx.message_id = message_lower;
    ctx.status = status;
    ctx.missing = 0;
    r = obx__unit_or_caller(store, hdbc, obx__attach_unit, &ctx, fn, OBX__UNIT_WRITE);
    if (r != OBX_OK) return r;
    if (ctx.missing) return obx__fail(&store->err, OBX_ERR_NOT_FOUND, fn, "no join %s", join_id);
    return OBX_OK;
}

OBX_API obx_result obx_join_attach(obx_store *store, const char *join_id, const char *message_id) {
    return obx__attach(store, NULL, "obx_join_attach", join_id, message_id, 0);
}

OBX_API obx_result obx_join_attach_tx(obx_store *store, void *hdbc, const char *join_id,
                                      const char *message_id) {
    if (store && !hdbc)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_attach_tx: hdbc", "must not be NULL");
    return obx__attach(store, hdbc, "obx_join_attach_tx", join_id, message_id, 0);
}

OBX_API obx_result obx_join_report(obx_store *store, const char *join_id, const char *message_id,
                                   int failed) {
    return obx__attach(store, NULL, "obx_join_report", join_id, message_id, failed ? 2 : 1);
}

OBX_API obx_result obx_join_report_tx(obx_store *store, void *hdbc, const char *join_id,
                                      const char *message_id, int failed) {
    if (store && !hdbc)
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_report_tx: hdbc", "must not be NULL");
    return obx__attach(store, hdbc, "obx_join_report_tx", join_id, message_id, failed ? 2 : 1);
}

/* The join.wait payload: a flat JSON object the library writes and reads. */
static int obx__json_string(obx__buf *b, const obx__hooks *h, const char *key, const char *value, int first) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p;
    if (!obx__buf_add(h, b, first ? "{\"" : ",\"", 2) || !obx__buf_add(h, b, key, strlen(key)) ||
        !obx__buf_add(h, b, "\":", 2))
        return 0;
    if (!value) return obx__buf_add(h, b, "null", 4);
    if (!obx__buf_add(h, b, "\"", 1)) return 0;
    for (p = (const unsigned char *)value; *p; p++) {
        char esc[7];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            if (!obx__buf_add(h, b, esc, 2)) return 0;
        } else if (*p < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            if (!obx__buf_add(h, b, esc, 6)) return 0;
        } else if (!obx__buf_add(h, b, (const char *)p, 1)) {
            return 0;
        }
    }
    return obx__buf_add(h, b, "\"", 1);
}

/* The value of "key" in a flat JSON object: a string (every JSON escape
 * decoded, \u to UTF-8, so a payload from another serializer reads the
 * same), or true/false as text. 1 = found, 0 = absent or null, -1 =
 * malformed or longer than cap - 1 bytes. Never reads past the terminator. */
static int obx__json_get(const char *json, const char *key, char *out, size_t cap) {
    char pattern[48];
    const char *p;
    size_t o = 0;
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    p = strstr(json, pattern);
    if (!p) return 0;
    p += strlen(pattern);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (strncmp(p, "null", 4) == 0) return 0;
    if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
        if (cap < 6) return -1;
        obx__copy(out, cap, p[0] == 't' ? "true" : "false");
        return 1;
    }
    if (*p++ != '"') return -1;
    while (*p != '"') {
        char one[4];
        size_t n = 1;
        if (*p == '\0') return -1; /* unterminated */
        if (*p == '\\') {
            p++;
            if ((n = obx__json_unescape(&p, one)) == 0) return -1;
        } else {
            one[0] = *p++;
        }
        if (o + n >= cap) return -1;
        memcpy(out + o, one, n);
        o += n;
    }
    out[o] = '\0';
    return 1;
}

OBX_API obx_result obx_join_enqueue_wait(obx_store *store, void *hdbc, const obx_join_wait *w,
                                         char out_id[37]) {
    obx__buf b = {NULL, 0, 0};
    obx_new_message m;
    char join_id[37];
    obx_result r = obx__store_ready(store, "obx_join_enqueue_wait");
    int ok;
    if (r != OBX_OK) return r;
    if (!w) return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_enqueue_wait: wait", "must not be NULL");
    if ((r = obx__check_uuid_arg(store, "obx_join_enqueue_wait", "join_id", w->join_id)) != OBX_OK) return r;
    obx__lower_uuid(w->join_id, join_id); /* the one form every statement compares */
    if (w->on_complete_topic && !obx__text_fits(w->on_complete_topic, OBX_TOPIC_MAX))
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_enqueue_wait: on_complete_topic",
                         "on_complete_topic must be valid UTF-8 of at most 255 characters");
    if (w->on_fail_topic && !obx__text_fits(w->on_fail_topic, OBX_TOPIC_MAX))
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_enqueue_wait: on_fail_topic",
                         "on_fail_topic must be valid UTF-8 of at most 255 characters");
    if ((r = obx__check_utf8(&store->err, "obx_join_enqueue_wait", "on_complete_payload",
                             w->on_complete_payload)) != OBX_OK ||
        (r = obx__check_utf8(&store->err, "obx_join_enqueue_wait", "on_fail_payload", w->on_fail_payload)) != OBX_OK)
        return r;
    ok = obx__json_string(&b, &store->hooks, "joinId", join_id, 1) &&
         obx__json_string(&b, &store->hooks, "onCompleteTopic", w->on_complete_topic, 0) &&
         obx__json_string(&b, &store->hooks, "onCompletePayload", w->on_complete_payload, 0) &&
         obx__json_string(&b, &store->hooks, "onFailTopic", w->on_fail_topic, 0) &&
         obx__json_string(&b, &store->hooks, "onFailPayload", w->on_fail_payload, 0) &&
         obx__buf_add(&store->hooks, &b, w->fail_if_any_step_failed ? ",\"failIfAnyStepFailed\":true}"
                                                                    : ",\"failIfAnyStepFailed\":false}",
                      w->fail_if_any_step_failed ? 28 : 29);
    if (!ok) {
        obx__buf_free(&store->hooks, &b);
        return obx__fail(&store->err, OBX_ERR_NO_MEMORY, "obx_join_enqueue_wait", "out of memory");
    }
    memset(&m, 0, sizeof m);
    m.topic = "join.wait";
    m.payload = b.data;
    m.payload_len = b.len;
    m.correlation_id = join_id;
    r = hdbc ? obx_enqueue_tx(store, hdbc, &m, out_id) : obx_enqueue(store, &m, out_id);
    obx__buf_free(&store->hooks, &b);
    return r;
}

typedef struct obx__finish_ctx {
    obx_store *s;
    const char *join_id;
    int status;
    const obx_new_message *follow;   /* NULL: none */
    int finished;
} obx__finish_ctx;

/* Mark the join finished and enqueue its follow-up in one transaction, so
 * a join.wait delivered twice enqueues once. */
static obx_result obx__finish_unit(obx__db *db, void *vctx) {
    obx__finish_ctx *c = (obx__finish_ctx *)vctx;
    obx__param p[2];
    int64_t rows = 0;
    obx_result r;
    obx__p_i64(&p[0], c->status);
    obx__p_text(&p[1], c->join_id, 36);
    r = obx__exec(db, OBX__Q_JOIN_FINISH, c->s->sql[OBX__Q_JOIN_FINISH], p, 2, &rows, NULL);
    c->finished = r == OBX_OK && rows == 1;
    if (r == OBX_OK && c->finished && c->follow) {
        obx__enqueue_ctx e;
        size_t len = strlen((const char *)c->follow->payload);
        char id[1][37];
        e.s = c->s;
        e.msgs = c->follow;
        e.lens = &len;
        e.count = 1;
        e.ids = id;
        r = obx__insert_messages(db, &e);
    }
    return r;
}

OBX_API obx_result obx_join_cancel(obx_store *store, const char *join_id) {
    obx__finish_ctx ctx;
    char id[37];
    obx_join j;
    obx_result r = obx__store_ready(store, "obx_join_cancel");
    if (r != OBX_OK) return r;
    if (!join_id || !obx__uuid_is_valid(join_id))
        return obx__fail(&store->err, OBX_ERR_INVALID_ARG, "obx_join_cancel: join_id", "join_id must be a UUID");
    obx__lower_uuid(join_id, id);
    ctx.s = store;
    ctx.join_id = id;
    ctx.status = OBX_JOIN_CANCELLED;
    ctx.follow = NULL;
    ctx.finished = 0;
    r = obx__unit(&store->db, obx__finish_unit, &ctx, "join cancel");
    if (r != OBX_OK) return r;
    if (ctx.finished) {
        obx__log(&store->hooks, OBX_LOG_INFO, store->store_id, "join %s cancelled", id);
        return OBX_OK;
    }
    r = obx_join_get(store, id, &j); /* not pending: why? */
    if (r != OBX_OK || j.status == OBX_JOIN_CANCELLED) return r;
    return obx__fail(&store->err, OBX_ERR_STATE, "obx_join_cancel",
                     "join %s is already %s", id, j.status == OBX_JOIN_COMPLETED ? "completed" : "failed");
}

/* The follow-up message a join.wait payload asks for on success or failure
 * (its topic into `topic`, its payload allocated into *payload): 1, or 0
 * when it asks for none, -1 when out of memory. */
static int obx__join_follow(obx_store *s, const char *wait_payload, int fail, const char *join_id,
                            char *topic, size_t topic_size, char **payload, obx_new_message *follow) {
    size_t cap = strlen(wait_payload) + 1;
    memset(follow, 0, sizeof *follow);
    if (obx__json_get(wait_payload, fail ? "onFailTopic" : "onCompleteTopic", topic, topic_size) != 1)
        return 0;
    *payload = (char *)obx__alloc(&s->hooks, cap);
    if (!*payload) return -1;
    if (obx__json_get(wait_payload, fail ? "onFailPayload" : "onCompletePayload", *payload, cap) != 1)
        (*payload)[0] = '\0';
    follow->topic = topic;
    follow->payload = *payload;
    follow->payload_len = OBX_NTS;
    follow->correlation_id = join_id;
    return 1;
}

OBX_API obx_outcome obx_join_wait_handler(const obx_message *m, char *error, size_t error_size,
                                          void *user) {
    obx_store *s = m ? m->store : NULL;
    char fallback[64], join_id[40], fail_flag[8], topic[1024], *payload = NULL;
    obx_join j;
    obx_result r;
    int fail, has_topic;
    obx__finish_ctx ctx;
    obx_new_message follow;
    (void)user;
    if (!error || error_size == 0) error = fallback, error_size = sizeof fallback;
    if (!s || !m->payload || obx__json_get(m->payload, "joinId", join_id, sizeof join_id) != 1) {
        snprintf(error, error_size, "join.wait %s", !s ? "message (or its store) is NULL" : "payload has no joinId");
        return OBX_DEAD;
    }
    if (!obx__uuid_is_valid(join_id)) { /* never becomes valid: dead at once */
        snprintf(error, error_size, "join.wait payload's joinId is not a UUID");
        return OBX_DEAD;
    }
    obx__lower_uuid(join_id, join_id); /* an earlier release wrote it as given */
    r = obx_join_get(s, join_id, &j);
    if (r == OBX_ERR_NOT_FOUND) {
        snprintf(error, error_size, "join %s does not exist", join_id);
        return OBX_DEAD;
    }
    if (r != OBX_OK) {
        snprintf(error, error_size, "reading join %s: %s", join_id, s->err.message);
        return OBX_RETRY;
    }
    if (j.status != OBX_JOIN_PENDING) return OBX_DONE; /* finished by an earlier delivery */
    if (j.completed_steps + j.failed_steps < j.expected_steps) {
        snprintf(error, error_size, "join %s: %d of %d steps in", join_id,
                 j.completed_steps + j.failed_steps, j.expected_steps);
        return OBX_WAIT; /* OBX-091: later, without using up attempts */
    }
    fail = obx__json_get(m->payload, "failIfAnyStepFailed", fail_flag, sizeof fail_flag) == 1 &&
           strcmp(fail_flag, "true") == 0 && j.failed_steps > 0;
    has_topic = obx__join_follow(s, m->payload, fail, join_id, topic, sizeof topic, &payload, &follow);
    if (has_topic < 0) { /* our own shortage, not the join's: try again without using an attempt */
        snprintf(error, error_size, "out of memory");
        return OBX_WAIT;
    }
    ctx.s = s;
    ctx.join_id = join_id;
    ctx.status = fail ? OBX_JOIN_FAILED : OBX_JOIN_COMPLETED;
    ctx.follow = has_topic ? &follow : NULL;
    ctx.finished = 0;
    r = obx__unit(&s->db, obx__finish_unit, &ctx, "join finish");
    obx__free(&s->hooks, payload);
    if (r != OBX_OK) {
        snprintf(error, error_size, "finishing join %s: %s", join_id, s->err.message);
        return OBX_RETRY;
    }
    if (!ctx.finished && obx_join_get(s, join_id, &j) == OBX_OK && j.status == OBX_JOIN_PENDING) { /* not DONE */
        snprintf(error, error_size, "join %s: finishing changed nothing", join_id);
        return OBX_RETRY;
    }
    if (ctx.finished)
        obx__log(&s->hooks, OBX_LOG_INFO, s->store_id, "join %s %s (%d done, %d failed)%s%s", join_id,
                 fail ? "failed" : "completed", j.completed_steps, j.failed_steps,
                 has_topic ? ": enqueued " : "", has_topic ? topic : "");
    return OBX_DONE;
}
#endif /* OBX_NO_JOIN */

#endif /* OBX_IMPLEMENTATION */

/*
 * LICENSE -----------------------------------------------------------------------
 * MIT License. Copyright (c) 2026 the obx.h / ibx.h authors.
 * Permission is hereby granted, free of charge, to any person obtaining a copy
 * of this software and associated documentation files (the "Software"), to deal
 * in the Software without restriction, including without limitation the rights
 * to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 * copies of the Software, and to permit persons to whom the Software is
 * furnished to do so, subject to the following conditions: the above copyright
 * notice and this permission notice shall be included in all copies or
 * substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS",
 * WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO
 * THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
 * NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
 * FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT,
 * TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR
 * THE USE OR OTHER DEALINGS IN THE SOFTWARE.
 */
