/* The SQL Server dialect of both headers, against the fake ODBC layer
 * answering as "Microsoft SQL Server" (no server runs here): every operation
 * issues the statement the dialect table says, binds the types the schema
 * wants (text as NVARCHAR, long text as NVARCHAR(MAX), times as Unix ms
 * integers converted by the server), reads rows back, and classifies SQL
 * Server's error numbers. sql/sqlserver/{outbox,inbox}.sql must be what deploy runs.
 *
 *   test_sqlserver              the tests
 *   test_sqlserver --tsql FILE  every schema batch and statement of both
 *                               headers as plain T-SQL (markers as @pN,
 *                               {CALL} as EXEC), GO-separated, for a parser */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"
#include "fake_odbc.h"
#include "tt.h"

#define RUN(id, what, fn) TT_RUN(id, "sqlserver-fake", what, fn)

static const char *const g_mssql = "Microsoft SQL Server";

static void no_sleep(int64_t ms, void *user) { (void)ms; (void)user; }
/* The error tests fail on purpose: their log lines are not news. */
static void obx_quiet(obx_log_level l, const char *id, const char *msg, void *user) { (void)l; (void)id; (void)msg; (void)user; }
static void ibx_quiet(ibx_log_level l, const char *id, const char *msg, void *user) { (void)l; (void)id; (void)msg; (void)user; }

/* A clean log and script for the next call; open handles stay valid. */
static void forget(void) {
    fake_reset();
    fake_set_dbms_name(g_mssql);
}

static int g_dead_holds; /* the next outbox() has ordering_dead_holds */

static obx_store *outbox(void) {
    obx_store_desc desc;
    obx_store *s = NULL;
    forget();
    memset(&desc, 0, sizeof desc);
    desc.ordering_dead_holds = g_dead_holds;
    desc.connection_string = "Driver={FreeTDS};Server=h;Port=1433;Database=d;UID=u;PWD=p;"
                             "TDS_Version=7.4;ClientCharset=UTF-8;";
    desc.worker_name = "worker-1";
    desc.hooks.clock.sleep_ms = no_sleep;
    desc.hooks.logger.log = obx_quiet;
    if (obx_store_open(&desc, &s) != OBX_OK) {
        printf("    open failed: %s\n", obx_store_last_error(s)->message);
        obx_store_close(s);
        return NULL;
    }
    fake_reset(); /* forget the set-up traffic */
    fake_set_dbms_name(g_mssql);
    return s;
}

static ibx_store *inbox(void) {
    ibx_store_desc desc;
    ibx_store *s = NULL;
    forget();
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver={ODBC Driver 18 for SQL Server};Server=h;Database=d;UID=u;PWD=p;";
    desc.hooks.clock.sleep_ms = no_sleep;
    desc.hooks.logger.log = ibx_quiet;
    if (ibx_store_open(&desc, &s) != IBX_OK) {
        printf("    open failed: %s\n", ibx_store_last_error(s)->message);
        ibx_store_close(s);
        return NULL;
    }
    forget();
    return s;
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; s && *s; s++) n += *s == c;
    return n;
}

/* The first logged execute (not a COMMIT/ROLLBACK pseudo entry). */
static int first_exec(void) {
    int i;
    for (i = 0; i < fake_log_count(); i++)
        if (fake_log_sql(i)[0] != '<') return i;
    return -1;
}

static int param_type(int entry, int param) { return fake_log_param(entry, 0, param).sql_type; }

/* ---- schema ----------------------------------------------------------------------- */

static char *read_file(const char *path) {
    static char buf[1 << 17];
    size_t n;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_schema_files(void) {
    static char want[1 << 17];
    const char *have;
    size_t needed = 0;
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_SQLSERVER, NULL, NULL, want, sizeof want, &needed), OBX_OK);
    have = read_file("sql/sqlserver/outbox.sql");
    TT_ASSERT(have != NULL);
    TT_EXPECT(strcmp(have, want) == 0);
    /* The seed's tables and procedures, batches for sqlcmd, idempotent. */
    TT_EXPECT(strstr(want, "CREATE TABLE [dbo].[Outbox] (") != NULL);
    TT_EXPECT(strstr(want, "CREATE TABLE [dbo].[OutboxJoin] (") != NULL);
    TT_EXPECT(strstr(want, "CREATE TABLE [dbo].[OutboxJoinMember] (") != NULL);
    TT_EXPECT(strstr(want, "[Payload]       NVARCHAR(MAX) NOT NULL") != NULL);
    TT_EXPECT(strstr(want, "[NextAttemptAt] DATETIMEOFFSET NOT NULL") != NULL);
    TT_EXPECT(strstr(want, "[LockedUntil]   DATETIME2(3) NULL") != NULL);
    TT_EXPECT(strstr(want, "WHERE [Status] = 0\nGO\n") != NULL); /* filtered ready index */
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [dbo].[Outbox_Claim]") != NULL);
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [dbo].[Outbox_Ack]") != NULL);
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [dbo].[Outbox_Abandon]") != NULL);
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [dbo].[Outbox_Fail]") != NULL);
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [dbo].[Outbox_ReapExpired]") != NULL);
    TT_EXPECT(strstr(want, "WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)") != NULL);
    TT_EXPECT(strstr(want, "IF OBJECT_ID(N'[dbo].[Outbox]', N'U') IS NULL\nCREATE TABLE") != NULL);
    TT_EXPECT(strstr(want, "\nGO\n") != NULL);
    TT_EXPECT(strcmp(want + strlen(want) - 4, "\nGO\n") == 0);
    TT_EQ_INT(ibx_schema_sql(IBX_DIALECT_SQLSERVER, NULL, NULL, want, sizeof want, &needed), IBX_OK);
    have = read_file("sql/sqlserver/inbox.sql");
    TT_ASSERT(have != NULL);
    TT_EXPECT(strcmp(have, want) == 0);
    TT_EXPECT(strstr(want, "CREATE TABLE [infra].[Inbox] (") != NULL);
    TT_EXPECT(strstr(want, "PRIMARY KEY NONCLUSTERED ([Source], [MessageId])") != NULL);
    TT_EXPECT(strstr(want, "[Source]        NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL") != NULL);
    TT_EXPECT(strstr(want, "WHERE [Status] = 'Processing'\nGO\n") != NULL);
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [infra].[Inbox_Claim]") != NULL);
    TT_EXPECT(strstr(want, "CREATE OR ALTER PROCEDURE [infra].[Inbox_ReapExpired]") != NULL);
}

static void test_089_join_triggers(void) {
    /* Join counters move inside Ack/Fail's own statement, set-based, never
     * past ExpectedSteps: both triggers are in the schema. */
    static char ddl[1 << 17];
    const char *step, *count;
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_SQLSERVER, "app", "Jobs", ddl, sizeof ddl, NULL), OBX_OK);
    step = strstr(ddl, "CREATE OR ALTER TRIGGER [app].[Jobs_JoinStep] ON [app].[Jobs] AFTER UPDATE AS");
    count = strstr(ddl, "CREATE OR ALTER TRIGGER [app].[Jobs_JoinCount] ON [app].[JobsJoinMember] AFTER UPDATE AS");
    TT_ASSERT(step != NULL && count != NULL);
    TT_EXPECT(strstr(step, "FROM inserted AS i") != NULL || strstr(step, "JOIN inserted AS i") != NULL);
    TT_EXPECT(strstr(count, "[ExpectedSteps] - j.[CompletedSteps] - j.[FailedSteps]") != NULL);
    /* Settles write through OUTPUT ... INTO: plain OUTPUT is refused on a
     * table with triggers (error 334). */
    TT_EXPECT(strstr(ddl, "OUTPUT inserted.[Id] INTO @changed") != NULL);
    TT_EXPECT(strstr(ddl, "OUTPUT inserted.[Id] INTO @claimed") != NULL);
}

static void test_deploy(void) {
    obx_store *s = outbox();
    ibx_store *in;
    int i, batches = 0;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(obx_store_deploy(s), OBX_OK);
    /* One batch per execute (CREATE PROCEDURE must stand alone), under an
     * application lock, in one transaction; GO is for sqlcmd, never sent. */
    TT_EXPECT(strstr(fake_log_sql(0), "EXEC @lock = sp_getapplock @Resource = N'obx deploy [dbo].[Outbox]'") != NULL);
    for (i = 0; i < fake_log_count(); i++) {
        const char *q = fake_log_sql(i);
        TT_EXPECT(strstr(q, "\nGO") == NULL);
        if (q[0] != '<') batches++;
    }
    TT_EQ_INT(batches, 28);
    TT_EXPECT(strstr(fake_log_sql(0), "SET QUOTED_IDENTIFIER ON;") != NULL); /* filtered indexes need it */
    TT_EQ_STR(fake_log_sql(fake_log_count() - 2), "IF @@TRANCOUNT > 0 AND (@@OPTIONS & 2) = 0 COMMIT;");
    TT_EQ_INT(fake_commits(), 1);
    TT_EXPECT(fake_log_find("CREATE OR ALTER PROCEDURE [dbo].[Outbox_Claim]", 0) >= 0);
    obx_store_close(s);
    in = inbox();
    TT_ASSERT(in != NULL);
    TT_EQ_INT(ibx_store_deploy(in), IBX_OK);
    TT_EXPECT(strstr(fake_log_sql(0), "EXEC @lock = sp_getapplock @Resource = N'ibx deploy [infra].[Inbox]'") != NULL);
    TT_EXPECT(fake_log_find("IF SCHEMA_ID(PARSENAME(N'[infra]', 1)) IS NULL", 0) >= 0);
    TT_EQ_INT(fake_commits(), 1);
    ibx_store_close(in);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* CORE-SCHEMA-UPGRADE through the fake layer: a column added since the
 * first release is in CREATE TABLE (new tables) and added by a batch that
 * tests for it itself (old tables), right after the CREATE TABLE, before
 * the indexes and procedures that may use it. */
static void test_schema_upgrade(void) {
    obx_store *s = outbox();
    ibx_store *in;
    const char *v0;
    int create, add;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(obx_store_deploy(s), OBX_OK);
    create = fake_log_find("CREATE TABLE [dbo].[Outbox] (", 0);
    add = fake_log_find("IF COL_LENGTH(N'[dbo].[Outbox]', N'Starts') IS NULL", 0);
    TT_ASSERT(create >= 0 && add > create);
    TT_EQ_STR(fake_log_sql(add), "IF COL_LENGTH(N'[dbo].[Outbox]', N'Starts') IS NULL "
                                 "ALTER TABLE [dbo].[Outbox] ADD [Starts] INT NOT NULL DEFAULT 0");
    TT_EXPECT(strstr(fake_log_sql(create), "    [Starts]        INT NOT NULL DEFAULT 0,\n    [OrderingKey]   "
                                           "NVARCHAR(255) NULL,\n    [OrderingSeq]   BIGINT NULL,\n    [TenantId]") != NULL);
    TT_EXPECT(strstr(fake_log_sql(create), "    [Headers]       NVARCHAR(MAX) NULL,\n    [ExpiresAt]     "
                                           "DATETIMEOFFSET NULL,\n    [Priority]      SMALLINT NOT NULL DEFAULT 0,\n"
                                           "    [Seq]") != NULL);
    TT_EQ_STR(fake_log_sql(add + 1), "IF COL_LENGTH(N'[dbo].[Outbox]', N'OrderingKey') IS NULL "
                                     "ALTER TABLE [dbo].[Outbox] ADD [OrderingKey] NVARCHAR(255) NULL");
    TT_EQ_STR(fake_log_sql(add + 2), "IF COL_LENGTH(N'[dbo].[Outbox]', N'OrderingSeq') IS NULL "
                                     "ALTER TABLE [dbo].[Outbox] ADD [OrderingSeq] BIGINT NULL");
    TT_EXPECT(fake_log_find("CREATE INDEX [IX_Outbox_Ready]", 0) > add + 2);
    TT_EXPECT(fake_log_find("CREATE INDEX [IX_Outbox_Ordering]", 0) > add + 2);
    /* The envelope's columns (OBX-ENVELOPE) follow, oldest first. */
    TT_EQ_STR(fake_log_sql(add + 3), "IF COL_LENGTH(N'[dbo].[Outbox]', N'TenantId') IS NULL "
                                     "ALTER TABLE [dbo].[Outbox] ADD [TenantId] NVARCHAR(64) NULL");
    TT_EQ_STR(fake_log_sql(add + 6), "IF COL_LENGTH(N'[dbo].[Outbox]', N'Headers') IS NULL "
                                     "ALTER TABLE [dbo].[Outbox] ADD [Headers] NVARCHAR(MAX) NULL");
    TT_EXPECT(fake_log_find("CREATE INDEX [IX_Outbox_Ready]", 0) > add + 6);
    /* Expiry's (CORE-EXPIRY), then the priority's (OBX-PRIO-ORDER) last. */
    TT_EQ_STR(fake_log_sql(add + 7), "IF COL_LENGTH(N'[dbo].[Outbox]', N'ExpiresAt') IS NULL "
                                     "ALTER TABLE [dbo].[Outbox] ADD [ExpiresAt] DATETIMEOFFSET NULL");
    TT_EQ_STR(fake_log_sql(add + 8), "IF COL_LENGTH(N'[dbo].[Outbox]', N'Priority') IS NULL "
                                     "ALTER TABLE [dbo].[Outbox] ADD [Priority] SMALLINT NOT NULL DEFAULT 0");
    TT_EXPECT(fake_log_find("COL_LENGTH", add + 9) < 0); /* once each; no probe query before it */
    TT_EQ_INT(fake_commits(), 1);
    obx_store_close(s);
    in = inbox();
    TT_ASSERT(in != NULL);
    TT_EQ_INT(ibx_store_deploy(in), IBX_OK);
    create = fake_log_find("CREATE TABLE [infra].[Inbox] (", 0);
    add = fake_log_find("IF COL_LENGTH(N'[infra].[Inbox]', N'Starts') IS NULL", 0);
    TT_ASSERT(create >= 0 && add > create);
    TT_EQ_STR(fake_log_sql(add), "IF COL_LENGTH(N'[infra].[Inbox]', N'Starts') IS NULL "
                                 "ALTER TABLE [infra].[Inbox] ADD [Starts] INT NOT NULL DEFAULT 0");
    TT_EXPECT(fake_log_find("CREATE INDEX [IX_Inbox_WorkQueue]", 0) > add);
    ibx_store_close(in);
    /* The first release's tables lacked it (the frozen DDL the real backends upgrade). */
    v0 = read_file("tests/schema/v0/sqlserver/outbox.sql");
    TT_ASSERT(v0 != NULL && strstr(v0, "CREATE TABLE [dbo].[Outbox] (") != NULL);
    TT_EXPECT(strstr(v0, "[Starts]") == NULL);
    v0 = read_file("tests/schema/v0/sqlserver/inbox.sql");
    TT_ASSERT(v0 != NULL && strstr(v0, "CREATE TABLE [infra].[Inbox] (") != NULL);
    TT_EXPECT(strstr(v0, "[Starts]") == NULL);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* CORE-CRASH-LOOP through the fake layer: the claim procedures count a
 * start in their UPDATE, the inbox's takes no message at max_starts, the
 * reap procedures end such messages Dead, and the store passes its
 * max_starts to both. */
static void test_crash_loop(void) {
    static char ddl[1 << 17];
    size_t needed = 0;
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_SQLSERVER, NULL, NULL, ddl, sizeof ddl, &needed), OBX_OK);
    TT_EXPECT(strstr(ddl, "[LockedUntil] = DATEADD(SECOND, @LeaseSeconds, SYSUTCDATETIME()), [Starts] = [Starts] + 1") != NULL);
    TT_EXPECT(strstr(ddl, "PROCEDURE [dbo].[Outbox_ReapExpired] @MaxStarts INT = 3 AS") != NULL);
    TT_EXPECT(strstr(ddl, "[Status] = CASE WHEN [Starts] >= @MaxStarts THEN 3 ELSE 0 END") != NULL);
    TT_EXPECT(strstr(ddl, "[Starts] = CASE WHEN t.[Starts] > 0 THEN t.[Starts] - 1 ELSE 0 END") != NULL); /* abandon */
    TT_EQ_INT(ibx_schema_sql(IBX_DIALECT_SQLSERVER, NULL, NULL, ddl, sizeof ddl, &needed), IBX_OK);
    TT_EXPECT(strstr(ddl, "@BatchSize INT, @MaxStarts INT = 3 AS") != NULL);
    TT_EXPECT(strstr(ddl, "AND [Starts] < @MaxStarts") != NULL);
    TT_EXPECT(strstr(ddl, "[Status] = CASE WHEN [Starts] >= @MaxStarts THEN 'Dead' ELSE [Status] END") != NULL);
}

static void test_session(void) {
    obx_store_desc desc;
    obx_store *s = NULL;
    obx_store_info info;
    forget();
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;";
    desc.hooks.logger.min_level = OBX_LOG_ERROR;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    TT_EQ_INT(obx_store_get_info(s, &info), OBX_OK);
    TT_EQ_INT(info.dialect, OBX_DIALECT_SQLSERVER);
    /* XACT_ABORT: any error ends the transaction; NOCOUNT OFF: row counts. */
    TT_EXPECT(fake_log_find("SET XACT_ABORT ON; SET NOCOUNT OFF", 0) >= 0);
    TT_EXPECT(fake_log_find("SERVERPROPERTY('ProductVersion')", 0) >= 0);
    TT_EQ_STR(fake_last_connstr(), "Driver=fake;"); /* nothing appended */
    obx_store_close(s);
}

/* ---- outbox operations ------------------------------------------------------------------ */

static void test_enqueue(void) {
    obx_store *s = outbox();
    obx_new_message m;
    static char big[5001];
    char id[37];
    int e;
    const char *q;
    TT_ASSERT(s != NULL);
    memset(&m, 0, sizeof m);
    m.topic = "order.created";
    m.payload = "{\"caf\xc3\xa9\":1}";
    m.payload_len = OBX_NTS;
    m.correlation_id = "corr-1";
    m.due_utc_ms = 1767225600123; /* 2026-01-01T00:00:00.123Z */
    m.ordering_key = "customer-7";
    TT_EQ_INT(obx_enqueue(s, &m, id), OBX_OK);
    e = first_exec();
    q = fake_log_sql(e);
    TT_EXPECT(strncmp(q, "INSERT INTO [dbo].[Outbox] ([Id], [MessageId], [Topic], [Payload], [CorrelationId], "
                         "[DueTimeUtc], [NextAttemptAt], [OrderingKey], [OrderingSeq], [TenantId], [AggregateType], "
                         "[AggregateId], [Headers], [ExpiresAt]) SELECT ?, ?, ?, ?, ?, DATEADD(MILLISECOND, "
                         "CAST(? % 86400000 AS INT), DATEADD(DAY, CAST(? / 86400000 AS INT), "
                         "CAST('1970-01-01T00:00:00+00:00' AS DATETIMEOFFSET(3))))",
                  200) == 0);
    /* The due time is used twice, the next attempt twice, the ordering key
     * three times: numbered markers bind it at each place; then the
     * envelope's four (NULL here), the expiry twice (NULL: never), the
     * priority. */
    TT_EQ_INT(count_char(q, '?'), 21);
    TT_EQ_INT(fake_log_param_count(e), 21);
    TT_EXPECT(fake_log_param(e, 0, 15).is_null && fake_log_param(e, 0, 18).is_null);
    TT_EXPECT(fake_log_param(e, 0, 19).is_null && fake_log_param(e, 0, 20).is_null);
    TT_EQ_STR(fake_log_param_text(e, 0, 10), "customer-7");
    TT_EQ_STR(fake_log_param_text(e, 0, 14), "customer-7");
    TT_EXPECT(strstr(q, "(SELECT MAX(o.[OrderingSeq]) FROM [dbo].[Outbox] AS o WHERE o.[OrderingKey] IS NOT NULL "
                        "AND o.[OrderingKey] = ? AND o.[Status] <> 2 AND o.[Status] = 3)") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), id);
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "order.created");
    TT_EQ_STR(fake_log_param_text(e, 0, 6), "1767225600123");
    TT_EQ_STR(fake_log_param_text(e, 0, 7), "1767225600123");
    TT_EQ_STR(fake_log_param_text(e, 0, 8), "1767225600123");
    TT_EQ_STR(fake_log_param_text(e, 0, 9), "1767225600123");
    TT_EQ_INT(param_type(e, 1), SQL_WVARCHAR); /* uniqueidentifier from text */
    TT_EQ_INT(param_type(e, 3), SQL_WVARCHAR); /* NVARCHAR: every character kept */
    TT_EQ_INT(param_type(e, 4), SQL_WVARCHAR);
    /* One declared size, NVARCHAR(4000), whatever the length: one plan. */
    TT_EQ_INT(fake_log_param(e, 0, 3).column_size, 4000);
    TT_EQ_INT(fake_log_param(e, 0, 4).column_size, 4000);
    TT_EQ_INT(param_type(e, 6), SQL_BIGINT);
    TT_EQ_INT(fake_log_param(e, 0, 6).c_type, SQL_C_SBIGINT);
    TT_EQ_INT(fake_commits(), 1);
    /* A payload over 4000 bytes goes as NVARCHAR(MAX). */
    memset(big, 'x', sizeof big - 1);
    m.payload = big;
    m.due_utc_ms = 0;
    forget();
    TT_EQ_INT(obx_enqueue(s, &m, id), OBX_OK);
    e = first_exec();
    /* Longer: NVARCHAR(MAX) (size 0), never ntext, which JSON functions refuse. */
    TT_EQ_INT(param_type(e, 4), SQL_WVARCHAR);
    TT_EQ_INT(fake_log_param(e, 0, 4).column_size, 0);
    TT_EXPECT(fake_log_param(e, 0, 6).is_null);
    obx_store_close(s);
}

static void test_enqueue_batch(void) {
    obx_store *s = outbox();
    obx_new_message ms[3];
    char ids[3][37];
    int e, i;
    const char *q;
    TT_ASSERT(s != NULL);
    memset(ms, 0, sizeof ms);
    for (i = 0; i < 3; i++) {
        ms[i].topic = i == 1 ? "t\"quoted\"" : "t";
        ms[i].payload = "p";
        ms[i].payload_len = OBX_NTS;
    }
    ms[2].due_utc_ms = 1767225600000;
    TT_EQ_INT(obx_enqueue_batch(s, NULL, ms, 3, ids), OBX_OK);
    e = first_exec();
    q = fake_log_sql(e);
    /* One statement for the batch: six JSON arrays zipped by position. */
    TT_EXPECT(strstr(q, "FROM OPENJSON(?) AS i JOIN OPENJSON(?) AS m ON m.[key] = i.[key]") != NULL);
    TT_EXPECT(strstr(q, "OrderingKey") == NULL); /* no key: the plain statement */
    TT_EQ_INT(fake_log_param_count(e), 6);
    TT_EXPECT(strstr(fake_log_param_text(e, 0, 1), ids[2]) != NULL);
    TT_EXPECT(strstr(fake_log_param_text(e, 0, 3), "\"t\\\"quoted\\\"\"") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 6), "[null,null,\"1767225600000\"]");
    TT_EQ_INT(param_type(e, 4), SQL_WVARCHAR);
    TT_EQ_INT(fake_commits(), 1);
    TT_EQ_INT(fake_log_count(), 2); /* the insert, the commit */
    /* One key in the batch: the keyed statement, a seventh list (and the
     * envelope's four, all null here). */
    ms[1].ordering_key = "k\"1";
    fake_reset();
    fake_set_dbms_name(g_mssql);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, ms, 3, ids), OBX_OK);
    e = first_exec();
    TT_EXPECT(strstr(fake_log_sql(e), "JOIN OPENJSON(?) AS k ON k.[key] = i.[key]") != NULL);
    TT_EQ_INT(fake_log_param_count(e), 13);
    TT_EQ_STR(fake_log_param_text(e, 0, 12), "[null,null,null]"); /* expiries */
    TT_EQ_STR(fake_log_param_text(e, 0, 13), "[\"0\",\"0\",\"0\"]"); /* priorities */
    TT_EQ_STR(fake_log_param_text(e, 0, 7), "[null,\"k\\\"1\",null]");
    TT_EQ_STR(fake_log_param_text(e, 0, 11), "[null,null,null]");
    obx_store_close(s);
}

/* CORE-EXPIRY through the fake layer: expires_utc_ms takes the extended
 * statement (bound twice, ms to DATETIMEOFFSET), a batch's as a twelfth
 * JSON array; a message without it keeps the plain statements. */
static void test_expiry(void) {
    obx_store *s = outbox();
    obx_new_message m[2];
    char ids[2][37];
    int e, n;
    TT_ASSERT(s != NULL);
    memset(m, 0, sizeof m);
    m[0].topic = m[1].topic = "t";
    m[0].payload = m[1].payload = "p";
    m[0].payload_len = m[1].payload_len = OBX_NTS;
    m[0].expires_utc_ms = 1767225700000;
    TT_EQ_INT(obx_enqueue(s, &m[0], ids[0]), OBX_OK);
    e = first_exec();
    n = fake_log_param_count(e);
    TT_EQ_INT(n, 21);
    TT_EXPECT(strstr(fake_log_sql(e), "[Headers], [ExpiresAt], [Priority]) SELECT") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 19), "1767225700000");
    TT_EQ_STR(fake_log_param_text(e, 0, 20), "1767225700000");
    TT_EQ_INT(param_type(e, 19), SQL_BIGINT);
    forget();
    TT_EQ_INT(obx_enqueue(s, &m[1], ids[1]), OBX_OK);
    e = first_exec();
    TT_EXPECT(strstr(fake_log_sql(e), "ExpiresAt") == NULL); /* none: the plain statement */
    forget();
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 2, ids), OBX_OK);
    e = first_exec();
    TT_EQ_INT(fake_log_param_count(e), 13);
    TT_EQ_STR(fake_log_param_text(e, 0, 12), "[\"1767225700000\",null]");
    TT_EXPECT(strstr(fake_log_sql(e), "JOIN OPENJSON(?) AS e5 ON e5.[key] = i.[key]") != NULL);
    /* Refused before any SQL, naming the field. */
    forget();
    m[1].due_utc_ms = 1767225800000;
    m[1].expires_utc_ms = 1767225700000;
    TT_EQ_INT(obx_enqueue(s, &m[1], ids[1]), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue: expires_utc_ms");
    TT_EQ_INT(fake_log_count(), 0);
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

static void test_017_claim(void) {
    obx_store *s = outbox();
    char owner[37];
    const obx_message *ms = NULL;
    int n = 0, e;
    static const char *const rows[] = {
        "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", "order.created",
        "{\"n\":1}", NULL, "1767225600000", NULL, "2", "boom", "1", NULL, NULL, "1767225660000",
        "0190a1b2-0000-7000-8000-000000000001", "1767225600500", "1", "customer-7", NULL, NULL, NULL, NULL,
        "1767225700000"};
    TT_ASSERT(s != NULL);
    strcpy(owner, "0190a1b2-0000-7000-8000-000000000001");
    fake_push_rows(22, 1, rows);
    TT_EQ_INT(obx_claim(s, owner, 30, 50, &ms, &n), OBX_OK);
    e = first_exec();
    /* The seed's Outbox_Claim: one round trip, an RPC call. */
    TT_EQ_STR(fake_log_sql(e), "{CALL [dbo].[Outbox_Claim](?, ?, ?)}");
    TT_EQ_STR(fake_log_param_text(e, 0, 1), owner);
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "30");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "50");
    TT_EQ_INT(param_type(e, 1), SQL_WVARCHAR);
    TT_EQ_INT(param_type(e, 2), SQL_BIGINT);
    TT_EQ_INT(n, 1);
    TT_EQ_STR(ms[0].id, rows[0]);
    TT_EQ_STR(ms[0].message_id, rows[1]);
    TT_EQ_STR(ms[0].topic, "order.created");
    TT_EQ_INT(ms[0].retry_count, 2);
    TT_EQ_STR(ms[0].last_error, "boom");
    TT_EQ_INT(ms[0].created_at_ms, 1767225600000);
    TT_EQ_INT(ms[0].locked_until_ms, 1767225660000);
    TT_EQ_INT(ms[0].next_attempt_ms, 1767225600500);
    TT_EQ_INT(ms[0].due_time_ms, 0);
    TT_EQ_STR(ms[0].ordering_key, "customer-7");
    TT_EQ_INT(ms[0].expires_ms, 1767225700000);
    TT_EQ_INT(fake_commits(), 1);
    obx_store_close(s);
    /* ordering_dead_holds: the same procedure, Dead rows counted as waiting. */
    g_dead_holds = 1;
    s = outbox();
    g_dead_holds = 0;
    TT_ASSERT(s != NULL);
    fake_push_rows(17, 0, NULL);
    TT_EQ_INT(obx_claim(s, owner, 30, 50, &ms, &n), OBX_EMPTY);
    TT_EQ_STR(fake_log_sql(first_exec()), "{CALL [dbo].[Outbox_Claim](?, ?, ?, 1)}");
    obx_store_close(s);
}

/* OBX-ENVELOPE through the fake layer: tenant, aggregate and headers bound
 * as NVARCHAR after the ordering key (?9..?12) in the extended statement,
 * the batch's as four more JSON arrays, and a claimed row's read back (headers decoded,
 * escapes and a surrogate pair included). */
static void test_envelope(void) {
    obx_store *s = outbox();
    obx_new_message m[2];
    obx_header h[2];
    char ids[2][37];
    const obx_message *ms = NULL;
    const char *key = NULL, *value = NULL;
    int e, n = 0, last;
    static const char *const rows[] = {
        "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", "order.created",
        "{}", NULL, "1767225600000", NULL, "0", NULL, "1", NULL, NULL, "1767225660000",
        "0190a1b2-0000-7000-8000-000000000001", "1767225600500", "1", NULL, "tenant-1", "order", NULL,
        "{\"traceparent\":\"00-ab\", \"q\" : \"\\\"\\\\\\ud83d\\ude00\\u00e9\"}", NULL};
    TT_ASSERT(s != NULL);
    memset(m, 0, sizeof m);
    h[0].key = "traceparent";
    h[0].value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    h[1].key = "q\"k";
    h[1].value = "a\\b\xf0\x9f\x98\x80";
    m[0].topic = m[1].topic = "t";
    m[0].payload = m[1].payload = "p";
    m[0].payload_len = m[1].payload_len = OBX_NTS;
    m[0].tenant_id = "tenant-1";
    m[0].aggregate_type = "order";
    m[0].aggregate_id = "o-42";
    m[0].headers = h;
    m[0].header_count = 2;
    TT_EQ_INT(obx_enqueue(s, &m[0], ids[0]), OBX_OK);
    e = first_exec();
    /* No ordering key: the extended statement, with a NULL key. */
    TT_EXPECT(strstr(fake_log_sql(e), "[TenantId], [AggregateType], [AggregateId], [Headers], [ExpiresAt], [Priority]) SELECT") != NULL);
    last = fake_log_param_count(e) - 3; /* the expiry's two, then the priority, last */
    TT_EQ_INT(last, 18);
    TT_EXPECT(fake_log_param(e, 0, 10).is_null);
    TT_EQ_STR(fake_log_param_text(e, 0, last - 3), "tenant-1");
    TT_EQ_STR(fake_log_param_text(e, 0, last - 2), "order");
    TT_EQ_STR(fake_log_param_text(e, 0, last - 1), "o-42");
    TT_EQ_STR(fake_log_param_text(e, 0, last),
              "{\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\","
              "\"q\\\"k\":\"a\\\\b\xf0\x9f\x98\x80\"}");
    TT_EQ_INT(param_type(e, last), SQL_WVARCHAR);
    forget();
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 2, ids), OBX_OK);
    e = first_exec();
    TT_EQ_INT(fake_log_param_count(e), 13);
    TT_EQ_STR(fake_log_param_text(e, 0, 7), "[null,null]"); /* ordering keys */
    TT_EQ_STR(fake_log_param_text(e, 0, 8), "[\"tenant-1\",null]");
    TT_EQ_STR(fake_log_param_text(e, 0, 10), "[\"o-42\",null]");
    TT_EQ_STR(fake_log_param_text(e, 0, 11),
              "[\"{\\\"traceparent\\\":\\\"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\\\","
              "\\\"q\\\\\\\"k\\\":\\\"a\\\\\\\\b\xf0\x9f\x98\x80\\\"}\",null]");
    TT_EXPECT(strstr(fake_log_sql(e), "JOIN OPENJSON(?) AS e4 ON e4.[key] = i.[key]") != NULL);
    /* A bad header is refused before any SQL. */
    forget();
    h[1].key = "traceparent";
    TT_EQ_INT(obx_enqueue(s, &m[0], ids[0]), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue: headers[1].key");
    TT_EQ_INT(fake_log_count(), 0);
    /* Read back by the claim procedure. */
    fake_push_rows(22, 1, rows);
    TT_EQ_INT(obx_claim(s, rows[13], 30, 50, &ms, &n), OBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_STR(ms[0].tenant_id, "tenant-1");
    TT_EQ_STR(ms[0].aggregate_type, "order");
    TT_EXPECT(ms[0].aggregate_id == NULL);
    TT_EQ_INT(ms[0].header_count, 2);
    TT_EQ_STR(obx_message_header(&ms[0], "traceparent"), "00-ab");
    TT_EQ_STR(obx_message_header(&ms[0], "q"), "\"\\\xf0\x9f\x98\x80\xc3\xa9");
    TT_EXPECT(obx_message_header(&ms[0], "Traceparent") == NULL);
    TT_EQ_INT(obx_message_header_at(&ms[0], 1, &key, &value), OBX_OK);
    TT_EQ_STR(key, "q");
    TT_EQ_INT(obx_message_header_at(&ms[0], 2, &key, &value), OBX_ERR_NOT_FOUND);
    obx_store_close(s);
}

static void test_settles(void) {
    obx_store *s = outbox();
    const char *ids[2] = {"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5C"};
    const char *owner = "0190a1b2-0000-7000-8000-000000000001";
    static const char *const two[] = {"2"}, *const one[] = {"1"};
    int64_t changed = -1;
    int e;
    TT_ASSERT(s != NULL);
    fake_push_rows(1, 1, two);
    TT_EQ_INT(obx_ack(s, owner, ids, 2, &changed), OBX_OK);
    TT_EQ_INT(changed, 2); /* the procedure's count, read from its row */
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "{CALL [dbo].[Outbox_Ack](?, ?, ?)}");
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "worker-1");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), owner);
    TT_EQ_STR(fake_log_param_text(e, 0, 3),
              "[\"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b\",\"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c\"]");
    TT_EQ_INT(param_type(e, 3), SQL_WVARCHAR);

    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(obx_abandon(s, owner, ids, 1, "timeout", -1, &changed), OBX_OK);
    TT_EQ_INT(changed, 1);
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "{CALL [dbo].[Outbox_Abandon](?, ?, ?, ?, ?)}");
    TT_EXPECT(fake_log_param(e, 0, 1).is_null); /* default backoff, in the procedure */
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "1");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "timeout");
    TT_EQ_STR(fake_log_param_text(e, 0, 4), owner);

    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(obx_abandon(s, owner, ids, 1, NULL, 2500, &changed), OBX_OK);
    e = first_exec();
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "2500");
    TT_EXPECT(fake_log_param(e, 0, 3).is_null);

    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(obx_fail(s, owner, ids, 1, "bad payload", &changed), OBX_OK);
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "{CALL [dbo].[Outbox_Fail](?, ?, ?)}");
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "bad payload");

    forget();
    fake_push_rows(1, 1, two);
    TT_EQ_INT(obx_reap(s, &changed), OBX_OK);
    TT_EQ_INT(changed, 2);
    TT_EQ_STR(fake_log_sql(first_exec()), "{CALL [dbo].[Outbox_ReapExpired](3)}");
    obx_store_close(s);
}

static void test_get_cleanup_stats(void) {
    obx_store *s = outbox();
    obx_message m;
    int64_t deleted = 0, ready = 0, oldest = 0;
    int e;
    static const char *const stats[] = {"7", "1500"};
    TT_ASSERT(s != NULL);
    fake_push_rows(22, 0, NULL);
    TT_EQ_INT(obx_get(s, "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B", &m), OBX_ERR_NOT_FOUND);
    e = first_exec();
    TT_EXPECT(strstr(fake_log_sql(e), "FROM [dbo].[Outbox] AS t WHERE t.[Id] = ?") != NULL);
    TT_EXPECT(strstr(fake_log_sql(e), "LOWER(CONVERT(NCHAR(36), t.[Id]))") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");

    forget();
    fake_push_ok(3);
    fake_push_ok(0);
    TT_EQ_INT(obx_cleanup(s, 3600000, 3, &deleted), OBX_OK);
    TT_EQ_INT(deleted, 3);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "WITH old AS (SELECT TOP (?) [Id] FROM [dbo].[Outbox] WHERE [Status] = 2", 70) == 0);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "3");       /* ?2 first: TOP (batch) */
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "3600000"); /* then the retention, twice */
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "3600000");
    TT_EQ_INT(fake_commits(), 2); /* each batch its own transaction */

    forget();
    fake_push_rows(2, 1, stats);
    TT_EQ_INT(obx_queue_stats(s, &ready, &oldest), OBX_OK);
    TT_EQ_INT(ready, 7);
    TT_EQ_INT(oldest, 1500);
    TT_EXPECT(strncmp(fake_log_sql(first_exec()), "SELECT COUNT_BIG(*), DATEDIFF_BIG(MILLISECOND", 45) == 0);
    obx_store_close(s);
}

static void test_joins(void) {
    obx_store *s = outbox();
    char join_id[37];
    const char *msg = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    int e;
    obx_join j;
    static const char *const row[] = {"0190a1b2-c3d4-7e5f-8a9b-00000000000a", "customer-7", "3", "1", "0", "0",
                                       NULL, "1767225600000", "1767225601000"};
    TT_ASSERT(s != NULL);
    TT_EQ_INT(obx_join_start(s, "customer-7", 3, NULL, join_id), OBX_OK);
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "INSERT INTO [dbo].[OutboxJoin] ([JoinId], [GroupingKey], [ExpectedSteps], [Metadata]) "
                               "VALUES (?, ?, ?, ?)");
    TT_EQ_STR(fake_log_param_text(e, 0, 1), join_id);
    TT_EQ_INT(param_type(e, 2), SQL_WVARCHAR);

    forget();
    {
        static const char *const status[] = {"1"};
        fake_push_rows(1, 1, status); /* the message, locked first: in progress */
    }
    fake_push_ok(1);
    TT_EQ_INT(obx_join_attach(s, join_id, msg), OBX_OK);
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "SELECT [Status] FROM [dbo].[Outbox] WITH (UPDLOCK, ROWLOCK) WHERE [Id] = ?");
    TT_EQ_STR(fake_log_param_text(e, 0, 1), msg);
    e = fake_log_find("INSERT INTO [dbo].[OutboxJoinMember]", e + 1);
    TT_ASSERT(e >= 0);
    /* Attach is idempotent without a duplicate-key error: the member row
     * is inserted only when missing, under a key-range lock. */
    TT_EXPECT(strstr(fake_log_sql(e), "NOT EXISTS (SELECT 1 FROM [dbo].[OutboxJoinMember] AS m WITH (UPDLOCK, HOLDLOCK)") != NULL);
    TT_EQ_INT(fake_log_param_count(e), 4);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), msg);
    TT_EQ_STR(fake_log_param_text(e, 0, 2), join_id);
    TT_EQ_STR(fake_log_param_text(e, 0, 3), join_id);
    TT_EQ_STR(fake_log_param_text(e, 0, 4), msg);

    forget();
    fake_push_rows(9, 1, row);
    TT_EQ_INT(obx_join_get(s, row[0], &j), OBX_OK);
    TT_EQ_INT(j.expected_steps, 3);
    TT_EQ_INT(j.completed_steps, 1);
    TT_EQ_STR(j.grouping_key, "customer-7");
    TT_EQ_INT(j.updated_ms, 1767225601000);
    TT_EXPECT(strstr(fake_log_sql(first_exec()), "DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), [CreatedUtc])") != NULL);
    obx_store_close(s);
}

/* ---- inbox operations ------------------------------------------------------------------- */

/* IBX-ENVELOPE through the fake layer: a message with an envelope takes the
 * MERGE that carries it (a known row keeps its own: COALESCE of the stored
 * value first); one without takes the plain MERGE, binding nothing more. */
static void test_inbox_envelope(void) {
    ibx_store *s = inbox();
    static const ibx_header h[] = {{"traceparent", "00-x"}, {"q\"k", "v\\"}};
    ibx_new_message m;
    int e;
    const char *q;
    TT_ASSERT(s != NULL);
    memset(&m, 0, sizeof m);
    m.topic = "payment.received";
    m.source = "stripe";
    m.message_id = "m-env";
    m.payload = "{}";
    m.payload_len = IBX_NTS;
    fake_push_ok(1);
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    q = fake_log_sql(first_exec());
    TT_EXPECT(strstr(q, "[TenantId]") == NULL && strstr(q, "[Headers]") == NULL);
    TT_EQ_INT(count_char(q, '?'), 9);

    forget();
    m.tenant_id = "acme";
    m.aggregate_type = "Payment";
    m.aggregate_id = "p-1";
    m.headers = h;
    m.header_count = 2;
    fake_push_ok(1);
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    e = first_exec();
    q = fake_log_sql(e);
    TT_EXPECT(strncmp(q, "MERGE [infra].[Inbox] WITH (HOLDLOCK) AS t", 42) == 0);
    TT_EXPECT(strstr(q, "[TenantId] = COALESCE(t.[TenantId], s.[TenantId])") != NULL);
    TT_EXPECT(strstr(q, "[Headers] = COALESCE(t.[Headers], s.[Headers])") != NULL);
    TT_EXPECT(strstr(q, "WHEN MATCHED AND t.[Status] <> 'Done' THEN UPDATE") != NULL);
    TT_EQ_INT(count_char(q, '?'), 16); /* and the expiry, twice (NULL: never), and the priority */
    TT_EXPECT(fake_log_param(e, 0, 14).is_null && fake_log_param(e, 0, 15).is_null);
    TT_EXPECT(strstr(q, "[ExpiresAt] = COALESCE(t.[ExpiresAt], s.[ExpiresAt])") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 10), "acme");
    TT_EQ_STR(fake_log_param_text(e, 0, 11), "Payment");
    TT_EQ_STR(fake_log_param_text(e, 0, 12), "p-1");
    TT_EQ_STR(fake_log_param_text(e, 0, 13), "{\"traceparent\":\"00-x\",\"q\\\"k\":\"v\\\\\"}");
    TT_EQ_INT(param_type(e, 13), SQL_WVARCHAR);
    ibx_store_close(s);
}

static void test_inbox_dedup_enqueue(void) {
    ibx_store *s = inbox();
    static const char *const seen[] = {"Seen", NULL}, *const done[] = {"Done", NULL};
    ibx_new_message m;
    int processed = -1, enqueued = -1, e;
    const char *q;
    TT_ASSERT(s != NULL);
    fake_push_rows(2, 1, seen);
    TT_EQ_INT(ibx_already_processed(s, "m-1", "stripe", "\x01\x02", 2, &processed), IBX_OK);
    TT_EQ_INT(processed, 0);
    e = first_exec();
    q = fake_log_sql(e);
    /* One atomic statement; HOLDLOCK makes two first sightings wait, not collide. */
    TT_EXPECT(strncmp(q, "MERGE [infra].[Inbox] WITH (HOLDLOCK) AS t USING (SELECT ? AS [Source], ? AS [MessageId], "
                         "? AS [Hash]) AS s", 100) == 0);
    TT_EXPECT(strstr(q, "OUTPUT inserted.[Status], inserted.[Hash];") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "stripe");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "m-1");
    TT_EQ_INT(param_type(e, 1), SQL_WVARCHAR);
    TT_EQ_INT(fake_log_param(e, 0, 3).c_type, SQL_C_BINARY);
    TT_EQ_INT(param_type(e, 3), SQL_VARBINARY);
    TT_EQ_INT(fake_log_param(e, 0, 3).column_size, 8000);

    forget();
    fake_push_rows(2, 1, done);
    TT_EQ_INT(ibx_already_processed(s, "m-1", "stripe", NULL, 0, &processed), IBX_OK);
    TT_EQ_INT(processed, 1);

    forget();
    memset(&m, 0, sizeof m);
    m.topic = "payment.received";
    m.source = "stripe";
    m.message_id = "m-2";
    m.payload = "{}";
    m.payload_len = IBX_NTS;
    m.due_utc_ms = 1767225600000;
    fake_push_ok(1); /* MERGE: inserted or updated rows */
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 1);
    e = first_exec();
    q = fake_log_sql(e);
    TT_EXPECT(strncmp(q, "MERGE [infra].[Inbox] WITH (HOLDLOCK) AS t", 42) == 0);
    TT_EXPECT(strstr(q, "WHEN MATCHED AND t.[Status] <> 'Done' THEN UPDATE") != NULL);
    TT_EQ_INT(count_char(q, '?'), 9);
    TT_EQ_STR(fake_log_param_text(e, 0, 6), "1767225600000");
    TT_EQ_STR(fake_log_param_text(e, 0, 7), "1767225600000");
    TT_EQ_STR(fake_log_param_text(e, 0, 8), fake_log_param_text(e, 0, 9));

    forget();
    fake_push_ok(0); /* a Done message is left alone */
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 0);

    forget();
    fake_push_ok(1);
    TT_EQ_INT(ibx_mark_processed(s, "m-2", "stripe"), IBX_OK);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "UPDATE [infra].[Inbox] SET [Status] = CASE WHEN [Status] = 'Done'", 64) == 0);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "Done");
    TT_EQ_STR(fake_log_param_text(e, 0, 5), "stripe");
    TT_EQ_STR(fake_log_param_text(e, 0, 6), "m-2");
    ibx_store_close(s);
}

static void test_inbox_work_queue(void) {
    ibx_store *s = inbox();
    const char *owner = "0190a1b2-0000-7000-8000-000000000001";
    static const char *const rows[] = {"stripe", "m-1", "payment.received", "{}", NULL, "1767225600000",
                                       "1767225600000", "Processing", "1767225630000",
                                       "0190a1b2-0000-7000-8000-000000000001", "0", NULL, "1767225600000", NULL, "1",
                                       "acme", "Order", "o-1", "{\"traceparent\": \"00-x\"}", "1767225700000"};
    static const char *const one[] = {"1"};
    const ibx_message *ms = NULL;
    ibx_key keys[1];
    int n = 0, e;
    int64_t changed = 0;
    TT_ASSERT(s != NULL);
    fake_push_rows(20, 1, rows);
    TT_EQ_INT(ibx_claim(s, owner, 30, 10, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_INT(ms[0].expires_ms, 1767225700000); /* CORE-EXPIRY: the last column */
    /* The envelope's columns come last (IBX-ENVELOPE), the headers decoded. */
    TT_EQ_STR(ms[0].tenant_id, "acme");
    TT_EQ_STR(ms[0].aggregate_id, "o-1");
    TT_EQ_STR(ibx_message_header(&ms[0], "traceparent"), "00-x");
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "{CALL [infra].[Inbox_Claim](?, ?, ?, 3)}");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "10");
    TT_EQ_STR(ms[0].source, "stripe");
    TT_EQ_STR(ms[0].message_id, "m-1");
    TT_EQ_INT(ms[0].status, IBX_STATUS_PROCESSING);
    TT_EQ_INT(ms[0].locked_until_ms, 1767225630000);
    TT_EQ_STR(ms[0].owner_token, owner);

    keys[0].source = "stripe";
    keys[0].message_id = "m-1";
    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(ibx_ack(s, owner, keys, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    e = first_exec();
    TT_EQ_STR(fake_log_sql(e), "{CALL [infra].[Inbox_Ack](?, ?, ?)}");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "[\"stripe\"]");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "[\"m-1\"]");

    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(ibx_abandon(s, owner, keys, 1, "retry", IBX_DELAY_BACKOFF, &changed), IBX_OK);
    TT_EQ_STR(fake_log_sql(first_exec()), "{CALL [infra].[Inbox_Abandon](?, ?, ?, ?, ?, ?)}");

    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(ibx_fail(s, owner, keys, 1, "poison", &changed), IBX_OK);
    TT_EQ_STR(fake_log_sql(first_exec()), "{CALL [infra].[Inbox_Fail](?, ?, ?, ?)}");

    forget();
    fake_push_rows(1, 1, one);
    TT_EQ_INT(ibx_reap(s, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_STR(fake_log_sql(first_exec()), "{CALL [infra].[Inbox_ReapExpired](3)}");
    ibx_store_close(s);
}

static void test_inbox_trailing_space(void) {
    /* SQL Server compares "m1 " equal to "m1" in every collation: such a
     * key would be deduplicated against another message, so it is refused
     * before any SQL runs, naming the argument. */
    ibx_store *s = inbox();
    ibx_new_message m;
    int processed = 0;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_already_processed(s, "m1 ", "stripe", NULL, 0, &processed), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_already_processed: message_id");
    TT_EXPECT(strstr(ibx_store_last_error(s)->message, "ends with a space") != NULL);
    TT_EQ_INT(ibx_already_processed(s, "m1", "stripe ", NULL, 0, &processed), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_already_processed: source");
    memset(&m, 0, sizeof m);
    m.topic = "t ";  /* topics are matched by the library: a space is fine */
    m.source = "stripe";
    m.message_id = "m2 ";
    m.payload = "{}";
    m.payload_len = IBX_NTS;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: message_id");
    TT_EQ_INT(ibx_mark_processed(s, "m1 ", "stripe"), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(fake_calls("SQLExecute"), 0);
    m.message_id = " m2"; /* a leading space compares exactly */
    fake_push_ok(1);
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    ibx_store_close(s);
}

/* ---- SQL Server's error numbers ---------------------------------------------------------- */

static void test_errors(void) {
    static const char *const one[] = {"1"};
    const char *ids[1] = {"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"};
    const char *owner = "0190a1b2-0000-7000-8000-000000000001";
    obx_store *s;
    obx_new_message m;
    int64_t changed = 0;
    TT_EQ_INT(fake_open_handles(), 0);
    s = outbox();
    TT_ASSERT(s != NULL);
    /* Deadlock victim 1205 (40001 from msodbcsql, 42000 from FreeTDS) and
     * lock timeout 1222 (HYT00): rolled back and redone at once. */
    fake_push_error(SQL_ERROR, "40001", 1205, "Transaction (Process ID 61) was deadlocked");
    fake_push_error(SQL_ERROR, "42000", 1205, "Transaction was deadlocked (FreeTDS)");
    fake_push_error(SQL_ERROR, "HYT00", 1222, "Lock request time out period exceeded.");
    fake_push_rows(1, 1, one);
    TT_EQ_INT(obx_ack(s, owner, ids, 1, &changed), OBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(fake_rollbacks(), 3);
    TT_EQ_INT(fake_calls("SQLExecute"), 4);
    /* A duplicate key (2627 primary key, 2601 unique index) is permanent. */
    memset(&m, 0, sizeof m);
    m.topic = "t";
    m.payload = "p";
    m.payload_len = OBX_NTS;
    forget();
    fake_push_error(SQL_ERROR, "23000", 2627, "Violation of PRIMARY KEY constraint");
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_ERR_DB);
    TT_EQ_INT(obx_store_last_error(s)->native, 2627);
    TT_EQ_STR(obx_store_last_error(s)->sqlstate, "23000");
    TT_EQ_INT(fake_calls("SQLExecute"), 1);
    forget();
    fake_push_error(SQL_ERROR, "23000", 2601, "Cannot insert duplicate key row");
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_ERR_DB);
    /* A query timeout (HYT00, native 0) is transient but not redone. */
    forget();
    fake_push_error(SQL_ERROR, "HYT00", 0, "Query timeout expired");
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(fake_calls("SQLExecute"), 1);
    /* A reset connection (10054) is lost: reported, reconnected next call. */
    forget();
    fake_push_error(SQL_ERROR, "08S01", 10054, "TCP Provider: Connection reset by peer");
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_ERR_DB_TRANSIENT);
    TT_EXPECT(obx_store_last_error(s)->connection_lost);
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_OK);
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 1);
    TT_EXPECT(fake_log_find("SET XACT_ABORT ON", 0) >= 0); /* the new session is set up again */
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* ---- T-SQL for a parser ------------------------------------------------------------------- */

/* Markers become @p1.., "{CALL x(?, ?)}" becomes "EXEC x @p1, @p2". */
static void put_tsql(FILE *f, const char *sql) {
    int k = 0;
    int call = strncmp(sql, "{CALL ", 6) == 0;
    const char *p = call ? sql + 6 : sql;
    if (call) fputs("EXEC ", f);
    for (; *p; p++) {
        if (*p == '?') {
            fprintf(f, "@p%d", ++k);
            while (p[1] >= '0' && p[1] <= '9') p++;
        } else if (call && *p == '(' ) {
            fputc(' ', f);
        } else if (call && (*p == ')' || *p == '}')) {
            continue;
        } else {
            fputc(*p, f);
        }
    }
    fputs("\nGO\n", f);
}

static int dump_tsql(const char *path) {
    static char ddl[1 << 17];
    FILE *f = fopen(path, "w");
    obx_store *o;
    ibx_store *in;
    int i;
    if (!f) return 1;
    if (obx_schema_sql(OBX_DIALECT_SQLSERVER, NULL, NULL, ddl, sizeof ddl, NULL) != OBX_OK) return 1;
    fputs(ddl, f);
    if (ibx_schema_sql(IBX_DIALECT_SQLSERVER, NULL, NULL, ddl, sizeof ddl, NULL) != IBX_OK) return 1;
    fputs(ddl, f);
    o = outbox();
    in = inbox();
    if (!o || !in) return 1;
    for (i = 0; i < OBX__Q_COUNT; i++)
        if (o->sql[i]) put_tsql(f, o->sql[i]);
    for (i = 0; i < IBX__Q_COUNT; i++)
        if (in->sql[i]) put_tsql(f, in->sql[i]);
    obx_store_close(o);
    ibx_store_close(in);
    return fclose(f) == 0 ? 0 : 1;
}


/* Dead letters: one statement each, the filter's NULLs bound as NULL,
 * paged with OFFSET ... FETCH; the inbox's by (source, message id). */
static void test_dead_letters(void) {
    obx_store *s = outbox();
    ibx_store *in = NULL;
    obx_dead_filter f;
    ibx_dead_filter g;
    const obx_message *ms = NULL;
    const ibx_message *ims = NULL;
    int n = 0, e;
    int64_t changed = -1;
    static const char *const rows[] = {
        "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", "dl.a",
        "{}", NULL, "1767225600000", NULL, "3", "timeout 503", "3", NULL, NULL, NULL, NULL, "1767225600500", "3", NULL,
        NULL, NULL, NULL, NULL, NULL};
    TT_ASSERT(s != NULL);
    memset(&f, 0, sizeof f);
    f.topic = "dl.a";
    f.error_contains = "timeout";
    fake_push_rows(22, 1, rows);
    TT_EQ_INT(obx_dead_list(s, &f, 5, 10, &ms, &n), OBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_STR(ms[0].last_error, "timeout 503");
    TT_EQ_INT(ms[0].status, OBX_STATUS_FAILED);
    e = first_exec();
    TT_EXPECT(strstr(fake_log_sql(e), "FROM [dbo].[Outbox] AS t WHERE t.[Status] = 3 AND") != NULL);
    TT_EXPECT(strstr(fake_log_sql(e), "CHARINDEX(?, COALESCE(t.[LastError], N'')) > 0") != NULL);
    TT_EXPECT(strstr(fake_log_sql(e), "ORDER BY t.[CreatedAt], t.[Id] OFFSET ? ROWS FETCH NEXT ? ROWS ONLY") != NULL);
    TT_EQ_INT(fake_log_param_count(e), 12);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "dl.a");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "timeout");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "timeout");
    TT_EXPECT(fake_log_param(e, 0, 4).is_null);  /* no time bounds */
    TT_EXPECT(fake_log_param(e, 0, 7).is_null);
    TT_EXPECT(fake_log_param(e, 0, 10).is_null); /* no id */
    TT_EQ_STR(fake_log_param_text(e, 0, 11), "5");  /* OFFSET */
    TT_EQ_STR(fake_log_param_text(e, 0, 12), "10"); /* FETCH NEXT */

    forget();
    memset(&f, 0, sizeof f);
    f.id = "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B";
    fake_push_ok(1);
    TT_EQ_INT(obx_dead_replay(s, &f, &changed), OBX_OK);
    TT_EQ_INT(changed, 1);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "UPDATE t SET [Status] = 0, [RetryCount] = 0, [Starts] = 0, [NextAttemptAt] = SYSDATETIMEOFFSET()", sizeof "UPDATE t SET [Status] = 0, [RetryCount] = 0, [Starts] = 0, [NextAttemptAt] = SYSDATETIMEOFFSET()" - 1) == 0);
    TT_EQ_STR(fake_log_param_text(e, 0, 10), "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    TT_EQ_INT(fake_commits(), 1);

    forget();
    fake_push_ok(2);
    TT_EQ_INT(obx_dead_purge(s, NULL, &changed), OBX_OK);
    TT_EQ_INT(changed, 2);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "WITH d AS (SELECT TOP (?) t.[Id] FROM [dbo].[Outbox] AS t WHERE t.[Status] = 3", sizeof "WITH d AS (SELECT TOP (?) t.[Id] FROM [dbo].[Outbox] AS t WHERE t.[Status] = 3" - 1) == 0);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "1000");
    TT_EQ_INT(fake_commits(), 1); /* fewer than a batch: done */
    /* The operator's actions on one message (no parking on SQL Server). */
    forget();
    fake_push_ok(1);
    TT_EQ_INT(obx_dead_move(s, "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B", "cancelled", 0, &changed), OBX_OK);
    TT_EQ_INT(changed, 1);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "UPDATE t SET [Status] = 3, [LastError] = ?", 42) == 0);
    TT_EXPECT(strstr(fake_log_sql(e), "(t.[Status] = 0 OR (t.[Status] = 1 AND ? = 1))") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "cancelled");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "0");
    forget();
    fake_push_ok(1);
    TT_EQ_INT(obx_run_now(s, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", &changed), OBX_OK);
    TT_EQ_INT(changed, 1);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "UPDATE t SET [NextAttemptAt] = SYSDATETIMEOFFSET()", 50) == 0);
    TT_EXPECT(strstr(fake_log_sql(e), "t.[NextAttemptAt] > SYSDATETIMEOFFSET()") != NULL);
    obx_store_close(s);

    in = inbox();
    TT_ASSERT(in != NULL);
    memset(&g, 0, sizeof g);
    g.source = "stripe";
    fake_push_rows(20, 0, NULL);
    TT_EQ_INT(ibx_dead_list(in, &g, 0, 20, &ims, &n), IBX_EMPTY);
    e = first_exec();
    TT_EXPECT(strstr(fake_log_sql(e), "WHERE t.[Status] = 'Dead' AND") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 10), "stripe");
    TT_EXPECT(fake_log_param(e, 0, 11).is_null);
    forget();
    fake_push_ok(4);
    TT_EQ_INT(ibx_dead_replay(in, &g, &changed), IBX_OK);
    TT_EQ_INT(changed, 4);
    TT_EXPECT(strncmp(fake_log_sql(first_exec()), "UPDATE t SET [Status] = 'Processing', [Attempt] = 0", 51) == 0);
    /* The operator's actions on one message: its key, then the reason or flag. */
    forget();
    fake_push_ok(1);
    TT_EQ_INT(ibx_dead_move(in, "evt_1", "stripe", "cancelled", 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "UPDATE t SET [Status] = 'Dead', [LastError] = ?", 47) == 0);
    TT_EXPECT(strstr(fake_log_sql(e), "t.[Status] = 'Processing' AND (t.[LockedUntil] IS NULL OR ? = 1)") != NULL);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "cancelled");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "stripe");
    TT_EQ_STR(fake_log_param_text(e, 0, 3), "evt_1");
    TT_EQ_STR(fake_log_param_text(e, 0, 4), "1");
    forget();
    fake_push_ok(0);
    TT_EQ_INT(ibx_run_now(in, "evt_1", "stripe", &changed), IBX_OK);
    TT_EQ_INT(changed, 0);
    TT_EXPECT(strncmp(fake_log_sql(first_exec()), "UPDATE t SET [NextAttemptAt] = SYSUTCDATETIME()", 47) == 0);
    ibx_store_close(in);
}


/* Join cancel: the join's finish statement with Cancelled (3), one transaction. */
static void test_join_cancel(void) {
    obx_store *s = outbox();
    int e;
    TT_ASSERT(s != NULL);
    fake_push_ok(1);
    TT_EQ_INT(obx_join_cancel(s, "0190A1B2-C3D4-7E5F-8A9B-00000000000A"), OBX_OK);
    e = first_exec();
    TT_EXPECT(strncmp(fake_log_sql(e), "UPDATE [dbo].[OutboxJoin] SET [Status] = ?", 42) == 0);
    TT_EQ_STR(fake_log_param_text(e, 0, 1), "3");
    TT_EQ_STR(fake_log_param_text(e, 0, 2), "0190a1b2-c3d4-7e5f-8a9b-00000000000a");
    TT_EQ_INT(fake_commits(), 1);
    obx_store_close(s);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--tsql") == 0) return dump_tsql(argv[2]);
    RUN("MSSQL-SCHEMA-FILES", "sql/sqlserver/{outbox,inbox}.sql are what deploy runs: the seed's tables, filtered indexes, procedures, GO batches", test_schema_files);
    RUN("OBX-089", "join counters move in triggers inside the Ack/Fail statement, capped at ExpectedSteps", test_089_join_triggers);
    RUN("CORE-CRASH-LOOP", "claim procedures count starts (the inbox's takes none at max_starts), reap procedures end them Dead", test_crash_loop);
    RUN("CORE-SCHEMA-UPGRADE", "deploy adds columns new since the first release to an old table: one self-testing batch each, after its CREATE TABLE", test_schema_upgrade);
    RUN("CORE-EXPIRY", "expires_utc_ms: the extended statement binds it twice as ms, a batch as a twelfth array; validation before SQL", test_expiry);
    RUN("OBX-ENVELOPE", "tenant, aggregate and headers: bound after the ordering key in the extended statement, four more batch arrays, claimed rows decoded", test_envelope);
    RUN("MSSQL-DEPLOY", "deploy runs one batch per execute under sp_getapplock, in one transaction", test_deploy);
    RUN("MSSQL-SESSION", "detected from SQL_DBMS_NAME; XACT_ABORT ON, NOCOUNT OFF on our connections", test_session);
    RUN("OBX-001", "enqueue: one INSERT, text as NVARCHAR (NVARCHAR(MAX) over 4000 bytes), times as ms", test_enqueue);
    RUN("OBX-097", "a batch enqueue is one INSERT ... SELECT FROM OPENJSON, one transaction", test_enqueue_batch);
    RUN("OBX-017", "claim is the Outbox_Claim procedure (UPDLOCK, READPAST, ROWLOCK); rows read back", test_017_claim);
    RUN("OBX-030", "ack, abandon, fail, reap call the seed's procedures; counts come back as a row", test_settles);
    RUN("MSSQL-OUTBOX-READS", "get, cleanup (TOP, oldest first, batch per transaction), queue stats", test_get_cleanup_stats);
    RUN("OBX-083", "join start, attach (idempotent, no duplicate-key error), get", test_joins);
    RUN("IBX-002", "dedup and enqueue are MERGE WITH (HOLDLOCK); a Done message is left alone", test_inbox_dedup_enqueue);
    RUN("IBX-ENVELOPE", "an envelope takes the MERGE that carries it (COALESCE keeps a known row's), four more parameters; none, the plain MERGE", test_inbox_envelope);
    RUN("IBX-030", "inbox claim, ack, abandon, fail, reap call the seed's procedures", test_inbox_work_queue);
    RUN("MSSQL-KEY-SPACES", "inbox keys ending in a space are refused (SQL Server would pad them)", test_inbox_trailing_space);
    RUN("MSSQL-DEAD-LETTERS", "dead letters: list (OFFSET/FETCH, NULL filters), replay, purge (TOP batches); the inbox's by source", test_dead_letters);
    RUN("OBX-JOIN-CANCEL", "join cancel is the join's finish statement with Cancelled", test_join_cancel);
    RUN("MSSQL-ERRORS", "1205 and 1222 are redone; 2627/2601 permanent; HYT00 timeout; 10054 lost", test_errors);
    return tt_done();
}
