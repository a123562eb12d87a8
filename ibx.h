/* ibx.h — an idempotent inbox for C, over ODBC.                   v0.2.0
 *
 * Messages from outside (webhooks, brokers, other services) are recorded by
 * (source, message id) and an optional content hash, so a redelivery is
 * recognised and not processed twice; new ones are queued and handed to a
 * handler by topic, with leases, retries, backoff and dead-lettering.
 * One file holds the whole library, STB style:
 *
 *     #define IBX_IMPLEMENTATION      // in exactly one .c file
 *     #include "ibx.h"
 *
 * Every other file includes "ibx.h" without the define. Link with -lodbc
 * (unixODBC). Requires C99; compiles as C++ too. ibx.h and obx.h (the
 * outbox) share their core, so one program can use both.
 *
 * CONTENTS
 *   1. Quick start           5. Errors
 *   2. Compile-time options  6. Databases and ODBC notes
 *   3. Runtime options       7. Testing with the fake ODBC layer
 *   4. Threads               8. License (end of file)
 *   Then the API: common (results, hooks, limits, backoff, selection,
 *   UUIDs), store and messages (dedup, mark, enqueue, ack, abandon, fail,
 *   lease extend, get), SHA-256 and HMAC, the work queue and dispatcher
 *   (claim, reap, cleanup, metrics, providers, routers, batch handlers,
 *   pauses), dead letters (list, replay: the inbox's revive, purge).
 *
 * 1. QUICK START ------------------------------------------------------------
 *   A whole program (it is compiled and run by `make check`): record a
 *   delivery from outside, see its redelivery recognised, handle it once.
 *
 *     #define IBX_IMPLEMENTATION
 *     #include "ibx.h"
 *     #include <stdio.h>
 *     #include <string.h>
 *
 *     static ibx_outcome on_payment(const ibx_message *m, char *error, size_t size, void *user) {
 *         (void)error; (void)size; (void)user;
 *         printf("handle %s from %s: %s\n", m->message_id, m->source, m->payload);
 *         return IBX_DONE; // or IBX_RETRY with a reason in `error`: tried again later
 *     }
 *
 *     // One delivery from outside: queued once, whatever the redeliveries.
 *     static ibx_result receive(ibx_store *store, const char *event_id, const char *body) {
 *         unsigned char hash[32];
 *         ibx_new_message m = {0};
 *         int done = 0;
 *         ibx_result r;
 *         ibx_sha256(body, strlen(body), hash);
 *         r = ibx_already_processed(store, event_id, "stripe", hash, sizeof hash, &done);
 *         if (r != IBX_OK || done) return r; // handled before: acknowledge, do nothing
 *         m.topic = "payment.received";
 *         m.source = "stripe";
 *         m.message_id = event_id;
 *         m.payload = body;
 *         m.payload_len = IBX_NTS;
 *         m.hash = hash;
 *         m.hash_len = sizeof hash;
 *         return ibx_enqueue(store, &m, NULL);
 *     }
 *
 *     int main(void) {
 *         ibx_store_desc desc = {0};
 *         ibx_dispatcher_desc dd = {0};
 *         ibx_store *store = NULL;
 *         ibx_dispatcher *d = NULL;
 *         ibx_result r;
 *         desc.connection_string = "Driver={SQLite3};Database=inbox-quickstart.db;JournalMode=WAL;";
 *         desc.deploy_schema = 1; // create the table if it is missing
 *         if (ibx_store_open(&desc, &store) != IBX_OK) {
 *             fprintf(stderr, "open: %s\n", ibx_store_last_error(store)->message);
 *             ibx_store_close(store);
 *             return 1;
 *         }
 *         r = receive(store, "evt_1", "{\"amount\":42}");
 *         if (r == IBX_OK) r = receive(store, "evt_1", "{\"amount\":42}"); // a redelivery
 *         dd.store = store;
 *         if (r == IBX_OK) r = ibx_dispatcher_create(&dd, &d);
 *         if (r == IBX_OK) r = ibx_dispatcher_on(d, "payment.received", on_payment, NULL);
 *         // A service calls ibx_dispatcher_run(d); here: rounds until nothing is left.
 *         while (r == IBX_OK) r = ibx_dispatcher_run_once(d, NULL);
 *         if (r != IBX_EMPTY) fprintf(stderr, "%s\n", ibx_store_last_error(store)->message);
 *         ibx_dispatcher_destroy(d);
 *         ibx_store_close(store);
 *         return r == IBX_EMPTY ? 0 : 1;
 *     }
 */
/* >>common-begin manual */
/*
 * 2. COMPILE-TIME OPTIONS --------------------------------------------------
 *   global (must be the same wherever ibx.h is included):
 *     IBX_API            linkage of public functions (default: extern)
 *     IBX_STATIC         make every public function static (one-TU use)
 *   implementation-only (matter only where IBX_IMPLEMENTATION is defined):
 *     IBX_ASSERT(c)      assertion used for internal invariants (assert)
 *     IBX_NO_POSIX_CLOCK build without clock_gettime()/nanosleep(); give
 *                        the store a clock hook then (a dispatcher without
 *                        one is refused: it could not sleep between polls)
 *     IBX_NO_THREADS     build without threads: ibx_dispatcher_wake() does
 *                        nothing, run() sleeps in 50 ms slices, leases are
 *                        not renewed while handlers run, and a dispatcher
 *                        does not listen at its wake_path
 *     IBX_NO_WAKE_SOCKET build without sockets: a wake_path (store or
 *                        dispatcher desc) is IBX_ERR_UNSUPPORTED (always
 *                        so on Windows)
 *     IBX_SQLITE3_API    reach SQLite through its own C API instead of ODBC
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
 *     IBX_NO_SQLITE, IBX_NO_POSTGRESQL, IBX_NO_MARIADB, IBX_NO_SQLSERVER
 *                        leave that dialect's SQL out (a gateway that only
 *                        talks to SQLite needs none of the others); a store
 *                        on a left-out dialect is IBX_ERR_UNSUPPORTED
 *     IBX_PORTABLE_FALLBACKS  use what macOS has instead of what it lacks
 *                        (on by itself on Apple; forced, it tests that path
 *                        on Linux, glibc 2.36+): condition-variable waits on
 *                        CLOCK_REALTIME deadlines (no
 *                        pthread_condattr_setclock; a wall-clock step
 *                        shifts one short wait slice) and the random seed
 *                        from arc4random_buf (no /dev/urandom)
 *     IBX_TERSE_MESSAGES error and log texts without the sentence that
 *                        explains them (how to fix it, what happens next):
 *                        `where` (call and argument), the result, the
 *                        cause and the database's own text stay; an
 *                        internal assertion says only its line; about
 *                        1.1 KB less on each header
 *   global, for a gateway that needs less (define them for the whole
 *   program: a left-out function is not declared, so calling it is a
 *   compile error; the schema and every struct stay the same):
 *     IBX_NO_MULTI_STORE  no providers or routers (ibx_provider_*,
 *                         ibx_router_*): a dispatcher serves one store
 *     IBX_NO_METRICS_TEXT no ibx_metrics_text, nor the handler-duration
 *                         histograms only it reports (ibx_store_counters
 *                         and ibx_queue_stats stay)
 *     IBX_NO_DEAD_LETTERS no ibx_dead_list/_replay/_purge, ibx_dead_move,
 *                         ibx_run_now (dead messages
 *                         are still kept; tools built without the option
 *                         handle them)
 *     IBX_NO_ENVELOPE     no envelope on enqueue: a message that sets
 *                         tenant_id, aggregate_type, aggregate_id or headers
 *                         is refused with IBX_ERR_UNSUPPORTED naming the
 *                         field; messages read back have none (the columns
 *                         are not read); no ibx_message_header(_at)
 *   The implementation needs POSIX 2008 (clock_gettime, condition-variable
 *   clocks). It arranges that itself: in strict ISO mode (-std=c99, c11,
 *   ...) it defines _POSIX_C_SOURCE 200809L when no feature-test macro is
 *   set (GNU mode needs nothing). Only when a system header came before
 *   ibx.h in that file in strict mode is it too late; then an #error says to
 *   include ibx.h (with IBX_IMPLEMENTATION) before any other header there,
 *   or to compile it with -D_POSIX_C_SOURCE=200809L. No flag beyond
 *   -pthread and -lodbc (-lsqlite3 with IBX_SQLITE3_API).
 *   Windows (_WIN32; mingw-w64, and code kept to what MSVC takes) needs no
 *   POSIX: the implementation uses Win32 itself, a thin layer in "head"
 *   (SRW locks, condition variables, _beginthreadex, INIT_ONCE; the system
 *   time, the performance counter and Sleep; rand_s for the seed; never
 *   winpthreads), and Windows' own ODBC:
 *   `x86_64-w64-mingw32-gcc -std=c99 app.c -lodbc32` (MSVC: odbc32.lib).
 *   Left out there: the wake socket (a wake_path is IBX_ERR_UNSUPPORTED
 *   naming wake_path; a dispatcher polls). make check-windows builds both
 *   headers with mingw-w64 and -Werror and runs the fake-ODBC tests under
 *   Wine; no real driver nor MSVC is run by the tests.
 *
 * 3. RUNTIME OPTIONS --------------------------------------------------------
 *   Descriptions are structs where all-zero means "the default"; each field
 *   says its default where it is declared. Hooks (ibx_hooks): allocator,
 *   clock, logger and random source, each a struct of function pointers
 *   plus a `user` pointer; a NULL function pointer means "the default for
 *   that member":
 *     allocator  malloc / realloc / free (give all three or none: a
 *                half-set allocator is refused with IBX_ERR_INVALID_ARG)
 *     clock      CLOCK_REALTIME for UTC wall time, CLOCK_MONOTONIC for
 *                intervals, nanosleep for sleeping (Windows: the system
 *                time, the performance counter, Sleep)
 *     logger     one line per event to stderr (UTC time, process id,
 *                level, store, text), level INFO and up or what
 *                IBX_LOG_LEVEL says (debug, info, warn, error, off); lines
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
 *   Priority (ibx_new_message.priority, -5..5, 0 the default): a claim
 *   takes the higher priority first among due messages, one level worth
 *   10 s of waiting (aging: nothing starves); the outbox's ordering keys
 *   keep their order whatever the priorities. docs/FEATURES.md, "Priority".
 *   Dispatching (ibx_dispatcher_desc): handlers take one message each
 *   (ibx_dispatcher_on), or all of a claim's messages of their topic in
 *   one call with an outcome per message (ibx_dispatcher_on_batch). A
 *   handler's IBX_PAUSE (downstream unavailable) puts the message back
 *   without using an attempt and pauses its topic for pause_ms, doubling
 *   up to pause_max_ms until the topic's first success; other topics go on.
 *   Transactional handlers (ibx_dispatcher_on_tx): exactly once for what
 *   a handler writes to the store's own database. The handler gets the
 *   store's connection (an SQLHDBC; with IBX_SQLITE3_API the sqlite3 *) in
 *   a transaction the dispatcher opened for its message. On IBX_DONE the
 *   ack runs in that transaction and checks that the lease is still this
 *   dispatcher's (its owner token on the row, in flight), and one commit
 *   makes the writes and Done durable together; a crash anywhere before
 *   the commit leaves neither, after it both (IBX-TXH-KILL). A lease lost
 *   by then (reaped, claimed elsewhere): everything rolled back, counted in
 *   ibx_run_stats.lease_lost, no attempt used. IBX_RETRY, _DEAD, _WAIT,
 *   _PAUSE: the writes are rolled back, then the message is settled as
 *   usual (a retry uses an attempt; dead means dead with no effect; a
 *   connection lost at the ack or the commit uses none). A
 *   deadlock or serialization failure (the handler says IBX_CONFLICT, or
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
 *   The batch form (ibx_dispatcher_on_batch_tx) commits when every result
 *   is IBX_DONE; otherwise it rolls back, the other outcomes stand, and
 *   the done messages run again alone.
 *   Dead messages are tools' work: ibx_dead_list (paged, filtered),
 *   ibx_dead_replay (ready again, attempts reset, last error kept, expiry
 *   dropped) and ibx_dead_purge; ibx_dead_move (an operator's cancel: a
 *   message to Dead with a reason) and ibx_run_now (a scheduled one due
 *   now). Crash loops: a message claimed max_starts times (store
 *   desc, default 3) without an outcome, its handler having killed the
 *   process each time, ends dead at the next reap instead of taking a
 *   worker down again; a dispatcher handles a message claimed before
 *   without an outcome alone, after the rest of its batch is settled.
 *   Schema: deploy_schema and ibx_store_deploy create the tables, or
 *   upgrade in place those an older release deployed (rows kept; new
 *   PostgreSQL and SQLite tables put the fixed-width hot columns first, an
 *   old table keeps its order: ibx_store_rewrite, by hand, PostgreSQL). A deploy
 *   looks in the catalog before each statement that would lock the table
 *   and changes only what is missing or different, so on an up-to-date
 *   schema (every start with deploy_schema, every deploy by the operator's tool) it takes
 *   no lock that blocks writers. A change waits for its lock at most 5 s
 *   and says so (INFO; WARN and IBX_ERR_DB_TRANSIENT when the lock did not
 *   come). What an upgrade locks: PostgreSQL runs it as one transaction,
 *   so from its first added column to its commit the table is under ACCESS
 *   EXCLUSIVE (no reads, no writes), index builds included. MariaDB
 *   commits each statement: most added columns are instant, but the
 *   outbox's PERSISTENT generated columns (ordering) copy the table, writers
 *   waiting for the copy; storage layout 2's state columns are added
 *   VIRTUAL (instant; a new table has them PERSISTENT, which InnoDB's purge
 *   never computes; converting an old table is a copy, docs/RELIABILITY.md)
 *   and their indexes are built online, beside layout 1's
 *   indexes, which the previous release forces; ibx_store_upgrade (obxctl
 *   upgrade) converts old keys to UUID and drops those indexes when asked.
 *   A changed trigger gets a new name and is created
 *   before the old one is dropped, so no settle runs without one. Times
 *   measured: docs/UPGRADING.md.
 *
 * 4. THREADS ----------------------------------------------------------------
 *   A store owns one ODBC connection and is used by one thread at a time;
 *   so is a provider and a dispatcher. Give each thread its own (a producing
 *   thread and a dispatching thread each open their own store or provider).
 *   Thread-safe: ibx_dispatcher_wake() and ibx_dispatcher_stop() (call them
 *   from any thread), and the pure functions (backoff, selection, UUIDs,
 *   identifier checks). Opening connections is serialized internally, for
 *   both headers together (psqlODBC is not safe to connect from two
 *   threads at once). With a custom clock.sleep_ms hook the dispatcher
 *   sleeps through the hook, so ibx_dispatcher_wake() cannot shorten its
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
 *   (ibx_lease_extend); a message whose lease is nearly over when its
 *   turn comes is released for redelivery rather than handled.
 *
 *   Threads and ownership (for maintainers: every object a second thread
 *   touches; no thread keeps a pointer into an object that another
 *   component may free):
 *   - Lease renewer: owned by its dispatcher, from ibx_dispatcher_create to
 *     ibx_dispatcher_destroy (which joins its thread). It holds copies, not
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
 *     ibx_dispatcher_run (joined before it returns); touches the socket and
 *     the loop's wait state, which the loop's mutex guards (as for
 *     ibx_dispatcher_wake and ibx_dispatcher_stop from any thread).
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
 *   Every function returns an ibx_result: IBX_OK (0), a small positive
 *   value for a non-error outcome (IBX_EMPTY), or a negative error.
 *   ibx_result_str() names each. Details of the last error (SQLSTATE,
 *   native code, driver message, which call or argument) are on the store:
 *   ibx_store_last_error() (a dispatcher's: ibx_dispatcher_last_error()).
 *   Bad input is refused before any SQL runs, naming the argument.
 *   Out-parameters are written only on success, except where a function
 *   says otherwise. IBX_ERR_DB_TRANSIENT means retrying later may succeed
 *   (deadlock, serialization failure, lock timeout, busy database, query
 *   timeout, lost connection). The library already retries a whole unit
 *   of work a few times after a deadlock or serialization failure; it
 *   never retries after a lost connection (the commit's outcome is
 *   unknown), it reports it and reconnects on the next call. A dispatcher
 *   retries a round that failed transiently after 100 ms, backing off to
 *   1 s, so work resumes about a second after the database is back. A
 *   statement the server can never take (MariaDB: a payload over
 *   max_allowed_packet) is IBX_ERR_DB with connection_lost set. A server
 *   that takes no writes (SQLSTATE 25006, MariaDB 1290/1792: a standby
 *   after a failover) is IBX_ERR_DB_TRANSIENT without connection_lost
 *   (nothing was written), and the store reconnects before its next call.
 *   A connect that no retry mends is IBX_ERR_DB, its message naming what
 *   was asked for: a DSN not defined, a driver that cannot be loaded (where
 *   to look: `odbcinst -j`, `odbcinst -q -d`, `odbcinst -q -s`), a database
 *   that does not exist or a refused login, a SQLite file that cannot be
 *   opened (its directory missing); a server that does not answer is
 *   IBX_ERR_DB_TRANSIENT.
 */
/* >>common-end manual */
/*
 * 6. DATABASES AND ODBC NOTES ----------------------------------------------
 *   The dialect is detected from SQLGetInfo(SQL_DBMS_NAME) or forced with
 *   ibx_store_desc.dialect. The default schema is "infra" where the dialect
 *   has schemas; the table is "Inbox", keyed by (Source, MessageId).
 *     SQLite      driver libsqliteodbc: "Driver={SQLite3};Database=f.db;"
 *                 Add "JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
 *                 for speed and a bounded busy wait (the driver waits about
 *                 twice Timeout). Writers use BEGIN IMMEDIATE.
 *                 Power loss (the driver runs "PRAGMA synchronous = <the
 *                 SyncPragma text>" on connect; without it, NORMAL):
 *                 WAL + NORMAL   the file stays intact, but the commits
 *                                since the last checkpoint may be gone
 *                                (the WAL is synced at checkpoints only):
 *                                a message the sender was told is stored
 *                                may be lost, and a done one handled
 *                                again. A process crash loses nothing.
 *                 WAL + FULL     a commit that returned is on the storage
 *                                (one sync per commit): use it when the
 *                                sender is acknowledged after ibx_enqueue.
 *                 no JournalMode the driver's rollback journal: NORMAL may
 *                                corrupt the file on power loss: always
 *                                set JournalMode=WAL. OFF: never.
 *     PostgreSQL  driver odbc-postgresql: "Driver={PostgreSQL Unicode};
 *                 Server=h;Port=5432;Database=d;Uid=u;Pwd=p;"
 *                 The library appends "Protocol=7.4-1;" when the string
 *                 does not set Protocol (no savepoint around each statement).
 *                 Its own sessions set jit = off (obx.h says why).
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
 *                 MariaDB 10.7+ (SKIP LOCKED, JSON_TABLE, INSERT ...
 *                 RETURNING, the UUID type of storage layout 2's owner
 *                 token); the library appends "OPTION=2;" and works in
 *                 UTC whatever the session's time zone. MySQL is detected as
 *                 the same dialect but lacks INSERT ... RETURNING. Keys are
 *                 byte-exact (utf8mb4_nopad_bin: trailing spaces count).
 *     SQL Server  NOT YET RUN AGAINST A SERVER (checked through the fake
 *                 ODBC layer and a T-SQL parser). SQL Server 2016 SP1+.
 *                 FreeTDS: "Driver={FreeTDS};Server=h;Port=1433;Database=d;
 *                 UID=u;PWD=p;TDS_Version=7.4;ClientCharset=UTF-8;", or
 *                 Microsoft's "Driver={ODBC Driver 18 for SQL Server};...".
 *                 (Source, MessageId) use a binary collation with a
 *                 NONCLUSTERED key (two NVARCHAR(255) pass the 900-byte
 *                 clustered limit); dedup and enqueue are MERGE ... WITH
 *                 (HOLDLOCK); claim and settles are procedures. Keys ending
 *                 in a space are refused (SQL Server compares "a" = "a ").
 *   A connection passed in (hdbc) must have autocommit off (SQLite: on);
 *   a wrong mode is refused with IBX_ERR_STATE naming it. Avoid unixODBC
 *   connection pooling: it hands out connections with the previous user's
 *   open transaction.
 *   Your own driver: with <sqlite3.h>, <libpq-fe.h> or MariaDB's <mysql.h>
 *   included before ibx.h, ibx_enqueue_sqlite3 / ibx_enqueue_pq /
 *   ibx_enqueue_mysql run the dedup and enqueue in the transaction open on
 *   that driver's connection (static inline: no link dependency for anyone
 *   else); ibx_enqueue_sql gives the statements for any other driver.
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
 * file that defines IBX_IMPLEMENTATION asks for it here, before any
 * #include fixes the feature set (a <features.h> seen means one did: the
 * check after the implementation's includes then says what to add). Never
 * in GNU mode (-std=gnu99, the default): _POSIX_C_SOURCE would take
 * _DEFAULT_SOURCE's features away from the rest of that file. Not on
 * Windows, Apple or the BSDs: they show POSIX 2008 by default, and the
 * macro would hide their own extensions. */
#if defined(IBX_IMPLEMENTATION) && !defined(IBX__IMPLEMENTED) && defined(__STRICT_ANSI__) && \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) && \
    !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE) && !defined(_SVID_SOURCE) && \
    !defined(_FEATURES_H) && !defined(_SYS_FEATURES_H) && \
    !defined(_WIN32) && !defined(__APPLE__) && !defined(__FreeBSD__) && !defined(__NetBSD__) && \
    !defined(__OpenBSD__) && !defined(__DragonFly__)
#define _POSIX_C_SOURCE 200809L
#endif
/* >>common-end features */
#ifndef IBX_H_INCLUDED
#define IBX_H_INCLUDED

/* >>common-begin api */

/* Semantic versioning (CHANGELOG.md). While the major version is 0, a minor
 * version may change the API or the schema, each change marked in the
 * changelog with how to migrate; a patch version never does. Compare
 * IBX_VERSION_NUMBER in #if: MAJOR * 1000000 + MINOR * 1000 + PATCH. */
#define IBX_VERSION_MAJOR 0
#define IBX_VERSION_MINOR 2
#define IBX_VERSION_PATCH 0
#define IBX_VERSION_STRING "0.2.0"
#define IBX_VERSION_NUMBER (IBX_VERSION_MAJOR * 1000000 + IBX_VERSION_MINOR * 1000 + IBX_VERSION_PATCH)

#include <stddef.h>
#include <stdint.h>
#include <signal.h> /* sig_atomic_t: the dispatcher's stop flag, set from a signal handler */

#ifndef IBX_API
#if defined(IBX_STATIC) && (defined(__GNUC__) || defined(__clang__))
#define IBX_API static __attribute__((unused)) /* a program need not call them all */
#elif defined(IBX_STATIC)
#define IBX_API static
#else
#define IBX_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif


/* Result of every call. Zero is success, positive values are non-error
 * outcomes, negative values are errors. */
typedef enum ibx_result {
    IBX_OK = 0,
    IBX_EMPTY = 1,               /* success, nothing there (no row, no message) */
    IBX_ERR_INVALID_ARG = -1,    /* NULL, empty or malformed argument (named in the error) */
    IBX_ERR_OUT_OF_RANGE = -2,   /* a number outside its allowed range */
    IBX_ERR_NOT_FOUND = -3,      /* the thing asked for does not exist */
    IBX_ERR_NO_MEMORY = -4,      /* the allocator returned NULL */
    IBX_ERR_DB = -5,             /* permanent database error: syntax, constraint, permission */
    IBX_ERR_DB_TRANSIENT = -6,   /* deadlock, serialization, lock/query timeout, busy, lost connection */
    IBX_ERR_STATE = -7,          /* call not valid now (e.g. store without a connection) */
    IBX_ERR_UNSUPPORTED = -8,    /* dialect or feature not supported (yet) */
    IBX_ERR_FULL = -9            /* the store holds max_pending unfinished messages: nothing
                                    was enqueued; try again once the queue drains */
} ibx_result;

/* Details of the last error on a handle. Strings are always NUL-terminated. */
typedef struct ibx_error {
    ibx_result result;           /* the code that was returned */
    char sqlstate[6];            /* ODBC SQLSTATE of the first error record, "" if none */
    long native;                 /* driver's native error code, 0 if none */
    int connection_lost;         /* nonzero: the connection is gone (reconnect on next call) */
    char where[96];              /* the ODBC call or argument, e.g. "ibx_store_open: connection_string" */
    char message[512];           /* human-readable; all diagnostic records joined by " | " */
} ibx_error;

/* Limits of the work queue, the same in both headers. Each call that takes
 * one of these refuses a value outside it with IBX_ERR_OUT_OF_RANGE naming
 * the argument, before any SQL runs. */
#define IBX_BATCH_MAX 10000                     /* messages per claim, rows per cleanup batch */
#define IBX_LEASE_MAX_SECONDS 86400             /* a lease of at most a day */
#define IBX_DELAY_BACKOFF (-1)                  /* abandon: each message's default backoff */
#define IBX_DELAY_MAX_MS 3153600000000LL        /* abandon delay: at most 100 years */
#define IBX_RETENTION_MAX_MS 3153600000000LL    /* cleanup retention: at most 100 years */
#define IBX_DISCOVER_MAX 100000                 /* databases one discovery may return */
#define IBX_TIME_MAX_MS 253402300799999LL       /* latest due time: 9999-12-31 23:59:59.999 UTC,
                                                   what every supported database can store */

/* Log levels. Zero in ibx_logger.min_level means the default: the level the
 * environment variable IBX_LOG_LEVEL names when the store (or dispatcher,
 * provider) is opened -- debug, info, warn, error or off, any case -- else
 * INFO. A level the program sets is kept whatever the environment says. */
typedef enum ibx_log_level {
    IBX_LOG_DEBUG = 1,
    IBX_LOG_INFO = 2,
    IBX_LOG_WARN = 3,
    IBX_LOG_ERROR = 4,
    IBX_LOG_OFF = 5
} ibx_log_level;

/* Memory. Give all three functions or none (then malloc/realloc/free). */
typedef struct ibx_allocator {
    void *(*alloc)(size_t size, void *user);
    void *(*realloc)(void *ptr, size_t size, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} ibx_allocator;

/* Time. Each NULL member falls back to its default. Wall time is UTC
 * milliseconds since the Unix epoch; monotonic time only measures intervals. */
typedef struct ibx_clock {
    int64_t (*now_utc_ms)(void *user);
    int64_t (*monotonic_ms)(void *user);
    void (*sleep_ms)(int64_t ms, void *user);
    void *user;
} ibx_clock;

/* Logging. `store_id` names the store the line is about (never NULL);
 * `message` is one line without a newline and never contains payloads.
 * The default logger writes one line per event to stderr:
 *   2026-11-27T10:47:19.123Z ibx[4242] WARN  [outbox] <message>
 * (UTC time with milliseconds, the process id, the level, the store). */
typedef struct ibx_logger {
    void (*log)(ibx_log_level level, const char *store_id, const char *message, void *user);
    void *user;
    ibx_log_level min_level;     /* lines below this level are not formatted at all */
} ibx_logger;

/* Randomness for UUIDs, owner tokens and backoff jitter. */
typedef struct ibx_random {
    uint64_t (*next_u64)(void *user);
    void *user;
} ibx_random;

/* All hooks together; all-zero means every default. */
typedef struct ibx_hooks {
    ibx_allocator allocator;
    ibx_clock clock;
    ibx_logger logger;
    ibx_random random;
} ibx_hooks;

/* SQL dialects. AUTO (zero) detects from SQLGetInfo(SQL_DBMS_NAME). */
typedef enum ibx_dialect {
    IBX_DIALECT_AUTO = 0,
    IBX_DIALECT_SQLITE = 1,
    IBX_DIALECT_POSTGRESQL = 2,
    IBX_DIALECT_MARIADB = 3,
    IBX_DIALECT_SQLSERVER = 4
} ibx_dialect;

/* Jittered exponential backoff (base/max/jitter, seed 002 §13). All-zero
 * means the defaults: base 200 ms, max 60 s, jitter factor 0.5 to 1.5. */
typedef struct ibx_backoff_policy {
    int64_t base_ms;
    int64_t max_ms;
    double jitter_min;
    double jitter_max;
} ibx_backoff_policy;

/* Which store a multi-store dispatcher polls next. */
typedef enum ibx_selection {
    IBX_SELECT_ROUND_ROBIN = 0,  /* one batch from each store in turn */
    IBX_SELECT_DRAIN_FIRST = 1   /* stay on a store until it returns nothing */
} ibx_selection;

/* Selection state machine; initialise with ibx_selector_init(). */
typedef struct ibx_selector {
    ibx_selection kind;
    int store_count;
    int current;                 /* the store ibx_selector_next() returns */
    int empty_streak;            /* consecutive reports of zero messages */
} ibx_selector;

/* One database of many (tenant, site): a stable identifier, which is also
 * its routing key and its store's name in every log line, and how to reach it. */
typedef struct ibx_database {
    const char *id;
    const char *connection_string;
} ibx_database;

/* Discovery, the callback's protocol (as snprintf's): return how many
 * databases there are, N, and write the first min(N, cap) of them into
 * `out`. When N > cap the provider calls again at once with cap >= N (up to
 * IBX_DISCOVER_MAX), so a list of any length is served whole; an answer of
 * exactly cap is asked again with more room too, so a callback that stops
 * at cap loses nothing either. Return a negative number when the databases
 * cannot be listed now (a lookup failed): the current set is kept, and the
 * failure is logged at WARN (once, until discovery works again) and is the
 * dispatcher's last error. Ids must be unique and non-empty, every database
 * needs a connection string: a list that breaks this is refused whole, as a
 * failure. The strings must stay valid until the next call. Called from the
 * thread that uses the provider (create, refresh, its dispatcher). More
 * than IBX_DISCOVER_MAX is a failure; exactly that many is served, with a
 * WARN that the cap is reached. */
typedef int (*ibx_discover_fn)(ibx_database *out, int cap, void *user);

/* Format 16 bytes as a canonical lower-case GUID text (8-4-4-4-12, bytes in
 * order) into out[37]. */
typedef struct ibx_guid {
    unsigned char bytes[16];
} ibx_guid;

/* Monotonic UUIDv7 generator state; all-zero is a valid start. */
typedef struct ibx_uuid_state {
    int64_t last_ms;
    uint64_t counter;
} ibx_uuid_state;

/* ---- Common functions (pure unless said otherwise) ----------------------- */

/* Version of the implementation, IBX_VERSION_STRING of the header it was built
 * from (e.g. "0.2.0"); never NULL. */
IBX_API const char *ibx_version(void);

/* Name of a result code, e.g. "IBX_ERR_INVALID_ARG"; "IBX_(unknown)" for a
 * value that is not a result code. Never NULL. */
IBX_API const char *ibx_result_str(ibx_result result);

/* Lower-case dialect name: "sqlite", "postgresql", "mariadb", "sqlserver",
 * "auto"; "unknown" otherwise. Never NULL. */
IBX_API const char *ibx_dialect_name(ibx_dialect dialect);

/* The default retry delay: min(2^attempt seconds, 60 seconds), in ms.
 * attempt < 0 counts as 0 (1 s). Never overflows. */
IBX_API int64_t ibx_backoff_default_ms(int attempt);

/* Jittered delay: min(max, base * 2^(attempt-1)) * jitter, where jitter is
 * jitter_min + (jitter_max - jitter_min) * u and u in [0,1) is taken from
 * the top 53 bits of `random_bits`. attempt < 1 counts as 1 (base delay).
 * policy NULL or all-zero means the defaults. As the seed defines it, the
 * jitter applies after the cap, so a result may reach 1.5 x max. Never
 * negative: a negative or non-finite (NaN, infinite) product gives 0. */
IBX_API int64_t ibx_backoff_jitter_ms(const ibx_backoff_policy *policy, int attempt,
                                      uint64_t random_bits);

/* Start a selector over `store_count` stores at store 0. A count below 0
 * counts as 0 (then ibx_selector_next() returns -1). */
IBX_API void ibx_selector_init(ibx_selector *selector, ibx_selection kind, int store_count);

/* The store to poll now, 0 .. store_count-1, or -1 when there is none. */
IBX_API int ibx_selector_next(const ibx_selector *selector);

/* Tell the selector that `store` returned `claimed` messages. Round-robin
 * moves to the next store whatever the count; drain-first stays while
 * claimed > 0 and moves on at 0. A report for a store other than the
 * current one only updates the empty streak. */
IBX_API void ibx_selector_report(ibx_selector *selector, int store, int claimed);

/* Nonzero when every store answered empty since the last message: time for
 * the idle backoff. */
IBX_API int ibx_selector_all_idle(const ibx_selector *selector);

/* Change the number of stores (discovery added or removed some); the
 * current position is kept when still valid, else wraps to 0. */
IBX_API void ibx_selector_resize(ibx_selector *selector, int store_count);

/* Format a time-ordered UUIDv7 (RFC 9562) as 36 lower-case characters plus
 * NUL into `out`. UUIDs made from one `state` sort strictly ascending, as
 * text and as bytes, even within one millisecond or when `unix_ms` goes
 * backwards. `random_a` and `random_b` supply the random bits. */
IBX_API void ibx_uuid_v7(ibx_uuid_state *state, int64_t unix_ms, uint64_t random_a,
                         uint64_t random_b, char out[37]);

/* The canonical text of a GUID routing key, e.g. "6f1c2a3b-4d5e-4f60-...". */
IBX_API void ibx_guid_text(const ibx_guid *guid, char out[37]);

/* Nonzero when `text` is a UUID in 8-4-4-4-12 hex form (either case). */
IBX_API int ibx_uuid_is_valid(const char *text);

/* Check a schema or table name: 1 to 63 characters of [A-Za-z0-9_], not
 * starting with a digit. Returns IBX_OK or IBX_ERR_INVALID_ARG. Names are
 * also quoted when used, but nothing else ever reaches SQL text. */
IBX_API ibx_result ibx_identifier_check(const char *name);

/* The envelope (seed 002 section 6): optional metadata a message carries
 * beside its payload, each in a column of its own, returned by get and
 * claim and so given to handlers. Limits in characters (UTF-8 code points;
 * SQL Server counts a character outside the BMP as two). */
#define IBX_TENANT_MAX 64            /* tenant_id */
#define IBX_AGGREGATE_TYPE_MAX 64    /* aggregate_type */
#define IBX_AGGREGATE_ID_MAX 128     /* aggregate_id */
#define IBX_HEADERS_MAX 64           /* header pairs per message */
#define IBX_HEADER_KEY_MAX 128       /* one header key, 1..128 characters */
#define IBX_HEADER_VALUE_MAX 4096    /* one header value, 0..4096 characters */
#define IBX_HEADERS_BYTES_MAX 16384  /* all keys and values of a message, in bytes */

/* One header of a message: a string key and a string value (e.g.
 * {"traceparent", "00-4bf9...-01"}). Keys are case-sensitive. */
typedef struct ibx_header {
    const char *key;
    const char *value;
} ibx_header;

/* The envelope's fields, the last of ibx_new_message (to enqueue) and of
 * ibx_message (as get and claim return it). */
#define IBX__ENVELOPE_NEW_FIELDS                                                                \
    const char *tenant_id;       /* <= IBX_TENANT_MAX characters; carried, never filtered on */ \
    const char *aggregate_type;  /* <= IBX_AGGREGATE_TYPE_MAX characters */                    \
    const char *aggregate_id;    /* <= IBX_AGGREGATE_ID_MAX characters */                      \
    const ibx_header *headers;   /* header_count pairs (NULL when 0), stored as one JSON       \
                                    object in their order; a key given twice is refused */      \
    int header_count;            /* 0..IBX_HEADERS_MAX */
#define IBX__ENVELOPE_FIELDS                                                                    \
    const char *tenant_id;       /* NULL when none */                                           \
    const char *aggregate_type;  /* NULL when none */                                           \
    const char *aggregate_id;    /* NULL when none */                                           \
    int header_count;            /* headers: read them with ibx_message_header(_at) */          \
    const char *headers_packed;  /* header_count pairs as "key\0value\0key\0value\0..." in    \
                                    their enqueue order; NULL when none */

/* >>common-end api */

/* ---- Store ---------------------------------------------------------------- */

typedef struct ibx_store ibx_store;

/* Counted events. */
typedef enum ibx_metric {
    IBX_METRIC_ENQUEUED = 0,     /* messages enqueued (inserted or refreshed, not Done) */
    IBX_METRIC_DISPATCHED = 1,   /* messages acknowledged (Done) */
    IBX_METRIC_RETRIED = 2,      /* messages abandoned for a later attempt */
    IBX_METRIC_DEAD = 3,         /* messages failed permanently (Dead) */
    IBX_METRIC_REAPED = 4,       /* expired leases released */
    IBX_METRIC_DUPLICATE = 5,    /* dedup checks that found the message already Done */
    IBX_METRIC_CLEANED_UP = 6,   /* done messages deleted by cleanup: their retention ended */
    IBX_METRIC_EXPIRED_UNHANDLED = 7, /* messages past their expiry when claimed: ended Dead
                                    ("expired"), never handled; also counted in DEAD */
    IBX_METRIC_COUNT_ = 8
} ibx_metric;
#define IBX_METRIC_EXPIRED IBX_METRIC_CLEANED_UP /* the old name, until 0.3 (CHANGELOG.md) */
#define IBX_METRIC_FAILED IBX_METRIC_RETRIED /* the old name: it counts retries, not the dead */

/* Called after each counted event with how many it counted. */
typedef struct ibx_metrics_hook {
    void (*count)(ibx_metric metric, int64_t n, const char *store_id, void *user);
    void *user;
} ibx_metrics_hook;

/* How to open a store. All-zero fields take the defaults shown. */
typedef struct ibx_store_desc {
    const char *connection_string; /* ODBC connection string; or: */
    void *hdbc;                  /* a connected SQLHDBC the caller owns (not closed by us);
                                    with IBX_SQLITE3_API, the application's sqlite3 * */
    ibx_dialect dialect;         /* AUTO: detect from the driver */
    const char *schema;          /* default "infra" where the dialect has schemas; ignored by SQLite */
    const char *table;           /* default "Inbox" */
    const char *store_id;        /* name on every log line; default "inbox" */
    int deploy_schema;           /* nonzero: create the table and indexes if missing, upgrade
                                    an older release's table (ibx_store_deploy) */
    ibx_hooks hooks;             /* allocator, clock, logger, random (all-zero: defaults) */
    ibx_metrics_hook metrics;    /* counters as they happen (all-zero: none) */
    int statement_timeout_seconds; /* default 0: none. A statement that has no answer after
                                    this long fails as IBX_ERR_DB_TRANSIENT, saying so:
                                    PostgreSQL cancels it on the server (which a frozen
                                    server cannot do); MariaDB's driver stops waiting for the
                                    socket (READ_TIMEOUT/WRITE_TIMEOUT, added to the
                                    connection string), which also ends a wait on a frozen
                                    server; SQLite and SQL Server drivers: as they honour
                                    SQL_ATTR_QUERY_TIMEOUT */
    int login_timeout_seconds;   /* default 10: give up connecting (and reconnecting) after
                                    this long, so an unreachable or frozen server is an error
                                    (IBX_ERR_DB_TRANSIENT), not a hang (MariaDB: its driver's
                                    CONN_TIMEOUT, unless set); -1: the driver's own */
    ibx_log_level message_log_level; /* default IBX_LOG_DEBUG: the level of the lines logged
                                    per message (each enqueue, and each handler invocation
                                    of a dispatcher on this store); IBX_LOG_INFO for an
                                    audit trail at INFO */
    const char *wake_path;       /* optional (POSIX): after each enqueue it commits, the store
                                    sends a wake byte to a dispatcher listening at this Unix
                                    socket path (its desc's wake_path), in any process of
                                    this host: handled at once instead of at the next poll.
                                    ibx_notify() does it by hand */
    int64_t max_pending;         /* default 0: no cap. Backpressure: an ibx_enqueue that would
                                    take the messages still to handle (Processing) past this
                                    many is refused with IBX_ERR_FULL and changes nothing.
                                    Exact for one producer; counted near the cap and at most
                                    once a second (ibx_pending_count) */
    int max_starts;              /* default 0: 3 (1..1000). Crash-loop quarantine: a message
                                    claimed this many times without an outcome (its handler
                                    killed the process, or its lease expired) is claimed no
                                    more, and ends Dead at the next reap, with a last_error
                                    that says so. Ack, abandon (retry, wait, pause) and fail
                                    are outcomes; a replay or re-enqueue of a dead message
                                    starts the count again */
} ibx_store_desc;

/* ---- Messages ----------------------------------------------------------------- */

/* payload_len value meaning "up to the NUL terminator". */
#define IBX_NTS ((size_t)-1)

/* Largest source, message id and topic, in characters (UTF-8 code points). */
#define IBX_KEY_MAX 255
#define IBX_TOPIC_MAX 255
/* Message priority (ibx_new_message.priority): IBX_PRIORITY_MIN..MAX, 0 (the
 * middle) by default; one level is worth IBX_PRIORITY_AGING_MS of waiting
 * (part of the schema's claim index, not a runtime knob). */
#define IBX_PRIORITY_MIN (-5)
#define IBX_PRIORITY_MAX 5
#define IBX_PRIORITY_AGING_MS 10000

/* Default retention of ibx_cleanup(): 30 days. */
#define IBX_DEFAULT_RETENTION_MS ((int64_t)30 * 24 * 3600 * 1000)

/* Message states, stored as the spec's text values. */
typedef enum ibx_status {
    IBX_STATUS_SEEN = 0,         /* "Seen": recorded by a dedup check, not enqueued */
    IBX_STATUS_PROCESSING = 1,   /* "Processing": enqueued; claimable when due and not leased */
    IBX_STATUS_DONE = 2,         /* "Done": processed; never changed again */
    IBX_STATUS_DEAD = 3          /* "Dead": failed permanently */
} ibx_status;

/* The identity of an inbox message: the pair (source, message id). Ack,
 * abandon and fail take arrays of these (point them at the claimed
 * messages' fields). */
typedef struct ibx_key {
    const char *source;
    const char *message_id;
} ibx_key;

/* A message to enqueue. Zero fields are the defaults. */
typedef struct ibx_new_message {
    const char *topic;           /* required, 1..255 characters, case-sensitive */
    const char *source;          /* required, 1..255 characters: who sent it */
    const char *message_id;      /* required, 1..255 characters: the sender's id */
    const void *payload;         /* required (may be empty); text, no NUL byte inside */
    size_t payload_len;          /* bytes, or IBX_NTS */
    const void *hash;            /* optional content hash (e.g. ibx_sha256 of the body) */
    size_t hash_len;             /* any length; 0 with hash NULL = none */
    int64_t due_utc_ms;          /* optional: not claimable before this UTC time; 0 = now */
    /* The envelope, all optional, as obx_new_message's ("" and NULL are
     * stored as NULL; a message without one runs the plain statement). A
     * redelivery (enqueue of a known source and id) is the same message:
     * the envelope stored first stays, and an envelope column still NULL
     * (e.g. a row from ibx_already_processed) takes the new value. The
     * library copies what it needs before returning. */
    IBX__ENVELOPE_NEW_FIELDS
    /* Expiry: not handled by this UTC time (Unix ms, the database clock),
     * checked before each handler call, the dispatcher ends it Dead with
     * last_error "expired", unhandled, and counts it in
     * IBX_METRIC_EXPIRED_UNHANDLED; ibx_dead_replay drops it. 0 = never; else
     * 1..IBX_TIME_MAX_MS and not before due_utc_ms. A redelivery keeps the
     * expiry first stored (as the envelope): the sender's first deadline. */
    int64_t expires_utc_ms;
    /* Priority, IBX_PRIORITY_MIN (-5) .. IBX_PRIORITY_MAX (5), 0 = the
     * default: as obx_new_message.priority. Among due messages a claim takes
     * the smallest "due time - priority x 10 s" first: higher priority
     * first, one level worth 10 s of waiting (aging), so none starves. A
     * redelivery keeps the priority first stored. SQL Server stores it but
     * claims by due time alone. See docs/FEATURES.md, "Priority". */
    int priority; /* IBX_PRIORITY_MIN..IBX_PRIORITY_MAX; 0 = the default */
} ibx_new_message;

/* A stored message, as claim and get return it. Strings are NUL-terminated
 * and owned by the store: a claim's messages stay valid until the next
 * claim on that store (a handler may call get meanwhile), a get's until the
 * next get, and all until close. Times are UTC Unix milliseconds from the
 * database clock; 0 = NULL. */
typedef struct ibx_message {
    const char *source;
    const char *message_id;
    const char *topic;
    const char *payload;
    size_t payload_len;
    const unsigned char *hash;   /* NULL when none */
    size_t hash_len;
    ibx_status status;
    int attempt;                 /* abandons so far */
    const char *last_error;      /* NULL when none */
    int starts;                  /* claims without an outcome, this one included: 2 and more
                                    after a crash or an expired lease (see max_starts) */
    int64_t first_seen_ms;
    int64_t last_seen_ms;
    int64_t due_time_ms;         /* 0 when enqueued without a due time */
    int64_t locked_until_ms;
    int64_t next_attempt_ms;
    char owner_token[37];        /* "" when not leased */
    ibx_store *store;            /* the store it came from */
    IBX__ENVELOPE_FIELDS
    int64_t expires_ms;          /* expires_utc_ms as first stored; 0 = never. ibx_claim returns
                                    expired messages too; the dispatcher ends them Dead, checked
                                    before each handler call */
    int priority;                /* as first stored (ibx_new_message.priority); 0 on SQL Server */
} ibx_message;

/* Name of a status as stored: "Seen", "Processing", "Done", "Dead"
 * ("unknown" otherwise). Never NULL. */
IBX_API const char *ibx_status_name(ibx_status status);

/* SHA-256 (FIPS 180-4) of `len` bytes into out[32]. Pure. A NULL data with
 * len 0 is the empty message. */
IBX_API void ibx_sha256(const void *data, size_t len, unsigned char out[32]);

/* HMAC-SHA256 (RFC 2104) of `len` bytes under `key` into out[32]. Pure. */
IBX_API void ibx_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                             unsigned char out[32]);

/* Dedup check (IBX-002..008), one atomic upsert: a new (source, id) is
 * recorded as Seen and *processed = 0; a Done one gives *processed = 1; any
 * other refreshes LastSeenUtc and gives 0. A `hash` is stored the first time
 * one is given; a later different hash is logged as a warning, not an
 * error. Safe for concurrent callers. Returns IBX_OK; IBX_ERR_INVALID_ARG
 * (message_id or source NULL, empty, not UTF-8 or over 255 characters;
 * processed NULL; hash NULL with hash_len > 0; a hash with hash_len 0 is no hash);
 * IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_already_processed(ibx_store *store, const char *message_id,
                                         const char *source, const void *hash, size_t hash_len,
                                         int *processed);

/* Move one message to Processing (from Seen or Dead), Done (lease
 * cleared) or Dead. A Done message stays Done. Returns IBX_OK,
 * IBX_ERR_NOT_FOUND (no such message), IBX_ERR_INVALID_ARG, IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_mark_processing(ibx_store *store, const char *message_id, const char *source);
IBX_API ibx_result ibx_mark_processed(ibx_store *store, const char *message_id, const char *source);
IBX_API ibx_result ibx_mark_dead(ibx_store *store, const char *message_id, const char *source);

/* Enqueue for processing, one atomic upsert (IBX-013..029): a new message
 * starts Processing with attempt 0; a Seen, Processing or Dead one gets the
 * new topic, payload, hash and due time and is Processing again (a Dead one
 * with attempt 0: re-enqueueing redrives it); a Done one is not changed
 * (*enqueued = 0 if given, else 1). A redelivery while the message is in
 * flight (leased to a handler) with another topic or payload updates the
 * row as well, and the new content is handled: the holder keeps its lease
 * (its renewals, abandon and fail still count; nobody else claims it
 * meanwhile), but its ack or fail makes the message ready again, not Done
 * or Dead, since its handler saw the old content; the next claim hands
 * out the new one (IBX-029-IN-FLIGHT). Until then ibx_get shows the lease's
 * owner_token with its version digit (15th character) 0: the mark. A
 * redelivery in flight of the same topic and payload changes no lease:
 * the holder's ack makes it Done, and it is handled once. A known message enqueued with a
 * different hash logs a warning, as the dedup check does. Returns IBX_OK;
 * IBX_ERR_INVALID_ARG (a required field NULL, empty, not UTF-8 or too long,
 * a NUL in the payload, hash NULL with hash_len > 0, an envelope field as
 * obx_enqueue refuses it, e.g. "headers[2].key": the error names it;
 * nothing is written); IBX_ERR_NO_MEMORY; IBX_ERR_OUT_OF_RANGE (due_utc_ms or
 * expires_utc_ms not 0..IBX_TIME_MAX_MS, or expires_utc_ms before due_utc_ms,
 * or priority not IBX_PRIORITY_MIN..MAX, named); IBX_ERR_FULL (the store's max_pending is reached and the message
 * is new, Seen or Dead: a redelivery of one still to handle or done adds
 * none and is taken); IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_enqueue(ibx_store *store, const ibx_new_message *message, int *enqueued);

/* Mark messages Done, clearing owner and lease (IBX-044/049); one
 * redelivered with new content while held becomes ready again instead
 * (see ibx_enqueue; counted in *changed). Keys the
 * token does not hold, or that do not exist, are ignored; *changed says how
 * many changed. keys NULL with count > 0 is IBX_ERR_INVALID_ARG; count 0 is
 * a no-op. One statement. Returns IBX_OK, IBX_ERR_INVALID_ARG (token, a key
 * field NULL or empty: the error names its index), IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_ack(ibx_store *store, const char *owner_token, const ibx_key *keys,
                           int count, int64_t *changed);

/* Release messages for a retry: lease cleared, attempt + 1, last error
 * recorded (NULL or "": the one before stays), next attempt after `delay_ms`
 * (1..IBX_DELAY_MAX_MS), or with IBX_DELAY_BACKOFF after min(2^attempt s,
 * 60 s) from each message's attempt count before this abandon. Any other
 * delay_ms (0 or negative, IBX-058) is IBX_ERR_OUT_OF_RANGE, checked first;
 * a last_error that is not valid UTF-8 is IBX_ERR_INVALID_ARG.
 * Ownership and results as ibx_ack. */
IBX_API ibx_result ibx_abandon(ibx_store *store, const char *owner_token, const ibx_key *keys,
                               int count, const char *last_error, int64_t delay_ms,
                               int64_t *changed);

/* Extend the leases of messages `owner_token` holds to `lease_seconds` from
 * now (the database clock). A dispatcher renews its batches' leases by
 * itself (max_handler_ms); a handler that works on without a dispatcher,
 * or on a caller's connection, calls this. Keys the token no longer holds
 * (the lease ran out and was reaped) are left alone: *changed counts the
 * extended ones, so fewer than asked means "stop: another worker may have
 * the message". Ownership and results as ibx_ack, plus
 * IBX_ERR_OUT_OF_RANGE (lease_seconds not 1..IBX_LEASE_MAX_SECONDS). */
IBX_API ibx_result ibx_lease_extend(ibx_store *store, const char *owner_token, const ibx_key *keys,
                                    int count, int lease_seconds, int64_t *changed);

/* Mark messages Dead with `error` (required: NULL is IBX_ERR_INVALID_ARG,
 * IBX-067; "" is stored as none, NULL in last_error; not valid UTF-8:
 * IBX_ERR_INVALID_ARG), clearing owner and lease; one redelivered with new
 * content while held becomes ready again instead (see ibx_enqueue).
 * Ownership and results as ibx_ack. */
IBX_API ibx_result ibx_fail(ibx_store *store, const char *owner_token, const ibx_key *keys,
                            int count, const char *error, int64_t *changed);

/* Read one message by (message id, source), the same order as the dedup
 * and mark calls. Returns IBX_OK, IBX_ERR_NOT_FOUND, IBX_ERR_INVALID_ARG,
 * IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_get(ibx_store *store, const char *message_id, const char *source,
                           ibx_message *message);

/* Which dead messages ibx_dead_list, ibx_dead_replay (the inbox's revive)
 * and ibx_dead_purge take. Every field is optional (NULL or 0: no
 * condition); the given ones must all hold. A NULL filter is every dead
 * message. */
typedef struct ibx_dead_filter {
    const char *topic;           /* exactly this topic */
    const char *error_contains;  /* the last error contains this text (byte for byte) */
    int64_t created_from_ms;     /* first seen at or after (UTC Unix ms) ... */
    int64_t created_before_ms;   /* ... and before this */
    const char *source;          /* just this source ... */
    const char *message_id;      /* ... and/or this message id */
} ibx_dead_filter;

/* >>common-begin api-engine */

#ifndef IBX_NO_ENVELOPE
/* The value of header `key` (case-sensitive) of a message from get or
 * claim (a handler's), or NULL when it has none, or message or key is
 * NULL. Valid as long as the message's strings; allocates nothing. */
IBX_API const char *ibx_message_header(const ibx_message *message, const char *key);

/* Header `index` (0..header_count-1) of a message, in enqueue order: sets
 * *key and *value (either may be NULL) and returns IBX_OK; IBX_ERR_INVALID_ARG
 * when message is NULL; IBX_ERR_NOT_FOUND when index is out of range. */
IBX_API ibx_result ibx_message_header_at(const ibx_message *message, int index, const char **key,
                                         const char **value);
#endif /* IBX_NO_ENVELOPE */

/* ---- Store, work queue, dispatcher: the same in both headers ------------------- */

/* What a store is connected to. */
typedef struct ibx_store_info {
    ibx_dialect dialect;
    char dbms_name[64];          /* SQL_DBMS_NAME, e.g. "PostgreSQL" */
    char dbms_version[64];       /* the server's own version (asked by SQL) */
    char driver_name[64];        /* SQL_DRIVER_NAME, e.g. "psqlodbcw.so" */
    char store_id[64];
} ibx_store_info;

/* Open a store: connect (or adopt desc->hdbc), detect or force the dialect,
 * and prepare the session (isolation, autocommit, time zone). Touches the
 * database. On success *out is the store; on failure *out is still a store
 * handle when one could be allocated (so ibx_store_last_error() explains
 * the failure; close it) and NULL only on IBX_ERR_NO_MEMORY, a NULL desc or
 * a half-set allocator hook. Returns IBX_OK; IBX_ERR_INVALID_ARG (desc/out
 * NULL, neither or both of connection_string and hdbc, a bad name or
 * path (schema, table, store_id, ...), a dialect that is not an
 * ibx_dialect, an allocator with some but not all functions);
 * IBX_ERR_OUT_OF_RANGE (max_pending, max_starts, statement_timeout_seconds
 * or login_timeout_seconds outside what its field says, message_log_level
 * not 0 or an ibx_log_level), naming the field; IBX_ERR_DB or
 * IBX_ERR_DB_TRANSIENT (connect failed); IBX_ERR_NO_MEMORY. */
IBX_API ibx_result ibx_store_open(const ibx_store_desc *desc, ibx_store **out);

/* Close a store and its connection (a caller's hdbc is left open). A store
 * with an open unit of work is rolled back first. NULL is a no-op. Destroy
 * the dispatchers over it first (a dispatcher keeps the pointer; a running
 * one must have returned from run()); a provider's stores are closed by
 * ibx_provider_destroy, never by this. */
IBX_API void ibx_store_close(ibx_store *store);

/* Fill *info. Returns IBX_OK or IBX_ERR_INVALID_ARG (NULL argument).
 * Does not touch the database. */
IBX_API ibx_result ibx_store_get_info(const ibx_store *store, ibx_store_info *info);

/* The store's last error (result IBX_OK when the last call succeeded).
 * Valid until the next call on the store. NULL store gives a static
 * "store is NULL" error. */
IBX_API const ibx_error *ibx_store_last_error(const ibx_store *store);

/* The schema as SQL text for `dialect` with the given schema and table
 * names (NULL: the defaults of ibx_store_desc), exactly what deployment
 * runs: tables, indexes and, where the dialect has them, triggers and
 * procedures. Statements end with ";" and a newline; SQL Server's are
 * batches ended by a "GO" line (for sqlcmd or SSMS); a MariaDB trigger
 * whose body holds ";" is set off by DELIMITER lines (for the mariadb
 * client). Writes at most `cap` bytes including the NUL into `out` (may
 * be NULL with cap 0) and the full size including the NUL into *needed
 * (if not NULL). The text creates new
 * tables complete and, except on SQLite, also adds the columns an older
 * release's table lacks (ALTER ... IF NOT EXISTS, SQL Server: IF
 * COL_LENGTH); ibx_store_deploy upgrades on every dialect. Returns IBX_OK;
 * IBX_ERR_INVALID_ARG (bad names); IBX_ERR_OUT_OF_RANGE (buffer too small:
 * *needed says how much); IBX_ERR_UNSUPPORTED (IBX_DIALECT_AUTO or not an
 * ibx_dialect value). Pure; does not touch a database. */
IBX_API ibx_result ibx_schema_sql(ibx_dialect dialect, const char *schema, const char *table,
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
 * longer), then fails with IBX_ERR_DB_TRANSIENT and a WARN line: deploy
 * again when the long transactions end. What an upgrade locks, per
 * database: section 3 of the manual, "Schema". What desc.deploy_schema
 * does at open. Needs CREATE and, for an upgrade, ALTER on the table.
 * Touches the database, own transaction (MariaDB commits each DDL
 * statement on its own). Returns IBX_OK, IBX_ERR_DB, IBX_ERR_DB_TRANSIENT,
 * IBX_ERR_INVALID_ARG (store NULL), IBX_ERR_STATE (store not open),
 * IBX_ERR_NO_MEMORY. */
IBX_API ibx_result ibx_store_deploy(ibx_store *store);

/* The explicit steps of an upgrade to storage layout 2 (docs/UPGRADING.md),
 * on a table that a release before it deployed and ibx_store_deploy has
 * upgraded in place. MariaDB has both, an outbox on PostgreSQL the drop;
 * elsewhere, and on a table that has them done, nothing happens (IBX_OK,
 * *steps 0). Flags:
 * IBX_UPGRADE_KEYS converts the keys (CHAR(36)) to the UUID type: a copy
 * of the table, reads go on but writers wait for all of it (about 30 s per
 * million rows, measured); the previous release keeps working after it.
 * IBX_UPGRADE_DROP_OLD drops the indexes this release no longer reads
 * (instant; writes get cheaper), so run it once no program of the previous
 * release is left: on MariaDB layout 1's indexes that lead with Status (the
 * previous release's claims fail, "Key ... doesn't exist": they force
 * them); on a PostgreSQL outbox IX_<table>_Ready (the previous release's
 * stats and wake scan the table without it; a plain DROP INDEX, in the
 * step's transaction, whose exclusive lock of the table lasts the catalog
 * change only). Each step is logged (INFO),
 * looked up in the catalog first (a step done is skipped, so an
 * interrupted run is resumed by running it again), and waits for its
 * table lock at most 5 s, as ibx_store_deploy. *steps (if not NULL) gets
 * the number of steps run. Touches the database; each step commits on its
 * own. Returns IBX_OK, IBX_ERR_INVALID_ARG (store NULL, flags 0 or
 * unknown), IBX_ERR_STATE (store not open), IBX_ERR_DB(_TRANSIENT) (the
 * steps before stay done), IBX_ERR_NO_MEMORY. */
#define IBX_UPGRADE_KEYS 1u
#define IBX_UPGRADE_DROP_OLD 2u
IBX_API ibx_result ibx_store_upgrade(ibx_store *store, unsigned flags, int *steps);

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
 * IBX_ERR_DB_TRANSIENT (nothing changed). Refused, nothing changed
 * (IBX_ERR_DB, the server's message): a view or another table's foreign
 * key depends on the table; it is partitioned, inherited, published or
 * under row security; its columns are not this release's (deploy first).
 * *rows (if not NULL) gets the rows copied. Returns IBX_OK, IBX_EMPTY (the
 * order is this release's already: nothing done), IBX_ERR_UNSUPPORTED (not
 * PostgreSQL: statements name their columns, so other databases keep the
 * order a table was created with), IBX_ERR_DB, IBX_ERR_DB_TRANSIENT,
 * IBX_ERR_INVALID_ARG (store NULL), IBX_ERR_STATE (store not open),
 * IBX_ERR_NO_MEMORY. Needs ownership of the table. */
IBX_API ibx_result ibx_store_rewrite(ibx_store *store, int64_t *rows);

/* A new owner token (time-ordered UUIDv7 text) for a worker. Pure apart
 * from the store's clock and random hooks. Returns IBX_OK or
 * IBX_ERR_INVALID_ARG (NULL argument). */
IBX_API ibx_result ibx_owner_token(ibx_store *store, char out[37]);

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
 * are what the claim set (filled in, not read back). Returns IBX_OK (count >= 1)
 * or IBX_EMPTY (count 0); IBX_ERR_INVALID_ARG (owner token not a UUID, the
 * empty one or one of version 0: the inbox's mark, see ibx_enqueue; NULL pointers); IBX_ERR_OUT_OF_RANGE (lease_seconds not
 * 1..IBX_LEASE_MAX_SECONDS, batch_size not 1..IBX_BATCH_MAX);
 * IBX_ERR_DB / IBX_ERR_DB_TRANSIENT. */
IBX_API ibx_result ibx_claim(ibx_store *store, const char *owner_token, int lease_seconds,
                             int batch_size, const ibx_message **messages, int *count);

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
 * Returns IBX_OK or IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_reap(ibx_store *store, int64_t *reaped);

/* Delete done messages older than `retention_ms` (0: IBX_DEFAULT_RETENTION_MS),
 * in batches of `batch_size` rows (0: 1000), each its own transaction,
 * until none are left. Ready, claimed and dead messages are never deleted.
 * *deleted (if not NULL) receives the total. Returns IBX_OK;
 * IBX_ERR_OUT_OF_RANGE (retention_ms not 0..IBX_RETENTION_MAX_MS,
 * batch_size not 0..IBX_BATCH_MAX); IBX_ERR_DB(_TRANSIENT) (rows deleted by
 * earlier batches stay deleted). */
IBX_API ibx_result ibx_cleanup(ibx_store *store, int64_t retention_ms, int batch_size,
                               int64_t *deleted);

/* Running totals of the counted events since the store was opened,
 * indexed by ibx_metric. Does not touch the database. Returns IBX_OK or
 * IBX_ERR_INVALID_ARG (NULL argument). */
IBX_API ibx_result ibx_store_counters(const ibx_store *store, int64_t counters[IBX_METRIC_COUNT_]);

/* Queue depth now: messages ready to claim (due, not leased) and how long
 * the oldest of them has been ready, in ms (0 when none), by the database
 * clock. Touches the database (one read). Returns IBX_OK,
 * IBX_ERR_INVALID_ARG, IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_queue_stats(ibx_store *store, int64_t *ready, int64_t *oldest_ready_ms);

/* The fill level a store's max_pending caps: messages enqueued and not yet
 * finished (waiting, due later, or in a handler), counted now. Touches the
 * database (one read). Returns IBX_OK, IBX_ERR_INVALID_ARG (NULL store or
 * pending), IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_pending_count(ibx_store *store, int64_t *pending);

#ifndef IBX_NO_METRICS_TEXT
/* The store's metrics in the Prometheus text exposition format (0.0.4), for
 * node_exporter's textfile collector or a scrape endpoint of your own:
 *   ibx_messages_*_total, ibx_leases_reaped_total  counters since open
 *                                   (ibx_store_counters), one per ibx_metric
 *                                   (ibx_messages_expired_total: the old name of
 *                                   _cleaned_up_total, printed too until 0.3)
 *   ibx_queue_ready_messages, _in_flight_messages, _dead_messages,
 *   _scheduled_messages (not due yet), _expired_leases (in flight, lease
 *   run out), ibx_queue_oldest_ready_age_seconds   gauges, read now (one query)
 *   ibx_handler_duration_seconds    histogram per topic of the handlers a
 *                                   dispatcher on this store ran (all of a
 *                                   message's handlers together); after 100
 *                                   topics the rest count as topic "(other)"
 * Every sample has the label store="<store_id>" (and topic="..."), escaped
 * as the format says (backslash, double quote, newline). As ibx_schema_sql:
 * writes at most `cap` bytes including the NUL into `out` (may be NULL with
 * cap 0) and the full size including the NUL into *needed (if not NULL);
 * 4 KB plus 1 KB per topic is plenty. Touches the database (one read).
 * Returns IBX_OK; IBX_ERR_OUT_OF_RANGE (buffer too small: *needed says how
 * much the text took; the gauges may differ on the next call);
 * IBX_ERR_INVALID_ARG (store NULL, out NULL with cap > 0);
 * IBX_ERR_NO_MEMORY; IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_metrics_text(ibx_store *store, char *out, size_t cap, size_t *needed);
#endif

/* What a handler says about a message. */
typedef enum ibx_outcome {
    IBX_DONE = 0,                /* handled: the message is acknowledged */
    IBX_RETRY = 1,               /* transient failure: retried after a backoff */
    IBX_DEAD = 2,                /* permanent failure: dead at once, never retried */
    IBX_WAIT = 3,                /* not ready yet (e.g. a join): retried later, never counted
                                    as a failed attempt; the delay is the backoff, capped at 5 s */
    IBX_PAUSE = 4,               /* the downstream is unavailable (broker down, uplink off):
                                    the message goes back without using an attempt and its
                                    topic is paused (see pause_ms in ibx_dispatcher_desc) */
    IBX_CONFLICT = 5             /* transactional handlers only (ibx_dispatcher_on_tx): a
                                    statement of the handler's transaction hit a deadlock,
                                    serialization failure or lock timeout (ibx_tx_conflict
                                    says which errors are): rolled back and run again, no
                                    attempt used; from any other handler it is not an
                                    outcome (the message ends dead) */
} ibx_outcome;

/* Room for a handler's error text, with its NUL. */
#define IBX_HANDLER_ERROR_MAX 256

/* A handler, the callback's protocol. It gets the whole message: the
 * message and everything it points to are valid during the call only (copy
 * what you keep). It is called on the thread that runs the dispatcher, one
 * message at a time, and returns one of ibx_outcome's values; any other
 * value makes the message dead, with the value as the reason. `error`
 * (error_size bytes, zeroed before the call) takes a short reason for
 * RETRY, DEAD or PAUSE; it is stored as the last error and logged, so it
 * must not contain the payload (a byte that starts no UTF-8 character, as
 * when snprintf cuts one, is stored as '?'). It may enqueue follow-ups on
 * message->store; it must not claim or list on that store (its claim
 * buffer holds the batch) nor run or destroy its dispatcher. Handlers must
 * be idempotent: delivery is at least once. */
typedef ibx_outcome (*ibx_handler)(const ibx_message *message, char *error, size_t error_size,
                                   void *user);

/* One message's outcome in a batch handler's call (see ibx_dispatcher_on_batch). */
typedef struct ibx_batch_result {
    ibx_outcome outcome;         /* preset IBX_RETRY: set IBX_DONE for each message delivered */
    char error[IBX_HANDLER_ERROR_MAX]; /* preset "": the reason for RETRY, DEAD or PAUSE,
                                    stored as the last error and logged (never the payload) */
} ibx_batch_result;

/* A batch handler, the same protocol for `count` messages (1..batch_size)
 * of one topic, in claim order, and one result per message (results[i] is
 * messages[i]'s, preset IBX_RETRY with no reason: a message it leaves alone
 * is retried). It owns none of them: both arrays are valid during the call
 * only. A result set to a value that is no ibx_outcome makes its message
 * dead. */
typedef void (*ibx_batch_handler)(const ibx_message *const *messages, ibx_batch_result *results,
                                  int count, void *user);

/* Delay in ms before the next attempt of a message that has failed
 * `attempts` times before this one. Values outside the range abandon
 * accepts are clamped to it. */
typedef int64_t (*ibx_backoff_fn)(int attempts, void *user);

typedef struct ibx_dispatcher ibx_dispatcher;

/* The stores of many databases (one per tenant or site), kept open. */
typedef struct ibx_provider ibx_provider;

#ifndef IBX_NO_MULTI_STORE
/* A fixed list of databases, or a discovery callback that the provider
 * calls every refresh interval. All-zero fields take the defaults. */
typedef struct ibx_provider_desc {
    ibx_store_desc store;        /* template for every store; connection_string and store_id
                                    come from each database, hdbc must be NULL */
    const ibx_database *databases; /* a fixed list (copied) ... */
    int database_count;
    ibx_discover_fn discover;    /* ... or discovery (then databases must be NULL) */
    void *discover_user;
    int64_t refresh_interval_ms; /* default 300000 (5 min): discovery this often; also the
                                    longest wait between two attempts to open a database */
} ibx_provider_desc;

/* Create a provider and open a store per database (discovery is called
 * once now). A database whose store cannot be opened is logged and left
 * out, and tried again on its own backoff: 1 s, then twice as long after
 * each failure, up to refresh_interval_ms. Each attempt is made by
 * ibx_provider_refresh or a dispatcher's round when due, on a thread of
 * its own (one attempt at a time, its result taken in at a later round),
 * so a database that is down, however slow to refuse, never holds up the
 * others; without threads (IBX_NO_THREADS) at most one attempt runs per
 * round. That thread calls the template's hooks: they must be thread-safe
 * (the defaults are). Returns IBX_OK; IBX_ERR_INVALID_ARG (both or
 * neither of databases and discover, database_count < 0, a NULL or empty
 * or duplicate id, desc->store.hdbc set, a half-set allocator);
 * IBX_ERR_OUT_OF_RANGE (refresh_interval_ms < 0); IBX_ERR_DB (the first
 * discovery failed: *out is a provider with no stores, refreshed later);
 * IBX_ERR_NO_MEMORY. On the other errors *out is NULL, so the refusal is
 * logged at ERROR through desc->store.hooks' logger, naming the field
 * (e.g. "ibx_provider_create: refresh_interval_ms: must be >= 0"). */
IBX_API ibx_result ibx_provider_create(const ibx_provider_desc *desc, ibx_provider **out);

/* Close every store and free the provider. NULL is a no-op. */
IBX_API void ibx_provider_destroy(ibx_provider *provider);

/* Ask discovery now: new databases get stores, removed ones are closed,
 * unchanged ones are kept as they are; a database that is down is not
 * tried again here before its backoff is over (see ibx_provider_create).
 * Dispatchers call this themselves when the refresh interval has passed.
 * Ids are checked and found by sorting: the registry's own work for a
 * refresh of 100,000 unchanged databases is about 0.1 s. Returns IBX_OK, IBX_ERR_STATE (a
 * fixed list: nothing to refresh), IBX_ERR_DB (discovery failed, or said
 * more than IBX_DISCOVER_MAX: the current set is kept), IBX_ERR_INVALID_ARG
 * (discovery returned a bad entry: the current set is kept),
 * IBX_ERR_NO_MEMORY. */
IBX_API ibx_result ibx_provider_refresh(ibx_provider *provider);

/* Number of open stores, and the store at `index` (NULL when out of range)
 * with its stable identifier. Valid until the next refresh or round of its
 * dispatcher (a database that opens late is appended). */
IBX_API int ibx_provider_count(const ibx_provider *provider);
IBX_API ibx_store *ibx_provider_store(const ibx_provider *provider, int index);
IBX_API const char *ibx_provider_store_id(const ibx_provider *provider, int index);

/* Details of the provider's last error. */
IBX_API const ibx_error *ibx_provider_last_error(const ibx_provider *provider);

/* The store for a routing key: the database id, exactly. No database is
 * opened: the provider's stores are reused. Returns IBX_OK;
 * IBX_ERR_INVALID_ARG (provider, key or out NULL, key empty);
 * IBX_ERR_NOT_FOUND (no database with that id). */
IBX_API ibx_result ibx_router_get(ibx_provider *provider, const char *key, ibx_store **out);

/* The same for a GUID key: the database whose id is that GUID's text, in
 * any case, with or without braces ("6f1c2a3b-...", "6F1C2A3B-...",
 * "{6f1c2a3b-...}"). */
IBX_API ibx_result ibx_router_get_guid(ibx_provider *provider, const ibx_guid *key, ibx_store **out);
#endif /* IBX_NO_MULTI_STORE */

/* A selection strategy of your own: which store to poll next, and what it
 * returned. */
typedef struct ibx_strategy {
    int (*next)(void *user, int store_count);
    void (*report)(void *user, int store, int claimed);
    void *user;
} ibx_strategy;

/* Counts of one ibx_dispatcher_run_once() call. */
typedef struct ibx_run_stats {
    int claimed;                 /* messages claimed */
    int done;                    /* acknowledged */
    int retried;                 /* abandoned for a later attempt */
    int dead;                    /* failed permanently (DEAD, or out of attempts) */
    int no_handler;              /* of the retried: no handler for their topic */
    int64_t reaped;              /* expired leases released by a periodic reap */
    int paused;                  /* put back, attempts unchanged, because their topic is
                                    paused (IBX_PAUSE); not counted in `retried` */
    int lease_lost;              /* transactional handlers (ibx_dispatcher_on_tx) whose
                                    message was no longer leased to this worker at the
                                    settle: everything rolled back, no attempt used */
    int conflicts;               /* transactional handlers' transactions rolled back by a
                                    deadlock or serialization failure and run again */
} ibx_run_stats;

/* How to dispatch. All-zero fields take the defaults shown. */
typedef struct ibx_dispatcher_desc {
    ibx_store *store;            /* one store, or: */
    ibx_provider *provider;      /* many: each round polls the store the strategy picks */
    ibx_selection selection;     /* default round-robin; or drain-first */
    ibx_strategy strategy;       /* a strategy of your own (next set): replaces selection */
    int64_t cleanup_interval_ms; /* 0: no automatic cleanup; else every store, this often ... */
    int64_t cleanup_retention_ms;/* ... deleting done messages older than this
                                    (0: IBX_DEFAULT_RETENTION_MS) */
    const char *owner_token;     /* default: a new UUIDv7 per dispatcher (not the empty UUID nor
                                    one of version 0, see ibx_claim) */
    int batch_size;              /* default 50, at most IBX_BATCH_MAX */
    int lease_seconds;           /* default 30, at most IBX_LEASE_MAX_SECONDS; longer than a
                                    handler may take */
    int max_attempts;            /* default 10: a handler runs at most this many times for a
                                    message (a lease that expires does not count here: see
                                    the store's max_starts) */
    ibx_backoff_fn backoff;      /* default min(2^attempts s, 60 s) */
    void *backoff_user;
    int64_t poll_interval_ms;    /* default 500: wait after an empty claim ... */
    int64_t idle_max_ms;         /* default 2000: ... doubling while idle up to this */
    int64_t reap_interval_ms;    /* default 30000: reap expired leases this often (the wake of
                                    parked keyed messages runs sooner: see ibx_reap) */
    int64_t startup_delay_ms;    /* default 0: wait before the first claim */
    int64_t error_delay_ms;      /* default 30000: wait after a failed round; a transient
                                    failure (lost connection, server restarting) is retried
                                    sooner: 100 ms doubling up to 1 s (at most this) */
    ibx_log_level message_log_level; /* the level of the line logged as each message is
                                    handed to its handlers (topic and id); default: the
                                    store's message_log_level, IBX_LOG_DEBUG with a provider */
    int64_t max_handler_ms;      /* default 300000 (5 min): while a batch is handled, a thread
                                    of the dispatcher renews its leases every third of the
                                    lease on a connection of its own, for at most this long
                                    (then it stops, logged, and the messages may be delivered
                                    again). Needs threads and a store opened from a
                                    connection string; the hooks must then be thread-safe */
    int no_lease_renewal;        /* nonzero: no renewal thread; handlers must finish within
                                    the lease (or call ibx_lease_extend themselves) */
    volatile sig_atomic_t *stop_flag; /* optional: run() stops when *stop_flag becomes nonzero
                                    (safe to set from a signal handler; seen within one wait) */
    int64_t pause_ms;            /* default 1000: a handler's IBX_PAUSE pauses its topic this
                                    long; each further IBX_PAUSE in a row doubles it ... */
    int64_t pause_max_ms;        /* default 60000: ... up to this. The first IBX_DONE of the
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
} ibx_dispatcher_desc;
/* Intervals are saturating: a huge one (INT64_MAX) means "never again". */

/* Create a dispatcher over desc->store or desc->provider (exactly one).
 * Reap (and cleanup, when asked) run for every store, on their own
 * schedules. Does not touch the database. Returns IBX_OK;
 * IBX_ERR_INVALID_ARG (desc or out NULL; neither or both of store and
 * provider; owner_token not a UUID; built with IBX_NO_POSIX_CLOCK and no
 * clock hook with sleep_ms); IBX_ERR_OUT_OF_RANGE (a negative or too large
 * number); IBX_ERR_NO_MEMORY. The error, on the store (with a provider: on
 * the provider), names the field, e.g. "ibx_dispatcher_create:
 * lease_seconds"; with neither store nor provider there is nowhere to say. */
IBX_API ibx_result ibx_dispatcher_create(const ibx_dispatcher_desc *desc, ibx_dispatcher **out);

/* The description a dispatcher would run with: a copy of *desc (NULL: all
 * zero) with every zero field replaced by its default, the same function
 * ibx_dispatcher_create uses. Pure; no checks (create does those). */
IBX_API ibx_dispatcher_desc ibx_dispatcher_desc_defaults(const ibx_dispatcher_desc *desc);

/* Free a dispatcher (not its store). Must not be running. NULL is a no-op. */
IBX_API void ibx_dispatcher_destroy(ibx_dispatcher *dispatcher);

/* Register `handler` for `topic` (exact, case-sensitive), or for every
 * topic with "*". A message runs its topic's handlers in registration
 * order, then the "*" ones; the first that does not return IBX_DONE decides
 * the message's fate. A message with no handler at all is logged as a
 * warning and retried later. Returns IBX_OK, IBX_ERR_INVALID_ARG (NULL,
 * empty, not UTF-8 or over-long topic, NULL handler, a topic with a batch
 * handler), IBX_ERR_NO_MEMORY. Does not touch the database. */
IBX_API ibx_result ibx_dispatcher_on(ibx_dispatcher *dispatcher, const char *topic,
                                     ibx_handler handler, void *user);

/* Register a batch handler for `topic` (exact, case-sensitive), or for
 * every topic that has no handler of its own with "*": the messages of
 * that topic in a claim (up to batch_size) are handed to it in one call,
 * in claim order, and it sets one outcome per message (done, retry with a
 * reason, dead, wait, pause); messages of other topics go to their own
 * handlers. A topic has one batch handler, or per-message handlers
 * (ibx_dispatcher_on), not both. Returns IBX_OK, IBX_ERR_INVALID_ARG (as
 * ibx_dispatcher_on; the topic already has a handler of the other kind or
 * a batch handler), IBX_ERR_NO_MEMORY. Does not touch the database. */
IBX_API ibx_result ibx_dispatcher_on_batch(ibx_dispatcher *dispatcher, const char *topic,
                                           ibx_batch_handler handler, void *user);

/* A transactional handler (ibx_dispatcher_on_tx): a handler (see
 * ibx_handler) that also gets the store's own connection, `hdbc`, inside a
 * transaction the dispatcher opened for this message: an SQLHDBC, or with
 * IBX_SQLITE3_API the sqlite3 *. What it writes there commits together with
 * the message's settle, or not at all. Never commit, roll back, change the
 * autocommit mode or close it; never keep it past the call. */
typedef ibx_outcome (*ibx_tx_handler)(const ibx_message *message, void *hdbc, char *error,
                                      size_t error_size, void *user);

/* Register a transactional handler for `topic` (exact, case-sensitive), or
 * for every topic that has no handler of its own with "*". For each
 * message the dispatcher opens a transaction on the store's connection,
 * calls the handler, and:
 *   IBX_DONE      acks the message in that transaction (the ack checks that
 *                 the message is still leased to this dispatcher: its owner
 *                 token still on the row, in flight) and commits: the
 *                 handler's writes and Done commit together, exactly once.
 *                 A lease lost meanwhile (reaped, claimed by another
 *                 worker) rolls everything back: no effect, no attempt used,
 *                 counted in ibx_run_stats.lease_lost and logged (WARN).
 *   IBX_RETRY, IBX_DEAD, IBX_WAIT, IBX_PAUSE   roll back the handler's
 *                 writes, then settle as for any handler (a retry uses an
 *                 attempt; dead is dead with no effect).
 *   IBX_CONFLICT  (or a deadlock, serialization failure or busy database
 *                 in the ack or the commit) roll back and run the handler
 *                 again at once, up to 3 times in all, without using an
 *                 attempt (ibx_run_stats.conflicts); then the message goes
 *                 back, due after the backoff, attempts unchanged.
 * A failure of the database in the dispatcher's part (begin, ack, commit)
 * rolls back and retries the message with that error (an attempt). A
 * connection lost there uses no attempt (the handler did its part): the
 * message goes back due after the backoff (as IBX_WAIT), or, lost at the
 * commit, the database has the outcome: Done with its effects, or back
 * without them and delivered again (IBX-TXH-LOST-CONNECTION). Calls on
 * message->store inside the handler (ibx_enqueue of follow-ups) run in
 * the handler's transaction: they commit with it or not at all; not
 * ibx_lease_extend (it would lock the message's row until the commit, and
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
 * on a caller's hdbc is refused when the message comes: IBX_RETRY with the
 * reason). Returns IBX_OK, IBX_ERR_INVALID_ARG (as ibx_dispatcher_on; the
 * topic already has a handler), IBX_ERR_NO_MEMORY. Does not touch the
 * database. */
IBX_API ibx_result ibx_dispatcher_on_tx(ibx_dispatcher *dispatcher, const char *topic,
                                        ibx_tx_handler handler, void *user);

/* A transactional batch handler (ibx_dispatcher_on_batch_tx): a batch
 * handler (see ibx_batch_handler) that also gets the store's connection
 * inside a transaction, as ibx_tx_handler does. results[i] may also be
 * IBX_CONFLICT (the whole call is then rolled back and run again). */
typedef void (*ibx_batch_tx_handler)(const ibx_message *const *messages, ibx_batch_result *results, int count,
                                     void *hdbc, void *user);

/* Register a transactional batch handler for `topic` ("*": every topic
 * without a handler of its own): a claim's messages of the topic in one
 * call, as ibx_dispatcher_on_batch, inside one transaction, as
 * ibx_dispatcher_on_tx. When every result is IBX_DONE, the messages are
 * acked in that transaction and it commits: their writes and Done
 * together. Any other result rolls the whole call back: the messages with
 * another outcome are settled with it (no effect), and those that were
 * done are handed to the handler again, alone, in a new transaction (a
 * handler writes for every message it is given, and for them only). A
 * result IBX_CONFLICT, or a conflict at the ack or the commit, runs the
 * same call again (3 runs in all, no attempt used). When the ack finds a
 * message no longer leased to this dispatcher, all is rolled back: the
 * lost ones are counted in lease_lost, the others released unhandled
 * without using an attempt. Returns as ibx_dispatcher_on_batch. */
IBX_API ibx_result ibx_dispatcher_on_batch_tx(ibx_dispatcher *dispatcher, const char *topic,
                                              ibx_batch_tx_handler handler, void *user);

/* Whether a database error a transactional handler got on its hdbc is one
 * to answer with IBX_CONFLICT: a deadlock, serialization failure, lock wait
 * timeout or busy database, as the store's dialect reports them (SQLSTATE
 * class 40, 55P03; MariaDB 1205, 1213, 1020; SQLite 5 SQLITE_BUSY, 6
 * SQLITE_LOCKED as native). `sqlstate` may be NULL. 1 or 0; 0 for a NULL
 * store. */
IBX_API int ibx_tx_conflict(const ibx_store *store, const char *sqlstate, long native_error);

/* One round: reap if the reap interval has passed, claim one batch, run
 * the handlers, then settle: all successes in one ack, each failure
 * abandoned (with backoff) or failed, the messages of a paused topic put
 * back in one statement per topic. *stats (if not NULL) gets the counts.
 * Returns IBX_OK (messages handled), IBX_EMPTY (nothing to claim), or the
 * database error of the claim or a settle (messages not settled stay
 * leased and are retried after their lease expires: nothing is lost). */
IBX_API ibx_result ibx_dispatcher_run_once(ibx_dispatcher *dispatcher, ibx_run_stats *stats);

/* Loop run_once() until ibx_dispatcher_stop() or *stop_flag: after an
 * empty round wait poll_interval_ms (doubling up to idle_max_ms), after a
 * database error wait error_delay_ms, and wake at once on
 * ibx_dispatcher_wake(). Returns IBX_OK when stopped.
 * With one store, a batch's successes are acked with the next round's
 * claim (on PostgreSQL in its statement: one round trip and one commit per
 * batch), which follows at once; they are acked on their own before
 * housekeeping, when that claim fails, and before run() returns. Messages
 * with an ordering key are acked at once, as run_once() acks everything. */
IBX_API ibx_result ibx_dispatcher_run(ibx_dispatcher *dispatcher);

/* Ask run() to return after the current round. Final: a stop given
 * before run() starts is kept (run() then returns at once), and every
 * later run() returns IBX_OK at once, handling nothing (run_once() still
 * works); to dispatch again, create a new dispatcher. Thread-safe (not
 * async-signal-safe: from a signal handler use desc.stop_flag). */
IBX_API void ibx_dispatcher_stop(ibx_dispatcher *dispatcher);

/* Tell a waiting run() that messages were just committed, so it claims now
 * instead of at the next poll (the producer's "hot path"; the database
 * stays the only source of truth). Call it after your commit. Thread-safe;
 * cheap when the dispatcher is busy. Producers in other processes are seen
 * at the next poll. */
IBX_API void ibx_dispatcher_wake(ibx_dispatcher *dispatcher);

/* Wake the dispatcher listening at the store's wake_path (see the store
 * desc), in this or another process. The store does it by itself after
 * each enqueue it commits; call it when messages reached the table another
 * way (after you commit a transaction that enqueued through a _tx call, or
 * rows written with SQL). Never blocks; no listener is not an error.
 * Returns IBX_OK, or IBX_ERR_INVALID_ARG for a NULL store. */
IBX_API ibx_result ibx_notify(ibx_store *store);

/* ---- Your own driver: the statements, run in your transaction ---------------- */

/* For a program whose business writes go through its own driver (libpq,
 * the sqlite3 C API, MariaDB Connector/C, ...) and not ODBC: the library
 * gives the statements an _tx call would run, with their values, and the
 * program runs them on its own connection inside its own transaction
 * (ibx_enqueue_sql). They do exactly what the _tx call does on `hdbc`,
 * rows and ordering keys alike. The program commits or rolls back; after a
 * commit, ibx_notify(store) wakes a dispatcher as after any _tx call. The
 * conveniences below (ibx_enqueue_sqlite3, ibx_enqueue_pq,
 * ibx_enqueue_mysql) do all of it for one driver each. */

/* One value of a statement, in the order of its markers (a value a
 * statement uses twice is given twice). */
typedef struct ibx_sql_param {
    const char *value;  /* the value as text (an integer in decimal), NUL-terminated;
                           NULL: SQL NULL */
    size_t length;      /* bytes of value without the NUL; 0 for NULL */
    int is_int;         /* a 64-bit integer (i64; NULL or not): bind it typed where the
                           driver types values (libpq: int8, OID 20), else as text */
    int64_t i64;        /* the integer when is_int and value is not NULL */
    int is_blob;        /* bytes, any of them (a content hash): bind as binary (libpq:
                           bytea, OID 17, binary format); still NUL-terminated */
} ibx_sql_param;

/* One statement of the store's dialect, to run in order. */
typedef struct ibx_sql_stmt {
    const char *sql;             /* the text, markers as asked (IBX_SQL_MARKERS_*) */
    int param_count;
    const ibx_sql_param *params; /* param_count values */
    int check_column;            /* 0: returns no row (ignore any count). N > 0: returns one
                                    row; pass its column N (as text, NULL if SQL NULL) to
                                    ibx_sql_check, and go on only on IBX_OK */
    int counts;                  /* 1: its count is the call's outcome (the inbox: 1 when the
                                    message is new): the first column of the row it returns,
                                    or, returning none, the rows it changed */
} ibx_sql_stmt;

/* Statements to run, from ibx_enqueue_sql; free with ibx_sql_free. */
typedef struct ibx_sql ibx_sql;

#define IBX_SQL_MARKERS_QUESTION 0 /* "?": sqlite3, MariaDB Connector/C, ODBC */
#define IBX_SQL_MARKERS_DOLLAR 1   /* "$1", "$2", ...: libpq */

/* How many statements `sql` holds (0 for NULL), and statement i of them
 * (NULL when out of range): valid until ibx_sql_free. */
IBX_API int ibx_sql_count(const ibx_sql *sql);
IBX_API const ibx_sql_stmt *ibx_sql_at(const ibx_sql *sql, int i);

/* The row of a statement with check_column: `value` is its column
 * check_column. Returns IBX_OK to go on; IBX_ERR_STATE, where "hdbc:
 * isolation", when the transaction may not take the message (MariaDB: a
 * keyed message needs READ COMMITTED, see ibx_enqueue_tx) -- then roll
 * back, nothing of the message is meant to commit; IBX_ERR_INVALID_ARG for
 * a NULL store or stmt, or a stmt without check_column. */
IBX_API ibx_result ibx_sql_check(ibx_store *store, const ibx_sql_stmt *stmt, const char *value);

/* The id of message i of the statements (the work item id the _tx call
 * would give), NUL-terminated; NULL when out of range. */
IBX_API const char *ibx_sql_id(const ibx_sql *sql, int i);

/* Record a failure as the store's last error (ibx_store_last_error), for
 * a program's driver code (the conveniences use it). With `result`
 * IBX_ERR_DB the failure is classified as the library classifies its own:
 * `sqlstate` (5 characters, or NULL/"" if the driver has none) and
 * `native` (the driver's code: MariaDB's error number, SQLite's result
 * code, 0 if none) make it IBX_ERR_DB_TRANSIENT (deadlock, serialization
 * failure, busy, lost connection: roll back and retry) or leave it
 * IBX_ERR_DB; any other result is recorded as given. `where` and `message`
 * are copied. Returns the recorded code, or IBX_ERR_INVALID_ARG for a NULL
 * store. */
IBX_API ibx_result ibx_sql_error(ibx_store *store, ibx_result result, const char *where, const char *sqlstate,
                                 long native, const char *message);

/* Free statements from ibx_enqueue_sql (NULL is a no-op). */
IBX_API void ibx_sql_free(ibx_sql *sql);

/* The dispatcher's last error: with one store it is that store's error;
 * with a provider, the error of the last round that failed (copied, so it
 * outlives a store that discovery has since closed), of the last discovery
 * that failed (where "ibx_provider_refresh: discover"; the round itself
 * goes on with the current set) or of the last ibx_dispatcher_on. NULL
 * gives a static "store is NULL" error. */
IBX_API const ibx_error *ibx_dispatcher_last_error(const ibx_dispatcher *dispatcher);

#ifndef IBX_NO_DEAD_LETTERS
/* ---- Dead letters: list, replay, purge --------------------------------------------- */

/* List dead messages matching `filter` (NULL: all), oldest first (by
 * creation, then key), skipping `offset` (>= 0) and returning at most
 * `limit` (1..IBX_BATCH_MAX). *messages points at *count messages in the
 * store's claim buffer: valid until the next claim or list on this store
 * (so not from a handler of a dispatcher on the same store). Pages are by
 * offset: after a replay or purge, start again from 0. Touches the
 * database (one read). Returns IBX_OK (count >= 1), IBX_EMPTY (none);
 * IBX_ERR_INVALID_ARG (NULL pointers, a filter text empty, not UTF-8 or
 * too long, a key that is not one); IBX_ERR_OUT_OF_RANGE (limit, offset,
 * a time outside 0..IBX_TIME_MAX_MS); IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_dead_list(ibx_store *store, const ibx_dead_filter *filter, int offset,
                                 int limit, const ibx_message **messages, int *count);

/* Replay dead messages matching `filter` (NULL: all): ready again at once,
 * attempts reset to 0, their last error kept for the record until a new
 * one replaces it, their expiry dropped (a replay is the decision to run
 * it: an expired message would go dead again at once, and under
 * ordering_dead_holds keep its key waiting). One statement: a message is
 * replayed once, whatever other callers do meanwhile (a purge running at
 * the same time deletes it only if it is still dead), and dispatchers never
 * touch dead ones. A join step it already counted as failed stays failed. *replayed (if not
 * NULL) gets the count. Returns IBX_OK; the errors of ibx_dead_list but
 * IBX_EMPTY. */
IBX_API ibx_result ibx_dead_replay(ibx_store *store, const ibx_dead_filter *filter, int64_t *replayed);

/* Delete dead messages matching `filter` (NULL: all), in transactions of
 * at most 1000 rows each until none is left; *purged (if
 * not NULL) gets the count. Done messages are deleted by ibx_cleanup.
 * Returns as ibx_dead_replay (rows deleted by earlier batches stay
 * deleted after an error). */
IBX_API ibx_result ibx_dead_purge(ibx_store *store, const ibx_dead_filter *filter, int64_t *purged);
#endif /* IBX_NO_DEAD_LETTERS */


/* ---- Running statements on three drivers --------------------------------------------
 * Where the program included a driver's header before this one: the
 * statements of an ibx_sql run on that driver's connection, inside the
 * transaction open on it, as static inline functions (no link dependency
 * for anyone else). The header's own calls (ibx_enqueue_sqlite3 and its
 * kin) are built on them. `fn` names the caller in errors; *count (if not
 * NULL) receives the count of the statement with `counts` set. */
#if defined(SQLITE3_H) || defined(_SQLITE3_H_) || defined(SQLITE_VERSION_NUMBER) || defined(LIBPQ_FE_H) || \
    defined(_mysql_h)
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* atoll */
#include <string.h> /* memcpy, strlen */
#endif

#if (defined(SQLITE3_H) || defined(_SQLITE3_H_) || defined(SQLITE_VERSION_NUMBER)) && !defined(IBX__SQLITE3_RUN)
#define IBX__SQLITE3_RUN
static inline ibx_result ibx__sql_sqlite3(ibx_store *store, const char *fn, sqlite3 *db, const ibx_sql *sql,
                                          int64_t *count) {
    char where[96];
    const ibx_sql_stmt *s;
    ibx_result r = IBX_OK;
    int i, k;
    snprintf(where, sizeof where, "%s: db", fn);
    if (sqlite3_get_autocommit(db))
        return ibx_sql_error(store, IBX_ERR_STATE, where, NULL, 0,
                             "db is in autocommit: BEGIN IMMEDIATE first (the message must commit with your work)");
    snprintf(where, sizeof where, "%s: sqlite3_step", fn);
    for (i = 0; r == IBX_OK && (s = ibx_sql_at(sql, i)) != NULL; i++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, s->sql, -1, &st, NULL);
        for (k = 0; rc == SQLITE_OK && k < s->param_count; k++) {
            const ibx_sql_param *p = &s->params[k];
            rc = !p->value   ? sqlite3_bind_null(st, k + 1)
               : p->is_int  ? sqlite3_bind_int64(st, k + 1, (sqlite3_int64)p->i64)
               : p->is_blob ? sqlite3_bind_blob(st, k + 1, p->value, (int)p->length, SQLITE_STATIC)
                            : sqlite3_bind_text(st, k + 1, p->value, (int)p->length, SQLITE_STATIC);
        }
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        if (rc == SQLITE_ROW && s->check_column > 0)
            r = ibx_sql_check(store, s, (const char *)sqlite3_column_text(st, s->check_column - 1));
        else if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            r = ibx_sql_error(store, IBX_ERR_DB, where, NULL, sqlite3_errcode(db), sqlite3_errmsg(db));
        else if (s->counts && count)
            *count = rc == SQLITE_ROW ? (int64_t)sqlite3_column_int64(st, 0) : (int64_t)sqlite3_changes(db);
        sqlite3_finalize(st);
    }
    return r;
}
#endif

#if defined(LIBPQ_FE_H) && !defined(IBX__PQ_RUN)
#define IBX__PQ_RUN
static inline ibx_result ibx__sql_pq(ibx_store *store, const char *fn, PGconn *conn, const ibx_sql *sql,
                                     int64_t *count) {
    char where[96];
    const ibx_sql_stmt *s;
    ibx_result r = IBX_OK;
    int i, k;
    snprintf(where, sizeof where, "%s: conn", fn);
    if (PQtransactionStatus(conn) != PQTRANS_INTRANS)
        return ibx_sql_error(store, IBX_ERR_STATE, where, NULL, 0,
                             PQtransactionStatus(conn) == PQTRANS_INERROR
                                 ? "conn's transaction has failed: roll it back"
                                 : "conn is not in a transaction: BEGIN first (the message must commit with your work)");
    snprintf(where, sizeof where, "%s: PQexecParams", fn);
    for (i = 0; r == IBX_OK && (s = ibx_sql_at(sql, i)) != NULL; i++) {
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
            r = ibx_sql_check(store, s, PQntuples(res) < 1 || PQgetisnull(res, 0, s->check_column - 1)
                                            ? NULL : PQgetvalue(res, 0, s->check_column - 1));
        else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            r = ibx_sql_error(store, IBX_ERR_DB, where, res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL, 0,
                              res ? PQresultErrorMessage(res) : "more than 64 parameters");
        else if (s->counts && count)
            *count = st == PGRES_TUPLES_OK && PQntuples(res) > 0 ? atoll(PQgetvalue(res, 0, 0))
                                                                 : atoll(PQcmdTuples(res));
        PQclear(res);
    }
    return r;
}
#endif

#if defined(_mysql_h) && !defined(IBX__MYSQL_RUN)
#define IBX__MYSQL_RUN
/* A statement's one row, columns as text, into col; 0 when it has none. */
static inline int ibx__sql_mysql_row(MYSQL_STMT *st, char col[8][64], my_bool nulls[8]) {
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

static inline ibx_result ibx__sql_mysql(ibx_store *store, const char *fn, MYSQL *mysql, const ibx_sql *sql,
                                        int64_t *count) {
    char where[96];
    const ibx_sql_stmt *s;
    ibx_result r = IBX_OK;
    int i, k;
    snprintf(where, sizeof where, "%s: mysql", fn);
    if ((mysql->server_status & SERVER_STATUS_AUTOCOMMIT) && !(mysql->server_status & SERVER_STATUS_IN_TRANS))
        return ibx_sql_error(store, IBX_ERR_STATE, where, NULL, 0,
                             "mysql is in autocommit: START TRANSACTION first (the message must commit with your work)");
    snprintf(where, sizeof where, "%s: mysql_stmt_execute", fn);
    for (i = 0; r == IBX_OK && (s = ibx_sql_at(sql, i)) != NULL; i++) {
        MYSQL_STMT *st = mysql_stmt_init(mysql);
        MYSQL_BIND b[64];
        unsigned long len[64];
        char col[8][64];
        my_bool nulls[8] = {0};
        int ok = st && s->param_count <= 64 && mysql_stmt_prepare(st, s->sql, (unsigned long)strlen(s->sql)) == 0;
        memset(b, 0, sizeof b);
        for (k = 0; ok && k < s->param_count; k++) {
            const ibx_sql_param *p = &s->params[k];
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
            ok = ibx__sql_mysql_row(st, col, nulls) && (unsigned)s->check_column <= mysql_stmt_field_count(st);
            if (ok && s->check_column > 0)
                r = ibx_sql_check(store, s, nulls[s->check_column - 1] ? NULL : col[s->check_column - 1]);
            if (ok && s->counts && count) *count = nulls[0] ? 0 : atoll(col[0]);
        } else if (ok && s->counts && count) {
            *count = (int64_t)mysql_stmt_affected_rows(st);
        }
        if (!ok && r == IBX_OK)
            r = ibx_sql_error(store, IBX_ERR_DB, where, st ? mysql_stmt_sqlstate(st) : mysql_sqlstate(mysql),
                              (long)(st ? mysql_stmt_errno(st) : mysql_errno(mysql)),
                              st ? mysql_stmt_error(st) : mysql_error(mysql));
        if (st) mysql_stmt_close(st);
    }
    return r;
}
#endif

/* >>common-end api-engine */

/* ---- Your own driver: the inbox's statements --------------------------------------- */

/* The inbox's dedup and enqueue (ibx_enqueue's upsert) in a transaction of
 * the program's own driver: *out_sql receives the statements, in the
 * store's dialect with `markers` (IBX_SQL_MARKERS_QUESTION or _DOLLAR),
 * and their values (the hash as bytes: ibx_sql_param.is_blob). Run them in
 * order on your connection inside your transaction, then commit or roll
 * back yourself and ibx_sql_free them; the statement with `counts` tells
 * whether the message was taken: a count above 0 is ibx_enqueue's
 * *enqueued = 1 (new, or a redelivery of one still to handle), 0 a
 * duplicate of one done. After the commit, ibx_notify(store) wakes a
 * dispatcher. A hash differing from the stored one is not logged (that
 * needs a read first, which ibx_enqueue does). max_pending is checked on
 * the store's own connection. Returns IBX_OK; the argument errors of
 * ibx_enqueue (named, e.g. "ibx_enqueue: message_id", before anything is
 * made); IBX_ERR_INVALID_ARG naming out_sql (NULL) or markers;
 * IBX_ERR_STATE (store not open); IBX_ERR_FULL; IBX_ERR_NO_MEMORY;
 * IBX_ERR_DB(_TRANSIENT) only from max_pending's count. */
IBX_API ibx_result ibx_enqueue_sql(ibx_store *store, const ibx_new_message *message, int markers,
                                   ibx_sql **out_sql);

/* ---- The conveniences for three drivers --------------------------------------------
 * As obx.h's (obx_enqueue_sqlite3 and its kin; the same rules): where the
 * program included <sqlite3.h>, <libpq-fe.h> or MariaDB Connector/C's
 * <mysql.h> before ibx.h, ibx_enqueue in the transaction open on that
 * driver's connection, static inline. *enqueued (if not NULL) is set on
 * success only: 1 when the message was taken, 0 for a duplicate of one
 * done. Returns IBX_OK; IBX_ERR_INVALID_ARG for a NULL store or connection
 * (named) and every error of ibx_enqueue_sql, before anything is sent;
 * IBX_ERR_STATE naming the connection when it is not in a transaction;
 * IBX_ERR_DB / IBX_ERR_DB_TRANSIENT with the driver's message and codes:
 * roll back. Commit, then ibx_notify(store). */
#define IBX__SQL_ENQUEUE(fn, conn, markers, run)                                                       \
    ibx_sql *sql = NULL;                                                                              \
    int64_t rows = 0;                                                                                 \
    ibx_result r;                                                                                     \
    if (!store) return IBX_ERR_INVALID_ARG;                                                           \
    if (!(conn)) return ibx_sql_error(store, IBX_ERR_INVALID_ARG, fn ": " #conn, NULL, 0, #conn " must not be NULL"); \
    r = ibx_enqueue_sql(store, message, markers, &sql);                                               \
    if (r == IBX_OK) r = run(store, fn, conn, sql, &rows);                                            \
    if (r == IBX_OK && enqueued) *enqueued = rows > 0;                                                \
    ibx_sql_free(sql);                                                                                \
    return r;

#ifdef IBX__SQLITE3_RUN
static inline ibx_result ibx_enqueue_sqlite3(ibx_store *store, sqlite3 *db, const ibx_new_message *message,
                                             int *enqueued) {
    IBX__SQL_ENQUEUE("ibx_enqueue_sqlite3", db, IBX_SQL_MARKERS_QUESTION, ibx__sql_sqlite3)
}
#endif

#ifdef IBX__PQ_RUN
static inline ibx_result ibx_enqueue_pq(ibx_store *store, PGconn *conn, const ibx_new_message *message,
                                        int *enqueued) {
    IBX__SQL_ENQUEUE("ibx_enqueue_pq", conn, IBX_SQL_MARKERS_DOLLAR, ibx__sql_pq)
}
#endif

#ifdef IBX__MYSQL_RUN
static inline ibx_result ibx_enqueue_mysql(ibx_store *store, MYSQL *mysql, const ibx_new_message *message,
                                           int *enqueued) {
    IBX__SQL_ENQUEUE("ibx_enqueue_mysql", mysql, IBX_SQL_MARKERS_QUESTION, ibx__sql_mysql)
}
#endif

#ifndef IBX_NO_DEAD_LETTERS
/* Operator actions on one message (obxctl --inbox cancel, dead move, run). */

/* Move message (`source`, `message_id`) to Dead now, with `reason` as its
 * last error: one waiting to be handled (due or scheduled), and with
 * `in_flight` non-zero also one in flight (its lease ends: the holder's
 * ack, abandon or fail then changes nothing). Done, Dead and seen messages
 * are left as they are. *moved (if not NULL) gets 1, or 0 when there is no
 * such message in a state it may leave. Returns IBX_OK;
 * IBX_ERR_INVALID_ARG (source or message id NULL, empty or too long;
 * reason NULL, empty, not UTF-8 or over 255 characters);
 * IBX_ERR_DB(_TRANSIENT). */
IBX_API ibx_result ibx_dead_move(ibx_store *store, const char *message_id, const char *source,
                                 const char *reason, int in_flight, int64_t *moved);

/* Make message (`source`, `message_id`), waiting for its due time or a
 * retry's backoff, claimable now (its next attempt: the database's clock).
 * One in flight, Done, Dead or seen is left as it is (*changed 0).
 * *changed (if not NULL) gets 1 or 0. Returns as ibx_dead_move. */
IBX_API ibx_result ibx_run_now(ibx_store *store, const char *message_id, const char *source,
                               int64_t *changed);
#endif /* IBX_NO_DEAD_LETTERS */


/* >>common-begin head */
#ifdef __cplusplus
}
#endif
#endif /* IBX_H_INCLUDED */

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#if defined(IBX_IMPLEMENTATION) && !defined(IBX__IMPLEMENTED)
#define IBX__IMPLEMENTED

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
 * ibx__stmt_args_rows beside the statements; every dialect's text must take
 * exactly those (CORE-STMT-PARAMS; debug builds check at open and bind).
 *
 * One place decides how a unit of work runs: ibx__unit_mode (see "odbc:
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
#define IBX__LEAN_HERE
#endif
#include <windows.h>
#ifdef IBX__LEAN_HERE
#undef WIN32_LEAN_AND_MEAN
#undef IBX__LEAN_HERE
#endif
#include <process.h> /* _getpid, _beginthreadex */
#else
#include <unistd.h> /* getpid */
#endif
#ifdef IBX_SQLITE3_API
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
#if !defined(IBX_NO_THREADS) && !defined(_WIN32)
#include <pthread.h>
#endif

/* The feature set of this file is fixed by now (see "features" at the top):
 * POSIX 2008 must be in it. glibc says so itself (__USE_XOPEN2K8); elsewhere
 * CLOCK_MONOTONIC is the sign. */
#if !(defined(IBX_NO_POSIX_CLOCK) && defined(IBX_NO_THREADS) && defined(IBX_NO_WAKE_SOCKET)) && !defined(_WIN32) && \
    ((defined(__GLIBC__) && !defined(__USE_XOPEN2K8)) || (!defined(IBX_NO_POSIX_CLOCK) && !defined(CLOCK_MONOTONIC)))
#error "ibx: the implementation needs POSIX 2008, which this file's feature set hides (strict ISO C, and a system header included before ibx.h, or a _POSIX_C_SOURCE below 200809L): in the file that defines IBX_IMPLEMENTATION, include ibx.h (with that define) before any other header, or compile that file with -D_POSIX_C_SOURCE=200809L"
#endif

/* Portable fallbacks, for systems without a call used by default: taken on
 * Apple, forced anywhere by IBX_PORTABLE_FALLBACKS (so Linux tests them).
 * Condition variables wait on CLOCK_REALTIME deadlines (no
 * pthread_condattr_setclock); the random seed comes from arc4random_buf, not
 * /dev/urandom. Each is compiled out where unused. */
#if defined(IBX_PORTABLE_FALLBACKS) || defined(__APPLE__)
#define IBX__FALLBACKS 1
#else
#define IBX__FALLBACKS 0
#endif

/* arc4random_buf (the fallback's seed): stdlib.h declares it only with the
 * system's extensions on (glibc 2.36+: _DEFAULT_SOURCE; macOS: no
 * _POSIX_C_SOURCE, or _DARWIN_C_SOURCE); else declared here, and maybe by
 * both headers (harmless: the same prototype). */
#if IBX__FALLBACKS && ((defined(__GLIBC__) && !defined(__USE_MISC)) || \
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
#define IBX__PRIVATE static __attribute__((unused))
#define IBX__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define IBX__PRIVATE static
#define IBX__PRINTF(f, a)
#endif

/* Threads: pthreads, or on Windows (MSVC and mingw-w64 alike, no
 * winpthreads) a thin layer over Win32 in the same shape: SRW locks,
 * condition variables, _beginthreadex, one-time initialization. Results as
 * pthreads gives them where the code looks (0 = done). A condition's
 * deadline (ibx__deadline) is a timespec on POSIX, GetTickCount64()
 * milliseconds on Windows; ibx__cond_init and ibx__cond_deadline are below,
 * with the clocks. */
#ifndef IBX_NO_THREADS
#ifdef _WIN32
typedef SRWLOCK ibx__mutex_t;
typedef CONDITION_VARIABLE ibx__cond_t;
typedef INIT_ONCE ibx__once_t;
typedef ULONGLONG ibx__deadline;
typedef struct ibx__thread_t {
    HANDLE handle;
    void *(*fn)(void *);
    void *arg;
} ibx__thread_t;
#define IBX__MUTEX_INIT SRWLOCK_INIT
#define IBX__ONCE_INIT INIT_ONCE_STATIC_INIT
#define ibx__mutex_init(m) InitializeSRWLock(m)
#define ibx__mutex_destroy(m) ((void)(m))
#define ibx__mutex_lock(m) AcquireSRWLockExclusive(m)
#define ibx__mutex_unlock(m) ReleaseSRWLockExclusive(m)
#define ibx__mutex_trylock(m) (TryAcquireSRWLockExclusive(m) ? 0 : 1)
#define ibx__cond_destroy(c) ((void)(c))
#define ibx__cond_signal(c) WakeConditionVariable(c)
#define ibx__cond_broadcast(c) WakeAllConditionVariable(c)
#define ibx__cond_wait(c, m) ((void)SleepConditionVariableSRW(c, m, INFINITE, 0))
/* 0 when signalled (or woken spuriously: callers loop), else timed out. */
IBX__PRIVATE int ibx__cond_timedwait(ibx__cond_t *c, ibx__mutex_t *m, const ibx__deadline *d) {
    ULONGLONG now = GetTickCount64();
    return now >= *d || !SleepConditionVariableSRW(c, m, (DWORD)(*d - now), 0);
}
IBX__PRIVATE unsigned __stdcall ibx__thread_main(void *arg) {
    ibx__thread_t *t = (ibx__thread_t *)arg; /* lives in the caller's object until joined */
    t->fn(t->arg);
    return 0;
}
IBX__PRIVATE int ibx__thread_create(ibx__thread_t *t, void *(*fn)(void *), void *arg) {
    uintptr_t h;
    t->fn = fn;
    t->arg = arg;
    h = _beginthreadex(NULL, 0, ibx__thread_main, t, 0, NULL);
    t->handle = (HANDLE)h;
    return h ? 0 : 1;
}
IBX__PRIVATE void ibx__thread_join(ibx__thread_t *t) {
    WaitForSingleObject(t->handle, INFINITE);
    CloseHandle(t->handle);
}
typedef struct ibx__once_fn { void (*fn)(void); } ibx__once_fn;
IBX__PRIVATE BOOL CALLBACK ibx__once_main(PINIT_ONCE once, PVOID box, PVOID *ctx) {
    (void)once;
    (void)ctx;
    ((ibx__once_fn *)box)->fn();
    return TRUE;
}
IBX__PRIVATE void ibx__once(ibx__once_t *once, void (*fn)(void)) {
    ibx__once_fn box;
    box.fn = fn;
    InitOnceExecuteOnce(once, ibx__once_main, &box, NULL);
}
#else
typedef pthread_mutex_t ibx__mutex_t;
typedef pthread_cond_t ibx__cond_t;
typedef pthread_once_t ibx__once_t;
typedef pthread_t ibx__thread_t;
typedef struct timespec ibx__deadline;
#define IBX__MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define IBX__ONCE_INIT PTHREAD_ONCE_INIT
#define ibx__mutex_init(m) pthread_mutex_init(m, NULL)
#define ibx__mutex_destroy(m) pthread_mutex_destroy(m)
#define ibx__mutex_lock(m) pthread_mutex_lock(m)
#define ibx__mutex_unlock(m) pthread_mutex_unlock(m)
#define ibx__mutex_trylock(m) pthread_mutex_trylock(m)
#define ibx__cond_destroy(c) pthread_cond_destroy(c)
#define ibx__cond_signal(c) pthread_cond_signal(c)
#define ibx__cond_broadcast(c) pthread_cond_broadcast(c)
#define ibx__cond_wait(c, m) pthread_cond_wait(c, m)
#define ibx__cond_timedwait(c, m, d) pthread_cond_timedwait(c, m, d)
#define ibx__thread_create(t, fn, arg) pthread_create(t, NULL, fn, arg)
#define ibx__thread_join(t) pthread_join(*(t), NULL)
#define ibx__once(o, fn) pthread_once(o, fn)
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
#define IBX__SHARED __attribute__((weak))
#else
#define IBX__SHARED static
#endif

/* >>common-end head */

/* The lock around connecting (see ibx__driver_connect), shared by obx.h and
 * ibx.h in one program: in one file through the guard, in two through a
 * weak symbol that the linker makes one (IBX__SHARED, above). */
#if !defined(IBX_NO_THREADS) && !defined(OBX_IBX_CONNECT_LOCK_DEFINED)
#define OBX_IBX_CONNECT_LOCK_DEFINED
IBX__SHARED ibx__mutex_t obx_ibx_connect_lock = IBX__MUTEX_INIT;
#endif
#define IBX__CONNECT_LOCK obx_ibx_connect_lock

/* >>common-begin core */



#ifndef IBX_ASSERT
#if defined(IBX_TERSE_MESSAGES) && !defined(NDEBUG)
/* Terse: the line names the invariant; the expression's text, the
 * function's name and the file's path are left out. */
#define IBX_ASSERT(c) ((c) ? (void)0 : ibx__assert_failed(__LINE__))
IBX__PRIVATE void ibx__assert_failed(int line) {
    fprintf(stderr, "ibx.h:%d: internal assertion failed\n", line);
    abort();
}
#else
#include <assert.h>
#define IBX_ASSERT(c) assert(c)
#endif
#endif

/* A wrong unixodbc.h (copied from another architecture) or
 * BUILD_LEGACY_64_BIT_MODE silently breaks the driver ABI: stop the build. */
typedef char ibx__check_sqlbigint[(sizeof(SQLBIGINT) == 8) ? 1 : -1];
typedef char ibx__check_sqllen[(sizeof(SQLLEN) == sizeof(void *)) ? 1 : -1];

/* ODBC takes non-const SQLCHAR* even for input strings. */
#define IBX__SQLTEXT(s) ((SQLCHAR *)(uintptr_t)(const void *)(s))

/* >> hooks ------------------------------------------------------------------ */

/* The resolved hooks of one store: every member set. */
typedef struct ibx__hooks {
    ibx_allocator alloc;
    ibx_clock clock;
    ibx_logger log;
    ibx_random rng;
    uint64_t rng_state; /* state of the default random source */
    int env_level_bad;  /* IBX_LOG_LEVEL named no level (said once per store or provider) */
} ibx__hooks;

static void *ibx__default_alloc(size_t size, void *user) { (void)user; return malloc(size); }
static void *ibx__default_realloc(void *ptr, size_t size, void *user) { (void)user; return realloc(ptr, size); }
static void ibx__default_free(void *ptr, void *user) { (void)user; free(ptr); }

/* Waits are cut into slices of at most an hour: a 32-bit time_t (armhf)
 * cannot hold a deadline near INT64_MAX ms ("never again"), and one that
 * wrapped would be in the past: a wait that never waits. */
#define IBX__WAIT_SLICE_MAX_MS 3600000
#if defined(IBX_NO_POSIX_CLOCK)
static int64_t ibx__default_now_utc_ms(void *user) { (void)user; return (int64_t)time(NULL) * 1000; }
static int64_t ibx__default_monotonic_ms(void *user) { (void)user; return (int64_t)time(NULL) * 1000; }
static void ibx__default_sleep_ms(int64_t ms, void *user) { (void)ms; (void)user; }
#elif defined(_WIN32)
/* Windows: the system time (100 ns since 1601) and the performance counter. */
static int64_t ibx__default_now_utc_ms(void *user) {
    FILETIME ft;
    ULARGE_INTEGER t;
    (void)user;
    GetSystemTimeAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    return (int64_t)(t.QuadPart / 10000) - INT64_C(11644473600000);
}
static int64_t ibx__mono_us_now(void) {
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (int64_t)(c.QuadPart / f.QuadPart * 1000000 + c.QuadPart % f.QuadPart * 1000000 / f.QuadPart);
}
static int64_t ibx__default_monotonic_ms(void *user) { (void)user; return ibx__mono_us_now() / 1000; }
static void ibx__default_sleep_ms(int64_t ms, void *user) {
    (void)user;
    while (ms > 0) {
        int64_t slice = ms < IBX__WAIT_SLICE_MAX_MS ? ms : IBX__WAIT_SLICE_MAX_MS;
        Sleep((DWORD)slice);
        ms -= slice;
    }
}
#else
static int64_t ibx__clock_ms(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}
static int64_t ibx__mono_us_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000 + (int64_t)(ts.tv_nsec / 1000);
}
static int64_t ibx__default_now_utc_ms(void *user) { (void)user; return ibx__clock_ms(CLOCK_REALTIME); }
static int64_t ibx__default_monotonic_ms(void *user) { (void)user; return ibx__clock_ms(CLOCK_MONOTONIC); }
static void ibx__default_sleep_ms(int64_t ms, void *user) {
    (void)user;
    while (ms > 0) {
        int64_t slice = ms < IBX__WAIT_SLICE_MAX_MS ? ms : IBX__WAIT_SLICE_MAX_MS;
        struct timespec ts;
        ts.tv_sec = (time_t)(slice / 1000);
        ts.tv_nsec = (long)(slice % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) != 0) { /* interrupted by a signal: sleep the rest */ }
        ms -= slice;
    }
}
#endif

#if !defined(IBX_NO_THREADS) && defined(_WIN32)
/* Windows: deadlines on GetTickCount64 (monotonic; ~16 ms steps, fine for
 * slices of 100 ms and more). */
IBX__PRIVATE void ibx__cond_init(ibx__cond_t *c) { InitializeConditionVariable(c); }
IBX__PRIVATE void ibx__cond_deadline(ibx__deadline *d, int64_t ms) { *d = GetTickCount64() + (ULONGLONG)ms; }
#elif !defined(IBX_NO_THREADS)
/* Condition variables with deadlines `ms` from now. By default they wait on
 * CLOCK_MONOTONIC (pthread_condattr_setclock: immune to wall-clock steps).
 * The fallback (IBX__FALLBACKS: macOS has no such call) waits on
 * CLOCK_REALTIME: a wall-clock step then lengthens or shortens one wait, and
 * every wait is a short slice (100 ms renewer, 250 ms with a stop flag, at
 * most an hour). */
IBX__PRIVATE void ibx__cond_init(ibx__cond_t *c) {
#if IBX__FALLBACKS
    pthread_cond_init(c, NULL);
#else
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
#endif
}

IBX__PRIVATE void ibx__cond_deadline(ibx__deadline *ts, int64_t ms) {
    clock_gettime(IBX__FALLBACKS ? CLOCK_REALTIME : CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}
#endif

static const char *ibx__level_name(ibx_log_level level) {
    switch (level) {
    case IBX_LOG_DEBUG: return "DEBUG";
    case IBX_LOG_INFO: return "INFO";
    case IBX_LOG_WARN: return "WARN";
    case IBX_LOG_ERROR: return "ERROR";
    case IBX_LOG_OFF: break;
    }
    return "?";
}

/* "2026-11-27T10:47:19.123Z" for Unix time `ms` (UTC; years 0..9999): the
 * civil date from the day count, without gmtime (not in C99, not reentrant). */
IBX__PRIVATE void ibx__utc_text(int64_t ms, char out[32]) {
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

static long ibx__pid(void) {
#ifdef _WIN32
    return (long)_getpid();
#else
    return (long)getpid();
#endif
}

static void ibx__default_log(ibx_log_level level, const char *store_id, const char *message,
                             void *user) {
    char when[32];
    (void)user;
    ibx__utc_text(ibx__default_now_utc_ms(NULL), when);
    fprintf(stderr, "%s ibx[%ld] %-5s [%s] %s\n", when, ibx__pid(), ibx__level_name(level), store_id, message);
}

/* The level IBX_LOG_LEVEL names (any case), 0 when it is unset, -1 when it
 * names none. */
IBX__PRIVATE int ibx__env_level(void) {
    static const struct { const char *name; ibx_log_level level; } levels[] = {
        {"debug", IBX_LOG_DEBUG}, {"info", IBX_LOG_INFO}, {"warn", IBX_LOG_WARN},
        {"warning", IBX_LOG_WARN}, {"error", IBX_LOG_ERROR}, {"off", IBX_LOG_OFF}};
    const char *v = getenv("IBX_LOG_LEVEL");
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
static uint64_t ibx__default_random(void *user) {
    uint64_t z;
#if defined(__GNUC__) || defined(__clang__)
    z = __atomic_add_fetch((uint64_t *)user, 0x9E3779B97F4A7C15ULL, __ATOMIC_RELAXED);
#elif !defined(IBX_NO_THREADS)
    static ibx__mutex_t lock = IBX__MUTEX_INIT;
    ibx__mutex_lock(&lock);
    z = (*(uint64_t *)user += 0x9E3779B97F4A7C15ULL);
    ibx__mutex_unlock(&lock);
#else
    z = (*(uint64_t *)user += 0x9E3779B97F4A7C15ULL);
#endif
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t ibx__random_seed(const void *salt) {
    uint64_t seed = 0;
#if defined(_WIN32)
    unsigned int part[2];
    if (rand_s(&part[0]) == 0 && rand_s(&part[1]) == 0) seed = (uint64_t)part[0] << 32 | part[1];
#elif IBX__FALLBACKS
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
 * given whole or not at all: a half-set one is refused (IBX_ERR_INVALID_ARG)
 * rather than silently mixed with malloc. */
IBX__PRIVATE ibx_result ibx__hooks_resolve(ibx__hooks *h, const ibx_hooks *given) {
    ibx_hooks none;
    const ibx_allocator *a;
    memset(&none, 0, sizeof none);
    if (!given) given = &none;
    a = &given->allocator;
    if (a->alloc && a->realloc && a->free) {
        h->alloc = given->allocator;
    } else {
        h->alloc.alloc = ibx__default_alloc;
        h->alloc.realloc = ibx__default_realloc;
        h->alloc.free = ibx__default_free;
        h->alloc.user = NULL;
    }
    h->clock = given->clock;
    if (!h->clock.now_utc_ms) h->clock.now_utc_ms = ibx__default_now_utc_ms;
    if (!h->clock.monotonic_ms) h->clock.monotonic_ms = ibx__default_monotonic_ms;
    if (!h->clock.sleep_ms) h->clock.sleep_ms = ibx__default_sleep_ms;
    h->log = given->logger;
    if (!h->log.log) { h->log.log = ibx__default_log; h->log.user = NULL; }
    if (h->log.min_level == 0) {
        int env = ibx__env_level();
        h->log.min_level = env > 0 ? (ibx_log_level)env : IBX_LOG_INFO;
        h->env_level_bad = env < 0;
    }
    h->rng = given->random;
    if (!h->rng.next_u64) {
        h->rng_state = ibx__random_seed(h);
        h->rng.next_u64 = ibx__default_random;
        h->rng.user = &h->rng_state;
    }
    return (a->alloc || a->realloc || a->free) && !(a->alloc && a->realloc && a->free)
               ? IBX_ERR_INVALID_ARG : IBX_OK;
}

IBX__PRIVATE void *ibx__alloc(const ibx__hooks *h, size_t size) {
    return h->alloc.alloc(size ? size : 1, h->alloc.user);
}
IBX__PRIVATE void *ibx__realloc(const ibx__hooks *h, void *ptr, size_t size) {
    return h->alloc.realloc(ptr, size ? size : 1, h->alloc.user);
}
IBX__PRIVATE void ibx__free(const ibx__hooks *h, void *ptr) {
    if (ptr) h->alloc.free(ptr, h->alloc.user);
}
IBX__PRIVATE char *ibx__strdup(const ibx__hooks *h, const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = (char *)ibx__alloc(h, n);
    if (copy) memcpy(copy, s, n);
    return copy;
}
IBX__PRIVATE int64_t ibx__now_ms(const ibx__hooks *h) { return h->clock.now_utc_ms(h->clock.user); }
IBX__PRIVATE int64_t ibx__mono_ms(const ibx__hooks *h) { return h->clock.monotonic_ms(h->clock.user); }
/* Microseconds for handler durations: the default clock's own resolution,
 * a clock hook's milliseconds otherwise. */
IBX__PRIVATE int64_t ibx__mono_us(const ibx__hooks *h) {
#ifndef IBX_NO_POSIX_CLOCK
    if (h->clock.monotonic_ms == ibx__default_monotonic_ms) return ibx__mono_us_now();
#endif
    return ibx__mono_ms(h) * 1000;
}
IBX__PRIVATE void ibx__sleep_ms(const ibx__hooks *h, int64_t ms) { h->clock.sleep_ms(ms, h->clock.user); }
IBX__PRIVATE uint64_t ibx__random(const ibx__hooks *h) { return h->rng.next_u64(h->rng.user); }

IBX__PRIVATE int ibx__log_enabled(const ibx__hooks *h, ibx_log_level level) {
    return level >= h->log.min_level && h->log.min_level != IBX_LOG_OFF;
}

/* A log line stays one line: a control character in the text (a handler's
 * error, a driver message, a name) becomes '?', so nothing can forge a line. */
IBX__PRIVATE void ibx__unforgeable(char *line) {
    for (; *line; line++)
        if ((unsigned char)*line < 0x20 || *line == 0x7F) *line = '?';
}

IBX__PRINTF(4, 5)

IBX__PRIVATE void ibx__log(const ibx__hooks *h, ibx_log_level level, const char *store_id,
                           const char *fmt, ...) {
    char line[768];
    va_list ap;
    if (!ibx__log_enabled(h, level)) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ibx__unforgeable(line);
    h->log.log(level, store_id ? store_id : "-", line, h->log.user);
}

/* Copy with truncation; always NUL-terminates a non-empty destination. */
/* strnlen() is POSIX 2008, not C99. */
IBX__PRIVATE size_t ibx__strnlen(const char *s, size_t cap) {
    const char *nul = (const char *)memchr(s, 0, cap);
    return nul ? (size_t)(nul - s) : cap;
}

IBX__PRIVATE void ibx__copy(char *dst, size_t cap, const char *src) {
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
#define IBX__KV_CAP 160
IBX__PRIVATE const char *ibx__kv(char out[IBX__KV_CAP], const char *value) {
    static const char plain[] = "._-:/@+";
    const unsigned char *v = (const unsigned char *)(value ? value : "");
    size_t n = 0, i;
    int quote = !*v;
    for (i = 0; v[i] && !quote; i++)
        quote = !(v[i] >= 0x80 || (v[i] >= '0' && v[i] <= '9') || ((v[i] | 0x20) >= 'a' && (v[i] | 0x20) <= 'z') ||
                  strchr(plain, v[i]));
    if (!quote) {
        ibx__copy(out, IBX__KV_CAP, (const char *)v);
        return out;
    }
    out[n++] = '"';
    for (i = 0; v[i] && n < IBX__KV_CAP - 8; i++) {
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

IBX__PRIVATE const char *ibx__result_str(ibx_result r) {
    switch (r) {
    case IBX_OK: return "IBX_OK";
    case IBX_EMPTY: return "IBX_EMPTY";
    case IBX_ERR_INVALID_ARG: return "IBX_ERR_INVALID_ARG";
    case IBX_ERR_OUT_OF_RANGE: return "IBX_ERR_OUT_OF_RANGE";
    case IBX_ERR_NOT_FOUND: return "IBX_ERR_NOT_FOUND";
    case IBX_ERR_NO_MEMORY: return "IBX_ERR_NO_MEMORY";
    case IBX_ERR_DB: return "IBX_ERR_DB";
    case IBX_ERR_DB_TRANSIENT: return "IBX_ERR_DB_TRANSIENT";
    case IBX_ERR_STATE: return "IBX_ERR_STATE";
    case IBX_ERR_UNSUPPORTED: return "IBX_ERR_UNSUPPORTED";
    case IBX_ERR_FULL: return "IBX_ERR_FULL";
    }
    return "IBX_(unknown)";
}

IBX__PRIVATE void ibx__error_clear(ibx_error *e) {
    memset(e, 0, sizeof *e);
}

/* IBX_TERSE_MESSAGES (a gateway short of flash): an error or log text keeps
 * what names the failure - the call and argument (`where`), the cause in a
 * word or two, the numbers, the database's own diagnostic - and drops the
 * sentence that explains it, written IBX__WHY("...") at the call site. The
 * default build's texts stay as they are. */
#ifdef IBX_TERSE_MESSAGES
#define IBX__WHY(text) ""
#define IBX__WHY_ARG(arg)
#else
#define IBX__WHY(text) text
#define IBX__WHY_ARG(arg) , arg
#endif

/* Record an error that did not come from the driver; returns `r`. */
IBX__PRINTF(4, 5)
IBX__PRIVATE ibx_result ibx__fail(ibx_error *e, ibx_result r, const char *where, const char *fmt,
                                  ...) {
    va_list ap;
    ibx__error_clear(e);
    e->result = r;
    ibx__copy(e->where, sizeof e->where, where);
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return r;
}

/* An argument out of range: `where` "<fn>: <name>", the message "<name>
 * must be <rule>, got <value>"; one format for several checks. */
IBX__PRIVATE ibx_result ibx__range_fail(ibx_error *e, const char *fn, const char *name,
                                        const char *rule, long long value) {
    char where[96];
    snprintf(where, sizeof where, "%s: %s", fn, name);
    return ibx__fail(e, IBX_ERR_OUT_OF_RANGE, where, "%s must be %s, got %lld", name, rule, value);
}

/* >> pure functions: backoff -------------------------------------------------- */

IBX__PRIVATE int64_t ibx__backoff_default_ms(int attempt) {
    if (attempt < 0) attempt = 0;
    if (attempt >= 6) return 60000; /* 2^6 s already exceeds the 60 s cap */
    return ((int64_t)1 << attempt) * 1000;
}

IBX__PRIVATE int64_t ibx__backoff_jitter_ms(const ibx_backoff_policy *policy, int attempt,
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

IBX__PRIVATE void ibx__selector_init(ibx_selector *s, ibx_selection kind, int store_count) {
    s->kind = kind;
    s->store_count = store_count > 0 ? store_count : 0;
    s->current = 0;
    s->empty_streak = 0;
}

IBX__PRIVATE int ibx__selector_next(const ibx_selector *s) {
    return s->store_count > 0 ? s->current : -1;
}

IBX__PRIVATE void ibx__selector_report(ibx_selector *s, int store, int claimed) {
    if (s->store_count <= 0) return;
    if (claimed > 0) s->empty_streak = 0;
    else if (s->empty_streak < INT_MAX) s->empty_streak++;
    if (store != s->current) return;
    if (s->kind == IBX_SELECT_DRAIN_FIRST && claimed > 0) return;
    s->current = (s->current + 1) % s->store_count;
}

IBX__PRIVATE int ibx__selector_all_idle(const ibx_selector *s) {
    return s->store_count <= 0 || s->empty_streak >= s->store_count;
}

IBX__PRIVATE void ibx__selector_resize(ibx_selector *s, int store_count) {
    s->store_count = store_count > 0 ? store_count : 0;
    if (s->current >= s->store_count) s->current = 0;
    s->empty_streak = 0;
}

/* >> pure functions: UUIDs and identifiers ------------------------------------ */

/* UUIDv7 layout used here (RFC 9562 §6.2 method 1): 48-bit Unix ms, version
 * 7, a 42-bit counter split over rand_a (12 bits) and the top of rand_b
 * (30 bits), then 32 random bits. The counter starts at a random value with
 * its top bit clear (room to count) each new millisecond. */
IBX__PRIVATE void ibx__uuid_v7(ibx_uuid_state *st, int64_t unix_ms, uint64_t random_a,
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

IBX__PRIVATE void ibx__guid_text(const unsigned char b[16], char out[37]) {
    static const char hex[] = "0123456789abcdef";
    int i, o = 0;
    for (i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

IBX__PRIVATE int ibx__is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

IBX__PRIVATE int ibx__uuid_is_valid(const char *s) {
    int i;
    if (!s) return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!ibx__is_hex(s[i])) {
            return 0;
        }
    }
    return s[36] == '\0';
}

#define IBX__IDENTIFIER_MAX 63

IBX__PRIVATE ibx_result ibx__identifier_check(const char *name) {
    size_t i;
    if (!name || !name[0]) return IBX_ERR_INVALID_ARG;
    for (i = 0; name[i]; i++) {
        char c = name[i];
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        int digit = c >= '0' && c <= '9';
        if (i >= IBX__IDENTIFIER_MAX || !(letter || (digit && i > 0))) return IBX_ERR_INVALID_ARG;
    }
    return IBX_OK;
}

/* >> dialects ------------------------------------------------------------------ */

/* How a failure is classified. All but PERMANENT give IBX_ERR_DB_TRANSIENT;
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
enum { IBX__FAULT_PERMANENT = 0, IBX__FAULT_TRANSIENT = 1, IBX__FAULT_TIMEOUT = 2, IBX__FAULT_LOST = 3,
       IBX__FAULT_LOST_PERMANENT = 4, IBX__FAULT_TIMEOUT_RESET = 5, IBX__FAULT_READ_ONLY = 6 };

typedef struct ibx__native_fault {
    long native;
    int fault;
} ibx__native_fault;

/* Everything that differs between databases outside the statements
 * themselves. The headers' statement tables are indexed by the same id. */
typedef struct ibx__dialect {
    /* Pointers first, then the flags as bytes (112 bytes on a 64-bit
     * target; its name and how it is detected are in ibx__dialect_names). */
    ibx_dialect id;
    const char *begin_sql;      /* opens a write transaction when tx_by_sql or own_tx_by_sql */
    const char *connect_key;    /* connection-string key the dialect wants set ... */
    const char *connect_extra;  /* ... and what to append when the caller did not set it */
    const char *session_sql;    /* run once after connecting (our own connections), or NULL */
    const char *version_sql;    /* returns the server version as one text column */
    const ibx__native_fault *natives; /* native codes that are not permanent; {0,0} ends */
    const char *statement_end;  /* ends each statement of a schema text */
    const char *timeout_keys;   /* connection-string keys (space-separated) that make the
                                   driver stop waiting for the socket after N s, or NULL */
    /* Schema upgrades (ibx__deploy_columns): {C} the quoted column, {K} its
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
                                   not with a statement timeout, see ibx__db_setup) */
    const char *deploy_lock_sql;   /* before a deploy's first change: its lock timeout, or NULL */
    const char *deploy_unlock_sql; /* after that deploy: the connection's own again, or NULL */
} ibx__dialect;

/* How long a schema change waits for its table lock, in seconds (text). */
#define IBX__DEPLOY_LOCK_WAIT "5"

static const ibx__native_fault ibx__sqlite_natives[] = {
    {5, IBX__FAULT_TRANSIENT}, /* SQLITE_BUSY: another writer holds the lock */
    {6, IBX__FAULT_TRANSIENT}, /* SQLITE_LOCKED */
    {0, 0}};
#ifndef IBX_NO_MARIADB
static const ibx__native_fault ibx__mariadb_natives[] = {
    {1205, IBX__FAULT_TRANSIENT}, /* lock wait timeout (SQLSTATE HY000) */
    {1213, IBX__FAULT_TRANSIENT}, /* deadlock: the whole transaction was rolled back */
    {1020, IBX__FAULT_TRANSIENT}, /* record changed since last read (snapshot isolation) */
    {1969, IBX__FAULT_TIMEOUT_RESET}, /* max_statement_time exceeded (HY018) */
    {2027, IBX__FAULT_LOST},      /* malformed packet: the session is out of step */
    {2002, IBX__FAULT_TRANSIENT}, /* cannot connect: server not (yet) there */
    {1927, IBX__FAULT_LOST},      /* connection killed */
    {2006, IBX__FAULT_LOST},      /* server has gone away */
    {2013, IBX__FAULT_LOST},      /* lost connection during query */
    {4031, IBX__FAULT_LOST},      /* disconnected by the server (idle timeout) */
    {5014, IBX__FAULT_LOST},      /* write error: broken pipe (HY000) */
    {1153, IBX__FAULT_LOST_PERMANENT}, /* packet over max_allowed_packet (08S01): never fits */
    {1290, IBX__FAULT_READ_ONLY}, /* running with --read-only (HY000) */
    {1792, IBX__FAULT_READ_ONLY}, /* read-only transaction (25006) */
    {0, 0}};
#endif
#ifndef IBX_NO_SQLSERVER
/* A query timeout is HYT00 with native 0 (by SQLSTATE below). */
static const ibx__native_fault ibx__sqlserver_natives[] = {
    {1205, IBX__FAULT_TRANSIENT},  /* deadlock victim (40001; FreeTDS says 42000) */
    {1222, IBX__FAULT_TRANSIENT},  /* lock request timed out (HY000 or HYT00) */
    {233, IBX__FAULT_LOST},        /* no process on the other end of the pipe */
    {10053, IBX__FAULT_LOST},      /* connection aborted */
    {10054, IBX__FAULT_LOST},      /* connection reset by peer */
    {0, 0}};
#endif
#ifndef IBX_NO_POSTGRESQL
static const ibx__native_fault ibx__no_natives[] = {{0, 0}};
#endif

#ifndef IBX_NO_SQLITE
static const ibx__dialect ibx__sqlite_dialect = {
    IBX_DIALECT_SQLITE, "BEGIN IMMEDIATE", NULL, NULL, NULL, "SELECT sqlite_version()",
    ibx__sqlite_natives, ";\n", NULL,
    "SELECT COUNT(*) FROM pragma_table_info('{N}') WHERE name = '{K}'",
    "ALTER TABLE {T} ADD COLUMN {C} {D}", 0, 1, 0, '"', '"', 0, 0, 1, 0, 0, 1, 1, NULL, NULL};
#define IBX__SQLITE_DIALECT &ibx__sqlite_dialect
#else
#define IBX__SQLITE_DIALECT NULL
#endif

#ifndef IBX_NO_POSTGRESQL
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
static const ibx__dialect ibx__postgresql_dialect = {
    IBX_DIALECT_POSTGRESQL, NULL, "Protocol=", "Protocol=7.4-1;", "SET TIME ZONE 'UTC'; SET jit = off",
    "SHOW server_version", ibx__no_natives, ";\n", NULL,
    "SELECT COUNT(*) FROM pg_attribute WHERE attrelid = to_regclass('{T}') AND attname = '{K}' "
    "AND NOT attisdropped",
    "ALTER TABLE {T} ADD COLUMN IF NOT EXISTS {C} {D}", SQL_TXN_READ_COMMITTED, 0, 1, '"', '"', 0,
    0, 1, 0, 1, 0, 0, "SET LOCAL lock_timeout = '" IBX__DEPLOY_LOCK_WAIT "s'", NULL};
#define IBX__POSTGRESQL_DIALECT &ibx__postgresql_dialect
#else
#define IBX__POSTGRESQL_DIALECT NULL
#endif

#ifndef IBX_NO_MARIADB
/* READ COMMITTED: at REPEATABLE READ a claim's gap locks block producers. */
/* OPTION=2 (CLIENT_FOUND_ROWS): row counts are rows matched, as elsewhere.
 * The database of the connection string is the schema. */
static const ibx__dialect ibx__mariadb_dialect = {
    IBX_DIALECT_MARIADB, "START TRANSACTION", "OPTION=", "OPTION=2;", "SET time_zone = '+00:00'",
    "SELECT VERSION()", ibx__mariadb_natives, ";\n", "READ_TIMEOUT WRITE_TIMEOUT",
    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
    "AND TABLE_NAME = '{N}' AND COLUMN_NAME = '{K}'",
    "ALTER TABLE {T} ADD COLUMN IF NOT EXISTS {C} {D}", SQL_TXN_READ_COMMITTED, 0, 0, '`', '`', 0,
    0, 0, 0, 0, 1, 1,
    "SET @ibx_lock_wait = @@SESSION.lock_wait_timeout, SESSION lock_wait_timeout = " IBX__DEPLOY_LOCK_WAIT,
    "SET SESSION lock_wait_timeout = @ibx_lock_wait"};
#define IBX__MARIADB_DIALECT &ibx__mariadb_dialect
#else
#define IBX__MARIADB_DIALECT NULL
#endif

#ifndef IBX_NO_SQLSERVER
/* XACT_ABORT: any error ends the whole transaction, as elsewhere.
 * NOCOUNT OFF: plain statements report their row counts. A schema
 * text is batches for sqlcmd/SSMS, each ended by GO. */
static const ibx__dialect ibx__sqlserver_dialect = {
    IBX_DIALECT_SQLSERVER, NULL, NULL, NULL, "SET XACT_ABORT ON; SET NOCOUNT OFF",
    "SELECT CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(64))", ibx__sqlserver_natives,
    "\nGO\n", NULL, NULL, "IF COL_LENGTH(N'{T}', N'{K}') IS NULL ALTER TABLE {T} ADD {C} {D}",
    SQL_TXN_READ_COMMITTED, 0, 1, '[', ']', 1, 1, 1, 1, 0, 0, 0, NULL, NULL};
#define IBX__SQLSERVER_DIALECT &ibx__sqlserver_dialect
#else
#define IBX__SQLSERVER_DIALECT NULL
#endif

/* Every dialect, built in or not, indexed by ibx_dialect: its name, which
 * an SQL_DBMS_NAME starts with (case-insensitive), or the other name it
 * may start with (or NULL); upper-cased, the name is the option that
 * leaves it out. A store on a left-out one is detected and refused by
 * name (ibx__db_setup). */
typedef struct ibx__dialect_id {
    const char *name, *dbms_match;
} ibx__dialect_id;
static const ibx__dialect_id ibx__dialect_names[] = {
    {"auto", NULL}, {"sqlite", NULL}, {"postgresql", NULL}, {"mariadb", "MySQL"},
    {"sqlserver", "Microsoft SQL Server"}};
/* The dialects built in, by ibx_dialect; NULL: auto, or left out. */
static const ibx__dialect *const ibx__dialects[] = {NULL, IBX__SQLITE_DIALECT, IBX__POSTGRESQL_DIALECT,
                                                    IBX__MARIADB_DIALECT, IBX__SQLSERVER_DIALECT};
#define IBX__DIALECT_COUNT ((int)(sizeof ibx__dialects / sizeof ibx__dialects[0]))

/* With SQLite the only dialect built in, IBX__ONE(d)->flag is SQLite's
 * flag, a constant, and the code only other dialects need folds away (the
 * claim in three statements, batches as one list per column, PostgreSQL's
 * arrays, SQL Server's types): a store's dialect is always a built-in one
 * (ibx__db_setup refuses the others). */
#if defined(IBX_NO_POSTGRESQL) && defined(IBX_NO_MARIADB) && defined(IBX_NO_SQLSERVER) && \
    !defined(IBX_NO_SQLITE)
#define IBX__SQLITE_ONLY 1
#define IBX__ONE(d) ((void)(d), &ibx__sqlite_dialect)
#else
#define IBX__SQLITE_ONLY 0
#define IBX__ONE(d) (d)
#endif

/* Statement q of store s, or NULL where its dialect has none. With SQLite
 * the only dialect, a statement SQLite lacks (IBX__SQLITE_LACKS, beside
 * each header's statements) is NULL at compile time, so the code that runs
 * it folds away like the dialect's flags. */
#if IBX__SQLITE_ONLY
#define IBX__SQL(s, q) (IBX__SQLITE_LACKS(q) ? (char *)0 : (s)->sql[q])
#else
#define IBX__SQL(s, q) ((s)->sql[q])
#endif

/* Text of a statement that only the envelope needs: with IBX_NO_ENVELOPE
 * its columns stay NULL, and a statement may leave them out. */
#ifdef IBX_NO_ENVELOPE
#define IBX__ENV(text) ""
#else
#define IBX__ENV(text) text
#endif

/* A built-in dialect, or NULL (auto, unknown, or left out). */
IBX__PRIVATE const ibx__dialect *ibx__dialect_get(ibx_dialect id) {
    int i = (int)id;
    return (i > 0 && i < IBX__DIALECT_COUNT) ? ibx__dialects[i] : NULL;
}

IBX__PRIVATE const char *ibx__dialect_name(ibx_dialect id) {
    int i = (int)id;
    return (i >= 0 && i < IBX__DIALECT_COUNT) ? ibx__dialect_names[i].name : "unknown";
}

IBX__PRIVATE int ibx__starts_with_nocase(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++) {
        char a = *s, b = *prefix;
        if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
        if (a != b) return 0;
    }
    return 1;
}

IBX__PRIVATE int ibx__contains_nocase(const char *s, const char *needle) {
    for (; *s; s++)
        if (ibx__starts_with_nocase(s, needle)) return 1;
    return 0;
}

/* The dialect of an SQL_DBMS_NAME, built in or not, or IBX_DIALECT_AUTO
 * when none matches. */
IBX__PRIVATE ibx_dialect ibx__dialect_detect(const char *dbms_name) {
    int i;
    for (i = 1; i < IBX__DIALECT_COUNT; i++) {
        const ibx__dialect_id *n = &ibx__dialect_names[i];
        if (ibx__starts_with_nocase(dbms_name, n->name) ||
            (n->dbms_match && ibx__starts_with_nocase(dbms_name, n->dbms_match)))
            return (ibx_dialect)i;
    }
    return IBX_DIALECT_AUTO;
}

/* Classify a failure. A lost connection (class 08) first, then the
 * dialect's native codes (drivers report SQLite's busy, MariaDB's lock wait
 * timeout, SQL Server's deadlock under FreeTDS and its lock timeout as
 * HY000, 42000 or HYT00), then the portable SQLSTATE classes. */
IBX__PRIVATE int ibx__classify(const ibx__dialect *d, const char *sqlstate, long native) {
    const ibx__native_fault *n;
    if (d && native != 0)
        for (n = IBX__ONE(d)->natives; n->native != 0; n++)
            if (n->native == native && n->fault == IBX__FAULT_LOST_PERMANENT) return n->fault;
    if (strncmp(sqlstate, "08", 2) == 0) return IBX__FAULT_LOST;         /* connection exception */
    if (strcmp(sqlstate, "57P01") == 0 || strcmp(sqlstate, "57P02") == 0) /* admin shutdown, crash */
        return IBX__FAULT_LOST;
    if (d && native != 0)
        for (n = IBX__ONE(d)->natives; n->native != 0; n++)
            if (n->native == native) return n->fault;
    if (strncmp(sqlstate, "40", 2) == 0) return IBX__FAULT_TRANSIENT;    /* 40001, 40P01, 40003 */
    if (strcmp(sqlstate, "25006") == 0) return IBX__FAULT_READ_ONLY;     /* a standby answered */
    if (strcmp(sqlstate, "57014") == 0 || strcmp(sqlstate, "HYT00") == 0 ||
        strcmp(sqlstate, "HYT01") == 0)
        return IBX__FAULT_TIMEOUT; /* statement cancelled by a timeout */
    if (strcmp(sqlstate, "55P03") == 0 || strcmp(sqlstate, "57P03") == 0 ||
        strncmp(sqlstate, "53", 2) == 0)
        return IBX__FAULT_TRANSIENT; /* lock not available, cannot connect now, resources */
    return IBX__FAULT_PERMANENT;
}

/* Expand a statement template: "{X}" with X in A..Z is replaced by
 * names[X - 'A'] (already validated and quoted by the caller); any other
 * text is copied. Returns a new string from the allocator, or NULL. */
IBX__PRIVATE char *ibx__sql_expand(const ibx__hooks *h, const char *tmpl,
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
    out = (char *)ibx__alloc(h, len + 1);
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
IBX__PRIVATE char *ibx__quote_name(const ibx__hooks *h, const ibx__dialect *d, const char *schema,
                                   const char *name) {
    size_t n = strlen(name) + (schema ? strlen(schema) + 3 : 0) + 3;
    char *out = (char *)ibx__alloc(h, n);
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
typedef struct ibx__stmt_row {
    int id;
    const char *sql;
} ibx__stmt_row;

/* A column added to the message table after the first release: how a
 * table deployed by an older release is upgraded in place (see
 * ibx__deploy_columns). */
typedef struct ibx__column {
    const char *name;            /* bare name */
    const char *type;            /* the dialect's type; NOT NULL needs a DEFAULT */
} ibx__column;
#define IBX__COLUMNS_MAX 16

/* A dialect's schema and statements, as each header writes them. */
typedef struct ibx__sqlset {
    const char *now_ms;          /* {W}: the database clock in Unix ms */
    const char *const *ddl;      /* the schema, one statement each, NULL-terminated */
    const ibx__stmt_row *rows;   /* the statements, by name; {id, NULL} ends */
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
     * the catalog first (ibx__ddl_probe). */
    const ibx__column *columns;
    /* The claim returns whole message rows (ibx__read_message), not the
     * short row of ibx__read_claimed: SQL Server's comes from a deployed
     * procedure, which workers of the previous release still call while
     * an upgrade replaces it. */
    int claim_full_rows;
    /* The explicit steps of a storage-layout upgrade (ibx_store_upgrade),
     * in order; {NULL, NULL, 0} ends; NULL: none for this dialect. */
    const struct ibx__contract *contract;
} ibx__sqlset;

/* Only SQL Server's claim returns whole rows: built without it, every
 * claim reads the short row, and ibx__read_message serves the reads alone. */
#ifdef IBX_NO_SQLSERVER
#define IBX__FULL_ROWS(q) ((void)(q), 0)
#else
#define IBX__FULL_ROWS(q) ((q)->claim_full_rows)
#endif

/* One step of ibx_store_upgrade: `probe` a count, above 0 when the step is
 * done (NULL: the step is idempotent and cheap); `flag` the
 * IBX_UPGRADE_* flag that asks for it. */
typedef struct ibx__contract {
    const char *probe, *change;
    unsigned flag;
} ibx__contract;

/* Expand a statement template with a store's names: {T} the quoted table,
 * {S} the quoted schema, {N} the bare table name, {W} the dialect's "now"
 * in Unix ms, and for each "<letter><suffix>" of `more` (NULL-terminated)
 * {<letter>} the quoted table named table + suffix. Returns text from the
 * allocator, or NULL when out of memory. */
IBX__PRIVATE char *ibx__expand_names(const ibx__hooks *h, const ibx__dialect *d, const ibx__sqlset *q,
                                     const char *schema, const char *table, const char *tmpl,
                                     const char *const *more) {
    const char *names[26];
    char *quoted[26], name[80], *out = NULL;
    int i, ok = 1;
    memset((void *)names, 0, sizeof names);
    memset(quoted, 0, sizeof quoted);
    if (!IBX__ONE(d)->has_schemas) schema = NULL;
    quoted['T' - 'A'] = ibx__quote_name(h, d, schema, table);
    if (schema) quoted['S' - 'A'] = ibx__quote_name(h, d, NULL, schema);
    ok = quoted['T' - 'A'] && (quoted['S' - 'A'] || !schema);
    for (i = 0; ok && more && more[i]; i++) {
        snprintf(name, sizeof name, "%s%s", table, more[i] + 1);
        ok = (quoted[more[i][0] - 'A'] = ibx__quote_name(h, d, schema, name)) != NULL;
    }
    for (i = 0; i < 26; i++) names[i] = quoted[i];
    names['N' - 'A'] = table;
    names['W' - 'A'] = q->now_ms;
    if (ok) out = ibx__sql_expand(h, tmpl, names);
    for (i = 0; i < 26; i++) ibx__free(h, quoted[i]);
    return out;
}

/* SQL Server: the first batch of every deploy. Deploys serialize on a lock
 * that ends with the transaction. In the library, manual commit is
 * IMPLICIT_TRANSACTIONS, which EXEC does not start (a CREATE does); sqlcmd
 * and SSMS run in autocommit, so the file opens a transaction and its last
 * batch commits it. QUOTED_IDENTIFIER: filtered indexes need it, and sqlcmd
 * without -I has it off. */
#define IBX__MS_DEPLOY_LOCK                                                                      \
    "SET QUOTED_IDENTIFIER ON; SET ANSI_NULLS ON; SET XACT_ABORT ON;\n"                          \
    "DECLARE @lock INT;\n"                                                                       \
    "IF @@TRANCOUNT = 0 AND (@@OPTIONS & 2) = 0 BEGIN TRANSACTION;\n"                            \
    "IF @@TRANCOUNT = 0 BEGIN CREATE TABLE #ibx_deploy (x INT); DROP TABLE #ibx_deploy; END;\n"   \
    "IF @@TRANCOUNT = 0 THROW 50000, N'ibx deploy: no transaction for the deploy lock', 1;\n"      \
    "EXEC @lock = sp_getapplock @Resource = N'ibx deploy {T}', @LockMode = N'Exclusive', "          \
    "@LockOwner = N'Transaction';\n"                                                             \
    "IF @lock < 0 THROW 50000, N'ibx deploy: the deploy lock was not granted', 1;"

/* >> growable buffers and list literals -------------------------------------------- */

/* A byte buffer that only grows; reused across calls so that steady-state
 * work allocates nothing. */
typedef struct ibx__buf {
    char *data;
    size_t len;
    size_t cap;
} ibx__buf;

/* Room for `extra` more bytes and a NUL; 0 when out of memory, or when the
 * size would pass SIZE_MAX / 2 (a 32-bit gateway: the doubling below must
 * not wrap). */
IBX__PRIVATE int ibx__buf_reserve(const ibx__hooks *h, ibx__buf *b, size_t extra) {
    size_t want, cap = b->cap ? b->cap : 256;
    char *grown;
    if (extra > SIZE_MAX / 2 - 1 - b->len) return 0;
    want = b->len + extra + 1;
    if (want <= b->cap) return 1;
    while (cap < want) cap *= 2;
    grown = (char *)ibx__realloc(h, b->data, cap);
    if (!grown) return 0;
    b->data = grown;
    b->cap = cap;
    return 1;
}

IBX__PRIVATE int ibx__buf_add(const ibx__hooks *h, ibx__buf *b, const void *bytes, size_t n) {
    if (!ibx__buf_reserve(h, b, n)) return 0;
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 1;
}

IBX__PRIVATE void ibx__buf_free(const ibx__hooks *h, ibx__buf *b) {
    ibx__free(h, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A list of values passed as one text parameter, so that a whole batch is
 * one statement: PostgreSQL array literal {"a","b"} (CAST(? AS uuid[])),
 * elsewhere a JSON array ["a","b"] (json_each, JSON_TABLE, OPENJSON). */
/* Append s[0..n) quoted: a JSON string, or (pg) an element of a
 * PostgreSQL array literal, which escapes only '"' and '\\'. */
IBX__PRIVATE int ibx__quoted_add(const ibx__hooks *h, ibx__buf *b, const char *s, size_t n, int pg) {
    static const char hex[] = "0123456789abcdef";
    size_t i;
    if (n > SIZE_MAX / 8) return 0; /* n * 6 would wrap (32 bits) */
    if (!ibx__buf_reserve(h, b, n * 6 + 2)) return 0; /* worst case: all \u00XX */
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

IBX__PRIVATE int ibx__list_add(const ibx__hooks *h, ibx__buf *b, const ibx__dialect *d,
                               const char *s, size_t n) {
    int pg = IBX__ONE(d)->id == IBX_DIALECT_POSTGRESQL;
    if (n > SIZE_MAX / 8) return 0; /* refused before anything is written */
    if (b->len == 0 && !ibx__buf_add(h, b, pg ? "{" : "[", 1)) return 0;
    if (b->len > 1 && !ibx__buf_add(h, b, ",", 1)) return 0;
    return ibx__quoted_add(h, b, s, n, pg);
}

/* A NULL element. */
IBX__PRIVATE int ibx__list_add_null(const ibx__hooks *h, ibx__buf *b, const ibx__dialect *d) {
    int pg = IBX__ONE(d)->id == IBX_DIALECT_POSTGRESQL;
    if (b->len == 0 && !ibx__buf_add(h, b, pg ? "{" : "[", 1)) return 0;
    if (b->len > 1 && !ibx__buf_add(h, b, ",", 1)) return 0;
    return ibx__buf_add(h, b, pg ? "NULL" : "null", 4);
}

IBX__PRIVATE int ibx__list_end(const ibx__hooks *h, ibx__buf *b, const ibx__dialect *d) {
    int pg = IBX__ONE(d)->id == IBX_DIALECT_POSTGRESQL;
    if (b->len == 0) return ibx__buf_add(h, b, pg ? "{}" : "[]", 2);
    return ibx__buf_add(h, b, pg ? "}" : "]", 1);
}

/* >> odbc: connection state ----------------------------------------------------- */

#define IBX__MAX_STMTS 48
#define IBX__MAX_MARKERS 24
#define IBX__UNIT_RETRIES 3

/* One ODBC connection with its dialect, prepared statements and the place
 * its errors go. Owned by a store. */
typedef struct ibx__db {
    const ibx__hooks *hooks;
    const char *store_id;        /* for log lines */
    ibx_error *err;              /* the owning handle's last error */
    const ibx__dialect *d;
    SQLHENV env;
    SQLHDBC dbc;
    int own_connection;          /* opened from a string: ours to close and reopen */
    char *connstr;               /* the string actually used, kept for reconnects */
    ibx_dialect forced;          /* dialect the caller forced, or AUTO */
    long login_timeout_s;        /* SQL_ATTR_LOGIN_TIMEOUT before each connect; 0: the driver's */
    long statement_timeout_s;    /* a statement's limit (see ibx__stmt, connect); 0: none */
    int connected;
    int lost;                    /* the connection died: reopen before the next use */
    int reconnects_failed;       /* in a row: an outage logs its first attempt at WARN only */
    int in_tx;                   /* a unit of work is open */
    int tx_by_sql;               /* this connection rests in autocommit; units open with
                                    the dialect's begin_sql (ibx__dialect) */
    int autocommit_on;           /* left on by a one-statement unit (not tx_by_sql): off
                                    again before the next unit of several statements */
    int unit;                    /* IBX__RUN_* of the current (or last) unit of work */
    int callers_tx;              /* the caller's connection, in its transaction */
    int fault;                   /* IBX__FAULT_* of the last diagnosed failure */
    struct ibx_sql *capture;     /* set: statements are recorded, not run (ibx__capture_add) */
    char *const *sql;            /* the store's statements by id: checked against their
                                    declared arguments when run (IBX__CHECK_ARGS) */
    int connect_no_wait;         /* a connect fails at once while another thread connects */
    int connect_busy;            /* ... and the last one did */
    char dbms_name[64];
    char dbms_version[64];
    char driver_name[64];
    SQLHSTMT stmt[IBX__MAX_STMTS]; /* prepared once, reused; freed on close or loss */
    unsigned char markers[IBX__MAX_STMTS][IBX__MAX_MARKERS]; /* see ibx__plain_markers */
#ifdef IBX_SQLITE3_API
    sqlite3_stmt *tx_stmt[4];    /* BEGIN IMMEDIATE, COMMIT, ROLLBACK and a transactional
                                    handler's BEGIN: prepared once, as db->stmt
                                    (ibx__exec_direct) */
#endif
} ibx__db;

/* The database interface. The engine reaches its database only through
 * ibx__db and the functions below, which have two implementations: ODBC
 * (the default, every dialect: the "odbc:" sections) and, with
 * IBX_SQLITE3_API, SQLite's own C API (section "sqlite3 api"; there dbc is
 * the sqlite3 *, a SQLHSTMT an ibx__sq_cur, and the ODBC types and
 * constants that ibx__param and the engine name are this file's when
 * <sql.h> is not included). What is common (ibx__exec's timeouts,
 * ibx__db_ensure's reconnect, the unit modes) is written
 * once, over them.
 *   connection   ibx__db_connect (a string), ibx__db_adopt (the caller's
 *                handle: used, never closed), ibx__db_close; under them
 *                ibx__driver_connect, ibx__db_setup (dialect and session),
 *                ibx__db_disconnect, ibx__check_autocommit,
 *                ibx__db_free_statements
 *   statements   ibx__exec_once: the statement of a slot, prepared once per
 *                connection and kept in db->stmt, ibx__param bound in order
 *                (or as "?N" numbers them) and run; *rows the affected count,
 *                or *cursor left open for ibx__fetch, ibx__get_i64,
 *                ibx__get_text, ibx__get_append, ibx__bind_head (columns
 *                filled by each fetch), ibx__unbind, ibx__close;
 *                ibx__exec_direct and ibx__query_text run text uncached (DDL,
 *                transaction control, one value)
 *   transactions ibx__end_tran, ibx__autocommit_off, under the common
 *                ibx__unit_mode, ibx__begin, ibx__commit, ibx__rollback (the
 *                SQLite API: always tx_by_sql, BEGIN IMMEDIATE by SQL)
 *   errors       in db->err: the result (IBX_ERR_DB, or _DB_TRANSIENT as the
 *                dialect's natives and the SQLSTATE class say), an SQLSTATE
 *                (the SQLite API: HY000, 23000 for a constraint), the native
 *                code (SQLite's primary result code), the message and the
 *                call; db->fault and db->lost for the unit's retry. */
#ifdef IBX_SQLITE3_API /* bodies in "sqlite3 api" */
IBX__PRIVATE ibx_result ibx__driver_connect(ibx__db *db, const char *connstr);
IBX__PRIVATE ibx_result ibx__db_setup(ibx__db *db);
IBX__PRIVATE void ibx__db_disconnect(ibx__db *db);
IBX__PRIVATE ibx_result ibx__check_autocommit(ibx__db *db);
IBX__PRIVATE ibx_result ibx__autocommit_off(ibx__db *db);
IBX__PRIVATE ibx_result ibx__fetch(ibx__db *db, SQLHSTMT st);
IBX__PRIVATE void ibx__close(SQLHSTMT st);
IBX__PRIVATE ibx_result ibx__get_text(ibx__db *db, SQLHSTMT st, int col, char *out, size_t cap, SQLLEN *ind);
#endif

/* >> odbc: diagnostics ------------------------------------------------------------ */

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Read every diagnostic record of `handle` into db->err and classify the
 * failure. SQLGetDiagRec returns SQL_SUCCESS_WITH_INFO for a truncated
 * message: that is still a record, not the end. Returns the result code. */
/* Read every diagnostic record of `handle` into db->err (SQLSTATE and
 * native code of the first record that is not a warning, all messages
 * joined) and return the worst fault class among them. */
IBX__PRIVATE int ibx__diag_records(ibx__db *db, SQLSMALLINT type, SQLHANDLE handle) {
    ibx_error *e = db->err;
    SQLSMALLINT rec;
    size_t used = 0;
    int fault = IBX__FAULT_PERMANENT, have_primary = 0;
    for (rec = 1; rec < 64; rec++) {
        SQLCHAR state[6], text[SQL_MAX_MESSAGE_LENGTH];
        SQLINTEGER native = 0;
        SQLSMALLINT text_len = 0;
        SQLRETURN rc = SQLGetDiagRec(type, handle, rec, state, &native, text,
                                     (SQLSMALLINT)sizeof text, &text_len);
        int f;
        if (rc != SQL_SUCCESS && rc != SQL_SUCCESS_WITH_INFO) break;
        state[5] = '\0';
        f = ibx__classify(db->d, (const char *)state, (long)native);
        if (f > fault) fault = f;
        /* The first record that is not a warning (class 01) is the cause;
         * with only warnings, the first one's codes are kept. */
        if (!have_primary && (strncmp((const char *)state, "01", 2) != 0 || rec == 1)) {
            ibx__copy(e->sqlstate, sizeof e->sqlstate, (const char *)state);
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
    if (rec == 1) ibx__copy(e->message, sizeof e->message, "no diagnostic record from the driver");
    return fault;
}

IBX__PRIVATE ibx_result ibx__diag(ibx__db *db, SQLSMALLINT type, SQLHANDLE handle,
                                  const char *where) {
    ibx_error *e = db->err;
    int fault;
    char *c;
    ibx__error_clear(e);
    ibx__copy(e->where, sizeof e->where, where);
    fault = ibx__diag_records(db, type, handle);
    for (c = e->message; *c; c++) /* one line: drivers put newlines into messages */
        if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
#ifndef IBX_NO_POSTGRESQL
    /* psqlODBC's named server-side statements live in a server session; a
     * pooler in transaction mode hands each transaction another one. */
    if (db->d && IBX__ONE(db->d)->id == IBX_DIALECT_POSTGRESQL && strstr(e->message, "_PLAN") &&
        (strcmp(e->sqlstate, "26000") == 0 || strcmp(e->sqlstate, "42P05") == 0)) {
        size_t used = strlen(e->message);
        snprintf(e->message + used, sizeof e->message - used, "%s",
                 " -- behind a pooler in transaction mode (PgBouncer)? add UseServerSidePrepare=0; to the "
                 "connection string");
    }
#endif
#ifndef IBX_NO_MARIADB
    /* InnoDB refuses a table for good once it marks one of its indexes
     * corrupted (seen once in a soak, after crash recovery, on an indexed
     * VIRTUAL column: a server defect); deploy builds a dropped one again. */
    if (db->d && db->d->id == IBX_DIALECT_MARIADB && e->native == 1712) {
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
            dead == SQL_CD_TRUE && fault != IBX__FAULT_LOST_PERMANENT)
            fault = IBX__FAULT_LOST;
    }
    if (fault == IBX__FAULT_LOST || fault == IBX__FAULT_LOST_PERMANENT) {
        e->connection_lost = 1;
        db->lost = 1;
    }
    if (fault == IBX__FAULT_TIMEOUT_RESET || fault == IBX__FAULT_READ_ONLY) {
        db->lost = 1; /* nothing was committed: not "lost" to the caller */
        if (fault == IBX__FAULT_TIMEOUT_RESET) fault = IBX__FAULT_TIMEOUT;
    }
    e->result = fault == IBX__FAULT_PERMANENT || fault == IBX__FAULT_LOST_PERMANENT ? IBX_ERR_DB
                                                                                   : IBX_ERR_DB_TRANSIENT;
    db->fault = fault;
    ibx__log(db->hooks, IBX_LOG_DEBUG, db->store_id, "%s failed: %s", where, e->message);
    return e->result;
}

/* IBX_OK for a successful return code, else the diagnosed error. */
IBX__PRIVATE ibx_result ibx__check(ibx__db *db, SQLRETURN rc, SQLSMALLINT type, SQLHANDLE h,
                                   const char *where) {
    if (rc == SQL_SUCCESS || rc == SQL_SUCCESS_WITH_INFO) return IBX_OK;
    if (rc == SQL_INVALID_HANDLE)
        return ibx__fail(db->err, IBX_ERR_STATE, where, "invalid ODBC handle");
    return ibx__diag(db, type, h, where);
}

#endif /* !IBX_SQLITE3_API */

/* >> odbc: connect ---------------------------------------------------------------- */

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
IBX__PRIVATE void ibx__db_free_statements(ibx__db *db) {
    int i;
    for (i = 0; i < IBX__MAX_STMTS; i++) {
        if (db->stmt[i]) SQLFreeHandle(SQL_HANDLE_STMT, db->stmt[i]);
        db->stmt[i] = NULL;
    }
}

/* One text value from SQLGetInfo into a fixed buffer ("" when unknown). */
/* One SQLGetInfo text into out ("" when the driver fails to say). */
IBX__PRIVATE ibx_result ibx__get_info(ibx__db *db, SQLUSMALLINT what, char *out, size_t cap) {
    SQLCHAR buf[128];
    SQLSMALLINT len = 0;
    ibx_result r = ibx__check(db, SQLGetInfo(db->dbc, what, buf, (SQLSMALLINT)sizeof buf, &len),
                              SQL_HANDLE_DBC, db->dbc, "SQLGetInfo");
    out[0] = '\0';
    if (r == IBX_OK) {
        buf[sizeof buf - 1] = '\0';
        ibx__copy(out, cap, (const char *)buf);
    }
    return r;
}

#endif /* !IBX_SQLITE3_API */

IBX__PRIVATE ibx_result ibx__exec_direct(ibx__db *db, const char *sql, const char *where);
IBX__PRIVATE ibx_result ibx__end_tran(ibx__db *db, SQLSMALLINT completion, const char *where);
IBX__PRIVATE ibx_result ibx__query_text(ibx__db *db, const char *sql, char *out, size_t cap);

/* After connecting: detect the dialect, then (own connections only) set the
 * session up. Leaves no transaction open. */
IBX__PRIVATE ibx_result ibx__sqlite_not_temporary(ibx__db *db);

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
IBX__PRIVATE ibx_result ibx__db_setup(ibx__db *db) {
    const ibx__dialect *d;
    ibx_dialect id;
    ibx_result r;
    /* The name decides the dialect: a driver that cannot say it (a
     * connection lost at once) is that error, not "unknown database". */
    r = ibx__get_info(db, SQL_DBMS_NAME, db->dbms_name, sizeof db->dbms_name);
    if (r != IBX_OK) return r;
    if (ibx__get_info(db, SQL_DRIVER_NAME, db->driver_name, sizeof db->driver_name) != IBX_OK ||
        ibx__get_info(db, SQL_DBMS_VER, db->dbms_version, sizeof db->dbms_version) != IBX_OK)
        ibx__error_clear(db->err); /* only for log lines */
    id = db->forced != IBX_DIALECT_AUTO ? db->forced : ibx__dialect_detect(db->dbms_name);
    if (id == IBX_DIALECT_AUTO)
        return ibx__fail(db->err, IBX_ERR_UNSUPPORTED, "SQLGetInfo(SQL_DBMS_NAME)",
                         "unknown database '%s' (driver %s)"
                         IBX__WHY("; force a dialect if it speaks one of sqlite, postgresql, mariadb, sqlserver"),
                         db->dbms_name, db->driver_name);
    d = ibx__dialect_get(id);
    if (!d) {
        const char *name = ibx__dialect_names[id].name;
        char macro[16];
        size_t i;
        for (i = 0; name[i] && i + 1 < sizeof macro; i++) macro[i] = (char)(name[i] - 'a' + 'A');
        macro[i] = '\0';
        return ibx__fail(db->err, IBX_ERR_UNSUPPORTED, "ibx_store_open: dialect",
                         "%s was left out of this build (IBX_NO_%s)", name, macro);
    }
    db->d = d;
    /* Not with a client-side statement timeout: a statement the driver gave
     * up on runs on at the server, and in autocommit it would commit; in a
     * transaction, the server rolls it back when it sees the socket closed. */
    db->autocommit_on = 0;
    db->tx_by_sql = IBX__ONE(d)->tx_by_sql || (db->own_connection && IBX__ONE(d)->own_tx_by_sql &&
                                               !(db->statement_timeout_s > 0 && IBX__ONE(d)->timeout_keys));
    if (!db->own_connection) return IBX_OK; /* the caller's session is the caller's */
    r = ibx__check(db,
                   SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                     (SQLPOINTER)(uintptr_t)(db->tx_by_sql ? SQL_AUTOCOMMIT_ON
                                                                          : SQL_AUTOCOMMIT_OFF),
                                     SQL_IS_UINTEGER),
                   SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(AUTOCOMMIT)");
    if (r == IBX_OK && IBX__ONE(d)->isolation)
        r = ibx__check(db,
                       SQLSetConnectAttr(db->dbc, SQL_ATTR_TXN_ISOLATION,
                                         (SQLPOINTER)(uintptr_t)IBX__ONE(d)->isolation, SQL_IS_UINTEGER),
                       SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(TXN_ISOLATION)");
    if (r == IBX_OK && IBX__ONE(d)->session_sql) r = ibx__exec_direct(db, IBX__ONE(d)->session_sql, "session setup");
    if (r == IBX_OK && !db->tx_by_sql) r = ibx__end_tran(db, SQL_COMMIT, "session setup commit");
    if (r == IBX_OK && IBX__ONE(d)->id == IBX_DIALECT_SQLITE) r = ibx__sqlite_not_temporary(db);
    if (r == IBX_OK && IBX__ONE(d)->version_sql) {
        /* Best effort: SQL_DBMS_VER stays when the server will not say. */
        char version[64];
        if (ibx__query_text(db, IBX__ONE(d)->version_sql, version, sizeof version) == IBX_OK)
            ibx__copy(db->dbms_version, sizeof db->dbms_version, version);
        else
            ibx__error_clear(db->err);
        if (!db->tx_by_sql) ibx__end_tran(db, SQL_ROLLBACK, "version query end");
    }
    return r;
}

#endif /* !IBX_SQLITE3_API */

/* The value of `key` in a connection string, braces taken off ("" when
 * the string has no such key). */
IBX__PRIVATE void ibx__connstr_value(const char *connstr, const char *key, char *out, size_t cap) {
    const char *p = connstr;
    size_t klen = strlen(key), n;
    out[0] = '\0';
    while (p && *p) {
        const char *k = p, *v = p;
        while (*k == ' ') k++;
        if (ibx__starts_with_nocase(k, key)) /* only then is k + klen inside the string */
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
IBX__PRIVATE ibx_result ibx__sqlite_not_temporary(ibx__db *db) {
    char file[8];
    if (ibx__contains_nocase(db->connstr, ":memory:") || ibx__contains_nocase(db->connstr, "mode=memory"))
        return IBX_OK;
    if (ibx__query_text(db, "SELECT file FROM pragma_database_list WHERE name = 'main'", file, sizeof file) !=
        IBX_OK) {
        ibx__error_clear(db->err);
        return IBX_OK;
    }
    if (file[0]) return IBX_OK;
    ibx__fail(db->err, IBX_ERR_DB, "connection_string",
              "the SQLite database would be a temporary file, deleted at close: neither the connection "
              "string nor its DSN names a Database="
              IBX__WHY(" (give the file's path, or Database=:memory: for a database in memory; "
                       "where the driver is linked in without a driver manager, no DSN is read)"));
    db->fault = IBX__FAULT_PERMANENT;
    return IBX_ERR_DB;
}

/* sqliteodbc, given neither DSN= nor Database=, opens a file named after
 * the whole connection string: refused before it is created. */
IBX__PRIVATE int ibx__sqlite_without_file(const char *connstr) {
    char driver[96], dsn[8], file[8];
    ibx__connstr_value(connstr, "Driver", driver, sizeof driver);
    ibx__connstr_value(connstr, "DSN", dsn, sizeof dsn);
    ibx__connstr_value(connstr, "Database", file, sizeof file);
    return ibx__contains_nocase(driver, "sqlite") && !dsn[0] && !file[0];
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* A failed connect, explained: the driver manager says "Data source name
 * not found" for a missing DSN and for a string without DSN= or Driver=
 * alike, psqlODBC reports every refusal as 08001 (connection failed), and
 * sqliteodbc only "connect failed". Names what was asked for and where to
 * look, in front of the driver's own words; what no retry mends (a missing
 * DSN, driver or database, a refused login, a file that cannot be opened)
 * becomes IBX_ERR_DB, not transient. Never copies the string itself: it
 * may hold a password. */
IBX__PRIVATE void ibx__connect_explain(ibx__db *db, const char *connstr) {
    ibx_error *e = db->err;
    const char *m = e->message;
    char dsn[96], driver[96], file[160], why[720], joined[sizeof e->message];
    const char *sysini = getenv("ODBCSYSINI"), *ini = getenv("ODBCINI");
    char env[200];
    size_t used;
    why[0] = '\0';
    ibx__connstr_value(connstr, "DSN", dsn, sizeof dsn);
    ibx__connstr_value(connstr, "Driver", driver, sizeof driver);
    snprintf(env, sizeof env, "%s%s%s%s%s", sysini || ini ? " (" : "", sysini ? "ODBCSYSINI=" : "",
             sysini ? sysini : "", ini ? (sysini ? ", ODBCINI=" : "ODBCINI=") : "", ini ? ini : "");
    if (env[0]) ibx__copy(env + strlen(env), sizeof env - strlen(env), ")");
    if (strcmp(e->sqlstate, "IM002") == 0 && dsn[0])
        snprintf(why, sizeof why, "DSN '%s' is not defined"
                 IBX__WHY(": `odbcinst -q -s` lists the DSNs the driver manager knows, `odbcinst -j` the files it read%s"),
                 dsn IBX__WHY_ARG(env));
    else if (strcmp(e->sqlstate, "IM002") == 0 && !driver[0])
        snprintf(why, sizeof why, "the connection string names neither DSN= nor Driver="
                 IBX__WHY(" (malformed? it is KEY=value; pairs, e.g. Driver={SQLite3};Database=app.db;)"));
    else if (strstr(m, "Can't open lib") || strcmp(e->sqlstate, "IM002") == 0 || strcmp(e->sqlstate, "IM003") == 0)
        snprintf(why, sizeof why, "%s%s%s could not be loaded"
                 IBX__WHY(": `odbcinst -q -d` lists the drivers the driver manager knows, `odbcinst -j` the file "
                          "it read%s; a driver given by path must exist"),
                 driver[0] ? "driver '" : "the driver of DSN '", driver[0] ? driver : dsn, "'" IBX__WHY_ARG(env));
    else if (!IBX__SQLITE_ONLY && /* a server's refusals: folded away with SQLite only */
             ((strstr(m, "FATAL:") && (strstr(m, "does not exist") || strstr(m, "authentication failed") ||
                                      strstr(m, "no pg_hba.conf entry"))) ||
             ((strcmp(e->sqlstate, "28000") == 0 || strcmp(e->sqlstate, "42000") == 0) &&
              (e->native == 1044 || e->native == 1045 || e->native == 1049 || e->native == 1698))))
        snprintf(why, sizeof why, "the server refused the database or the login"
                 IBX__WHY(" (not tried again: fix the connection string or the server's grants)"));
    else if ((strstr(m, "[SQLite]") || strstr(m, "connect failed")) && e->native == 14) { /* SQLITE_CANTOPEN;
                                                 linked in without a driver manager, no "[SQLite]" */
        ibx__connstr_value(connstr, "Database", file, sizeof file);
        snprintf(why, sizeof why, "cannot open the SQLite file '%s'"
                 IBX__WHY(": does its directory exist, and may this process write there?"), file);
    }
    if (!why[0]) return;
    ibx__copy(joined, sizeof joined, why); /* what is wrong first: the driver's words may be cut */
    used = strlen(joined);
    memcpy(joined + used, ": ", 3);
    ibx__copy(joined + used + 2, sizeof joined - used - 2, m);
    ibx__copy(e->message, sizeof e->message, joined);
    e->result = IBX_ERR_DB;
    e->connection_lost = 0;
    db->fault = IBX__FAULT_PERMANENT;
}

/* psqlODBC rewrites process-wide settings while it connects: two threads
 * connecting at once read freed memory (seen under ASan). Connecting is
 * rare; it is done one thread at a time, under IBX__CONNECT_LOCK (one lock
 * for both headers together, defined above the core). */

IBX__PRIVATE ibx_result ibx__driver_connect(ibx__db *db, const char *connstr) {
    SQLCHAR out[1024];
    SQLSMALLINT out_len = 0;
    SQLRETURN rc;
    if (db->login_timeout_s > 0) /* a driver that cannot is still connected, without it */
        SQLSetConnectAttr(db->dbc, SQL_ATTR_LOGIN_TIMEOUT, (SQLPOINTER)(uintptr_t)db->login_timeout_s, 0);
    db->connect_busy = 0;
#ifndef IBX_NO_THREADS
    if (!db->connect_no_wait) {
        ibx__mutex_lock(&IBX__CONNECT_LOCK);
    } else if (ibx__mutex_trylock(&IBX__CONNECT_LOCK) != 0) {
        db->connect_busy = 1; /* the renewal thread: a connect to a frozen server must not hold it up */
        return ibx__fail(db->err, IBX_ERR_DB_TRANSIENT, "SQLDriverConnect",
                         "another thread is connecting" IBX__WHY("; tried again shortly"));
    }
#endif
    rc = SQLDriverConnect(db->dbc, NULL, IBX__SQLTEXT(connstr), SQL_NTS, out, (SQLSMALLINT)sizeof out,
                          &out_len, SQL_DRIVER_NOPROMPT);
#ifndef IBX_NO_THREADS
    ibx__mutex_unlock(&IBX__CONNECT_LOCK);
#endif
    if (!SQL_SUCCEEDED(rc)) {
        ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLDriverConnect");
        ibx__connect_explain(db, connstr);
        return db->err->result;
    }
    db->connected = 1;
    db->lost = 0;
    return IBX_OK;
}

IBX__PRIVATE void ibx__db_disconnect(ibx__db *db) {
    ibx__db_free_statements(db);
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
IBX__PRIVATE int ibx__connstr_extras(ibx__db *db, const ibx__dialect *d) {
    const char *extra = d && d->connect_extra && !ibx__contains_nocase(db->connstr, d->connect_key)
                            ? d->connect_extra : "";
    const char *k = d && db->statement_timeout_s > 0 && d->timeout_keys ? d->timeout_keys : "";
#ifdef IBX_NO_MARIADB
    int my = 0; /* and the code below folds away */
#else
    int my = d ? d->id == IBX_DIALECT_MARIADB
               : db->forced == IBX_DIALECT_MARIADB || ibx__contains_nocase(db->connstr, "mariadb") ||
                     ibx__contains_nocase(db->connstr, "mysql");
#endif
    char timeouts[128], *longer;
    size_t used = 0, n = strlen(db->connstr);
    timeouts[0] = '\0';
    if (my && db->login_timeout_s > 0 && !ibx__contains_nocase(db->connstr, "CONN_TIMEOUT=")) {
        int w = snprintf(timeouts, sizeof timeouts, "CONN_TIMEOUT=%ld;", db->login_timeout_s);
        used = w > 0 ? (size_t)w : 0;
    }
    while (*k && used < sizeof timeouts) { /* "KEY=<s>;" for each key the caller did not set */
        size_t len = strcspn(k, " ");
        char key[32];
        snprintf(key, sizeof key, "%.*s=", (int)len, k);
        if (!ibx__contains_nocase(db->connstr, key)) {
            int w = snprintf(timeouts + used, sizeof timeouts - used, "%s%ld;", key, db->statement_timeout_s);
            used += w > 0 ? (size_t)w : 0;
        }
        k += len + (k[len] == ' ');
    }
    if (!extra[0] && !timeouts[0]) return 0;
    longer = (char *)ibx__alloc(db->hooks, n + strlen(extra) + strlen(timeouts) + 2);
    if (!longer) return -1;
    memcpy(longer, db->connstr, n);
    longer[n] = '\0';
    if (n > 0 && longer[n - 1] != ';') strcat(longer, ";");
    strcat(longer, extra);
    strcat(longer, timeouts);
    ibx__free(db->hooks, db->connstr);
    db->connstr = longer;
    return 1;
}

IBX__PRIVATE ibx_result ibx__db_connect(ibx__db *db, const char *connstr) {
    ibx_result r;
    int grown;
    db->own_connection = 1;
    if (!db->env) {
        if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &db->env))) {
            db->env = NULL;
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLAllocHandle(ENV)",
                             "cannot allocate an ODBC environment" IBX__WHY(" (is a driver manager installed?)"));
        }
        r = ibx__check(db,
                       SQLSetEnvAttr(db->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0),
                       SQL_HANDLE_ENV, db->env, "SQLSetEnvAttr(ODBC_VERSION)");
        if (r != IBX_OK) return r;
    }
    if (!db->dbc && !SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, db->env, &db->dbc))) {
        db->dbc = NULL;
        return ibx__diag(db, SQL_HANDLE_ENV, db->env, "SQLAllocHandle(DBC)");
    }
    if (!db->connstr) {
        db->connstr = ibx__strdup(db->hooks, connstr);
#ifdef IBX_NO_MARIADB
        if (!db->connstr) /* only MariaDB's driver wants a key before it connects */
#else
        if (!db->connstr || ibx__connstr_extras(db, NULL) < 0)
#endif
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    }
    if (ibx__sqlite_without_file(db->connstr))
        return ibx__fail(db->err, IBX_ERR_DB, "connection_string",
                         "the connection string names the SQLite driver and no Database= (nor a DSN)"
                         IBX__WHY(": the driver would take the whole string for a file name; give the file's "
                                  "path, or Database=:memory: for a database in memory"));
    r = ibx__driver_connect(db, db->connstr);
    if (r == IBX_OK) r = ibx__db_setup(db);
    if (r != IBX_OK) return r;
    grown = ibx__connstr_extras(db, IBX__ONE(db->d));
    if (grown < 0) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    if (grown == 0) return IBX_OK;
    ibx__db_disconnect(db);
    r = ibx__driver_connect(db, db->connstr);
    return r == IBX_OK ? ibx__db_setup(db) : r;
}

/* Use a connection the caller opened; it stays theirs. */
/* A caller's connection must be in the autocommit mode the dialect's
 * units of work assume: with autocommit on where they commit by hand, a
 * claim's pick and its update would be two transactions, and two workers
 * could claim one row. Asked of the driver manager: no round trip. */
IBX__PRIVATE ibx_result ibx__check_autocommit(ibx__db *db) {
    SQLUINTEGER mode = 0;
    SQLUINTEGER want = db->tx_by_sql ? SQL_AUTOCOMMIT_ON : SQL_AUTOCOMMIT_OFF;
    ibx_result r = ibx__check(db, SQLGetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT, &mode, 0, NULL),
                              SQL_HANDLE_DBC, db->dbc, "SQLGetConnectAttr(AUTOCOMMIT)");
    if (r != IBX_OK || mode == want) return r;
    return ibx__fail(db->err, IBX_ERR_STATE, "hdbc: autocommit",
                     "the caller's connection has autocommit %s; on %s the store needs it %s"
                     IBX__WHY(" (SQLSetConnectAttr(SQL_ATTR_AUTOCOMMIT, SQL_AUTOCOMMIT_%s))"),
                     mode == SQL_AUTOCOMMIT_ON ? "on" : "off", ibx__dialect_name(db->d->id),
                     want == SQL_AUTOCOMMIT_ON ? "on" : "off"
#ifndef IBX_TERSE_MESSAGES
                     , want == SQL_AUTOCOMMIT_ON ? "ON" : "OFF"
#endif
                     );
}

IBX__PRIVATE ibx_result ibx__db_adopt(ibx__db *db, void *hdbc) {
    ibx_result r;
    db->own_connection = 0;
    db->dbc = (SQLHDBC)hdbc;
    db->connected = 1;
    r = ibx__db_setup(db);
    return r == IBX_OK ? ibx__check_autocommit(db) : r;
}

#endif /* !IBX_SQLITE3_API */

/* Reopen a lost connection of our own before the next unit of work. */
IBX__PRIVATE ibx_result ibx__db_ensure(ibx__db *db) {
    ibx_result r;
    if (!db->lost && db->connected) return db->own_connection ? IBX_OK : ibx__check_autocommit(db);
    if (!db->own_connection)
        return ibx__fail(db->err, IBX_ERR_DB_TRANSIENT, "connection",
                         "the caller's connection was lost" IBX__WHY("; reconnect it and open the store again"));
    ibx__log(db->hooks, db->reconnects_failed ? IBX_LOG_DEBUG : IBX_LOG_WARN, db->store_id,
             "reconnecting" IBX__WHY(" (the connection was lost, or left out of step by a timeout)"));
    ibx__db_disconnect(db);
    r = ibx__driver_connect(db, db->connstr);
    if (r == IBX_OK) r = ibx__db_setup(db);
    if (r != IBX_OK) { /* a half-set-up session is not usable: try again next time */
        ibx__db_disconnect(db);
        db->lost = 1;
        db->reconnects_failed++;
        return r;
    }
    ibx__log(db->hooks, IBX_LOG_INFO, db->store_id, "reconnected after %d failed attempt(s)", db->reconnects_failed);
    db->reconnects_failed = 0;
    return r;
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
IBX__PRIVATE void ibx__db_close(ibx__db *db) {
    if (db->own_connection) {
        ibx__db_disconnect(db);
        if (db->dbc) SQLFreeHandle(SQL_HANDLE_DBC, db->dbc);
        if (db->env) SQLFreeHandle(SQL_HANDLE_ENV, db->env);
    } else {
        ibx__db_free_statements(db);
    }
    ibx__free(db->hooks, db->connstr);
    db->connstr = NULL;
    db->dbc = NULL;
    db->env = NULL;
    db->connected = 0;
}

#endif /* !IBX_SQLITE3_API */

/* >> odbc: statements and parameters ------------------------------------------------- */

/* A parameter value; bound by ibx__exec. Text and blobs point at the
 * caller's memory, which must stay valid until the statement has run. */
typedef struct ibx__param {
    SQLSMALLINT c_type;
    SQLSMALLINT sql_type;
    SQLULEN size;
    SQLPOINTER ptr;
    SQLLEN ind;
    SQLBIGINT i64;
} ibx__param;

#ifdef IBX_SQLITE3_API /* the interface's statement run (see "odbc: connection state") */
static ibx_result ibx__exec_once(ibx__db *db, int slot, const char *sql, ibx__param *ps, int n,
                                 int64_t *rows, SQLHSTMT *cursor);
#endif

/* Text of `len` bytes (len (size_t)-1: up to the NUL); NULL text binds SQL NULL. */
IBX__PRIVATE void ibx__p_text(ibx__param *p, const char *text, size_t len) {
    if (text && len == (size_t)-1) len = strlen(text);
    p->c_type = SQL_C_CHAR;
    p->sql_type = len > 4000 ? SQL_LONGVARCHAR : SQL_VARCHAR;
    p->size = text ? (len ? (SQLULEN)len : 1) : 1;
    p->ptr = (SQLPOINTER)(uintptr_t)(const void *)text;
    p->ind = text ? (SQLLEN)len : SQL_NULL_DATA;
    p->i64 = 0;
}

IBX__PRIVATE void ibx__p_i64(ibx__param *p, int64_t v) {
    p->c_type = SQL_C_SBIGINT;
    p->sql_type = SQL_BIGINT;
    p->size = 0;
    p->i64 = (SQLBIGINT)v;
    p->ptr = NULL; /* pointed at p->i64 when bound: the struct may be copied before */
    p->ind = 0;
}

IBX__PRIVATE void ibx__p_blob(ibx__param *p, const void *data, size_t len) {
    p->c_type = SQL_C_BINARY;
    p->sql_type = len > 8000 ? SQL_LONGVARBINARY : SQL_VARBINARY;
    p->size = len ? (SQLULEN)len : 1;
    p->ptr = (SQLPOINTER)(uintptr_t)data;
    p->ind = data ? (SQLLEN)len : SQL_NULL_DATA;
    p->i64 = 0;
}

/* Statements declare their arguments: each header's ibx__stmt_args_rows
 * (ibx__stmt_args: a dialect's variant) gives one letter per argument, in
 * binding order: i an integer, t a text, b bytes, l a list (one text of
 * many values: a key list or a batch column, see ibx__list_add), j rows as
 * one JSON array; upper case where a dialect's numbered markers may leave
 * the argument out. Every dialect's text must take exactly those: checked
 * when a store opens and when a statement is bound (IBX__CHECK_ARGS), and
 * for every dialect by CORE-STMT-PARAMS. */
#if !defined(NDEBUG) && !defined(IBX_TERSE_MESSAGES)
#define IBX__CHECK_ARGS 1 /* debug builds; the terse ones are short of flash */
#else
#define IBX__CHECK_ARGS 0
#endif
static const char *ibx__stmt_args(const ibx__dialect *d, int id);

/* Does statement text `sql` (expanded) take the arguments `args` declares?
 * NULL if so, else `why`, saying what is wrong. The markers are counted as
 * ibx__plain_markers reads them: plain "?"s, one per argument in order, or
 * numbered "?N"s, each naming an argument, every lower-case one at least
 * once; never both kinds in one text. */
IBX__PRIVATE const char *ibx__args_check(const char *sql, const char *args, char *why, size_t cap) {
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
    if (numbered > IBX__MAX_MARKERS) return snprintf(why, cap, "%u numbered markers", (unsigned)numbered), why;
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
IBX__PRIVATE char *ibx__plain_markers(const ibx__hooks *h, const char *sql,
                                      unsigned char map[IBX__MAX_MARKERS]) {
    size_t o = 0, k = 0;
    char *out = (char *)ibx__alloc(h, strlen(sql) + 1);
    if (!out) return NULL;
    while (*sql) {
        out[o++] = *sql;
        if (*sql++ == '?' && *sql >= '1' && *sql <= '9') {
            unsigned arg = (unsigned)(*sql++ - '0');
            if (*sql >= '0' && *sql <= '9') arg = arg * 10 + (unsigned)(*sql++ - '0'); /* ?10..?99 */
            if (k == IBX__MAX_MARKERS || (*sql >= '0' && *sql <= '9')) {
                out[0] = '\0';
                return out;
            }
            map[k++] = (unsigned char)arg;
        }
    }
    out[o] = '\0';
    return out;
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
IBX__PRIVATE ibx_result ibx__stmt(ibx__db *db, int slot, const char *sql, SQLHSTMT *out) {
    SQLHSTMT st;
    ibx_result r;
    char *plain = NULL;
    IBX_ASSERT(slot >= 0 && slot < IBX__MAX_STMTS);
    if (db->stmt[slot]) {
        *out = db->stmt[slot];
        return IBX_OK;
    }
    /* Once per statement and connection: the copy costs nothing that matters. */
    memset(db->markers[slot], 0, sizeof db->markers[slot]);
    plain = ibx__plain_markers(db->hooks, sql, db->markers[slot]);
    if (!plain) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLPrepare", "out of memory");
    if (!plain[0]) {
        ibx__free(db->hooks, plain);
        return ibx__fail(db->err, IBX_ERR_STATE, "SQLPrepare", "bad numbered marker in statement %d", slot);
    }
    sql = plain;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st))) {
        ibx__free(db->hooks, plain);
        return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    }
    if (db->statement_timeout_s > 0) /* honoured by psqlODBC; others ignore it or warn */
        SQLSetStmtAttr(st, SQL_ATTR_QUERY_TIMEOUT, (SQLPOINTER)(uintptr_t)db->statement_timeout_s, 0);
    r = ibx__check(db, SQLPrepare(st, IBX__SQLTEXT(sql), SQL_NTS), SQL_HANDLE_STMT, st,
                   "SQLPrepare");
    ibx__free(db->hooks, plain);
    if (r != IBX_OK) {
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        return r;
    }
    db->stmt[slot] = st;
    *out = st;
    return IBX_OK;
}

/* Bind ps[0..n) to the markers in order, or as map says (ibx__stmt). */
IBX__PRIVATE ibx_result ibx__bind(ibx__db *db, SQLHSTMT st, ibx__param *ps, int n,
                                  const unsigned char map[IBX__MAX_MARKERS]) {
    int i, markers = n;
    if (map[0]) {
        for (markers = 0; markers < IBX__MAX_MARKERS && map[markers]; markers++)
            if (map[markers] > n)
                return ibx__fail(db->err, IBX_ERR_STATE, "SQLBindParameter",
                                 "marker ?%d but only %d arguments", map[markers], n);
    }
    for (i = 0; i < markers; i++) {
        ibx__param *p = &ps[map[0] ? map[i] - 1 : i];
        SQLPOINTER ptr = p->c_type == SQL_C_SBIGINT ? (SQLPOINTER)&p->i64 : p->ptr;
        SQLLEN buflen = p->c_type == SQL_C_SBIGINT ? 0 : (p->ind > 0 ? p->ind : 0);
        SQLSMALLINT sql_type = p->sql_type;
        SQLULEN size = p->size;
        SQLRETURN rc;
        if (db->d && IBX__ONE(db->d)->max_types && p->c_type != SQL_C_SBIGINT) {
            int text = p->c_type == SQL_C_CHAR;
            sql_type = text ? SQL_VARCHAR : SQL_VARBINARY;
            size = p->size <= (text ? 4000u : 8000u) ? (text ? 4000u : 8000u) : 0;
        }
        /* psqlODBC (BoolsAsChar, its default) takes a VARCHAR(5) parameter
         * for a boolean and describes the statement first, in a round trip
         * of its own: slower, and through PgBouncer in transaction pooling
         * the describe and the execute reach different servers (26000). */
        if (sql_type == SQL_VARCHAR && size == 5) size = 6;
        if (db->d && IBX__ONE(db->d)->wide_text)
            sql_type = sql_type == SQL_VARCHAR ? SQL_WVARCHAR
                     : sql_type == SQL_LONGVARCHAR ? SQL_WLONGVARCHAR : sql_type;
        rc = SQLBindParameter(st, (SQLUSMALLINT)(i + 1), SQL_PARAM_INPUT, p->c_type, sql_type,
                              size, 0, ptr, buflen, &p->ind);
        ibx_result r = ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLBindParameter");
        if (r != IBX_OK) return r;
    }
    return IBX_OK;
}

/* Run the statement in `slot` with `n` parameters. With `cursor` NULL the
 * statement must not return rows; *rows (if given) receives the affected
 * count (or, when the statement returns a row, its first column), and
 * SQL_NO_DATA (a zero-row UPDATE/DELETE on PostgreSQL and SQLite) is
 * success with 0 rows. With `cursor` set, the result set is left
 * open for ibx__fetch; close it with ibx__close. */
/* How many rows the statement just run changed. Not knowing is an error,
 * never "0 rows": the unit rolls back rather than commit a miscounted
 * settle. A statement whose driver row count would be ambiguous (a MariaDB
 * upsert counts an insert and an untouched row alike) returns its count as
 * the first column of its one row. */
static ibx_result ibx__affected_rows(ibx__db *db, SQLHSTMT st, int64_t *rows) {
    SQLLEN count = 0;
    SQLSMALLINT cols = 0;
    SQLRETURN rc;
    ibx_result r = ibx__check(db, SQLNumResultCols(st, &cols), SQL_HANDLE_STMT, st, "SQLNumResultCols");
    if (r != IBX_OK) return r;
    if (cols > 0) {
        SQLBIGINT v = 0;
        SQLLEN ind = 0;
        rc = SQLFetch(st);
        if (SQL_SUCCEEDED(rc))
            r = ibx__check(db, SQLGetData(st, 1, SQL_C_SBIGINT, &v, 0, &ind), SQL_HANDLE_STMT, st,
                           "SQLGetData(count)");
        else if (rc != SQL_NO_DATA)
            r = ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLFetch(count)");
        if (r == IBX_OK) *rows = SQL_SUCCEEDED(rc) && ind != SQL_NULL_DATA && v > 0 ? (int64_t)v : 0;
        return r;
    }
    r = ibx__check(db, SQLRowCount(st, &count), SQL_HANDLE_STMT, st, "SQLRowCount");
    if (r == IBX_OK) *rows = count < 0 ? 0 : (int64_t)count;
    return r;
}

#endif /* !IBX_SQLITE3_API */

#if IBX__CHECK_ARGS
/* Arguments ps[0..n) for text `sql` in `slot`: as many as its markers take,
 * and, for a statement of the store's (db->sql), of the declared kinds. */
static int ibx__args_bound(const ibx__db *db, int slot, const char *sql, const ibx__param *ps, int n) {
    const char *args = db->d ? ibx__stmt_args(db->d, slot) : NULL;
    char why[80], any[IBX__MAX_MARKERS + 1];
    int i;
    if (!(args && db->sql && db->sql[slot] == sql)) {
        if (n > IBX__MAX_MARKERS) return 1; /* not the store's: only counted, up to this many */
        for (i = 0; i < n; i++) any[i] = 'T';
        any[n] = '\0';
        return !ibx__args_check(sql, any, why, sizeof why);
    }
    if ((int)strlen(args) != n) return 0;
    for (i = 0; i < n; i++) {
        int kind = args[i] | 0x20; /* lower case */
        if (ps[i].c_type != (kind == 'i' ? SQL_C_SBIGINT : kind == 'b' ? SQL_C_BINARY : SQL_C_CHAR)) return 0;
    }
    return 1;
}
#endif

/* Statements for the caller's own driver (ibx_sql, ibx_enqueue_sql): a
 * unit of work run on a db whose `capture` is set records each statement
 * with its values instead of running it, so the texts and the values are
 * the ones the ODBC path binds, never a second copy. While recording, the
 * texts and values are offsets into `text` (it grows); ibx__capture_end
 * turns them into the public pointers. */
typedef struct ibx__cap_stmt {
    size_t sql;
    int first, count, check_column, counts;
} ibx__cap_stmt;

typedef struct ibx__cap_param {
    size_t off, len;
    int is_null, is_int, is_blob;
    int64_t i64;
} ibx__cap_param;

struct ibx_sql {
    ibx__hooks hooks;    /* the store's, copied: the statements may outlive it */
    int markers;         /* IBX_SQL_MARKERS_* */
    ibx__buf text;       /* texts and values, each NUL-terminated */
    ibx__buf stmts_raw;  /* ibx__cap_stmt records while recording */
    ibx__buf params_raw; /* ibx__cap_param records while recording */
    int count, param_count;
    ibx_sql_stmt *stmts; /* filled by ibx__capture_end */
    ibx_sql_param *params;
    char (*ids)[37];     /* the messages' ids (ibx_sql_id), id_count of them */
    int id_count;
    /* ibx__capture_add, set by ibx__unit_capture: the statement runners
     * call it through here, so that a program without an *_enqueue_sql
     * call links none of the recording (--gc-sections). */
    ibx_result (*add)(ibx__db *db, const char *sql, const ibx__param *ps, int n, int check_column, int counts);
};

static int ibx__cap_text(ibx_sql *c, const char *s, size_t n, size_t *off) {
    *off = c->text.len;
    return ibx__buf_add(&c->hooks, &c->text, s, n) && ibx__buf_add(&c->hooks, &c->text, "", 1);
}

/* Record statement `sql` with ps[0..n): as plain markers, each marker's
 * value in order (ibx__plain_markers' map), "$k" for libpq. */
IBX__PRIVATE ibx_result ibx__capture_add(ibx__db *db, const char *sql, const ibx__param *ps, int n,
                                         int check_column, int counts) {
    ibx_sql *c = db->capture;
    unsigned char map[IBX__MAX_MARKERS];
    char *plain;
    const char *q;
    ibx__cap_stmt st;
    int k = 0, ok = 1;
    memset(map, 0, sizeof map);
    plain = ibx__plain_markers(db->hooks, sql, map);
    if (!plain) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_sql", "out of memory");
    st.sql = c->text.len;
    st.first = c->param_count;
    st.check_column = check_column;
    st.counts = counts;
    for (q = plain; *q && ok; q++) {
        char num[16];
        if (*q != '?') {
            ok = ibx__buf_add(&c->hooks, &c->text, q, 1);
            continue;
        }
        k++;
        if (c->markers == IBX_SQL_MARKERS_DOLLAR) {
            snprintf(num, sizeof num, "$%d", k);
            ok = ibx__buf_add(&c->hooks, &c->text, num, strlen(num));
        } else {
            ok = ibx__buf_add(&c->hooks, &c->text, "?", 1);
        }
    }
    ibx__free(db->hooks, plain);
    ok = ok && ibx__buf_add(&c->hooks, &c->text, "", 1);
    st.count = k;
    for (k = 0; k < st.count && ok; k++) {
        int a = map[0] ? map[k] - 1 : k;
        const ibx__param *p = &ps[a];
        ibx__cap_param v;
        char num[24];
        memset(&v, 0, sizeof v);
        if (a < 0 || a >= n) return ibx__fail(db->err, IBX_ERR_STATE, "ibx_sql", "marker %d has no argument", k + 1);
        v.is_int = p->c_type == SQL_C_SBIGINT;
        v.is_blob = p->c_type == SQL_C_BINARY;
        v.is_null = p->ind == SQL_NULL_DATA;
        v.i64 = v.is_int ? (int64_t)p->i64 : 0;
        if (v.is_null) v.i64 = 0;
        else if (v.is_int) {
            snprintf(num, sizeof num, "%lld", (long long)p->i64);
            ok = ibx__cap_text(c, num, strlen(num), &v.off);
            v.len = strlen(num);
        } else {
            v.len = (size_t)p->ind;
            ok = ibx__cap_text(c, (const char *)p->ptr, v.len, &v.off);
        }
        ok = ok && ibx__buf_add(&c->hooks, &c->params_raw, &v, sizeof v);
    }
    ok = ok && ibx__buf_add(&c->hooks, &c->stmts_raw, &st, sizeof st);
    if (!ok) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_sql", "out of memory");
    c->param_count += st.count;
    c->count++;
    return IBX_OK;
}

/* The ids of the messages the recorded statements write (ibx_sql_id). */
IBX__PRIVATE ibx_result ibx__capture_ids(ibx__db *db, char (*ids)[37], int n) {
    ibx_sql *c = db->capture;
    if (n <= 0) return IBX_OK;
    c->ids = (char (*)[37])ibx__alloc(&c->hooks, 37 * (size_t)n);
    if (!c->ids) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_sql", "out of memory");
    memcpy(c->ids, ids, 37 * (size_t)n);
    c->id_count = n;
    return IBX_OK;
}

/* The recorded statements as the public arrays; 0 when out of memory. */
IBX__PRIVATE int ibx__capture_end(ibx_sql *c) {
    int i;
    c->stmts = (ibx_sql_stmt *)ibx__alloc(&c->hooks, sizeof *c->stmts * (size_t)(c->count + 1));
    c->params = (ibx_sql_param *)ibx__alloc(&c->hooks, sizeof *c->params * (size_t)(c->param_count + 1));
    if (!c->stmts || !c->params) return 0;
    for (i = 0; i < c->param_count; i++) {
        ibx__cap_param v;
        memcpy(&v, c->params_raw.data + sizeof v * (size_t)i, sizeof v);
        c->params[i].value = v.is_null ? NULL : c->text.data + v.off;
        c->params[i].length = v.is_null ? 0 : v.len;
        c->params[i].is_int = v.is_int;
        c->params[i].i64 = v.i64;
        c->params[i].is_blob = v.is_blob;
    }
    for (i = 0; i < c->count; i++) {
        ibx__cap_stmt st;
        memcpy(&st, c->stmts_raw.data + sizeof st * (size_t)i, sizeof st);
        c->stmts[i].sql = c->text.data + st.sql;
        c->stmts[i].param_count = st.count;
        c->stmts[i].params = c->params + st.first;
        c->stmts[i].check_column = st.check_column;
        c->stmts[i].counts = st.counts;
    }
    return 1;
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
static ibx_result ibx__exec_once(ibx__db *db, int slot, const char *sql, ibx__param *ps, int n,
                                 int64_t *rows, SQLHSTMT *cursor) {
    SQLHSTMT st = NULL;
    SQLRETURN rc;
    ibx_result r;
#if IBX__CHECK_ARGS
    IBX_ASSERT(ibx__args_bound(db, slot, sql, ps, n));
#endif
    if (db->capture) { /* recorded for the caller's driver: a statement of rows cannot be */
        if (cursor) return ibx__fail(db->err, IBX_ERR_STATE, "ibx_sql", "statement %d reads", slot);
        if (rows) *rows = 0; /* the caller's driver counts (ibx_sql_stmt.counts) */
        return db->capture->add(db, sql, ps, n, 0, rows != NULL);
    }
    r = ibx__stmt(db, slot, sql, &st);
    if (r != IBX_OK) return r;
    SQLFreeStmt(st, SQL_CLOSE); /* a cursor left open by an earlier failure */
    r = ibx__bind(db, st, ps, n, db->markers[slot]);
    if (r != IBX_OK) return r;
    rc = SQLExecute(st);
    if (rc == SQL_NO_DATA) {
        if (rows) *rows = 0;
        if (cursor) *cursor = st; /* fetch will report the end at once */
        return IBX_OK;
    }
    r = ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLExecute");
    if (r != IBX_OK) {
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
        return IBX_OK;
    }
    r = rows ? ibx__affected_rows(db, st, rows) : IBX_OK;
    SQLFreeStmt(st, SQL_CLOSE);
    return r;
}

#endif /* !IBX_SQLITE3_API */

/* Run the statement in `slot` (ibx__exec_once). With a statement timeout,
 * a call that fails only after the timeout has passed says so: drivers
 * report it as a lost connection (MariaDB's socket timeout) or a cancel. */
IBX__PRIVATE ibx_result ibx__exec(ibx__db *db, int slot, const char *sql, ibx__param *ps, int n,
                                  int64_t *rows, SQLHSTMT *cursor) {
    int64_t t0 = db->statement_timeout_s > 0 ? ibx__mono_ms(db->hooks) : 0, waited;
    ibx_result r = ibx__exec_once(db, slot, sql, ps, n, rows, cursor);
    if (r != IBX_ERR_DB_TRANSIENT || db->statement_timeout_s <= 0) return r;
    waited = ibx__mono_ms(db->hooks) - t0;
    if (waited >= (int64_t)db->statement_timeout_s * 900) { /* 90 %: timers are coarse */
        char text[sizeof db->err->message];
        snprintf(text, sizeof text, "statement timeout: no answer in %lld ms (limit %ld s): %.400s",
                 (long long)waited, db->statement_timeout_s, db->err->message);
        ibx__copy(db->err->message, sizeof db->err->message, text);
        ibx__log(db->hooks, IBX_LOG_WARN, db->store_id, "%s", text);
    }
    return r;
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* IBX_OK with a row, IBX_EMPTY at the end of the result set, or an error. */
IBX__PRIVATE ibx_result ibx__fetch(ibx__db *db, SQLHSTMT st) {
    SQLRETURN rc = SQLFetch(st);
    if (rc == SQL_NO_DATA) return IBX_EMPTY;
    /* 24000: an UPDATE … RETURNING that matched nothing left no cursor. */
    if (rc == SQL_ERROR) {
        SQLCHAR state[6];
        SQLINTEGER native = 0;
        SQLSMALLINT len = 0;
        if (SQL_SUCCEEDED(SQLGetDiagRec(SQL_HANDLE_STMT, st, 1, state, &native, NULL, 0, &len)) &&
            memcmp(state, "24000", 5) == 0)
            return IBX_EMPTY;
    }
    return ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLFetch");
}

IBX__PRIVATE void ibx__close(SQLHSTMT st) {
    if (st) SQLFreeStmt(st, SQL_CLOSE);
}

/* Column `col` (1-based) as text into out (cut to cap), *ind its length or
 * SQL_NULL_DATA (then out is left as it was). */
IBX__PRIVATE ibx_result ibx__get_text(ibx__db *db, SQLHSTMT st, int col, char *out, size_t cap, SQLLEN *ind) {
    return ibx__check(db, SQLGetData(st, (SQLUSMALLINT)col, SQL_C_CHAR, out, (SQLLEN)cap, ind), SQL_HANDLE_STMT,
                      st, "SQLGetData");
}

/* Forget the columns ibx__bind_head bound: their memory is about to go. */
IBX__PRIVATE void ibx__unbind(SQLHSTMT st) {
    if (st) SQLFreeStmt(st, SQL_UNBIND);
}

#endif /* !IBX_SQLITE3_API */

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Column `col` (1-based) as a 64-bit integer; *is_null set when given. */
IBX__PRIVATE ibx_result ibx__get_i64(ibx__db *db, SQLHSTMT st, int col, int64_t *out,
                                     int *is_null) {
    SQLBIGINT v = 0;
    SQLLEN ind = 0;
    ibx_result r = ibx__check(db, SQLGetData(st, (SQLUSMALLINT)col, SQL_C_SBIGINT, &v, 0, &ind),
                              SQL_HANDLE_STMT, st, "SQLGetData");
    if (r != IBX_OK) return r;
    if (is_null) *is_null = ind == SQL_NULL_DATA;
    *out = ind == SQL_NULL_DATA ? 0 : (int64_t)v;
    return IBX_OK;
}

/* Column `col` appended to `buf` (NUL-terminated there); *offset is where
 * it starts, or (size_t)-1 for SQL NULL. Offsets, not pointers: the buffer
 * may move while later columns are read. */
IBX__PRIVATE ibx_result ibx__get_append(ibx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type,
                                        ibx__buf *buf, size_t *offset, size_t *out_len) {
    const size_t term = c_type == SQL_C_CHAR ? 1 : 0;
    size_t start = buf->len;
    int first = 1, truncated;
    for (;;) {
        SQLLEN ind = 0;
        size_t room, got;
        SQLRETURN rc;
        if (!ibx__buf_reserve(db->hooks, buf, 1024))
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
        room = buf->cap - buf->len;
        rc = SQLGetData(st, (SQLUSMALLINT)col, c_type, buf->data + buf->len, (SQLLEN)room, &ind);
        if (rc == SQL_NO_DATA) break;
        if (!SQL_SUCCEEDED(rc)) {
            buf->len = start;
            return ibx__diag(db, SQL_HANDLE_STMT, st, "SQLGetData");
        }
        if (ind == SQL_NULL_DATA) {
            buf->len = start;
            *offset = (size_t)-1;
            if (out_len) *out_len = 0;
            return IBX_OK;
        }
        truncated = rc == SQL_SUCCESS_WITH_INFO && (ind == SQL_NO_TOTAL || (size_t)ind > room - term);
        if (truncated) got = room - term;
        else if (term) got = ibx__strnlen(buf->data + buf->len, room);
        else got = (ind != SQL_NO_TOTAL && (size_t)ind <= room) ? (size_t)ind : room;
        buf->len += got;
        if (!truncated) break;
        /* Truncated: the first indicator usually tells the whole size. */
        if (first && ind != SQL_NO_TOTAL && (size_t)ind > got &&
            !ibx__buf_reserve(db->hooks, buf, (size_t)ind - got + 1))
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
        first = 0;
    }
    if (!ibx__buf_reserve(db->hooks, buf, 1))
        return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
    buf->data[buf->len++] = '\0';
    *offset = start;
    if (out_len) *out_len = buf->len - start - 1;
    return IBX_OK;
}

#endif /* !IBX_SQLITE3_API */

/* A claimed row's fixed-size columns, bound so that one SQLFetch fills
 * them all: `texts` short texts (UUIDs) first, then integers. Its variable
 * texts come after them and are read with SQLGetData in column order, which
 * every driver allows after the last bound column. A claim of 100 rows took
 * 22 SQLGetData calls per row, each through the driver manager. */
#define IBX__HEAD_INTS 10
typedef struct ibx__row_head {
    char text[2][40];
    SQLLEN text_ind[2];
    SQLBIGINT v[IBX__HEAD_INTS];
    SQLLEN ind[IBX__HEAD_INTS];
} ibx__row_head;

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
IBX__PRIVATE ibx_result ibx__bind_head(ibx__db *db, SQLHSTMT st, ibx__row_head *h, int texts, int ints) {
    int i;
    IBX_ASSERT(texts <= 2 && ints <= IBX__HEAD_INTS);
    for (i = 0; i < texts + ints; i++) {
        SQLRETURN rc = i < texts ? SQLBindCol(st, (SQLUSMALLINT)(i + 1), SQL_C_CHAR, h->text[i],
                                              (SQLLEN)sizeof h->text[i], &h->text_ind[i])
                                 : SQLBindCol(st, (SQLUSMALLINT)(i + 1), SQL_C_SBIGINT, &h->v[i - texts], 0,
                                              &h->ind[i - texts]);
        ibx_result r = ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLBindCol");
        if (r != IBX_OK) return r;
    }
    return IBX_OK;
}

#endif /* !IBX_SQLITE3_API */

/* Integer k of the bound head; 0 for NULL. */
IBX__PRIVATE int64_t ibx__head_int(const ibx__row_head *h, int k) {
    return h->ind[k] == SQL_NULL_DATA ? 0 : (int64_t)h->v[k];
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Run one statement that returns nothing, outside the cache (DDL,
 * transaction control, session settings). */
IBX__PRIVATE ibx_result ibx__exec_direct(ibx__db *db, const char *sql, const char *where) {
    SQLHSTMT st;
    SQLRETURN rc;
    ibx_result r;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    rc = SQLExecDirect(st, IBX__SQLTEXT(sql), SQL_NTS);
    r = rc == SQL_NO_DATA ? IBX_OK : ibx__check(db, rc, SQL_HANDLE_STMT, st, where);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

/* First column of the first row of `sql` as text into a fixed buffer. */
IBX__PRIVATE ibx_result ibx__query_text(ibx__db *db, const char *sql, char *out, size_t cap) {
    SQLHSTMT st;
    SQLLEN ind = 0;
    ibx_result r;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    r = ibx__check(db, SQLExecDirect(st, IBX__SQLTEXT(sql), SQL_NTS), SQL_HANDLE_STMT, st,
                   "SQLExecDirect");
    if (r == IBX_OK) r = ibx__fetch(db, st);
    if (r == IBX_OK)
        r = ibx__check(db, SQLGetData(st, 1, SQL_C_CHAR, out, (SQLLEN)cap, &ind), SQL_HANDLE_STMT,
                       st, "SQLGetData");
    if (r == IBX_OK && ind == SQL_NULL_DATA) out[0] = '\0';
    if (r == IBX_EMPTY) r = ibx__fail(db->err, IBX_ERR_NOT_FOUND, sql, "query returned no row");
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

#endif /* !IBX_SQLITE3_API */

/* >> odbc: transactions and units of work ------------------------------------------- */

/* Rule: one place decides how a unit of work runs. A connection rests in
 * one autocommit mode, chosen when it is set up (ibx__db_setup: tx_by_sql);
 * each unit then runs in one of the modes below, chosen by ibx__unit_mode
 * and by nothing else: ibx__begin, ibx__commit and ibx__rollback do what
 * the unit's mode (db->unit) says and assert it; ibx__unit_or_caller asks
 * it too. A new way to run a unit is a new mode there, not a test of
 * tx_by_sql, autocommit_on or own_connection somewhere else. */
enum {
    IBX__RUN_NONE = 0,
    IBX__RUN_AUTOCOMMIT, /* one statement that commits by itself: no BEGIN, no COMMIT */
    IBX__RUN_SQL,        /* a transaction by SQL: the dialect's begin_sql, COMMIT, ROLLBACK,
                            on a connection that rests in autocommit (tx_by_sql) */
    IBX__RUN_SQL_READ,   /* a reader there: no BEGIN, each statement its own snapshot, no
                            write lock (SQLite); its end only checks the connection */
    IBX__RUN_ODBC,       /* an ODBC transaction: autocommit off, SQLEndTran */
    IBX__RUN_CALLER      /* the caller's transaction on its hdbc: nothing is begun,
                            committed or rolled back here */
};

enum { IBX__UNIT_READ = 0, IBX__UNIT_WRITE = 1, IBX__UNIT_ONE_STATEMENT = 2 };

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
IBX__PRIVATE ibx_result ibx__end_tran(ibx__db *db, SQLSMALLINT completion, const char *where) {
    return ibx__check(db, SQLEndTran(SQL_HANDLE_DBC, db->dbc, completion), SQL_HANDLE_DBC, db->dbc,
                      where);
}

#endif /* !IBX_SQLITE3_API */

/* How a unit with `flags` runs on db: the one place that decides.
 * A unit of exactly one statement needs no BEGIN and COMMIT of its own: it
 * runs in autocommit, one round trip instead of three (psqlODBC sends
 * BEGIN and COMMIT apart). Only for a statement after which nothing can
 * fail that would need it undone (a count, a read), and only on our own
 * connections, where switching is free: tx_by_sql connections rest in
 * autocommit; psqlODBC switches locally (done here: where it fails, the
 * unit runs as a transaction). The switch back waits for the next unit of
 * several statements (ibx__begin), where a failure is that unit's error. */
IBX__PRIVATE int ibx__unit_mode(ibx__db *db, int flags) {
    if (db->callers_tx) return IBX__RUN_CALLER;
    if ((flags & IBX__UNIT_ONE_STATEMENT) && db->own_connection) {
        if (db->tx_by_sql || db->autocommit_on) return IBX__RUN_AUTOCOMMIT;
#ifndef IBX_SQLITE3_API
        if (IBX__ONE(db->d)->autocommit_is_local &&
            SQL_SUCCEEDED(SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                            (SQLPOINTER)(uintptr_t)SQL_AUTOCOMMIT_ON, SQL_IS_UINTEGER))) {
            db->autocommit_on = 1;
            return IBX__RUN_AUTOCOMMIT;
        }
#endif
    }
    /* SQLite readers need no write lock: without BEGIN each statement is
     * its own snapshot, and a writer elsewhere does not block them. */
    if (db->tx_by_sql) return (flags & IBX__UNIT_WRITE) ? IBX__RUN_SQL : IBX__RUN_SQL_READ;
    return IBX__RUN_ODBC;
}

#ifndef IBX_SQLITE3_API /* ODBC; SQLite API: section "sqlite3 api" */
/* Manual commit again before a unit of several statements: they must never
 * run as several transactions. */
IBX__PRIVATE ibx_result ibx__autocommit_off(ibx__db *db) {
    ibx_result r = ibx__check(db,
                              SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                                (SQLPOINTER)(uintptr_t)SQL_AUTOCOMMIT_OFF, SQL_IS_UINTEGER),
                              SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(AUTOCOMMIT)");
    if (r == IBX_OK) db->autocommit_on = 0;
    return r;
}

#endif /* !IBX_SQLITE3_API */

/* Open a unit in `mode` (ibx__unit_mode). */
IBX__PRIVATE ibx_result ibx__begin(ibx__db *db, int mode) {
    ibx_result r = IBX_OK;
    IBX_ASSERT(mode != IBX__RUN_NONE && mode != IBX__RUN_CALLER);
    IBX_ASSERT((mode == IBX__RUN_SQL || mode == IBX__RUN_SQL_READ) == (db->tx_by_sql != 0) ||
               mode == IBX__RUN_AUTOCOMMIT);
    db->unit = mode;
    if (mode == IBX__RUN_ODBC && db->autocommit_on) r = ibx__autocommit_off(db);
    /* SQLite: a deferred transaction that later writes can deadlock and burn
     * the whole busy timeout, so writers take the lock up front. */
    if (r == IBX_OK && mode == IBX__RUN_SQL) r = ibx__exec_direct(db, IBX__ONE(db->d)->begin_sql, "BEGIN");
    if (r == IBX_OK && (mode == IBX__RUN_SQL || mode == IBX__RUN_ODBC)) db->in_tx = 1;
    return r;
}

/* Open a transactional handler's transaction (ibx__handle_tx) as a unit
 * that writes, except on SQLite: there a plain (deferred) BEGIN, so that the
 * write lock, which holds back every other writer, is taken only at the
 * handler's first write or at the ack, not while it reads or waits. */
IBX__PRIVATE ibx_result ibx__begin_handler(ibx__db *db) {
    int mode = ibx__unit_mode(db, IBX__UNIT_WRITE);
    ibx_result r;
    if (mode != IBX__RUN_SQL || IBX__ONE(db->d)->id != IBX_DIALECT_SQLITE) return ibx__begin(db, mode);
    db->unit = mode;
    r = ibx__exec_direct(db, "BEGIN", "BEGIN");
    if (r == IBX_OK) db->in_tx = 1;
    return r;
}

IBX__PRIVATE ibx_result ibx__commit(ibx__db *db) {
#ifndef IBX_SQLITE3_API
    SQLUINTEGER dead = 0;
#endif
    ibx_result r;
    IBX_ASSERT(db->unit == IBX__RUN_SQL || db->unit == IBX__RUN_SQL_READ || db->unit == IBX__RUN_ODBC);
    /* psqlODBC reports a successful COMMIT on a connection it already knows
     * is dead; believe the dead flag, not the commit. (Where asking costs a
     * round trip, a dead connection fails the COMMIT itself.) */
#ifndef IBX_SQLITE3_API
    if (IBX__ONE(db->d)->dead_flag_is_local &&
        SQL_SUCCEEDED(SQLGetConnectAttr(db->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
        dead == SQL_CD_TRUE) {
        db->lost = 1;
        db->in_tx = 0;
        r = ibx__fail(db->err, IBX_ERR_DB_TRANSIENT, "commit",
                      "connection lost before commit" IBX__WHY("; the transaction was not committed"));
        db->err->connection_lost = 1;
        return r;
    }
#endif
    if (db->unit == IBX__RUN_SQL_READ) return IBX_OK; /* a read unit: nothing to commit */
    r = db->unit == IBX__RUN_SQL ? ibx__exec_direct(db, "COMMIT", "COMMIT")
                                 : ibx__end_tran(db, SQL_COMMIT, "SQLEndTran(COMMIT)");
    /* A failed SQL COMMIT (SQLite BUSY) leaves the transaction open: keep
     * in_tx so that the rollback really runs and releases the lock. */
    if (r == IBX_OK || db->unit != IBX__RUN_SQL) db->in_tx = 0;
    if (r != IBX_OK && db->err->connection_lost)
        ibx__copy(db->err->message + strlen(db->err->message),
                  sizeof db->err->message - strlen(db->err->message),
                  " (connection lost during commit: outcome unknown)");
    return r;
}

/* Roll back, keeping the error that caused it. */
IBX__PRIVATE void ibx__rollback(ibx__db *db) {
    ibx_error saved = *db->err;
    IBX_ASSERT(db->unit != IBX__RUN_NONE && db->unit != IBX__RUN_CALLER);
    if (db->connected && !db->lost) {
        /* An ODBC unit ends by SQLEndTran; so does one in autocommit on a
         * connection that rests in manual commit (a no-op there, kept). */
        if (db->unit == IBX__RUN_ODBC || (db->unit == IBX__RUN_AUTOCOMMIT && db->autocommit_on))
            ibx__end_tran(db, SQL_ROLLBACK, "SQLEndTran(ROLLBACK)");
        else if (db->in_tx)
            ibx__exec_direct(db, "ROLLBACK", "ROLLBACK");
    }
    db->in_tx = 0;
    *db->err = saved;
}

typedef ibx_result (*ibx__unit_fn)(ibx__db *db, void *ctx);

/* Run `fn` as one unit of work on our own connection (or a store's adopted
 * one), in the mode ibx__unit_mode chooses: begin, fn, commit.
 * Any error rolls the whole unit back (never commit after a failed
 * statement: psqlODBC would commit the statements before it). A deadlock,
 * serialization failure or busy/lock timeout redoes the unit up to
 * IBX__UNIT_RETRIES times with a short jittered pause; a lost connection is
 * reported at once (the next call reconnects). Returns fn's result.
 * flags: IBX__UNIT_WRITE (SQLite readers take no write lock), and
 * IBX__UNIT_ONE_STATEMENT when fn runs exactly one statement. */
IBX__PRIVATE ibx_result ibx__unit_run(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what,
                                      int flags) {
    ibx_result r;
    int attempt, mode;
    /* A transactional handler's transaction is open on the store's own
     * connection (ibx__handle_tx): the store's calls made inside it (its
     * ack, the handler's follow-up enqueues) run in it, and commit with it. */
    if (db->callers_tx) return fn(db, ctx);
    for (attempt = 0;; attempt++) {
        r = ibx__db_ensure(db);
        if (r != IBX_OK) return r;
        db->fault = IBX__FAULT_PERMANENT;
        mode = ibx__unit_mode(db, flags);
        IBX_ASSERT(mode != IBX__RUN_CALLER); /* ibx__unit_or_caller runs those */
        r = ibx__begin(db, mode);
        if (r == IBX_OK) r = fn(db, ctx);

        if (r >= 0) {
            ibx_result c = mode == IBX__RUN_AUTOCOMMIT ? IBX_OK : ibx__commit(db);
            if (c == IBX_OK) {
                if (db->err->result != IBX_OK) ibx__error_clear(db->err);
                return r;
            }
            r = c;
        }
        ibx__rollback(db);
        if (r != IBX_ERR_DB_TRANSIENT || db->fault != IBX__FAULT_TRANSIENT || db->lost ||
            attempt >= IBX__UNIT_RETRIES)
            break;
        {
            ibx_backoff_policy pause = {20, 500, 0.5, 1.5};
            int64_t ms = ibx__backoff_jitter_ms(&pause, attempt + 1, ibx__random(db->hooks));
            ibx__log(db->hooks, IBX_LOG_WARN, db->store_id,
                     "%s: transient failure [%s/%ld], retrying in %lld ms (retry %d of %d)", what,
                     db->err->sqlstate, db->err->native, (long long)ms, attempt + 1,
                     IBX__UNIT_RETRIES);
            ibx__sleep_ms(db->hooks, ms);
        }
    }
    if (r < 0)
        ibx__log(db->hooks, IBX_LOG_ERROR, db->store_id, "%s failed: %s: %s (%s)", what,
                 ibx__result_str(r), db->err->message, db->err->where);
    return r;
}

IBX__PRIVATE ibx_result ibx__unit(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what) {
    return ibx__unit_run(db, fn, ctx, what, IBX__UNIT_WRITE);
}

/* A unit of one statement that only reads (SQLite takes no write lock). */
IBX__PRIVATE ibx_result ibx__unit_read(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what) {
    return ibx__unit_run(db, fn, ctx, what, IBX__UNIT_READ | IBX__UNIT_ONE_STATEMENT);
}

/* A unit of exactly one statement that writes. */
IBX__PRIVATE ibx_result ibx__unit_one(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what) {
    return ibx__unit_run(db, fn, ctx, what, IBX__UNIT_WRITE | IBX__UNIT_ONE_STATEMENT);
}


/* >> sqlite3 api: the database interface on SQLite's own C API ----------------------- */

#ifdef IBX_SQLITE3_API
/* IBX_SQLITE3_API: the functions of the database interface (see "odbc:
 * connection state") on the sqlite3 C API, no driver manager or ODBC driver.
 * db->dbc is the sqlite3 *, db->stmt[slot] an ibx__sq_cur: the slot's
 * statement, prepared once per connection and reset, rebound and stepped for
 * each use (sqliteodbc compiled it again at each execute). The dialect is
 * SQLite's, its statement texts the same rows; "?N" markers are SQLite's own.
 * Connections rest in autocommit; units are BEGIN IMMEDIATE / COMMIT /
 * ROLLBACK as SQL (tx_by_sql), as through sqliteodbc. */

enum { IBX__SQ_IDLE = 0, IBX__SQ_PENDING, IBX__SQ_ROW, IBX__SQ_DONE };

/* A statement and where its cursor stands: a step that found a row leaves
 * it PENDING for the first ibx__fetch, which makes it the current ROW. */
typedef struct ibx__sq_cur {
    sqlite3_stmt *st;
    int state;
    ibx__row_head *head; /* ibx__bind_head: filled at each fetch */
    int head_texts, head_ints;
} ibx__sq_cur;

/* A failed sqlite3 call, diagnosed as an ODBC one would be: the primary
 * result code is the native code (the dialect's natives classify it: BUSY
 * and LOCKED are transient), SQLSTATE HY000 (23000 for a constraint). */
IBX__PRIVATE ibx_result ibx__sq_fail(ibx__db *db, int rc, const char *where) {
    ibx_error *e = db->err;
    sqlite3 *h = (sqlite3 *)db->dbc;
    int primary = rc & 0xff, fault;
    const char *state = primary == SQLITE_CONSTRAINT ? "23000" : "HY000";
    ibx__error_clear(e);
    ibx__copy(e->where, sizeof e->where, where);
    ibx__copy(e->sqlstate, sizeof e->sqlstate, state);
    e->native = primary;
    snprintf(e->message, sizeof e->message, "[SQLite][%s/%d] %s", state, rc,
             h && (sqlite3_extended_errcode(h) & 0xff) == primary ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
    fault = ibx__classify(db->d, state, primary);
    e->result = primary == SQLITE_NOMEM ? IBX_ERR_NO_MEMORY
              : fault == IBX__FAULT_PERMANENT || fault == IBX__FAULT_LOST_PERMANENT ? IBX_ERR_DB
                                                                                   : IBX_ERR_DB_TRANSIENT;
    db->fault = fault;
    ibx__log(db->hooks, IBX_LOG_DEBUG, db->store_id, "%s failed: %s", where, e->message);
    return e->result;
}

IBX__PRIVATE void ibx__db_free_statements(ibx__db *db) {
    int i;
    for (i = 0; i < IBX__MAX_STMTS; i++) {
        ibx__sq_cur *c = (ibx__sq_cur *)db->stmt[i];
        if (c) {
            sqlite3_finalize(c->st);
            ibx__free(db->hooks, c);
        }
        db->stmt[i] = NULL;
    }
    for (i = 0; i < (int)(sizeof db->tx_stmt / sizeof db->tx_stmt[0]); i++) {
        sqlite3_finalize(db->tx_stmt[i]); /* NULL: a no-op */
        db->tx_stmt[i] = NULL;
    }
}

/* The dialect is SQLite's; a forced other one cannot be spoken here. */
IBX__PRIVATE ibx_result ibx__db_setup(ibx__db *db) {
    const ibx__dialect *d = ibx__dialect_get(IBX_DIALECT_SQLITE);
    ibx_result r = IBX_OK;
    if (!d || (db->forced != IBX_DIALECT_AUTO && db->forced != IBX_DIALECT_SQLITE))
        return ibx__fail(db->err, IBX_ERR_UNSUPPORTED, "ibx_store_open: dialect",
                         "this build reaches SQLite through its C API (IBX_SQLITE3_API)%s",
                         d ? ": it speaks only sqlite" : " and leaves SQLite out (IBX_NO_SQLITE)");
    db->d = d;
    ibx__copy(db->dbms_name, sizeof db->dbms_name, "SQLite");
    ibx__copy(db->dbms_version, sizeof db->dbms_version, sqlite3_libversion());
    ibx__copy(db->driver_name, sizeof db->driver_name, "sqlite3 C API");
    db->autocommit_on = 0;
    db->tx_by_sql = 1;
    if (!db->own_connection) return IBX_OK; /* the caller's session is the caller's */
    if (IBX__ONE(d)->session_sql) r = ibx__exec_direct(db, IBX__ONE(d)->session_sql, "session setup");
    return r == IBX_OK ? ibx__sqlite_not_temporary(db) : r;
}

/* A connection string is a file name, a "file:" URI (SQLite's defaults,
 * busy timeout 100000 ms), or ODBC's key=value; pairs as sqliteodbc reads
 * them, so that a string means the same database and settings either way:
 * Database= (the file), Timeout= (the busy timeout in ms, default 100000),
 * JournalMode=, SyncPragma= (default NORMAL); other keys (Driver=, DSN=)
 * are ignored. */
IBX__PRIVATE ibx_result ibx__driver_connect(ibx__db *db, const char *connstr) {
    char file[1024], value[32], sql[64];
    const char *path = connstr;
    long timeout_ms = 100000;
    sqlite3 *h = NULL;
    int rc, pairs = strncmp(connstr, "file:", 5) != 0 && strchr(connstr, '=') != NULL;
    if (pairs) {
        ibx__connstr_value(connstr, "Database", file, sizeof file);
        path = file;
        ibx__connstr_value(connstr, "Timeout", value, sizeof value);
        if (value[0]) timeout_ms = strtol(value, NULL, 10);
    }
    rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL);
    db->dbc = h;
    if (rc != SQLITE_OK) {
        ibx__sq_fail(db, rc, "sqlite3_open_v2");
        if ((rc & 0xff) == SQLITE_CANTOPEN) {
            char text[sizeof db->err->message];
            snprintf(text, sizeof text, "cannot open the SQLite file '%.150s'"
                     IBX__WHY(": does its directory exist, and may this process write there?") ": %.250s",
                     path, db->err->message);
            ibx__copy(db->err->message, sizeof db->err->message, text);
            db->err->result = IBX_ERR_DB;
            db->fault = IBX__FAULT_PERMANENT;
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
            ibx__connstr_value(connstr, keys[k][0], value, sizeof value);
            if (!value[0] && k == 1) ibx__copy(value, sizeof value, "NORMAL");
            if (!value[0]) continue;
            if (strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != strlen(value))
                return ibx__fail(db->err, IBX_ERR_INVALID_ARG, "connection_string",
                                 "%s=%s is not a word" IBX__WHY(" (e.g. JournalMode=WAL;SyncPragma=NORMAL;)"),
                                 keys[k][0], value);
            snprintf(sql, sizeof sql, "PRAGMA %s = %s", keys[k][1], value);
            if ((rc = sqlite3_exec(h, sql, NULL, NULL, NULL)) != SQLITE_OK) return ibx__sq_fail(db, rc, keys[k][0]);
        }
    }
    return IBX_OK;
}

IBX__PRIVATE void ibx__db_disconnect(ibx__db *db) {
    ibx__db_free_statements(db);
    if (db->connected && db->dbc) {
        if (!sqlite3_get_autocommit((sqlite3 *)db->dbc))
            sqlite3_exec((sqlite3 *)db->dbc, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close_v2((sqlite3 *)db->dbc);
        db->dbc = NULL;
    }
    db->connected = 0;
    db->in_tx = 0;
}

IBX__PRIVATE ibx_result ibx__db_connect(ibx__db *db, const char *connstr) {
    ibx_result r;
    db->own_connection = 1;
    if (!db->connstr && !(db->connstr = ibx__strdup(db->hooks, connstr)))
        return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    if (ibx__sqlite_without_file(db->connstr)) /* as through ODBC: say so, open no temporary file */
        return ibx__fail(db->err, IBX_ERR_DB, "connection_string",
                         "the connection string names the SQLite driver and no Database= (nor a DSN)"
                         IBX__WHY(": give the file's path, or Database=:memory: for a database in memory"));
    r = ibx__driver_connect(db, db->connstr);
    return r == IBX_OK ? ibx__db_setup(db) : r;
}

/* A sqlite3 handle has no autocommit mode apart from its transaction: an
 * application's BEGIN is its own, and the store's units begin by SQL. */
IBX__PRIVATE ibx_result ibx__check_autocommit(ibx__db *db) {
    (void)db;
    return IBX_OK;
}

/* hdbc is the application's sqlite3 *: used, never closed, its settings
 * (busy timeout, extended codes) left as they are. */
IBX__PRIVATE ibx_result ibx__db_adopt(ibx__db *db, void *hdbc) {
    db->own_connection = 0;
    db->dbc = hdbc;
    db->connected = 1;
    return ibx__db_setup(db);
}

IBX__PRIVATE void ibx__db_close(ibx__db *db) {
    if (db->own_connection) ibx__db_disconnect(db);
    else ibx__db_free_statements(db);
    ibx__free(db->hooks, db->connstr);
    db->connstr = NULL;
    db->dbc = NULL;
    db->env = NULL;
    db->connected = 0;
}

IBX__PRIVATE int ibx__sq_bind(sqlite3_stmt *st, int k, const ibx__param *p) {
    if (p->ind == SQL_NULL_DATA) return sqlite3_bind_null(st, k);
    if (p->c_type == SQL_C_SBIGINT) return sqlite3_bind_int64(st, k, (sqlite3_int64)p->i64);
    if (p->c_type == SQL_C_BINARY)
        return sqlite3_bind_blob64(st, k, p->ptr, (sqlite3_uint64)p->ind, SQLITE_STATIC);
    return sqlite3_bind_text64(st, k, (const char *)p->ptr, (sqlite3_uint64)p->ind, SQLITE_STATIC, SQLITE_UTF8);
}

/* Run the statement of `slot`, prepared on first use and kept (the
 * interface: see ibx__exec). A row where none is read: the first column
 * is the count (as through ODBC). */
static ibx_result ibx__exec_once(ibx__db *db, int slot, const char *sql, ibx__param *ps, int n,
                                 int64_t *rows, SQLHSTMT *cursor) {
    sqlite3 *h = (sqlite3 *)db->dbc;
    ibx__sq_cur *c = (ibx__sq_cur *)db->stmt[slot];
    ibx_result r;
    int rc, i, markers;
#if IBX__CHECK_ARGS
    IBX_ASSERT(ibx__args_bound(db, slot, sql, ps, n));
#endif
    IBX_ASSERT(slot >= 0 && slot < IBX__MAX_STMTS);
    if (db->capture) { /* recorded for the caller's driver, as through ODBC */
        if (cursor) return ibx__fail(db->err, IBX_ERR_STATE, "ibx_sql", "statement %d reads", slot);
        if (rows) *rows = 0;
        return db->capture->add(db, sql, ps, n, 0, rows != NULL);
    }
    if (!c) {
        sqlite3_stmt *st = NULL;
        c = (ibx__sq_cur *)ibx__alloc(db->hooks, sizeof *c);
        if (!c) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "sqlite3_prepare_v3", "out of memory");
        rc = sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
        if (rc != SQLITE_OK) {
            ibx__free(db->hooks, c);
            return ibx__sq_fail(db, rc, "sqlite3_prepare_v3");
        }
        memset(c, 0, sizeof *c);
        c->st = st;
        db->stmt[slot] = c;
    }
    sqlite3_reset(c->st); /* a cursor left open by an earlier failure */
    c->state = IBX__SQ_IDLE;
    c->head = NULL;
    markers = sqlite3_bind_parameter_count(c->st);
    if (markers > n)
        return ibx__fail(db->err, IBX_ERR_STATE, "sqlite3_bind", "marker ?%d but only %d arguments", markers, n);
    for (i = 0; i < markers; i++)
        if ((rc = ibx__sq_bind(c->st, i + 1, &ps[i])) != SQLITE_OK) return ibx__sq_fail(db, rc, "sqlite3_bind");
    rc = sqlite3_step(c->st);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        if (cursor) {
            c->state = rc == SQLITE_ROW ? IBX__SQ_PENDING : IBX__SQ_DONE;
            *cursor = c;
            return IBX_OK;
        }
        if (rows && rc == SQLITE_ROW)
            *rows = sqlite3_column_type(c->st, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(c->st, 0);
        else if (rows)
            *rows = sqlite3_column_count(c->st) > 0 ? 0 : (int64_t)sqlite3_changes(h);
        if (rows && *rows < 0) *rows = 0;
        sqlite3_reset(c->st);
        return IBX_OK;
    }
    r = ibx__sq_fail(db, rc, "sqlite3_step");
    sqlite3_reset(c->st);
    return r;
}

/* The bound head's columns from the current row (ibx__bind_head). */
IBX__PRIVATE void ibx__sq_fill_head(ibx__sq_cur *c) {
    ibx__row_head *h = c->head;
    int i;
    for (i = 0; i < c->head_texts; i++) {
        const unsigned char *t = sqlite3_column_text(c->st, i);
        h->text_ind[i] = t ? (SQLLEN)sqlite3_column_bytes(c->st, i) : SQL_NULL_DATA;
        ibx__copy(h->text[i], sizeof h->text[i], t ? (const char *)t : "");
    }
    for (i = 0; i < c->head_ints; i++) {
        int null = sqlite3_column_type(c->st, c->head_texts + i) == SQLITE_NULL;
        h->ind[i] = null ? SQL_NULL_DATA : 0;
        h->v[i] = null ? 0 : (SQLBIGINT)sqlite3_column_int64(c->st, c->head_texts + i);
    }
}

IBX__PRIVATE ibx_result ibx__fetch(ibx__db *db, SQLHSTMT st) {
    ibx__sq_cur *c = (ibx__sq_cur *)st;
    if (c->state == IBX__SQ_PENDING) {
        c->state = IBX__SQ_ROW;
    } else if (c->state == IBX__SQ_ROW) {
        int rc = sqlite3_step(c->st);
        if (rc != SQLITE_ROW) {
            c->state = IBX__SQ_DONE;
            return rc == SQLITE_DONE ? IBX_EMPTY : ibx__sq_fail(db, rc, "sqlite3_step");
        }
    } else {
        return IBX_EMPTY;
    }
    if (c->head) ibx__sq_fill_head(c);
    return IBX_OK;
}

IBX__PRIVATE void ibx__close(SQLHSTMT st) {
    ibx__sq_cur *c = (ibx__sq_cur *)st;
    if (!c) return;
    sqlite3_reset(c->st); /* ends its read: a finished statement holds no snapshot */
    c->state = IBX__SQ_IDLE;
    c->head = NULL;
}

IBX__PRIVATE void ibx__unbind(SQLHSTMT st) {
    if (st) ((ibx__sq_cur *)st)->head = NULL;
}

IBX__PRIVATE ibx_result ibx__get_text(ibx__db *db, SQLHSTMT st, int col, char *out, size_t cap, SQLLEN *ind) {
    sqlite3_stmt *s = ((ibx__sq_cur *)st)->st;
    const unsigned char *t = sqlite3_column_text(s, col - 1);
    if (!t && sqlite3_errcode(sqlite3_db_handle(s)) == SQLITE_NOMEM)
        return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "sqlite3_column_text", "out of memory");
    *ind = t ? (SQLLEN)sqlite3_column_bytes(s, col - 1) : SQL_NULL_DATA;
    if (t) ibx__copy(out, cap, (const char *)t);
    return IBX_OK;
}

IBX__PRIVATE ibx_result ibx__get_i64(ibx__db *db, SQLHSTMT st, int col, int64_t *out, int *is_null) {
    sqlite3_stmt *s = ((ibx__sq_cur *)st)->st;
    int null = sqlite3_column_type(s, col - 1) == SQLITE_NULL;
    (void)db;
    if (is_null) *is_null = null;
    *out = null ? 0 : (int64_t)sqlite3_column_int64(s, col - 1);
    return IBX_OK;
}

IBX__PRIVATE ibx_result ibx__get_append(ibx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type,
                                        ibx__buf *buf, size_t *offset, size_t *out_len) {
    sqlite3_stmt *s = ((ibx__sq_cur *)st)->st;
    const void *v;
    size_t n;
    if (sqlite3_column_type(s, col - 1) == SQLITE_NULL) {
        *offset = (size_t)-1;
        if (out_len) *out_len = 0;
        return IBX_OK;
    }
    v = c_type == SQL_C_BINARY ? sqlite3_column_blob(s, col - 1) : (const void *)sqlite3_column_text(s, col - 1);
    n = (size_t)sqlite3_column_bytes(s, col - 1);
    if ((!v && n) || !ibx__buf_reserve(db->hooks, buf, n + 1))
        return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "sqlite3_column", "out of memory");
    if (n) memcpy(buf->data + buf->len, v, n);
    buf->data[buf->len + n] = '\0';
    *offset = buf->len;
    if (out_len) *out_len = n;
    buf->len += n + 1;
    return IBX_OK;
}

IBX__PRIVATE ibx_result ibx__bind_head(ibx__db *db, SQLHSTMT st, ibx__row_head *h, int texts, int ints) {
    ibx__sq_cur *c = (ibx__sq_cur *)st;
    (void)db;
    IBX_ASSERT(texts <= 2 && ints <= IBX__HEAD_INTS);
    c->head = h;
    c->head_texts = texts;
    c->head_ints = ints;
    if (c->state == IBX__SQ_ROW) ibx__sq_fill_head(c);
    return IBX_OK;
}

/* Text run once (DDL, settings) is compiled and run by sqlite3_exec; the
 * transaction control of every unit is prepared once per connection
 * (db->tx_stmt), as the statements are: compiling "COMMIT" cost as much as
 * running it. */
IBX__PRIVATE ibx_result ibx__exec_direct(ibx__db *db, const char *sql, const char *where) {
    sqlite3 *h = (sqlite3 *)db->dbc;
    sqlite3_stmt **st = strcmp(sql, "COMMIT") == 0                     ? &db->tx_stmt[1]
                      : strcmp(sql, "ROLLBACK") == 0                   ? &db->tx_stmt[2]
                      : strcmp(sql, "BEGIN") == 0                      ? &db->tx_stmt[3] /* ibx__begin_handler */
                      : db->d && db->d->begin_sql && strcmp(sql, db->d->begin_sql) == 0 ? &db->tx_stmt[0]
                                                                       : NULL;
    ibx_result r = IBX_OK;
    int rc;
    if (!st) {
        rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? IBX_OK : ibx__sq_fail(db, rc, where);
    }
    if (!*st && (rc = sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL)) != SQLITE_OK)
        return ibx__sq_fail(db, rc, where);
    rc = sqlite3_step(*st);
    if (rc != SQLITE_DONE) r = ibx__sq_fail(db, rc, where); /* before the reset: its message */
    sqlite3_reset(*st);
    return r;
}

IBX__PRIVATE ibx_result ibx__query_text(ibx__db *db, const char *sql, char *out, size_t cap) {
    sqlite3_stmt *st = NULL;
    ibx_result r = IBX_OK;
    int rc = sqlite3_prepare_v2((sqlite3 *)db->dbc, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        ibx__copy(out, cap, t ? (const char *)t : "");
    } else if (rc == SQLITE_DONE) {
        r = ibx__fail(db->err, IBX_ERR_NOT_FOUND, sql, "query returned no row");
    } else {
        r = ibx__sq_fail(db, rc, "sqlite3_step");
    }
    sqlite3_finalize(st);
    return r;
}

/* The ODBC commit and rollback of a connection outside a transaction are
 * no-ops; so are these. */
IBX__PRIVATE ibx_result ibx__end_tran(ibx__db *db, SQLSMALLINT completion, const char *where) {
    if (sqlite3_get_autocommit((sqlite3 *)db->dbc)) return IBX_OK;
    return ibx__exec_direct(db, completion == SQL_COMMIT ? "COMMIT" : "ROLLBACK", where);
}

IBX__PRIVATE ibx_result ibx__autocommit_off(ibx__db *db) {
    db->autocommit_on = 0; /* never on: every unit here is tx_by_sql */
    return IBX_OK;
}
#endif /* IBX_SQLITE3_API */

/* >> priority: the claim's order (both headers) --------------------------------------- */

/* A due message's rank is its NextAttemptAt less Priority x
 * IBX_PRIORITY_AGING_MS; a claim takes the smallest rank first: the higher
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
#define IBX__PRIORITY_AGING_S "10"   /* IBX_PRIORITY_AGING_MS in seconds */
#define IBX__PRIORITY_HORIZON_S "50" /* -IBX_PRIORITY_MIN levels of aging */
#define IBX__SQLITE_RANK_OF(next, c) next " - " c "Priority * " IBX__PRIORITY_AGING_S "000"
#define IBX__SQLITE_RANK(c) IBX__SQLITE_RANK_OF(c "NextAttemptAt", c)
#define IBX__SQLITE_CLAIM_ORDER(c)                                                                \
    "AND " IBX__SQLITE_RANK(c) " <= {W} + " IBX__PRIORITY_HORIZON_S "000 ORDER BY " IBX__SQLITE_RANK(c)
/* PostgreSQL: timestamptz less an interval is not immutable (a day's
 * length depends on the zone): the rank is UTC wall time, which is. */
#define IBX__PG_RANK_OF(next, c)                                                                  \
    "((" next " AT TIME ZONE 'UTC') - " c "\"Priority\" * interval '" IBX__PRIORITY_AGING_S " seconds')"
#define IBX__PG_RANK(c) IBX__PG_RANK_OF(c "\"NextAttemptAt\"", c)
#define IBX__PG_CLAIM_ORDER(c)                                                                    \
    "AND " IBX__PG_RANK(c) " <= (now() AT TIME ZONE 'UTC') + interval '" IBX__PRIORITY_HORIZON_S " seconds' "  \
    "ORDER BY " IBX__PG_RANK(c)
/* MariaDB (storage layout 2): the VIRTUAL column ReadyRank, the rank of a
 * claimable row and NULL for every other, so that one index of it alone is
 * both the ready index and the claim's order, and a claim moves its entry
 * and the leased index's only (layout 1's indexes all led with Status:
 * each claim and ack moved four). Parked rows keep their time: the last
 * day of 9999 less an interval would overflow. `ready` is the dialect's
 * claimable-row test. VIRTUAL: added to an existing table instantly, its
 * index built online (PERSISTENT would copy the table); a new table makes
 * it PERSISTENT (ibx__ddl_text). */
#define IBX__MY_READY_RANK(ready)                                                                 \
    "DATETIME(6) AS (IF(" ready ", IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - "   \
    "INTERVAL (`Priority` * " IBX__PRIORITY_AGING_S ") SECOND), NULL)) VIRTUAL"
#define IBX__MY_CLAIM_ORDER(c)                                                                    \
    "AND " c "`ReadyRank` <= UTC_TIMESTAMP(6) + INTERVAL " IBX__PRIORITY_HORIZON_S " SECOND ORDER BY " c "`ReadyRank`"
/* Layout 2's state indexes (both headers' MariaDB DDL; NextAttemptAt
 * beside the rank: the claim tests it without the row), built online on an
 * existing table; and ibx_store_upgrade's step dropping one of layout 1's. */
#define IBX__MY_STATE_INDEXES                                                                     \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_ReadyRank` ON {T} (`ReadyRank`, `NextAttemptAt`) ALGORITHM=INPLACE LOCK=NONE", \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_LeasedUntil` ON {T} (`LeasedUntil`) ALGORITHM=INPLACE LOCK=NONE",           \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_DoneAt` ON {T} (`DoneAt`) ALGORITHM=INPLACE LOCK=NONE",                     \
    "CREATE INDEX IF NOT EXISTS `IX_{N}_DeadAt` ON {T} (`DeadAt`) ALGORITHM=INPLACE LOCK=NONE"
/* The cleanup of Done rows and the count of pending ones (Ready or leased),
 * through the state columns' indexes. */
#define IBX__MY_CLEANUP                                                                           \
    "DELETE FROM {T} WHERE `DoneAt` < UTC_TIMESTAMP(6) - INTERVAL ? * 1000 MICROSECOND ORDER BY `DoneAt` LIMIT ?"
#define IBX__MY_PENDING                                                                           \
    "SELECT (SELECT COUNT(*) FROM {T} WHERE `ReadyRank` IS NOT NULL) + "                          \
    "(SELECT COUNT(*) FROM {T} WHERE `LeasedUntil` IS NOT NULL)"
#define IBX__MY_NO_INDEX(ix)                                                                      \
    "SELECT COUNT(*) = 0 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND " \
    "TABLE_NAME = '{N}' AND INDEX_NAME = 'IX_{N}_" ix "'", "DROP INDEX IF EXISTS `IX_{N}_" ix "` ON {T}", IBX_UPGRADE_DROP_OLD

/* A full row's Priority column; SQL Server's rows have none (it stores the
 * column but claims by due time alone): 0 there. */
IBX__PRIVATE ibx_result ibx__get_priority(ibx__db *db, SQLHSTMT st, int col, int *out) {
    int64_t v = 0;
    ibx_result r;
    if (IBX__ONE(db->d)->id == IBX_DIALECT_SQLSERVER) return IBX_OK;
    r = ibx__get_i64(db, st, col, &v, NULL);
    if (r == IBX_OK) *out = (int)v;
    return r;
}

/* >> registry of many databases ---------------------------------------------------- */

/* One database's store and its housekeeping schedule. */
typedef struct ibx__entry {
    char *id;
    char *connstr;
    void *store;                 /* NULL: listed but not open (down) */
    int64_t next_reap_ms;        /* monotonic; 0 = at once */
    int64_t next_cleanup_ms;
    int64_t next_wake_ms;        /* monotonic: a short claim's wake of every key (ibx__wake_missed) */
    int64_t retry_ms;            /* down: the next attempt to open it (monotonic) */
    int seen;                    /* in the latest discovery result: 1 kept, 2 new */
    int failures;                /* dispatch rounds failed in a row (for the log) */
    int open_failures;           /* down: attempts to open it failed in a row */
} ibx__entry;

#ifndef IBX_NO_MULTI_STORE
/* An id and its entry: items[at] when at >= 0, down[-1 - at] when below. */
typedef struct ibx__slot {
    const char *id;
    int at;
} ibx__slot;

/* One attempt to open a down database, run off the dispatching thread: a
 * connect may last a login timeout (a frozen server), under the
 * process-wide connect lock, and the open stores are served meanwhile.
 * The dispatching thread starts it and takes its result; the opening
 * thread touches only this struct (under `lock`) and the provider's
 * template, which nobody changes after create. */
typedef struct ibx__opening {
    char *id, *connstr;          /* copies: discovery may drop the entry meanwhile */
    void *store;                 /* the result: NULL when it failed (logged by open) */
    int busy;                    /* an attempt is out (dispatching thread only) */
    int done;                    /* its result is ready (under lock) */
    void *(*open)(void *ctx, const char *id, const char *connstr);
    void *ctx;
#ifndef IBX_NO_THREADS
    int threaded;                /* started on a thread of its own: join it */
    ibx__thread_t thread;
    ibx__mutex_t lock;
#endif
} ibx__opening;

/* The stores of a provider, opened and closed through callbacks so that
 * both headers share the bookkeeping. Used by one thread at a time (the
 * provider's), but for `opening`. */
typedef struct ibx__registry {
    const ibx__hooks *hooks;
    ibx__entry *items;           /* the open stores, in discovery order */
    int count, cap;
    ibx__entry *down;            /* listed, not open: each tried again on its own backoff */
    int down_count, down_cap;
    int64_t retry_due_ms;        /* no down entry is due before this (0: look) */
    int64_t retry_max_ms;        /* the longest wait between two attempts to open */
    ibx__slot *index;            /* items by id, sorted: lookups in O(log n) */
    int indexed, index_cap;      /* slots in it (below count only when out of memory) */
    ibx__opening opening;
    void *(*open)(void *ctx, const char *id, const char *connstr); /* NULL on failure (logged) */
    void (*close)(void *ctx, void *store);
    void *ctx;
    const char *name;            /* for log lines */
} ibx__registry;

static int ibx__slot_cmp(const void *a, const void *b) {
    return strcmp(((const ibx__slot *)a)->id, ((const ibx__slot *)b)->id);
}

/* The slot of `id` in slots sorted by id, or -1. */
IBX__PRIVATE int ibx__slot_find(const ibx__slot *s, int n, const char *id) {
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
IBX__PRIVATE int ibx__registry_find(const ibx__registry *r, const char *id) {
    int k = ibx__slot_find(r->index, r->indexed, id);
    return k < 0 ? -1 : r->index[k].at;
}

/* Room for `n` entries in *items (capacity *cap). 0: out of memory. */
IBX__PRIVATE int ibx__entries_reserve(const ibx__hooks *h, ibx__entry **items, int *cap, int n) {
    ibx__entry *grown;
    int want = *cap ? *cap : 8;
    if (n <= *cap) return 1;
    while (want < n) want = want > INT_MAX / 2 ? n : want * 2;
    grown = (ibx__entry *)ibx__realloc(h, *items, sizeof *grown * (size_t)want);
    if (!grown) return 0;
    *items = grown;
    *cap = want;
    return 1;
}

/* Sort the index of the open stores again after items changed. 0: out of
 * memory (then lookups find nothing until the next rebuild). */
IBX__PRIVATE int ibx__registry_reindex(ibx__registry *r) {
    int i;
    r->indexed = 0;
    if (r->count > r->index_cap) {
        ibx__slot *grown = (ibx__slot *)ibx__realloc(r->hooks, r->index, sizeof *grown * (size_t)r->cap);
        if (!grown) return 0;
        r->index = grown;
        r->index_cap = r->cap;
    }
    r->indexed = r->count;
    for (i = 0; i < r->count; i++) {
        r->index[i].id = r->items[i].id;
        r->index[i].at = i;
    }
    if (r->count > 1) qsort(r->index, (size_t)r->count, sizeof *r->index, ibx__slot_cmp);
    return 1;
}

IBX__PRIVATE void ibx__entry_free(ibx__registry *r, ibx__entry *e) {
    if (e->store) r->close(r->ctx, e->store);
    ibx__free(r->hooks, e->id);
    ibx__free(r->hooks, e->connstr);
    memset(e, 0, sizeof *e);
}

/* A database that could not be opened waits 1 s, then twice as long after
 * each failure, up to retry_max_ms, before it is tried again. */
IBX__PRIVATE void ibx__registry_failed(ibx__registry *r, ibx__entry *e) {
    int64_t wait = e->open_failures < 30 ? (int64_t)1000 << e->open_failures : INT64_MAX;
    e->open_failures++;
    if (wait > r->retry_max_ms) wait = r->retry_max_ms;
    e->retry_ms = ibx__mono_ms(r->hooks);
    e->retry_ms = e->retry_ms > INT64_MAX - wait ? INT64_MAX : e->retry_ms + wait;
    if (r->retry_due_ms > e->retry_ms) r->retry_due_ms = e->retry_ms;
    ibx__log(r->hooks, e->open_failures == 1 ? IBX_LOG_WARN : IBX_LOG_DEBUG, e->id,
             "%s: could not be opened (%d time(s) in a row); trying again in %lld ms", r->name,
             e->open_failures, (long long)wait);
}

/* A database list is usable: every id and connection string given, ids
 * unique (found by sorting: a list may hold IBX_DISCOVER_MAX). Returns 1,
 * 0 (not usable) or -1 (out of memory). */
IBX__PRIVATE int ibx__registry_valid(const ibx__hooks *h, const ibx_database *dbs, int n) {
    ibx__slot *s;
    int i, ok = 1;
    for (i = 0; i < n; i++)
        if (!dbs[i].id || !dbs[i].id[0] || !dbs[i].connection_string || !dbs[i].connection_string[0])
            return 0;
    if (n < 2) return 1;
    s = (ibx__slot *)ibx__alloc(h, sizeof *s * (size_t)n);
    if (!s) return -1;
    for (i = 0; i < n; i++) {
        s[i].id = dbs[i].id;
        s[i].at = i;
    }
    qsort(s, (size_t)n, sizeof *s, ibx__slot_cmp);
    for (i = 1; i < n && ok; i++) ok = strcmp(s[i - 1].id, s[i].id) != 0;
    ibx__free(h, s);
    return ok;
}

/* The entry for one listed database, found at `at` (a slot's; INT_MIN:
 * new): kept when unchanged (a down one waits for its next attempt),
 * opened again when its connection string changed, else appended (seen =
 * 2) and opened. 0: out of memory. */
IBX__PRIVATE int ibx__registry_entry(ibx__registry *r, const ibx_database *db, int at) {
    ibx__entry *e = at == INT_MIN ? NULL : at >= 0 ? &r->items[at] : &r->down[-1 - at];
    if (e && strcmp(e->connstr, db->connection_string) == 0) {
        e->seen = 1; /* unchanged: keep the open store, or the down one's schedule */
        return 1;
    }
    if (e) { /* moved: reopen */
        ibx__log(r->hooks, IBX_LOG_INFO, db->id, "%s: connection string changed, reopening", r->name);
        if (e->store) r->close(r->ctx, e->store);
        e->store = NULL;
        e->seen = 1;
        e->open_failures = 0;
    } else {
        if (!ibx__entries_reserve(r->hooks, &r->items, &r->cap, r->count + 1)) return 0;
        e = &r->items[r->count];
        memset(e, 0, sizeof *e);
        e->id = ibx__strdup(r->hooks, db->id);
        if (!e->id) return 0;
        r->count++;
        e->seen = 2;
    }
    ibx__free(r->hooks, e->connstr);
    e->connstr = ibx__strdup(r->hooks, db->connection_string);
    if (!e->connstr) return 0;
    e->store = r->open(r->ctx, db->id, db->connection_string);
    e->next_reap_ms = e->next_cleanup_ms = 0;
    if (!e->store) ibx__registry_failed(r, e);
    return 1;
}

/* Find each listed database among those known (open or down: `known`
 * has room for them all, and is freed) and update or add its entry
 * (ibx__registry_entry); marks every listed one seen. */
IBX__PRIVATE ibx_result ibx__registry_match(ibx__registry *r, const ibx_database *dbs, int n,
                                            ibx__slot *known) {
    ibx_result res = IBX_OK;
    int i, k, nk = r->count + r->down_count;
    for (i = 0; i < nk; i++) {
        ibx__entry *e = i < r->count ? &r->items[i] : &r->down[i - r->count];
        known[i].id = e->id;
        known[i].at = i < r->count ? i : -1 - (i - r->count);
        e->seen = 0;
    }
    qsort(known, (size_t)nk, sizeof *known, ibx__slot_cmp);
    for (i = 0; i < n && res == IBX_OK; i++) {
        k = ibx__slot_find(known, nk, dbs[i].id);
        if (!ibx__registry_entry(r, &dbs[i], k < 0 ? INT_MIN : known[k].at)) res = IBX_ERR_NO_MEMORY;
    }
    ibx__free(r->hooks, known);
    if (res != IBX_OK) /* out of memory part way: keep what is listed so far, drop nothing */
        for (i = 0; i < r->count + r->down_count; i++) {
            ibx__entry *e = i < r->count ? &r->items[i] : &r->down[i - r->count];
            if (!e->seen) e->seen = 1;
        }
    return res;
}

/* After matching: close what is no longer listed, move what did not open
 * to down and what opened to items. Room is reserved first, so that no
 * entry is lost between the two lists. */
IBX__PRIVATE ibx_result ibx__registry_sort_out(ibx__registry *r, int *add, int *drop) {
    ibx_result res = IBX_OK;
    int i, j;
    if (!ibx__entries_reserve(r->hooks, &r->down, &r->down_cap, r->down_count + r->count) ||
        !ibx__entries_reserve(r->hooks, &r->items, &r->cap, r->count + r->down_count))
        res = IBX_ERR_NO_MEMORY;
    for (i = j = 0; i < r->count; i++) {
        ibx__entry *e = &r->items[i];
        if (!e->seen) {
            ibx__log(r->hooks, IBX_LOG_INFO, e->id, "%s: removed by discovery, closing", r->name);
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
        ibx__entry_free(r, e);
    }
    r->count = j;
    for (i = j = 0; i < r->down_count; i++) {
        ibx__entry *e = &r->down[i];
        if (!e->seen) {
            ibx__log(r->hooks, IBX_LOG_INFO, e->id, "%s: removed by discovery", r->name);
            (*drop)++;
            ibx__entry_free(r, e);
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
 * by ibx__registry_retry, not at each refresh. *added counts new databases
 * now open, *removed those no longer listed. Returns IBX_OK,
 * IBX_ERR_INVALID_ARG (a NULL or empty id or connection string, a
 * duplicate id: nothing changed) or IBX_ERR_NO_MEMORY. */
IBX__PRIVATE ibx_result ibx__registry_apply(ibx__registry *r, const ibx_database *dbs, int n,
                                            int *added, int *removed) {
    int add = 0, drop = 0, valid = ibx__registry_valid(r->hooks, dbs, n);
    ibx__slot *known;
    ibx_result res, sorted;
    if (valid <= 0) return valid < 0 ? IBX_ERR_NO_MEMORY : IBX_ERR_INVALID_ARG;
    known = (ibx__slot *)ibx__alloc(r->hooks, sizeof *known * (size_t)(r->count + r->down_count + 1));
    if (!known) return IBX_ERR_NO_MEMORY; /* nothing changed */
    res = ibx__registry_match(r, dbs, n, known);
    sorted = ibx__registry_sort_out(r, &add, &drop);
    if (!ibx__registry_reindex(r)) sorted = IBX_ERR_NO_MEMORY;
    if (added) *added = add;
    if (removed) *removed = drop;
    return res != IBX_OK ? res : sorted;
}

#ifndef IBX_NO_THREADS
static void *ibx__opening_main(void *arg) {
    ibx__opening *o = (ibx__opening *)arg;
    void *store = o->open(o->ctx, o->id, o->connstr);
    ibx__mutex_lock(&o->lock);
    o->store = store;
    o->done = 1;
    ibx__mutex_unlock(&o->lock);
    return NULL;
}
#endif

/* The attempt is over: its store goes to the entry it was for, if that is
 * still down with the same connection string, else it is closed. */
IBX__PRIVATE void ibx__registry_take(ibx__registry *r) {
    ibx__opening *o = &r->opening;
    int i;
#ifndef IBX_NO_THREADS
    if (o->threaded) ibx__thread_join(&o->thread);
    o->threaded = 0;
#endif
    for (i = 0; i < r->down_count; i++)
        if (strcmp(r->down[i].id, o->id) == 0 && strcmp(r->down[i].connstr, o->connstr) == 0) break;
    if (i < r->down_count && o->store && ibx__entries_reserve(r->hooks, &r->items, &r->cap, r->count + 1)) {
        ibx__entry *e = &r->items[r->count++];
        *e = r->down[i];
        e->store = o->store;
        e->next_reap_ms = e->next_cleanup_ms = 0;
        ibx__log(r->hooks, IBX_LOG_INFO, e->id, "%s: opened after %d failed attempt(s)", r->name,
                 e->open_failures);
        e->open_failures = e->failures = 0;
        r->down[i] = r->down[--r->down_count];
        if (!ibx__registry_reindex(r))
            ibx__log(r->hooks, IBX_LOG_ERROR, e->id, "%s: out of memory for the routing index", r->name);
    } else {
        if (o->store) r->close(r->ctx, o->store);
        if (i < r->down_count) ibx__registry_failed(r, &r->down[i]);
    }
    ibx__free(r->hooks, o->id);
    ibx__free(r->hooks, o->connstr);
    o->id = o->connstr = NULL;
    o->store = NULL;
    o->busy = o->done = 0;
}

/* Take the result of the attempt that is out when it is over, then start
 * one for the down database whose wait is over first. Never waits for a
 * connect: with threads the attempt runs on a thread of its own (one at a
 * time: so at most one connect of this provider holds the process-wide
 * connect lock); without, it runs here. */
IBX__PRIVATE void ibx__registry_retry(ibx__registry *r) {
    ibx__opening *o = &r->opening;
    int64_t now, next = INT64_MAX;
    int i, due = -1;
    if (o->busy) {
        int done = 1;
#ifndef IBX_NO_THREADS
        ibx__mutex_lock(&o->lock);
        done = o->done;
        ibx__mutex_unlock(&o->lock);
#endif
        if (!done) return;
        ibx__registry_take(r);
    }
    if (r->down_count == 0) return;
    now = ibx__mono_ms(r->hooks);
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
    o->id = ibx__strdup(r->hooks, r->down[due].id);
    o->connstr = ibx__strdup(r->hooks, r->down[due].connstr);
    o->open = r->open;
    o->ctx = r->ctx;
    o->store = NULL;
    o->done = 0;
    o->busy = 1;
    if (!o->id || !o->connstr) { /* counted as a failed attempt */
        ibx__free(r->hooks, o->id);
        ibx__free(r->hooks, o->connstr);
        o->id = o->connstr = NULL;
        o->busy = 0;
        ibx__registry_failed(r, &r->down[due]);
        return;
    }
    r->down[due].retry_ms = INT64_MAX; /* out: not started twice */
#ifndef IBX_NO_THREADS
    o->threaded = ibx__thread_create(&o->thread, ibx__opening_main, o) == 0;
    if (o->threaded) return;
#endif
    o->store = r->open(r->ctx, o->id, o->connstr);
    ibx__registry_take(r);
}

IBX__PRIVATE void ibx__registry_init(ibx__registry *r) {
#ifndef IBX_NO_THREADS
    ibx__mutex_init(&r->opening.lock);
#else
    (void)r;
#endif
}

/* Close every store; an attempt that is out is waited for (at most a login
 * timeout) and its store closed. */
IBX__PRIVATE void ibx__registry_free(ibx__registry *r) {
    int i;
    for (i = 0; i < r->down_count; i++) ibx__entry_free(r, &r->down[i]);
    r->down_count = 0; /* so an attempt that is out closes its store */
    if (r->opening.busy) ibx__registry_take(r);
#ifndef IBX_NO_THREADS
    ibx__mutex_destroy(&r->opening.lock);
#endif
    for (i = 0; i < r->count; i++) ibx__entry_free(r, &r->items[i]);
    ibx__free(r->hooks, r->items);
    ibx__free(r->hooks, r->down);
    ibx__free(r->hooks, r->index);
    r->items = r->down = NULL;
    r->index = NULL;
    r->count = r->cap = r->down_count = r->down_cap = r->indexed = r->index_cap = 0;
}
#endif /* IBX_NO_MULTI_STORE */

/* >> dispatch loop: routes, waiting, waking ---------------------------------------- */

/* Handlers by topic. Stored as a generic function pointer; each header
 * casts back to its own handler type. */
typedef void (*ibx__any_fn)(void);
typedef struct ibx__route {
    char *topic;                 /* "*" matches every topic */
    ibx__any_fn fn;
    void *user;
    int batch;                   /* IBX__ROUTE_BATCH: a batch handler (takes all of a claim's
                                    messages of a topic); IBX__ROUTE_TX, _BATCH_TX: transactional */
} ibx__route;

enum { IBX__ROUTE_ONE = 0, IBX__ROUTE_BATCH = 1, IBX__ROUTE_TX = 2, IBX__ROUTE_BATCH_TX = 3 };

typedef struct ibx__routes {
    ibx__route *items;
    int count, cap;
    int batches;                 /* how many are batch routes, transactional or not (0: the
                                    per-message path only) */
    int txs;                     /* how many are transactional routes */
} ibx__routes;

IBX__PRIVATE ibx_result ibx__routes_add(const ibx__hooks *h, ibx__routes *r, const char *topic,
                                        ibx__any_fn fn, void *user, int batch) {
    if (r->count == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        ibx__route *grown = (ibx__route *)ibx__realloc(h, r->items, sizeof *grown * (size_t)cap);
        if (!grown) return IBX_ERR_NO_MEMORY;
        r->items = grown;
        r->cap = cap;
    }
    r->items[r->count].topic = ibx__strdup(h, topic);
    if (!r->items[r->count].topic) return IBX_ERR_NO_MEMORY;
    r->items[r->count].fn = fn;
    r->items[r->count].user = user;
    r->items[r->count].batch = batch;
    r->batches += batch == IBX__ROUTE_BATCH || batch == IBX__ROUTE_BATCH_TX;
    r->txs += batch == IBX__ROUTE_TX;
    r->count++;
    return IBX_OK;
}

IBX__PRIVATE void ibx__routes_free(const ibx__hooks *h, ibx__routes *r) {
    int i;
    for (i = 0; i < r->count; i++) ibx__free(h, r->items[i].topic);
    ibx__free(h, r->items);
    r->items = NULL;
    r->count = r->cap = r->batches = r->txs = 0;
}

/* The next per-message route for `topic`: exact matches in registration
 * order, then the "*" ones. Start with *cursor = 0; NULL at the end. */
IBX__PRIVATE const ibx__route *ibx__routes_next(const ibx__routes *r, const char *topic,
                                                int *cursor) {
    while (*cursor < 2 * r->count) {
        int pass = *cursor / r->count, i = *cursor % r->count;
        const ibx__route *route = &r->items[i];
        int wildcard = route->topic[0] == '*' && route->topic[1] == '\0';
        (*cursor)++;
        if (route->batch) continue;
        if (pass == 0 ? (!wildcard && strcmp(route->topic, topic) == 0) : wildcard) return route;
    }
    return NULL;
}

/* The first route registered for exactly `topic` ("*" only for "*") of the
 * given kind (IBX__ROUTE_*), or NULL. */
IBX__PRIVATE const ibx__route *ibx__routes_find(const ibx__routes *r, const char *topic, int batch) {
    int i;
    for (i = 0; i < r->count; i++)
        if (r->items[i].batch == batch && strcmp(r->items[i].topic, topic) == 0) return &r->items[i];
    return NULL;
}

/* The batch route (transactional or not) for a message of `topic`: its
 * own, else the "*" one when the topic has no per-message handler at all;
 * NULL: per message. */
IBX__PRIVATE const ibx__route *ibx__routes_batch(const ibx__routes *r, const char *topic) {
    const ibx__route *b;
    int cursor = 0;
    if (!r->batches) return NULL;
    if ((b = ibx__routes_find(r, topic, IBX__ROUTE_BATCH)) != NULL) return b;
    if ((b = ibx__routes_find(r, topic, IBX__ROUTE_BATCH_TX)) != NULL) return b;
    if (r->txs && ibx__routes_find(r, topic, IBX__ROUTE_TX)) return NULL;
    if (ibx__routes_next(r, topic, &cursor)) return NULL;
    if ((b = ibx__routes_find(r, "*", IBX__ROUTE_BATCH)) != NULL) return b;
    return ibx__routes_find(r, "*", IBX__ROUTE_BATCH_TX);
}

/* The transactional route for a message of `topic`: its own, else the "*"
 * one when the topic has no handler of its own of another kind. */
IBX__PRIVATE const ibx__route *ibx__routes_tx(const ibx__routes *r, const char *topic) {
    const ibx__route *t;
    if (!r->txs) return NULL;
    if ((t = ibx__routes_find(r, topic, IBX__ROUTE_TX)) != NULL) return t;
    if (ibx__routes_find(r, topic, IBX__ROUTE_ONE) || ibx__routes_find(r, topic, IBX__ROUTE_BATCH) ||
        ibx__routes_find(r, topic, IBX__ROUTE_BATCH_TX))
        return NULL;
    return ibx__routes_find(r, "*", IBX__ROUTE_TX);
}

/* Waiting between rounds, interruptible by wake and stop. Without threads
 * or without a POSIX monotonic clock it sleeps in 50 ms slices instead. */
#if defined(IBX_NO_THREADS) || defined(IBX_NO_POSIX_CLOCK)
#define IBX__LOOP_SLICED 1
#endif
typedef struct ibx__loop {
    const ibx__hooks *hooks;
    volatile int stopping;
    volatile sig_atomic_t *stop_flag; /* the caller's, e.g. set by a signal handler */
    int use_hook_sleep;          /* a custom clock: sleep through it, not a condition variable */
#ifndef IBX__LOOP_SLICED
    ibx__mutex_t mutex;
    ibx__cond_t cond;
    int woken;
#endif
} ibx__loop;

IBX__PRIVATE void ibx__loop_init(ibx__loop *l, const ibx__hooks *h,
                                 volatile sig_atomic_t *stop_flag) {
    l->hooks = h;
    l->stopping = 0;
    l->stop_flag = stop_flag;
    l->use_hook_sleep = h->clock.sleep_ms != ibx__default_sleep_ms;
#ifndef IBX__LOOP_SLICED
    ibx__mutex_init(&l->mutex);
    ibx__cond_init(&l->cond);
    l->woken = 0;
#endif
}

IBX__PRIVATE void ibx__loop_destroy(ibx__loop *l) {
#ifndef IBX__LOOP_SLICED
    ibx__mutex_destroy(&l->mutex);
    ibx__cond_destroy(&l->cond);
#else
    (void)l;
#endif
}

IBX__PRIVATE int ibx__loop_stopped(ibx__loop *l) {
    int stopping;
#ifndef IBX__LOOP_SLICED
    ibx__mutex_lock(&l->mutex);
    stopping = l->stopping;
    ibx__mutex_unlock(&l->mutex);
#else
    stopping = l->stopping;
#endif
    return stopping || (l->stop_flag && *l->stop_flag);
}

/* Wait up to `ms`, returning early on wake or stop; nonzero when woken. */
IBX__PRIVATE int ibx__loop_wait(ibx__loop *l, int64_t ms) {
#ifndef IBX__LOOP_SLICED
    if (!l->use_hook_sleep) {
        int woken = 0;
        /* In slices of at most 250 ms: a signal handler's stop_flag does
         * not signal the condition, so it is looked at between slices. */
        while (ms > 0 && !woken) {
            int64_t slice = l->stop_flag && ms > 250 ? 250 : ms;
            ibx__deadline deadline;
            if (slice > IBX__WAIT_SLICE_MAX_MS) slice = IBX__WAIT_SLICE_MAX_MS; /* 32-bit time_t */
            ibx__cond_deadline(&deadline, slice);
            ibx__mutex_lock(&l->mutex);
            while (!l->woken && !l->stopping)
                if (ibx__cond_timedwait(&l->cond, &l->mutex, &deadline) != 0) break;
            woken = l->woken;
            l->woken = 0;
            if (l->stopping) ms = 0;
            ibx__mutex_unlock(&l->mutex);
            if (l->stop_flag && *l->stop_flag) ms = 0;
            ms -= slice;
        }
        return woken;
    }
#endif
    while (ms > 0 && !ibx__loop_stopped(l)) {
        int64_t slice = ms < 50 ? ms : 50;
        ibx__sleep_ms(l->hooks, slice);
        ms -= slice;
    }
    return 0;
}

IBX__PRIVATE void ibx__loop_wake(ibx__loop *l) {
#ifndef IBX__LOOP_SLICED
    ibx__mutex_lock(&l->mutex);
    l->woken = 1;
    ibx__cond_signal(&l->cond);
    ibx__mutex_unlock(&l->mutex);
#else
    (void)l;
#endif
}

IBX__PRIVATE void ibx__loop_stop(ibx__loop *l) {
#ifndef IBX__LOOP_SLICED
    ibx__mutex_lock(&l->mutex);
    l->stopping = 1;
    ibx__cond_broadcast(&l->cond);
    ibx__mutex_unlock(&l->mutex);
#else
    l->stopping = 1;
#endif
}

/* >> cross-process wake-up: a Unix datagram socket ---------------------------------- */

/* A producer in another process tells a waiting dispatcher that work was
 * committed by sending one byte to the dispatcher's socket path; the
 * database stays the only source of truth (a lost byte costs one poll).
 * POSIX; IBX_NO_WAKE_SOCKET leaves it out, and so does Windows. */
#if !defined(IBX_NO_WAKE_SOCKET) && !defined(_WIN32)
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#define IBX__WAKE_SOCKET 1
#define IBX__WAKE_PATH_MAX ((int)sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
#else
#define IBX__WAKE_SOCKET 0
#define IBX__WAKE_PATH_MAX 107
#endif

/* A wake_path as given in a desc: none, or a path a socket can have. */
IBX__PRIVATE ibx_result ibx__wake_path_check(ibx_error *err, const char *where, const char *path) {
    if (!path) return IBX_OK;
    if (!IBX__WAKE_SOCKET)
#ifdef _WIN32
        return ibx__fail(err, IBX_ERR_UNSUPPORTED, where,
                         "no wake socket on Windows (Unix datagram sockets); leave wake_path NULL: "
                         "the dispatcher polls");
#else
        return ibx__fail(err, IBX_ERR_UNSUPPORTED, where, "built with IBX_NO_WAKE_SOCKET");
#endif
    if (!path[0] || strlen(path) > (size_t)IBX__WAKE_PATH_MAX)
        return ibx__fail(err, IBX_ERR_INVALID_ARG, where,
                         "a socket path of 1..%d bytes, got %lu", IBX__WAKE_PATH_MAX,
                         (unsigned long)strlen(path));
    return IBX_OK;
}

#if IBX__WAKE_SOCKET
IBX__PRIVATE void ibx__wake_addr(const char *path, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path, path, strlen(path) + 1); /* length checked by ibx__wake_path_check */
}

/* A datagram socket that never blocks and is not inherited by exec. */
IBX__PRIVATE int ibx__wake_socket(void) {
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
IBX__PRIVATE void ibx__wake_send(int *fd, const char *path) {
    struct sockaddr_un a;
    if (!path) return;
    if (*fd < 0) *fd = ibx__wake_socket();
    if (*fd < 0) return;
    ibx__wake_addr(path, &a);
    (void)sendto(*fd, "w", 1, 0, (const struct sockaddr *)&a, (socklen_t)sizeof a);
}

/* 1 when `a` names a socket file nobody listens on (connect says
 * ECONNREFUSED), its device and inode in *st; 0 for anything else: a live
 * socket, a regular file, a socket this process may not write to. */
IBX__PRIVATE int ibx__wake_stale(const struct sockaddr_un *a, struct stat *st) {
    int probe, refused;
    if (lstat(a->sun_path, st) != 0 || !S_ISSOCK(st->st_mode) || (probe = ibx__wake_socket()) < 0) return 0;
    refused = connect(probe, (const struct sockaddr *)a, (socklen_t)sizeof *a) != 0 && errno == ECONNREFUSED;
    close(probe);
    return refused;
}

/* Replace a stale socket file at `a` and bind `fd` there. Dispatchers take
 * over only holding an flock on the path's directory and remove only the
 * inode they saw refuse a connect; a live socket accepts connects until its
 * owner, after unlinking it, closes it. So two dispatchers racing for one
 * path never remove each other's socket. */
IBX__PRIVATE int ibx__wake_take_over(int fd, const struct sockaddr_un *a) {
    char dir[IBX__WAKE_PATH_MAX + 1], *slash;
    struct stat seen, now;
    int dfd, bound = 0;
    ibx__copy(dir, sizeof dir, a->sun_path);
    slash = strrchr(dir, '/');
    if (!slash) ibx__copy(dir, sizeof dir, ".");
    else slash[slash == dir] = '\0'; /* "/x" -> "/" */
    if ((dfd = open(dir, O_RDONLY | O_CLOEXEC)) < 0) return 0;
    if (flock(dfd, LOCK_EX) == 0) {
        if (ibx__wake_stale(a, &seen) && lstat(a->sun_path, &now) == 0 && now.st_dev == seen.st_dev &&
            now.st_ino == seen.st_ino && unlink(a->sun_path) == 0)
            bound = bind(fd, (const struct sockaddr *)a, (socklen_t)sizeof *a) == 0;
        (void)flock(dfd, LOCK_UN);
    }
    close(dfd);
    return bound;
}

/* Bind a socket at `path` to receive wake bytes; *at gets the socket file's
 * device and inode (what ibx__wake_unbind may remove). A socket file left by
 * a process that died is replaced; anything else there (a live socket, a
 * file that is not a socket) is left alone (-1 then: this dispatcher polls). */
IBX__PRIVATE int ibx__wake_bind(const ibx__hooks *h, const char *who, const char *path, struct stat *at) {
    struct sockaddr_un a;
    int fd = ibx__wake_socket(), e = 0;
    if (fd < 0) return -1;
    ibx__wake_addr(path, &a);
    if (bind(fd, (const struct sockaddr *)&a, (socklen_t)sizeof a) == 0 ||
        ((e = errno) == EADDRINUSE && ibx__wake_take_over(fd, &a))) {
        if (lstat(path, at) != 0) memset(at, 0, sizeof *at); /* then never removed */
        return fd;
    }
    if (e != EADDRINUSE)
        ibx__log(h, IBX_LOG_WARN, who, "wake_path %s: cannot listen (%s)" IBX__WHY("; this dispatcher relies on polling"),
                 path, strerror(e));
    else
        ibx__log(h, IBX_LOG_WARN, who, "wake_path %s: taken (another process listens there, or it is not a"
                 " socket)" IBX__WHY("; this dispatcher relies on polling"), path);
    close(fd);
    return -1;
}

/* Stop listening: remove the socket file only while it is still the one
 * bound (same device and inode), and before closing, so that nobody sees it
 * refuse a connect and takes the path over in between. */
IBX__PRIVATE void ibx__wake_unbind(int fd, const char *path, const struct stat *at) {
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_dev == at->st_dev && now.st_ino == at->st_ino) unlink(path);
    close(fd);
}
#else
#define ibx__wake_send(fd, path) ((void)(fd), (void)(path))
#endif

typedef struct ibx__loop_timing {
    int64_t poll_ms, idle_max_ms, error_ms, startup_ms;
} ibx__loop_timing;

/* The wait after the n-th failed round in a row (n >= 1). A transient
 * failure (a lost connection, a server restarting) is retried fast, 100 ms
 * doubling up to 1 s (and never beyond error_ms), so that work resumes
 * within a second or two of the database coming back; other failures wait
 * error_ms. Pure. */
IBX__PRIVATE int64_t ibx__error_wait_ms(ibx_result r, int n, int64_t error_ms) {
    int64_t wait = 100, cap = error_ms < 1000 ? error_ms : 1000;
    if (r != IBX_ERR_DB_TRANSIENT) return error_ms;
    while (--n > 0 && wait < cap) wait *= 2;
    return wait < cap ? wait : cap;
}

/* Call `round` until stopped: at once after work (IBX_OK), after an empty
 * round wait poll_ms doubling up to idle_max_ms (back to poll_ms on a
 * wake-up), after a failure as ibx__error_wait_ms says. A run of failures
 * logs its first at ERROR, then one WARN line a minute, and its end. */
IBX__PRIVATE void ibx__loop_run(ibx__loop *l, const ibx__loop_timing *t,
                                ibx_result (*round)(void *ctx), void *ctx, const char *store_id,
                                const ibx_error *err) {
    int64_t idle = t->poll_ms, failing_since = 0, next_report = 0;
    int failures = 0;
    /* stop() is final: a stop before run() is not forgotten. */
    if (t->startup_ms > 0) ibx__loop_wait(l, t->startup_ms);
    while (!ibx__loop_stopped(l)) {
        ibx_result r = round(ctx);
        int64_t now = ibx__mono_ms(l->hooks), wait;
        if (r >= 0 && failures > 0) {
            ibx__log(l->hooks, IBX_LOG_INFO, store_id, "dispatch works again after %d failed round(s), %lld ms",
                     failures, (long long)(now - failing_since));
            failures = 0;
        }
        if (r == IBX_OK) {
            idle = t->poll_ms;
        } else if (r == IBX_EMPTY) {
            if (ibx__loop_wait(l, idle)) idle = t->poll_ms; /* a producer spoke */
            else idle = idle > t->idle_max_ms / 2 ? t->idle_max_ms : idle * 2;
        } else {
            if (failures++ == 0) failing_since = next_report = now;
            wait = ibx__error_wait_ms(r, failures, t->error_ms);
            if (now >= next_report) {
                ibx__log(l->hooks, failures == 1 ? IBX_LOG_ERROR : IBX_LOG_WARN, store_id,
                         "dispatch round failed%s: %s: %s (%s); next try in %lld ms", failures == 1 ? "" : " again",
                         ibx__result_str(r), err->message, err->where, (long long)wait);
                next_report = now + 60000;
            }
            ibx__loop_wait(l, wait);
        }
    }
}

/* Where a row's envelope strings sit in the read buffer (each header's
 * row offsets hold one). */
typedef struct ibx__envelope_offsets {
    size_t tenant, aggregate_type, aggregate_id, headers;
} ibx__envelope_offsets;

/* >>common-end core */

/* >>common-begin public */

/* Public faces of the core's pure functions: thin, so the core stays
 * static and both headers can live in one program. */
IBX_API const char *ibx_version(void) { return IBX_VERSION_STRING; }
IBX_API const char *ibx_result_str(ibx_result result) { return ibx__result_str(result); }
IBX_API const char *ibx_dialect_name(ibx_dialect dialect) { return ibx__dialect_name(dialect); }
IBX_API int64_t ibx_backoff_default_ms(int attempt) { return ibx__backoff_default_ms(attempt); }
IBX_API int64_t ibx_backoff_jitter_ms(const ibx_backoff_policy *policy, int attempt,
                                      uint64_t random_bits) {
    return ibx__backoff_jitter_ms(policy, attempt, random_bits);
}
IBX_API void ibx_selector_init(ibx_selector *selector, ibx_selection kind, int store_count) {
    if (selector) ibx__selector_init(selector, kind, store_count);
}
IBX_API int ibx_selector_next(const ibx_selector *selector) {
    return selector ? ibx__selector_next(selector) : -1;
}
IBX_API void ibx_selector_report(ibx_selector *selector, int store, int claimed) {
    if (selector) ibx__selector_report(selector, store, claimed);
}
IBX_API int ibx_selector_all_idle(const ibx_selector *selector) {
    return selector ? ibx__selector_all_idle(selector) : 1;
}
IBX_API void ibx_selector_resize(ibx_selector *selector, int store_count) {
    if (selector) ibx__selector_resize(selector, store_count);
}
IBX_API void ibx_uuid_v7(ibx_uuid_state *state, int64_t unix_ms, uint64_t random_a,
                         uint64_t random_b, char out[37]) {
    if (state && out) ibx__uuid_v7(state, unix_ms, random_a, random_b, out);
}
IBX_API int ibx_uuid_is_valid(const char *text) { return ibx__uuid_is_valid(text); }
IBX_API void ibx_guid_text(const ibx_guid *guid, char out[37]) {
    if (guid && out) ibx__guid_text(guid->bytes, out);
}
IBX_API ibx_result ibx_identifier_check(const char *name) { return ibx__identifier_check(name); }

/* >>common-end public */

/* >> sha-256 ------------------------------------------------------------------------- */

typedef struct ibx__sha256 {
    uint32_t h[8];
    unsigned char block[64];
    size_t used;
    uint64_t total;
} ibx__sha256;

static const uint32_t ibx__sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define IBX__ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void ibx__sha256_block(ibx__sha256 *c, const unsigned char *p) {
    uint32_t w[64], a, b, d, e, f, g, h, cc, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = IBX__ROR(w[i - 15], 7) ^ IBX__ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = IBX__ROR(w[i - 2], 17) ^ IBX__ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = c->h[0]; b = c->h[1]; cc = c->h[2]; d = c->h[3];
    e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
    for (i = 0; i < 64; i++) {
        t1 = h + (IBX__ROR(e, 6) ^ IBX__ROR(e, 11) ^ IBX__ROR(e, 25)) + ((e & f) ^ (~e & g)) +
             ibx__sha256_k[i] + w[i];
        t2 = (IBX__ROR(a, 2) ^ IBX__ROR(a, 13) ^ IBX__ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g; g = f; f = e; e = d + t1;
        d = cc; cc = b; b = a; a = t1 + t2;
    }
    c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d;
    c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

static void ibx__sha256_init(ibx__sha256 *c) {
    static const uint32_t start[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, start, sizeof start);
    c->used = 0;
    c->total = 0;
}

static void ibx__sha256_add(ibx__sha256 *c, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    c->total += len;
    while (len > 0) {
        size_t n = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->block + c->used, p, n);
        c->used += n;
        p += n;
        len -= n;
        if (c->used == 64) {
            ibx__sha256_block(c, c->block);
            c->used = 0;
        }
    }
}

static void ibx__sha256_end(ibx__sha256 *c, unsigned char out[32]) {
    uint64_t bits = c->total * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    int i;
    ibx__sha256_add(c, &pad, 1);
    while (c->used != 56) ibx__sha256_add(c, &zero, 1);
    for (i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
    ibx__sha256_add(c, len, 8);
    for (i = 0; i < 32; i++) out[i] = (unsigned char)(c->h[i / 4] >> (24 - 8 * (i % 4)));
}

IBX_API void ibx_sha256(const void *data, size_t len, unsigned char out[32]) {
    ibx__sha256 c;
    ibx__sha256_init(&c);
    if (data) ibx__sha256_add(&c, data, len);
    ibx__sha256_end(&c, out);
}

IBX_API void ibx_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                             unsigned char out[32]) {
    unsigned char k[64], pad[64], inner[32];
    ibx__sha256 c;
    int i;
    memset(k, 0, sizeof k);
    if (key_len > 64) ibx_sha256(key, key_len, k); /* long keys are hashed first */
    else if (key) memcpy(k, key, key_len);
    for (i = 0; i < 64; i++) pad[i] = (unsigned char)(k[i] ^ 0x36);
    ibx__sha256_init(&c);
    ibx__sha256_add(&c, pad, 64);
    if (data) ibx__sha256_add(&c, data, len);
    ibx__sha256_end(&c, inner);
    for (i = 0; i < 64; i++) pad[i] = (unsigned char)(k[i] ^ 0x5c);
    ibx__sha256_init(&c);
    ibx__sha256_add(&c, pad, 64);
    ibx__sha256_add(&c, inner, 32);
    ibx__sha256_end(&c, out);
}

IBX_API const char *ibx_status_name(ibx_status status) {
    switch (status) {
    case IBX_STATUS_SEEN: return "Seen";
    case IBX_STATUS_PROCESSING: return "Processing";
    case IBX_STATUS_DONE: return "Done";
    case IBX_STATUS_DEAD: return "Dead";
    }
    return "unknown";
}

static ibx_status ibx__status_parse(const char *text) {
    if (strcmp(text, "Processing") == 0) return IBX_STATUS_PROCESSING;
    if (strcmp(text, "Done") == 0) return IBX_STATUS_DONE;
    if (strcmp(text, "Dead") == 0) return IBX_STATUS_DEAD;
    return IBX_STATUS_SEEN;
}

/* >> inbox statements ------------------------------------------------------------ */

/* Templates: {T} the quoted, qualified table, {N} its bare name, {W} the
 * dialect's "now". Where the text runs left to right (MariaDB's SET),
 * parameters come in the order that lets every column be read before it
 * is assigned (numbered markers).
 *
 * Rule: statements declare their parameters. What each statement binds is
 * declared once, in ibx__stmt_args_rows below (count and kinds, the names in
 * its comment), in the same order in every dialect; a dialect's text takes
 * exactly those (markers counted after {O} and the other names are
 * expanded). A new statement or dialect text that disagrees fails at store
 * open in debug builds, at bind (ibx__exec), and for every dialect, SQL
 * Server included, in CORE-STMT-PARAMS (make test). */
/* The plain upsert (no envelope, no expiry: fewer parameters) is a
 * statement of its own, except with IBX_NO_ENVELOPE: then the expiry's
 * upsert, with the expiry NULL, takes every message (one statement less). */
#ifdef IBX_NO_ENVELOPE
#define IBX__PLAIN_UPSERT 0
#else
#define IBX__PLAIN_UPSERT 1
#endif
enum {
    IBX__Q_SEEN,       /* -> status, stored hash */
    IBX__Q_ENQUEUE,    /* -> rowcount; not with IBX_NO_ENVELOPE (IBX__PLAIN_UPSERT) */
    IBX__Q_ENQUEUE_ENV, /* a message with an envelope (a known one keeps what it has) */
    IBX__Q_MARK,       /* -> rowcount (see ibx__mark) */
    IBX__Q_CLAIM,      /* -> message rows (see CLAIM_PICK) */
    IBX__Q_ACK,        /* -> rowcount */
    IBX__Q_ABANDON,    /* -> rowcount */
    IBX__Q_FAIL,       /* -> rowcount */
    IBX__Q_EXTEND,     /* -> rowcount: leases renewed */
    IBX__Q_REAP,       /* -> rowcount */
    IBX__Q_GET,        /* -> message row */
    IBX__Q_HASH,       /* -> the stored hash (enqueue compares a new one), status */
    IBX__Q_CLEANUP,    /* -> rowcount */
    IBX__Q_STATS,      /* -> ready count, oldest ready age */
    IBX__Q_PENDING,    /* -> messages still to handle (Processing): max_pending's count */
    IBX__Q_CLAIM_PICK, /* -> the claim's short rows, locked (FOR UPDATE SKIP LOCKED); where
                          set, the claim is pick, then CLAIM (see ibx__claim_pick) */
    IBX__Q_CLAIM_READ, /* -> the rows the owner holds (where CLAIM marked fewer than picked) */
    IBX__Q_GAUGES,     /* -> ready count, oldest ready age in ms, in flight, dead, scheduled,
                          expired leases */
    IBX__Q_DEAD_LIST,  /* -> message rows */
    IBX__Q_DEAD_REPLAY, /* -> rowcount */
    IBX__Q_DEAD_PURGE, /* -> rowcount */
    IBX__Q_MOVE,       /* -> rowcount: to Dead (ibx_dead_move) */
    IBX__Q_RUN_NOW,    /* -> rowcount: a waiting message due now (ibx_run_now) */
    IBX__Q_WAKE,       /* none: the inbox has no ordering keys, so nothing is parked (the
                          common reap asks for it) */
    IBX__Q_ANALYZE,    /* statistics refreshed where stale (PostgreSQL; see ibx_reap) */
    IBX__Q_CLAIM_ACK,  /* -> CLAIM's rows, then the count ACK changed (ibx__claim_ack_sql) */
    IBX__Q_CLAIM_CARRY, /* none: the inbox has no ordering keys (the common claim asks) */
    IBX__Q_OWNED,      /* not a statement: {O} in the others, the rows of a key list the
                          owner holds (the settles' shared condition), written once */
    IBX__Q_COUNT
};

/* The statements SQLite has none of (IBX__SQL: with SQLite the only
 * dialect, the code that runs them folds away); ibx__store_prepare_sql
 * asserts that SQLite's rows name none of them. */
#define IBX__SQLITE_LACKS(q)                                                                          \
    ((q) == IBX__Q_CLAIM_PICK || (q) == IBX__Q_CLAIM_READ || (q) == IBX__Q_WAKE ||                   \
     (q) == IBX__Q_ANALYZE || (q) == IBX__Q_CLAIM_ACK)

/* What each statement binds (the letters: ibx__args_check; ibx__stmt_args
 * gives a dialect's variant). A key list is two lists (sources, message
 * ids) of equal length. A dead filter is topic, error text, first seen
 * from, first seen before, source, message id. */
#ifdef IBX_NO_ENVELOPE
#define IBX__ENV_ARGS "TTTT" /* NULL, and a text may leave them out (IBX__ENV) */
#else
#define IBX__ENV_ARGS "tttt"
#endif
static const ibx__stmt_row ibx__stmt_args_rows[] = {
    {IBX__Q_SEEN, "ttb"},           /* source, message_id, hash */
    {IBX__Q_ENQUEUE, "ttttbii"},    /* source, id, topic, payload, hash, due, next_attempt */
    {IBX__Q_ENQUEUE_ENV, "ttttbii" IBX__ENV_ARGS "ii"}, /* ENQUEUE's, tenant, aggregate type,
                                                           aggregate id, headers, expiry, priority */
    {IBX__Q_MARK, "tttttt"},        /* status x4, source, id */
    {IBX__Q_CLAIM, "tii"},          /* owner, lease_seconds, batch; after a CLAIM_PICK, CLAIM_READ's */
    {IBX__Q_CLAIM_PICK, "ii"},      /* batch, window */
    {IBX__Q_CLAIM_READ, "tIll"},    /* owner, lease (unused), sources, ids */
    {IBX__Q_ACK, "tll"},            /* owner, sources, ids */
    {IBX__Q_ABANDON, "iittll"},     /* delay_ms (NULL: backoff), attempts (1, or 0 for a wait),
                                       last_error, owner, sources, ids */
    {IBX__Q_FAIL, "ttll"},          /* error, owner, sources, ids */
    {IBX__Q_EXTEND, "itll"},        /* lease_seconds, owner, sources, ids */
    {IBX__Q_REAP, ""},
    {IBX__Q_GET, "tt"},             /* source, id */
    {IBX__Q_HASH, "tt"},            /* source, id */
    {IBX__Q_STATS, ""},
    {IBX__Q_PENDING, ""},
    {IBX__Q_GAUGES, ""},
    {IBX__Q_CLEANUP, "ii"},         /* retention_ms, batch */
    {IBX__Q_DEAD_LIST, "ttiittii"}, /* dead filter, limit, offset */
    {IBX__Q_DEAD_REPLAY, "ttiittII"}, /* dead filter, two unused */
    {IBX__Q_DEAD_PURGE, "ttiittiI"}, /* dead filter, batch, unused */
    {IBX__Q_MOVE, "ttti"},          /* reason, source, id, in flight too (0/1) */
    {IBX__Q_RUN_NOW, "tt"},         /* source, id */
    {IBX__Q_WAKE, ""},
    {IBX__Q_ANALYZE, ""},
    {IBX__Q_CLAIM_ACK, "tlltii"},   /* ACK's, then CLAIM's */
    {IBX__Q_CLAIM_CARRY, "tiil"},   /* unused */
    {IBX__Q_COUNT, NULL}};
#define IBX__ARGS_JSON_ROWS(id) 0 /* no statement takes JSON rows (obx.h's batch inserts do) */

/* The claim's order: priority with aging (IBX__SQLITE_CLAIM_ORDER and the
 * other dialects', in the common core). IX_{N}_Claim's predicate is the
 * claim's own (IBX__CLAIM_ONLY: Starts >= 0 always holds, and no other
 * statement says it), so no other statement's planner takes it for the
 * work-queue index. PostgreSQL's Status and due tests are IS TRUE (no index
 * serves them): a planner with few statistics otherwise took the
 * work-queue index and sorted it. */
#define IBX__CLAIM_ONLY(o, c) o "Status" c " = 'Processing' AND " o "Starts" c " >= 0"
#define IBX__PG_CLAIM_ONLY "(\"Status\" = 'Processing') IS TRUE AND \"Starts\" >= 0"
#define IBX__SQLITE_COLS                                                                     \
    "Source, MessageId, Topic, Payload, Hash, FirstSeenUtc, "          \
    "LastSeenUtc, Status, LockedUntil, OwnerToken, Attempt, LastError, " \
    "NextAttemptAt, DueTimeUtc, Starts, TenantId, AggregateType, AggregateId, Headers, "   \
    "ExpiresAt, Priority"
#define IBX__PG_MS(c) "CAST(floor(EXTRACT(EPOCH FROM \"" c "\") * 1000) AS bigint)"
#define IBX__PG_COLS                                                                         \
    "\"Source\", \"MessageId\", \"Topic\", \"Payload\", \"Hash\", " IBX__PG_MS("FirstSeenUtc") \
    ", " IBX__PG_MS("LastSeenUtc") ", \"Status\", " IBX__PG_MS("LockedUntil") ", "            \
    "CAST(\"OwnerToken\" AS text), \"Attempt\", \"LastError\", " IBX__PG_MS("NextAttemptAt")  \
    ", " IBX__PG_MS("DueTimeUtc") ", \"Starts\", \"TenantId\", \"AggregateType\", \"AggregateId\", " \
    "CAST(\"Headers\" AS text), " IBX__PG_MS("ExpiresAt") ", \"Priority\""
/* A claim's short row (ibx__read_claimed): what the claim did not set, the
 * integers first (bound), the last a mask of the optional columns that are
 * not NULL (read only those) with the priority + 8 above its 6 bits, then
 * the texts. nn writes one bit (IBX__NN, or
 * IBX__NN_INT), o and c quote a name. */
#define IBX__NN(col, bit) "(CASE WHEN " col " IS NULL THEN 0 ELSE " bit " END)"
/* SQLite gives a comparison's truth as 1 or 0: a shorter bit there. */
#define IBX__NN_INT(col, bit) "(" col " IS NOT NULL) * " bit
#define IBX__CLAIM_MASK(nn, o, c)                                                                     \
    nn(o "Hash" c, "1") " + " nn(o "LastError" c, "2") " + " nn(o "TenantId" c, "4")  \
    " + " nn(o "AggregateType" c, "8") " + " nn(o "AggregateId" c, "16") " + "              \
    nn(o "Headers" c, "32") " + (" o "Priority" c " + 8) * 64"
#define IBX__SQLITE_CLAIM_COLS                                                                    \
    "FirstSeenUtc, LastSeenUtc, LockedUntil, Attempt, NextAttemptAt, DueTimeUtc, " \
    "Starts, ExpiresAt, " IBX__CLAIM_MASK(IBX__NN_INT, "", "") ", Source, MessageId, Topic, "  \
    "Payload, Hash, LastError, TenantId, AggregateType, AggregateId, Headers"
#define IBX__PG_CLAIM_COLS                                                                        \
    IBX__PG_MS("FirstSeenUtc") ", " IBX__PG_MS("LastSeenUtc") ", " IBX__PG_MS("LockedUntil") ", "  \
    "\"Attempt\", " IBX__PG_MS("NextAttemptAt") ", " IBX__PG_MS("DueTimeUtc") ", \"Starts\", "      \
    IBX__PG_MS("ExpiresAt") ", " IBX__CLAIM_MASK(IBX__NN, "\"", "\"") ", \"Source\", \"MessageId\", \"Topic\", " \
    "\"Payload\", \"Hash\", \"LastError\", \"TenantId\", \"AggregateType\", \"AggregateId\", "          \
    "CAST(\"Headers\" AS text)"
/* The rows a key list names. */
#define IBX__SQLITE_KEYS                                                                     \
    "(Source, MessageId) IN (SELECT s.value, m.value FROM json_each(?) AS s "          \
    "JOIN json_each(?) AS m ON s.key = m.key)"
#define IBX__PG_KEYS \
    "(\"Source\", \"MessageId\") IN (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[])))"

/* Crash-loop quarantine (max_starts, {Q}): the claim counts a start in its
 * own statement and takes no message with {Q} starts (a claim may take a
 * message whose lease expired, unreaped); an abandon takes its start back
 * (an outcome); the reap ends such a message Dead, saying why. Check and
 * count are one UPDATE of the row: no N+1st start, across processes. A
 * dead message made Processing again (replay, re-enqueue, mark) starts
 * with 0. */
#define IBX__CRASH_LOOP "crash loop: claimed {Q} times without an outcome" IBX__WHY(" (the handler crashed or was killed, or its lease expired)")

/* A redelivery in flight (ibx_enqueue of a leased message with another
 * topic or payload): the upsert marks the lease by setting its token's
 * version digit (the 15th character) to 0, tokens of version 0 being
 * refused. The settles take the holder's token and its mark ({O}: the
 * holder still renews, abandons, and nobody else claims meanwhile); an
 * ack or fail of a marked lease makes the message ready again instead of
 * Done or Dead, with its start taken back: no handler has seen the new
 * content yet. A redelivery of the same content changes no lease. */
#ifndef IBX_NO_SQLITE
#define IBX__SQLITE_MARK(t) "substr(" t ", 1, 14) || '0' || substr(" t ", 16)"
#define IBX__SQLITE_MARKED "substr(OwnerToken, 15, 1) = '0'"
#define IBX__SQLITE_REDELIVERY \
    "OwnerToken = iif(OwnerToken IS NOT NULL AND (Topic IS NOT excluded.Topic OR Payload IS NOT " \
    "excluded.Payload), " IBX__SQLITE_MARK("OwnerToken") ", OwnerToken), "
/* The dead-letter filter (ibx__dead_params): NULL arguments match all. */
#define IBX__SQLITE_DEAD                                                                           \
    "Status = 'Dead' AND Topic = coalesce(?1, Topic) AND (?2 IS NULL OR "                 \
    "instr(coalesce(LastError, ''), ?2) > 0) AND FirstSeenUtc >= coalesce(?3, FirstSeenUtc) " \
    "AND (?4 IS NULL OR FirstSeenUtc < ?4) AND Source = coalesce(?5, Source) AND "          \
    "MessageId = coalesce(?6, MessageId)"
static const ibx__stmt_row ibx__sqlite_inbox_rows[] = {
    {IBX__Q_OWNED, IBX__SQLITE_MARK("OwnerToken") " = (SELECT " IBX__SQLITE_MARK("v") " FROM (SELECT ? AS v)) "
                   "AND Status = 'Processing' AND " IBX__SQLITE_KEYS},
    /* sqliteodbc shows RETURNING rows only after a leading WITH. */
    {IBX__Q_SEEN,
     "WITH _ AS (SELECT 1) INSERT INTO {T} (Source, MessageId, Hash) VALUES (?, ?, ?) "
     "ON CONFLICT (Source, MessageId) DO UPDATE SET "
     "LastSeenUtc = iif(Status = 'Done', LastSeenUtc, {W}), "
     "Hash = iif(Status = 'Done', Hash, coalesce(Hash, excluded.Hash)) "
     "RETURNING Status, Hash"},
#if IBX__PLAIN_UPSERT
    {IBX__Q_ENQUEUE,
     "INSERT INTO {T} (Source, MessageId, Topic, Payload, Hash, Status, "
     "DueTimeUtc, NextAttemptAt) VALUES (?, ?, ?, ?, ?, 'Processing', ?, coalesce(?, {W})) "
     "ON CONFLICT (Source, MessageId) DO UPDATE SET " IBX__SQLITE_REDELIVERY "Topic = excluded.Topic, "
     "Payload = excluded.Payload, Hash = excluded.Hash, "
     "DueTimeUtc = excluded.DueTimeUtc, NextAttemptAt = excluded.NextAttemptAt, "
     "LastSeenUtc = {W}, Attempt = iif(Status = 'Dead', 0, Attempt), "
     "Starts = iif(Status = 'Dead', 0, Starts), "
     "Status = 'Processing' WHERE Status <> 'Done'"},
#endif
    /* With IBX_NO_ENVELOPE, for an expiry only: no envelope columns. */
    {IBX__Q_ENQUEUE_ENV,
     "INSERT INTO {T} (Source, MessageId, Topic, Payload, Hash, Status, "
     "DueTimeUtc, NextAttemptAt, " IBX__ENV("TenantId, AggregateType, AggregateId, Headers, ")
     "ExpiresAt, Priority) VALUES (?1, ?2, ?3, ?4, ?5, 'Processing', ?6, coalesce(?7, {W}), " IBX__ENV("?8, ?9, ?10, ?11, ")
     "?12, ?13) ON CONFLICT (Source, MessageId) DO UPDATE SET " IBX__SQLITE_REDELIVERY "Topic = excluded.Topic, "
     "Payload = excluded.Payload, Hash = excluded.Hash, "
     "DueTimeUtc = excluded.DueTimeUtc, NextAttemptAt = excluded.NextAttemptAt, "
     "LastSeenUtc = {W}, Attempt = iif(Status = 'Dead', 0, Attempt), "
     "Starts = iif(Status = 'Dead', 0, Starts), "
     IBX__ENV("TenantId = coalesce(TenantId, excluded.TenantId), "
              "AggregateType = coalesce(AggregateType, excluded.AggregateType), "
              "AggregateId = coalesce(AggregateId, excluded.AggregateId), "
              "Headers = coalesce(Headers, excluded.Headers), ")
     "ExpiresAt = coalesce(ExpiresAt, excluded.ExpiresAt), "
     "Status = 'Processing' WHERE Status <> 'Done'"},
    {IBX__Q_MARK,
     "UPDATE {T} SET Status = iif(Status = 'Done', 'Done', ?), "
     "Attempt = iif(Status = 'Dead' AND ? = 'Processing', 0, Attempt), "
     "OwnerToken = iif(? IN ('Done', 'Dead'), NULL, OwnerToken), "
     "LockedUntil = iif(? IN ('Done', 'Dead'), NULL, LockedUntil), "
     "Starts = iif(Status = 'Dead', 0, Starts), LastSeenUtc = {W} WHERE Source = ? AND MessageId = ?"},
    {IBX__Q_CLAIM,
     "WITH _ AS (SELECT 1) UPDATE {T} SET OwnerToken = ?, "
     "LockedUntil = {W} + CAST(? AS INTEGER) * 1000, Starts = Starts + 1 WHERE rowid IN "
     "(SELECT rowid FROM {T} INDEXED BY \"IX_{N}_Claim\" WHERE " IBX__CLAIM_ONLY("", "") " AND NextAttemptAt <= {W} AND "
     "(LockedUntil IS NULL OR LockedUntil < {W}) AND Starts < {Q} " IBX__SQLITE_CLAIM_ORDER("") " LIMIT ?) "
     "RETURNING " IBX__SQLITE_CLAIM_COLS},
    {IBX__Q_ACK,
     "UPDATE {T} SET Status = iif(" IBX__SQLITE_MARKED ", 'Processing', 'Done'), "
     "Starts = iif(" IBX__SQLITE_MARKED ", max(Starts - 1, 0), Starts), OwnerToken = NULL, LockedUntil = NULL, "
     "LastSeenUtc = {W} WHERE {O}"},
    {IBX__Q_ABANDON,
     "UPDATE {T} SET NextAttemptAt = {W} + coalesce(?, min(60000, 1000 * (1 << min(Attempt, 6)))), "
     "Attempt = Attempt + ?, LastError = coalesce(?, LastError), "
     "OwnerToken = NULL, LockedUntil = NULL, Starts = max(Starts - 1, 0) "
     "WHERE {O}"},
    {IBX__Q_FAIL,
     "UPDATE {T} SET Status = iif(" IBX__SQLITE_MARKED ", 'Processing', 'Dead'), "
     "Starts = iif(" IBX__SQLITE_MARKED ", max(Starts - 1, 0), Starts), OwnerToken = NULL, LockedUntil = NULL, "
     "LastSeenUtc = {W}, LastError = ? WHERE {O}"},
    {IBX__Q_EXTEND,
     "UPDATE {T} SET LockedUntil = {W} + CAST(? AS INTEGER) * 1000 "
     "WHERE {O}"},
    {IBX__Q_REAP,
     "UPDATE {T} SET OwnerToken = NULL, LockedUntil = NULL, Status = iif(Starts >= {Q}, 'Dead', Status), "
     "LastError = iif(Starts >= {Q}, '" IBX__CRASH_LOOP "', LastError) WHERE Status = 'Processing' "
     "AND LockedUntil IS NOT NULL AND LockedUntil < {W}"},
    {IBX__Q_HASH,
     "SELECT Hash, Status FROM {T} WHERE Source = ? AND MessageId = ?"},
    {IBX__Q_GET,
     "SELECT " IBX__SQLITE_COLS " FROM {T} WHERE Source = ? AND MessageId = ?"},
    {IBX__Q_CLEANUP,
     "DELETE FROM {T} WHERE rowid IN (SELECT rowid FROM {T} WHERE Status = 'Done' AND "
     "LastSeenUtc < {W} - ? ORDER BY LastSeenUtc LIMIT ?)"},
    {IBX__Q_STATS,
     "SELECT COUNT(*), {W} - MIN(NextAttemptAt) FROM {T} WHERE Status = 'Processing' AND "
     "NextAttemptAt <= {W} AND (LockedUntil IS NULL OR LockedUntil < {W})"},
#ifndef IBX_NO_DEAD_LETTERS
    {IBX__Q_DEAD_LIST,
     "SELECT " IBX__SQLITE_COLS " FROM {T} WHERE " IBX__SQLITE_DEAD " ORDER BY FirstSeenUtc, "
     "Source, MessageId LIMIT ?7 OFFSET ?8"},
    {IBX__Q_DEAD_REPLAY,
     "UPDATE {T} SET Status = 'Processing', Attempt = 0, Starts = 0, NextAttemptAt = {W}, "
     "OwnerToken = NULL, LockedUntil = NULL, ExpiresAt = NULL WHERE " IBX__SQLITE_DEAD},
    {IBX__Q_DEAD_PURGE,
     "DELETE FROM {T} WHERE rowid IN (SELECT rowid FROM {T} WHERE " IBX__SQLITE_DEAD " LIMIT ?7)"},
    {IBX__Q_MOVE,
     "UPDATE {T} SET Status = 'Dead', LastError = ?1, OwnerToken = NULL, LockedUntil = NULL "
     "WHERE Source = ?2 AND MessageId = ?3 AND Status = 'Processing' AND (LockedUntil IS NULL OR ?4 = 1)"},
    {IBX__Q_RUN_NOW,
     "UPDATE {T} SET NextAttemptAt = {W} WHERE Source = ?1 AND MessageId = ?2 AND Status = 'Processing' "
     "AND LockedUntil IS NULL AND NextAttemptAt > {W}"},
#endif
    {IBX__Q_PENDING,
     "SELECT COUNT(*) FROM {T} WHERE Status = 'Processing'"},
#ifndef IBX_NO_METRICS_TEXT
    {IBX__Q_GAUGES,
     "SELECT COUNT(*), {W} - MIN(NextAttemptAt), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 'Processing' AND LockedUntil IS NOT NULL), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 'Dead'), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 'Processing' AND LockedUntil IS NULL AND NextAttemptAt > {W}), "
     "(SELECT COUNT(*) FROM {T} WHERE Status = 'Processing' AND LockedUntil < {W}) "
     "FROM {T} WHERE Status = 'Processing' AND "
     "NextAttemptAt <= {W} AND (LockedUntil IS NULL OR LockedUntil < {W})"},
#endif
    {IBX__Q_COUNT, NULL}};

/* The integers a claim or a settle reads or writes first, the texts after
 * (docs/design/LAYOUT2.md); older tables keep their order. */
static const char *const ibx__sqlite_inbox_ddl[] = {"CREATE TABLE IF NOT EXISTS {T} (\n"
     "    Source        TEXT NOT NULL,\n"
     "    MessageId     TEXT NOT NULL,\n"
     "    NextAttemptAt INTEGER NOT NULL DEFAULT ({W}),\n"
     "    LockedUntil   INTEGER NULL,\n"
     "    Attempt       INTEGER NOT NULL DEFAULT 0,\n"
     "    Starts        INTEGER NOT NULL DEFAULT 0,\n"
     "    Priority      INTEGER NOT NULL DEFAULT 0,\n"
     "    FirstSeenUtc  INTEGER NOT NULL DEFAULT ({W}),\n"
     "    LastSeenUtc   INTEGER NOT NULL DEFAULT ({W}),\n"
     "    Status        TEXT NOT NULL DEFAULT 'Seen',\n"
     "    OwnerToken    TEXT NULL,\n"
     "    Topic         TEXT NOT NULL DEFAULT '',\n"
     "    Payload       TEXT NOT NULL DEFAULT '',\n"
     "    Hash          BLOB NULL,\n"
     "    LastError     TEXT NULL,\n"
     "    DueTimeUtc    INTEGER NULL{A},\n"
     "    PRIMARY KEY (Source, MessageId)\n"
     ")",
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_WorkQueue\" ON {T} (NextAttemptAt) "
     "WHERE Status = 'Processing'",
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_Claim\" ON {T} (" IBX__SQLITE_RANK("") ") WHERE " IBX__CLAIM_ONLY("", ""),
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_Leased\" ON {T} (LockedUntil) "
     "WHERE Status = 'Processing' AND LockedUntil IS NOT NULL",
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_Cleanup\" ON {T} (LastSeenUtc) WHERE Status = 'Done'",
     NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (ibx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * TenantId .. Headers: the envelope (NULL when a message has none). */
static const ibx__column ibx__sqlite_inbox_columns[] = {
    {"Starts", "INTEGER NOT NULL DEFAULT 0"}, {"TenantId", "TEXT NULL"}, {"AggregateType", "TEXT NULL"},
    {"AggregateId", "TEXT NULL"}, {"Headers", "TEXT NULL"}, {"ExpiresAt", "INTEGER NULL"},
    {"Priority", "INTEGER NOT NULL DEFAULT 0"}, /* IBX__SQLITE_CLAIM_ORDER */
    {NULL, NULL}};
static const ibx__sqlset ibx__sqlite_inbox = {
    "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    ibx__sqlite_inbox_ddl,
    ibx__sqlite_inbox_rows,
    ibx__sqlite_inbox_columns,
    0, /* claim_full_rows: the short row */
    NULL /* contract: none */
};
#define IBX__SQLITE_SET &ibx__sqlite_inbox
#endif

#ifndef IBX_NO_POSTGRESQL
/* A redelivery in flight: see IBX__SQLITE_MARK. */
#define IBX__PG_MARK(t) "overlay(CAST(" t " AS text) placing '0' from 15)"
#define IBX__PG_MARKED "substr(CAST(\"OwnerToken\" AS text), 15, 1) = '0'"
#define IBX__PG_OWNED IBX__PG_MARK("\"OwnerToken\"") " = " IBX__PG_MARK("?") " AND \"Status\" = 'Processing' AND "
#define IBX__PG_REDELIVERY                                                                                  \
    "\"OwnerToken\" = CASE WHEN t.\"OwnerToken\" IS NOT NULL AND (t.\"Topic\", t.\"Payload\") IS DISTINCT FROM " \
    "(excluded.\"Topic\", excluded.\"Payload\") THEN CAST(" IBX__PG_MARK("t.\"OwnerToken\"") " AS uuid) "          \
    "ELSE t.\"OwnerToken\" END, "
/* The dead-letter filter (ibx__dead_params): NULL arguments match all. */
#define IBX__PG_DEAD                                                                               \
    "\"Status\" = 'Dead' AND \"Topic\" = coalesce(CAST(?1 AS text), \"Topic\") AND (CAST(?2 AS text) "    \
    "IS NULL OR strpos(coalesce(\"LastError\", ''), CAST(?2 AS text)) > 0) AND \"FirstSeenUtc\" >= "       \
    "coalesce(to_timestamp(CAST(?3 AS bigint) / 1000.0), \"FirstSeenUtc\") AND \"FirstSeenUtc\" < "       \
    "coalesce(to_timestamp(CAST(?4 AS bigint) / 1000.0), 'infinity') AND "                              \
    "\"Source\" = coalesce(CAST(?5 AS text), \"Source\") AND \"MessageId\" = coalesce(CAST(?6 AS text), \"MessageId\")"
static const ibx__stmt_row ibx__postgresql_inbox_rows[] = {
    /* Statistics older than half the table (see ibx_reap). */
    {IBX__Q_ANALYZE,
     "DO $$ BEGIN IF (SELECT c.relpages < pg_relation_size(c.oid) / current_setting('block_size')::integer / 2 "
     "FROM pg_class AS c WHERE c.oid = CAST('{T}' AS regclass)) THEN ANALYZE {T}; END IF; END $$"},
    {IBX__Q_SEEN,
     "INSERT INTO {T} AS t (\"Source\", \"MessageId\", \"Hash\") VALUES (?, ?, ?) "
     "ON CONFLICT (\"Source\", \"MessageId\") DO UPDATE SET "
     "\"LastSeenUtc\" = CASE WHEN t.\"Status\" = 'Done' THEN t.\"LastSeenUtc\" ELSE now() END, "
     "\"Hash\" = CASE WHEN t.\"Status\" = 'Done' THEN t.\"Hash\" ELSE coalesce(t.\"Hash\", excluded.\"Hash\") END "
     "RETURNING \"Status\", \"Hash\""},
#if IBX__PLAIN_UPSERT
    {IBX__Q_ENQUEUE,
     "INSERT INTO {T} AS t (\"Source\", \"MessageId\", \"Topic\", \"Payload\", \"Hash\", \"Status\", "
     "\"DueTimeUtc\", \"NextAttemptAt\") VALUES (?, ?, ?, ?, ?, 'Processing', "
     "to_timestamp(CAST(? AS bigint) / 1000.0), coalesce(to_timestamp(CAST(? AS bigint) / 1000.0), now())) "
     "ON CONFLICT (\"Source\", \"MessageId\") DO UPDATE SET " IBX__PG_REDELIVERY "\"Topic\" = excluded.\"Topic\", "
     "\"Payload\" = excluded.\"Payload\", \"Hash\" = excluded.\"Hash\", "
     "\"DueTimeUtc\" = excluded.\"DueTimeUtc\", \"NextAttemptAt\" = excluded.\"NextAttemptAt\", "
     "\"LastSeenUtc\" = now(), \"Attempt\" = CASE WHEN t.\"Status\" = 'Dead' THEN 0 ELSE t.\"Attempt\" END, "
     "\"Starts\" = CASE WHEN t.\"Status\" = 'Dead' THEN 0 ELSE t.\"Starts\" END, "
     "\"Status\" = 'Processing' WHERE t.\"Status\" <> 'Done'"},
#endif
    {IBX__Q_ENQUEUE_ENV,
     "INSERT INTO {T} AS t (\"Source\", \"MessageId\", \"Topic\", \"Payload\", \"Hash\", \"Status\", "
     "\"DueTimeUtc\", \"NextAttemptAt\", \"TenantId\", \"AggregateType\", \"AggregateId\", \"Headers\", "
     "\"ExpiresAt\", \"Priority\") VALUES (?, ?, ?, ?, ?, 'Processing', "
     "to_timestamp(CAST(? AS bigint) / 1000.0), coalesce(to_timestamp(CAST(? AS bigint) / 1000.0), now()), "
     "?, ?, ?, CAST(? AS json), to_timestamp(CAST(? AS bigint) / 1000.0), CAST(? AS smallint)) "
     "ON CONFLICT (\"Source\", \"MessageId\") DO UPDATE SET " IBX__PG_REDELIVERY "\"Topic\" = excluded.\"Topic\", "
     "\"Payload\" = excluded.\"Payload\", \"Hash\" = excluded.\"Hash\", "
     "\"DueTimeUtc\" = excluded.\"DueTimeUtc\", \"NextAttemptAt\" = excluded.\"NextAttemptAt\", "
     "\"LastSeenUtc\" = now(), \"Attempt\" = CASE WHEN t.\"Status\" = 'Dead' THEN 0 ELSE t.\"Attempt\" END, "
     "\"Starts\" = CASE WHEN t.\"Status\" = 'Dead' THEN 0 ELSE t.\"Starts\" END, "
     "\"TenantId\" = coalesce(t.\"TenantId\", excluded.\"TenantId\"), "
     "\"AggregateType\" = coalesce(t.\"AggregateType\", excluded.\"AggregateType\"), "
     "\"AggregateId\" = coalesce(t.\"AggregateId\", excluded.\"AggregateId\"), "
     "\"Headers\" = coalesce(t.\"Headers\", excluded.\"Headers\"), "
     "\"ExpiresAt\" = coalesce(t.\"ExpiresAt\", excluded.\"ExpiresAt\"), "
     "\"Status\" = 'Processing' WHERE t.\"Status\" <> 'Done'"},
    {IBX__Q_MARK,
     "UPDATE {T} SET \"Status\" = CASE WHEN \"Status\" = 'Done' THEN 'Done' ELSE CAST(? AS varchar) END, "
     "\"Attempt\" = CASE WHEN \"Status\" = 'Dead' AND CAST(? AS varchar) = 'Processing' THEN 0 "
     "ELSE \"Attempt\" END, "
     "\"OwnerToken\" = CASE WHEN CAST(? AS varchar) IN ('Done', 'Dead') THEN NULL ELSE \"OwnerToken\" END, "
     "\"LockedUntil\" = CASE WHEN CAST(? AS varchar) IN ('Done', 'Dead') THEN NULL ELSE \"LockedUntil\" END, "
     "\"Starts\" = CASE WHEN \"Status\" = 'Dead' THEN 0 ELSE \"Starts\" END, \"LastSeenUtc\" = now() WHERE \"Source\" = ? AND \"MessageId\" = ?"},
    /* The pick is an ARRAY(...) of row addresses: an init plan, run once
     * (a LIMIT ... SKIP LOCKED subquery run twice would claim more than
     * asked), and the update finds its rows by address whatever the
     * statistics say. A locked row keeps its address until we update it. */
    {IBX__Q_CLAIM,
     "UPDATE {T} SET \"OwnerToken\" = CAST(? AS uuid), "
     "\"LockedUntil\" = now() + make_interval(secs => CAST(? AS integer)), \"Starts\" = \"Starts\" + 1 "
     "WHERE ctid = ANY (ARRAY(SELECT ctid FROM {T} WHERE " IBX__PG_CLAIM_ONLY " "
     "AND (\"NextAttemptAt\" <= now()) IS TRUE AND (\"LockedUntil\" IS NULL OR \"LockedUntil\" < now()) AND \"Starts\" < {Q} "
     IBX__PG_CLAIM_ORDER("") " LIMIT CAST(? AS integer) FOR UPDATE SKIP LOCKED)) "
     "RETURNING " IBX__PG_CLAIM_COLS},
    {IBX__Q_ACK,
     "UPDATE {T} SET \"Status\" = CASE WHEN " IBX__PG_MARKED " THEN 'Processing' ELSE 'Done' END, "
     "\"Starts\" = CASE WHEN " IBX__PG_MARKED " THEN greatest(\"Starts\" - 1, 0) ELSE \"Starts\" END, "
     "\"OwnerToken\" = NULL, \"LockedUntil\" = NULL, "
     "\"LastSeenUtc\" = now() WHERE " IBX__PG_OWNED IBX__PG_KEYS},
    {IBX__Q_ABANDON,
     "UPDATE {T} SET \"NextAttemptAt\" = now() + "
     "make_interval(secs => coalesce(CAST(? AS bigint) / 1000.0, least(60, 1 << least(\"Attempt\", 6)))), "
     "\"Attempt\" = \"Attempt\" + CAST(? AS integer), "
     "\"LastError\" = coalesce(CAST(? AS text), \"LastError\"), \"OwnerToken\" = NULL, \"LockedUntil\" = NULL, "
     "\"Starts\" = greatest(\"Starts\" - 1, 0) "
     "WHERE " IBX__PG_OWNED IBX__PG_KEYS},
    {IBX__Q_FAIL,
     "UPDATE {T} SET \"Status\" = CASE WHEN " IBX__PG_MARKED " THEN 'Processing' ELSE 'Dead' END, "
     "\"Starts\" = CASE WHEN " IBX__PG_MARKED " THEN greatest(\"Starts\" - 1, 0) ELSE \"Starts\" END, "
     "\"OwnerToken\" = NULL, \"LockedUntil\" = NULL, "
     "\"LastSeenUtc\" = now(), \"LastError\" = CAST(? AS text) WHERE " IBX__PG_OWNED IBX__PG_KEYS},
    {IBX__Q_EXTEND,
     "UPDATE {T} SET \"LockedUntil\" = now() + make_interval(secs => CAST(? AS bigint)) "
     "WHERE " IBX__PG_OWNED IBX__PG_KEYS},
    {IBX__Q_REAP,
     "UPDATE {T} SET \"OwnerToken\" = NULL, \"LockedUntil\" = NULL, \"Status\" = CASE WHEN \"Starts\" >= {Q} "
     "THEN 'Dead' ELSE \"Status\" END, \"LastError\" = CASE WHEN \"Starts\" >= {Q} THEN '" IBX__CRASH_LOOP "' "
     "ELSE \"LastError\" END WHERE \"Status\" = 'Processing' "
     "AND \"LockedUntil\" IS NOT NULL AND \"LockedUntil\" < now()"},
    {IBX__Q_HASH,
     "SELECT \"Hash\", \"Status\" FROM {T} WHERE \"Source\" = ? AND \"MessageId\" = ?"},
    {IBX__Q_GET,
     "SELECT " IBX__PG_COLS " FROM {T} WHERE \"Source\" = ? AND \"MessageId\" = ?"},
    /* By row address from an init plan: "IN (SELECT ... LIMIT ?)" is planned
     * without the limit, a hash join over the whole table (CORE-PLANS). */
    {IBX__Q_CLEANUP,
     "DELETE FROM {T} WHERE ctid = ANY (ARRAY(SELECT ctid "
     "FROM {T} WHERE \"Status\" = 'Done' AND \"LastSeenUtc\" < now() - make_interval(secs => "
     "CAST(? AS bigint) / 1000.0) ORDER BY \"LastSeenUtc\" LIMIT CAST(? AS integer)))"},
    {IBX__Q_STATS,
     "SELECT COUNT(*), CAST(floor(EXTRACT(EPOCH FROM now() - MIN(\"NextAttemptAt\")) * 1000) AS bigint) "
     "FROM {T} WHERE \"Status\" = 'Processing' AND \"NextAttemptAt\" <= now() AND "
     "(\"LockedUntil\" IS NULL OR \"LockedUntil\" < now())"},
#ifndef IBX_NO_DEAD_LETTERS
    {IBX__Q_DEAD_LIST,
     "SELECT " IBX__PG_COLS " FROM {T} WHERE " IBX__PG_DEAD " ORDER BY \"FirstSeenUtc\", \"Source\", "
     "\"MessageId\" LIMIT CAST(?7 AS bigint) OFFSET CAST(?8 AS bigint)"},
    {IBX__Q_DEAD_REPLAY,
     "UPDATE {T} SET \"Status\" = 'Processing', \"Attempt\" = 0, \"Starts\" = 0, \"NextAttemptAt\" = now(), "
     "\"OwnerToken\" = NULL, \"LockedUntil\" = NULL, \"ExpiresAt\" = NULL WHERE " IBX__PG_DEAD},
    /* The filter again on the row itself: a row a replay changed while the
     * DELETE waited for it is re-checked on its latest version (READ
     * COMMITTED re-evaluates only the target row's own conditions). */
    {IBX__Q_DEAD_PURGE,
     "DELETE FROM {T} WHERE (\"Source\", \"MessageId\") IN (SELECT \"Source\", \"MessageId\" FROM {T} "
     "WHERE " IBX__PG_DEAD " LIMIT CAST(?7 AS bigint)) AND " IBX__PG_DEAD},
    {IBX__Q_MOVE,
     "UPDATE {T} SET \"Status\" = 'Dead', \"LastError\" = CAST(?1 AS text), \"OwnerToken\" = NULL, "
     "\"LockedUntil\" = NULL WHERE \"Source\" = CAST(?2 AS text) AND \"MessageId\" = CAST(?3 AS text) AND "
     "\"Status\" = 'Processing' AND (\"LockedUntil\" IS NULL OR CAST(?4 AS integer) = 1)"},
    {IBX__Q_RUN_NOW,
     "UPDATE {T} SET \"NextAttemptAt\" = now() WHERE \"Source\" = CAST(?1 AS text) AND "
     "\"MessageId\" = CAST(?2 AS text) AND \"Status\" = 'Processing' AND \"LockedUntil\" IS NULL AND "
     "\"NextAttemptAt\" > now()"},
#endif
    {IBX__Q_PENDING,
     "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing'"},
#ifndef IBX_NO_METRICS_TEXT
    {IBX__Q_GAUGES,
     "SELECT COUNT(*), CAST(floor(EXTRACT(EPOCH FROM now() - MIN(\"NextAttemptAt\")) * 1000) AS bigint), "
     "(SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing' AND \"LockedUntil\" IS NOT NULL), "
     "(SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Dead'), "
     "(SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing' AND \"LockedUntil\" IS NULL "
     "AND \"NextAttemptAt\" > now()), "
     "(SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing' AND \"LockedUntil\" < now()) "
     "FROM {T} WHERE \"Status\" = 'Processing' AND \"NextAttemptAt\" <= now() AND "
     "(\"LockedUntil\" IS NULL OR \"LockedUntil\" < now())"},
#endif
    {IBX__Q_COUNT, NULL}};

static const char *const ibx__postgresql_inbox_ddl[] = {"SELECT pg_advisory_xact_lock(hashtext('ibx deploy {T}'))",
     "CREATE SCHEMA IF NOT EXISTS {S}",
     /* Fixed-width hot columns first, the texts after (docs/design/LAYOUT2.md:
      * a column after a variable-width one is found by walking the tuple).
      * Tables of older releases keep their order: obxctl rewrite. */
     "CREATE TABLE IF NOT EXISTS {T} (\n"
     "    \"NextAttemptAt\" timestamptz NOT NULL DEFAULT now(),\n"
     "    \"LockedUntil\"   timestamptz NULL,\n"
     "    \"FirstSeenUtc\"  timestamptz NOT NULL DEFAULT now(),\n"
     "    \"LastSeenUtc\"   timestamptz NOT NULL DEFAULT now(),\n"
     "    \"OwnerToken\"    uuid NULL,\n"
     "    \"Attempt\"       integer NOT NULL DEFAULT 0,\n"
     "    \"Starts\"        integer NOT NULL DEFAULT 0,\n"
     "    \"Priority\"      smallint NOT NULL DEFAULT 0,\n"
     "    \"Status\"        varchar(20) NOT NULL DEFAULT 'Seen',\n"
     "    \"Source\"        varchar(255) NOT NULL,\n"
     "    \"MessageId\"     varchar(255) NOT NULL,\n"
     "    \"Topic\"         varchar(255) NOT NULL DEFAULT '',\n"
     "    \"Payload\"       text NOT NULL DEFAULT '',\n"
     "    \"Hash\"          bytea NULL,\n"
     "    \"LastError\"     text NULL,\n"
     "    \"DueTimeUtc\"    timestamptz NULL{A},\n"
     "    PRIMARY KEY (\"Source\", \"MessageId\")\n"
     ")",
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_WorkQueue\" ON {T} (\"NextAttemptAt\") "
     "WHERE \"Status\" = 'Processing'",
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_Claim\" ON {T} (" IBX__PG_RANK("") ") WHERE " IBX__PG_CLAIM_ONLY,
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_Leased\" ON {T} (\"LockedUntil\") "
     "WHERE \"Status\" = 'Processing' AND \"LockedUntil\" IS NOT NULL",
     "CREATE INDEX IF NOT EXISTS \"IX_{N}_Cleanup\" ON {T} (\"LastSeenUtc\") WHERE \"Status\" = 'Done'",
     NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (ibx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * TenantId .. Headers: the envelope (NULL when a message has none). */
static const ibx__column ibx__postgresql_inbox_columns[] = {
    {"Starts", "integer NOT NULL DEFAULT 0"}, {"TenantId", "varchar(64) NULL"},
    {"AggregateType", "varchar(64) NULL"}, {"AggregateId", "varchar(128) NULL"}, {"Headers", "json NULL"},
    {"ExpiresAt", "timestamptz NULL"}, {"Priority", "smallint NOT NULL DEFAULT 0"}, /* IBX__PG_CLAIM_ORDER */
    {NULL, NULL}};
static const ibx__sqlset ibx__postgresql_inbox = {
    "now()",
    ibx__postgresql_inbox_ddl,
    ibx__postgresql_inbox_rows,
    ibx__postgresql_inbox_columns,
    0, /* claim_full_rows: the short row */
    NULL /* contract: none */
};
#define IBX__POSTGRESQL_SET &ibx__postgresql_inbox
#endif

/* DATETIME(6) holds UTC; these never pass through the session's time zone
 * (UNIX_TIMESTAMP and FROM_UNIXTIME would, on a caller's connection too). */
#define IBX__MY_MS(c) "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `" c "`) DIV 1000 AS SIGNED)"
#define IBX__MY_FROM_MS(p) "TIMESTAMPADD(MICROSECOND, " p " * 1000, '1970-01-01 00:00:00')"
#define IBX__MY_COLS                                                                          \
    "`Source`, `MessageId`, `Topic`, `Payload`, `Hash`, " IBX__MY_MS("FirstSeenUtc") ", "     \
    IBX__MY_MS("LastSeenUtc") ", `Status`, " IBX__MY_MS("LockedUntil") ", `OwnerToken`, "      \
    "`Attempt`, `LastError`, " IBX__MY_MS("NextAttemptAt") ", " IBX__MY_MS("DueTimeUtc") ", `Starts`, " \
    "`TenantId`, `AggregateType`, `AggregateId`, `Headers`, " IBX__MY_MS("ExpiresAt") ", `Priority`"
/* A claim's short row with `locked` as its lease: the read-back's stored
 * one, or the pick's time (IBX__MY_NOW_MS; ibx__claim_picked adds the
 * lease, and Starts + 1, to the row the pick read before its UPDATE). */
#define IBX__MY_CLAIM_COLS_AT(locked)                                                             \
    IBX__MY_MS("FirstSeenUtc") ", " IBX__MY_MS("LastSeenUtc") ", " locked ", "  \
    "`Attempt`, " IBX__MY_MS("NextAttemptAt") ", " IBX__MY_MS("DueTimeUtc") ", `Starts`, "          \
    IBX__MY_MS("ExpiresAt") ", " IBX__CLAIM_MASK(IBX__NN, "`", "`") ", `Source`, `MessageId`, `Topic`, "     \
    "`Payload`, `Hash`, `LastError`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`"
#define IBX__MY_CLAIM_COLS IBX__MY_CLAIM_COLS_AT(IBX__MY_MS("LockedUntil"))
#define IBX__MY_NOW_MS "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)"
/* The rows a key list names, by primary key (an IN subquery would scan and
 * wait on other workers' row locks); the lists' markers are numbered. */
#define IBX__MY_LIST(marker, alias) \
    "JSON_TABLE(" marker ", '$[*]' COLUMNS (`ibx_i` FOR ORDINALITY, `ibx_v` VARCHAR(255) PATH '$')) AS " alias
/* The rows of two lists of one length (sources, ids): the ids list is read
 * by position, not joined as a second JSON_TABLE: MariaDB joins two table
 * functions by nested loop, 100 x 100 rows compared per batch of 100. */
#define IBX__MY_BY_KEYS(sources, ids)                                                          \
    IBX__MY_LIST(sources, "s") " STRAIGHT_JOIN {T} FORCE INDEX (PRIMARY) ON {T}.`Source` = s.`ibx_v` AND " \
    "{T}.`MessageId` = JSON_VALUE(" ids ", CONCAT('$[', s.`ibx_i` - 1, ']'))"
#define IBX__MY_DONE "`Status` = 'Done'"

/* MariaDB 10.7+: no UPDATE ... RETURNING, so a claim picks keys with FOR
 * UPDATE SKIP LOCKED, updates, and reads back in one transaction (READ
 * COMMITTED). INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING (MariaDB
 * 10.5+, not MySQL) gives the dedup answer and the enqueue count in one
 * statement: the driver's row count cannot tell an insert from an
 * untouched Done row. SET runs left to right: Status is assigned last. */
#ifndef IBX_NO_MARIADB
/* A redelivery in flight: see IBX__SQLITE_MARK. The upsert marks first
 * (SET runs left to right: Topic and Payload are still the old ones). */
#define IBX__MY_MARKED "SUBSTRING(`OwnerToken`, 15, 1) = '0'"
#define IBX__MY_OWNED(o) "`OwnerToken` IN (" o ", INSERT(" o ", 15, 1, '0')) AND `Status` = 'Processing'"
#define IBX__MY_REDELIVERY                                                                              \
    "`OwnerToken` = IF(`OwnerToken` IS NOT NULL AND (CAST(`Topic` AS BINARY) <> CAST(VALUES(`Topic`) AS BINARY) " \
    "OR CAST(`Payload` AS BINARY) <> CAST(VALUES(`Payload`) AS BINARY)), INSERT(`OwnerToken`, 15, 1, '0'), "   \
    "`OwnerToken`), "
/* The dead-letter filter (ibx__dead_params): NULL arguments match all. */
/* The due rows (stats, gauges): not leased, and leased until a past time. */
#define IBX__MY_DUE                                                                                \
    "(SELECT `NextAttemptAt` FROM {T} WHERE `ReadyRank` <= UTC_TIMESTAMP(6) + INTERVAL "            \
    IBX__PRIORITY_HORIZON_S " SECOND AND `NextAttemptAt` <= UTC_TIMESTAMP(6) UNION ALL SELECT "     \
    "`NextAttemptAt` FROM {T} WHERE `LeasedUntil` < UTC_TIMESTAMP(6) AND `NextAttemptAt` <= "       \
    "UTC_TIMESTAMP(6))"
#define IBX__MY_DEAD                                                                               \
    "`DeadAt` IS NOT NULL AND `Topic` = COALESCE(?1, `Topic`) AND (?2 IS NULL OR "                     \
    "LOCATE(?2, COALESCE(`LastError`, '')) > 0) AND `FirstSeenUtc` >= COALESCE(" IBX__MY_FROM_MS("?3") \
    ", `FirstSeenUtc`) AND (?4 IS NULL OR `FirstSeenUtc` < " IBX__MY_FROM_MS("?4") ") AND "          \
    "`Source` = COALESCE(?5, `Source`) AND `MessageId` = COALESCE(?6, `MessageId`)"
static const ibx__stmt_row ibx__mariadb_inbox_rows[] = {
    {IBX__Q_SEEN,
     "INSERT INTO {T} (`Source`, `MessageId`, `Hash`) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE "
     "`LastSeenUtc` = IF(" IBX__MY_DONE ", `LastSeenUtc`, UTC_TIMESTAMP(6)), "
     "`Hash` = IF(" IBX__MY_DONE ", `Hash`, COALESCE(`Hash`, VALUES(`Hash`))) "
     "RETURNING `Status`, `Hash`"},
#if IBX__PLAIN_UPSERT
    {IBX__Q_ENQUEUE,
     "INSERT INTO {T} (`Source`, `MessageId`, `Topic`, `Payload`, `Hash`, `Status`, `DueTimeUtc`, "
     "`NextAttemptAt`) VALUES (?, ?, ?, ?, ?, 'Processing', " IBX__MY_FROM_MS("?") ", "
     "COALESCE(" IBX__MY_FROM_MS("?") ", UTC_TIMESTAMP(6))) ON DUPLICATE KEY UPDATE " IBX__MY_REDELIVERY
     "`Topic` = IF(" IBX__MY_DONE ", `Topic`, VALUES(`Topic`)), "
     "`Payload` = IF(" IBX__MY_DONE ", `Payload`, VALUES(`Payload`)), "
     "`Hash` = IF(" IBX__MY_DONE ", `Hash`, VALUES(`Hash`)), "
     "`DueTimeUtc` = IF(" IBX__MY_DONE ", `DueTimeUtc`, VALUES(`DueTimeUtc`)), "
     "`NextAttemptAt` = IF(" IBX__MY_DONE ", `NextAttemptAt`, VALUES(`NextAttemptAt`)), "
     "`LastSeenUtc` = IF(" IBX__MY_DONE ", `LastSeenUtc`, UTC_TIMESTAMP(6)), "
     "`Attempt` = IF(`Status` = 'Dead', 0, `Attempt`), `Starts` = IF(`Status` = 'Dead', 0, `Starts`), "
     "`Status` = IF(" IBX__MY_DONE ", 'Done', 'Processing') "
     "RETURNING `Status` = 'Processing'"},
#endif
    {IBX__Q_ENQUEUE_ENV,
     "INSERT INTO {T} (`Source`, `MessageId`, `Topic`, `Payload`, `Hash`, `Status`, `DueTimeUtc`, "
     "`NextAttemptAt`, `TenantId`, `AggregateType`, `AggregateId`, `Headers`, `ExpiresAt`, `Priority`) VALUES (?, "
     "?, ?, ?, ?, 'Processing', " IBX__MY_FROM_MS("?") ", COALESCE(" IBX__MY_FROM_MS("?") ", UTC_TIMESTAMP(6)), ?, ?, "
     "?, ?, " IBX__MY_FROM_MS("?") ", ?) ON DUPLICATE KEY UPDATE " IBX__MY_REDELIVERY
     "`Topic` = IF(" IBX__MY_DONE ", `Topic`, VALUES(`Topic`)), "
     "`Payload` = IF(" IBX__MY_DONE ", `Payload`, VALUES(`Payload`)), "
     "`Hash` = IF(" IBX__MY_DONE ", `Hash`, VALUES(`Hash`)), "
     "`DueTimeUtc` = IF(" IBX__MY_DONE ", `DueTimeUtc`, VALUES(`DueTimeUtc`)), "
     "`NextAttemptAt` = IF(" IBX__MY_DONE ", `NextAttemptAt`, VALUES(`NextAttemptAt`)), "
     "`LastSeenUtc` = IF(" IBX__MY_DONE ", `LastSeenUtc`, UTC_TIMESTAMP(6)), "
     "`Attempt` = IF(`Status` = 'Dead', 0, `Attempt`), `Starts` = IF(`Status` = 'Dead', 0, `Starts`), "
     "`TenantId` = IF(" IBX__MY_DONE ", `TenantId`, COALESCE(`TenantId`, VALUES(`TenantId`))), "
     "`AggregateType` = IF(" IBX__MY_DONE ", `AggregateType`, COALESCE(`AggregateType`, VALUES(`AggregateType`))), "
     "`AggregateId` = IF(" IBX__MY_DONE ", `AggregateId`, COALESCE(`AggregateId`, VALUES(`AggregateId`))), "
     "`Headers` = IF(" IBX__MY_DONE ", `Headers`, COALESCE(`Headers`, VALUES(`Headers`))), "
     "`ExpiresAt` = IF(" IBX__MY_DONE ", `ExpiresAt`, COALESCE(`ExpiresAt`, VALUES(`ExpiresAt`))), "
     "`Status` = IF(" IBX__MY_DONE ", 'Done', 'Processing') "
     "RETURNING `Status` = 'Processing'"},
    /* the count, as a row */
    {IBX__Q_MARK,
     "UPDATE {T} SET `Attempt` = IF(`Status` = 'Dead' AND ? = 'Processing', 0, `Attempt`), "
     "`OwnerToken` = IF(? IN ('Done', 'Dead'), NULL, `OwnerToken`), "
     "`LockedUntil` = IF(? IN ('Done', 'Dead'), NULL, `LockedUntil`), "
     "`Starts` = IF(`Status` = 'Dead', 0, `Starts`), "
     "`LastSeenUtc` = UTC_TIMESTAMP(6), `Status` = IF(" IBX__MY_DONE ", 'Done', ?) "
     "WHERE `Source` = ? AND `MessageId` = ?"},
    /* Checked again, and read back only with our token (see the outbox). */
    {IBX__Q_CLAIM,
     "UPDATE " IBX__MY_BY_KEYS("?3", "?4") " SET `OwnerToken` = ?1, "
     "`LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL ?2 SECOND, `Starts` = `Starts` + 1 WHERE {T}.`Status` = "
     "'Processing' AND ({T}.`LockedUntil` IS NULL OR {T}.`LockedUntil` < UTC_TIMESTAMP(6)) AND {T}.`Starts` < {Q}"},
    {IBX__Q_ACK,
     "UPDATE " IBX__MY_BY_KEYS("?2", "?3") " SET `Status` = IF(" IBX__MY_MARKED ", 'Processing', 'Done'), "
     "`Starts` = IF(" IBX__MY_MARKED ", GREATEST(`Starts` - 1, 0), `Starts`), `OwnerToken` = NULL, "
     "`LockedUntil` = NULL, `LastSeenUtc` = UTC_TIMESTAMP(6) WHERE " IBX__MY_OWNED("?1")},
    {IBX__Q_ABANDON,
     "UPDATE " IBX__MY_BY_KEYS("?5", "?6") " SET `NextAttemptAt` = UTC_TIMESTAMP(6) + INTERVAL "
     "COALESCE(?1, LEAST(60000, 1000 * (1 << LEAST(`Attempt`, 6)))) * 1000 MICROSECOND, "
     "`Attempt` = `Attempt` + ?2, `LastError` = COALESCE(?3, `LastError`), "
     "`OwnerToken` = NULL, `LockedUntil` = NULL, `Starts` = GREATEST(`Starts` - 1, 0) "
     "WHERE " IBX__MY_OWNED("?4")},
    {IBX__Q_FAIL,
     "UPDATE " IBX__MY_BY_KEYS("?3", "?4") " SET `Status` = IF(" IBX__MY_MARKED ", 'Processing', 'Dead'), "
     "`Starts` = IF(" IBX__MY_MARKED ", GREATEST(`Starts` - 1, 0), `Starts`), `OwnerToken` = NULL, "
     "`LockedUntil` = NULL, `LastSeenUtc` = UTC_TIMESTAMP(6), `LastError` = ?1 WHERE " IBX__MY_OWNED("?2")},
    /* IS NOT NULL keeps the scan to leased rows: a scanned row is
     * locked for a moment, and a concurrent claim would skip it. */
    {IBX__Q_EXTEND,
     "UPDATE " IBX__MY_BY_KEYS("?3", "?4") " SET `LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL ?1 SECOND "
     "WHERE " IBX__MY_OWNED("?2")},
    {IBX__Q_REAP,
     "UPDATE {T} SET `OwnerToken` = NULL, `LockedUntil` = NULL, `LastError` = IF(`Starts` >= {Q}, '"
     IBX__CRASH_LOOP "', `LastError`), `Status` = IF(`Starts` >= {Q}, 'Dead', `Status`) "
     "WHERE `LeasedUntil` < UTC_TIMESTAMP(6)"},
    {IBX__Q_HASH,
     "SELECT `Hash`, `Status` FROM {T} WHERE `Source` = ? AND `MessageId` = ?"},
    {IBX__Q_GET,
     "SELECT " IBX__MY_COLS " FROM {T} WHERE `Source` = ? AND `MessageId` = ?"},
    {IBX__Q_CLEANUP, IBX__MY_CLEANUP},
    /* Through the state columns' indexes: the due rows not leased (a due
     * row ranks at most 50 s after now) and those whose lease ran out. */
    {IBX__Q_STATS,
     "SELECT COUNT(*), CAST(FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(d.`NextAttemptAt`), UTC_TIMESTAMP(6)) "
     "/ 1000) AS SIGNED) FROM " IBX__MY_DUE " AS d"},
    {IBX__Q_PENDING, IBX__MY_PENDING},
#ifndef IBX_NO_METRICS_TEXT
    {IBX__Q_GAUGES,
     "SELECT COUNT(*), CAST(FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(d.`NextAttemptAt`), UTC_TIMESTAMP(6)) "
     "/ 1000) AS SIGNED), "
     "(SELECT COUNT(*) FROM {T} WHERE `LeasedUntil` IS NOT NULL), "
     "(SELECT COUNT(*) FROM {T} WHERE `DeadAt` IS NOT NULL), "
     "(SELECT COUNT(*) FROM {T} WHERE `ReadyRank` IS NOT NULL AND `NextAttemptAt` > UTC_TIMESTAMP(6)), "
     "(SELECT COUNT(*) FROM {T} WHERE `LeasedUntil` < UTC_TIMESTAMP(6)) "
     "FROM " IBX__MY_DUE " AS d"},
#endif
    /* A window of the work queue read without locks, then those rows
     * locked by key and checked again (as the outbox's pick does: a
     * locking read of the index walks every entry moved since the last
     * purge, and every leased row). The index is forced. */
    /* Ready rows in the claim's order, then leases that ran out (not
     * reaped yet: claimable as before layout 2). */
    /* The locked rows come back as the claim's short row (the window's
     * columns are named apart), so that the claim needs no read. */
    {IBX__Q_CLAIM_PICK,
     "SELECT " IBX__MY_CLAIM_COLS_AT(IBX__MY_NOW_MS) " FROM ((SELECT `Source` AS `ibx_s`, `MessageId` AS `ibx_m` FROM {T} "
     "FORCE INDEX (`IX_{N}_ReadyRank`) WHERE `NextAttemptAt` <= UTC_TIMESTAMP(6) AND `Starts` < {Q} "
     IBX__MY_CLAIM_ORDER("") " LIMIT ?2) UNION ALL (SELECT `Source`, `MessageId` FROM {T} FORCE INDEX "
     "(`IX_{N}_LeasedUntil`) WHERE `LeasedUntil` < UTC_TIMESTAMP(6) AND `NextAttemptAt` <= UTC_TIMESTAMP(6) "
     "AND `Starts` < {Q} LIMIT ?2)) AS c "
     "STRAIGHT_JOIN {T} AS t FORCE INDEX (PRIMARY) ON t.`Source` = c.`ibx_s` AND t.`MessageId` = c.`ibx_m` "
     "WHERE t.`Status` = 'Processing' AND t.`NextAttemptAt` <= UTC_TIMESTAMP(6) "
     "AND (t.`LockedUntil` IS NULL OR t.`LockedUntil` < UTC_TIMESTAMP(6)) AND t.`Starts` < {Q} "
     "LIMIT ?1 FOR UPDATE SKIP LOCKED"},
    {IBX__Q_CLAIM_READ,
     "SELECT " IBX__MY_CLAIM_COLS " FROM " IBX__MY_BY_KEYS("?3", "?4") " WHERE {T}.`OwnerToken` = ?1"},
#ifndef IBX_NO_DEAD_LETTERS
    {IBX__Q_DEAD_LIST,
     "SELECT " IBX__MY_COLS " FROM {T} WHERE " IBX__MY_DEAD " ORDER BY `DeadAt`, `Source`, "
     "`MessageId` LIMIT ?7 OFFSET ?8"},
    {IBX__Q_DEAD_REPLAY,
     "UPDATE {T} SET `Attempt` = 0, `Starts` = 0, `NextAttemptAt` = UTC_TIMESTAMP(6), `OwnerToken` = NULL, "
     "`LockedUntil` = NULL, `ExpiresAt` = NULL, `Status` = 'Processing' WHERE " IBX__MY_DEAD},
    {IBX__Q_DEAD_PURGE,
     "DELETE FROM {T} WHERE " IBX__MY_DEAD " ORDER BY `DeadAt` LIMIT ?7"},
    {IBX__Q_MOVE,
     "UPDATE {T} SET `LastError` = ?1, `OwnerToken` = NULL, `Status` = 'Dead', `LockedUntil` = NULL "
     "WHERE `Source` = ?2 AND `MessageId` = ?3 AND `Status` = 'Processing' AND (`LockedUntil` IS NULL OR ?4 = 1)"},
    {IBX__Q_RUN_NOW,
     "UPDATE {T} SET `NextAttemptAt` = UTC_TIMESTAMP(6) WHERE `Source` = ?1 AND `MessageId` = ?2 AND "
     "`Status` = 'Processing' AND `LockedUntil` IS NULL AND `NextAttemptAt` > UTC_TIMESTAMP(6)"},
#endif
    {IBX__Q_COUNT, NULL}};

/* Storage layout 2 (see the outbox's; docs/UPGRADING.md): the hot
 * fixed-width columns first, OwnerToken of the UUID type, and no index that
 * leads with Status: the state columns ReadyRank (Processing, not leased),
 * LeasedUntil (Processing, leased), DoneAt and DeadAt are NULL outside
 * their state, each indexed alone, so a claim moves two secondary entries
 * (ready out, leased in) and an ack two (leased out, done in). An existing
 * table gets them by online steps and keeps layout 1's Status-led indexes,
 * which the previous release forces (obxctl upgrade-keys drops them). */
static const char *const ibx__mariadb_inbox_ddl[] = {"CREATE TABLE IF NOT EXISTS {T} (\n"
     "    `Source`        VARCHAR(255) NOT NULL,\n"
     "    `MessageId`     VARCHAR(255) NOT NULL,\n"
     "    `NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
     "    `LockedUntil`   DATETIME(6) NULL,\n"
     "    `LastSeenUtc`   DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
     "    `FirstSeenUtc`  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n"
     "    `OwnerToken`    UUID NULL,\n"
     "    `Attempt`       INT NOT NULL DEFAULT 0,\n"
     "    `Starts`        INT NOT NULL DEFAULT 0,\n"
     "    `Priority`      TINYINT NOT NULL DEFAULT 0,\n"
     "    `Status`        VARCHAR(20) NOT NULL DEFAULT 'Seen',\n"
     "    `Topic`         VARCHAR(255) NOT NULL DEFAULT '',\n"
     "    `Payload`       LONGTEXT NOT NULL DEFAULT '',\n"
     "    `Hash`          BLOB NULL,\n"
     "    `LastError`     LONGTEXT NULL,\n"
     "    `DueTimeUtc`    DATETIME(6) NULL{A},\n"
     "    PRIMARY KEY (`Source`, `MessageId`)\n"
     ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin",
     IBX__MY_STATE_INDEXES,
     NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (ibx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * TenantId .. Headers: the envelope (NULL when a message has none). */
static const ibx__column ibx__mariadb_inbox_columns[] = {
    {"Starts", "INT NOT NULL DEFAULT 0"}, {"TenantId", "VARCHAR(64) NULL"}, {"AggregateType", "VARCHAR(64) NULL"},
    {"AggregateId", "VARCHAR(128) NULL"}, {"Headers", "JSON NULL"}, {"ExpiresAt", "DATETIME(6) NULL"},
    {"Priority", "TINYINT NOT NULL DEFAULT 0"},
    {"ReadyRank", IBX__MY_READY_RANK("`Status` = 'Processing' AND `LockedUntil` IS NULL")}, /* IBX__MY_CLAIM_ORDER */
    {"LeasedUntil", "DATETIME(6) AS (IF(`Status` = 'Processing', `LockedUntil`, NULL)) VIRTUAL"},
    {"DoneAt", "DATETIME(6) AS (IF(`Status` = 'Done', `LastSeenUtc`, NULL)) VIRTUAL"},
    {"DeadAt", "DATETIME(6) AS (IF(`Status` = 'Dead', `FirstSeenUtc`, NULL)) VIRTUAL"},
    {NULL, NULL}};
/* ibx_store_upgrade on a table deployed before layout 2 (see the outbox's):
 * the owner token to the UUID type (a table copy), then layout 1's
 * Status-led indexes dropped (ClaimRank stays: see the outbox's). */
static const ibx__contract ibx__mariadb_inbox_contract[] = {
    {"SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{N}' "
     "AND COLUMN_NAME = 'OwnerToken' AND DATA_TYPE = 'uuid'",
     "ALTER TABLE {T} MODIFY `OwnerToken` UUID NULL, ALGORITHM=COPY, LOCK=SHARED", IBX_UPGRADE_KEYS},
    {IBX__MY_NO_INDEX("Claim")}, {IBX__MY_NO_INDEX("WorkQueue")}, {IBX__MY_NO_INDEX("Leased")},
    {IBX__MY_NO_INDEX("Cleanup")},
    {NULL, NULL, 0}};
static const ibx__sqlset ibx__mariadb_inbox = {
    "UTC_TIMESTAMP(6)",
    ibx__mariadb_inbox_ddl,
    ibx__mariadb_inbox_rows,
    ibx__mariadb_inbox_columns,
    0, /* claim_full_rows: the short row */
    ibx__mariadb_inbox_contract
};
#define IBX__MARIADB_SET &ibx__mariadb_inbox
#endif

/* SQL Server: DATETIME2(3) UTC times (the seed's) to and from Unix ms;
 * DATEADD takes an int, so whole days and the rest are added apart. */
#define IBX__MS_EPOCH "CAST('19700101' AS DATETIME2(3))"
#define IBX__MS_FROM_MS(v, base) \
    "DATEADD(MILLISECOND, CAST(" v " % 86400000 AS INT), DATEADD(DAY, CAST(" v " / 86400000 AS INT), " base "))"
#define IBX__MS_MS(c) "DATEDIFF_BIG(MILLISECOND, " IBX__MS_EPOCH ", " c ")"
/* A message row; t is "t." or "inserted." (a claim's OUTPUT). */
#define IBX__MS_COLS(t)                                                                           \
    t "[Source], " t "[MessageId], " t "[Topic], " t "[Payload], " t "[Hash], "                     \
    IBX__MS_MS(t "[FirstSeenUtc]") ", " IBX__MS_MS(t "[LastSeenUtc]") ", " t "[Status], "          \
    IBX__MS_MS(t "[LockedUntil]") ", LOWER(CONVERT(NCHAR(36), " t "[OwnerToken])), " t "[Attempt], " \
    t "[LastError], " IBX__MS_MS(t "[NextAttemptAt]") ", " IBX__MS_MS(t "[DueTimeUtc]") ", " t "[Starts], " \
    t "[TenantId], " t "[AggregateType], " t "[AggregateId], " t "[Headers], " IBX__MS_MS(t "[ExpiresAt]")
/* Keys compare byte for byte, as on the other databases. */
#define IBX__MS_BIN "COLLATE Latin1_General_100_BIN2"
/* A redelivery in flight: see IBX__SQLITE_MARK. */
#define IBX__MS_MARK(t) "CAST(STUFF(CONVERT(NCHAR(36), " t "), 15, 1, N'0') AS UNIQUEIDENTIFIER)"
#define IBX__MS_MARKED "SUBSTRING(CONVERT(NCHAR(36), t.[OwnerToken]), 15, 1) = N'0'"
#define IBX__MS_REDELIVERY                                                                              \
    "[OwnerToken] = CASE WHEN t.[OwnerToken] IS NOT NULL AND (CAST(t.[Topic] AS VARBINARY(MAX)) <> "        \
    "CAST(s.[Topic] AS VARBINARY(MAX)) OR CAST(t.[Payload] AS VARBINARY(MAX)) <> CAST(s.[Payload] AS "      \
    "VARBINARY(MAX))) THEN " IBX__MS_MARK("t.[OwnerToken]") " ELSE t.[OwnerToken] END, "
/* A settle procedure: one UPDATE of the caller's leased rows named by two
 * JSON arrays (sources, message ids) zipped by position, then the count. */
#define IBX__MS_SETTLE(name, params, set)                                                         \
    "CREATE OR ALTER PROCEDURE {S}.[{N}_" name "] " params " AS\n"                                \
    "BEGIN\n"                                                                                     \
    "    SET NOCOUNT ON;\n"                                                                       \
    "    UPDATE t SET " set "\n"                                                                  \
    "      FROM {T} AS t JOIN (SELECT CAST(s.[value] AS NVARCHAR(255)) " IBX__MS_BIN " AS [Source],\n" \
    "                                 CAST(m.[value] AS NVARCHAR(255)) " IBX__MS_BIN " AS [MessageId]\n" \
    "                            FROM OPENJSON(@Sources) AS s JOIN OPENJSON(@MessageIds) AS m\n"  \
    "                              ON m.[key] = s.[key]) AS k\n"                                  \
    "        ON t.[Source] = k.[Source] AND t.[MessageId] = k.[MessageId]\n"                      \
    "     WHERE t.[OwnerToken] IN (@OwnerToken, " IBX__MS_MARK("@OwnerToken") ") AND t.[Status] = 'Processing';\n" \
    "    SELECT @@ROWCOUNT;\n"                                                                    \
    "END"
#define IBX__MS_LIST_PARAMS "@Sources NVARCHAR(MAX), @MessageIds NVARCHAR(MAX)"

/* SQL Server 2016 SP1+ (CREATE OR ALTER, OPENJSON: compatibility level 130),
 * the seed's table. The key is NONCLUSTERED: two NVARCHAR(255) columns are
 * over the 900-byte limit of a clustered key (1700 for nonclustered); the
 * table clusters on an identity column [Seq] (a heap would keep the pages
 * cleanup empties). SQL Server ignores trailing spaces when comparing, in
 * every collation: keys ending in a space are refused (ibx__check_key). Dedup
 * and enqueue are MERGE ... WITH (HOLDLOCK): two first sightings of one key
 * serialize instead of one failing on the key. The claim and the settles are
 * procedures; the claim locks with UPDLOCK, READPAST, ROWLOCK and
 * READCOMMITTEDLOCK (READPAST needs locking reads under
 * READ_COMMITTED_SNAPSHOT). Written to the documentation; not yet run
 * against a server. */
#ifndef IBX_NO_SQLSERVER
/* The dead-letter filter (ibx__dead_params): NULL arguments match all. */
#define IBX__MS_DEAD                                                                               \
    "t.[Status] = 'Dead' AND t.[Topic] = COALESCE(?1, t.[Topic]) AND (?2 IS NULL OR "               \
    "CHARINDEX(?2, COALESCE(t.[LastError], N'')) > 0) AND (?3 IS NULL OR t.[FirstSeenUtc] >= "       \
    IBX__MS_FROM_MS("?3", IBX__MS_EPOCH) ") AND (?4 IS NULL OR t.[FirstSeenUtc] < "                 \
    IBX__MS_FROM_MS("?4", IBX__MS_EPOCH) ") AND t.[Source] = COALESCE(?5, t.[Source]) AND "         \
    "t.[MessageId] = COALESCE(?6, t.[MessageId])"
static const ibx__stmt_row ibx__sqlserver_inbox_rows[] = {
    {IBX__Q_SEEN,
     "MERGE {T} WITH (HOLDLOCK) AS t USING (SELECT ? AS [Source], ? AS [MessageId], ? AS [Hash]) AS s "
     "ON t.[Source] = s.[Source] AND t.[MessageId] = s.[MessageId] "
     "WHEN MATCHED THEN UPDATE SET "
     "[LastSeenUtc] = CASE WHEN t.[Status] = 'Done' THEN t.[LastSeenUtc] ELSE SYSUTCDATETIME() END, "
     "[Hash] = CASE WHEN t.[Status] = 'Done' THEN t.[Hash] ELSE COALESCE(t.[Hash], s.[Hash]) END "
     "WHEN NOT MATCHED THEN INSERT ([Source], [MessageId], [Hash]) VALUES (s.[Source], s.[MessageId], s.[Hash]) "
     "OUTPUT inserted.[Status], inserted.[Hash];"},
#if IBX__PLAIN_UPSERT
    {IBX__Q_ENQUEUE,
     "MERGE {T} WITH (HOLDLOCK) AS t USING (SELECT ?1 AS [Source], ?2 AS [MessageId], ?3 AS [Topic], "
     "?4 AS [Payload], ?5 AS [Hash], " IBX__MS_FROM_MS("?6", IBX__MS_EPOCH) " AS [Due], "
     "COALESCE(" IBX__MS_FROM_MS("?7", IBX__MS_EPOCH) ", SYSUTCDATETIME()) AS [NextAt]) AS s "
     "ON t.[Source] = s.[Source] AND t.[MessageId] = s.[MessageId] "
     "WHEN MATCHED AND t.[Status] <> 'Done' THEN UPDATE SET " IBX__MS_REDELIVERY
     "[Topic] = s.[Topic], [Payload] = s.[Payload], "
     "[Hash] = s.[Hash], [DueTimeUtc] = s.[Due], [NextAttemptAt] = s.[NextAt], "
     "[LastSeenUtc] = SYSUTCDATETIME(), [Attempt] = CASE WHEN t.[Status] = 'Dead' THEN 0 ELSE t.[Attempt] END, "
     "[Starts] = CASE WHEN t.[Status] = 'Dead' THEN 0 ELSE t.[Starts] END, [Status] = 'Processing' "
     "WHEN NOT MATCHED THEN INSERT ([Source], [MessageId], [Topic], [Payload], [Hash], [Status], "
     "[DueTimeUtc], [NextAttemptAt]) VALUES (s.[Source], s.[MessageId], s.[Topic], s.[Payload], s.[Hash], "
     "'Processing', s.[Due], s.[NextAt]);"},
#endif
    {IBX__Q_ENQUEUE_ENV,
     "MERGE {T} WITH (HOLDLOCK) AS t USING (SELECT ?1 AS [Source], ?2 AS [MessageId], ?3 AS [Topic], "
     "?4 AS [Payload], ?5 AS [Hash], " IBX__MS_FROM_MS("?6", IBX__MS_EPOCH) " AS [Due], "
     "COALESCE(" IBX__MS_FROM_MS("?7", IBX__MS_EPOCH) ", SYSUTCDATETIME()) AS [NextAt], ?8 AS [TenantId], "
     "?9 AS [AggregateType], ?10 AS [AggregateId], ?11 AS [Headers], "
     IBX__MS_FROM_MS("?12", IBX__MS_EPOCH) " AS [ExpiresAt], ?13 AS [Priority]) AS s "
     "ON t.[Source] = s.[Source] AND t.[MessageId] = s.[MessageId] "
     "WHEN MATCHED AND t.[Status] <> 'Done' THEN UPDATE SET " IBX__MS_REDELIVERY
     "[Topic] = s.[Topic], [Payload] = s.[Payload], "
     "[Hash] = s.[Hash], [DueTimeUtc] = s.[Due], [NextAttemptAt] = s.[NextAt], "
     "[LastSeenUtc] = SYSUTCDATETIME(), [Attempt] = CASE WHEN t.[Status] = 'Dead' THEN 0 ELSE t.[Attempt] END, "
     "[Starts] = CASE WHEN t.[Status] = 'Dead' THEN 0 ELSE t.[Starts] END, "
     "[TenantId] = COALESCE(t.[TenantId], s.[TenantId]), "
     "[AggregateType] = COALESCE(t.[AggregateType], s.[AggregateType]), "
     "[AggregateId] = COALESCE(t.[AggregateId], s.[AggregateId]), "
     "[Headers] = COALESCE(t.[Headers], s.[Headers]), [ExpiresAt] = COALESCE(t.[ExpiresAt], s.[ExpiresAt]), "
     "[Status] = 'Processing' "
     "WHEN NOT MATCHED THEN INSERT ([Source], [MessageId], [Topic], [Payload], [Hash], [Status], "
     "[DueTimeUtc], [NextAttemptAt], [TenantId], [AggregateType], [AggregateId], [Headers], [ExpiresAt], "
     "[Priority]) VALUES (s.[Source], s.[MessageId], s.[Topic], s.[Payload], s.[Hash], 'Processing', s.[Due], "
     "s.[NextAt], s.[TenantId], s.[AggregateType], s.[AggregateId], s.[Headers], s.[ExpiresAt], s.[Priority]);"},
    {IBX__Q_MARK,
     "UPDATE {T} SET [Status] = CASE WHEN [Status] = 'Done' THEN 'Done' ELSE ? END, "
     "[Attempt] = CASE WHEN [Status] = 'Dead' AND ? = 'Processing' THEN 0 ELSE [Attempt] END, "
     "[OwnerToken] = CASE WHEN ? IN ('Done', 'Dead') THEN NULL ELSE [OwnerToken] END, "
     "[LockedUntil] = CASE WHEN ? IN ('Done', 'Dead') THEN NULL ELSE [LockedUntil] END, "
     "[Starts] = CASE WHEN [Status] = 'Dead' THEN 0 ELSE [Starts] END, [LastSeenUtc] = SYSUTCDATETIME() WHERE [Source] = ? AND [MessageId] = ?"},
    {IBX__Q_CLAIM,
     "{CALL {S}.[{N}_Claim](?, ?, ?, {Q})}"},
    {IBX__Q_ACK,
     "{CALL {S}.[{N}_Ack](?, ?, ?)}"},
    {IBX__Q_ABANDON,
     "{CALL {S}.[{N}_Abandon](?, ?, ?, ?, ?, ?)}"},
    {IBX__Q_FAIL,
     "{CALL {S}.[{N}_Fail](?, ?, ?, ?)}"},
    {IBX__Q_EXTEND,
     "UPDATE t SET [LockedUntil] = DATEADD(SECOND, ?1, SYSUTCDATETIME()) "
     "FROM {T} AS t JOIN (SELECT CAST(s.[value] AS NVARCHAR(255)) " IBX__MS_BIN " AS [Source], "
     "CAST(m.[value] AS NVARCHAR(255)) " IBX__MS_BIN " AS [MessageId] "
     "FROM OPENJSON(?3) AS s JOIN OPENJSON(?4) AS m ON m.[key] = s.[key]) AS k "
     "ON t.[Source] = k.[Source] AND t.[MessageId] = k.[MessageId] "
     "WHERE t.[OwnerToken] IN (?2, " IBX__MS_MARK("?2") ") AND t.[Status] = 'Processing'"},
    {IBX__Q_REAP,
     "{CALL {S}.[{N}_ReapExpired]({Q})}"},
    {IBX__Q_HASH,
     "SELECT [Hash], [Status] FROM {T} WHERE [Source] = ? AND [MessageId] = ?"},
    {IBX__Q_GET,
     "SELECT " IBX__MS_COLS("t.") " FROM {T} AS t WHERE t.[Source] = ? AND t.[MessageId] = ?"},
    {IBX__Q_CLEANUP,
     "WITH old AS (SELECT TOP (?2) [Source] FROM {T} WHERE [Status] = 'Done' AND [LastSeenUtc] < "
     IBX__MS_FROM_MS("-?1", "SYSUTCDATETIME()") " ORDER BY [LastSeenUtc]) DELETE FROM old"},
    {IBX__Q_STATS,
     "SELECT COUNT_BIG(*), DATEDIFF_BIG(MILLISECOND, MIN([NextAttemptAt]), SYSUTCDATETIME()) FROM {T} "
     "WHERE [Status] = 'Processing' AND [NextAttemptAt] <= SYSUTCDATETIME() AND "
     "([LockedUntil] IS NULL OR [LockedUntil] < SYSUTCDATETIME())"},
#ifndef IBX_NO_DEAD_LETTERS
    {IBX__Q_DEAD_LIST,
     "SELECT " IBX__MS_COLS("t.") " FROM {T} AS t WHERE " IBX__MS_DEAD " ORDER BY t.[FirstSeenUtc], "
     "t.[Source], t.[MessageId] OFFSET ?8 ROWS FETCH NEXT ?7 ROWS ONLY"},
    {IBX__Q_DEAD_REPLAY,
     "UPDATE t SET [Status] = 'Processing', [Attempt] = 0, [Starts] = 0, [NextAttemptAt] = SYSUTCDATETIME(), "
     "[OwnerToken] = NULL, [LockedUntil] = NULL, [ExpiresAt] = NULL FROM {T} AS t WHERE " IBX__MS_DEAD},
    {IBX__Q_DEAD_PURGE,
     "WITH d AS (SELECT TOP (?7) t.[Source] FROM {T} AS t WHERE " IBX__MS_DEAD ") DELETE FROM d"},
    {IBX__Q_MOVE,
     "UPDATE t SET [Status] = 'Dead', [LastError] = ?1, [OwnerToken] = NULL, [LockedUntil] = NULL "
     "FROM {T} AS t WHERE t.[Source] = ?2 AND t.[MessageId] = ?3 AND t.[Status] = 'Processing' AND "
     "(t.[LockedUntil] IS NULL OR ?4 = 1)"},
    {IBX__Q_RUN_NOW,
     "UPDATE t SET [NextAttemptAt] = SYSUTCDATETIME() FROM {T} AS t WHERE t.[Source] = ?1 AND "
     "t.[MessageId] = ?2 AND t.[Status] = 'Processing' AND t.[LockedUntil] IS NULL AND "
     "t.[NextAttemptAt] > SYSUTCDATETIME()"},
#endif
    {IBX__Q_PENDING,
     "SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 'Processing'"},
#ifndef IBX_NO_METRICS_TEXT
    {IBX__Q_GAUGES,
     "SELECT COUNT_BIG(*), DATEDIFF_BIG(MILLISECOND, MIN([NextAttemptAt]), SYSUTCDATETIME()), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 'Processing' AND [LockedUntil] IS NOT NULL), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 'Dead'), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 'Processing' AND [LockedUntil] IS NULL "
     "AND [NextAttemptAt] > SYSUTCDATETIME()), "
     "(SELECT COUNT_BIG(*) FROM {T} WHERE [Status] = 'Processing' AND [LockedUntil] < SYSUTCDATETIME()) "
     "FROM {T} "
     "WHERE [Status] = 'Processing' AND [NextAttemptAt] <= SYSUTCDATETIME() AND "
     "([LockedUntil] IS NULL OR [LockedUntil] < SYSUTCDATETIME())"},
#endif
    {IBX__Q_COUNT, NULL}};

static const char *const ibx__sqlserver_inbox_ddl[] = {IBX__MS_DEPLOY_LOCK,
      "IF SCHEMA_ID(PARSENAME(N'{S}', 1)) IS NULL EXEC sp_executesql N'CREATE SCHEMA {S}'",
      "IF OBJECT_ID(N'{T}', N'U') IS NULL\n"
      "CREATE TABLE {T} (\n"
      "    [Source]        NVARCHAR(255) " IBX__MS_BIN " NOT NULL,\n"
      "    [MessageId]     NVARCHAR(255) " IBX__MS_BIN " NOT NULL,\n"
      "    [Topic]         NVARCHAR(255) NOT NULL DEFAULT N'',\n"
      "    [Payload]       NVARCHAR(MAX) NOT NULL DEFAULT N'',\n"
      "    [Hash]          VARBINARY(MAX) NULL,\n"
      "    [FirstSeenUtc]  DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),\n"
      "    [LastSeenUtc]   DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),\n"
      "    [Status]        VARCHAR(20) NOT NULL DEFAULT 'Seen',\n"
      "    [LockedUntil]   DATETIME2(3) NULL,\n"
      "    [OwnerToken]    UNIQUEIDENTIFIER NULL,\n"
      "    [Attempt]       INT NOT NULL DEFAULT 0,\n"
      "    [LastError]     NVARCHAR(MAX) NULL,\n"
      "    [NextAttemptAt] DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),\n"
      "    [DueTimeUtc]    DATETIME2(3) NULL{A},\n"
      "    [Seq]           BIGINT IDENTITY(1, 1) NOT NULL,\n"
      "    CONSTRAINT [PK_{N}] PRIMARY KEY NONCLUSTERED ([Source], [MessageId]),\n"
      "    CONSTRAINT [CX_{N}] UNIQUE CLUSTERED ([Seq])\n"
      ")",
      "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_WorkQueue', 'IndexID') IS NULL\n"
      "CREATE INDEX [IX_{N}_WorkQueue] ON {T} ([NextAttemptAt]) INCLUDE ([LockedUntil], [OwnerToken]) "
      "WHERE [Status] = 'Processing'",
      "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_Leased', 'IndexID') IS NULL\n"
      "CREATE INDEX [IX_{N}_Leased] ON {T} ([LockedUntil]) "
      "WHERE [Status] = 'Processing' AND [LockedUntil] IS NOT NULL",
      "IF INDEXPROPERTY(OBJECT_ID(N'{T}'), N'IX_{N}_Cleanup', 'IndexID') IS NULL\n"
      "CREATE INDEX [IX_{N}_Cleanup] ON {T} ([LastSeenUtc]) WHERE [Status] = 'Done'",
      "CREATE OR ALTER PROCEDURE {S}.[{N}_Claim] @OwnerToken UNIQUEIDENTIFIER, @LeaseSeconds INT, "
      "@BatchSize INT, @MaxStarts INT = 3 AS\n"
      "BEGIN\n"
      "    SET NOCOUNT ON;\n"
      "    WITH picked AS (\n"
      "        SELECT TOP (@BatchSize) * FROM {T} WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)\n"
      "         WHERE [Status] = 'Processing' AND [NextAttemptAt] <= SYSUTCDATETIME()\n"
      "           AND ([LockedUntil] IS NULL OR [LockedUntil] < SYSUTCDATETIME()) AND [Starts] < @MaxStarts\n"
      "         ORDER BY [NextAttemptAt])\n"
      "    UPDATE picked SET [OwnerToken] = @OwnerToken,\n"
      "           [LockedUntil] = DATEADD(SECOND, @LeaseSeconds, SYSUTCDATETIME()), [Starts] = [Starts] + 1\n"
      "    OUTPUT " IBX__MS_COLS("inserted.") ";\n"
      "END",
      IBX__MS_SETTLE("Ack", "@OwnerToken UNIQUEIDENTIFIER, " IBX__MS_LIST_PARAMS,
                     "[Status] = CASE WHEN " IBX__MS_MARKED " THEN 'Processing' ELSE 'Done' END, "
                     "[Starts] = CASE WHEN " IBX__MS_MARKED " AND t.[Starts] > 0 THEN t.[Starts] - 1 "
                     "ELSE t.[Starts] END, [OwnerToken] = NULL, [LockedUntil] = NULL, "
                     "[LastSeenUtc] = SYSUTCDATETIME()"),
      /* No delay: the default backoff, min(60 s, 2^Attempt s). */
      IBX__MS_SETTLE("Abandon", "@DelayMs BIGINT, @Attempts INT, @LastError NVARCHAR(MAX), "
                     "@OwnerToken UNIQUEIDENTIFIER, " IBX__MS_LIST_PARAMS,
                     "[NextAttemptAt] = " IBX__MS_FROM_MS("COALESCE(@DelayMs, CASE WHEN t.[Attempt] >= 6 "
                     "THEN 60000 ELSE 1000 * POWER(2, t.[Attempt]) END)", "SYSUTCDATETIME()") ", "
                     "[Attempt] = t.[Attempt] + @Attempts, [LastError] = COALESCE(@LastError, t.[LastError]), "
                     "[OwnerToken] = NULL, [LockedUntil] = NULL, "
                     "[Starts] = CASE WHEN t.[Starts] > 0 THEN t.[Starts] - 1 ELSE 0 END"),
      IBX__MS_SETTLE("Fail", "@LastError NVARCHAR(MAX), @OwnerToken UNIQUEIDENTIFIER, " IBX__MS_LIST_PARAMS,
                     "[Status] = CASE WHEN " IBX__MS_MARKED " THEN 'Processing' ELSE 'Dead' END, "
                     "[Starts] = CASE WHEN " IBX__MS_MARKED " AND t.[Starts] > 0 THEN t.[Starts] - 1 "
                     "ELSE t.[Starts] END, [OwnerToken] = NULL, [LockedUntil] = NULL, "
                     "[LastSeenUtc] = SYSUTCDATETIME(), [LastError] = @LastError"),
      "CREATE OR ALTER PROCEDURE {S}.[{N}_ReapExpired] @MaxStarts INT = 3 AS\n"
      "BEGIN\n"
      "    SET NOCOUNT ON;\n"
      "    UPDATE {T} SET [OwnerToken] = NULL, [LockedUntil] = NULL,\n"
      "           [Status] = CASE WHEN [Starts] >= @MaxStarts THEN 'Dead' ELSE [Status] END,\n"
      "           [LastError] = CASE WHEN [Starts] >= @MaxStarts THEN N'crash loop: claimed '\n"
      "               + CAST(@MaxStarts AS NVARCHAR(11)) + N' times without an outcome (the handler crashed "
      "or was killed, or its lease expired)' ELSE [LastError] END\n"
      "     WHERE [Status] = 'Processing' AND [LockedUntil] IS NOT NULL AND [LockedUntil] < SYSUTCDATETIME();\n"
      "    SELECT @@ROWCOUNT;\n"
      "END",
      "IF @@TRANCOUNT > 0 AND (@@OPTIONS & 2) = 0 COMMIT;", /* sqlcmd; the library commits itself */
      NULL};
/* Columns added since the first release, oldest first: a new column is
 * one more entry here and in each other dialect's set (ibx__sqlset).
 * Starts: handler starts since the last outcome (crash-loop quarantine).
 * TenantId .. Headers: the envelope (NULL when a message has none). */
static const ibx__column ibx__sqlserver_inbox_columns[] = {
    {"Starts", "INT NOT NULL DEFAULT 0"}, {"TenantId", "NVARCHAR(64) NULL"}, {"AggregateType", "NVARCHAR(64) NULL"},
    {"AggregateId", "NVARCHAR(128) NULL"}, {"Headers", "NVARCHAR(MAX) NULL"},
    {"ExpiresAt", "DATETIME2(3) NULL"},
    {"Priority", "SMALLINT NOT NULL DEFAULT 0"}, /* stored; the claim orders by due time alone */
    {NULL, NULL}};
static const ibx__sqlset ibx__sqlserver_inbox = {
    "SYSUTCDATETIME()",
    ibx__sqlserver_inbox_ddl,
    ibx__sqlserver_inbox_rows,
    ibx__sqlserver_inbox_columns,
    1, /* claim_full_rows: the rows of the deployed <table>_Claim */
    NULL /* contract: none */
};
#define IBX__SQLSERVER_SET &ibx__sqlserver_inbox
#endif

/* >>common-begin sqlsets */

/* The statement sets by dialect (ibx_dialect order); a dialect left out of
 * the build (IBX_NO_<DIALECT>) has none. */
#ifndef IBX__SQLITE_SET
#define IBX__SQLITE_SET NULL
#endif
#ifndef IBX__POSTGRESQL_SET
#define IBX__POSTGRESQL_SET NULL
#endif
#ifndef IBX__MARIADB_SET
#define IBX__MARIADB_SET NULL
#endif
#ifndef IBX__SQLSERVER_SET
#define IBX__SQLSERVER_SET NULL
#endif
static const ibx__sqlset *const ibx__sqlsets[] = {NULL, IBX__SQLITE_SET, IBX__POSTGRESQL_SET,
                                                    IBX__MARIADB_SET, IBX__SQLSERVER_SET};

/* >>common-end sqlsets */

/* Expand a template with the store's names (see ibx__expand_names). */
static char *ibx__expand(const ibx__hooks *h, const ibx__dialect *d, const ibx__sqlset *q,
                         const char *schema, const char *table, const char *tmpl) {
    return ibx__expand_names(h, d, q, schema, table, tmpl, NULL);
}

/* >> the inbox's face: what the engine below needs of this header -------------- */


#define IBX__KEY_LISTS 2              /* a message's key: (source, message id), two lists */
#define IBX__KEYS_ARG "keys"          /* the settle calls' key argument */
#define IBX__NOUN "inbox"
#define IBX__DEFAULT_SCHEMA "infra"
#define IBX__DEFAULT_TABLE "Inbox"
#define IBX__TABLE_MAX 48             /* "IX_<table>_WorkQueue" fits 63 */
#define IBX__ACK_NAMES_WORKER 0       /* the inbox records no ProcessedBy */
#define IBX__DELAY_MIN_MS 1           /* a given delay must be positive (IBX-058) */
#define IBX__RETENTION_DEFAULT_MS IBX_DEFAULT_RETENTION_MS /* cleanup with retention 0 */
#define IBX__MSG_ATTEMPTS(m) ((m)->attempt)
#define IBX__MSG_KEYED(m) ((void)(m), 0)   /* no ordering keys */
#define IBX__CLAIM_TEXTS 0            /* a claim's short row: 8 times and counts, */
#define IBX__CLAIM_INTS 9             /* the mask (IBX__CLAIM_MASK), then the texts */
#define IBX__CLAIM_COLS 19            /* 10 texts (IBX__PG_CLAIM_COLS) */

/* Where each string of a message row sits in store->rows while reading. */
typedef struct ibx__row_offsets {
    struct ibx__envelope_offsets env;
    size_t source, message_id, topic, payload, hash, last_error;
    size_t hash_len;
} ibx__row_offsets;

#ifndef IBX_NO_METRICS_TEXT
/* The counters as Prometheus metrics (ibx_metrics_text): name after "ibx_", help. */
static const char *const ibx__metric_text[IBX_METRIC_COUNT_][2] = {
    {"messages_enqueued_total", "Messages enqueued (inserted, or refreshed while not done)."},
    {"messages_dispatched_total", "Messages whose handlers all succeeded (Done)."},
    {"messages_retried_total", "Messages released for a later attempt."},
    {"messages_dead_total", "Messages failed permanently (Dead)."},
    {"leases_reaped_total", "Expired leases released, their messages claimable again."},
    {"duplicates_total", "Dedup checks that found the message already done."},
    {"messages_cleaned_up_total", "Done messages deleted by cleanup after their retention."},
    {"messages_expired_unhandled_total", "Messages past their expiry when claimed: dead, never handled."}};
/* The gauges (IBX__Q_GAUGES's columns, in order): name after "ibx_", help. */
static const char *const ibx__gauge_text[6][2] = {
    {"queue_ready_messages", "Messages ready to claim now (due; not leased, or the lease ran out)."},
    {"queue_oldest_ready_age_seconds", "How long the oldest ready message has waited."},
    {"queue_in_flight_messages", "Messages claimed by a worker, under a lease."},
    {"queue_dead_messages", "Messages failed permanently, kept for inspection or replay."},
    {"queue_scheduled_messages", "Messages not due yet: scheduled or waiting for a retry."},
    {"queue_expired_leases", "Claimed messages whose lease ran out (also in flight, and ready when due)."}};
#endif

/* What only an inbox store keeps: room for a stored hash being compared
 * (apart from read_rows, so a get's strings stay valid). */
typedef struct ibx__store_own {
    ibx__buf scratch;
    ibx__buf headers;            /* a message's headers as JSON text (enqueue) */
} ibx__store_own;

/* The inbox parks nothing (it has no ordering keys): nothing to wake. */
#define ibx__own_claimed(s, m) ((void)(s), (void)(m))
#define ibx__own_settled(s, keys, kind, rows) ((void)(s), (void)(keys), (void)(kind), (void)(rows))
#define ibx__own_acked(db, s, keys, rows) ((void)(db), (void)(s), (void)(keys), (void)(rows), IBX_OK)
#define IBX__CARRY_FIRST(s) ((void)(s), 0) /* no keyed acks to carry (obx.h's OBX__Q_CLAIM_CARRY) */
#define ibx__own_keyed(s) ((void)(s), 0)
#define ibx__own_wake(s, ids, woken) ((void)(s), (void)(ids), (void)(woken), IBX_OK)
#define ibx__own_wake_later(s, ms, n) ((void)(s), (void)(ms), (void)(n))
#define ibx__own_wake_again(s, woken) ((void)(s), (void)(woken), IBX_OK)
/* Nor can claims of one key overlap: no claim is checked again. */
#define ibx__claim_recheck(db, s, count) ((void)(db), (void)(s), (void)(count), IBX_OK)


/* >>common-begin engine */

/* The engine: the store, its work queue (claim, settle, reap, cleanup),
 * providers, routers and the dispatcher. The same text in both headers;
 * what differs between them is the "face" defined just above: the
 * statements, the row layout, a message's key and a few constants. */

/* What each header defines for the engine (its face), below the engine. */
static void ibx__store_own_free(const ibx__hooks *h, ibx__store_own *own);
/* The header's own options of a store description, kept at open. */
static void ibx__store_own_open(ibx__store_own *own, const ibx_store_desc *desc);
/* The expanded statements, by id: the header may swap a statement for a
 * variant its options ask for. */
static void ibx__store_own_sql(const ibx__store_own *own, char **sql);
/* Names the header's own options give its statement templates ({H}...). */
static void ibx__store_own_names(const ibx__store_own *own, const char **names);
/* The current row (the dialect's message columns) into *m; its strings go
 * to buf, at offsets *o, and are pointed at by ibx__point_strings once the
 * buffer stops moving. */
static ibx_result ibx__read_message(ibx__db *db, SQLHSTMT st, ibx_message *m, ibx__buf *buf,
                                    ibx__row_offsets *o);
static void ibx__point_strings(const ibx__buf *buf, ibx_message *m, const ibx__row_offsets *o);
/* A claim's short row: its head bound in `head` (IBX__CLAIM_TEXTS texts,
 * IBX__CLAIM_INTS integers, the last a mask of the optional texts that are
 * not NULL), then its texts; what the claim itself set (status, owner
 * `token`) filled in, not read. */
static ibx_result ibx__read_claimed(ibx__db *db, SQLHSTMT st, const ibx__row_head *head, const char *token,
                                    ibx_message *m, ibx__buf *buf, ibx__row_offsets *o);
/* Add a claimed message's key to key lists `keys`; 0 when out of memory. */
static int ibx__msg_key_add(const ibx__hooks *h, const ibx__dialect *d, ibx__buf *keys,
                            const ibx_message *m);
/* A message's name in log lines. */
static void ibx__msg_name(const ibx_message *m, char *out, size_t size);
#ifndef IBX_NO_DEAD_LETTERS
/* A dead-letter filter's key fields into p[0] and p[1] (SQL NULL where not
 * given), checked; `buf` holds a normalised copy. */
static ibx_result ibx__dead_key(ibx_store *s, const char *fn, const ibx_dead_filter *f,
                                ibx__param p[2], char buf[37]);
#endif
/* The worker name of a store description (NULL where the header has none). */
static const char *ibx__desc_worker(const ibx_store_desc *desc);
#ifndef IBX_NO_MULTI_STORE
static void ibx__desc_set_worker(ibx_store_desc *desc, const char *worker);
#endif

/* Defaults and limits of the engine, used by code and docs alike. */
#define IBX__BATCH_DEFAULT 50              /* messages per claim */
#define IBX__LEASE_DEFAULT_SECONDS 30
#define IBX__MAX_ATTEMPTS_DEFAULT 10
#define IBX__POLL_DEFAULT_MS 500           /* wait after an empty claim ... */
#define IBX__IDLE_MAX_DEFAULT_MS 2000      /* ... doubling up to this */
#define IBX__ERROR_DELAY_DEFAULT_MS 30000  /* wait after a failed round */
#define IBX__REAP_DEFAULT_MS 30000         /* reap expired leases this often */
#define IBX__REFRESH_DEFAULT_MS 300000     /* discovery this often */
#define IBX__CLEANUP_BATCH_DEFAULT 1000    /* rows deleted per cleanup transaction */
#define IBX__WAIT_DELAY_MAX_MS 5000        /* a waiting message is looked at again this soon */
#define IBX__LEASE_MARGIN_MAX_MS 5000      /* no handler starts this close to the lease end */
#define IBX__HANDLER_ERROR_MAX 256         /* a handler's error text, with its NUL */
#define IBX__MSG_NAME_MAX 560              /* a message's name in log lines */
#define IBX__DISCOVER_FIRST 256            /* room given to discovery at first */
#define IBX__LOGIN_TIMEOUT_DEFAULT_S 10    /* connecting gives up after this long */
#define IBX__STALL_WARN_MS 3000            /* a dispatcher's database call this slow is logged */
#define IBX__MAX_HANDLER_DEFAULT_MS 300000 /* leases are renewed for handlers this long */
#define IBX__MAX_STARTS_DEFAULT 3          /* claims without an outcome before Dead ... */
#define IBX__MAX_STARTS_LIMIT 1000         /* ... settable up to this */
#define IBX__STR_(x) #x
#define IBX__STR(x) IBX__STR_(x) /* a number macro as text */
#define IBX__PAUSE_DEFAULT_MS 1000         /* a topic's first pause (IBX_PAUSE) ... */
#define IBX__PAUSE_MAX_DEFAULT_MS 60000    /* ... doubling up to this */
#ifdef IBX_NO_POSIX_CLOCK
#define IBX__DEFAULT_CLOCK_SLEEPS 0        /* without POSIX clocks the default sleep is a no-op */
#else
#define IBX__DEFAULT_CLOCK_SLEEPS 1
#endif
#ifndef IBX__LOOP_SLICED
#define IBX__RENEWAL 1                     /* threads: a dispatcher can renew leases */
#else
#define IBX__RENEWAL 0
#endif

/* >> store ---------------------------------------------------------------------- */

/* Handler durations of one topic (ibx_metrics_text): bucket upper bounds
 * in ms, each bucket counting the runs that took at most that long. */
#define IBX__HIST_BUCKETS 13
#define IBX__HIST_TOPICS_MAX 100           /* more topics count as "(other)" */
#ifndef IBX_NO_METRICS_TEXT
static const int64_t ibx__hist_bounds_ms[IBX__HIST_BUCKETS] = {5, 10, 25, 50, 100, 250, 500, 1000,
                                                                2500, 5000, 10000, 30000, 60000};
#endif
typedef struct ibx__hist {
    char *topic;
    int64_t buckets[IBX__HIST_BUCKETS];
    int64_t count, sum_us;       /* microseconds: a fast handler's sum is not 0.000 s */
} ibx__hist;

struct ibx_store {
    ibx__hooks hooks;
    ibx__db db;
    ibx_error err;
    char *schema, *table, *store_id, *worker_name;
    const ibx__sqlset *q;
    char *sql[IBX__Q_COUNT];      /* expanded statements */
    ibx__buf keys[IBX__KEY_LISTS]; /* a batch statement's key lists (ibx__msg_key_add) */
    ibx__buf carry[IBX__KEY_LISTS]; /* a dispatcher's acks carried into its next claim */
    int carry_count;              /* how many (0: none; ibx__carry_flush) */
    int carry_keyed;              /* some of them have an ordering key (ibx__carry) */
    ibx__buf rows;                /* strings of the last claim's messages */
    ibx__buf read_rows;           /* strings of the last get: apart, so a handler may read
                                     without spoiling the batch it was called from */
    ibx_message *msgs;            /* the last claim's messages */
    ibx__row_offsets *offsets;    /* where their strings sit in `rows` while reading */
    int msgs_cap;
    ibx_uuid_state uuids;
    ibx_metrics_hook metrics;
    ibx_log_level message_log_level; /* per-message lines */
    int64_t counters[IBX_METRIC_COUNT_];
    ibx__hist *hist;              /* handler durations per topic, hist_count of hist_cap */
    int hist_count, hist_cap;
    char token[37];               /* the owner token of the current call, lower case */
    char *wake_path;              /* where a dispatcher may listen (ibx_notify), or NULL */
    int64_t max_pending;          /* enqueue refuses past this many unfinished; 0: no cap */
    int max_starts;               /* claims without an outcome before Dead ({Q} in statements) */
    int64_t pending_estimate;     /* the last count plus what this store enqueued since */
    int64_t pending_counted_ms;   /* when it was counted (monotonic) */
    int wake_fd;                  /* the sending socket, made at the first wake; -1 */
    ibx__store_own own;           /* what only this header keeps */
};

static void ibx__count(ibx_store *s, ibx_metric metric, int64_t n) {
    if (n <= 0) return;
    s->counters[metric] += n;
    if (s->metrics.count) s->metrics.count(metric, n, s->store_id, s->metrics.user);
}

/* The error of a NULL handle, filled once: an initialized ibx_error is
 * 628 bytes of flash, nearly all zeros. GCC and Clang fill it before main
 * (a constructor: no lock, with or without threads); other compilers at
 * first use, under a once-only call (ibx__once). */
#if defined(__GNUC__) || defined(__clang__) || !defined(IBX_NO_THREADS)
static ibx_error ibx__null_error_at;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((constructor))
#endif
static void ibx__null_error_fill(void) {
    ibx__null_error_at.result = IBX_ERR_INVALID_ARG;
    ibx__copy(ibx__null_error_at.where, sizeof ibx__null_error_at.where, "store");
    ibx__copy(ibx__null_error_at.message, sizeof ibx__null_error_at.message, "store is NULL");
}

#if defined(__GNUC__) || defined(__clang__)
#define ibx__null_error() ((const ibx_error *)&ibx__null_error_at)
#else
static ibx__once_t ibx__null_error_once = IBX__ONCE_INIT;
static const ibx_error *ibx__null_error(void) {
    ibx__once(&ibx__null_error_once, ibx__null_error_fill);
    return &ibx__null_error_at;
}
#endif
#else
static const ibx_error ibx__null_error_at = {IBX_ERR_INVALID_ARG, "", 0, 0, "store", "store is NULL"};
#define ibx__null_error() (&ibx__null_error_at)
#endif

/* a + b for times and intervals, saturating: a huge interval means never. */
static int64_t ibx__sat_add(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

/* The length of the valid UTF-8 character at s (`left` bytes there), or 0
 * when none starts there (overlong forms, surrogates, past U+10FFFF). */
static size_t ibx__utf8_char(const unsigned char *s, size_t left) {
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
static long ibx__utf8_length(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i, len;
    long chars = 0;
    for (i = 0; i < n; i += len, chars++)
        if (!(len = ibx__utf8_char(s + i, n - i))) return -1;
    return chars;
}

/* A handler's error text made valid UTF-8 in place (each byte that starts
 * no character becomes '?'): stored as the last error, text that is not
 * (bytes from a device, a message cut by snprintf inside a character)
 * would make PostgreSQL and MariaDB refuse the settle, again at every
 * redelivery, and the message would never use up its attempts. */
static void ibx__utf8_repair(char *text) {
    unsigned char *s = (unsigned char *)text;
    size_t n = strlen(text), i, len;
    for (i = 0; i < n; i += len)
        if (!(len = ibx__utf8_char(s + i, n - i))) {
            s[i] = '?';
            len = 1;
        }
}

/* An optional text argument (NULL passes) that is stored: valid UTF-8. */
static ibx_result ibx__check_utf8(ibx_error *err, const char *fn, const char *arg, const char *value) {
    char where[96];
    if (!value || ibx__utf8_length(value, strlen(value)) >= 0) return IBX_OK;
    snprintf(where, sizeof where, "%s: %s", fn, arg);
    return ibx__fail(err, IBX_ERR_INVALID_ARG, where, "%s must be valid UTF-8", arg);
}

/* Whether text is valid UTF-8 of at most `max` characters. */
IBX__PRIVATE int ibx__text_fits(const char *text, long max) {
    long chars = ibx__utf8_length(text, strlen(text));
    return chars >= 0 && chars <= max;
}

/* A required text argument: not NULL or empty, valid UTF-8, at most `max`
 * characters. */
static ibx_result ibx__check_text(ibx_error *err, const char *fn, const char *arg, const char *value,
                                  long max) {
    char where[96];
    long chars;
    snprintf(where, sizeof where, "%s: %s", fn, arg);
    if (!value || !value[0])
        return ibx__fail(err, IBX_ERR_INVALID_ARG, where, "%s must not be NULL or empty", arg);
    chars = ibx__utf8_length(value, strlen(value));
    if (chars < 0) return ibx__fail(err, IBX_ERR_INVALID_ARG, where, "%s is not valid UTF-8", arg);
    if (chars > max)
        return ibx__fail(err, IBX_ERR_INVALID_ARG, where, "%s is longer than %ld characters", arg, max);
    return IBX_OK;
}

static ibx_result ibx__check_names(ibx_error *err, const char *fn, const char *schema,
                                   const char *table) {
    char where[96];
    if (ibx__identifier_check(schema) != IBX_OK) {
        snprintf(where, sizeof where, "%s: schema", fn);
        return ibx__fail(err, IBX_ERR_INVALID_ARG, where,
                         "schema must be 1-63 characters"
                         IBX__WHY(" of A-Z, a-z, 0-9, _ and not start with a digit"));
    }
    if (ibx__identifier_check(table) != IBX_OK || strlen(table) > IBX__TABLE_MAX) {
        snprintf(where, sizeof where, "%s: table", fn);
        return ibx__fail(err, IBX_ERR_INVALID_ARG, where,
                         "table must be 1-%d characters"
                         IBX__WHY(" of A-Z, a-z, 0-9, _ and not start with a digit (derived index names must fit 63)"),
                         IBX__TABLE_MAX);
    }
    return IBX_OK;
}

/* A name that reaches log lines and metrics labels (worker_name also a
 * column): valid UTF-8 of 1..max characters and at most max_bytes bytes,
 * no control characters. Not UTF-8, worker_name made every ack fail on
 * PostgreSQL and MariaDB. */
static int ibx__name_ok(const char *text, long max, size_t max_bytes) {
    long chars = ibx__utf8_length(text, strlen(text));
    if (chars < 1 || chars > max || strlen(text) > max_bytes) return 0;
    for (; *text; text++)
        if ((unsigned char)*text < 0x20 || *text == 0x7F) return 0;
    return 1;
}

static ibx_result ibx__store_names(ibx_store *s, const ibx_store_desc *desc) {
    const char *schema = desc->schema ? desc->schema : IBX__DEFAULT_SCHEMA;
    const char *table = desc->table ? desc->table : IBX__DEFAULT_TABLE;
    const char *id = desc->store_id ? desc->store_id : IBX__NOUN;
    const char *worker = ibx__desc_worker(desc);
    ibx_result r = ibx__check_names(&s->err, "ibx_store_open", schema, table);
    if (r != IBX_OK) return r;
    if (!ibx__name_ok(id, 63, 63)) /* ibx_store_info.store_id holds 63 bytes */
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: store_id",
                         "store_id must be 1-63 bytes of UTF-8" IBX__WHY(", none of them control characters"));
    if (worker && !ibx__name_ok(worker, 100, 400))
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: worker_name",
                         "worker_name must be 1-100 characters of UTF-8" IBX__WHY(", none of them control characters"));
    s->schema = ibx__strdup(&s->hooks, schema);
    s->table = ibx__strdup(&s->hooks, table);
    s->store_id = ibx__strdup(&s->hooks, id);
    s->worker_name = worker ? ibx__strdup(&s->hooks, worker) : NULL;
    if (!s->schema || !s->table || !s->store_id || (worker && !s->worker_name))
        return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_store_open", "out of memory");
    return IBX_OK;
}

/* Statement `id`'s arguments on dialect d, as the header declares them
 * (ibx__stmt_args_rows), or NULL. */
IBX__PRIVATE const char *ibx__stmt_args(const ibx__dialect *d, int id) {
    const ibx__sqlset *q = ibx__sqlsets[d->id];
    const ibx__stmt_row *row;
    if (id == IBX__Q_CLAIM && q) /* a claim that picks first names the picked keys */
        for (row = q->rows; row->sql; row++)
            if (row->id == IBX__Q_CLAIM_PICK) id = IBX__Q_CLAIM_READ;
    if (IBX__ARGS_JSON_ROWS(id) && IBX__ONE(d)->batch_as_json_rows) return "j";
    for (row = ibx__stmt_args_rows; row->sql; row++)
        if (row->id == id) return row->sql;
    return NULL;
}

/* IBX__Q_CLAIM_ACK on PostgreSQL: a dispatcher's ack of its last batch and
 * its next claim as one statement, made of the store's own ACK and CLAIM
 * (so the claim's ordering and locks are written once): one round trip and
 * one commit per batch instead of two of each. Both halves see the
 * statement's one snapshot: the ack's rows are in flight there, the claim
 * picks Ready ones, so they never meet, and a key whose message is acked
 * here looks busy to this claim (the dispatcher carries no keyed acks). The
 * count row: with nothing claimed, one row of NULLs still brings it. */
static ibx_result ibx__claim_ack_sql(ibx_store *s) {
    static const char head[] = "WITH a AS (", mid[] = " RETURNING 1), c AS (",
                      tail[] = ") SELECT c.*, k.n FROM (SELECT count(*) AS n FROM a) AS k LEFT JOIN c ON true";
    size_t n;
    char *t;
    if (IBX__ONE(s->db.d)->id != IBX_DIALECT_POSTGRESQL || !s->sql[IBX__Q_ACK] || !s->sql[IBX__Q_CLAIM] ||
        IBX__SQL(s, IBX__Q_CLAIM_PICK) || IBX__FULL_ROWS(s->q))
        return IBX_OK;
    n = sizeof head + strlen(s->sql[IBX__Q_ACK]) + sizeof mid + strlen(s->sql[IBX__Q_CLAIM]) + sizeof tail;
    if (!(t = (char *)ibx__alloc(&s->hooks, n))) return IBX_ERR_NO_MEMORY;
    snprintf(t, n, "%s%s%s%s%s", head, s->sql[IBX__Q_ACK], mid, s->sql[IBX__Q_CLAIM], tail);
    s->sql[IBX__Q_CLAIM_ACK] = t;
    return IBX_OK;
}

static ibx_result ibx__store_prepare_sql(ibx_store *s) {
    const ibx__stmt_row *row;
    const char *names[26];
    char limit[16];
    s->q = ibx__sqlsets[s->db.d->id]; /* built in: ibx__db_setup refused a left-out one */
    snprintf(limit, sizeof limit, "%d", s->max_starts);
    memset((void *)names, 0, sizeof names);
    names['Q' - 'A'] = limit; /* {Q}: max_starts, a literal of the store's statements */
    ibx__store_own_names(&s->own, names);
    for (row = s->q->rows; row->sql; row++) /* {O}: a condition several statements share */
        if (row->id == IBX__Q_OWNED) names['O' - 'A'] = row->sql;
    for (row = s->q->rows; row->sql; row++) { /* a statement a dialect lacks stays NULL */
        char *own;
        if (row->id == IBX__Q_OWNED) continue;
        own = ibx__sql_expand(&s->hooks, row->sql, names);
        IBX_ASSERT(row->id >= 0 && row->id < IBX__Q_COUNT && !s->sql[row->id]);
        IBX_ASSERT(s->db.d->id != IBX_DIALECT_SQLITE || !IBX__SQLITE_LACKS(row->id));
        s->sql[row->id] = own ? ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, own) : NULL;
        ibx__free(&s->hooks, own);
        if (!s->sql[row->id])
            return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_store_open", "out of memory");
    }
    ibx__store_own_sql(&s->own, s->sql);
    if (ibx__claim_ack_sql(s) != IBX_OK) return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_store_open", "out of memory");
#if IBX__CHECK_ARGS
    { /* every statement takes what it declares (ibx__args_check) */
        int i;
        char why[80];
        for (i = 0; i < IBX__Q_COUNT; i++)
            if (s->sql[i] && ibx__args_check(s->sql[i], ibx__stmt_args(s->db.d, i), why, sizeof why))
                return ibx__fail(&s->err, IBX_ERR_STATE, "ibx_store_open", "statement %d on %s: %s", i,
                                 ibx__dialect_name(s->db.d->id), why);
    }
    s->db.sql = s->sql;
#endif
    return IBX_OK;
}

/* Whether a CREATE TABLE template declares column `name` itself: a line
 * "    name ..." or "    <quoted name> ...". */
static int ibx__ddl_declares(const ibx__dialect *d, const char *tmpl, const char *name) {
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
static char *ibx__ddl_text(const ibx__hooks *h, const ibx__dialect *d, const ibx__sqlset *q,
                           const char *schema, const char *table, const char *tmpl) {
    const char *names[26];
    ibx__buf cols = {NULL, 0, 0};
    char *full, *out;
    int i, ok = 1;
    if (!strstr(tmpl, "{A}")) return ibx__expand(h, d, q, schema, table, tmpl);
    for (i = 0; ok && i < IBX__COLUMNS_MAX && q->columns[i].name; i++) {
        const char *type = q->columns[i].type;
        char quoted[80], line[320];
        if (ibx__ddl_declares(d, tmpl, q->columns[i].name)) continue;
        snprintf(quoted, sizeof quoted, "%c%s%c", d->quote_open, q->columns[i].name, d->quote_close);
#ifndef IBX_NO_MARIADB
        if (IBX__ONE(d)->id == IBX_DIALECT_MARIADB && strlen(type) > 8 &&
            strcmp(type + strlen(type) - 8, " VIRTUAL") == 0)
            snprintf(line, sizeof line, ",\n    %-15s %.*s PERSISTENT", quoted, (int)(strlen(type) - 8), type);
        else
#endif
            snprintf(line, sizeof line, ",\n    %-15s %s", quoted, type);
        ok = ibx__buf_add(h, &cols, line, strlen(line));
    }
    memset((void *)names, 0, sizeof names);
    names['A' - 'A'] = cols.data ? cols.data : "";
    full = ok ? ibx__sql_expand(h, tmpl, names) : NULL;
    out = full ? ibx__expand(h, d, q, schema, table, full) : NULL;
    ibx__free(h, full);
    ibx__buf_free(h, &cols);
    return out;
}

/* A dialect's column template (probe or add) for one added column. */
static char *ibx__column_text(const ibx__hooks *h, const ibx__dialect *d, const ibx__sqlset *q,
                              const char *schema, const char *table, const char *tmpl,
                              const ibx__column *c) {
    const char *names[26];
    char quoted[80], *full, *out;
    snprintf(quoted, sizeof quoted, "%c%s%c", d->quote_open, c->name, d->quote_close);
    memset((void *)names, 0, sizeof names);
    names['C' - 'A'] = quoted;
    names['K' - 'A'] = c->name;
    names['D' - 'A'] = c->type;
    full = ibx__sql_expand(h, tmpl, names);
    out = full ? ibx__expand(h, d, q, schema, table, full) : NULL;
    ibx__free(h, full);
    return out;
}

/* The schema for one dialect and set of names as one text, each statement
 * followed by the dialect's statement end (what sql/<dialect>/ holds). The
 * column additions follow the message table's CREATE TABLE, so that the
 * text also upgrades an old table; SQLite has no conditional ALTER, so its
 * text only creates (deploy upgrades its old tables). */
static char *ibx__schema_text(const ibx__hooks *h, const ibx__dialect *d, const ibx__sqlset *q,
                              const char *schema, const char *table) {
    ibx__buf text = {NULL, 0, 0};
    int i, c, ok = 1;
    for (i = 0; ok && q->ddl[i]; i++) {
        int adds = strstr(q->ddl[i], "{A}") && IBX__ONE(d)->id != IBX_DIALECT_SQLITE ? IBX__COLUMNS_MAX : 0;
        for (c = -1; ok && c < adds && (c < 0 || q->columns[c].name); c++) {
            char *one = c < 0 ? ibx__ddl_text(h, d, q, schema, table, q->ddl[i])
                              : ibx__column_text(h, d, q, schema, table, IBX__ONE(d)->column_add, &q->columns[c]);
            /* A MariaDB trigger with a compound body has ';' inside: the
             * mysql/mariadb client splits at each one unless DELIMITER says. */
            int compound = one && IBX__ONE(d)->id == IBX_DIALECT_MARIADB && strchr(one, ';');
            const char *open = compound ? "DELIMITER $$\n" : "";
            const char *end = compound ? "$$\nDELIMITER ;\n" : IBX__ONE(d)->statement_end;
            ok = one && ibx__buf_add(h, &text, open, strlen(open)) &&
                 ibx__buf_add(h, &text, one, strlen(one)) && ibx__buf_add(h, &text, end, strlen(end));
            ibx__free(h, one);
        }
    }
    if (!ok) ibx__buf_free(h, &text);
    return ok ? text.data : NULL;
}

/* printf into memory from the allocator; NULL when out of memory. */
IBX__PRINTF(2, 3)
static char *ibx__format(const ibx__hooks *h, const char *fmt, ...) {
    va_list ap;
    char *out;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !(out = (char *)ibx__alloc(h, (size_t)n + 1))) return NULL;
    va_start(ap, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return out;
}

/* The quoted name at p (quote characters q0, q1) into out; the text after it. */
static const char *ibx__ddl_name(const char *p, char q0, char q1, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    if (!p || *p != q0) return NULL;
    for (p++; *p && *p != q1 && n + 1 < cap; p++) out[n++] = *p;
    out[n] = '\0';
    return *p == q1 ? p + 1 : NULL;
}

/* Look before changing (ibx__deploy_unit). Some IF NOT EXISTS and OR REPLACE
 * statements lock their table even when there is nothing to do (PostgreSQL:
 * CREATE INDEX a SHARE lock, CREATE OR REPLACE TRIGGER SHARE ROW EXCLUSIVE;
 * MariaDB: CREATE TRIGGER an exclusive metadata lock), queued behind every
 * open transaction on the table and with every writer after them queued
 * behind them. Each such statement gets a catalog query, which locks
 * nothing and returns 1 when the object is there as the statement would
 * make it; the statement runs only otherwise. A PostgreSQL trigger's
 * definition is too far from its text to compare: its comment carries a
 * hash of the text (*after sets it). */
static char *ibx__ddl_probe(const ibx__hooks *h, const ibx__dialect *d, const char *schema, const char *one,
                            char **after) {
    static const char *const pg_index[] = {"CREATE INDEX IF NOT EXISTS ", "CREATE UNIQUE INDEX IF NOT EXISTS ", NULL};
    char name[160], table[400], *out = NULL;
    const char *p, *on;
    size_t n;
    int i;
    *after = NULL;
    if (IBX__ONE(d)->id == IBX_DIALECT_POSTGRESQL) { /* SQLite only: folded away with MariaDB's */
        for (i = 0; pg_index[i]; i++)
            if (strncmp(one, pg_index[i], strlen(pg_index[i])) == 0 &&
                ibx__ddl_name(one + strlen(pg_index[i]), '"', '"', name, sizeof name))
                return ibx__format(h, "SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = "
                                   "c.relnamespace WHERE n.nspname = '%s' AND c.relname = '%s'", schema, name);
        if (strncmp(one, "CREATE OR REPLACE FUNCTION ", 27) == 0 &&
            (p = ibx__ddl_name(one + 27, '"', '"', table, sizeof table)) && *p == '.' && /* table: its schema */
            ibx__ddl_name(p + 1, '"', '"', name, sizeof name) && (p = strstr(one, "$$")) &&
            (on = strstr(p + 2, "$$")) && !strstr(one, "$ibx$")) {
            while (strstr(on + 2, "$$")) on = strstr(on + 2, "$$");
            n = (size_t)(on - p - 2);
            return ibx__format(h, "SELECT COUNT(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = "
                               "p.pronamespace WHERE n.nspname = '%s' AND p.proname = '%s' AND p.prosrc = "
                               "$ibx$%.*s$ibx$", table, name, (int)n, p + 2);
        }
        if (strncmp(one, "CREATE OR REPLACE TRIGGER ", 26) == 0 &&
            ibx__ddl_name(one + 26, '"', '"', name, sizeof name) && (on = strstr(one, " ON ")) &&
            (n = strcspn(on + 4, " \n")) < sizeof table) {
            uint64_t hash = UINT64_C(14695981039346656037); /* FNV-1a of the text */
            for (p = one; *p; p++) hash = (hash ^ (unsigned char)*p) * UINT64_C(1099511628211);
            memcpy(table, on + 4, n);
            table[n] = '\0';
            *after = ibx__format(h, "COMMENT ON TRIGGER \"%s\" ON %s IS 'ibx %016llx'", name, table,
                                 (unsigned long long)hash);
            out = *after ? ibx__format(h, "SELECT COUNT(*) FROM pg_trigger WHERE tgrelid = to_regclass('%s') "
                                       "AND tgname = '%s' AND obj_description(oid, 'pg_trigger') = "
                                       "'ibx %016llx'", table, name, (unsigned long long)hash) : NULL;
            if (!out) ibx__free(h, *after), *after = NULL;
            return out;
        }
    }
    if (IBX__ONE(d)->id == IBX_DIALECT_MARIADB) {
        if (strncmp(one, "CREATE TRIGGER IF NOT EXISTS ", 29) == 0 &&
            ibx__ddl_name(one + 29, '`', '`', name, sizeof name))
            return ibx__format(h, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE "
                               "TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = '%s'", name);
        if (strncmp(one, "DROP TRIGGER IF EXISTS ", 23) == 0 && ibx__ddl_name(one + 23, '`', '`', name, sizeof name))
            return ibx__format(h, "SELECT COUNT(*) = 0 FROM information_schema.TRIGGERS WHERE "
                               "TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = '%s'", name);
        /* ALTER TABLE `t` ALTER COLUMN `c` SET DEFAULT v: a metadata lock. */
        if (strncmp(one, "ALTER TABLE ", 12) == 0 && (p = ibx__ddl_name(one + 12, '`', '`', table, sizeof table)) &&
            strncmp(p, " ALTER COLUMN ", 14) == 0 && (p = ibx__ddl_name(p + 14, '`', '`', name, sizeof name)) &&
            strncmp(p, " SET DEFAULT ", 13) == 0 && strspn(p + 13, "0123456789") == strlen(p + 13))
            return ibx__format(h, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                               "DATABASE() AND TABLE_NAME = '%s' AND COLUMN_NAME = '%s' AND COLUMN_DEFAULT = '%s'",
                               table, name, p + 13);
    }
    return NULL;
}

typedef struct ibx__deploy_ctx {
    ibx_store *s;
    int changing; /* a change ran in this attempt: the lock timeout is set */
    int timed;    /* it was set in some attempt: ibx_store_deploy restores it */
    int changed;  /* something was created or changed (or may have been) */
} ibx__deploy_ctx;

/* A statement without a probe (CREATE TABLE/INDEX/SCHEMA IF NOT EXISTS, an
 * unprobed ADD COLUMN IF NOT EXISTS) says nothing about what it did; a
 * figure of the catalog that every such change moves, read before and
 * after, does: SQLite's schema version, the objects and columns of the
 * schema elsewhere. NULL: unknown (every deploy counts as a change). */
static char *ibx__deploy_census(const ibx__hooks *h, const ibx__dialect *d, const char *schema) {
    switch (IBX__ONE(d)->id) { /* SQLite only: the other cases fold away */
    case IBX_DIALECT_SQLITE: return ibx__strdup(h, "PRAGMA schema_version");
    case IBX_DIALECT_POSTGRESQL:
        return ibx__format(h, "SELECT (SELECT COUNT(*) FROM pg_namespace WHERE nspname = '%s') + "
                           "(SELECT COUNT(*) + COALESCE(SUM(c.relnatts), 0) FROM pg_class c JOIN pg_namespace n "
                           "ON n.oid = c.relnamespace WHERE n.nspname = '%s')", schema, schema);
    case IBX_DIALECT_MARIADB:
        return ibx__strdup(h, "SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                              "DATABASE()) + (SELECT COUNT(*) FROM information_schema.STATISTICS WHERE "
                              "TABLE_SCHEMA = DATABASE())");
    default: return NULL;
    }
}

/* Before each change: say so, and before the first, set the dialect's lock
 * timeout, so that a change waits for its lock (and writers wait behind it)
 * at most IBX__DEPLOY_LOCK_WAIT seconds. */
static ibx_result ibx__deploy_change(ibx__db *db, ibx__deploy_ctx *c, const char *what) {
    ibx_store *s = c->s;
    c->changed = 1;
    ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "schema change on %s: %.*s%s", s->table,
             (int)strcspn(what, "\n"), what,
             IBX__ONE(db->d)->deploy_lock_sql ? " (waits at most " IBX__DEPLOY_LOCK_WAIT " s for its lock)" : "");
    if (c->changing || !IBX__ONE(db->d)->deploy_lock_sql) return IBX_OK;
    c->changing = c->timed = 1;
    return ibx__exec_direct(db, IBX__ONE(db->d)->deploy_lock_sql, "deploy: lock timeout");
}

/* A catalog count on the deploy path. A COUNT(*) always has its row, so a
 * missing one is the database's fault (IBX_ERR_DB, naming what was asked). */
static ibx_result ibx__deploy_count(ibx__db *db, const char *sql, char *out, size_t cap, const char *what,
                                     const char *name) {
    ibx_result r = ibx__query_text(db, sql, out, cap);
    if (r == IBX_ERR_NOT_FOUND)
        r = ibx__fail(db->err, IBX_ERR_DB, "ibx_store_deploy", "the %s%.60s returned no row", what, name);
    return r;
}

/* Upgrade in place: add each column of q->columns the table lacks (one
 * deployed by an older release). The probe first, so that a table that has
 * them all is not locked. */
static ibx_result ibx__deploy_columns(ibx__db *db, ibx__deploy_ctx *dc) {
    ibx_store *s = dc->s;
    ibx_result r = IBX_OK;
    int i;
    for (i = 0; r == IBX_OK && i < IBX__COLUMNS_MAX && s->q->columns[i].name; i++) {
        const ibx__column *c = &s->q->columns[i];
        char *probe = NULL, *add, found[32] = "0";
        if (IBX__ONE(db->d)->column_probe &&
            !(probe = ibx__column_text(&s->hooks, db->d, s->q, s->schema, s->table, db->d->column_probe, c)))
            break;
        r = probe ? ibx__deploy_count(db, probe, found, sizeof found, "catalog query for column ", c->name) : IBX_OK;
        ibx__free(&s->hooks, probe);
        if (r != IBX_OK || atoi(found) > 0) continue;
        if (!(add = ibx__column_text(&s->hooks, db->d, s->q, s->schema, s->table, IBX__ONE(db->d)->column_add, c)))
            break;
        if (IBX__ONE(db->d)->column_probe) r = ibx__deploy_change(db, dc, add);
        if (r == IBX_OK) r = ibx__exec_direct(db, add, "deploy: add column");
        if (r == IBX_ERR_DB_TRANSIENT && dc->changing) db->fault = IBX__FAULT_PERMANENT; /* as ibx__deploy_one */
        ibx__free(&s->hooks, add);
        if (r == IBX_OK && IBX__ONE(db->d)->column_probe)
            ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "schema upgraded: column %s added to %s",
                     c->name, s->table);
    }
    if (r == IBX_OK && i < IBX__COLUMNS_MAX && s->q->columns[i].name)
        return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_store_deploy", "out of memory");
    return r;
}

/* One DDL statement: looked up first where it has a probe (ibx__ddl_probe),
 * run only when its object is missing or different. */
static ibx_result ibx__deploy_one(ibx__db *db, ibx__deploy_ctx *c, const char *one) {
    ibx_store *s = c->s;
    char *after = NULL, *probe = ibx__ddl_probe(&s->hooks, db->d, s->schema, one, &after), found[32] = "0";
    ibx_result r = probe ? ibx__deploy_count(db, probe, found, sizeof found, "catalog query for ", one) : IBX_OK;
    if (r == IBX_OK && !(probe && atoi(found) > 0)) {
        if (probe) r = ibx__deploy_change(db, c, one);
        if (r == IBX_OK) r = ibx__exec_direct(db, one, "deploy");
        if (r == IBX_OK && after) r = ibx__exec_direct(db, after, "deploy: mark trigger");
        /* A lock timeout is not retried here: writers would queue behind
         * the change again. The caller deploys again later. */
        if (r == IBX_ERR_DB_TRANSIENT && c->changing) db->fault = IBX__FAULT_PERMANENT;
    }
    ibx__free(&s->hooks, probe);
    ibx__free(&s->hooks, after);
    return r;
}

static ibx_result ibx__deploy_unit(ibx__db *db, void *ctx) {
    ibx__deploy_ctx *c = (ibx__deploy_ctx *)ctx;
    ibx_store *s = c->s;
    ibx_result r = IBX_OK;
    char *census = ibx__deploy_census(&s->hooks, db->d, s->schema), before[32] = "", after[32] = "";
    int i;
    c->changing = 0; /* a retried unit sets its lock timeout again */
    c->changed = !census;
    if (census) r = ibx__deploy_count(db, census, before, sizeof before, "schema census", "");
    for (i = 0; s->q->ddl[i] && r == IBX_OK; i++) {
        char *one = ibx__ddl_text(&s->hooks, s->db.d, s->q, s->schema, s->table, s->q->ddl[i]);
        if (!one) {
            ibx__free(&s->hooks, census);
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_store_deploy", "out of memory");
        }
        r = ibx__deploy_one(db, c, one);
        ibx__free(&s->hooks, one);
        if (r == IBX_OK && strstr(s->q->ddl[i], "{A}")) r = ibx__deploy_columns(db, c);
    }
    if (r == IBX_OK && census) r = ibx__deploy_count(db, census, after, sizeof after, "schema census", "");
    if (r == IBX_OK && strcmp(before, after) != 0) c->changed = 1;
    ibx__free(&s->hooks, census);
    return r;
}

IBX_API ibx_result ibx_schema_sql(ibx_dialect dialect, const char *schema, const char *table,
                                  char *out, size_t cap, size_t *needed) {
    ibx__hooks h;
    ibx_error err;
    const ibx__dialect *d = ibx__dialect_get(dialect);
    char *ddl;
    size_t n;
    ibx_result r = ibx__check_names(&err, "ibx_schema_sql", schema ? schema : IBX__DEFAULT_SCHEMA,
                                    table ? table : IBX__DEFAULT_TABLE);
    if (r != IBX_OK) return r;
    if (!d || !ibx__sqlsets[d->id]) return IBX_ERR_UNSUPPORTED; /* unknown, or left out */
    if (!out && cap > 0) return IBX_ERR_INVALID_ARG;
    ibx__hooks_resolve(&h, NULL);
    ddl = ibx__schema_text(&h, d, ibx__sqlsets[d->id], schema ? schema : IBX__DEFAULT_SCHEMA,
                           table ? table : IBX__DEFAULT_TABLE);
    if (!ddl) return IBX_ERR_NO_MEMORY;
    n = strlen(ddl) + 1;
    if (needed) *needed = n;
    if (n > cap || !out) { /* !out: cap is 0 (checked above); said for the optimizer */
        ibx__free(&h, ddl);
        return IBX_ERR_OUT_OF_RANGE;
    }
    memcpy(out, ddl, n);
    ibx__free(&h, ddl);
    return IBX_OK;
}

IBX_API ibx_result ibx_store_deploy(ibx_store *store) {
    ibx__deploy_ctx c;
    ibx_result r;
    if (!store) return IBX_ERR_INVALID_ARG;
    if (!store->q)
        return ibx__fail(&store->err, IBX_ERR_STATE, "ibx_store_deploy", "store is not open");
    c.s = store;
    c.changing = c.timed = c.changed = 0;
    r = ibx__unit(&store->db, ibx__deploy_unit, &c, "deploy schema");
    if (c.timed && IBX__ONE(store->db.d)->deploy_unlock_sql) /* our connection's own setting again */
        (void)ibx__exec_direct(&store->db, IBX__ONE(store->db.d)->deploy_unlock_sql, "deploy: lock timeout");
    if (r == IBX_OK) /* at every start with deploy_schema: said at INFO only when it did something */
        ibx__log(&store->hooks, c.changed ? IBX_LOG_INFO : IBX_LOG_DEBUG, store->store_id,
                 c.changed ? "schema deployed (table %s)" : "schema up to date (table %s)", store->table);
    else if (c.changing && r == IBX_ERR_DB_TRANSIENT)
        ibx__log(&store->hooks, IBX_LOG_WARN, store->store_id, "schema change on %s did not get its lock within "
                 IBX__DEPLOY_LOCK_WAIT " s (transactions hold the table): deploy again when they end",
                 store->table);
    return r;
}

typedef struct ibx__upgrade_ctx {
    ibx__deploy_ctx dc;
    unsigned flags;
    int steps;
} ibx__upgrade_ctx;

static ibx_result ibx__upgrade_unit(ibx__db *db, void *ctx) {
    ibx__upgrade_ctx *u = (ibx__upgrade_ctx *)ctx;
    ibx_store *s = u->dc.s;
    const ibx__contract *k;
    ibx_result r = IBX_OK;
    u->dc.changing = 0; /* a retried unit sets its lock timeout again */
    for (k = s->q->contract; k && k->change && r == IBX_OK; k++) {
        char found[32] = "0", *probe, *one;
        if (!(k->flag & u->flags)) continue;
        probe = k->probe ? ibx__expand(&s->hooks, db->d, s->q, s->schema, s->table, k->probe) : NULL;
        one = ibx__expand(&s->hooks, db->d, s->q, s->schema, s->table, k->change);
        if (!one || (k->probe && !probe)) r = ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_store_upgrade", "out of memory");
        if (r == IBX_OK && probe) r = ibx__deploy_count(db, probe, found, sizeof found, "catalog query for ", one);
        if (r == IBX_OK && atoi(found) == 0) {
            r = ibx__deploy_change(db, &u->dc, one);
            if (r == IBX_OK) r = ibx__exec_direct(db, one, "upgrade");
            if (r == IBX_ERR_DB_TRANSIENT && u->dc.changing) db->fault = IBX__FAULT_PERMANENT; /* as deploy */
            if (r == IBX_OK) u->steps++;
        }
        ibx__free(&s->hooks, probe);
        ibx__free(&s->hooks, one);
    }
    return r;
}

IBX_API ibx_result ibx_store_upgrade(ibx_store *store, unsigned flags, int *steps) {
    ibx__upgrade_ctx u;
    ibx_result r;
    if (!store) return IBX_ERR_INVALID_ARG;
    if (!store->q)
        return ibx__fail(&store->err, IBX_ERR_STATE, "ibx_store_upgrade", "store is not open");
    if (flags == 0 || (flags & ~(IBX_UPGRADE_KEYS | IBX_UPGRADE_DROP_OLD)))
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_store_upgrade: flags",
                         "not IBX_UPGRADE_KEYS and/or IBX_UPGRADE_DROP_OLD");
    memset(&u, 0, sizeof u);
    u.dc.s = store;
    u.flags = flags;
    r = ibx__unit(&store->db, ibx__upgrade_unit, &u, "upgrade schema");
    if (u.dc.timed && IBX__ONE(store->db.d)->deploy_unlock_sql)
        (void)ibx__exec_direct(&store->db, IBX__ONE(store->db.d)->deploy_unlock_sql, "upgrade: lock timeout");
    if (r == IBX_OK && steps) *steps = u.steps;
    if (r == IBX_OK)
        ibx__log(&store->hooks, u.steps ? IBX_LOG_INFO : IBX_LOG_DEBUG, store->store_id,
                 "schema upgrade of %s: %d step(s) run", store->table, u.steps);
    return r;
}

/* >> rewrite: an older table into this release's column order (PostgreSQL) */

/* The swap, after the new table {N}_rewrite is made and the old one locked.
 * What the drop takes with the old table is listed first (the primary
 * key's index comes with the new table) and made again after the rename.
 * The outcome goes back as a transaction-local setting: "current" or the
 * rows copied. */
static const char ibx__pg_rewrite[] =
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
    "  PERFORM set_config('ibx.rewrite', 'current', true);\n"
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
    "PERFORM set_config('ibx.rewrite', CAST(r AS text), true);\n"
    "END $rw$";

typedef struct ibx__rewrite_ctx {
    ibx_store *s;
    char outcome[32];
} ibx__rewrite_ctx;

/* One statement of the rewrite: its table's names, {N}_rewrite's in `table`. */
static ibx_result ibx__rewrite_step(ibx__db *db, ibx_store *s, const char *table, const char *tmpl,
                                    const char *where) {
    char *one = ibx__ddl_text(&s->hooks, db->d, s->q, s->schema, table, tmpl);
    ibx_result r = one ? ibx__exec_direct(db, one, where)
                       : ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_store_rewrite", "out of memory");
    ibx__free(&s->hooks, one);
    /* Not retried: the writers would queue behind the lock again. */
    if (r == IBX_ERR_DB_TRANSIENT) db->fault = IBX__FAULT_PERMANENT;
    return r;
}

static ibx_result ibx__rewrite_unit(ibx__db *db, void *ctx) {
    ibx__rewrite_ctx *c = (ibx__rewrite_ctx *)ctx;
    ibx_store *s = c->s;
    char rw[IBX__TABLE_MAX + 16];
    ibx_result r;
    int i;
    snprintf(rw, sizeof rw, "%s_rewrite", s->table);
    /* Deploys of the table wait (their advisory lock, the first DDL), then
     * its writers; SHARE lets readers on until the swap. 10 s: a long
     * transaction on the table would make every writer queue behind us. */
    r = ibx__rewrite_step(db, s, s->table, "SET LOCAL lock_timeout = '10s'", "rewrite: lock timeout");
    if (r == IBX_OK) r = ibx__rewrite_step(db, s, s->table, s->q->ddl[0], "rewrite: deploy lock");
    if (r == IBX_OK) r = ibx__rewrite_step(db, s, s->table, "LOCK TABLE {T} IN SHARE MODE", "rewrite: table lock");
    for (i = 0; r == IBX_OK && s->q->ddl[i] && !strstr(s->q->ddl[i], "{A}"); i++) {}
    if (r == IBX_OK && s->q->ddl[i]) r = ibx__rewrite_step(db, s, rw, s->q->ddl[i], "rewrite: new table");
    if (r == IBX_OK) r = ibx__rewrite_step(db, s, s->table, ibx__pg_rewrite, "rewrite");
    if (r == IBX_OK)
        r = ibx__query_text(db, "SELECT current_setting('ibx.rewrite', true)", c->outcome, sizeof c->outcome);
    return r;
}

IBX_API ibx_result ibx_store_rewrite(ibx_store *store, int64_t *rows) {
    ibx__rewrite_ctx c;
    ibx_result r;
    if (!store) return IBX_ERR_INVALID_ARG;
    if (!store->q) return ibx__fail(&store->err, IBX_ERR_STATE, "ibx_store_rewrite", "store is not open");
    if (IBX__ONE(store->db.d)->id != IBX_DIALECT_POSTGRESQL)
        return ibx__fail(&store->err, IBX_ERR_UNSUPPORTED, "ibx_store_rewrite",
                         "only PostgreSQL tables are rewritten: statements name their columns, so a table "
                         "on this database keeps the column order it was created with");
    c.s = store;
    c.outcome[0] = '\0';
    r = ibx__unit(&store->db, ibx__rewrite_unit, &c, "rewrite table");
    if (r != IBX_OK) return r;
    if (strcmp(c.outcome, "current") == 0) return IBX_EMPTY;
    if (rows) *rows = (int64_t)strtoll(c.outcome, NULL, 10);
    ibx__log(&store->hooks, IBX_LOG_INFO, store->store_id, "table %s rewritten into this release's column order "
             "(%s rows)", store->table, c.outcome);
    /* Statistics for the planner (the new table has none), outside the lock. */
    if (ibx__rewrite_step(&store->db, store, store->table, "ANALYZE {T}", "rewrite: analyze") != IBX_OK)
        ibx__log(&store->hooks, IBX_LOG_WARN, store->store_id, "rewrite: ANALYZE %s failed (%s): the "
                 "reap analyzes it later", store->table, store->err.message);
    return IBX_OK;
}

/* The checks of ibx_store_open that need no allocation beyond the store. */
static ibx_result ibx__store_desc_check(ibx_store *s, const ibx_store_desc *desc) {
    static const char fn[] = "ibx_store_open";
    if ((desc->connection_string != NULL) == (desc->hdbc != NULL))
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: connection_string",
                         "give exactly one of connection_string and hdbc");
    if (desc->connection_string && !desc->connection_string[0])
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: connection_string",
                         "connection_string is empty");
    if ((int)desc->dialect < 0 || (int)desc->dialect > (int)IBX_DIALECT_SQLSERVER)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: dialect",
                         "dialect %d is not an ibx_dialect value", (int)desc->dialect);
    if (ibx__wake_path_check(&s->err, "ibx_store_open: wake_path", desc->wake_path) != IBX_OK)
        return s->err.result;
    if (desc->wake_path && !(s->wake_path = ibx__strdup(&s->hooks, desc->wake_path)))
        return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_store_open", "out of memory");
    if (desc->max_pending < 0)
        return ibx__range_fail(&s->err, fn, "max_pending", "0 (no cap) or more", (long long)desc->max_pending);
    s->max_pending = desc->max_pending;
    if (desc->max_starts < 0 || desc->max_starts > IBX__MAX_STARTS_LIMIT)
        return ibx__range_fail(&s->err, fn, "max_starts", "0 (the default, " IBX__STR(IBX__MAX_STARTS_DEFAULT)
                               ") or 1.." IBX__STR(IBX__MAX_STARTS_LIMIT), desc->max_starts);
    s->max_starts = desc->max_starts ? desc->max_starts : IBX__MAX_STARTS_DEFAULT;
    if (desc->statement_timeout_seconds < 0)
        return ibx__range_fail(&s->err, fn, "statement_timeout_seconds", "0 (none) or more",
                               desc->statement_timeout_seconds);
    if (desc->login_timeout_seconds < -1)
        return ibx__range_fail(&s->err, fn, "login_timeout_seconds",
                               "-1 (the driver's), 0 (the default) or more", desc->login_timeout_seconds);
    if ((int)desc->message_log_level < 0 || (int)desc->message_log_level > (int)IBX_LOG_OFF)
        return ibx__range_fail(&s->err, fn, "message_log_level", "0 (the default) or an ibx_log_level",
                               (int)desc->message_log_level);
    s->pending_estimate = INT64_MAX; /* unknown: the first enqueue counts */
    return ibx__store_names(s, desc);
}

IBX_API ibx_result ibx_store_open(const ibx_store_desc *desc, ibx_store **out) {
    ibx__hooks hooks;
    ibx_store *s;
    ibx_result r;
    if (!out) return IBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc) return IBX_ERR_INVALID_ARG;
    if (ibx__hooks_resolve(&hooks, &desc->hooks) != IBX_OK) return IBX_ERR_INVALID_ARG;
    s = (ibx_store *)ibx__alloc(&hooks, sizeof *s);
    if (!s) return IBX_ERR_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->wake_fd = -1;
    ibx__hooks_resolve(&s->hooks, &desc->hooks); /* again, in place: it must not move */
    if (s->hooks.env_level_bad) ibx__log(&s->hooks, IBX_LOG_WARN, desc->store_id ? desc->store_id : IBX__NOUN,
                                         "IBX_LOG_LEVEL is not one of debug, info, warn, error, off: logging at INFO");
    s->db.hooks = &s->hooks;
    s->db.err = &s->err;
    s->db.store_id = IBX__NOUN;
    s->db.forced = desc->dialect;
    s->db.login_timeout_s = desc->login_timeout_seconds == 0 ? IBX__LOGIN_TIMEOUT_DEFAULT_S
                          : desc->login_timeout_seconds < 0 ? 0 : desc->login_timeout_seconds;
    s->db.statement_timeout_s = desc->statement_timeout_seconds > 0 ? desc->statement_timeout_seconds : 0;
    s->metrics = desc->metrics;
    s->message_log_level = desc->message_log_level ? desc->message_log_level : IBX_LOG_DEBUG;
    ibx__store_own_open(&s->own, desc);
    *out = s;
    r = ibx__store_desc_check(s, desc);
    if (r != IBX_OK) return r;
    s->db.store_id = s->store_id;
    r = desc->connection_string ? ibx__db_connect(&s->db, desc->connection_string)
                                : ibx__db_adopt(&s->db, desc->hdbc);
    if (r == IBX_OK) r = ibx__store_prepare_sql(s);
    if (r == IBX_OK && desc->deploy_schema) r = ibx_store_deploy(s);
    if (r != IBX_OK) {
        ibx__log(&s->hooks, IBX_LOG_ERROR, s->store_id, "open failed: %s: %s (%s)",
                 ibx__result_str(r), s->err.message, s->err.where);
        return r;
    }
    ibx__error_clear(&s->err);
    ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "opened: %s %s via %s, table %s", s->db.dbms_name,
             s->db.dbms_version, s->db.driver_name, s->table);
    return IBX_OK;
}

IBX_API void ibx_store_close(ibx_store *store) {
    ibx__hooks hooks;
    int i;
    if (!store) return;
    ibx__db_close(&store->db);
    hooks = store->hooks;
    for (i = 0; i < IBX__Q_COUNT; i++) ibx__free(&hooks, store->sql[i]);
    for (i = 0; i < IBX__KEY_LISTS; i++) ibx__buf_free(&hooks, &store->keys[i]);
    for (i = 0; i < IBX__KEY_LISTS; i++) ibx__buf_free(&hooks, &store->carry[i]);
    ibx__store_own_free(&hooks, &store->own);
    ibx__buf_free(&hooks, &store->rows);
    ibx__buf_free(&hooks, &store->read_rows);
    ibx__free(&hooks, store->msgs);
    ibx__free(&hooks, store->offsets);
    for (i = 0; i < store->hist_count; i++) ibx__free(&hooks, store->hist[i].topic);
    ibx__free(&hooks, store->hist);
    ibx__free(&hooks, store->schema);
    ibx__free(&hooks, store->table);
    ibx__free(&hooks, store->store_id);
    ibx__free(&hooks, store->worker_name);
    ibx__free(&hooks, store->wake_path);
#if IBX__WAKE_SOCKET
    if (store->wake_fd >= 0) close(store->wake_fd);
#endif
    ibx__free(&hooks, store);
}

IBX_API ibx_result ibx_store_get_info(const ibx_store *store, ibx_store_info *info) {
    if (!store || !info) return IBX_ERR_INVALID_ARG;
    memset(info, 0, sizeof *info);
    info->dialect = store->db.d ? store->db.d->id : IBX_DIALECT_AUTO;
    ibx__copy(info->dbms_name, sizeof info->dbms_name, store->db.dbms_name);
    ibx__copy(info->dbms_version, sizeof info->dbms_version, store->db.dbms_version);
    ibx__copy(info->driver_name, sizeof info->driver_name, store->db.driver_name);
    ibx__copy(info->store_id, sizeof info->store_id, store->store_id ? store->store_id : IBX__NOUN);
    return IBX_OK;
}

IBX_API const ibx_error *ibx_store_last_error(const ibx_store *store) {
    return store ? &store->err : ibx__null_error();
}

IBX_API ibx_result ibx_store_counters(const ibx_store *store, int64_t counters[IBX_METRIC_COUNT_]) {
    if (!store || !counters) return IBX_ERR_INVALID_ARG;
    memcpy(counters, store->counters, sizeof store->counters);
    return IBX_OK;
}

/* A store that can run statements, with its last error cleared. */
static ibx_result ibx__store_ready(ibx_store *s, const char *fn) {
    if (!s) return IBX_ERR_INVALID_ARG;
    ibx__error_clear(&s->err);
    if (!s->q) return ibx__fail(&s->err, IBX_ERR_STATE, fn, "store is not open");
    return IBX_OK;
}

/* A new time-ordered id (UUIDv7) from the store's clock and random hooks. */
IBX__PRIVATE void ibx__new_uuid(ibx_store *s, char out[37]) {
    ibx__uuid_v7(&s->uuids, ibx__now_ms(&s->hooks), ibx__random(&s->hooks), ibx__random(&s->hooks), out);
}

IBX_API ibx_result ibx_owner_token(ibx_store *store, char out[37]) {
    if (!store || !out) return IBX_ERR_INVALID_ARG;
    ibx__new_uuid(store, out);
    return IBX_OK;
}

/* A UUID in lower case: SQLite compares text exactly, PostgreSQL does not. */
static void ibx__lower_uuid(const char *in, char out[37]) {
    int i;
    for (i = 0; i < 36; i++) out[i] = in[i] >= 'A' && in[i] <= 'F' ? (char)(in[i] + 32) : in[i];
    out[36] = '\0';
}

/* An owner token: a UUID, not the empty one (it would match rows nobody
 * owns), nor one of version 0: the inbox marks a lease whose message was
 * redelivered with new content by setting the version digit to 0. */
static ibx_result ibx__check_token(ibx_store *s, const char *fn, const char *token) {
    char where[96];
    snprintf(where, sizeof where, "%s: owner_token", fn);
    if (!ibx__uuid_is_valid(token))
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where,
                         "owner_token must be a UUID" IBX__WHY(" (ibx_owner_token)"));
    if (token[14] == '0')
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where,
                         "owner_token must not be the empty UUID nor of version 0 (its 15th character)");
    ibx__lower_uuid(token, s->token);
    return IBX_OK;
}

/* Run `unit` in the caller's transaction on `hdbc` (statements are made and
 * freed on it per call, and nothing is committed or rolled back here), or,
 * with hdbc NULL, as a unit of work of the store's own (committed; `flags`
 * as for ibx__unit_run). */
IBX__PRIVATE ibx_result ibx__unit_or_caller(ibx_store *s, void *hdbc,
                                            ibx_result (*unit)(ibx__db *db, void *ctx), void *ctx,
                                            const char *what, int flags) {
    ibx__db caller;
    ibx_result r;
    if (!hdbc) return ibx__unit_run(&s->db, unit, ctx, what, flags);
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
    caller.unit = ibx__unit_mode(&caller, flags);
    IBX_ASSERT(caller.unit == IBX__RUN_CALLER);
    /* In autocommit (PostgreSQL, MariaDB) the write would commit at once,
     * apart from the caller's transaction, and survive its rollback. */
    r = ibx__check_autocommit(&caller);
    if (r != IBX_OK) {
        snprintf(s->err.where, sizeof s->err.where, "%s: hdbc", what);
        return r;
    }
    r = unit(&caller, ctx);
    ibx__db_free_statements(&caller);
    /* psqlODBC (statement-level rollback: an internal savepoint around each
     * statement) may lose the connection after a statement ran, report the
     * statement as successful and the caller's COMMIT too, which then
     * commits nothing. What the driver knows is dead is not OK. */
#ifndef IBX_SQLITE3_API
    {
        SQLUINTEGER dead = 0;
        if (r >= 0 && IBX__ONE(caller.d)->dead_flag_is_local &&
            SQL_SUCCEEDED(SQLGetConnectAttr(caller.dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
            dead == SQL_CD_TRUE) {
            r = ibx__fail(&s->err, IBX_ERR_DB_TRANSIENT, what,
                          "the caller's connection was lost" IBX__WHY(": its transaction is gone; roll it back"));
            s->err.connection_lost = 1;
        }
    }
#endif
    return r;
}

/* The session's isolation level `level` (MariaDB's tx_isolation: NULL or
 * "" when unknown) for a keyed enqueue, in the caller's transaction: READ
 * COMMITTED, as ibx_enqueue_tx says why. */
IBX__PRIVATE ibx_result ibx__isolation_check(ibx_error *err, const char *level) {
    if (!level || !level[0] || strcmp(level, "READ-COMMITTED") == 0 || strcmp(level, "READ-UNCOMMITTED") == 0)
        return IBX_OK;
    return ibx__fail(err, IBX_ERR_STATE, "hdbc: isolation",
                     "a keyed enqueue needs READ COMMITTED, not %s" IBX__WHY(": at REPEATABLE READ the "
                     "transaction's snapshot may predate a commit of the key it must follow, at SERIALIZABLE "
                     "the read would lock the key until the caller commits; SET SESSION TRANSACTION "
                     "ISOLATION LEVEL READ COMMITTED on the connection"), level);
}

/* Run `unit` recording its statements for the caller's driver (ibx_sql):
 * *out gets them on success. */
IBX__PRIVATE ibx_result ibx__unit_capture(ibx_store *s, ibx_result (*unit)(ibx__db *db, void *ctx), void *ctx,
                                          int markers, ibx_sql **out) {
    ibx__db caller;
    ibx_sql *c = (ibx_sql *)ibx__alloc(&s->hooks, sizeof *c);
    ibx_result r;
    if (!c) return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_sql", "out of memory");
    memset(c, 0, sizeof *c);
    c->hooks = s->hooks;
    c->markers = markers;
    c->add = ibx__capture_add;
    memset(&caller, 0, sizeof caller);
    caller.hooks = &s->hooks;
    caller.store_id = s->store_id;
    caller.err = &s->err;
    caller.d = s->db.d;
    caller.sql = s->db.sql;
    caller.callers_tx = 1;
    caller.capture = c;
    r = unit(&caller, ctx);
    if (r == IBX_OK && !ibx__capture_end(c)) r = ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_sql", "out of memory");
    if (r != IBX_OK) {
        ibx_sql_free(c);
        return r;
    }
    *out = c;
    return IBX_OK;
}

/* ibx__unit_capture, as the *_enqueue_sql calls pass it to the code they
 * share with the other enqueues: only they name it. */
typedef ibx_result (*ibx__capture_fn)(ibx_store *s, ibx_result (*unit)(ibx__db *db, void *ctx), void *ctx,
                                      int markers, ibx_sql **out);

/* The arguments every *_enqueue_sql call takes: out_sql and markers. */
IBX__PRIVATE ibx_result ibx__sql_args(ibx_store *s, const char *fn, int markers, ibx_sql **out_sql) {
    char where[96];
    if (!s) return IBX_ERR_INVALID_ARG;
    snprintf(where, sizeof where, "%s: %s", fn, out_sql ? "markers" : "out_sql");
    if (!out_sql) return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where, "out_sql must not be NULL");
    if (markers != IBX_SQL_MARKERS_QUESTION && markers != IBX_SQL_MARKERS_DOLLAR)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where,
                         "markers must be IBX_SQL_MARKERS_QUESTION or IBX_SQL_MARKERS_DOLLAR");
    return IBX_OK;
}

IBX_API int ibx_sql_count(const ibx_sql *sql) {
    return sql ? sql->count : 0;
}

IBX_API const ibx_sql_stmt *ibx_sql_at(const ibx_sql *sql, int i) {
    return sql && i >= 0 && i < sql->count ? &sql->stmts[i] : NULL;
}

IBX_API ibx_result ibx_sql_check(ibx_store *store, const ibx_sql_stmt *stmt, const char *value) {
    if (!store) return IBX_ERR_INVALID_ARG;
    if (!stmt || stmt->check_column <= 0)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_sql_check: stmt",
                         "stmt must be a statement with a check_column");
    return ibx__isolation_check(&store->err, value);
}

IBX_API const char *ibx_sql_id(const ibx_sql *sql, int i) {
    return sql && i >= 0 && i < sql->id_count ? sql->ids[i] : NULL;
}

IBX_API ibx_result ibx_sql_error(ibx_store *store, ibx_result result, const char *where, const char *sqlstate,
                                 long native, const char *message) {
    int fault;
    if (!store) return IBX_ERR_INVALID_ARG;
    fault = result != IBX_ERR_DB ? IBX__FAULT_PERMANENT : ibx__classify(store->db.d, sqlstate ? sqlstate : "", native);
    ibx__error_clear(&store->err);
    ibx__copy(store->err.where, sizeof store->err.where, where ? where : "");
    ibx__copy(store->err.sqlstate, sizeof store->err.sqlstate, sqlstate ? sqlstate : "");
    ibx__copy(store->err.message, sizeof store->err.message, message ? message : "");
    store->err.native = native;
    store->err.connection_lost = fault == IBX__FAULT_LOST || fault == IBX__FAULT_LOST_PERMANENT;
    store->err.result = result != IBX_ERR_DB ? result
                      : fault == IBX__FAULT_PERMANENT || fault == IBX__FAULT_LOST_PERMANENT ? IBX_ERR_DB
                                                                                            : IBX_ERR_DB_TRANSIENT;
    ibx__log(&store->hooks, IBX_LOG_DEBUG, store->store_id, "%s failed: %s", store->err.where, store->err.message);
    return store->err.result;
}

IBX_API void ibx_sql_free(ibx_sql *sql) {
    ibx__hooks h;
    if (!sql) return;
    h = sql->hooks;
    ibx__buf_free(&h, &sql->text);
    ibx__buf_free(&h, &sql->stmts_raw);
    ibx__buf_free(&h, &sql->params_raw);
    ibx__free(&h, sql->stmts);
    ibx__free(&h, sql->params);
    ibx__free(&h, sql->ids);
    ibx__free(&h, sql);
}

/* >> claim ---------------------------------------------------------------------- */

static const char *ibx__at(const ibx__buf *b, size_t off) {
    return off == (size_t)-1 ? NULL : b->data + off;
}

enum { IBX__SETTLE_ACK, IBX__SETTLE_ABANDON, IBX__SETTLE_FAIL, IBX__SETTLE_EXTEND };
static int ibx__settle_params(ibx__param *p, int kind, const char *worker, const char *token,
                              const char *error, int64_t value, int attempts, const ibx__buf *keys);

typedef struct ibx__claim_ctx {
    ibx_store *s;
    int lease_seconds, batch_size, count;
    int ack_count;               /* s->carry's acks to run first, in the claim's unit (0: none) */
    int ack_only;                /* run only them (the claim gave up: IBX__CLAIM_REDOS) */
    int ack_keyed;               /* some of them have an ordering key: acked before the claim */
    int64_t acked;               /* how many of them the ack changed */
    int ack_after;               /* keyed: the claim runs first (IBX__Q_CLAIM_CARRY), the acks
                                    after it has read its rows */
} ibx__claim_ctx;

/* The first step of a claim in three statements (no UPDATE ... RETURNING):
 * the pick (arguments: the batch size, and the window: how many ready rows
 * it looks at, unlocked, before locking up to a batch of them) returns the
 * rows it locked as the claim's short row, as they are before the claim
 * (the lease column: the pick's time), read into the batch (c->count), and
 * their keys into s->keys, ended, ready to bind. The window is twice the
 * batch; when other claimers hold all of it, once more with twenty times. */
static ibx_result ibx__claim_pick(ibx__db *db, ibx__claim_ctx *c) {
    ibx_store *s = c->s;
    ibx__param p[2];
    ibx__row_head head;
    SQLHSTMT cur;
    ibx_result r = IBX_EMPTY;
    int k, pass;
    for (pass = 0; pass < 2 && c->count == 0 && r == IBX_EMPTY; pass++) {
        for (k = 0; k < IBX__KEY_LISTS; k++) s->keys[k].len = 0;
        s->rows.len = 0;
        ibx__p_i64(&p[0], c->batch_size);
        ibx__p_i64(&p[1], (int64_t)c->batch_size * (pass == 0 ? 2 : 20));
        cur = NULL; /* a failed execute frees the statement: never close the last pass's */
        r = ibx__exec(db, IBX__Q_CLAIM_PICK, IBX__SQL(s, IBX__Q_CLAIM_PICK), p, 2, NULL, &cur);
        if (r == IBX_OK) r = ibx__bind_head(db, cur, &head, IBX__CLAIM_TEXTS, IBX__CLAIM_INTS);
        while (r == IBX_OK && (r = ibx__fetch(db, cur)) == IBX_OK) {
            ibx_message *m;
            if (c->count >= c->batch_size) { /* see ibx__claim_once */
                r = ibx__fail(db->err, IBX_ERR_STATE, "ibx_claim",
                              "the claim's pick returned more than %d rows" IBX__WHY("; rolled back"),
                              c->batch_size);
                break;
            }
            m = &s->msgs[c->count];
            r = ibx__read_claimed(db, cur, &head, s->token, m, &s->rows, &s->offsets[c->count]);
            if (r != IBX_OK) break;
            /* Pointed for its key now, again once the buffer stops moving. */
            ibx__point_strings(&s->rows, m, &s->offsets[c->count]);
            if (!ibx__msg_key_add(db->hooks, db->d, s->keys, m))
                r = ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_claim", "out of memory");
            else
                c->count++;
        }
        ibx__unbind(cur); /* `head` is about to go */
        ibx__close(cur);
    }
    if (r != IBX_EMPTY) return r;
    for (k = 0; k < IBX__KEY_LISTS && c->count > 0; k++)
        if (!ibx__list_end(db->hooks, &s->keys[k], db->d))
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "ibx_claim", "out of memory");
    return IBX_OK;
}

/* Where the dialect has no UPDATE ... RETURNING: pick and lock the rows
 * (ibx__claim_pick), then mark them ours. When the UPDATE matched every
 * picked row (its count is rows matched, see OPTION=2), the picked rows
 * are the claim's, with Starts + 1 and the lease filled in here: the
 * pick's time + the lease, at most the two statements' distance before the
 * stored one, so a handler never counts on more than it holds. Where row
 * locks are per node (Galera), two nodes can pick one row, and the UPDATE
 * checks the row again: when it matched fewer, the rows that carry our
 * token are read back instead; *cur is that read's cursor. */
static ibx_result ibx__claim_picked(ibx__db *db, ibx__claim_ctx *c, SQLHSTMT *cur) {
    ibx_store *s = c->s;
    ibx__param p[2 + IBX__KEY_LISTS];
    int64_t marked = -1;
    int k, i;
    ibx_result r = ibx__claim_pick(db, c);
    if (r != IBX_OK || c->count == 0) return r;
    ibx__p_text(&p[0], s->token, 36);
    ibx__p_i64(&p[1], c->lease_seconds);
    for (k = 0; k < IBX__KEY_LISTS; k++) ibx__p_text(&p[2 + k], s->keys[k].data, s->keys[k].len);
    r = ibx__exec(db, IBX__Q_CLAIM, s->sql[IBX__Q_CLAIM], p, 2 + IBX__KEY_LISTS, &marked, NULL);
    if (r != IBX_OK) return r;
    if (marked == c->count) {
        for (i = 0; i < c->count; i++) {
            s->msgs[i].starts++;
            s->msgs[i].locked_until_ms += (int64_t)c->lease_seconds * 1000;
        }
        return IBX_OK;
    }
    ibx__log(db->hooks, IBX_LOG_DEBUG, s->store_id, "claim: %lld of %d picked rows marked; reading them back",
             (long long)marked, c->count);
    c->count = 0;
    s->rows.len = 0;
    return ibx__exec(db, IBX__Q_CLAIM_READ, IBX__SQL(s, IBX__Q_CLAIM_READ), p, 2 + IBX__KEY_LISTS, NULL, cur);
}

/* ibx__claim_recheck: the claim was rolled back (another claim holds one
 * of its keys); run it again. */
#define IBX__CLAIM_REDO ((ibx_result)15) /* no public result: within the enum's range for C++ */
#define IBX__CLAIM_REDOS 3

/* The claim's statements, up to the cursor of its rows (none after the
 * acks alone). The carried acks: in the claim's statement where one can
 * hold both (IBX__Q_CLAIM_ACK), else a statement before it in its
 * transaction; keyed ones where IBX__Q_CLAIM_CARRY is set, a statement
 * after it (c->ack_after: ibx__claim_once, once the rows are read). */
static ibx_result ibx__claim_exec(ibx__db *db, ibx__claim_ctx *c, int fused, SQLHSTMT *cur) {
    ibx_store *s = c->s;
    ibx__param p[8 + IBX__KEY_LISTS];
    int n = 0;
    ibx_result r;
    const int after = IBX__CARRY_FIRST(s) && c->ack_after;
    if (c->ack_count > 0)
        n = ibx__settle_params(p, IBX__SETTLE_ACK, s->worker_name ? s->worker_name : s->token, s->token, NULL, 0,
                               0, s->carry);
    if (c->ack_count > 0 && !fused && !after) {
        r = ibx__exec(db, IBX__Q_ACK, s->sql[IBX__Q_ACK], p, n, &c->acked, NULL);
        if (r == IBX_OK && c->ack_keyed) r = ibx__own_acked(db, s, s->carry, c->acked);
        if (r != IBX_OK || c->ack_only) return r;
    }
    if (after) { /* the acked ids: s->carry[0] (no keyed acks in a claim that picks) */
        ibx__p_text(&p[0], s->token, 36);
        ibx__p_i64(&p[1], c->lease_seconds);
        ibx__p_i64(&p[2], c->batch_size);
        ibx__p_text(&p[3], s->carry[0].data, s->carry[0].len);
        r = ibx__exec(db, IBX__Q_CLAIM_CARRY, s->sql[IBX__Q_CLAIM_CARRY], p, 4, NULL, cur);
    } else if (fused) {
        ibx__p_text(&p[n], s->token, 36);
        ibx__p_i64(&p[n + 1], c->lease_seconds);
        ibx__p_i64(&p[n + 2], c->batch_size);
        r = ibx__exec(db, IBX__Q_CLAIM_ACK, IBX__SQL(s, IBX__Q_CLAIM_ACK), p, n + 3, NULL, cur);
    } else if (IBX__SQL(s, IBX__Q_CLAIM_PICK)) {
        r = ibx__claim_picked(db, c, cur);
    } else {
        ibx__p_text(&p[0], s->token, 36);
        ibx__p_i64(&p[1], c->lease_seconds);
        ibx__p_i64(&p[2], c->batch_size);
        r = ibx__exec(db, IBX__Q_CLAIM, s->sql[IBX__Q_CLAIM], p, 3, NULL, cur);
    }
    return r;
}

static ibx_result ibx__claim_once(ibx__db *db, ibx__claim_ctx *c) {
    ibx_store *s = c->s;
    SQLHSTMT cur = NULL;
    ibx__row_head head;
    const int short_rows = !IBX__FULL_ROWS(s->q);
    const int fused = c->ack_count > 0 && !c->ack_only && !c->ack_keyed && IBX__SQL(s, IBX__Q_CLAIM_ACK);
    int counted = 0;
    ibx_result r;
    c->count = 0;
    c->acked = 0;
    c->ack_after = IBX__CARRY_FIRST(s) && c->ack_count > 0 && !c->ack_only && c->ack_keyed;
    s->rows.len = 0;
    r = ibx__claim_exec(db, c, fused, &cur);
    if (c->ack_only) return r;
    if (r == IBX_OK && cur && short_rows) r = ibx__bind_head(db, cur, &head, IBX__CLAIM_TEXTS, IBX__CLAIM_INTS);
    while (r == IBX_OK && cur && (r = ibx__fetch(db, cur)) == IBX_OK) {
        if (fused && !counted) { /* the ack's count, in every row: read once (the last column) */
            const int empty = head.ind[IBX__CLAIM_INTS - 1] == SQL_NULL_DATA; /* no mask: nothing claimed */
            if (empty && (r = ibx__get_i64(db, cur, IBX__CLAIM_COLS + 1, &c->acked, NULL)) != IBX_OK) break;
            counted = 1 + !empty;
            if (empty) continue;
        }
        /* More rows than asked is a statement bug (a LIMIT ... SKIP LOCKED
         * subquery run twice does it): roll the claim back, lose nothing. */
        if (c->count >= c->batch_size) {
            r = ibx__fail(db->err, IBX_ERR_STATE, "ibx_claim",
                          "the claim statement returned more than %d rows" IBX__WHY("; rolled back"),
                          c->batch_size);
            break;
        }
        r = short_rows ? ibx__read_claimed(db, cur, &head, s->token, &s->msgs[c->count], &s->rows,
                                           &s->offsets[c->count])
                       : ibx__read_message(db, cur, &s->msgs[c->count], &s->rows, &s->offsets[c->count]);
        if (r == IBX_OK && counted == 2) {
            r = ibx__get_i64(db, cur, IBX__CLAIM_COLS + 1, &c->acked, NULL);
            counted = 1;
        }
        if (r == IBX_OK) c->count++;
    }
    if (short_rows) ibx__unbind(cur); /* `head` is about to go */
    ibx__close(cur);
    if (r == IBX_EMPTY) r = IBX_OK;
    if (r == IBX_OK && IBX__CARRY_FIRST(s) && c->ack_after) { /* before the check: they are Done there */
        ibx__param p[8 + IBX__KEY_LISTS];
        const int n = ibx__settle_params(p, IBX__SETTLE_ACK, s->worker_name ? s->worker_name : s->token, s->token,
                                         NULL, 0, 0, s->carry);
        r = ibx__exec(db, IBX__Q_ACK, s->sql[IBX__Q_ACK], p, n, &c->acked, NULL);
    }
    return r == IBX_OK && c->count > 0 ? ibx__claim_recheck(db, s, &c->count) : r;
}

static ibx_result ibx__claim_unit(ibx__db *db, void *vctx) {
    ibx__claim_ctx *c = (ibx__claim_ctx *)vctx;
    const int mode = db->unit; /* the unit's, begun by ibx__unit_run */
    ibx_result r;
    int redo;
    for (redo = 0;; redo++) {
        r = ibx__claim_once(db, c);
        if (r != IBX__CLAIM_REDO) return r;
        c->count = 0;
        if (redo + 1 >= IBX__CLAIM_REDOS && c->ack_count == 0) return IBX_OK; /* nothing claimed this round */
        if ((r = ibx__begin(db, mode)) != IBX_OK) return r;
        if (redo + 1 >= IBX__CLAIM_REDOS) { /* the rollback took the carried acks too: those alone */
            c->ack_only = 1;
            return ibx__claim_once(db, c);
        }
    }
}

/* A lease of 1..IBX_LEASE_MAX_SECONDS. */
static ibx_result ibx__check_lease(ibx_store *s, const char *fn, int lease_seconds) {
    char where[96];
    if (lease_seconds >= 1 && lease_seconds <= IBX_LEASE_MAX_SECONDS) return IBX_OK;
    snprintf(where, sizeof where, "%s: lease_seconds", fn);
    return ibx__fail(&s->err, IBX_ERR_OUT_OF_RANGE, where, "lease_seconds must be 1..%d, got %d",
                     IBX_LEASE_MAX_SECONDS, lease_seconds);
}

/* Room for batch_size messages; grows once, so steady state allocates nothing. */
static ibx_result ibx__claim_room(ibx_store *s, int batch_size) {
    ibx_message *grown;
    ibx__row_offsets *offsets;
    if (batch_size <= s->msgs_cap) return IBX_OK;
    grown = (ibx_message *)ibx__realloc(&s->hooks, s->msgs, sizeof *grown * (size_t)batch_size);
    if (!grown) return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_claim", "out of memory");
    s->msgs = grown;
    offsets = (ibx__row_offsets *)ibx__realloc(&s->hooks, s->offsets, sizeof *offsets * (size_t)batch_size);
    if (!offsets) return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_claim", "out of memory");
    s->offsets = offsets;
    s->msgs_cap = batch_size;
    return IBX_OK;
}

/* ibx_claim, after the store's carried acks (store->carry, `acks` of
 * them, `keyed` where some have an ordering key; their count changed in
 * *acked) in the same unit: all or nothing. */
static ibx_result ibx__claim_run(ibx_store *store, const char *owner_token, int lease_seconds, int batch_size,
                                 int acks, int keyed, int64_t *acked, const ibx_message **messages, int *count) {
    ibx__claim_ctx ctx;
    ibx_result r;
    int i;
    r = ibx__store_ready(store, "ibx_claim");
    if (r != IBX_OK) return r;
    if (!messages || !count)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_claim: messages",
                         "output pointers must not be NULL");
    if ((r = ibx__check_token(store, "ibx_claim", owner_token)) != IBX_OK) return r;
    if ((r = ibx__check_lease(store, "ibx_claim", lease_seconds)) != IBX_OK) return r;
    if (batch_size < 1 || batch_size > IBX_BATCH_MAX)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_claim: batch_size",
                         "batch_size must be 1..%d, got %d", IBX_BATCH_MAX, batch_size);
    if ((r = ibx__claim_room(store, batch_size)) != IBX_OK) return r;
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
    r = ibx__unit(&store->db, ibx__claim_unit, &ctx, acks > 0 ? "ack and claim" : "claim");
    if (r != IBX_OK) return r;
    if (acks > 0) {
        ibx__count(store, IBX_METRIC_DISPATCHED, ctx.acked);
        ibx__log(&store->hooks, IBX_LOG_DEBUG, store->store_id, "ack: %lld of %d (with the claim)",
                 (long long)ctx.acked, acks);
        *acked = ctx.acked;
    }
    for (i = 0; i < ctx.count; i++) {
        ibx__point_strings(&store->rows, &store->msgs[i], &store->offsets[i]);
        store->msgs[i].store = store;
        ibx__own_claimed(store, &store->msgs[i]);
    }
    *messages = store->msgs;
    *count = ctx.count;
    ibx__log(&store->hooks, IBX_LOG_DEBUG, store->store_id, "claimed %d message(s) for %s", ctx.count,
             store->token);
    return ctx.count > 0 ? IBX_OK : IBX_EMPTY;
}

IBX_API ibx_result ibx_claim(ibx_store *store, const char *owner_token, int lease_seconds,
                             int batch_size, const ibx_message **messages, int *count) {
    return ibx__claim_run(store, owner_token, lease_seconds, batch_size, 0, 0, NULL, messages, count);
}

/* >> get ---------------------------------------------------------------------------- */

typedef struct ibx__get_ctx {
    ibx_store *s;
    ibx__param *p;               /* the message's key, as the dialect's GET takes it */
    int n;
    ibx_message *m;
    ibx__row_offsets o;
    int found;
} ibx__get_ctx;

static ibx_result ibx__get_unit(ibx__db *db, void *vctx) {
    ibx__get_ctx *c = (ibx__get_ctx *)vctx;
    SQLHSTMT cur = NULL;
    ibx_result r;
    c->s->read_rows.len = 0;
    c->found = 0;
    r = ibx__exec(db, IBX__Q_GET, c->s->sql[IBX__Q_GET], c->p, c->n, NULL, &cur);
    if (r == IBX_OK) r = ibx__fetch(db, cur);
    if (r == IBX_OK) {
        r = ibx__read_message(db, cur, c->m, &c->s->read_rows, &c->o);
        c->found = r == IBX_OK;
    }
    ibx__close(cur);
    return r == IBX_EMPTY ? IBX_OK : r;
}

/* Read the message whose key is in p[0..n) into *out, its strings in the
 * store's read_rows (apart from a claim's). IBX_EMPTY when there is none. */
static ibx_result ibx__get_by_key(ibx_store *s, ibx__param *p, int n, ibx_message *out) {
    ibx__get_ctx ctx;
    ibx_message m;
    ibx_result r;
    ctx.s = s;
    ctx.p = p;
    ctx.n = n;
    ctx.m = &m;
    r = ibx__unit_read(&s->db, ibx__get_unit, &ctx, "get");
    if (r != IBX_OK) return r;
    if (!ctx.found) return IBX_EMPTY;
    ibx__point_strings(&s->read_rows, &m, &ctx.o);
    m.store = s;
    *out = m;
    return IBX_OK;
}

/* >> settle: ack, abandon, fail; reap, cleanup, stats ----------------------------- */

typedef struct ibx__count_ctx {
    ibx_store *s;
    int slot;
    ibx__param *p;
    int n;
    int64_t count;
} ibx__count_ctx;

/* Run a statement that reports how many rows it changed: as a row (a
 * function or procedure), or as the statement's row count (ibx__exec). */
static ibx_result ibx__count_unit(ibx__db *db, void *vctx) {
    ibx__count_ctx *c = (ibx__count_ctx *)vctx;
    return ibx__exec(db, c->slot, c->s->sql[c->slot], c->p, c->n, &c->count, NULL);
}

static ibx_result ibx__run_count(ibx_store *s, int slot, ibx__param *p, int n, const char *what,
                                 int64_t *count) {
    ibx__count_ctx ctx;
    ibx_result r;
    ctx.s = s;
    ctx.slot = slot;
    ctx.p = p;
    ctx.n = n;
    ctx.count = 0;
    r = ibx__unit_one(&s->db, ibx__count_unit, &ctx, what);
    if (r == IBX_OK && count) *count = ctx.count;
    return r;
}

/* The checks every settle call starts with; the key lists are emptied
 * for the caller to fill (ibx__key_lists_end closes them). */
static ibx_result ibx__settle_begin(ibx_store *s, const char *fn, const char *owner, int count,
                                    const void *keys) {
    char where[96];
    int k;
    ibx_result r = ibx__store_ready(s, fn);
    if (r != IBX_OK) return r;
    if ((r = ibx__check_token(s, fn, owner)) != IBX_OK) return r;
    snprintf(where, sizeof where, "%s: count", fn);
    if (count < 0) return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where, "count must be >= 0");
    snprintf(where, sizeof where, "%s: %s", fn, IBX__KEYS_ARG);
    if (count > 0 && !keys)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where, IBX__KEYS_ARG " must not be NULL");
    for (k = 0; k < IBX__KEY_LISTS; k++) s->keys[k].len = 0;
    return IBX_OK;
}

static ibx_result ibx__key_lists_end(ibx_store *s, const char *fn) {
    int k;
    for (k = 0; k < IBX__KEY_LISTS; k++)
        if (!ibx__list_end(&s->hooks, &s->keys[k], s->db.d))
            return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, fn, "out of memory");
    return IBX_OK;
}

/* A delay for abandon: IBX_DELAY_BACKOFF, or IBX__DELAY_MIN_MS..IBX_DELAY_MAX_MS. */
static ibx_result ibx__check_delay(ibx_store *s, const char *fn, int64_t delay_ms) {
    char where[96];
    if (delay_ms == IBX_DELAY_BACKOFF || (delay_ms >= IBX__DELAY_MIN_MS && delay_ms <= IBX_DELAY_MAX_MS))
        return IBX_OK;
    snprintf(where, sizeof where, "%s: delay_ms", fn);
    return ibx__fail(&s->err, IBX_ERR_OUT_OF_RANGE, where,
                     "delay_ms must be IBX_DELAY_BACKOFF or %d..%lld, got %lld",
                     IBX__DELAY_MIN_MS, (long long)IBX_DELAY_MAX_MS, (long long)delay_ms);
}

/* The parameters of a settle statement, in the order every dialect's
 * ACK / ABANDON / FAIL / EXTEND takes them; returns how many. `value` is
 * abandon's delay (IBX_DELAY_BACKOFF: the statement's default backoff) or
 * extend's lease in seconds. */
static int ibx__settle_params(ibx__param *p, int kind, const char *worker, const char *token,
                              const char *error, int64_t value, int attempts, const ibx__buf *keys) {
    int n = 0, k;
    if (kind == IBX__SETTLE_ACK && IBX__ACK_NAMES_WORKER) ibx__p_text(&p[n++], worker, (size_t)-1);
    if (kind == IBX__SETTLE_ABANDON || kind == IBX__SETTLE_EXTEND) {
        ibx__p_i64(&p[n], value);
        if (kind == IBX__SETTLE_ABANDON && value == IBX_DELAY_BACKOFF) p[n].ind = SQL_NULL_DATA;
        n++;
    }
    if (kind == IBX__SETTLE_ABANDON) ibx__p_i64(&p[n++], attempts);
    if (kind == IBX__SETTLE_ABANDON || kind == IBX__SETTLE_FAIL)
        ibx__p_text(&p[n++], error && error[0] ? error : NULL, (size_t)-1);
    ibx__p_text(&p[n++], token, 36);
    for (k = 0; k < IBX__KEY_LISTS; k++) ibx__p_text(&p[n++], keys[k].data, keys[k].len);
    return n;
}

/* Settle (or extend the leases of) the `count` messages whose keys are in
 * s->keys, in one statement. Abandon takes a delay (IBX_DELAY_BACKOFF: the
 * default backoff per message) and whether it uses up an attempt (not when
 * a message only waits); extend takes the lease in seconds. */
static ibx_result ibx__settle_lists(ibx_store *s, const ibx__buf *keys, int kind, int count, const char *error,
                                   int64_t value, int attempts, int64_t *changed) {
    static const int slots[4] = {IBX__Q_ACK, IBX__Q_ABANDON, IBX__Q_FAIL, IBX__Q_EXTEND};
    static const char *const names[4] = {"ack", "abandon", "fail", "lease extend"};
    static const int metrics[4] = {IBX_METRIC_DISPATCHED, IBX_METRIC_RETRIED, IBX_METRIC_DEAD, -1};
    ibx__param p[5 + IBX__KEY_LISTS];
    int64_t rows = 0;
    int n;
    ibx_result r;
    if (count == 0) {
        if (changed) *changed = 0;
        return IBX_OK;
    }
    n = ibx__settle_params(p, kind, s->worker_name ? s->worker_name : s->token, s->token, error, value,
                           attempts, keys);
    r = ibx__run_count(s, slots[kind], p, n, names[kind], &rows);
    if (r != IBX_OK) return r;
    /* In a transactional handler's transaction: counted by its commit. */
    if (metrics[kind] >= 0 && !s->db.callers_tx) ibx__count(s, (ibx_metric)metrics[kind], rows);
    if (changed) *changed = rows;
    ibx__log(&s->hooks, IBX_LOG_DEBUG, s->store_id, "%s: %lld of %d", names[kind], (long long)rows, count);
    if (keys == s->keys || (keys == s->carry && s->carry_keyed)) ibx__own_settled(s, keys, kind, rows);
    return IBX_OK;
}

static ibx_result ibx__settle(ibx_store *s, int kind, int count, const char *error, int64_t value, int attempts,
                              int64_t *changed) {
    return ibx__settle_lists(s, s->keys, kind, count, error, value, attempts, changed);
}

/* Settle claimed messages ms[which[0..n)] (the dispatcher's path). */
static ibx_result ibx__settle_messages(ibx_store *s, int kind, const ibx_message *ms, const int *which,
                                       int n, const char *error, int64_t delay_ms, int attempts,
                                       int64_t *changed) {
    int i, k;
    for (k = 0; k < IBX__KEY_LISTS; k++) s->keys[k].len = 0;
    for (i = 0; i < n; i++)
        if (!ibx__msg_key_add(&s->hooks, s->db.d, s->keys, &ms[which[i]]))
            return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "settle", "out of memory");
    if (ibx__key_lists_end(s, "settle") != IBX_OK) return IBX_ERR_NO_MEMORY;
    return ibx__settle(s, kind, n, error, delay_ms, attempts, changed);
}

IBX_API ibx_result ibx_reap(ibx_store *store, int64_t *reaped) {
    int64_t n = 0;
    ibx_result r = ibx__store_ready(store, "ibx_reap");
    if (r != IBX_OK) return r;
    r = ibx__run_count(store, IBX__Q_REAP, NULL, 0, "reap", &n);
    if (r != IBX_OK) return r;
    if (IBX__SQL(store, IBX__Q_WAKE)) { /* parked messages a concurrent enqueue hid from their wake */
        int64_t woken = 0;
        /* The reap committed: its count is returned whatever the wake does
         * (the next reap wakes again). */
        if (ibx__own_wake(store, NULL, &woken) != IBX_OK) {
            ibx__log(&store->hooks, IBX_LOG_WARN, store->store_id, "waking parked messages failed: %s",
                     store->err.message);
            ibx__error_clear(&store->err);
        }
        if (woken > 0)
            ibx__log(&store->hooks, IBX_LOG_INFO, store->store_id,
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
#ifndef IBX_NO_POSTGRESQL
    if (IBX__SQL(store, IBX__Q_ANALYZE) && store->db.own_connection &&
        ibx__run_count(store, IBX__Q_ANALYZE, NULL, 0, "analyze", NULL) != IBX_OK)
        ibx__log(&store->hooks, IBX_LOG_WARN, store->store_id, "refreshing the table's statistics failed: %s",
                 store->err.message);
#endif
    ibx__count(store, IBX_METRIC_REAPED, n);
    if (reaped) *reaped = n;
    ibx__log(&store->hooks, n > 0 ? IBX_LOG_INFO : IBX_LOG_DEBUG, store->store_id,
             "reaped %lld expired lease(s)", (long long)n);
    return IBX_OK;
}

IBX_API ibx_result ibx_cleanup(ibx_store *store, int64_t retention_ms, int batch_size,
                               int64_t *deleted) {
    ibx__param p[2];
    int64_t total = 0, n;
    ibx_result r = ibx__store_ready(store, "ibx_cleanup");
    if (r != IBX_OK) return r;
    if (retention_ms < 0 || retention_ms > IBX_RETENTION_MAX_MS)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_cleanup: retention_ms",
                         "retention_ms must be 0..%lld", (long long)IBX_RETENTION_MAX_MS);
    if (batch_size < 0 || batch_size > IBX_BATCH_MAX)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_cleanup: batch_size",
                         "batch_size must be 0..%d", IBX_BATCH_MAX);
    if (retention_ms == 0) retention_ms = IBX__RETENTION_DEFAULT_MS;
    if (batch_size == 0) batch_size = IBX__CLEANUP_BATCH_DEFAULT;
    do { /* one bounded transaction per batch */
        ibx__p_i64(&p[0], retention_ms);
        ibx__p_i64(&p[1], batch_size);
        n = 0;
        r = ibx__run_count(store, IBX__Q_CLEANUP, p, 2, "cleanup", &n);
        total += n;
    } while (r == IBX_OK && n >= batch_size);
    if (deleted) *deleted = total;
    ibx__count(store, IBX_METRIC_CLEANED_UP, total);
    if (r == IBX_OK && total > 0)
        ibx__log(&store->hooks, IBX_LOG_INFO, store->store_id, "cleanup deleted %lld done message(s)",
                 (long long)total);
    return r;
}

typedef struct ibx__stats_ctx {
    ibx_store *s;
    int64_t ready, oldest;
} ibx__stats_ctx;

static ibx_result ibx__stats_unit(ibx__db *db, void *vctx) {
    ibx__stats_ctx *c = (ibx__stats_ctx *)vctx;
    SQLHSTMT cur = NULL;
    ibx_result r = ibx__exec(db, IBX__Q_STATS, c->s->sql[IBX__Q_STATS], NULL, 0, NULL, &cur);
    if (r == IBX_OK) r = ibx__fetch(db, cur);
    if (r == IBX_OK) r = ibx__get_i64(db, cur, 1, &c->ready, NULL);
    if (r == IBX_OK) r = ibx__get_i64(db, cur, 2, &c->oldest, NULL);
    ibx__close(cur);
    return r == IBX_EMPTY ? IBX_OK : r;
}

IBX_API ibx_result ibx_queue_stats(ibx_store *store, int64_t *ready, int64_t *oldest_ready_ms) {
    ibx__stats_ctx ctx;
    ibx_result r = ibx__store_ready(store, "ibx_queue_stats");
    if (r != IBX_OK) return r;
    ctx.s = store;
    ctx.ready = ctx.oldest = 0;
    r = ibx__unit_read(&store->db, ibx__stats_unit, &ctx, "queue stats");
    if (r != IBX_OK) return r;
    if (ready) *ready = ctx.ready;
    if (oldest_ready_ms) *oldest_ready_ms = ctx.oldest > 0 ? ctx.oldest : 0;
    return IBX_OK;
}

#define IBX__PENDING_RECOUNT_MS 1000

static ibx_result ibx__pending_unit(ibx__db *db, void *vctx) {
    ibx__stats_ctx *c = (ibx__stats_ctx *)vctx;
    SQLHSTMT cur = NULL;
    ibx_result r = ibx__exec(db, IBX__Q_PENDING, c->s->sql[IBX__Q_PENDING], NULL, 0, NULL, &cur);
    if (r == IBX_OK) r = ibx__fetch(db, cur);
    if (r == IBX_OK) r = ibx__get_i64(db, cur, 1, &c->ready, NULL);
    ibx__close(cur);
    return r == IBX_EMPTY ? IBX_OK : r;
}

IBX_API ibx_result ibx_pending_count(ibx_store *store, int64_t *pending) {
    ibx__stats_ctx ctx;
    ibx_result r = ibx__store_ready(store, "ibx_pending_count");
    if (r != IBX_OK) return r;
    if (!pending)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_pending_count: pending", "must not be NULL");
    ctx.s = store;
    ctx.ready = ctx.oldest = 0;
    r = ibx__unit_read(&store->db, ibx__pending_unit, &ctx, "pending count");
    if (r != IBX_OK) return r;
    *pending = ctx.ready;
    store->pending_estimate = ctx.ready;
    store->pending_counted_ms = ibx__mono_ms(&store->hooks);
    return IBX_OK;
}

/* Backpressure (max_pending): room for n more unfinished messages? The
 * count runs when the estimate says the cap may be reached, and at most a
 * second after the last one (other producers' messages are seen then), so
 * a store with room pays one small read a second at most. An enqueue in
 * the caller's transaction (hdbc) is counted there: the store's own
 * connection cannot see that transaction's messages, so a producer
 * enqueuing many in one transaction would pass the cap unseen.
 * IBX_ERR_FULL names the fill level. */
static ibx_result ibx__pending_room(ibx_store *s, void *hdbc, const char *fn, int64_t n) {
    int64_t now;
    ibx_result r;
    if (s->max_pending <= 0) return IBX_OK;
    if (s->pending_estimate <= s->max_pending - n &&
        ibx__mono_ms(&s->hooks) - s->pending_counted_ms < IBX__PENDING_RECOUNT_MS) {
        s->pending_estimate += n;
        return IBX_OK;
    }
    if (hdbc) {
        ibx__stats_ctx ctx;
        ctx.s = s;
        ctx.ready = ctx.oldest = 0;
        if ((r = ibx__unit_or_caller(s, hdbc, ibx__pending_unit, &ctx, fn, IBX__UNIT_READ)) != IBX_OK) return r;
        now = ctx.ready;
    } else if ((r = ibx_pending_count(s, &now)) != IBX_OK) {
        return r;
    }
    s->pending_counted_ms = ibx__mono_ms(&s->hooks);
    s->pending_estimate = now;
    if (now > s->max_pending - n)
        return ibx__fail(&s->err, IBX_ERR_FULL, fn,
                         "the store holds %lld unfinished message(s) of max_pending %lld: %lld more do not fit"
                         IBX__WHY("; enqueue again once the queue drains"),
                         (long long)now, (long long)s->max_pending, (long long)n);
    s->pending_estimate = now + n;
    return IBX_OK;
}

/* >> metrics: handler durations, Prometheus text ------------------------------------ */

#ifndef IBX_NO_METRICS_TEXT /* no one would read the histograms */
/* Count one handler run of `us` microseconds for `topic`. Best effort: out
 * of memory, the run is not counted (metrics never fail a dispatch). */
static void ibx__hist_record(ibx_store *s, const char *topic, int64_t us) {
    ibx__hist *h = NULL;
    int i;
    if (s->hist_count >= IBX__HIST_TOPICS_MAX) topic = "(other)";
    for (i = 0; i < s->hist_count && !h; i++)
        if (strcmp(s->hist[i].topic, topic) == 0) h = &s->hist[i];
    if (!h) {
        if (s->hist_count == s->hist_cap) {
            int cap = s->hist_cap ? s->hist_cap * 2 : 8;
            ibx__hist *grown = (ibx__hist *)ibx__realloc(&s->hooks, s->hist, (size_t)cap * sizeof *grown);
            if (!grown) return;
            s->hist = grown;
            s->hist_cap = cap;
        }
        h = &s->hist[s->hist_count];
        memset(h, 0, sizeof *h);
        if (!(h->topic = ibx__strdup(&s->hooks, topic))) return;
        s->hist_count++;
    }
    if (us < 0) us = 0;
    for (i = 0; i < IBX__HIST_BUCKETS; i++)
        if (us <= ibx__hist_bounds_ms[i] * 1000) h->buckets[i]++;
    h->count++;
    h->sum_us += us;
}
#else
#define ibx__hist_record(s, topic, us) ((void)(s), (void)(topic), (void)(us))
#endif

#ifndef IBX_NO_METRICS_TEXT
/* Text being written; out of memory is noted once and checked at the end. */
typedef struct ibx__text_buf {
    const ibx__hooks *h;
    ibx__buf b;
    int oom;
} ibx__text_buf;

IBX__PRINTF(2, 3)
static void ibx__text(ibx__text_buf *t, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && !ibx__buf_add(t->h, &t->b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1))
        t->oom = 1;
}

/* A label value as the exposition format wants it: \, \" and \n escaped. */
static void ibx__text_label(ibx__text_buf *t, const char *value) {
    const char *p;
    for (p = value; *p; p++) {
        if (*p == '\\' || *p == '"') ibx__text(t, "\\%c", *p);
        else if (*p == '\n') ibx__text(t, "\\n");
        else ibx__text(t, "%c", *p);
    }
}

static void ibx__text_family(ibx__text_buf *t, const char *name, const char *type,
                             const char *help) {
    ibx__text(t, "# HELP ibx_%s %s\n# TYPE ibx_%s %s\n", name, help, name, type);
}

/* One sample: name{store="...",<more>} value; `more` is ",topic=..." or "". */
static void ibx__text_sample(ibx_store *s, ibx__text_buf *t, const char *name, const char *topic,
                             const char *le, const char *value) {
    ibx__text(t, "ibx_%s{store=\"", name);
    ibx__text_label(t, s->store_id);
    if (topic) {
        ibx__text(t, "\",topic=\"");
        ibx__text_label(t, topic);
    }
    ibx__text(t, "\"%s%s%s} %s\n", le ? ",le=\"" : "", le ? le : "", le ? "\"" : "", value);
}

static void ibx__text_histograms(ibx_store *s, ibx__text_buf *t) {
    char le[32], v[32];
    int i, k;
    ibx__text_family(t, "handler_duration_seconds", "histogram",
                     "Time the handlers of one message took, per topic.");
    for (i = 0; i < s->hist_count; i++) {
        const ibx__hist *hg = &s->hist[i];
        for (k = 0; k <= IBX__HIST_BUCKETS; k++) {
            if (k < IBX__HIST_BUCKETS) snprintf(le, sizeof le, "%g", (double)ibx__hist_bounds_ms[k] / 1000.0);
            else snprintf(le, sizeof le, "+Inf");
            snprintf(v, sizeof v, "%lld", (long long)(k < IBX__HIST_BUCKETS ? hg->buckets[k] : hg->count));
            ibx__text_sample(s, t, "handler_duration_seconds_bucket", hg->topic, le, v);
        }
        snprintf(v, sizeof v, "%.6f", (double)hg->sum_us / 1e6);
        ibx__text_sample(s, t, "handler_duration_seconds_sum", hg->topic, NULL, v);
        snprintf(v, sizeof v, "%lld", (long long)hg->count);
        ibx__text_sample(s, t, "handler_duration_seconds_count", hg->topic, NULL, v);
    }
}

typedef struct ibx__gauges_ctx {
    ibx_store *s;
    int64_t v[6];                 /* ready, oldest ready ms, in flight, dead, scheduled,
                                     expired leases: IBX__Q_GAUGES's columns */
} ibx__gauges_ctx;

static ibx_result ibx__gauges_unit(ibx__db *db, void *vctx) {
    ibx__gauges_ctx *c = (ibx__gauges_ctx *)vctx;
    SQLHSTMT cur = NULL;
    int i;
    ibx_result r = ibx__exec(db, IBX__Q_GAUGES, c->s->sql[IBX__Q_GAUGES], NULL, 0, NULL, &cur);
    if (r == IBX_OK) r = ibx__fetch(db, cur);
    for (i = 0; i < 6 && r == IBX_OK; i++) r = ibx__get_i64(db, cur, (SQLUSMALLINT)(i + 1), &c->v[i], NULL);
    ibx__close(cur);
    return r == IBX_EMPTY ? IBX_OK : r;
}

static void ibx__text_metrics(ibx_store *s, ibx__text_buf *t, const int64_t *gauges) {
    char v[32];
    int i;
    for (i = 0; i < IBX_METRIC_COUNT_; i++) {
        ibx__text_family(t, ibx__metric_text[i][0], "counter", ibx__metric_text[i][1]);
        snprintf(v, sizeof v, "%lld", (long long)s->counters[i]);
        ibx__text_sample(s, t, ibx__metric_text[i][0], NULL, NULL, v);
    }
    /* The counter's name before 0.2, kept until 0.3 (CHANGELOG.md). */
    ibx__text_family(t, "messages_expired_total", "counter",
                    "Deprecated, removed in 0.3: the old name of ibx_messages_cleaned_up_total.");
    snprintf(v, sizeof v, "%lld", (long long)s->counters[IBX_METRIC_CLEANED_UP]);
    ibx__text_sample(s, t, "messages_expired_total", NULL, NULL, v);
    for (i = 0; i < 6; i++) {
        ibx__text_family(t, ibx__gauge_text[i][0], "gauge", ibx__gauge_text[i][1]);
        if (i == 1) snprintf(v, sizeof v, "%.3f", (double)(gauges[i] > 0 ? gauges[i] : 0) / 1000.0);
        else snprintf(v, sizeof v, "%lld", (long long)gauges[i]);
        ibx__text_sample(s, t, ibx__gauge_text[i][0], NULL, NULL, v);
    }
    ibx__text_histograms(s, t);
}

IBX_API ibx_result ibx_metrics_text(ibx_store *store, char *out, size_t cap, size_t *needed) {
    ibx__gauges_ctx ctx;
    ibx__text_buf t;
    ibx_result r = ibx__store_ready(store, "ibx_metrics_text");
    if (r != IBX_OK) return r;
    if (!out && cap > 0)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_metrics_text: out",
                         "out must not be NULL when cap > 0");
    memset(&ctx, 0, sizeof ctx);
    ctx.s = store;
    r = ibx__unit_read(&store->db, ibx__gauges_unit, &ctx, "metrics");
    if (r != IBX_OK) return r;
    memset(&t, 0, sizeof t);
    t.h = &store->hooks;
    ibx__text_metrics(store, &t, ctx.v);
    if (t.oom || !t.b.data)
        r = ibx__fail(&store->err, IBX_ERR_NO_MEMORY, "ibx_metrics_text", "out of memory");
    else if (t.b.len + 1 > cap)
        r = ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_metrics_text: cap",
                      "the text needs %lu bytes, cap is %lu", (unsigned long)(t.b.len + 1),
                      (unsigned long)cap);
    else
        memcpy(out, t.b.data, t.b.len + 1);
    if (needed && !t.oom && t.b.data) *needed = t.b.len + 1;
    ibx__buf_free(&store->hooks, &t.b);
    return r;
}
#endif /* IBX_NO_METRICS_TEXT */

/* >> providers and routers --------------------------------------------------------- */

#ifndef IBX_NO_MULTI_STORE
struct ibx_provider {
    ibx__hooks hooks;
    ibx_error err;
    ibx_store_desc base;         /* the template; strings below are our copies */
    char *schema, *table, *worker_name;
    ibx__registry reg;
    ibx_discover_fn discover;
    void *discover_user;
    int64_t refresh_ms, next_refresh_ms;
    ibx_database *fixed;         /* a fixed list's copy, answered as discovery would */
    char **fixed_text;           /* its strings, ids then connection strings */
    int fixed_count;
    ibx_result discovered;       /* how the last discovery went: its failures are logged once */
    unsigned closes;             /* stores closed so far (by refreshes) */
};

/* A fixed list is a discovery that always answers the same: asked once, at
 * create; a database that could not be opened is tried again on its own
 * backoff (ibx__registry_retry), as discovery's are. */
static int ibx__provider_fixed(ibx_database *out, int cap, void *user) {
    const ibx_provider *p = (const ibx_provider *)user;
    int i;
    for (i = 0; i < p->fixed_count && i < cap; i++) out[i] = p->fixed[i];
    return p->fixed_count;
}

static int ibx__provider_copy_list(ibx_provider *p, const ibx_database *dbs, int n) {
    int i;
    p->fixed = (ibx_database *)ibx__alloc(&p->hooks, sizeof *p->fixed * (size_t)(n + 1));
    p->fixed_text = (char **)ibx__alloc(&p->hooks, sizeof *p->fixed_text * (size_t)(2 * n + 1));
    if (!p->fixed || !p->fixed_text) return 0;
    memset(p->fixed_text, 0, sizeof *p->fixed_text * (size_t)(2 * n + 1));
    p->fixed_count = n;
    for (i = 0; i < n; i++) {
        p->fixed[i].id = p->fixed_text[2 * i] = ibx__strdup(&p->hooks, dbs[i].id);
        p->fixed[i].connection_string = p->fixed_text[2 * i + 1] =
            ibx__strdup(&p->hooks, dbs[i].connection_string);
        if (!p->fixed_text[2 * i] || !p->fixed_text[2 * i + 1]) return 0;
    }
    p->discover = ibx__provider_fixed;
    p->discover_user = p;
    return 1;
}

static void *ibx__provider_open(void *ctx, const char *id, const char *connstr) {
    ibx_provider *p = (ibx_provider *)ctx;
    ibx_store_desc desc = p->base;
    ibx_store *s = NULL;
    desc.connection_string = connstr;
    desc.hdbc = NULL;
    desc.store_id = id;
    if (ibx_store_open(&desc, &s) != IBX_OK) { /* open logged why */
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

static void ibx__provider_close(void *ctx, void *store) {
    ((ibx_provider *)ctx)->closes++; /* a dispatcher's renewal connection may serve it: see ibx__renew_forget */
    ibx_store_close((ibx_store *)store);
}

/* Ask discovery for the databases (the protocol is at ibx_discover_fn):
 * with room for IBX__DISCOVER_FIRST, then, when it says there are more, for
 * all of them. An answer that fills every place may have stopped there, so
 * it is asked again with twice the room: never a silent cap below
 * IBX_DISCOVER_MAX. */
static int ibx__provider_ask(ibx_provider *p, ibx_database **found) {
    int cap = IBX__DISCOVER_FIRST, n;
    for (;;) {
        ibx_database *room = (ibx_database *)ibx__realloc(&p->hooks, *found, sizeof **found * (size_t)cap);
        if (!room) return -2;
        *found = room;
        memset(room, 0, sizeof *room * (size_t)cap);
        n = p->discover(room, cap, p->discover_user);
        if (n < cap || cap == IBX_DISCOVER_MAX) return n;
        if (n == cap) n = cap < IBX_DISCOVER_MAX / 2 ? cap * 2 : IBX_DISCOVER_MAX;
        cap = n < IBX_DISCOVER_MAX ? n : IBX_DISCOVER_MAX;
    }
}

/* Run discovery into the registry. A failure keeps the current set; it is
 * logged at WARN when discovery starts failing or fails otherwise than
 * before (not at every refresh), and its recovery at INFO. */
static ibx_result ibx__provider_discover(ibx_provider *p) {
    ibx_database *found = NULL;
    int n, added = 0, removed = 0;
    ibx_result r;
    p->next_refresh_ms = ibx__sat_add(ibx__mono_ms(&p->hooks), p->refresh_ms);
    n = ibx__provider_ask(p, &found);
    if (n == -2) r = ibx__fail(&p->err, IBX_ERR_NO_MEMORY, "ibx_provider_refresh", "out of memory");
    else if (n < 0 || n > IBX_DISCOVER_MAX)
        r = ibx__fail(&p->err, IBX_ERR_DB, "ibx_provider_refresh: discover",
                      "discovery failed (returned %d; at most %d databases); keeping the %d current "
                      "database(s)", n, IBX_DISCOVER_MAX, p->reg.count);
    else if ((r = ibx__registry_apply(&p->reg, found, n, &added, &removed)) == IBX_ERR_INVALID_ARG)
        ibx__fail(&p->err, r, "ibx_provider_refresh: discover",
                  "discovery returned a NULL, empty or duplicate id or connection string; keeping the "
                  "%d current database(s)", p->reg.count);
    else if (r != IBX_OK)
        ibx__fail(&p->err, r, "ibx_provider_refresh", "out of memory");
    else {
        if (n == IBX_DISCOVER_MAX)
            ibx__log(&p->hooks, IBX_LOG_WARN, "provider",
                     "discovery returned %d databases, the most one discovery may: any past them "
                     "are not served (IBX_DISCOVER_MAX)", n);
        ibx__log(&p->hooks, added || removed ? IBX_LOG_INFO : IBX_LOG_DEBUG, "provider",
                 "discovery: %d database(s) open, %d not open, %d added, %d removed", p->reg.count,
                 p->reg.down_count, added, removed);
    }
    if (r != IBX_OK && r != p->discovered)
        ibx__log(&p->hooks, IBX_LOG_WARN, "provider", "%s: %s (%s)", p->err.where, p->err.message,
                 ibx__result_str(r));
    else if (r == IBX_OK && p->discovered != IBX_OK)
        ibx__log(&p->hooks, IBX_LOG_INFO, "provider", "discovery works again");
    p->discovered = r;
    ibx__free(&p->hooks, found);
    return r;
}

/* The provider's own copies of the template's strings. */
static int ibx__provider_copy_desc(ibx_provider *p, const ibx_store_desc *store) {
    const char *worker = ibx__desc_worker(store);
    p->base = *store;
    p->schema = store->schema ? ibx__strdup(&p->hooks, store->schema) : NULL;
    p->table = store->table ? ibx__strdup(&p->hooks, store->table) : NULL;
    p->worker_name = worker ? ibx__strdup(&p->hooks, worker) : NULL;
    p->base.schema = p->schema;
    p->base.table = p->table;
    ibx__desc_set_worker(&p->base, p->worker_name);
    return (!store->schema || p->schema) && (!store->table || p->table) && (!worker || p->worker_name);
}

/* A refused provider description: no provider exists to hold the error,
 * so the refusal is logged, naming the field. */
static ibx_result ibx__provider_refuse(const ibx__hooks *h, ibx_result r, const char *field,
                                       const char *why) {
    ibx__log(h, IBX_LOG_ERROR, "provider", "ibx_provider_create: %s: %s (%s)", field, why, ibx__result_str(r));
    return r;
}

IBX_API ibx_result ibx_provider_create(const ibx_provider_desc *desc, ibx_provider **out) {
    ibx__hooks hooks;
    ibx_provider *p;
    ibx_result r;
    if (!out) return IBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc) return IBX_ERR_INVALID_ARG;
    if (ibx__hooks_resolve(&hooks, &desc->store.hooks) != IBX_OK)
        return ibx__provider_refuse(&hooks, IBX_ERR_INVALID_ARG, "store.hooks.allocator",
                                    "give all three functions or none");
    if ((desc->databases != NULL) == (desc->discover != NULL))
        return ibx__provider_refuse(&hooks, IBX_ERR_INVALID_ARG, "databases",
                                    "give exactly one of databases and discover");
    if (desc->store.hdbc)
        return ibx__provider_refuse(&hooks, IBX_ERR_INVALID_ARG, "store.hdbc",
                                    "must be NULL: each database is opened from its connection string");
    if (desc->database_count < 0)
        return ibx__provider_refuse(&hooks, IBX_ERR_INVALID_ARG, "database_count", "must be >= 0");
    if (desc->refresh_interval_ms < 0)
        return ibx__provider_refuse(&hooks, IBX_ERR_OUT_OF_RANGE, "refresh_interval_ms",
                                    "must be >= 0 (0: 5 minutes)");
    p = (ibx_provider *)ibx__alloc(&hooks, sizeof *p);
    if (!p) return IBX_ERR_NO_MEMORY;
    memset(p, 0, sizeof *p);
    ibx__hooks_resolve(&p->hooks, &desc->store.hooks);
    if (p->hooks.env_level_bad) ibx__log(&p->hooks, IBX_LOG_WARN, "provider",
                                         "IBX_LOG_LEVEL is not one of debug, info, warn, error, off: logging at INFO");
    p->reg.hooks = &p->hooks;
    p->reg.open = ibx__provider_open;
    p->reg.close = ibx__provider_close;
    p->reg.ctx = p;
    p->reg.name = "provider";
    ibx__registry_init(&p->reg);
    p->discover = desc->discover;
    p->discover_user = desc->discover_user;
    p->refresh_ms = desc->refresh_interval_ms ? desc->refresh_interval_ms : IBX__REFRESH_DEFAULT_MS;
    p->reg.retry_max_ms = p->refresh_ms;
    if (!ibx__provider_copy_desc(p, &desc->store)) {
        ibx_provider_destroy(p);
        return IBX_ERR_NO_MEMORY;
    }
    *out = p;
    if (desc->databases && ibx__registry_valid(&p->hooks, desc->databases, desc->database_count) > 0 &&
        !ibx__provider_copy_list(p, desc->databases, desc->database_count)) {
        ibx_provider_destroy(p);
        *out = NULL;
        return IBX_ERR_NO_MEMORY;
    }
    r = p->discover ? ibx__provider_discover(p) /* an invalid fixed list: refused here */
                    : ibx__registry_apply(&p->reg, desc->databases, desc->database_count, NULL, NULL);
    if (r == IBX_ERR_INVALID_ARG)
        ibx__provider_refuse(&p->hooks, r, desc->discover ? "discover" : "databases",
                             desc->discover ? p->err.message
                                            : "every database needs a unique, non-empty id and a connection string");
    if (r != IBX_OK && r != IBX_ERR_DB) { /* a failed first discovery still gives a provider */
        ibx_provider_destroy(p);
        *out = NULL;
    }
    return r;
}

IBX_API void ibx_provider_destroy(ibx_provider *p) {
    ibx__hooks hooks;
    int i;
    if (!p) return;
    ibx__registry_free(&p->reg);
    hooks = p->hooks;
    for (i = 0; p->fixed_text && i < 2 * p->fixed_count; i++) ibx__free(&hooks, p->fixed_text[i]);
    ibx__free(&hooks, p->fixed_text);
    ibx__free(&hooks, p->fixed);
    ibx__free(&hooks, p->schema);
    ibx__free(&hooks, p->table);
    ibx__free(&hooks, p->worker_name);
    ibx__free(&hooks, p);
}

IBX_API ibx_result ibx_provider_refresh(ibx_provider *p) {
    if (!p) return IBX_ERR_INVALID_ARG;
    ibx__error_clear(&p->err);
    ibx__registry_retry(&p->reg);
    if (p->fixed)
        return ibx__fail(&p->err, IBX_ERR_STATE, "ibx_provider_refresh", "a fixed list has no discovery");
    return ibx__provider_discover(p);
}

IBX_API int ibx_provider_count(const ibx_provider *p) { return p ? p->reg.count : 0; }

IBX_API ibx_store *ibx_provider_store(const ibx_provider *p, int index) {
    return p && index >= 0 && index < p->reg.count ? (ibx_store *)p->reg.items[index].store : NULL;
}

IBX_API const char *ibx_provider_store_id(const ibx_provider *p, int index) {
    return p && index >= 0 && index < p->reg.count ? p->reg.items[index].id : NULL;
}

IBX_API const ibx_error *ibx_provider_last_error(const ibx_provider *p) {
    return p ? &p->err : ibx__null_error();
}

/* The store of routing key `key`, or IBX_ERR_NOT_FOUND. A GUID key also
 * finds a database whose id is the same GUID in upper case or in braces
 * (as SQL Server and .NET's "B" format write them): a GUID names one value
 * whatever its spelling. */
static ibx_result ibx__router_find(ibx_provider *p, const char *fn, const char *key, int guid,
                             ibx_store **out) {
    char where[96];
    int at, i, k;
    snprintf(where, sizeof where, "%s: key", fn);
    if (!p) return IBX_ERR_INVALID_ARG;
    ibx__error_clear(&p->err);
    if (!out) return ibx__fail(&p->err, IBX_ERR_INVALID_ARG, fn, "out must not be NULL");
    if (!key || !key[0]) return ibx__fail(&p->err, IBX_ERR_INVALID_ARG, where, "key must not be NULL or empty");
    at = ibx__registry_find(&p->reg, key);
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
    if (at < 0) return ibx__fail(&p->err, IBX_ERR_NOT_FOUND, where, "no " IBX__NOUN " for routing key '%s'", key);
    *out = (ibx_store *)p->reg.items[at].store;
    return IBX_OK;
}

IBX_API ibx_result ibx_router_get(ibx_provider *p, const char *key, ibx_store **out) {
    return ibx__router_find(p, "ibx_router_get", key, 0, out);
}

IBX_API ibx_result ibx_router_get_guid(ibx_provider *p, const ibx_guid *key, ibx_store **out) {
    char text[37];
    if (p && key) ibx__guid_text(key->bytes, text);
    else if (p) return ibx__fail(&p->err, IBX_ERR_INVALID_ARG, "ibx_router_get_guid: key", "key must not be NULL");
    return ibx__router_find(p, "ibx_router_get_guid", key ? text : NULL, 1, out);
}
#endif /* IBX_NO_MULTI_STORE */

/* >> dead letters: list, replay, purge ------------------------------------------------- */

#ifndef IBX_NO_DEAD_LETTERS
/* A filter's arguments as every dialect's DEAD_* statements take them:
 * topic, error text, created from, created before, two key slots (the
 * face's), then limit and offset. NULL texts and zero times bind SQL NULL. */
static ibx_result ibx__dead_params(ibx_store *s, const char *fn, const ibx_dead_filter *given,
                                   ibx__param p[8], char buf[37]) {
    char where[96];
    ibx_dead_filter f;
    ibx_result r = ibx__store_ready(s, fn);
    if (r != IBX_OK) return r;
    if (given) f = *given;
    else memset(&f, 0, sizeof f);
    if (f.topic && (r = ibx__check_text(&s->err, fn, "filter.topic", f.topic, IBX_TOPIC_MAX)) != IBX_OK)
        return r;
    if (f.error_contains && (r = ibx__check_text(&s->err, fn, "filter.error_contains", f.error_contains,
                                                 IBX__HANDLER_ERROR_MAX - 1)) != IBX_OK)
        return r;
    snprintf(where, sizeof where, "%s: filter", fn);
    if (f.created_from_ms < 0 || f.created_from_ms > IBX_TIME_MAX_MS || f.created_before_ms < 0 ||
        f.created_before_ms > IBX_TIME_MAX_MS)
        return ibx__fail(&s->err, IBX_ERR_OUT_OF_RANGE, where,
                         "created_from_ms and created_before_ms must be 0..%lld", (long long)IBX_TIME_MAX_MS);
    ibx__p_text(&p[0], f.topic, (size_t)-1);
    ibx__p_text(&p[1], f.error_contains, (size_t)-1);
    ibx__p_i64(&p[2], f.created_from_ms);
    ibx__p_i64(&p[3], f.created_before_ms);
    if (!f.created_from_ms) p[2].ind = SQL_NULL_DATA;
    if (!f.created_before_ms) p[3].ind = SQL_NULL_DATA;
    ibx__p_i64(&p[6], 0);
    ibx__p_i64(&p[7], 0);
    if ((r = ibx__dead_key(s, fn, &f, &p[4], buf)) != IBX_OK) return r;
    if (!s->sql[IBX__Q_DEAD_LIST])
        return ibx__fail(&s->err, IBX_ERR_UNSUPPORTED, fn, "no dead-letter statements for %s",
                         ibx__dialect_name(s->db.d->id));
    return IBX_OK;
}

typedef struct ibx__list_ctx {
    ibx_store *s;
    ibx__param *p;
    int limit, count;
} ibx__list_ctx;

static ibx_result ibx__dead_list_unit(ibx__db *db, void *vctx) {
    ibx__list_ctx *c = (ibx__list_ctx *)vctx;
    ibx_store *s = c->s;
    SQLHSTMT cur = NULL;
    ibx_result r;
    c->count = 0;
    s->rows.len = 0;
    r = ibx__exec(db, IBX__Q_DEAD_LIST, s->sql[IBX__Q_DEAD_LIST], c->p, 8, NULL, &cur);
    while (r == IBX_OK && c->count < c->limit && (r = ibx__fetch(db, cur)) == IBX_OK) {
        r = ibx__read_message(db, cur, &s->msgs[c->count], &s->rows, &s->offsets[c->count]);
        if (r == IBX_OK) c->count++;
    }
    ibx__close(cur);
    return r == IBX_EMPTY ? IBX_OK : r;
}

IBX_API ibx_result ibx_dead_list(ibx_store *store, const ibx_dead_filter *filter, int offset,
                                 int limit, const ibx_message **messages, int *count) {
    ibx__param p[8];
    ibx__list_ctx ctx;
    char buf[37];
    ibx_result r = ibx__dead_params(store, "ibx_dead_list", filter, p, buf);
    int i;
    if (r != IBX_OK) return r;
    if (!messages || !count)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_dead_list: messages",
                         "output pointers must not be NULL");
    if (limit < 1 || limit > IBX_BATCH_MAX || offset < 0)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_dead_list: limit",
                         "limit must be 1..%d and offset >= 0, got %d and %d", IBX_BATCH_MAX, limit, offset);
    if ((r = ibx__claim_room(store, limit)) != IBX_OK) return r;
    ibx__p_i64(&p[6], limit);
    ibx__p_i64(&p[7], offset);
    ctx.s = store;
    ctx.p = p;
    ctx.limit = limit;
    r = ibx__unit_read(&store->db, ibx__dead_list_unit, &ctx, "dead list");
    if (r != IBX_OK) return r;
    for (i = 0; i < ctx.count; i++) {
        ibx__point_strings(&store->rows, &store->msgs[i], &store->offsets[i]);
        store->msgs[i].store = store;
    }
    *messages = store->msgs;
    *count = ctx.count;
    return ctx.count > 0 ? IBX_OK : IBX_EMPTY;
}

IBX_API ibx_result ibx_dead_replay(ibx_store *store, const ibx_dead_filter *filter, int64_t *replayed) {
    ibx__param p[8];
    char buf[37];
    int64_t n = 0;
    ibx_result r = ibx__dead_params(store, "ibx_dead_replay", filter, p, buf);
    if (r == IBX_OK) r = ibx__run_count(store, IBX__Q_DEAD_REPLAY, p, 8, "dead replay", &n);
    if (r != IBX_OK) return r;
    ibx__log(&store->hooks, n > 0 ? IBX_LOG_INFO : IBX_LOG_DEBUG, store->store_id,
             "replayed %lld dead message(s)", (long long)n);
    if (replayed) *replayed = n;
    return IBX_OK;
}

/* A purge racing a replay deletes a message only if it is still dead when
 * the delete holds its row: PostgreSQL's DELETE repeats the filter on the
 * row itself, which READ COMMITTED re-checks on the latest version after a
 * lock wait (the subquery's rows are its snapshot's); MariaDB's DELETE has
 * the filter on the row, checked by InnoDB on the latest version it locks;
 * SQL Server's delete scan reads the committed row under its update lock;
 * SQLite has one writer. IBX-DEAD-PURGE-REPLAYED, IBX-DEAD-PURGE-RACE. */
IBX_API ibx_result ibx_dead_purge(ibx_store *store, const ibx_dead_filter *filter, int64_t *purged) {
    ibx__param p[8];
    char buf[37];
    int64_t total = 0, n = 0;
    ibx_result r = ibx__dead_params(store, "ibx_dead_purge", filter, p, buf);
    ibx__p_i64(&p[6], IBX__CLEANUP_BATCH_DEFAULT);
    while (r == IBX_OK) { /* one bounded transaction per batch */
        r = ibx__run_count(store, IBX__Q_DEAD_PURGE, p, 8, "dead purge", &n);
        total += r == IBX_OK ? n : 0;
        if (n < IBX__CLEANUP_BATCH_DEFAULT) break;
    }
    if (total > 0 || r == IBX_OK)
        ibx__log(&store->hooks, total > 0 ? IBX_LOG_INFO : IBX_LOG_DEBUG, store->store_id,
                 "purged %lld dead message(s)", (long long)total);
    if (r == IBX_OK && purged) *purged = total;
    return r;
}

/* ibx_dead_move and ibx_run_now once the face has checked the message's key
 * into p (after the reason's slot p[0] of a move): one statement, then a
 * moved head of an ordering key lets the messages parked behind it move on
 * (triggers do it where the dialect has them; else the reap's wake, now
 * rather than a reap interval later; if it fails, the reap does). */
static ibx_result ibx__one_message(ibx_store *s, const char *fn, int slot, const char *reason, ibx__param *p,
                                   int n, const char *name, int64_t *changed) {
    int64_t count = 0, woken = 0;
    ibx_result r;
    if (slot == IBX__Q_MOVE &&
        (r = ibx__check_text(&s->err, fn, "reason", reason, IBX__HANDLER_ERROR_MAX - 1)) != IBX_OK)
        return r;
    if (!s->sql[slot])
        return ibx__fail(&s->err, IBX_ERR_UNSUPPORTED, fn, "no statement for %s", ibx__dialect_name(s->db.d->id));
    if (slot == IBX__Q_MOVE) ibx__p_text(&p[0], reason, (size_t)-1);
    if ((r = ibx__run_count(s, slot, p, n, fn + 4, &count)) != IBX_OK) return r;
    if (slot == IBX__Q_MOVE && count > 0 && IBX__SQL(s, IBX__Q_WAKE) && ibx__own_wake(s, NULL, &woken) != IBX_OK)
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "waking the messages parked behind %s failed: %s", name,
                 s->err.message);
    ibx__log(&s->hooks, count > 0 ? IBX_LOG_INFO : IBX_LOG_DEBUG, s->store_id, "%s %s: %lld changed", fn + 4, name,
             (long long)count);
    if (changed) *changed = count;
    return IBX_OK;
}
#endif /* IBX_NO_DEAD_LETTERS */

/* >> lease renewal ------------------------------------------------------------------ */

/* While a batch's handlers run, a thread of the dispatcher's own renews the
 * leases of the whole batch (claimed and not yet settled) every third of
 * the lease (after a failure, a tenth), on a connection of its own, so
 * that a handler slower than its lease is never handed to a second worker
 * while it runs. It stops after
 * max_handler_ms (logged); then the messages may be delivered again.
 * Without threads, or on a caller's connection, there is no renewal: the
 * handler may call ibx_lease_extend itself.
 *
 * Ownership: the renewer belongs to its dispatcher and lives as long as
 * it. It keeps no pointer into a store (a provider may close one at any
 * refresh): at ibx__renew_begin it copies what it needs (connection string,
 * statement, store id, dialect, hooks) and opens its own connection from
 * those copies; it is closed when the batch's database differs, when the
 * provider closes a store (ibx__renew_forget) and at destroy. The batch
 * itself (ms: the store's claim buffer) is read only between begin and
 * end, while the dispatcher stays inside that store's round. `mutex`
 * guards every field the two threads share (marked "shared"). */
#ifndef IBX__LOOP_SLICED
typedef struct ibx__renewer {
    ibx__thread_t thread;
    ibx__mutex_t mutex;
    ibx__cond_t cond;
    ibx__hooks hooks;            /* a copy: outlives any store or provider */
    int warned;                  /* the dispatcher's thread only */
    /* shared: */
    int started, quit, active, busy;
    int64_t call_started_ms;     /* a dispatcher call into the database began (0: none) */
    int stall_logged;
    int watch_file;              /* that store is a file (SQLite): a stall is another writer's lock */
    char watch_id[64];           /* the store of that call, for the stall line */
    const ibx_message *ms;       /* the messages renewed: stable while active */
    int n, lease_seconds;
    int starting;                /* handlers may still start: a renewal must find all n */
    int settled;                 /* of those n, settled by a transactional handler's commit:
                                    gone from the table's leases, not lost */
    unsigned epoch;              /* bumped whenever ms/n/starting change */
    int64_t max_ms, started_ms, next_ms;
    int64_t start_until_ms;      /* no handler starts at or past this (monotonic) */
    char owner[37];
    char *connstr, *sql, *store_id; /* the batch's database: copies (w->hooks) */
    ibx_dialect dialect;
    long login_timeout_s, statement_timeout_s;
    int stale;                   /* the database changed: reconnect before renewing */
    /* the renewal thread's own (and destroy's, after the join): */
    ibx__db side;                /* the renewal connection */
    ibx_error side_err;
    char side_id[64];
    ibx__buf keys[IBX__KEY_LISTS];
} ibx__renewer;

/* Open (or keep) the renewal connection (the renewal thread, busy). */
static ibx_result ibx__renew_connect(ibx__renewer *w, int stale) {
    if (!stale && w->side.connected && !w->side.lost) return IBX_OK;
    ibx__db_close(&w->side);
    memset(&w->side, 0, sizeof w->side);
    ibx__copy(w->side_id, sizeof w->side_id, w->store_id);
    w->side.hooks = &w->hooks;
    w->side.err = &w->side_err;
    w->side.store_id = w->side_id;
    w->side.forced = w->dialect;
    w->side.login_timeout_s = w->login_timeout_s;
    w->side.statement_timeout_s = w->statement_timeout_s;
    w->side.connect_no_wait = 1; /* never queue behind another thread's connect */
    return ibx__db_connect(&w->side, w->connstr);
}

typedef struct ibx__renew_ctx {
    ibx__renewer *w;
    const char *owner;
    int lease_seconds;
    int64_t rows;
} ibx__renew_ctx;

static ibx_result ibx__renew_unit(ibx__db *db, void *ctx) {
    ibx__renew_ctx *c = (ibx__renew_ctx *)ctx;
    ibx__param p[5 + IBX__KEY_LISTS];
    int n = ibx__settle_params(p, IBX__SETTLE_EXTEND, NULL, c->owner, NULL, c->lease_seconds, 0, c->w->keys);
    c->rows = 0;
    return ibx__exec(db, IBX__Q_EXTEND, c->w->sql, p, n, &c->rows, NULL);
}

/* Renew the leases of ms[0..n) once (the renewal thread, mutex not held);
 * the number of leases renewed into *rows. */
static ibx_result ibx__renew_once(ibx__renewer *w, const ibx_message *ms, int n, int stale, int64_t *rows) {
    ibx__renew_ctx c;
    ibx_result r = ibx__renew_connect(w, stale);
    int i, k, ok = 1;
    c.w = w;
    c.owner = w->owner;
    c.lease_seconds = w->lease_seconds;
    c.rows = 0;
    if (r == IBX_OK) {
        for (k = 0; k < IBX__KEY_LISTS; k++) w->keys[k].len = 0;
        for (i = 0; i < n && ok; i++) ok = ibx__msg_key_add(&w->hooks, w->side.d, w->keys, &ms[i]);
        for (k = 0; k < IBX__KEY_LISTS && ok; k++) ok = ibx__list_end(&w->hooks, &w->keys[k], w->side.d);
        r = ok ? ibx__unit(&w->side, ibx__renew_unit, &c, "lease renewal")
               : ibx__fail(&w->side_err, IBX_ERR_NO_MEMORY, "lease renewal", "out of memory");
    }
    *rows = c.rows;
    if (r != IBX_OK)
        ibx__log(&w->hooks, IBX_LOG_WARN, w->side_id, "lease renewal failed: %s: %s"
                 IBX__WHY(" (handlers not started yet wait for a renewal that succeeds)"),
                 ibx__result_str(r), w->side_err.message);
    else
        ibx__log(&w->hooks, IBX_LOG_DEBUG, w->side_id, "renewed the leases of %lld of %d message(s)",
                 (long long)c.rows, n);
    return r;
}

/* One renewal from the thread's loop (mutex held on entry and exit). A
 * renewal that extended every message moves the start deadline to its own
 * lease; one that failed leaves it; one that found fewer messages than it
 * holds (a lease reaped, someone else's now) lets no further handler start. */
static void ibx__renew_step(ibx__renewer *w, int64_t now) {
    const ibx_message *ms = w->ms;
    int n = w->n, stale = w->stale, held = w->n - w->settled;
    unsigned epoch = w->epoch;
    int64_t lease_ms = (int64_t)w->lease_seconds * 1000, rows = 0, margin, retry_ms;
    ibx_result r;
    w->busy = 1;
    w->stale = 0;
    ibx__mutex_unlock(&w->mutex);
    r = ibx__renew_once(w, ms, n, stale, &rows);
    ibx__mutex_lock(&w->mutex);
    w->busy = 0;
    margin = lease_ms / 5 < IBX__LEASE_MARGIN_MAX_MS ? lease_ms / 5 : IBX__LEASE_MARGIN_MAX_MS;
    if (r == IBX_OK && epoch == w->epoch && w->starting) {
        if (rows >= held) { /* every lease now runs from `now` (taken before the statement) */
            int64_t until = ibx__sat_add(now, lease_ms - margin);
            int64_t cap = ibx__sat_add(w->started_ms, w->max_ms);
            if (until > cap) until = cap;
            if (until > w->start_until_ms) w->start_until_ms = until;
        } else {
            ibx__log(&w->hooks, IBX_LOG_WARN, w->side_id,
                     "lease renewal found %lld of %d message(s) still leased to this worker"
                     IBX__WHY(": a lease was lost (reaped?); the batch's handlers not started yet are not started"),
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
    if (r == IBX_OK) retry_ms = lease_ms / 3;
    else if (w->side.connect_busy || lease_ms / 10 < 100) retry_ms = 100;
    else retry_ms = lease_ms / 10;
    w->next_ms = ibx__sat_add(ibx__mono_ms(&w->hooks), retry_ms);
    ibx__cond_broadcast(&w->cond);
}

static void *ibx__renew_main(void *arg) {
    ibx__renewer *w = (ibx__renewer *)arg;
    ibx__mutex_lock(&w->mutex);
    while (!w->quit) {
        int64_t now = ibx__mono_ms(&w->hooks);
        if (w->call_started_ms && !w->stall_logged && now - w->call_started_ms >= IBX__STALL_WARN_MS) {
            if (w->watch_file) /* SQLite waits for a lock in its busy handler, up to Timeout= */
                ibx__log(&w->hooks, IBX_LOG_WARN, w->watch_id,
                         "still waiting for the database after %lld ms: the file is locked by another writer"
                         IBX__WHY(" (a long transaction in another connection or process?); the driver's Timeout= "
                                  "ends the wait with 'database is locked'"),
                         (long long)(now - w->call_started_ms));
            else
                ibx__log(&w->hooks, IBX_LOG_WARN, w->watch_id,
                         "still waiting for the database after %lld ms"
                         IBX__WHY(" (a frozen or unreachable server? statement_timeout_seconds ends such a wait with an error)"),
                         (long long)(now - w->call_started_ms));
            w->stall_logged = 1;
        }
        if (w->active && now >= w->next_ms && now - w->started_ms >= w->max_ms) {
            ibx__log(&w->hooks, IBX_LOG_WARN, w->store_id,
                     "handlers ran %lld ms, longer than max_handler_ms"
                     IBX__WHY(": leases are no longer renewed and the batch's messages may be delivered again"),
                     (long long)(now - w->started_ms));
            w->next_ms = INT64_MAX;
        } else if (w->active && now >= w->next_ms) {
            ibx__renew_step(w, now);
        } else {
            /* Slices of at most 100 ms: the clock hook is read afresh each time. */
            ibx__deadline deadline;
            int64_t ms = w->active ? w->next_ms - now : 100;
            if (ms > 100) ms = 100;
            ibx__cond_deadline(&deadline, ms);
            ibx__cond_timedwait(&w->cond, &w->mutex, &deadline);
        }
    }
    ibx__mutex_unlock(&w->mutex);
    return NULL;
}

static ibx__renewer *ibx__renewer_create(const ibx__hooks *h) {
    ibx__renewer *w = (ibx__renewer *)ibx__alloc(h, sizeof *w);
    if (!w) return NULL;
    memset(w, 0, sizeof *w);
    w->hooks = *h;
    if (h->rng.user == &h->rng_state) { /* the default source: a state of its own */
        w->hooks.rng_state = ibx__random(h);
        w->hooks.rng.user = &w->hooks.rng_state;
    }
    ibx__mutex_init(&w->mutex);
    ibx__cond_init(&w->cond);
    return w;
}

static void ibx__renewer_destroy(ibx__renewer *w) {
    ibx__hooks h;
    int k;
    if (!w) return;
    if (w->started) {
        ibx__mutex_lock(&w->mutex);
        w->quit = 1;
        ibx__cond_broadcast(&w->cond);
        ibx__mutex_unlock(&w->mutex);
        ibx__thread_join(&w->thread);
    }
    ibx__db_close(&w->side);
    for (k = 0; k < IBX__KEY_LISTS; k++) ibx__buf_free(&w->hooks, &w->keys[k]);
    ibx__free(&w->hooks, w->connstr);
    ibx__free(&w->hooks, w->sql);
    ibx__free(&w->hooks, w->store_id);
    ibx__mutex_destroy(&w->mutex);
    ibx__cond_destroy(&w->cond);
    h = w->hooks;
    ibx__free(&h, w);
}

/* Whether a copy already holds `text` (NULL-safe); else replace it. 0: out of memory. */
static int ibx__renew_keep(ibx__renewer *w, char **copy, const char *text, int *changed) {
    char *fresh;
    if (*copy && text && strcmp(*copy, text) == 0) return 1;
    fresh = text ? ibx__strdup(&w->hooks, text) : NULL;
    if (text && !fresh) return 0;
    ibx__free(&w->hooks, *copy);
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
static int ibx__renew_begin(ibx__renewer *w, ibx_store *s, const char *owner, const ibx_message *ms,
                            int n, int lease_seconds, int64_t max_ms, int64_t start_until) {
    int changed = 0, ok;
    if (!w || n == 0) return 0;
    if (!s->db.own_connection || !s->db.connstr) {
        if (!w->warned++)
            ibx__log(&w->hooks, IBX_LOG_WARN, s->store_id,
                     "leases are not renewed: the store uses the caller's connection"
                     IBX__WHY(" (a handler slower than the lease may run twice; it can call ibx_lease_extend)"));
        return 0;
    }
    ibx__mutex_lock(&w->mutex);
    if (!w->started)
        w->started = ibx__thread_create(&w->thread, ibx__renew_main, w) == 0;
    ok = w->started && ibx__renew_keep(w, &w->connstr, s->db.connstr, &changed) &&
         ibx__renew_keep(w, &w->sql, s->sql[IBX__Q_EXTEND], &changed) &&
         ibx__renew_keep(w, &w->store_id, s->store_id, &changed);
    if (ok) {
        if (w->dialect != s->db.d->id || w->login_timeout_s != s->db.login_timeout_s ||
            w->statement_timeout_s != s->db.statement_timeout_s)
            changed = 1;
        w->dialect = s->db.d->id;
        w->login_timeout_s = s->db.login_timeout_s;
        w->statement_timeout_s = s->db.statement_timeout_s;
        w->stale |= changed;
        ibx__copy(w->owner, sizeof w->owner, owner);
        w->ms = ms;
        w->n = n;
        w->settled = 0;
        w->starting = 1;
        w->epoch++;
        w->lease_seconds = lease_seconds;
        w->max_ms = max_ms;
        w->started_ms = ibx__mono_ms(&w->hooks);
        w->start_until_ms = start_until;
        w->next_ms = ibx__sat_add(w->started_ms, (int64_t)lease_seconds * 1000 / 3);
        w->active = 1;
        ibx__cond_broadcast(&w->cond);
    } else {
        w->stale = 1; /* a copy may be missing */
    }
    ibx__mutex_unlock(&w->mutex);
    return ok ? 1 : -1;
}

/* Until when (monotonic) a handler of the batch may start. */
static int64_t ibx__renew_start_until(ibx__renewer *w) {
    int64_t until;
    ibx__mutex_lock(&w->mutex);
    until = w->start_until_ms;
    ibx__mutex_unlock(&w->mutex);
    return until;
}

/* The messages renewed from now on are ms[0..n); `starting`: whether
 * handlers may still start (else the dispatcher settles, and a renewal
 * that finds fewer leases is no news). */
static void ibx__renew_range(ibx__renewer *w, const ibx_message *ms, int n, int starting) {
    if (!w) return;
    ibx__mutex_lock(&w->mutex);
    w->ms = ms;
    w->n = n;
    w->settled = 0;
    w->starting = starting;
    w->epoch++;
    ibx__mutex_unlock(&w->mutex);
}

/* k messages of the batch are being settled in the middle of it (a
 * transactional handler's commit; -k: that commit failed, they are still
 * held). Said before the commit, so that a renewal on either side of it
 * finds at least the leases it expects; one in flight is not counted. */
static void ibx__renew_settled(ibx__renewer *w, int k) {
    if (!w) return;
    ibx__mutex_lock(&w->mutex);
    w->settled += k;
    w->epoch++;
    ibx__mutex_unlock(&w->mutex);
}

/* The dispatcher enters (on) or leaves a call into the database: a call
 * with no answer for IBX__STALL_WARN_MS is logged, so a frozen server is
 * never a silent block. Starts the thread when it is not running yet. */
static void ibx__watch(ibx__renewer *w, ibx_store *s, int on) {
    if (!w) return;
    ibx__mutex_lock(&w->mutex);
    if (!w->started) w->started = ibx__thread_create(&w->thread, ibx__renew_main, w) == 0;
    if (w->stall_logged && w->call_started_ms) /* the stall was said: so is its end, once */
        ibx__log(&w->hooks, IBX_LOG_INFO, w->watch_id, "the database answered again after %lld ms",
                 (long long)(ibx__mono_ms(&w->hooks) - w->call_started_ms));
    if (on) {
        ibx__copy(w->watch_id, sizeof w->watch_id, s->store_id);
        w->watch_file = s->db.d && s->db.d->id == IBX_DIALECT_SQLITE;
    }
    w->call_started_ms = on ? ibx__mono_ms(&w->hooks) : 0;
    w->stall_logged = 0;
    ibx__mutex_unlock(&w->mutex);
}

/* The batch is settled: stop renewing, and wait out a renewal in flight
 * (the next claim reuses the memory the renewal reads). */
static void ibx__renew_end(ibx__renewer *w) {
    if (!w) return;
    ibx__mutex_lock(&w->mutex);
    w->active = 0;
    w->ms = NULL;
    w->n = 0;
    while (w->busy) ibx__cond_wait(&w->cond, &w->mutex);
    ibx__mutex_unlock(&w->mutex);
}

#ifndef IBX_NO_MULTI_STORE
/* A store was closed (a provider's refresh): the renewal connection may
 * serve its database, which may be gone; close it (the dispatcher's
 * thread, between batches). */
static void ibx__renew_forget(ibx__renewer *w) {
    if (!w) return;
    ibx__mutex_lock(&w->mutex);
    while (w->busy) ibx__cond_wait(&w->cond, &w->mutex);
    ibx__db_close(&w->side);
    memset(&w->side, 0, sizeof w->side);
    ibx__mutex_unlock(&w->mutex);
}
#endif
#else
typedef struct ibx__renewer ibx__renewer; /* no threads: no renewal */
#define ibx__renewer_create(h) ((ibx__renewer *)NULL)
#define ibx__renewer_destroy(w) ((void)(w))
#define ibx__renew_begin(w, s, owner, ms, n, lease, max, until) ((void)(until), 0)
#define ibx__renew_start_until(w) ((void)(w), (int64_t)0)
#define ibx__renew_range(w, ms, n, starting) ((void)0)
#define ibx__renew_settled(w, k) ((void)(w))
#define ibx__renew_end(w) ((void)(w))
#define ibx__renew_forget(w) ((void)(w))
#define ibx__watch(w, s, on) ((void)(w))
#endif

/* >> dispatcher ------------------------------------------------------------------- */

/* Outcomes of the dispatcher's own beside a handler's ibx_outcome. */
#define IBX__SKIPPED (-1)  /* left alone: its lease is about to end (or already settled) */
#define IBX__PENDING (-2)  /* not handled yet in this round */
#define IBX__HELD (-3)     /* not handed out: its topic is paused */
#define IBX__EXPIRED (-4)  /* not handed out: past its expires_ms when claimed */
#define IBX__SETTLED (-5)  /* settled in its transactional handler's transaction, or found
                              no longer ours there: nothing left to settle */
#define IBX__TX_TRIES 3    /* a transactional handler's runs for one message, conflicts included */

/* A topic paused by IBX_PAUSE: not handed out before until_ms (monotonic). */
typedef struct ibx__pause {
    char *topic;
    int64_t until_ms;
    int64_t next_ms;             /* the length of its next pause, if paused again */
} ibx__pause;

struct ibx_dispatcher {
    ibx_store *store;            /* single-store mode */
    ibx_provider *provider;      /* or many */
    ibx__entry single;           /* single-store mode's housekeeping schedule */
    const ibx__hooks *hooks;
    ibx_error *err;              /* the store's error in single-store mode, else own_err */
    ibx_error own_err;           /* the dispatcher's own: a provider's stores come and go */
    char owner[37];
    int batch_size, lease_seconds, max_attempts;
    ibx_backoff_fn backoff;
    void *backoff_user;
    int64_t reap_ms, cleanup_ms, retention_ms;
    ibx_log_level message_log_level;
    ibx__loop_timing timing;
    ibx__loop loop;
    ibx__routes routes;
    ibx_selector selector;
    ibx_strategy strategy;
    int empty_streak;
    int fail_streak;             /* rounds failed in a row, over a provider's stores */
    int carry;                   /* run() on one store: acks go with the next claim (ibx__carry) */
    ibx__renewer *renewer;       /* renews a batch's leases while it is handled; NULL: none */
    unsigned closes_seen;        /* the provider's store closes the renewer has been told of */
    int64_t max_handler_ms;
    int *acked;                  /* indexes of messages handled with success */
    int *failures;               /* indexes of messages that did not succeed */
    int *outcomes;               /* an ibx_outcome, or IBX__SKIPPED / _PENDING / _HELD / _EXPIRED */
    char (*errors)[IBX__HANDLER_ERROR_MAX];
    const ibx_message **group;   /* a batch handler's messages (allocated by on_batch) */
    int *group_index;            /* their indexes in the claim */
    ibx_batch_result *results;   /* and their outcomes */
    ibx__pause *pauses;          /* paused topics (none: no cost per message) */
    int pause_count, pause_cap;
    int64_t pause_ms, pause_max_ms;
    char wake_path[IBX__WAKE_PATH_MAX + 1]; /* empty: none */
    int wake_fd;                 /* listening while run() runs, else -1 */
#if IBX__WAKE_SOCKET && !defined(IBX_NO_THREADS)
    ibx__thread_t wake_thread;
    struct stat wake_at;         /* the socket file it bound: the one it may remove */
#endif
};

static int64_t ibx__default_backoff(int attempts, void *user) {
    (void)user;
    return ibx__backoff_default_ms(attempts);
}

/* The numbers of a dispatcher description and their ranges (0 is always
 * allowed: the default), so that a refusal names the field. A range is an
 * index into ibx__number_max: a row of 8 bytes instead of 16 (armhf). */
static const int64_t ibx__number_max[] = {INT64_MAX, INT_MAX, IBX_BATCH_MAX, IBX_LEASE_MAX_SECONDS,
                                          IBX_RETENTION_MAX_MS, IBX_DELAY_MAX_MS};
static const struct {
    const char *name;
    unsigned short offset;
    unsigned char is_int;        /* an int; else an int64_t */
    unsigned char max;           /* ibx__number_max[max] */
} ibx__dispatcher_numbers[] = {
    {"batch_size", offsetof(ibx_dispatcher_desc, batch_size), 1, 2},
    {"lease_seconds", offsetof(ibx_dispatcher_desc, lease_seconds), 1, 3},
    {"max_attempts", offsetof(ibx_dispatcher_desc, max_attempts), 1, 1},
    {"poll_interval_ms", offsetof(ibx_dispatcher_desc, poll_interval_ms), 0, 0},
    {"idle_max_ms", offsetof(ibx_dispatcher_desc, idle_max_ms), 0, 0},
    {"reap_interval_ms", offsetof(ibx_dispatcher_desc, reap_interval_ms), 0, 0},
    {"startup_delay_ms", offsetof(ibx_dispatcher_desc, startup_delay_ms), 0, 0},
    {"error_delay_ms", offsetof(ibx_dispatcher_desc, error_delay_ms), 0, 0},
    {"cleanup_interval_ms", offsetof(ibx_dispatcher_desc, cleanup_interval_ms), 0, 0},
    {"cleanup_retention_ms", offsetof(ibx_dispatcher_desc, cleanup_retention_ms), 0, 4},
    {"max_handler_ms", offsetof(ibx_dispatcher_desc, max_handler_ms), 0, 0},
    {"pause_ms", offsetof(ibx_dispatcher_desc, pause_ms), 0, 5},
    {"pause_max_ms", offsetof(ibx_dispatcher_desc, pause_max_ms), 0, 5}};

/* The checks of a dispatcher description, reported to `err`. */
static ibx_result ibx__dispatcher_desc_check(const ibx_dispatcher_desc *desc, ibx_error *err) {
    char where[64];
    const char *name = NULL;
    int64_t value = 0, max = 0;
    size_t i;
    if (desc->owner_token && (!ibx__uuid_is_valid(desc->owner_token) || desc->owner_token[14] == '0'))
        return ibx__fail(err, IBX_ERR_INVALID_ARG, "ibx_dispatcher_create: owner_token",
                         "owner_token must be a UUID, not the empty one nor of version 0 (see ibx_claim)");
    for (i = 0; !name && i < sizeof ibx__dispatcher_numbers / sizeof ibx__dispatcher_numbers[0]; i++) {
        const char *at = (const char *)desc + ibx__dispatcher_numbers[i].offset;
        int v;
        if (ibx__dispatcher_numbers[i].is_int) {
            memcpy(&v, at, sizeof v);
            value = v;
        } else {
            memcpy(&value, at, sizeof value);
        }
        max = ibx__number_max[ibx__dispatcher_numbers[i].max];
        if (value < 0 || value > max) name = ibx__dispatcher_numbers[i].name;
    }
    if (!name && ((int)desc->message_log_level < 0 || (int)desc->message_log_level > (int)IBX_LOG_OFF))
        name = "message_log_level", value = (int)desc->message_log_level, max = IBX_LOG_OFF;
    if (!name && (int)desc->selection != IBX_SELECT_ROUND_ROBIN && (int)desc->selection != IBX_SELECT_DRAIN_FIRST)
        name = "selection", value = (int)desc->selection, max = IBX_SELECT_DRAIN_FIRST;
    if (!name) return IBX_OK;
    snprintf(where, sizeof where, "ibx_dispatcher_create: %s", name);
    if (max >= INT_MAX)
        return ibx__fail(err, IBX_ERR_OUT_OF_RANGE, where, "%s must not be negative (0: the default), got %lld", name,
                         (long long)value);
    return ibx__fail(err, IBX_ERR_OUT_OF_RANGE, where, "%s must be 0..%lld (0: the default), got %lld", name,
                     (long long)max, (long long)value);
}

/* Defaults for every zero field (one place; see the desc's field docs). */
/* The defaults, in one place: a copy of *desc with every zero field set to
 * the value the dispatcher will use. */
IBX_API ibx_dispatcher_desc ibx_dispatcher_desc_defaults(const ibx_dispatcher_desc *desc) {
    ibx_dispatcher_desc r;
    if (desc) r = *desc;
    else memset(&r, 0, sizeof r);
    if (!r.batch_size) r.batch_size = IBX__BATCH_DEFAULT;
    if (!r.lease_seconds) r.lease_seconds = IBX__LEASE_DEFAULT_SECONDS;
    if (!r.max_attempts) r.max_attempts = IBX__MAX_ATTEMPTS_DEFAULT;
    if (!r.backoff) r.backoff = ibx__default_backoff;
    if (!r.poll_interval_ms) r.poll_interval_ms = IBX__POLL_DEFAULT_MS;
    if (!r.idle_max_ms) r.idle_max_ms = IBX__IDLE_MAX_DEFAULT_MS;
    if (r.idle_max_ms < r.poll_interval_ms) r.idle_max_ms = r.poll_interval_ms;
    if (!r.error_delay_ms) r.error_delay_ms = IBX__ERROR_DELAY_DEFAULT_MS;
    if (!r.reap_interval_ms) r.reap_interval_ms = IBX__REAP_DEFAULT_MS;
    if (!r.cleanup_retention_ms) r.cleanup_retention_ms = IBX_DEFAULT_RETENTION_MS;
    if (!r.max_handler_ms) r.max_handler_ms = IBX__MAX_HANDLER_DEFAULT_MS;
    if (!r.message_log_level) r.message_log_level = r.store ? r.store->message_log_level : IBX_LOG_DEBUG;
    if (!r.pause_ms) r.pause_ms = IBX__PAUSE_DEFAULT_MS;
    if (!r.pause_max_ms) r.pause_max_ms = IBX__PAUSE_MAX_DEFAULT_MS;
    if (r.pause_max_ms < r.pause_ms) r.pause_max_ms = r.pause_ms;
    return r;
}

static void ibx__dispatcher_defaults(ibx_dispatcher *d, const ibx_dispatcher_desc *given) {
    ibx_dispatcher_desc desc = ibx_dispatcher_desc_defaults(given);
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

IBX_API ibx_result ibx_dispatcher_create(const ibx_dispatcher_desc *desc, ibx_dispatcher **out) {
    ibx_dispatcher *d;
    const ibx__hooks *h;
    ibx_error *err;
    size_t b;
    if (!out) return IBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc || (!desc->store && !desc->provider)) return IBX_ERR_INVALID_ARG; /* nowhere to say why */
    if (desc->store && desc->provider)
        return ibx__fail(&desc->store->err, IBX_ERR_INVALID_ARG, "ibx_dispatcher_create: provider",
                         "give a store or a provider, not both");
#ifdef IBX_NO_MULTI_STORE
    if (desc->provider) return IBX_ERR_UNSUPPORTED; /* no provider can exist in this build */
    h = &desc->store->hooks;
    err = &desc->store->err;
#else
    h = desc->store ? &desc->store->hooks : &desc->provider->hooks;
    err = desc->store ? &desc->store->err : &desc->provider->err;
#endif
    if (ibx__dispatcher_desc_check(desc, err) != IBX_OK) return err->result;
    if (ibx__wake_path_check(err, "ibx_dispatcher_create: wake_path", desc->wake_path) != IBX_OK)
        return err->result;
    if (!IBX__DEFAULT_CLOCK_SLEEPS && h->clock.sleep_ms == ibx__default_sleep_ms)
        return ibx__fail(err, IBX_ERR_INVALID_ARG, "ibx_dispatcher_create: hooks.clock",
                         "built with IBX_NO_POSIX_CLOCK"
                         IBX__WHY(", the default clock cannot sleep: give the store a clock hook with sleep_ms (a "
                                  "dispatcher would poll without pause)"));
    d = (ibx_dispatcher *)ibx__alloc(h, sizeof *d);
    if (!d) return IBX_ERR_NO_MEMORY;
    memset(d, 0, sizeof *d);
    ibx__loop_init(&d->loop, h, desc->stop_flag);
    d->store = desc->store;
    d->provider = desc->provider;
    d->hooks = h;
    d->err = desc->store ? err : &d->own_err;
    d->wake_fd = -1;
    if (desc->wake_path) ibx__copy(d->wake_path, sizeof d->wake_path, desc->wake_path);
    if (desc->owner_token) {
        ibx__lower_uuid(desc->owner_token, d->owner);
    } else {
        ibx_uuid_state fresh = {0, 0};
        ibx__uuid_v7(&fresh, ibx__now_ms(h), ibx__random(h), ibx__random(h), d->owner);
    }
    ibx__dispatcher_defaults(d, desc);
    ibx__selector_init(&d->selector, desc->selection, 0);
    b = (size_t)d->batch_size;
    d->acked = (int *)ibx__alloc(h, sizeof *d->acked * b);
    d->failures = (int *)ibx__alloc(h, sizeof *d->failures * b);
    d->outcomes = (int *)ibx__alloc(h, sizeof *d->outcomes * b);
    d->errors = (char (*)[IBX__HANDLER_ERROR_MAX])ibx__alloc(h, IBX__HANDLER_ERROR_MAX * b);
    d->renewer = desc->no_lease_renewal ? NULL : ibx__renewer_create(h);
    if (!d->acked || !d->failures || !d->outcomes || !d->errors ||
        (!d->renewer && !desc->no_lease_renewal && IBX__RENEWAL)) {
        ibx_dispatcher_destroy(d);
        return IBX_ERR_NO_MEMORY;
    }
    *out = d;
    return IBX_OK;
}

IBX_API void ibx_dispatcher_destroy(ibx_dispatcher *d) {
    const ibx__hooks *h;
    if (!d) return;
    h = d->hooks;
    ibx__renewer_destroy(d->renewer);
    ibx__routes_free(h, &d->routes);
    ibx__free(h, d->acked);
    ibx__free(h, d->failures);
    ibx__free(h, d->outcomes);
    ibx__free(h, d->errors);
    ibx__free(h, d->group);
    ibx__free(h, d->group_index);
    ibx__free(h, d->results);
    while (d->pause_count > 0) ibx__free(h, d->pauses[--d->pause_count].topic);
    ibx__free(h, d->pauses);
    ibx__loop_destroy(&d->loop);
    ibx__free(h, d);
}

IBX_API const ibx_error *ibx_dispatcher_last_error(const ibx_dispatcher *d) {
    return d ? d->err : ibx__null_error();
}

/* Register a route of either kind, refusing a topic that already has a
 * handler of the other kind (or a second batch handler). */
static ibx_result ibx__dispatcher_route(ibx_dispatcher *d, const char *fn, const char *topic,
                                       ibx__any_fn handler, void *user, int batch) {
    static const char *const kinds[4] = {"per-message", "batch", "transactional", "transactional batch"};
    char where[64];
    const ibx__route *had;
    ibx_result r = ibx__check_text(d->err, fn, "topic", topic, IBX_TOPIC_MAX);
    if (r != IBX_OK) return r;
    snprintf(where, sizeof where, "%s: handler", fn);
    if (!handler) return ibx__fail(d->err, IBX_ERR_INVALID_ARG, where, "must not be NULL");
    snprintf(where, sizeof where, "%s: topic", fn);
    had = ibx__routes_find(&d->routes, topic, IBX__ROUTE_BATCH);
    if (!had) had = ibx__routes_find(&d->routes, topic, IBX__ROUTE_BATCH_TX);
    if (!had && batch != IBX__ROUTE_ONE) had = ibx__routes_find(&d->routes, topic, IBX__ROUTE_ONE);
    if (!had) had = ibx__routes_find(&d->routes, topic, IBX__ROUTE_TX);
    if (had)
        return ibx__fail(d->err, IBX_ERR_INVALID_ARG, where, "topic %s already has a %s handler"
                         IBX__WHY(": a topic has one batch handler, one transactional handler or per-message "
                                  "handlers"), topic, kinds[had->batch]);
    if (ibx__routes_add(d->hooks, &d->routes, topic, handler, user, batch) != IBX_OK)
        return ibx__fail(d->err, IBX_ERR_NO_MEMORY, fn, "out of memory");
    return IBX_OK;
}

IBX_API ibx_result ibx_dispatcher_on(ibx_dispatcher *d, const char *topic, ibx_handler handler,
                                     void *user) {
    if (!d) return IBX_ERR_INVALID_ARG;
    return ibx__dispatcher_route(d, "ibx_dispatcher_on", topic, (ibx__any_fn)handler, user, 0);
}

/* Room for a batch handler's group, allocated by the first batch route. */
static ibx_result ibx__group_room(ibx_dispatcher *d, const char *fn) {
    size_t b = (size_t)d->batch_size;
    if (!d->group) { /* only dispatchers with batch handlers need room for a group */
        d->group = (const ibx_message **)ibx__alloc(d->hooks, sizeof *d->group * b);
        d->group_index = (int *)ibx__alloc(d->hooks, sizeof *d->group_index * b);
        d->results = (ibx_batch_result *)ibx__alloc(d->hooks, sizeof *d->results * b);
    }
    if (!d->group || !d->group_index || !d->results) {
        ibx__free(d->hooks, d->group);
        ibx__free(d->hooks, d->group_index);
        ibx__free(d->hooks, d->results);
        d->group = NULL;
        d->group_index = NULL;
        d->results = NULL;
        return ibx__fail(d->err, IBX_ERR_NO_MEMORY, fn, "out of memory");
    }
    return IBX_OK;
}

IBX_API ibx_result ibx_dispatcher_on_batch(ibx_dispatcher *d, const char *topic,
                                           ibx_batch_handler handler, void *user) {
    if (!d) return IBX_ERR_INVALID_ARG;
    if (ibx__group_room(d, "ibx_dispatcher_on_batch") != IBX_OK) return IBX_ERR_NO_MEMORY;
    return ibx__dispatcher_route(d, "ibx_dispatcher_on_batch", topic, (ibx__any_fn)handler, user, 1);
}

IBX_API ibx_result ibx_dispatcher_on_batch_tx(ibx_dispatcher *d, const char *topic,
                                              ibx_batch_tx_handler handler, void *user) {
    if (!d) return IBX_ERR_INVALID_ARG;
    if (ibx__group_room(d, "ibx_dispatcher_on_batch_tx") != IBX_OK) return IBX_ERR_NO_MEMORY;
    return ibx__dispatcher_route(d, "ibx_dispatcher_on_batch_tx", topic, (ibx__any_fn)handler, user,
                                 IBX__ROUTE_BATCH_TX);
}

IBX_API ibx_result ibx_dispatcher_on_tx(ibx_dispatcher *d, const char *topic, ibx_tx_handler handler,
                                        void *user) {
    if (!d) return IBX_ERR_INVALID_ARG;
    return ibx__dispatcher_route(d, "ibx_dispatcher_on_tx", topic, (ibx__any_fn)handler, user, IBX__ROUTE_TX);
}

IBX_API int ibx_tx_conflict(const ibx_store *store, const char *sqlstate, long native_error) {
    if (!store || !store->db.d) return 0;
    return ibx__classify(store->db.d, sqlstate ? sqlstate : "", native_error) == IBX__FAULT_TRANSIENT;
}

static int ibx__outcome_valid(int o) {
    return o == IBX_DONE || o == IBX_RETRY || o == IBX_DEAD || o == IBX_WAIT || o == IBX_PAUSE;
}

/* Run every handler for one message; the first that does not succeed decides. */
static ibx_outcome ibx__handle(ibx_dispatcher *d, const ibx_message *m, char *error, int *matched) {
    ibx_outcome outcome = IBX_DONE;
    const ibx__route *r;
    int cursor = 0;
    *matched = 0;
    while (outcome == IBX_DONE && (r = ibx__routes_next(&d->routes, m->topic, &cursor)) != NULL) {
        (*matched)++;
        memset(error, 0, IBX__HANDLER_ERROR_MAX);
        outcome = ((ibx_handler)r->fn)(m, error, IBX__HANDLER_ERROR_MAX, r->user);
        error[IBX__HANDLER_ERROR_MAX - 1] = '\0';
        if (!ibx__outcome_valid((int)outcome)) {
            snprintf(error, IBX__HANDLER_ERROR_MAX, "handler returned %d, not an ibx_outcome",
                     (int)outcome);
            outcome = IBX_DEAD;
        }
    }
    return outcome;
}

/* >> dispatcher: pauses (IBX_PAUSE) ------------------------------------------------- */

static ibx__pause *ibx__pause_find(ibx_dispatcher *d, const char *topic) {
    int i;
    for (i = 0; i < d->pause_count; i++)
        if (strcmp(d->pauses[i].topic, topic) == 0) return &d->pauses[i];
    return NULL;
}

/* How long `topic` stays paused from `now` (monotonic); 0: not paused. */
static int64_t ibx__pause_left(ibx_dispatcher *d, const char *topic, int64_t now) {
    const ibx__pause *p = d->pause_count ? ibx__pause_find(d, topic) : NULL;
    return p && p->until_ms > now ? p->until_ms - now : 0;
}

/* A handler said the downstream of `topic` is unavailable: pause the topic
 * (once per round: a pause in force is not lengthened by its own batch),
 * each pause in a row twice the last, up to pause_max_ms. */
static void ibx__pause_begin(ibx_dispatcher *d, ibx_store *s, const char *topic, const char *why) {
    int64_t now = ibx__mono_ms(&s->hooks), length;
    ibx__pause *p = ibx__pause_find(d, topic);
    char quoted[IBX__KV_CAP];
    if (!p && d->pause_count == d->pause_cap) {
        int cap = d->pause_cap ? d->pause_cap * 2 : 4;
        ibx__pause *grown = (ibx__pause *)ibx__realloc(d->hooks, d->pauses, sizeof *grown * (size_t)cap);
        if (!grown) return; /* unrecorded: its messages still go back for pause_ms */
        d->pauses = grown;
        d->pause_cap = cap;
    }
    if (!p) {
        p = &d->pauses[d->pause_count];
        p->topic = ibx__strdup(d->hooks, topic);
        if (!p->topic) return;
        p->until_ms = 0;
        p->next_ms = d->pause_ms;
        d->pause_count++;
    }
    if (p->until_ms > now) return;
    length = p->next_ms;
    /* An outage is logged as it starts, then quietly once the pause is capped. */
    ibx__log(&s->hooks, !p->until_ms ? IBX_LOG_WARN : length < d->pause_max_ms ? IBX_LOG_INFO : IBX_LOG_DEBUG,
             s->store_id, "topic %s paused for %lld ms: %s", ibx__kv(quoted, topic), (long long)length,
             why[0] ? why : "handler returned IBX_PAUSE");
    p->until_ms = ibx__sat_add(now, length);
    p->next_ms = length > d->pause_max_ms / 2 ? d->pause_max_ms : length * 2;
}

/* The first success of a paused topic ends its pauses. */
static void ibx__pause_end(ibx_dispatcher *d, ibx_store *s, const char *topic) {
    ibx__pause *p = ibx__pause_find(d, topic);
    char quoted[IBX__KV_CAP];
    if (!p) return;
    ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "topic %s flows again", ibx__kv(quoted, topic));
    ibx__free(d->hooks, p->topic);
    *p = d->pauses[--d->pause_count];
}

/* Put back every paused message (the handler's IBX_PAUSE, or held because
 * its topic is paused), one statement per topic: no attempt used, due
 * when the pause ends. */
static ibx_result ibx__settle_paused(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n,
                                     ibx_run_stats *st) {
    char reason[IBX__HANDLER_ERROR_MAX + 16];
    ibx_result r = IBX_OK;
    int i, j, k;
    for (i = 0; i < n && r == IBX_OK; i++) {
        const char *why = NULL;
        int64_t delay;
        if (d->outcomes[i] != IBX_PAUSE && d->outcomes[i] != IBX__HELD) continue;
        for (j = i, k = 0; j < n; j++)
            if ((d->outcomes[j] == IBX_PAUSE || d->outcomes[j] == IBX__HELD) &&
                strcmp(ms[j].topic, ms[i].topic) == 0) {
                if (!why && d->outcomes[j] == IBX_PAUSE && d->errors[j][0]) why = d->errors[j];
                d->failures[k++] = j;
                d->outcomes[j] = IBX__SKIPPED;
            }
        snprintf(reason, sizeof reason, "paused: %s", why ? why : "downstream unavailable");
        delay = ibx__pause_left(d, ms[i].topic, ibx__mono_ms(&s->hooks));
        if (delay <= 0) delay = d->pause_ms;
        r = ibx__settle_messages(s, IBX__SETTLE_ABANDON, ms, d->failures, k, reason,
                                 delay < IBX__DELAY_MIN_MS ? IBX__DELAY_MIN_MS : delay, 0, NULL);
        if (r == IBX_OK) st->paused += k;
    }
    return r;
}

/* >> dispatcher: handling a batch ----------------------------------------------------- */

/* After a message's handler: log a failure, pause or resume its topic. A
 * failure that will be tried again is an ERROR with the message's id and
 * the handler's error (IBX-105, a MUST of the contract); one that makes the
 * message dead is said once, at ERROR, by ibx__settle_failure. */
static void ibx__handled(ibx_dispatcher *d, ibx_store *s, const ibx_message *m, int i) {
    int outcome = d->outcomes[i];
    const char *error = d->errors[i];
    char name[IBX__MSG_NAME_MAX], topic[IBX__KV_CAP];
    ibx__utf8_repair(d->errors[i]);
    if (outcome == IBX_PAUSE) ibx__pause_begin(d, s, m->topic, error);
    else if (outcome == IBX_DONE && d->pause_count) ibx__pause_end(d, s, m->topic);
    if (outcome != IBX_RETRY || IBX__MSG_ATTEMPTS(m) + 1 >= d->max_attempts) return;
    ibx__msg_name(m, name, sizeof name);
    ibx__log(&s->hooks, IBX_LOG_ERROR, s->store_id, "handler failed for %s topic=%s attempt %d: %s", name,
             ibx__kv(topic, m->topic), IBX__MSG_ATTEMPTS(m) + 1, error[0] ? error : "IBX_RETRY");
}

/* One message through its per-message handlers. */
static void ibx__handle_one(ibx_dispatcher *d, ibx_store *s, const ibx_message *m, int i,
                            ibx_run_stats *st) {
    char name[IBX__MSG_NAME_MAX], topic[IBX__KV_CAP];
    char *error = d->errors[i];
    int matched = 0;
    int64_t started;
    ibx_outcome outcome;
    /* The line's name and topic only when it is logged: formatting them
     * cost as much as a handler call of the bench. */
    if (ibx__log_enabled(&s->hooks, d->message_log_level)) {
        ibx__msg_name(m, name, sizeof name);
        ibx__log(&s->hooks, d->message_log_level, s->store_id, "handling %s topic=%s attempt %d", name,
                 ibx__kv(topic, m->topic), IBX__MSG_ATTEMPTS(m) + 1);
    }
    started = ibx__mono_us(&s->hooks);
    outcome = ibx__handle(d, m, error, &matched);
    if (matched) ibx__hist_record(s, m->topic, ibx__mono_us(&s->hooks) - started);
    d->outcomes[i] = (int)outcome;
    if (!matched) {
        ibx__msg_name(m, name, sizeof name);
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id,
                 "no handler for topic %s (message %s)" IBX__WHY(": retrying later"), ibx__kv(topic, m->topic), name);
        snprintf(error, IBX__HANDLER_ERROR_MAX, "no handler for topic %s", m->topic);
        d->outcomes[i] = (int)IBX_WAIT;
        st->no_handler++;
    }
    ibx__handled(d, s, m, i);
}

/* Every unhandled message of ms[first]'s topic through one batch handler call. */
static void ibx__handle_group(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n,
                              int first, const ibx__route *route) {
    char name[IBX__MSG_NAME_MAX], topic[IBX__KV_CAP];
    int j, k = 0;
    for (j = first; j < n; j++) {
        if (d->outcomes[j] != IBX__PENDING || strcmp(ms[j].topic, ms[first].topic) != 0) continue;
        if (ibx__log_enabled(&s->hooks, d->message_log_level)) { /* as ibx__handle_one */
            ibx__msg_name(&ms[j], name, sizeof name);
            ibx__log(&s->hooks, d->message_log_level, s->store_id, "handling %s topic=%s attempt %d (batch)",
                     name, ibx__kv(topic, ms[j].topic), IBX__MSG_ATTEMPTS(&ms[j]) + 1);
        }
        d->group[k] = &ms[j];
        d->group_index[k] = j;
        d->results[k].outcome = IBX_RETRY;
        memset(d->results[k].error, 0, sizeof d->results[k].error);
        k++;
    }
    {
        int64_t started = ibx__mono_us(&s->hooks); /* one run of the histogram: the whole call */
        ((ibx_batch_handler)route->fn)(d->group, d->results, k, route->user);
        ibx__hist_record(s, ms[first].topic, ibx__mono_us(&s->hooks) - started);
    }
    for (j = 0; j < k; j++) {
        int i = d->group_index[j], outcome = (int)d->results[j].outcome;
        memcpy(d->errors[i], d->results[j].error, IBX__HANDLER_ERROR_MAX);
        d->errors[i][IBX__HANDLER_ERROR_MAX - 1] = '\0';
        if (!ibx__outcome_valid(outcome)) {
            snprintf(d->errors[i], IBX__HANDLER_ERROR_MAX, "batch handler set %d, not an ibx_outcome",
                     outcome);
            outcome = IBX_DEAD;
        }
        d->outcomes[i] = outcome;
        ibx__handled(d, s, &ms[i], i);
    }
}

/* >> dispatcher: transactional handlers -------------------------------------------- */

/* A transactional handler's transaction (ibx_dispatcher_on_tx,
 * ibx_dispatcher_on_batch_tx) on the store's own connection: the store's
 * calls made while it is open join it (db->callers_tx: see ibx__unit_run),
 * its ack included. *begun: whether there is one to roll back. The
 * dispatcher's own calls here and in ibx__tx_end are watched for a stall
 * (ibx__watch) as its settles are; the handler's run between is not. */
static ibx_result ibx__tx_open(ibx_dispatcher *d, ibx_store *s, int *begun) {
    ibx_result r;
    ibx__watch(d->renewer, s, 1);
    r = ibx__db_ensure(&s->db);
    if (r == IBX_OK) *begun = (r = ibx__begin_handler(&s->db)) == IBX_OK || s->db.in_tx;
    if (r == IBX_OK) s->db.callers_tx = 1;
    ibx__watch(d->renewer, s, 0);
    return r;
}

/* End it. With `ack`, the k messages ms[which[..]] are acked in it (the
 * ack checks the owner token: *changed says how many were still ours) and
 * it commits when all were. Otherwise, or when that fails (*r), it is
 * rolled back. Returns 1 when committed: the messages are settled. The
 * DEBUG lines before and after the commit mark the points a crash test
 * stops at. */
static int ibx__tx_end(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, const int *which, int k, int ack,
                       int begun, const char *what, ibx_result *r, int64_t *changed, ibx_run_stats *st) {
    int j;
    ibx__watch(d->renewer, s, 1);
    if (ack) *r = ibx__settle_messages(s, IBX__SETTLE_ACK, ms, which, k, NULL, 0, 0, changed);
    s->db.callers_tx = 0;
    if (ack && *r == IBX_OK && *changed == k) {
        ibx__log(&s->hooks, IBX_LOG_DEBUG, s->store_id, "%s: acked in the handler's transaction, committing", what);
        ibx__renew_settled(d->renewer, k);
        *r = ibx__commit(&s->db);
        if (*r != IBX_OK) ibx__renew_settled(d->renewer, -k);
        if (*r == IBX_OK) {
            ibx__watch(d->renewer, s, 0);
            ibx__log(&s->hooks, IBX_LOG_DEBUG, s->store_id, "%s: handler's transaction committed", what);
            if (s->err.result != IBX_OK) ibx__error_clear(&s->err);
            for (j = 0; j < k; j++) d->outcomes[which[j]] = IBX__SETTLED;
            ibx__count(s, IBX_METRIC_DISPATCHED, k);
            st->done += k;
            if (d->pause_count) ibx__pause_end(d, s, ms[which[0]].topic);
            return 1;
        }
    }
    if (begun) ibx__rollback(&s->db);
    ibx__watch(d->renewer, s, 0);
    return 0;
}

/* Whether a rolled-back run was a conflict: the handler said so
 * (`said`), or the ack or commit met a deadlock, serialization failure
 * or busy database on a live connection (its text to `why`). */
static int ibx__tx_conflicted(ibx_store *s, ibx_result r, int said, char *why) {
    if (!said && !(r == IBX_ERR_DB_TRANSIENT && s->db.fault == IBX__FAULT_TRANSIENT && !s->db.lost)) return 0;
    if (r != IBX_OK) snprintf(why, IBX__HANDLER_ERROR_MAX, "%.200s", s->err.message);
    ibx__error_clear(&s->err);
    return 1;
}

/* After a conflict: whether to run the handler again (IBX__TX_TRIES runs
 * in all, while the lease has time: `w`/`deadline` as in
 * ibx__handle_batch), after a short jittered pause. */
static int ibx__tx_again(ibx_store *s, ibx__renewer *w, int64_t deadline, int tries, const char *what,
                         const char *why) {
    ibx_backoff_policy pause = {20, 500, 0.5, 1.5};
    if (tries >= IBX__TX_TRIES || ibx__mono_ms(&s->hooks) >= (w ? ibx__renew_start_until(w) : deadline)) return 0;
    ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "%s: handler's transaction conflicted (%s), running it again "
             "(%d of %d)", what, why[0] ? why : "IBX_CONFLICT", tries + 1, IBX__TX_TRIES);
    ibx__sleep_ms(&s->hooks, ibx__backoff_jitter_ms(&pause, tries, ibx__random(&s->hooks)));
    return 1;
}

/* "message <name>" of m for a log line, formed on first use only (what[0]
 * is '\0' until then), as ibx__handle_one forms its name: formatting it
 * costs as much as a fast handler's call. */
static const char *ibx__tx_what(const ibx_message *m, char *what, size_t cap) {
    char name[IBX__MSG_NAME_MAX];
    if (!what[0]) {
        ibx__msg_name(m, name, sizeof name);
        snprintf(what, cap, "message %s", name);
    }
    return what;
}

/* One message through its transactional handler: its writes and its ack
 * in one transaction. A lease lost at the ack rolls everything back
 * (counted, no attempt used); any other outcome rolls back first and is
 * settled with the batch as any handler's; a conflict runs it again. */
static void ibx__handle_tx(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int i, const ibx__route *route,
                           ibx__renewer *w, int64_t deadline, ibx_run_stats *st) {
    const ibx_message *m = &ms[i];
    char what[IBX__MSG_NAME_MAX + 16] = "", topic[IBX__KV_CAP];
    char *error = d->errors[i];
    int tries, outcome = IBX_RETRY;
    /* The name only when a line will say it (DEBUG: ibx__tx_end's lines too). */
    if (ibx__log_enabled(&s->hooks, d->message_log_level) || ibx__log_enabled(&s->hooks, IBX_LOG_DEBUG))
        ibx__log(&s->hooks, d->message_log_level, s->store_id, "handling %s topic=%s attempt %d (transactional)",
                 ibx__tx_what(m, what, sizeof what) + strlen("message "), ibx__kv(topic, m->topic),
                 IBX__MSG_ATTEMPTS(m) + 1);
    for (tries = 1;; tries++) {
        int64_t changed = -1, started;
        int begun = 0;
        ibx_result r = ibx__tx_open(d, s, &begun);
        ibx_outcome said;
        outcome = IBX_RETRY;
        memset(error, 0, IBX__HANDLER_ERROR_MAX);
        if (r == IBX_OK) {
            started = ibx__mono_us(&s->hooks);
            said = ((ibx_tx_handler)route->fn)(m, (void *)s->db.dbc, error, IBX__HANDLER_ERROR_MAX, route->user);
            ibx__hist_record(s, m->topic, ibx__mono_us(&s->hooks) - started);
            error[IBX__HANDLER_ERROR_MAX - 1] = '\0';
            outcome = (int)said;
            if (!ibx__outcome_valid(outcome) && outcome != IBX_CONFLICT) {
                snprintf(error, IBX__HANDLER_ERROR_MAX, "handler returned %d, not an ibx_outcome", outcome);
                outcome = IBX_DEAD;
            }
        }
        if (ibx__tx_end(d, s, ms, &i, 1, r == IBX_OK && outcome == IBX_DONE, begun, what, &r, &changed, st)) return;
        if (outcome == IBX_DONE && r == IBX_OK && changed == 0) {
            ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "%s: no longer leased to this worker at its ack"
                     IBX__WHY(" (lease expired and reaped or claimed elsewhere)") "; its handler's transaction was "
                     "rolled back", ibx__tx_what(m, what, sizeof what));
            d->outcomes[i] = IBX__SETTLED;
            st->lease_lost++;
            return;
        }
        if (!ibx__tx_conflicted(s, r, outcome == IBX_CONFLICT, error)) {
            if (r != IBX_OK) { /* the database failed the dispatcher's part: retried with its reason */
                snprintf(error, IBX__HANDLER_ERROR_MAX, "handler's transaction: %.200s", s->err.message);
                outcome = s->err.connection_lost ? IBX_WAIT : IBX_RETRY; /* a lost connection is no try */
            }
            break;
        }
        st->conflicts++;
        if (ibx__tx_again(s, w, deadline, tries, ibx__tx_what(m, what, sizeof what), error)) continue;
        if (!error[0]) snprintf(error, IBX__HANDLER_ERROR_MAX, "transaction conflict");
        outcome = IBX_WAIT; /* back after the backoff, no attempt used */
        break;
    }
    d->outcomes[i] = outcome;
    ibx__handled(d, s, m, i);
}

/* The pending messages of ms[first]'s topic into d->group; their count. */
static int ibx__group_collect(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n, int first) {
    char name[IBX__MSG_NAME_MAX], topic[IBX__KV_CAP];
    int j, k = 0;
    for (j = first; j < n; j++) {
        if (d->outcomes[j] != IBX__PENDING || strcmp(ms[j].topic, ms[first].topic) != 0) continue;
        if (ibx__log_enabled(&s->hooks, d->message_log_level)) { /* as ibx__handle_one */
            ibx__msg_name(&ms[j], name, sizeof name);
            ibx__log(&s->hooks, d->message_log_level, s->store_id,
                     "handling %s topic=%s attempt %d (transactional batch)", name, ibx__kv(topic, ms[j].topic),
                     IBX__MSG_ATTEMPTS(&ms[j]) + 1);
        }
        d->group[k] = &ms[j];
        d->group_index[k++] = j;
    }
    return k;
}

/* One call of a transactional batch handler on the group's k messages:
 * *done counts the results that are IBX_DONE, *conflict says whether one
 * is IBX_CONFLICT; a value that is no outcome makes its message dead. */
static void ibx__group_tx_call(ibx_dispatcher *d, ibx_store *s, const ibx__route *route, const char *topic, int k,
                               int *done, int *conflict) {
    int64_t started;
    int j;
    for (j = 0; j < k; j++) {
        d->results[j].outcome = IBX_RETRY;
        memset(d->results[j].error, 0, sizeof d->results[j].error);
    }
    started = ibx__mono_us(&s->hooks);
    ((ibx_batch_tx_handler)route->fn)(d->group, d->results, k, (void *)s->db.dbc, route->user);
    ibx__hist_record(s, topic, ibx__mono_us(&s->hooks) - started);
    for (j = 0; j < k; j++) {
        int o = (int)d->results[j].outcome;
        d->results[j].error[IBX__HANDLER_ERROR_MAX - 1] = '\0';
        if (o == IBX_CONFLICT) {
            *conflict = 1;
        } else if (!ibx__outcome_valid(o)) {
            snprintf(d->results[j].error, IBX__HANDLER_ERROR_MAX, "batch handler set %d, not an ibx_outcome", o);
            d->results[j].outcome = IBX_DEAD;
        }
        *done += d->results[j].outcome == IBX_DONE;
    }
}

/* The group's messages whose result is not `keep` take their outcome (or
 * `outcome` with `why`, when given), settled with the batch; the others
 * stay in the group. Returns how many stayed. */
static int ibx__group_settle(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int k, int keep, int outcome,
                             const char *why) {
    int j, m = 0;
    for (j = 0; j < k; j++) {
        int i = d->group_index[j];
        if ((int)d->results[j].outcome == keep) {
            d->group[m] = d->group[j];
            d->group_index[m++] = i;
            continue;
        }
        if (why) snprintf(d->errors[i], IBX__HANDLER_ERROR_MAX, "%s", why);
        else memcpy(d->errors[i], d->results[j].error, IBX__HANDLER_ERROR_MAX);
        d->outcomes[i] = why ? outcome : (int)d->results[j].outcome;
        if (d->outcomes[i] == IBX__SKIPPED) continue; /* released unhandled */
        ibx__handled(d, s, &ms[i], i);
    }
    return m;
}

/* Every pending message of ms[first]'s topic through one transactional
 * batch handler call, as ibx__handle_tx for one: when every result is
 * IBX_DONE, one ack and one commit. Other results roll the call back:
 * they stand (settled with the batch), and the done messages run again
 * alone in a new transaction (the group only shrinks). A conflict runs
 * the same call again; a lease lost at the ack rolls back and releases the
 * group (no attempt used). */
static void ibx__handle_group_tx(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n, int first,
                                 const ibx__route *route, ibx__renewer *w, int64_t deadline, ibx_run_stats *st) {
    char what[IBX__KV_CAP + 32], topic[IBX__KV_CAP], why[IBX__HANDLER_ERROR_MAX];
    int k = ibx__group_collect(d, s, ms, n, first), tries;
    for (tries = 1; k > 0; tries++) {
        int64_t changed = -1;
        int begun = 0, done = 0, conflict = 0;
        ibx_result r = ibx__tx_open(d, s, &begun);
        snprintf(what, sizeof what, "%d message(s) topic=%s", k, ibx__kv(topic, ms[first].topic));
        if (r == IBX_OK) ibx__group_tx_call(d, s, route, ms[first].topic, k, &done, &conflict);
        if (ibx__tx_end(d, s, ms, d->group_index, k, r == IBX_OK && !conflict && done == k, begun, what, &r, &changed,
                        st))
            return;
        if (r == IBX_OK && !conflict && done == k) { /* changed < k: a lease lost */
            ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "%s: %d no longer leased to this worker at their ack"
                     IBX__WHY(" (lease expired and reaped or claimed elsewhere)") "; their handler's transaction "
                     "was rolled back, the others are released", what, k - (int)changed);
            st->lease_lost += k - (int)changed;
            ibx__group_settle(d, s, ms, k, -1, IBX__SKIPPED, "");
            return;
        }
        snprintf(why, sizeof why, "transaction conflict");
        if (ibx__tx_conflicted(s, r, conflict, why)) {
            st->conflicts++;
            if (!ibx__tx_again(s, w, deadline, tries, what, why)) k = ibx__group_settle(d, s, ms, k, -1, IBX_WAIT, why);
            continue;
        }
        if (r != IBX_OK) { /* the database failed the dispatcher's part: retried with its reason */
            snprintf(why, sizeof why, "handler's transaction: %.200s", s->err.message);
            k = ibx__group_settle(d, s, ms, k, -1, s->err.connection_lost ? IBX_WAIT : IBX_RETRY, why);
        }
        k = ibx__group_settle(d, s, ms, k, IBX_DONE, 0, NULL); /* the done ones run again */
        if (k > 0 && ibx__mono_ms(&s->hooks) >= (w ? ibx__renew_start_until(w) : deadline))
            k = ibx__group_settle(d, s, ms, k, -1, IBX__SKIPPED, "");
    }
}

/* Whether a periodic task is due; a clock that stepped back never stalls it. */
static int ibx__due(int64_t now, int64_t *next, int64_t interval) {
    if (now < *next && *next - now <= interval) return 0;
    *next = ibx__sat_add(now, interval);
    return 1;
}

/* Whether ibx__housekeep would run anything now. */
static int ibx__housekeep_due(const ibx_dispatcher *d, const ibx__entry *e, int64_t now) {
    return !(now < e->next_reap_ms && e->next_reap_ms - now <= d->reap_ms) ||
           (d->cleanup_ms > 0 && !(now < e->next_cleanup_ms && e->next_cleanup_ms - now <= d->cleanup_ms));
}

/* Housekeeping of one store when due: reap (IBX-053), cleanup if asked. */
static ibx_result ibx__housekeep(ibx_dispatcher *d, ibx_store *s, ibx__entry *e, ibx_run_stats *st) {
    int64_t now = ibx__mono_ms(&s->hooks);
    ibx_result r = IBX_OK;
    if (ibx__due(now, &e->next_reap_ms, d->reap_ms)) r = ibx_reap(s, &st->reaped);
    if (r == IBX_OK && d->cleanup_ms > 0 && ibx__due(now, &e->next_cleanup_ms, d->cleanup_ms))
        r = ibx_cleanup(s, d->retention_ms, 0, NULL);
    return r;
}

/* Past its expiry, on the database clock: the claim set the lease to its
 * now plus lease_seconds, and the time since is this host's monotonic
 * clock's from before the claim was sent (never less than what passed),
 * so no clock of this host is compared. Asked before each handler call,
 * not only once per claim: the messages before may have run long. */
static int ibx__expired(const ibx_dispatcher *d, const ibx_message *m, int64_t claimed, int64_t now) {
    return m->expires_ms > 0 &&
           m->expires_ms <= m->locked_until_ms - (int64_t)d->lease_seconds * 1000 + (now - claimed);
}

/* Hand each claimed message to its handlers, until `deadline` (monotonic;
 * with renewal `w`, the one its renewals have reached): past it the lease
 * may end under the handler, so the rest is skipped. Messages of a paused
 * topic are held; a topic with a batch handler goes to it in one call.
 * `claimed`: the monotonic time the claim was sent (ibx__expired). */
static void ibx__handle_batch(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n,
                              ibx__renewer *w, int64_t claimed, int64_t deadline, ibx_run_stats *st) {
    int i, j, skipped = 0;
    for (i = 0; i < n; i++) d->outcomes[i] = IBX__PENDING;
    for (i = 0; i < n; i++) {
        const ibx__route *batch;
        int64_t now = ibx__mono_ms(&s->hooks);
        if (d->outcomes[i] != IBX__PENDING) continue;
        if (ibx__expired(d, &ms[i], claimed, now)) {
            d->outcomes[i] = IBX__EXPIRED;
            continue;
        }
        if (w) deadline = ibx__renew_start_until(w);
        if (now >= deadline) {
            d->outcomes[i] = IBX__SKIPPED;
            skipped++;
        } else if (d->pause_count && ibx__pause_left(d, ms[i].topic, now) > 0) {
            d->outcomes[i] = IBX__HELD;
        } else if ((batch = ibx__routes_tx(&d->routes, ms[i].topic)) != NULL) {
            ibx__handle_tx(d, s, ms, i, batch, w, deadline, st);
        } else if ((batch = ibx__routes_batch(&d->routes, ms[i].topic)) != NULL) {
            for (j = i + 1; j < n; j++) /* the group's others, checked now too */
                if (d->outcomes[j] == IBX__PENDING && strcmp(ms[j].topic, ms[i].topic) == 0 &&
                    ibx__expired(d, &ms[j], claimed, now))
                    d->outcomes[j] = IBX__EXPIRED;
            if (batch->batch == IBX__ROUTE_BATCH_TX) ibx__handle_group_tx(d, s, ms, n, i, batch, w, deadline, st);
            else ibx__handle_group(d, s, ms, n, i, batch);
        } else {
            ibx__handle_one(d, s, &ms[i], i, st);
        }
    }
    if (skipped)
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id,
                 "%d message(s) not handled: their %d s lease was nearly over"
                 IBX__WHY(" (handlers too slow for the lease?); they are released for the next claim"), skipped,
                 d->lease_seconds);
}

/* The backoff for a message's next attempt, within what abandon accepts. */
static int64_t ibx__next_delay(ibx_dispatcher *d, const ibx_message *m, int64_t cap) {
    int64_t delay = d->backoff(IBX__MSG_ATTEMPTS(m), d->backoff_user);
    if (delay < IBX__DELAY_MIN_MS) delay = IBX__DELAY_MIN_MS;
    return delay > cap ? cap : delay;
}

/* Settle one message that did not succeed: wait, retry or dead. */
static ibx_result ibx__settle_failure(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int i,
                                      ibx_run_stats *st) {
    const ibx_message *m = &ms[i];
    int outcome = d->outcomes[i], attempt = IBX__MSG_ATTEMPTS(m) + 1;
    const char *error = d->errors[i];
    char name[IBX__MSG_NAME_MAX], reason[IBX__HANDLER_ERROR_MAX + 64], topic[IBX__KV_CAP];
    ibx_result r;
    ibx__msg_name(m, name, sizeof name);
    if (!error[0]) error = outcome == IBX_DEAD ? "handler returned IBX_DEAD" : "handler returned IBX_RETRY";
    if (outcome == IBX_WAIT) { /* not a failure: waiting never uses up attempts */
        r = ibx__settle_messages(s, IBX__SETTLE_ABANDON, ms, &i, 1, error,
                                 ibx__next_delay(d, m, IBX__WAIT_DELAY_MAX_MS), 0, NULL);
        if (r == IBX_OK) st->retried++;
        return r;
    }
    if (outcome == IBX_RETRY && attempt < d->max_attempts) {
        int64_t delay = ibx__next_delay(d, m, IBX_DELAY_MAX_MS);
        ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "message %s: attempt %d of %d failed; retry in %lld ms",
                 name, attempt, d->max_attempts, (long long)delay);
        r = ibx__settle_messages(s, IBX__SETTLE_ABANDON, ms, &i, 1, error, delay, 1, NULL);
        if (r == IBX_OK) st->retried++;
        return r;
    }
    if (outcome == IBX_DEAD) snprintf(reason, sizeof reason, "%s", error);
    else snprintf(reason, sizeof reason, "gave up after %d attempts: %s", attempt, error);
    ibx__log(&s->hooks, IBX_LOG_ERROR, s->store_id, "message %s topic=%s is dead: %s", name,
             ibx__kv(topic, m->topic), reason);
    r = ibx__settle_messages(s, IBX__SETTLE_FAIL, ms, &i, 1, reason, 0, 0, NULL);
    if (r == IBX_OK) st->dead++;
    return r;
}

/* A busy drain's round trips (issue 30): in run(), on one store, the acks
 * of a batch go with the next claim, in its statement (PostgreSQL,
 * IBX__Q_CLAIM_ACK) or its transaction, so that a batch costs one commit
 * (and on PostgreSQL one round trip) instead of two. run() loops at once
 * after a batch, and sends what is carried before housekeeping, when its
 * claim fails (both rolled back: the acks alone then) and when it stops;
 * run_once() never carries, so a round it reports is settled. Acks of
 * messages with an ordering key go in the claim's transaction, never in
 * its statement: in the fused statement's snapshot their keys are busy
 * and their next messages parked, so the claim would pass over them. Where
 * the dialect has IBX__Q_CLAIM_CARRY (SQLite, PostgreSQL) the claim runs
 * first and takes the acked keys' next messages itself, then the acks;
 * elsewhere the acks (and their wake, on MariaDB ibx__own_acked) go first
 * and the claim takes the woken messages: either way at once, where acked
 * alone each key cost a commit more. Returns whether
 * ms[which[0..n)] are carried in s->carry. */
/* Where no one statement can (SQLite, MariaDB): the ack first in the
 * claim's transaction, one commit fewer; measured faster on both (docs/
 * PERFORMANCE.md); SQL Server, not measured, acks at once, as 0 makes
 * those two do. */
#ifndef IBX__CARRY_IN_TX
#define IBX__CARRY_IN_TX 1
#endif
static int ibx__carry(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, const int *which, int n) {
    int i, k, keyed = 0;
    const int in_tx = IBX__CARRY_IN_TX && (IBX__ONE(s->db.d)->id == IBX_DIALECT_SQLITE ||
                                           IBX__ONE(s->db.d)->id == IBX_DIALECT_MARIADB);
    if (!d->carry || d->store != s || s->carry_count > 0 || (!IBX__SQL(s, IBX__Q_CLAIM_ACK) && !in_tx)) return 0;
    for (i = 0; i < n && !keyed; i++) keyed = IBX__MSG_KEYED(&ms[which[i]]);
    /* Keyed acks before a claim in one transaction (MariaDB: no claim runs
     * first) make its key reads walk index pages that transaction just
     * changed, each record checked in the clustered index: measured 40-55
     * us of server CPU more per keyed message than acking them alone
     * (docs/PERFORMANCE.md, "Ordered delivery"). */
    if (keyed && !IBX__CARRY_FIRST(s)) return 0;
    for (k = 0; k < IBX__KEY_LISTS; k++) s->carry[k].len = 0;
    for (i = 0; i < n; i++)
        if (!ibx__msg_key_add(&s->hooks, s->db.d, s->carry, &ms[which[i]])) return 0;
    for (k = 0; k < IBX__KEY_LISTS; k++)
        if (!ibx__list_end(&s->hooks, &s->carry[k], s->db.d)) return 0;
    s->carry_count = n;
    s->carry_keyed = keyed;
    return 1;
}

/* The carried acks' outcome: counted, and said when some were no longer ours. */
static void ibx__carried(ibx_store *s, int64_t changed, int acks, ibx_run_stats *st) {
    st->done += (int)changed;
    if (changed < acks)
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id,
                 "%d of %d handled messages were no longer leased to this worker"
                 IBX__WHY(" (lease expired during handling?); they will be delivered again"),
                 acks - (int)changed, acks);
}

/* Send the carried acks on their own; a failure is the caller's error. */
static ibx_result ibx__carry_flush(ibx_store *s, ibx_run_stats *st) {
    int64_t changed = 0;
    int acks = s->carry_count;
    ibx_result r;
    if (acks == 0) return IBX_OK;
    s->carry_count = 0;
    r = ibx__settle_lists(s, s->carry, IBX__SETTLE_ACK, acks, NULL, 0, 0, &changed);
    s->carry_keyed = 0;
    if (r == IBX_OK) ibx__carried(s, changed, acks, st);
    return r;
}

/* Settle a handled batch: every success in one statement, then each failure. */
static ibx_result ibx__settle_batch(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n,
                                    ibx_run_stats *st) {
    ibx_result r = IBX_OK;
    int i, acks = 0, failures = 0, paused = 0, skipped = 0;
    for (i = 0; i < n; i++) /* expired ones first, in one statement (d->acked lent) */
        if (d->outcomes[i] == IBX__EXPIRED) d->acked[acks++] = i;
    if (acks > 0) {
        int64_t changed = 0;
        r = ibx__settle_messages(s, IBX__SETTLE_FAIL, ms, d->acked, acks, "expired", 0, 0, &changed);
        if (r != IBX_OK) return r;
        ibx__count(s, IBX_METRIC_EXPIRED_UNHANDLED, changed);
        st->dead += (int)changed;
        ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "%d message(s) past their expiry: dead, not handled",
                 acks);
        acks = 0;
    }
    for (i = 0; i < n; i++) { /* skipped ones fill d->failures from its end */
        if (d->outcomes[i] == IBX_DONE) d->acked[acks++] = i;
        else if (d->outcomes[i] == IBX_PAUSE || d->outcomes[i] == IBX__HELD) paused++;
        else if (d->outcomes[i] == IBX__SKIPPED) d->failures[n - ++skipped] = i;
        else if (d->outcomes[i] != IBX__EXPIRED && d->outcomes[i] != IBX__SETTLED) d->failures[failures++] = i;
    }
    if (acks > 0 && ibx__carry(d, s, ms, d->acked, acks)) {
        acks = 0; /* they go with the next claim */
    } else if (acks > 0) {
        int64_t changed = 0;
        r = ibx__settle_messages(s, IBX__SETTLE_ACK, ms, d->acked, acks, NULL, 0, 0, &changed);
        if (r == IBX_OK) st->done += (int)changed;
        if (r == IBX_OK && changed < acks)
            ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id,
                     "%d of %d handled messages were no longer leased to this worker"
                     IBX__WHY(" (lease expired during handling?); they will be delivered again"),
                     acks - (int)changed, acks);
    }
    for (i = 0; i < failures && r == IBX_OK; i++) r = ibx__settle_failure(d, s, ms, d->failures[i], st);
    /* Never started: released now, their claim's start taken back (max_starts). */
    if (skipped && r == IBX_OK)
        r = ibx__settle_messages(s, IBX__SETTLE_ABANDON, ms, d->failures + n - skipped, skipped, NULL,
                                 IBX__DELAY_MIN_MS, 0, NULL);
    if (paused && r == IBX_OK) r = ibx__settle_paused(d, s, ms, n, st);
    return r;
}

/* Crash-loop isolation. A message claimed before without an outcome
 * (starts > 1) may be what killed the last worker, and a claim counts a
 * start for its whole batch. So the others are handled and settled first;
 * of such suspects only the first is kept, handled last and alone, and the
 * rest are released at once (an abandon, which takes back this claim's
 * count): a crash then costs its batch-mates nothing. Reorders s->msgs
 * (suspects last), shrinks *n, sets *first to the suspect (or *n). */
static ibx_result ibx__isolate(ibx_dispatcher *d, ibx_store *s, int *n, int *first) {
    ibx_message *ms = s->msgs, t;
    int i, k = 0, released = 0;
    ibx_result r = IBX_OK;
    for (i = 0; i < *n; i++) /* the others first, in their order */
        if (ms[i].starts <= 1) {
            t = ms[k];
            ms[k++] = ms[i];
            ms[i] = t;
        }
    *first = k;
    for (i = k + 1; i < *n; i++) d->acked[released++] = i;
    if (released > 0) {
        r = ibx__settle_messages(s, IBX__SETTLE_ABANDON, ms, d->acked, released, NULL, IBX__DELAY_MIN_MS, 0, NULL);
        if (r == IBX_OK) *n = k + 1;
    }
    if (k < *n)
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "%d message(s) claimed before without an outcome"
                 IBX__WHY(" (a crash?)") ": one handled alone after the others, %d released", *n - k + released, released);
    return r;
}

/* A keyed enqueue that read its key busy may commit after the wake of the
 * key's last busy message looked for it (see IBX__PG_PARKED); nothing else
 * of the key would wake it before the reap. Producers whose transaction
 * is open while a message of their key is acked are the common case under
 * load, so a store that has claimed keyed messages, when a claim comes back
 * short of its batch (the parked ones could have filled it), wakes:
 * - the keys of the keyed messages of its previous batch, again
 *   (IBX__Q_WAKE_AGAIN): a probe per key, for the enqueues that committed
 *   since their settle;
 * - every key left with only parked messages (IBX__Q_WAKE), for an enqueue
 *   that committed later, at most once per poll interval and never more
 *   than a twentieth of the time: the read walks every parked message
 *   (100,000 of them: 40 ms on PostgreSQL, 0.4 s on MariaDB).
 * A missed wake costs an idle poll, not a reap interval. A store without
 * keys runs neither. Returns how many it woke; a failure is logged and
 * forgotten (the next short claim, or the reap, wakes them). */
static int64_t ibx__wake_missed(ibx_dispatcher *d, ibx_store *s, ibx__entry *e, int n) {
    int64_t woken = 0, more = 0, t0, gap;
    ibx_result r;
    if (n >= d->batch_size || !IBX__SQL(s, IBX__Q_WAKE) || !ibx__own_keyed(s)) return 0;
    r = ibx__own_wake_again(s, &woken);
    t0 = ibx__mono_ms(&s->hooks);
    /* The gap never exceeds the reap interval (whose reap wakes too), so
     * a later one is a clock that stepped back. */
    if (r == IBX_OK && (t0 >= e->next_wake_ms || e->next_wake_ms - t0 > d->reap_ms)) {
        r = ibx__own_wake(s, NULL, &more);
        gap = (ibx__mono_ms(&s->hooks) - t0) * 20;
        if (gap < d->timing.poll_ms) gap = d->timing.poll_ms;
        e->next_wake_ms = ibx__sat_add(t0, gap < d->reap_ms ? gap : d->reap_ms);
        woken += more;
    }
    if (r != IBX_OK) {
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "waking parked messages failed: %s" IBX__WHY("; the reap wakes them"),
                 s->err.message);
        ibx__error_clear(&s->err);
    }
    if (woken > 0)
        ibx__log(&s->hooks, IBX_LOG_DEBUG, s->store_id, "woke %lld ordering key(s) left with only parked messages",
                 (long long)woken);
    return woken;
}

/* The dispatcher's claim, with the acks carried from its last batch. */
static ibx_result ibx__claim_carrying(ibx_dispatcher *d, ibx_store *s, ibx_run_stats *st, const ibx_message **ms,
                                      int *n) {
    int64_t acked = 0;
    int acks = s->carry_count;
    ibx_error failed;
    ibx_result r;
    if (acks == 0) return ibx_claim(s, d->owner, d->lease_seconds, d->batch_size, ms, n);
    s->carry_count = 0;
    r = ibx__claim_run(s, d->owner, d->lease_seconds, d->batch_size, acks, s->carry_keyed, &acked, ms, n);
    if (r == IBX_OK || r == IBX_EMPTY) {
        s->carry_keyed = 0;
        ibx__carried(s, acked, acks, st);
        return r;
    }
    failed = s->err; /* both rolled back: the acks alone, and the claim's error */
    s->carry_count = acks;
    if (ibx__carry_flush(s, st) != IBX_OK)
        ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "ack after a failed claim failed too: %s"
                 IBX__WHY("; those messages will be delivered again"), s->err.message);
    s->carry_count = 0;
    s->err = failed;
    return r;
}

/* The others of a batch are settled and a crash suspect runs next, alone
 * (ibx__isolate): their carried acks go now, not with the next claim, which
 * waits for the suspect's handler (it may be slow, or crash) while their
 * leases are no longer renewed. A failure only costs a redelivery. */
static void ibx__carry_before_suspect(ibx_store *s, ibx_run_stats *st) {
    if (s->carry_count == 0 || ibx__carry_flush(s, st) == IBX_OK) return;
    ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "ack before a suspect's handler failed: %s"
             IBX__WHY("; those messages will be delivered again"), s->err.message);
    ibx__error_clear(&s->err);
}

/* A batch whose lease renewal could not be set up (out of memory, no
 * thread): unrenewed, a slow handler would overlap the next owner's, so it
 * goes back unhandled, no attempt used; an error, so that run() backs off
 * rather than claim again at once. */
static ibx_result ibx__release_unrenewed(ibx_dispatcher *d, ibx_store *s, const ibx_message *ms, int n,
                                         ibx_run_stats *st) {
    ibx_result r;
    int i;
    ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id,
             "lease renewal could not be set up (out of memory or no thread): %d message(s) released "
             "unhandled" IBX__WHY(", for the next claim; no attempt used"), n);
    for (i = 0; i < n; i++) d->outcomes[i] = IBX__SKIPPED;
    r = ibx__settle_batch(d, s, ms, n, st);
    if (r != IBX_OK) return r;
    return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_dispatcher_run", "lease renewal could not be set up");
}

/* One batch from one store: housekeeping, claim, handle, settle. */
static ibx_result ibx__dispatch_store(ibx_dispatcher *d, ibx_store *s, ibx__entry *e, ibx_run_stats *st) {
    const ibx_message *ms;
    int n = 0, first, from, to, renewed;
    int64_t lease_ms = (int64_t)d->lease_seconds * 1000, deadline, claimed;
    ibx_result r;
    ibx__watch(d->renewer, s, 1);
    if (s->carry_count > 0 && ibx__housekeep_due(d, e, ibx__mono_ms(&s->hooks)) &&
        (r = ibx__carry_flush(s, st)) != IBX_OK) {
        ibx__watch(d->renewer, s, 0);
        return r;
    }
    r = ibx__housekeep(d, s, e, st);
    if (r < 0) {
        ibx__watch(d->renewer, s, 0);
        return r;
    }
    /* The lease started no earlier than now: past its end less a margin a
     * message may be reclaimed by another worker, so it is not handled.
     * Renewals move this out, each as far as its own lease: only one that
     * extended every message of the batch (IBX-059). */
    deadline = ibx__mono_ms(&s->hooks) + lease_ms -
               (lease_ms / 5 < IBX__LEASE_MARGIN_MAX_MS ? lease_ms / 5 : IBX__LEASE_MARGIN_MAX_MS);
    claimed = ibx__mono_ms(&s->hooks);
    r = ibx__claim_carrying(d, s, st, &ms, &n);
    if ((r == IBX_OK || r == IBX_EMPTY) && ibx__wake_missed(d, s, e, n) > 0 && n == 0) {
        claimed = ibx__mono_ms(&s->hooks); /* what it woke, claimed now (the deadline stays: earlier) */
        r = ibx_claim(s, d->owner, d->lease_seconds, d->batch_size, &ms, &n);
    }
    ibx__watch(d->renewer, s, 0);
    if (r != IBX_OK) return r;
    st->claimed = n;
    first = n;
    for (from = 0; from < n && ms[from].starts <= 1; from++) {}
    if (from < n && (r = ibx__isolate(d, s, &n, &first)) != IBX_OK) return r;
    renewed = ibx__renew_begin(d->renewer, s, d->owner, ms, n, d->lease_seconds, d->max_handler_ms, deadline);
    if (renewed < 0) r = ibx__release_unrenewed(d, s, ms, n, st);
    for (from = renewed < 0 ? n : 0; from < n && r == IBX_OK; from = to) { /* the others, then a suspect */
        to = from < first ? first : n;
        if (from > 0) ibx__renew_range(d->renewer, ms + from, n - from, 1); /* the suspect, alone now */
        ibx__handle_batch(d, s, ms + from, to - from, renewed > 0 ? d->renewer : NULL, claimed, deadline, st);
        ibx__renew_range(d->renewer, ms + from, n - from, 0); /* settling: fewer leases is no news */
        ibx__watch(d->renewer, s, 1);
        r = ibx__settle_batch(d, s, ms + from, to - from, st);
        if (r == IBX_OK && to < n) ibx__carry_before_suspect(s, st);
        ibx__watch(d->renewer, s, 0);
    }
    ibx__renew_end(d->renewer);
    ibx__own_wake_later(s, ms, n);
    if (r < 0 && s->carry_count > 0) { /* run() waits before the next claim: not the acks */
        ibx_error failed = s->err;
        if (ibx__carry_flush(s, st) != IBX_OK)
            ibx__log(&s->hooks, IBX_LOG_WARN, s->store_id, "ack after a failed settle failed too: %s"
                     IBX__WHY("; those messages will be delivered again"), s->err.message);
        s->err = failed;
    }
    return r;
}

#ifndef IBX_NO_MULTI_STORE
/* One round over a provider's stores: refresh discovery when due, then
 * poll the store the strategy picks; housekeeping runs per store. */
/* A store of a provider failed a round: its error becomes the dispatcher's
 * (the store may be closed by the next discovery), logged on the first
 * failure in a row and then once every 60. */
static ibx_result ibx__store_failed(ibx_dispatcher *d, ibx__entry *e, ibx_result r) {
    ibx_store *s = (ibx_store *)e->store;
    d->own_err = s->err;
    if (e->failures++ % 60 == 0)
        ibx__log(d->hooks, e->failures == 1 ? IBX_LOG_ERROR : IBX_LOG_WARN, s->store_id,
                 "dispatch failed (%d in a row): %s: %s (%s)" IBX__WHY("; the other databases go on"),
                 e->failures, ibx__result_str(r), s->err.message, s->err.where);
    return r;
}

static ibx_result ibx__dispatch_many(ibx_dispatcher *d, ibx_run_stats *st) {
    ibx_provider *p = d->provider;
    ibx_result r;
    int count, pick;
    ibx__entry *e;
    if (!p->fixed && ibx__mono_ms(d->hooks) >= p->next_refresh_ms &&
        ibx__provider_discover(p) != IBX_OK) /* the current set is kept; logged */
        d->own_err = p->err;
    ibx__registry_retry(&p->reg); /* a database not open, when its wait is over; never blocks */
    if (p->closes != d->closes_seen) { /* here, or by ibx_provider_refresh between rounds */
        d->closes_seen = p->closes;
        ibx__renew_forget(d->renewer);
    }
    count = p->reg.count;
    if (count != d->selector.store_count) {
        ibx__selector_resize(&d->selector, count);
        d->empty_streak = 0;
    }
    if (count == 0) return IBX_EMPTY;
    pick = d->strategy.next ? d->strategy.next(d->strategy.user, count) : ibx__selector_next(&d->selector);
    if (pick < 0 || pick >= count) pick = 0;
    e = &p->reg.items[pick];
    r = ibx__dispatch_store(d, (ibx_store *)e->store, e, st);
    if (d->strategy.report) d->strategy.report(d->strategy.user, pick, st->claimed);
    else ibx__selector_report(&d->selector, pick, st->claimed);
    if (r < 0) {
        d->fail_streak++;
        return ibx__store_failed(d, e, r);
    }
    if (e->failures > 0)
        ibx__log(d->hooks, IBX_LOG_INFO, ((ibx_store *)e->store)->store_id,
                 "dispatch works again after %d failed round(s)", e->failures);
    e->failures = 0;
    d->fail_streak = 0;
    d->empty_streak = st->claimed > 0 ? 0 : d->empty_streak + 1;
    /* Empty only when every store has answered empty in a row. */
    return st->claimed > 0 || d->empty_streak < count ? IBX_OK : IBX_EMPTY;
}
/* The number of stores a dispatcher serves now. */
#define IBX__STORE_COUNT(d) ((d)->store ? 1 : (d)->provider->reg.count)
#else
#define ibx__dispatch_many(d, st) ((void)(st), IBX_ERR_UNSUPPORTED) /* never: create refuses */
#define IBX__STORE_COUNT(d) 1
#endif /* IBX_NO_MULTI_STORE */

IBX_API ibx_result ibx_dispatcher_run_once(ibx_dispatcher *d, ibx_run_stats *stats) {
    ibx_run_stats st;
    ibx_result r;
    memset(&st, 0, sizeof st);
    if (!d) return IBX_ERR_INVALID_ARG;
    r = d->store ? ibx__dispatch_store(d, d->store, &d->single, &st) : ibx__dispatch_many(d, &st);
    if (stats) *stats = st;
    return r;
}

/* One round of run(). With many databases, one that fails does not make
 * the others wait: the loop goes on at once until every database has
 * failed in a row, and only then waits as after a failed round. */
static ibx_result ibx__dispatch_round(void *vd) {
    ibx_dispatcher *d = (ibx_dispatcher *)vd;
    ibx_result r = ibx_dispatcher_run_once(d, NULL);
    if (r < 0 && d->provider && d->fail_streak < IBX__STORE_COUNT(d)) return IBX_OK;
    return r;
}

#if IBX__WAKE_SOCKET && !defined(IBX_NO_THREADS)
/* The listener: a wake byte on the socket wakes the loop. It polls in
 * 250 ms slices to see a stop; ibx__wake_unlisten ends a slice at once. */
static void *ibx__wake_main(void *arg) {
    ibx_dispatcher *d = (ibx_dispatcher *)arg;
    while (!ibx__loop_stopped(&d->loop)) {
        struct pollfd p;
        char bytes[64];
        int got = 0;
        p.fd = d->wake_fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 250) <= 0) continue;
        while (recv(d->wake_fd, bytes, sizeof bytes, 0) > 0) got = 1;
        if (got) ibx__loop_wake(&d->loop);
    }
    return NULL;
}

static void ibx__wake_listen(ibx_dispatcher *d, const char *name) {
    if (!d->wake_path[0]) return;
    d->wake_fd = ibx__wake_bind(d->hooks, name, d->wake_path, &d->wake_at);
    if (d->wake_fd >= 0 && ibx__thread_create(&d->wake_thread, ibx__wake_main, d) != 0) {
        ibx__wake_unbind(d->wake_fd, d->wake_path, &d->wake_at);
        d->wake_fd = -1;
    }
    if (d->wake_fd >= 0) ibx__log(d->hooks, IBX_LOG_INFO, name, "listening for wake-ups at %s", d->wake_path);
}

static void ibx__wake_unlisten(ibx_dispatcher *d) {
    int self = -1;
    if (d->wake_fd < 0) return;
    ibx__wake_send(&self, d->wake_path);
    if (self >= 0) close(self);
    ibx__thread_join(&d->wake_thread);
    ibx__wake_unbind(d->wake_fd, d->wake_path, &d->wake_at);
    d->wake_fd = -1;
}
#else
#define ibx__wake_listen(d, name) ((void)(d), (void)(name))
#define ibx__wake_unlisten(d) ((void)(d))
#endif

IBX_API ibx_result ibx_dispatcher_run(ibx_dispatcher *d) {
    const char *name;
    if (!d) return IBX_ERR_INVALID_ARG;
    name = d->store ? d->store->store_id : "dispatcher";
    ibx__wake_listen(d, name);
    ibx__log(d->hooks, IBX_LOG_INFO, name,
             "dispatcher %s started: batch %d, lease %d s, poll %lld ms, %d handler(s), %d store(s)",
             d->owner, d->batch_size, d->lease_seconds, (long long)d->timing.poll_ms, d->routes.count,
             IBX__STORE_COUNT(d));
    d->carry = d->store != NULL;
    ibx__loop_run(&d->loop, &d->timing, ibx__dispatch_round, d, name, d->err);
    d->carry = 0;
    if (d->store && d->store->carry_count > 0) {
        ibx_run_stats st;
        memset(&st, 0, sizeof st);
        if (ibx__carry_flush(d->store, &st) != IBX_OK)
            ibx__log(d->hooks, IBX_LOG_WARN, name, "the last acks failed: %s" IBX__WHY("; those messages will be delivered again"),
                     d->store->err.message);
    }
    ibx__wake_unlisten(d);
    ibx__log(d->hooks, IBX_LOG_INFO, name, "dispatcher %s stopped", d->owner);
    return IBX_OK;
}

IBX_API void ibx_dispatcher_stop(ibx_dispatcher *d) {
    if (d) ibx__loop_stop(&d->loop);
}

IBX_API void ibx_dispatcher_wake(ibx_dispatcher *d) {
    if (d) ibx__loop_wake(&d->loop);
}

IBX_API ibx_result ibx_notify(ibx_store *s) {
    if (!s) return IBX_ERR_INVALID_ARG;
    ibx__wake_send(&s->wake_fd, s->wake_path);
    return IBX_OK;
}

/* The envelope (seed 002 section 6), the same in both headers: checks,
 * the Headers column as JSON text (written by enqueue, decoded in place
 * when a row is read) and the lookups handlers use. */

/* Four hex digits at p as a number; -1 if any is not a hex digit (the
 * terminator included, so a short escape never reads past the text). */
IBX__PRIVATE long ibx__hex4(const char *p) {
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
IBX__PRIVATE size_t ibx__utf8_put(unsigned long cp, char *out) {
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
IBX__PRIVATE size_t ibx__json_unescape(const char **p, char out[4]) {
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
        if ((cp = ibx__hex4(s + 1)) < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return 0;
        s += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half */
            if (s[0] != '\\' || s[1] != 'u' || (low = ibx__hex4(s + 2)) < 0xDC00 || low > 0xDFFF) return 0;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            s += 6;
        }
        *p = s;
        return ibx__utf8_put((unsigned long)cp, out);
    default: return 0; /* the terminator included */
    }
    *p = s + 1;
    return 1;
}

/* An optional text: "" is stored as NULL. */
static const char *ibx__opt_text(const char *text) { return text && text[0] ? text : NULL; }

/* Column `col` appended to buf (ibx__get_append) where bit `bit` of
 * `present` says it is not NULL; else NULL without a driver call. */
static ibx_result ibx__get_opt(ibx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type, unsigned present,
                               unsigned bit, ibx__buf *buf, size_t *offset, size_t *out_len) {
    if (present & bit) return ibx__get_append(db, st, col, c_type, buf, offset, out_len);
    *offset = (size_t)-1;
    if (out_len) *out_len = 0;
    return IBX_OK;
}

#ifndef IBX_NO_ENVELOPE
/* The JSON string that starts after the quote at p, decoded to *w (which
 * never runs ahead of p: a decoded string is shorter than its JSON) and
 * NUL-terminated; returns what follows its closing quote, or NULL when it
 * is not a JSON string or holds a NUL. */
static char *ibx__json_string_in_place(char *p, char **w) {
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
        if ((n = ibx__json_unescape(&q, one)) == 0 || one[0] == '\0') return NULL;
        p += q - p;
        memcpy(*w, one, n);
        *w += n;
    }
}

/* The Headers column, a JSON object of string values, turned in place into
 * "key\0value\0..." (what ibx_message_header reads); returns the number of
 * pairs, or -1 when the text is not such an object (written by other
 * software: read as no headers). */
static int ibx__headers_unpack(char *text) {
    char *p = text, *w = text;
    int n = 0;
#define IBX__WS() while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++
    IBX__WS();
    if (*p++ != '{') return -1;
    IBX__WS();
    if (*p == '}') return 0;
    for (;;) {
        if (*p != '"' || !(p = ibx__json_string_in_place(p + 1, &w))) return -1;
        IBX__WS();
        if (*p++ != ':') return -1;
        IBX__WS();
        if (*p != '"' || !(p = ibx__json_string_in_place(p + 1, &w))) return -1;
        n++;
        IBX__WS();
        if (*p == '}') return n;
        if (*p++ != ',') return -1;
        IBX__WS();
    }
#undef IBX__WS
}

/* Check a message's envelope; `item` ("messages[3]." or "") names it. */
static ibx_result ibx__check_envelope(ibx_error *err, const char *fn, const char *item, const ibx_new_message *m) {
    char where[96];
    size_t n = 0;
    int i;
#define IBX__BAD(arg, result, ...)                                           \
    do {                                                                     \
        snprintf(where, sizeof where, "%s: %s%s", fn, item, arg);            \
        return ibx__fail(err, result, where, __VA_ARGS__);                   \
    } while (0)
    if (m->tenant_id && !ibx__text_fits(m->tenant_id, IBX_TENANT_MAX))
        IBX__BAD("tenant_id", IBX_ERR_INVALID_ARG, "tenant_id must be valid UTF-8 of at most %d characters",
                 IBX_TENANT_MAX);
    if (m->aggregate_type && !ibx__text_fits(m->aggregate_type, IBX_AGGREGATE_TYPE_MAX))
        IBX__BAD("aggregate_type", IBX_ERR_INVALID_ARG,
                 "aggregate_type must be valid UTF-8 of at most %d characters", IBX_AGGREGATE_TYPE_MAX);
    if (m->aggregate_id && !ibx__text_fits(m->aggregate_id, IBX_AGGREGATE_ID_MAX))
        IBX__BAD("aggregate_id", IBX_ERR_INVALID_ARG,
                 "aggregate_id must be valid UTF-8 of at most %d characters", IBX_AGGREGATE_ID_MAX);
    if (m->header_count < 0 || m->header_count > IBX_HEADERS_MAX)
        IBX__BAD("header_count", IBX_ERR_INVALID_ARG, "header_count must be 0..%d", IBX_HEADERS_MAX);
    if (m->header_count > 0 && !m->headers)
        IBX__BAD("headers", IBX_ERR_INVALID_ARG, "headers must not be NULL when header_count > 0");
    for (i = 0; i < m->header_count; i++) {
        const ibx_header *x = &m->headers[i];
        char arg[40];
        int j;
        snprintf(arg, sizeof arg, "headers[%d].key", i);
        if (!x->key || !x->key[0]) IBX__BAD(arg, IBX_ERR_INVALID_ARG, "a header key must not be NULL or empty");
        if (!ibx__text_fits(x->key, IBX_HEADER_KEY_MAX))
            IBX__BAD(arg, IBX_ERR_INVALID_ARG, "a header key must be valid UTF-8 of at most %d characters",
                     IBX_HEADER_KEY_MAX);
        for (j = 0; j < i; j++)
            if (strcmp(m->headers[j].key, x->key) == 0)
                IBX__BAD(arg, IBX_ERR_INVALID_ARG, "key repeats headers[%d].key" IBX__WHY(" (keys are unique)"), j);
        snprintf(arg, sizeof arg, "headers[%d].value", i);
        if (!x->value) IBX__BAD(arg, IBX_ERR_INVALID_ARG, "a header value must not be NULL" IBX__WHY(" (\"\" is a value)"));
        if (!ibx__text_fits(x->value, IBX_HEADER_VALUE_MAX))
            IBX__BAD(arg, IBX_ERR_INVALID_ARG, "a header value must be valid UTF-8 of at most %d characters",
                     IBX_HEADER_VALUE_MAX);
        n += strlen(x->key) + strlen(x->value);
    }
    if (n > IBX_HEADERS_BYTES_MAX)
        IBX__BAD("headers", IBX_ERR_INVALID_ARG, "keys and values take %lu bytes, over IBX_HEADERS_BYTES_MAX (%d)",
                 (unsigned long)n, IBX_HEADERS_BYTES_MAX);
#undef IBX__BAD
    return IBX_OK;
}

/* m's headers as one JSON object {"key":"value",...} in b (emptied first),
 * keys in their given order; 0 when out of memory. */
static int ibx__headers_json(const ibx__hooks *h, ibx__buf *b, const ibx_new_message *m) {
    int i, ok;
    b->len = 0;
    ok = ibx__buf_add(h, b, "{", 1);
    for (i = 0; ok && i < m->header_count; i++) {
        const ibx_header *x = &m->headers[i];
        ok = (i == 0 || ibx__buf_add(h, b, ",", 1)) && ibx__quoted_add(h, b, x->key, strlen(x->key), 0) &&
             ibx__buf_add(h, b, ":", 1) && ibx__quoted_add(h, b, x->value, strlen(x->value), 0);
    }
    return ok && ibx__buf_add(h, b, "}", 1);
}

/* The envelope's four columns from `col` on, those whose bit (1, 2, 4, 8)
 * is in `present`: the strings to buf, the Headers object decoded in
 * place (text that is not one reads as none). */
static ibx_result ibx__read_envelope(ibx__db *db, SQLHSTMT st, int col, unsigned present, ibx__buf *buf,
                                     ibx__envelope_offsets *o, int *header_count) {
    ibx_result r;
    *header_count = 0;
    if ((r = ibx__get_opt(db, st, col, SQL_C_CHAR, present, 1, buf, &o->tenant, NULL)) != IBX_OK ||
        (r = ibx__get_opt(db, st, col + 1, SQL_C_CHAR, present, 2, buf, &o->aggregate_type, NULL)) != IBX_OK ||
        (r = ibx__get_opt(db, st, col + 2, SQL_C_CHAR, present, 4, buf, &o->aggregate_id, NULL)) != IBX_OK ||
        (r = ibx__get_opt(db, st, col + 3, SQL_C_CHAR, present, 8, buf, &o->headers, NULL)) != IBX_OK)
        return r;
    if (o->headers != (size_t)-1) {
        *header_count = ibx__headers_unpack(buf->data + o->headers);
        if (*header_count <= 0) o->headers = (size_t)-1, *header_count = 0;
    }
    return IBX_OK;
}

/* A message's envelope strings, once the buffer no longer moves. */
static void ibx__point_envelope(const ibx__buf *buf, ibx_message *m, const ibx__envelope_offsets *o) {
    m->tenant_id = ibx__at(buf, o->tenant);
    m->aggregate_type = ibx__at(buf, o->aggregate_type);
    m->aggregate_id = ibx__at(buf, o->aggregate_id);
    m->headers_packed = ibx__at(buf, o->headers);
}

/* Whether m has an envelope: a message without one runs the plain statements. */
static int ibx__has_envelope(const ibx_new_message *m) {
    return ibx__opt_text(m->tenant_id) || ibx__opt_text(m->aggregate_type) || ibx__opt_text(m->aggregate_id) ||
           m->header_count > 0;
}

/* Bind m's envelope as p[0..3], its headers' JSON made in `json`; 0 when
 * out of memory. */
static int ibx__envelope_params(const ibx__hooks *h, ibx__buf *json, ibx__param *p, const ibx_new_message *m) {
    if (m->header_count > 0 && !ibx__headers_json(h, json, m)) return 0;
    ibx__p_text(&p[0], ibx__opt_text(m->tenant_id), (size_t)-1);
    ibx__p_text(&p[1], ibx__opt_text(m->aggregate_type), (size_t)-1);
    ibx__p_text(&p[2], ibx__opt_text(m->aggregate_id), (size_t)-1);
    ibx__p_text(&p[3], m->header_count > 0 ? json->data : NULL, (size_t)-1);
    return 1;
}


IBX_API ibx_result ibx_message_header_at(const ibx_message *message, int index, const char **key,
                                         const char **value) {
    const char *at;
    int i;
    if (!message) return IBX_ERR_INVALID_ARG;
    if (index < 0 || index >= message->header_count || !message->headers_packed) return IBX_ERR_NOT_FOUND;
    at = message->headers_packed;
    for (i = 0; i < index; i++) at += strlen(at) + 1, at += strlen(at) + 1;
    if (key) *key = at;
    if (value) *value = at + strlen(at) + 1;
    return IBX_OK;
}

IBX_API const char *ibx_message_header(const ibx_message *message, const char *key) {
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
/* IBX_NO_ENVELOPE: a message that sets a field is refused by name (""
 * is no value, as everywhere); rows are read without the envelope. */
static ibx_result ibx__check_envelope(ibx_error *err, const char *fn, const char *item, const ibx_new_message *m) {
    char where[96];
    const char *arg = ibx__opt_text(m->tenant_id)        ? "tenant_id"
                      : ibx__opt_text(m->aggregate_type) ? "aggregate_type"
                      : ibx__opt_text(m->aggregate_id)   ? "aggregate_id"
                      : m->header_count != 0             ? "headers"
                                                         : NULL;
    if (!arg) return IBX_OK;
    snprintf(where, sizeof where, "%s: %s%s", fn, item, arg);
    return ibx__fail(err, IBX_ERR_UNSUPPORTED, where, "%s: the envelope was left out of this build (IBX_NO_ENVELOPE)",
                     arg);
}

static int ibx__has_envelope(const ibx_new_message *m) {
    (void)m;
    return 0;
}

/* Never reached with a header (the check refused it); the inbox does not
 * call it. */
IBX__PRIVATE int ibx__headers_json(const ibx__hooks *h, ibx__buf *b, const ibx_new_message *m) {
    (void)h, (void)b, (void)m;
    return 0;
}

static ibx_result ibx__read_envelope(ibx__db *db, SQLHSTMT st, int col, unsigned present, ibx__buf *buf,
                                     ibx__envelope_offsets *o, int *header_count) {
    (void)db, (void)st, (void)col, (void)present, (void)buf, (void)o;
    *header_count = 0;
    return IBX_OK;
}

static void ibx__point_envelope(const ibx__buf *buf, ibx_message *m, const ibx__envelope_offsets *o) {
    (void)buf, (void)m, (void)o;
}

static int ibx__envelope_params(const ibx__hooks *h, ibx__buf *json, ibx__param *p, const ibx_new_message *m) {
    int i;
    (void)h, (void)json, (void)m;
    for (i = 0; i < 4; i++) ibx__p_text(&p[i], NULL, (size_t)-1);
    return 1;
}
#endif /* IBX_NO_ENVELOPE */


/* >>common-end engine */


/* >> the inbox's messages: rows, keys, names ----------------------------------- */

static void ibx__store_own_free(const ibx__hooks *h, ibx__store_own *own) {
    ibx__buf_free(h, &own->scratch);
    ibx__buf_free(h, &own->headers);
}

/* The inbox has no options of its own and no statement variants. */
static void ibx__store_own_open(ibx__store_own *own, const ibx_store_desc *desc) {
    (void)own;
    (void)desc;
}

static void ibx__store_own_sql(const ibx__store_own *own, char **sql) {
    (void)own;
    (void)sql;
}

static void ibx__store_own_names(const ibx__store_own *own, const char **names) {
    (void)own;
    (void)names;
}

static int ibx__msg_key_add(const ibx__hooks *h, const ibx__dialect *d, ibx__buf *keys,
                            const ibx_message *m) {
    return ibx__list_add(h, &keys[0], d, m->source, strlen(m->source)) &&
           ibx__list_add(h, &keys[1], d, m->message_id, strlen(m->message_id));
}

/* "<id> from <source>", each quoted when it needs it (ibx__kv): both are
 * the sender's text. */
static void ibx__key_name(const char *message_id, const char *source, char *out, size_t size) {
    char id[IBX__KV_CAP], from[IBX__KV_CAP];
    snprintf(out, size, "%s from %s", ibx__kv(id, message_id), ibx__kv(from, source));
}

static void ibx__msg_name(const ibx_message *m, char *out, size_t size) {
    ibx__key_name(m->message_id, m->source, out, size);
}

/* The inbox has no worker name (it records no ProcessedBy). */
static const char *ibx__desc_worker(const ibx_store_desc *desc) {
    (void)desc;
    return NULL;
}

#ifndef IBX_NO_MULTI_STORE /* only a provider sets it */
static void ibx__desc_set_worker(ibx_store_desc *desc, const char *worker) {
    (void)desc;
    (void)worker;
}
#endif

/* A message key (source or message id): required text, and not ending in a
 * space where the database compares text ignoring trailing spaces ("m1 "
 * would be taken for "m1": a message lost to dedup). */
static ibx_result ibx__check_key(ibx_store *s, const char *fn, const char *arg, const char *value) {
    char where[96];
    ibx_result r = ibx__check_text(&s->err, fn, arg, value, IBX_KEY_MAX);
    if (r != IBX_OK || !s->db.d->pads_text || value[strlen(value) - 1] != ' ') return r;
    snprintf(where, sizeof where, "%s: %s", fn, arg);
    return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where,
                     "%s ends with a space, which %s ignores when comparing: it would be taken for "
                     "the same %s without the space", arg, ibx__dialect_name(s->db.d->id), arg);
}

static ibx_result ibx__read_message(ibx__db *db, SQLHSTMT st, ibx_message *m, ibx__buf *buf,
                                    ibx__row_offsets *o) {
    char text[40];
    SQLLEN ind;
    int64_t v;
    size_t skip;
    ibx_result r;
    int i;
    memset(m, 0, sizeof *m);
    if ((r = ibx__get_append(db, st, 1, SQL_C_CHAR, buf, &o->source, NULL)) != IBX_OK ||
        (r = ibx__get_append(db, st, 2, SQL_C_CHAR, buf, &o->message_id, NULL)) != IBX_OK ||
        (r = ibx__get_append(db, st, 3, SQL_C_CHAR, buf, &o->topic, NULL)) != IBX_OK ||
        (r = ibx__get_append(db, st, 4, SQL_C_CHAR, buf, &o->payload, &m->payload_len)) != IBX_OK ||
        (r = ibx__get_append(db, st, 5, SQL_C_BINARY, buf, &o->hash, &o->hash_len)) != IBX_OK ||
        (r = ibx__get_i64(db, st, 6, &m->first_seen_ms, NULL)) != IBX_OK ||
        (r = ibx__get_i64(db, st, 7, &m->last_seen_ms, NULL)) != IBX_OK)
        return r;
    r = ibx__get_text(db, st, 8, text, sizeof text, &ind);
    if (r != IBX_OK) return r;
    m->status = ibx__status_parse(ind == SQL_NULL_DATA ? "" : text);
    if ((r = ibx__get_i64(db, st, 9, &m->locked_until_ms, NULL)) != IBX_OK) return r;
    r = ibx__get_text(db, st, 10, text, sizeof text, &ind);
    if (r != IBX_OK) return r;
    ibx__copy(m->owner_token, sizeof m->owner_token, ind == SQL_NULL_DATA ? "" : text);
    for (i = 0; m->owner_token[i]; i++) /* psqlODBC renders uuid in upper case */
        if (m->owner_token[i] >= 'A' && m->owner_token[i] <= 'F') m->owner_token[i] = (char)(m->owner_token[i] + 32);
    if ((r = ibx__get_i64(db, st, 11, &v, NULL)) != IBX_OK) return r;
    m->attempt = (int)v;
    if ((r = ibx__get_append(db, st, 12, SQL_C_CHAR, buf, &o->last_error, &skip)) != IBX_OK ||
        (r = ibx__get_i64(db, st, 13, &m->next_attempt_ms, NULL)) != IBX_OK)
        return r;
    if ((r = ibx__get_i64(db, st, 14, &m->due_time_ms, NULL)) != IBX_OK ||
        (r = ibx__get_i64(db, st, 15, &v, NULL)) != IBX_OK)
        return r;
    m->starts = (int)v;
    if ((r = ibx__read_envelope(db, st, 16, 15, buf, &o->env, &m->header_count)) != IBX_OK) return r;
    if ((r = ibx__get_i64(db, st, 20, &m->expires_ms, NULL)) != IBX_OK) return r; /* after the envelope's 16..19 */
    return ibx__get_priority(db, st, 21, &m->priority);
}

static ibx_result ibx__read_claimed(ibx__db *db, SQLHSTMT st, const ibx__row_head *head, const char *token,
                                    ibx_message *m, ibx__buf *buf, ibx__row_offsets *o) {
    const unsigned opt = (unsigned)ibx__head_int(head, 8);
    ibx_result r;
    memset(m, 0, sizeof *m);
    m->first_seen_ms = ibx__head_int(head, 0);
    m->last_seen_ms = ibx__head_int(head, 1);
    m->locked_until_ms = ibx__head_int(head, 2);
    m->attempt = (int)ibx__head_int(head, 3);
    m->next_attempt_ms = ibx__head_int(head, 4);
    m->due_time_ms = ibx__head_int(head, 5);
    m->starts = (int)ibx__head_int(head, 6);
    m->expires_ms = ibx__head_int(head, 7);
    m->status = IBX_STATUS_PROCESSING;
    ibx__copy(m->owner_token, sizeof m->owner_token, token);
    if ((r = ibx__get_append(db, st, 10, SQL_C_CHAR, buf, &o->source, NULL)) != IBX_OK ||
        (r = ibx__get_append(db, st, 11, SQL_C_CHAR, buf, &o->message_id, NULL)) != IBX_OK ||
        (r = ibx__get_append(db, st, 12, SQL_C_CHAR, buf, &o->topic, NULL)) != IBX_OK ||
        (r = ibx__get_append(db, st, 13, SQL_C_CHAR, buf, &o->payload, &m->payload_len)) != IBX_OK ||
        (r = ibx__get_opt(db, st, 14, SQL_C_BINARY, opt, 1, buf, &o->hash, &o->hash_len)) != IBX_OK ||
        (r = ibx__get_opt(db, st, 15, SQL_C_CHAR, opt, 2, buf, &o->last_error, NULL)) != IBX_OK)
        return r;
    m->priority = (int)(opt >> 6) - 8; /* above the mask's 6 bits (IBX__CLAIM_MASK) */
    return ibx__read_envelope(db, st, 16, (opt >> 2) & 15u, buf, &o->env, &m->header_count);
}

static void ibx__point_strings(const ibx__buf *buf, ibx_message *m, const ibx__row_offsets *o) {
    m->source = ibx__at(buf, o->source);
    m->message_id = ibx__at(buf, o->message_id);
    m->topic = ibx__at(buf, o->topic);
    m->payload = ibx__at(buf, o->payload);
    m->hash = (const unsigned char *)ibx__at(buf, o->hash);
    m->hash_len = o->hash == (size_t)-1 ? 0 : o->hash_len;
    m->last_error = ibx__at(buf, o->last_error);
    ibx__point_envelope(buf, m, &o->env);
}


/* >> dedup and enqueue ------------------------------------------------------------------- */

typedef struct ibx__seen_ctx {
    ibx_store *s;
    const char *source, *message_id;
    const void *hash;
    size_t hash_len;
    int done, mismatch;
} ibx__seen_ctx;

static ibx_result ibx__seen_unit(ibx__db *db, void *vctx) {
    ibx__seen_ctx *c = (ibx__seen_ctx *)vctx;
    ibx__param p[3];
    SQLHSTMT cur = NULL;
    char status[24];
    SQLLEN ind = 0;
    ibx_result r;
    ibx__p_text(&p[0], c->source, (size_t)-1);
    ibx__p_text(&p[1], c->message_id, (size_t)-1);
    ibx__p_blob(&p[2], c->hash, c->hash_len);
    r = ibx__exec(db, IBX__Q_SEEN, c->s->sql[IBX__Q_SEEN], p, 3, NULL, &cur);
    if (r == IBX_OK) r = ibx__fetch(db, cur);
    if (r == IBX_OK)
        r = ibx__get_text(db, cur, 1, status, sizeof status, &ind);
    if (r == IBX_OK) {
        size_t off = 0, len = 0;
        c->done = ind != SQL_NULL_DATA && strcmp(status, "Done") == 0;
        c->s->own.scratch.len = 0;
        r = ibx__get_append(db, cur, 2, SQL_C_BINARY, &c->s->own.scratch, &off, &len);
        if (r == IBX_OK && c->hash && off != (size_t)-1)
            c->mismatch = len != c->hash_len || memcmp(c->s->own.scratch.data + off, c->hash, len) != 0;
    }
    ibx__close(cur);
    if (r == IBX_EMPTY)
        r = ibx__fail(db->err, IBX_ERR_DB, "ibx_already_processed", "the upsert returned no row");
    return r;
}

IBX_API ibx_result ibx_already_processed(ibx_store *store, const char *message_id,
                                         const char *source, const void *hash, size_t hash_len,
                                         int *processed) {
    ibx__seen_ctx ctx;
    char name[IBX__MSG_NAME_MAX];
    ibx_result r = ibx__store_ready(store, "ibx_already_processed");
    if (r != IBX_OK) return r;
    if ((r = ibx__check_key(store, "ibx_already_processed", "message_id", message_id)) != IBX_OK ||
        (r = ibx__check_key(store, "ibx_already_processed", "source", source)) != IBX_OK)
        return r;
    if (!processed)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_already_processed: processed",
                         "must not be NULL");
    if (!hash && hash_len > 0)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_already_processed: hash",
                         "hash is NULL but hash_len is %lu", (unsigned long)hash_len);
    memset(&ctx, 0, sizeof ctx);
    ctx.s = store;
    ctx.source = source;
    ctx.message_id = message_id;
    ctx.hash = hash_len ? hash : NULL;
    ctx.hash_len = hash ? hash_len : 0;
    r = ibx__unit_one(&store->db, ibx__seen_unit, &ctx, "dedup check");
    if (r != IBX_OK) return r;
    ibx__key_name(message_id, source, name, sizeof name);
    if (ctx.mismatch)
        ibx__log(&store->hooks, IBX_LOG_WARN, store->store_id,
                 "message %s seen again with a different content hash", name);
    ibx__log(&store->hooks, IBX_LOG_DEBUG, store->store_id, "dedup %s: %s", name,
             ctx.done ? "already processed" : "not processed yet");
    if (ctx.done) ibx__count(store, IBX_METRIC_DUPLICATE, 1);
    *processed = ctx.done;
    return IBX_OK;
}

static ibx_result ibx__mark(ibx_store *s, const char *fn, const char *message_id, const char *source,
                            const char *status) {
    ibx__param p[6];
    int64_t rows = 0;
    int i;
    ibx_result r = ibx__store_ready(s, fn);
    if (r != IBX_OK) return r;
    if ((r = ibx__check_key(s, fn, "message_id", message_id)) != IBX_OK ||
        (r = ibx__check_key(s, fn, "source", source)) != IBX_OK)
        return r;
    for (i = 0; i < 4; i++) ibx__p_text(&p[i], status, (size_t)-1);
    ibx__p_text(&p[4], source, (size_t)-1);
    ibx__p_text(&p[5], message_id, (size_t)-1);
    r = ibx__run_count(s, IBX__Q_MARK, p, 6, fn, &rows);
    if (r != IBX_OK) return r;
    if (rows == 0) return ibx__fail(&s->err, IBX_ERR_NOT_FOUND, fn, "no message %s from %s", message_id, source);
    if (ibx__log_enabled(&s->hooks, IBX_LOG_DEBUG)) {
        char name[IBX__MSG_NAME_MAX];
        ibx__key_name(message_id, source, name, sizeof name);
        ibx__log(&s->hooks, IBX_LOG_DEBUG, s->store_id, "marked %s %s", name, status);
    }
    return IBX_OK;
}

IBX_API ibx_result ibx_mark_processing(ibx_store *store, const char *message_id, const char *source) {
    return ibx__mark(store, "ibx_mark_processing", message_id, source, "Processing");
}
IBX_API ibx_result ibx_mark_processed(ibx_store *store, const char *message_id, const char *source) {
    return ibx__mark(store, "ibx_mark_processed", message_id, source, "Done");
}
IBX_API ibx_result ibx_mark_dead(ibx_store *store, const char *message_id, const char *source) {
    return ibx__mark(store, "ibx_mark_dead", message_id, source, "Dead");
}

typedef struct ibx__enqueue_ctx {
    ibx_store *s;
    ibx__param *p;               /* the upsert's seven, the envelope's four, the expiry, the priority */
    int envelope;                /* the upsert with the envelope and the expiry */
    const void *hash;
    size_t hash_len;
    int64_t rows;
    int mismatch;                /* a hash was stored before, and it differs */
} ibx__enqueue_ctx;

/* The enqueue upsert; with a hash, the stored one is read first (same
 * transaction) so that a change of content is noticed. */
static ibx_result ibx__enqueue_unit(ibx__db *db, void *vctx) {
    ibx__enqueue_ctx *c = (ibx__enqueue_ctx *)vctx;
    ibx_store *s = c->s;
    ibx_result r = IBX_OK;
    c->mismatch = 0;
    if (c->hash) {
        SQLHSTMT cur = NULL;
        r = ibx__exec(db, IBX__Q_HASH, s->sql[IBX__Q_HASH], c->p, 2, NULL, &cur);
        if (r == IBX_OK) r = ibx__fetch(db, cur);
        if (r == IBX_OK) {
            size_t off = 0, len = 0;
            s->own.scratch.len = 0;
            r = ibx__get_append(db, cur, 1, SQL_C_BINARY, &s->own.scratch, &off, &len);
            if (r == IBX_OK && off != (size_t)-1)
                c->mismatch = len != c->hash_len || memcmp(s->own.scratch.data + off, c->hash, len) != 0;
        }
        ibx__close(cur);
        if (r == IBX_EMPTY) r = IBX_OK; /* a new message */
    }
    if (r == IBX_OK && (!IBX__PLAIN_UPSERT || c->envelope))
        r = ibx__exec(db, IBX__Q_ENQUEUE_ENV, s->sql[IBX__Q_ENQUEUE_ENV], c->p, 13, &c->rows, NULL);
    else if (r == IBX_OK)
        r = ibx__exec(db, IBX__Q_ENQUEUE, s->sql[IBX__Q_ENQUEUE], c->p, 7, &c->rows, NULL);
    return r;
}

/* ibx_enqueue's checks of a message, before any SQL; *payload_len its bytes. */
static ibx_result ibx__check_new(ibx_store *store, const ibx_new_message *m, size_t *payload_len) {
    size_t len;
    const char *nul;
    ibx_result r;
    if ((r = ibx__check_text(&store->err, "ibx_enqueue", "topic", m->topic, IBX_TOPIC_MAX)) != IBX_OK ||
        (r = ibx__check_key(store, "ibx_enqueue", "source", m->source)) != IBX_OK ||
        (r = ibx__check_key(store, "ibx_enqueue", "message_id", m->message_id)) != IBX_OK)
        return r;
    if (!m->payload)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_enqueue: payload",
                         "payload must not be NULL" IBX__WHY(" (use \"\" for none)"));
    if (!m->hash && m->hash_len > 0)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_enqueue: hash",
                         "hash is NULL but hash_len is %lu", (unsigned long)m->hash_len);
    len = m->payload_len == IBX_NTS ? strlen((const char *)m->payload) : m->payload_len;
    nul = (const char *)memchr(m->payload, 0, len);
    if (nul)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_enqueue: payload",
                         "payload has a NUL byte at offset %lu" IBX__WHY("; the text column cannot store it"),
                         (unsigned long)(nul - (const char *)m->payload));
    if (m->due_utc_ms < 0 || m->due_utc_ms > IBX_TIME_MAX_MS)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_enqueue: due_utc_ms",
                         "due_utc_ms must be 0 (now) or a Unix time in ms up to IBX_TIME_MAX_MS" IBX__WHY(" (year 9999)"));
    if (m->expires_utc_ms < 0 || m->expires_utc_ms > IBX_TIME_MAX_MS)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_enqueue: expires_utc_ms",
                         "expires_utc_ms must be 0 (never) or a Unix time in ms up to IBX_TIME_MAX_MS");
    if (m->expires_utc_ms > 0 && m->expires_utc_ms < m->due_utc_ms)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_enqueue: expires_utc_ms",
                         "expires_utc_ms must not be before due_utc_ms");
    if (m->priority < IBX_PRIORITY_MIN || m->priority > IBX_PRIORITY_MAX)
        return ibx__fail(&store->err, IBX_ERR_OUT_OF_RANGE, "ibx_enqueue: priority",
                         "priority must be %d..%d (0: the default), not %d", IBX_PRIORITY_MIN, IBX_PRIORITY_MAX,
                         m->priority);
    *payload_len = len;
    return ibx__check_envelope(&store->err, "ibx_enqueue", "", m);
}

typedef struct ibx__known_ctx {
    ibx_store *s;
    ibx__param *p;               /* source, message id */
    int known;                   /* stored, and Processing or Done */
} ibx__known_ctx;

static ibx_result ibx__known_unit(ibx__db *db, void *vctx) {
    ibx__known_ctx *c = (ibx__known_ctx *)vctx;
    SQLHSTMT cur = NULL;
    SQLLEN ind = 0;
    char status[16] = "";
    ibx_result r = ibx__exec(db, IBX__Q_HASH, c->s->sql[IBX__Q_HASH], c->p, 2, NULL, &cur);
    if (r == IBX_OK) r = ibx__fetch(db, cur);
    if (r == IBX_OK)
        r = ibx__get_text(db, cur, 2, status, sizeof status, &ind);
    ibx__close(cur);
    c->known = r == IBX_OK && ind != SQL_NULL_DATA && (!strcmp(status, "Processing") || !strcmp(status, "Done"));
    return r == IBX_EMPTY ? IBX_OK : r;
}

/* At max_pending (r is IBX_ERR_FULL), a redelivery of a message still to
 * handle or done adds none to handle, so it is taken; the error stays for
 * a new, Seen or Dead one (or when the look fails). */
static int ibx__full_redelivery(ibx_store *s, ibx_result r, ibx__param *p) {
    ibx__known_ctx ctx;
    ibx_error full;
    if (r != IBX_ERR_FULL) return 0;
    full = s->err;
    ctx.s = s;
    ctx.p = p;
    ctx.known = 0;
    if (ibx__unit_read(&s->db, ibx__known_unit, &ctx, "enqueue") == IBX_OK && ctx.known) return 1;
    s->err = full;
    return 0;
}

/* ibx_enqueue, or (out_sql set) its statements for the caller's own
 * driver, with `markers` (ibx_enqueue_sql). */
static ibx_result ibx__enqueue(ibx_store *store, const ibx_new_message *m, int *enqueued, int markers,
                               ibx_sql **out_sql, ibx__capture_fn capture) {
    ibx__enqueue_ctx ctx;
    ibx__param p[13];
    int envelope;
    int64_t rows = 0;
    size_t len = 0;
    ibx_result r = ibx__store_ready(store, "ibx_enqueue");
    if (r != IBX_OK) return r;
    if (!m) return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_enqueue: message", "must not be NULL");
    if ((r = ibx__check_new(store, m, &len)) != IBX_OK) return r;
    ibx__p_text(&p[0], m->source, (size_t)-1);
    ibx__p_text(&p[1], m->message_id, (size_t)-1);
    ibx__p_text(&p[2], m->topic, (size_t)-1);
    ibx__p_text(&p[3], (const char *)m->payload, len);
    ibx__p_blob(&p[4], m->hash_len ? m->hash : NULL, m->hash ? m->hash_len : 0);
    ibx__p_i64(&p[5], m->due_utc_ms);
    if (m->due_utc_ms == 0) p[5].ind = SQL_NULL_DATA;
    p[6] = p[5];
    /* Without an envelope, an expiry or a priority, the plain upsert:
     * nothing more to bind. With IBX_NO_ENVELOPE, one upsert for all (the
     * expiry's). */
    envelope = !IBX__PLAIN_UPSERT || ibx__has_envelope(m) || m->expires_utc_ms > 0 || m->priority != 0;
    ibx__p_i64(&p[11], m->expires_utc_ms);
    if (m->expires_utc_ms <= 0) p[11].ind = SQL_NULL_DATA;
    ibx__p_i64(&p[12], m->priority);
    if (envelope && !ibx__envelope_params(&store->hooks, &store->own.headers, &p[7], m))
        return ibx__fail(&store->err, IBX_ERR_NO_MEMORY, "ibx_enqueue", "out of memory");
    if ((r = ibx__pending_room(store, NULL, "ibx_enqueue", 1)) != IBX_OK && !ibx__full_redelivery(store, r, p))
        return r;
    memset(&ctx, 0, sizeof ctx);
    ctx.envelope = envelope;
    ctx.s = store;
    ctx.p = p;
    ctx.hash = m->hash_len && !out_sql ? m->hash : NULL; /* no stored hash to compare for a driver */
    ctx.hash_len = m->hash ? m->hash_len : 0;
    if (out_sql) return capture(store, ibx__enqueue_unit, &ctx, markers, out_sql);
    /* With a hash to compare, the unit reads the stored one first. */
    r = ibx__unit_run(&store->db, ibx__enqueue_unit, &ctx, "enqueue",
                      IBX__UNIT_WRITE | (ctx.hash ? 0 : IBX__UNIT_ONE_STATEMENT));
    if (r != IBX_OK) return r;
    rows = ctx.rows;
    if (ctx.mismatch) { /* IBX-008, as the dedup check does */
        char name[IBX__MSG_NAME_MAX];
        ibx__key_name(m->message_id, m->source, name, sizeof name);
        ibx__log(&store->hooks, IBX_LOG_WARN, store->store_id,
                 "message %s enqueued again with a different content hash", name);
    }
    if (enqueued) *enqueued = rows > 0;
    if (rows > 0) ibx__wake_send(&store->wake_fd, store->wake_path);
    ibx__count(store, IBX_METRIC_ENQUEUED, rows > 0 ? 1 : 0);
    if (ibx__log_enabled(&store->hooks, store->message_log_level)) {
        char topic[IBX__KV_CAP], source[IBX__KV_CAP], id[IBX__KV_CAP];
        ibx__log(&store->hooks, store->message_log_level, store->store_id, "%s topic=%s source=%s id=%s",
                 rows > 0 ? "enqueued" : "already done, not enqueued:", ibx__kv(topic, m->topic),
                 ibx__kv(source, m->source), ibx__kv(id, m->message_id));
    }
    return IBX_OK;
}

IBX_API ibx_result ibx_enqueue(ibx_store *store, const ibx_new_message *m, int *enqueued) {
    return ibx__enqueue(store, m, enqueued, 0, NULL, NULL);
}

IBX_API ibx_result ibx_enqueue_sql(ibx_store *store, const ibx_new_message *message, int markers,
                                   ibx_sql **out_sql) {
    ibx_result r = ibx__sql_args(store, "ibx_enqueue_sql", markers, out_sql);
    if (r != IBX_OK) return r;
    return ibx__enqueue(store, message, NULL, markers, out_sql, ibx__unit_capture);
}

/* >> get ---------------------------------------------------------------------------- */

#ifndef IBX_NO_DEAD_LETTERS
/* The inbox's dead-letter key: a source and/or a message id. */
static ibx_result ibx__dead_key(ibx_store *s, const char *fn, const ibx_dead_filter *f,
                                ibx__param p[2], char buf[37]) {
    ibx_result r;
    (void)buf;
    if (f->source && (r = ibx__check_text(&s->err, fn, "filter.source", f->source, IBX_KEY_MAX)) != IBX_OK)
        return r;
    if (f->message_id &&
        (r = ibx__check_text(&s->err, fn, "filter.message_id", f->message_id, IBX_KEY_MAX)) != IBX_OK)
        return r;
    ibx__p_text(&p[0], f->source, (size_t)-1);
    ibx__p_text(&p[1], f->message_id, (size_t)-1);
    return IBX_OK;
}
#endif

#ifndef IBX_NO_DEAD_LETTERS
/* The inbox's key of ibx_dead_move and ibx_run_now: source and message id,
 * into p[0] and p[1]; their name for log lines into `name`. */
static ibx_result ibx__one_key(ibx_store *s, const char *fn, const char *message_id, const char *source,
                               ibx__param *p, char *name, size_t size) {
    ibx_result r = ibx__store_ready(s, fn);
    if (r != IBX_OK) return r;
    if ((r = ibx__check_key(s, fn, "source", source)) != IBX_OK ||
        (r = ibx__check_key(s, fn, "message_id", message_id)) != IBX_OK)
        return r;
    ibx__p_text(&p[0], source, (size_t)-1);
    ibx__p_text(&p[1], message_id, (size_t)-1);
    snprintf(name, size, "%s/%s", source, message_id);
    return IBX_OK;
}

IBX_API ibx_result ibx_dead_move(ibx_store *store, const char *message_id, const char *source,
                                 const char *reason, int in_flight, int64_t *moved) {
    ibx__param p[4];
    char name[2 * IBX__MSG_NAME_MAX];
    ibx_result r = ibx__one_key(store, "ibx_dead_move", message_id, source, &p[1], name, sizeof name);
    if (r != IBX_OK) return r;
    ibx__p_i64(&p[3], in_flight ? 1 : 0);
    return ibx__one_message(store, "ibx_dead_move", IBX__Q_MOVE, reason, p, 4, name, moved);
}

IBX_API ibx_result ibx_run_now(ibx_store *store, const char *message_id, const char *source,
                               int64_t *changed) {
    ibx__param p[2];
    char name[2 * IBX__MSG_NAME_MAX];
    ibx_result r = ibx__one_key(store, "ibx_run_now", message_id, source, p, name, sizeof name);
    if (r != IBX_OK) return r;
    return ibx__one_message(store, "ibx_run_now", IBX__Q_RUN_NOW, NULL, p, 2, name, changed);
}
#endif

IBX_API ibx_result ibx_get(ibx_store *store, const char *message_id, const char *source,
                           ibx_message *message) {
    ibx__param p[2];
    ibx_result r = ibx__store_ready(store, "ibx_get");
    if (r != IBX_OK) return r;
    if ((r = ibx__check_key(store, "ibx_get", "source", source)) != IBX_OK ||
        (r = ibx__check_key(store, "ibx_get", "message_id", message_id)) != IBX_OK)
        return r;
    if (!message) return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_get: message", "must not be NULL");
    ibx__p_text(&p[0], source, (size_t)-1);
    ibx__p_text(&p[1], message_id, (size_t)-1);
    r = ibx__get_by_key(store, p, 2, message);
    if (r == IBX_EMPTY)
        return ibx__fail(&store->err, IBX_ERR_NOT_FOUND, "ibx_get", "no message %s from %s", message_id, source);
    return r;
}

/* >> ack, abandon, fail ------------------------------------------------------------ */

/* Check a settle call's keys and put them in the store's two key lists. */
static ibx_result ibx__settle_keys(ibx_store *s, const char *fn, const char *owner,
                                   const ibx_key *keys, int count) {
    char where[96];
    int i;
    ibx_result r = ibx__settle_begin(s, fn, owner, count, keys);
    if (r != IBX_OK) return r;
    for (i = 0; i < count; i++) {
        if (!keys[i].source || !keys[i].source[0] || !keys[i].message_id || !keys[i].message_id[0]) {
            snprintf(where, sizeof where, "%s: keys[%d]", fn, i);
            return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, where,
                             "source and message_id must not be NULL or empty");
        }
        if (!ibx__list_add(&s->hooks, &s->keys[0], s->db.d, keys[i].source, strlen(keys[i].source)) ||
            !ibx__list_add(&s->hooks, &s->keys[1], s->db.d, keys[i].message_id, strlen(keys[i].message_id)))
            return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, fn, "out of memory");
    }
    return ibx__key_lists_end(s, fn);
}

IBX_API ibx_result ibx_ack(ibx_store *store, const char *owner_token, const ibx_key *keys,
                           int count, int64_t *changed) {
    ibx_result r = ibx__settle_keys(store, "ibx_ack", owner_token, keys, count);
    return r != IBX_OK ? r : ibx__settle(store, IBX__SETTLE_ACK, count, NULL, 0, 0, changed);
}

IBX_API ibx_result ibx_abandon(ibx_store *store, const char *owner_token, const ibx_key *keys,
                               int count, const char *last_error, int64_t delay_ms,
                               int64_t *changed) {
    ibx_result r = store ? ibx__check_delay(store, "ibx_abandon", delay_ms) : IBX_ERR_INVALID_ARG;
    if (r == IBX_OK) r = ibx__settle_keys(store, "ibx_abandon", owner_token, keys, count);
    if (r == IBX_OK) r = ibx__check_utf8(&store->err, "ibx_abandon", "last_error", last_error);
    return r != IBX_OK ? r : ibx__settle(store, IBX__SETTLE_ABANDON, count, last_error, delay_ms, 1, changed);
}

IBX_API ibx_result ibx_lease_extend(ibx_store *store, const char *owner_token, const ibx_key *keys,
                                    int count, int lease_seconds, int64_t *changed) {
    ibx_result r = ibx__settle_keys(store, "ibx_lease_extend", owner_token, keys, count);
    if (r == IBX_OK) r = ibx__check_lease(store, "ibx_lease_extend", lease_seconds);
    return r != IBX_OK ? r : ibx__settle(store, IBX__SETTLE_EXTEND, count, NULL, lease_seconds, 0, changed);
}

IBX_API ibx_result ibx_fail(ibx_store *store, const char *owner_token, const ibx_key *keys,
                            int count, const char *error, int64_t *changed) {
    ibx_result r;
    if (store && !error)
        return ibx__fail(&store->err, IBX_ERR_INVALID_ARG, "ibx_fail: error", "error must not be NULL");
    r = ibx__settle_keys(store, "ibx_fail", owner_token, keys, count);
    if (r == IBX_OK) r = ibx__check_utf8(&store->err, "ibx_fail", "error", error);
    return r != IBX_OK ? r : ibx__settle(store, IBX__SETTLE_FAIL, count, error, 0, 0, changed);
}

#endif /* IBX_IMPLEMENTATION */

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
