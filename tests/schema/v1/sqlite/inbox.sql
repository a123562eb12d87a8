-- Frozen: sql/sqlite/inbox.sql as release 36c7606 deployed it (storage layout 1, with Priority); the upgrade tests (CORE-SCHEMA-UPGRADE-V1) create old tables from it.
CREATE TABLE IF NOT EXISTS "Inbox" (
    Source        TEXT NOT NULL,
    MessageId     TEXT NOT NULL,
    Topic         TEXT NOT NULL DEFAULT '',
    Payload       TEXT NOT NULL DEFAULT '',
    Hash          BLOB NULL,
    FirstSeenUtc  INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    LastSeenUtc   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    Status        TEXT NOT NULL DEFAULT 'Seen',
    LockedUntil   INTEGER NULL,
    OwnerToken    TEXT NULL,
    Attempt       INTEGER NOT NULL DEFAULT 0,
    LastError     TEXT NULL,
    NextAttemptAt INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    DueTimeUtc    INTEGER NULL,
    "Starts"        INTEGER NOT NULL DEFAULT 0,
    "TenantId"      TEXT NULL,
    "AggregateType" TEXT NULL,
    "AggregateId"   TEXT NULL,
    "Headers"       TEXT NULL,
    "ExpiresAt"     INTEGER NULL,
    "Priority"      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (Source, MessageId)
);
CREATE INDEX IF NOT EXISTS "IX_Inbox_WorkQueue" ON "Inbox" (NextAttemptAt) WHERE Status = 'Processing';
CREATE INDEX IF NOT EXISTS "IX_Inbox_Claim" ON "Inbox" (NextAttemptAt - Priority * 10000) WHERE Status = 'Processing' AND Starts >= 0;
CREATE INDEX IF NOT EXISTS "IX_Inbox_Leased" ON "Inbox" (LockedUntil) WHERE Status = 'Processing' AND LockedUntil IS NOT NULL;
CREATE INDEX IF NOT EXISTS "IX_Inbox_Cleanup" ON "Inbox" (LastSeenUtc) WHERE Status = 'Done';
