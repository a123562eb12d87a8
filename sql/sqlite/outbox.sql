CREATE TABLE IF NOT EXISTS "Outbox" (
    Id            TEXT NOT NULL PRIMARY KEY,
    Status        INTEGER NOT NULL DEFAULT 0,
    NextAttemptAt INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    LockedUntil   INTEGER NULL,
    IsProcessed   INTEGER NOT NULL DEFAULT 0,
    ProcessedAt   INTEGER NULL,
    RetryCount    INTEGER NOT NULL DEFAULT 0,
    Starts        INTEGER NOT NULL DEFAULT 0,
    Priority      INTEGER NOT NULL DEFAULT 0,
    CreatedAt     INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    OwnerToken    TEXT NULL,
    MessageId     TEXT NOT NULL,
    Topic         TEXT NOT NULL,
    Payload       TEXT NOT NULL,
    ProcessedBy   TEXT NULL,
    LastError     TEXT NULL,
    CorrelationId TEXT NULL,
    DueTimeUtc    INTEGER NULL,
    "OrderingKey"   TEXT NULL,
    "OrderingSeq"   INTEGER NULL,
    "TenantId"      TEXT NULL,
    "AggregateType" TEXT NULL,
    "AggregateId"   TEXT NULL,
    "Headers"       TEXT NULL,
    "ExpiresAt"     INTEGER NULL
);
CREATE INDEX IF NOT EXISTS "IX_Outbox_Ready" ON "Outbox" (NextAttemptAt) WHERE Status = 0;
CREATE INDEX IF NOT EXISTS "IX_Outbox_Claim" ON "Outbox" (NextAttemptAt - Priority * 10000) WHERE Status = 0 AND IsProcessed = 0;
CREATE INDEX IF NOT EXISTS "IX_Outbox_Ordering" ON "Outbox" (OrderingKey, Status, OrderingSeq) WHERE OrderingKey IS NOT NULL AND Status <> 2;
CREATE INDEX IF NOT EXISTS "IX_Outbox_Leased" ON "Outbox" (LockedUntil) WHERE Status = 1;
CREATE INDEX IF NOT EXISTS "IX_Outbox_Done" ON "Outbox" (ProcessedAt) WHERE Status = 2;
CREATE TABLE IF NOT EXISTS "OutboxJoin" (
    JoinId         TEXT NOT NULL PRIMARY KEY,
    GroupingKey    TEXT NULL,
    ExpectedSteps  INTEGER NOT NULL,
    CompletedSteps INTEGER NOT NULL DEFAULT 0,
    FailedSteps    INTEGER NOT NULL DEFAULT 0,
    Status         INTEGER NOT NULL DEFAULT 0,
    CreatedUtc     INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    LastUpdatedUtc INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    Metadata       TEXT NULL
);
CREATE INDEX IF NOT EXISTS "IX_OutboxJoin_GroupingKey" ON "OutboxJoin" (GroupingKey) WHERE GroupingKey IS NOT NULL;
CREATE TABLE IF NOT EXISTS "OutboxJoinMember" (
    JoinId          TEXT NOT NULL REFERENCES "OutboxJoin" (JoinId) ON DELETE CASCADE,
    OutboxMessageId TEXT NOT NULL,
    Status          INTEGER NOT NULL DEFAULT 0,
    CreatedUtc      INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    PRIMARY KEY (JoinId, OutboxMessageId)
);
CREATE INDEX IF NOT EXISTS "IX_OutboxJoinMember_Message" ON "OutboxJoinMember" (OutboxMessageId);
CREATE TRIGGER IF NOT EXISTS "Outbox_JoinStep2" AFTER UPDATE OF Status ON "Outbox"
WHEN NEW.Status IN (2, 3) AND OLD.Status <> NEW.Status
    AND EXISTS (SELECT 1 FROM "OutboxJoinMember" WHERE OutboxMessageId = NEW.Id AND Status = 0)
BEGIN
    UPDATE "OutboxJoinMember" SET Status = CASE NEW.Status WHEN 2 THEN 1 ELSE 2 END
     WHERE OutboxMessageId = NEW.Id AND Status = 0;
END;
DROP TRIGGER IF EXISTS "Outbox_JoinStep";
CREATE TRIGGER IF NOT EXISTS "Outbox_JoinCount" AFTER UPDATE OF Status ON "OutboxJoinMember"
WHEN OLD.Status = 0 AND NEW.Status IN (1, 2)
BEGIN
    UPDATE "OutboxJoin" SET
        CompletedSteps = CompletedSteps + (NEW.Status = 1 AND CompletedSteps + FailedSteps < ExpectedSteps),
        FailedSteps = FailedSteps + (NEW.Status = 2 AND CompletedSteps + FailedSteps < ExpectedSteps),
        LastUpdatedUtc = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
     WHERE JoinId = NEW.JoinId;
END;
CREATE TRIGGER IF NOT EXISTS "Outbox_OrderingWake2" AFTER UPDATE OF Status ON "Outbox"
WHEN NEW.OrderingKey IS NOT NULL AND OLD.Status IN (0, 1) AND NEW.Status IN (2, 3)
    AND NOT EXISTS (SELECT 1 FROM "Outbox" AS o WHERE o."OrderingKey" = NEW.OrderingKey AND o."Status" <> 2 AND o."Status" = 1)
BEGIN
    UPDATE "Outbox" SET "NextAttemptAt" = coalesce("DueTimeUtc", "CreatedAt") WHERE "NextAttemptAt" = 253402300800000 AND "Id" = (SELECT o."Id" FROM "Outbox" AS o WHERE o."OrderingKey" = NEW.OrderingKey AND o."Status" <> 2 AND o."Status" = 0 ORDER BY o."OrderingSeq", o."Id" LIMIT 1);
END;
DROP TRIGGER IF EXISTS "Outbox_OrderingWake";
