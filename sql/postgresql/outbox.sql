SELECT pg_advisory_xact_lock(hashtext('obx deploy "dbo"."Outbox"'));
CREATE SCHEMA IF NOT EXISTS "dbo";
CREATE TABLE IF NOT EXISTS "dbo"."Outbox" (
    "Id"            uuid NOT NULL PRIMARY KEY,
    "NextAttemptAt" timestamptz NOT NULL DEFAULT now(),
    "LockedUntil"   timestamptz NULL,
    "ProcessedAt"   timestamptz NULL,
    "CreatedAt"     timestamptz NOT NULL DEFAULT now(),
    "OwnerToken"    uuid NULL,
    "MessageId"     uuid NOT NULL,
    "RetryCount"    integer NOT NULL DEFAULT 0,
    "Starts"        integer NOT NULL DEFAULT 0,
    "Status"        smallint NOT NULL DEFAULT 0,
    "Priority"      smallint NOT NULL DEFAULT 0,
    "IsProcessed"   boolean NOT NULL DEFAULT false,
    "Topic"         varchar(255) NOT NULL,
    "Payload"       text NOT NULL,
    "ProcessedBy"   varchar(100) NULL,
    "LastError"     text NULL,
    "CorrelationId" varchar(255) NULL,
    "DueTimeUtc"    timestamptz NULL,
    "OrderingKey"   varchar(255) NULL,
    "OrderingSeq"   bigint NULL,
    "TenantId"      varchar(64) NULL,
    "AggregateType" varchar(64) NULL,
    "AggregateId"   varchar(128) NULL,
    "Headers"       json NULL,
    "ExpiresAt"     timestamptz NULL
);
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "Starts" integer NOT NULL DEFAULT 0;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "OrderingKey" varchar(255) NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "OrderingSeq" bigint NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "TenantId" varchar(64) NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "AggregateType" varchar(64) NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "AggregateId" varchar(128) NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "Headers" json NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "ExpiresAt" timestamptz NULL;
ALTER TABLE "dbo"."Outbox" ADD COLUMN IF NOT EXISTS "Priority" smallint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS "IX_Outbox_Claim" ON "dbo"."Outbox" ((("NextAttemptAt" AT TIME ZONE 'UTC') - "Priority" * interval '10 seconds')) WHERE "Status" = 0 AND NOT "IsProcessed";
CREATE INDEX IF NOT EXISTS "IX_Outbox_OrderingId" ON "dbo"."Outbox" ("OrderingKey", "Status", "OrderingSeq", "Id") WHERE "OrderingKey" IS NOT NULL AND "Status" <> 2;
DROP INDEX IF EXISTS "dbo"."IX_Outbox_Ordering";
CREATE INDEX IF NOT EXISTS "IX_Outbox_Leased" ON "dbo"."Outbox" ("LockedUntil") WHERE "Status" = 1;
CREATE INDEX IF NOT EXISTS "IX_Outbox_Done" ON "dbo"."Outbox" ("ProcessedAt") WHERE "Status" = 2;
CREATE TABLE IF NOT EXISTS "dbo"."OutboxJoin" (
    "JoinId"         uuid NOT NULL PRIMARY KEY,
    "GroupingKey"    varchar(255) NULL,
    "ExpectedSteps"  integer NOT NULL,
    "CompletedSteps" integer NOT NULL DEFAULT 0,
    "FailedSteps"    integer NOT NULL DEFAULT 0,
    "Status"         smallint NOT NULL DEFAULT 0,
    "CreatedUtc"     timestamptz NOT NULL DEFAULT now(),
    "LastUpdatedUtc" timestamptz NOT NULL DEFAULT now(),
    "Metadata"       text NULL
);
CREATE INDEX IF NOT EXISTS "IX_OutboxJoin_GroupingKey" ON "dbo"."OutboxJoin" ("GroupingKey") WHERE "GroupingKey" IS NOT NULL;
CREATE TABLE IF NOT EXISTS "dbo"."OutboxJoinMember" (
    "JoinId"          uuid NOT NULL REFERENCES "dbo"."OutboxJoin" ("JoinId") ON DELETE CASCADE,
    "OutboxMessageId" uuid NOT NULL,
    "Status"          smallint NOT NULL DEFAULT 0,
    "CreatedUtc"      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY ("JoinId", "OutboxMessageId")
);
CREATE INDEX IF NOT EXISTS "IX_OutboxJoinMember_Message" ON "dbo"."OutboxJoinMember" ("OutboxMessageId");
CREATE INDEX IF NOT EXISTS "IX_OutboxJoinMember_Pending" ON "dbo"."OutboxJoinMember" ("OutboxMessageId") WHERE "Status" = 0;
CREATE OR REPLACE FUNCTION "dbo"."Outbox_JoinStep"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM "dbo"."OutboxJoinMember" WHERE "Status" = 0) THEN RETURN NULL; END IF;
    UPDATE "dbo"."OutboxJoinMember" AS m SET "Status" = CASE n."Status" WHEN 2 THEN 1 ELSE 2 END
      FROM new_rows AS n JOIN old_rows AS o ON o."Id" = n."Id"
     WHERE n."Status" IN (2, 3) AND o."Status" <> n."Status"
       AND m."OutboxMessageId" = n."Id" AND m."Status" = 0;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER "Outbox_JoinStep" AFTER UPDATE ON "dbo"."Outbox"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION "dbo"."Outbox_JoinStep"();
CREATE OR REPLACE FUNCTION "dbo"."Outbox_OrderingWake"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE "OrderingKey" IS NOT NULL AND "Status" IN (2, 3)) THEN
        RETURN NULL;
    END IF;
    UPDATE "dbo"."Outbox" SET "NextAttemptAt" = coalesce("DueTimeUtc", "CreatedAt") WHERE "NextAttemptAt" = CAST('10000-01-01 00:00:00+00' AS timestamptz) AND "Id" = ANY (ARRAY(SELECT (SELECT o."Id" FROM "dbo"."Outbox" AS o WHERE o."OrderingKey" = pk.k AND o."Status" <> 2 AND o."Status" = 0 ORDER BY o."OrderingSeq", o."Id" LIMIT 1) FROM (SELECT DISTINCT n."OrderingKey" AS k FROM new_rows AS n JOIN old_rows AS p ON p."Id" = n."Id" WHERE n."OrderingKey" IS NOT NULL AND n."Status" IN (2, 3) AND p."Status" IN (0, 1)) AS pk WHERE NOT EXISTS (SELECT 1 FROM "dbo"."Outbox" AS o WHERE o."OrderingKey" = pk.k AND o."Status" <> 2 AND o."Status" >= 1 AND o."Status" <= 1)));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER "Outbox_OrderingWake" AFTER UPDATE ON "dbo"."Outbox"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION "dbo"."Outbox_OrderingWake"();
CREATE OR REPLACE FUNCTION "dbo"."Outbox_JoinCount"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE "dbo"."OutboxJoin" SET
        "CompletedSteps" = "CompletedSteps" + CASE WHEN NEW."Status" = 1 AND "CompletedSteps" + "FailedSteps" < "ExpectedSteps" THEN 1 ELSE 0 END,
        "FailedSteps" = "FailedSteps" + CASE WHEN NEW."Status" = 2 AND "CompletedSteps" + "FailedSteps" < "ExpectedSteps" THEN 1 ELSE 0 END,
        "LastUpdatedUtc" = now()
     WHERE "JoinId" = NEW."JoinId";
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER "Outbox_JoinCount" AFTER UPDATE OF "Status" ON "dbo"."OutboxJoinMember"
FOR EACH ROW WHEN (OLD."Status" = 0 AND NEW."Status" IN (1, 2))
EXECUTE FUNCTION "dbo"."Outbox_JoinCount"();
CREATE OR REPLACE FUNCTION "dbo"."Outbox_JoinLate"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE st smallint;
BEGIN
    SELECT "Status" INTO st FROM "dbo"."Outbox" WHERE "Id" = NEW."OutboxMessageId" FOR UPDATE;
    IF st IN (2, 3) THEN
        UPDATE "dbo"."OutboxJoinMember" SET "Status" = CASE st WHEN 2 THEN 1 ELSE 2 END
         WHERE "JoinId" = NEW."JoinId" AND "OutboxMessageId" = NEW."OutboxMessageId" AND "Status" = 0;
    END IF;
    RETURN NULL;
END $$;
DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'Outbox_JoinLate' AND tgrelid = CAST('"dbo"."OutboxJoinMember"' AS regclass)) THEN CREATE CONSTRAINT TRIGGER "Outbox_JoinLate" AFTER INSERT ON "dbo"."OutboxJoinMember" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "dbo"."Outbox_JoinLate"(); END IF; END $$;
CREATE OR REPLACE FUNCTION "dbo"."Outbox_Claim"(p_owner uuid, p_lease_seconds integer, p_batch integer)
RETURNS SETOF "dbo"."Outbox" LANGUAGE plpgsql AS $$
DECLARE v_ids uuid[];
BEGIN
    WITH u AS (UPDATE "dbo"."Outbox" SET "Status" = 1, "OwnerToken" = p_owner,
           "LockedUntil" = now() + make_interval(secs => p_lease_seconds), "Starts" = "Starts" + 1
     WHERE "Id" = ANY (ARRAY(
        SELECT c."Id" FROM "dbo"."Outbox" AS c
         WHERE c."Status" = 0 AND (c."NextAttemptAt" <= now()) IS TRUE AND NOT c."IsProcessed"
           AND (c."OrderingKey" IS NULL OR (c."Id" = (SELECT o."Id" FROM "dbo"."Outbox" AS o WHERE o."OrderingKey" = c."OrderingKey" AND o."Status" <> 2 AND o."Status" = 0 ORDER BY o."OrderingSeq", o."Id" LIMIT 1) AND NOT EXISTS (SELECT 1 FROM "dbo"."Outbox" AS o WHERE o."OrderingKey" = c."OrderingKey" AND o."Status" <> 2 AND o."Status" = 1)))
           AND ((c."NextAttemptAt" AT TIME ZONE 'UTC') - c."Priority" * interval '10 seconds') <= (now() AT TIME ZONE 'UTC') + interval '50 seconds' ORDER BY ((c."NextAttemptAt" AT TIME ZONE 'UTC') - c."Priority" * interval '10 seconds') LIMIT p_batch
           FOR UPDATE OF c SKIP LOCKED)) AND ("OrderingKey" IS NULL OR pg_try_advisory_xact_lock(hashtext('"dbo".Outbox'), hashtext("OrderingKey")))
    RETURNING "Id") SELECT array_agg("Id") INTO v_ids FROM u;
    UPDATE "dbo"."Outbox" AS t SET "Status" = 0, "OwnerToken" = NULL, "LockedUntil" = NULL,
           "Starts" = greatest(t."Starts" - 1, 0)
     WHERE t."Id" = ANY (v_ids) AND t."OwnerToken" = p_owner AND t."Status" = 1
       AND EXISTS (SELECT 1 FROM "dbo"."Outbox" AS o WHERE o."OrderingKey" = t."OrderingKey" AND o."Status" <> 2 AND o."Status" >= 1 AND o."Status" <= 1 AND o."Id" <> t."Id");
    RETURN QUERY SELECT * FROM "dbo"."Outbox" WHERE "Id" = ANY (v_ids) AND "OwnerToken" = p_owner AND "Status" = 1;
END $$;
CREATE OR REPLACE FUNCTION "dbo"."Outbox_Ack"(p_processed_by varchar, p_owner uuid, p_ids uuid[])
RETURNS integer LANGUAGE sql AS $$
    WITH changed AS (
        UPDATE "dbo"."Outbox" SET "Status" = 2, "IsProcessed" = true, "ProcessedAt" = now(),
               "ProcessedBy" = p_processed_by, "LockedUntil" = NULL
         WHERE "OwnerToken" = p_owner AND "Status" = 1 AND "Id" = ANY (p_ids)
        RETURNING 1)
    SELECT CAST(count(*) AS integer) FROM changed
$$;
CREATE OR REPLACE FUNCTION "dbo"."Outbox_Abandon"(p_retries integer, p_last_error text, p_delay_ms bigint, p_owner uuid, p_ids uuid[])
RETURNS integer LANGUAGE sql AS $$
    WITH changed AS (
        UPDATE "dbo"."Outbox" SET "Status" = 0, "OwnerToken" = NULL, "LockedUntil" = NULL,
               "Starts" = greatest("Starts" - 1, 0), "RetryCount" = "RetryCount" + p_retries,
               "LastError" = coalesce(p_last_error, "LastError"),
               "NextAttemptAt" = now() + make_interval(secs => coalesce(p_delay_ms / 1000.0,
                   least(60, 1 << least("RetryCount", 6))))
         WHERE "OwnerToken" = p_owner AND "Status" = 1 AND "Id" = ANY (p_ids)
        RETURNING 1)
    SELECT CAST(count(*) AS integer) FROM changed
$$;
CREATE OR REPLACE FUNCTION "dbo"."Outbox_Fail"(p_last_error text, p_owner uuid, p_ids uuid[])
RETURNS integer LANGUAGE sql AS $$
    WITH changed AS (
        UPDATE "dbo"."Outbox" SET "Status" = 3, "LockedUntil" = NULL, "LastError" = p_last_error
         WHERE "OwnerToken" = p_owner AND "Status" = 1 AND "Id" = ANY (p_ids)
        RETURNING 1)
    SELECT CAST(count(*) AS integer) FROM changed
$$;
DROP FUNCTION IF EXISTS "dbo"."Outbox_ReapExpired"();
CREATE OR REPLACE FUNCTION "dbo"."Outbox_ReapExpired"(p_max_starts integer DEFAULT 3)
RETURNS integer LANGUAGE sql AS $$
    WITH changed AS (
        UPDATE "dbo"."Outbox" SET "Status" = CASE WHEN "Starts" >= p_max_starts THEN 3 ELSE 0 END,
               "LastError" = CASE WHEN "Starts" >= p_max_starts THEN 'crash loop: claimed '
                   || p_max_starts || ' times without an outcome (the handler crashed or was killed, '
                   || 'or its lease expired)' ELSE "LastError" END,
               "OwnerToken" = NULL, "LockedUntil" = NULL
         WHERE "Status" = 1 AND "LockedUntil" < now()
        RETURNING 1)
    SELECT CAST(count(*) AS integer) FROM changed
$$;
CREATE OR REPLACE FUNCTION "dbo"."Outbox_Cleanup"(p_retention_ms bigint, p_batch integer)
RETURNS integer LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM "dbo"."Outbox" WHERE "Id" IN (
            SELECT "Id" FROM "dbo"."Outbox" WHERE "Status" = 2
               AND "ProcessedAt" < now() - make_interval(secs => p_retention_ms / 1000.0)
             ORDER BY "ProcessedAt" LIMIT p_batch)
        RETURNING 1)
    SELECT CAST(count(*) AS integer) FROM gone
$$;
