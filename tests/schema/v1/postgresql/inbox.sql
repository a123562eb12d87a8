-- Frozen: sql/postgresql/inbox.sql as release 36c7606 deployed it (storage layout 1, with Priority); the upgrade tests (CORE-SCHEMA-UPGRADE-V1) create old tables from it.
SELECT pg_advisory_xact_lock(hashtext('ibx deploy "infra"."Inbox"'));
CREATE SCHEMA IF NOT EXISTS "infra";
CREATE TABLE IF NOT EXISTS "infra"."Inbox" (
    "Source"        varchar(255) NOT NULL,
    "MessageId"     varchar(255) NOT NULL,
    "Topic"         varchar(255) NOT NULL DEFAULT '',
    "Payload"       text NOT NULL DEFAULT '',
    "Hash"          bytea NULL,
    "FirstSeenUtc"  timestamptz NOT NULL DEFAULT now(),
    "LastSeenUtc"   timestamptz NOT NULL DEFAULT now(),
    "Status"        varchar(20) NOT NULL DEFAULT 'Seen',
    "LockedUntil"   timestamptz NULL,
    "OwnerToken"    uuid NULL,
    "Attempt"       integer NOT NULL DEFAULT 0,
    "LastError"     text NULL,
    "NextAttemptAt" timestamptz NOT NULL DEFAULT now(),
    "DueTimeUtc"    timestamptz NULL,
    "Starts"        integer NOT NULL DEFAULT 0,
    "TenantId"      varchar(64) NULL,
    "AggregateType" varchar(64) NULL,
    "AggregateId"   varchar(128) NULL,
    "Headers"       json NULL,
    "ExpiresAt"     timestamptz NULL,
    "Priority"      smallint NOT NULL DEFAULT 0,
    PRIMARY KEY ("Source", "MessageId")
);
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "Starts" integer NOT NULL DEFAULT 0;
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "TenantId" varchar(64) NULL;
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "AggregateType" varchar(64) NULL;
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "AggregateId" varchar(128) NULL;
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "Headers" json NULL;
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "ExpiresAt" timestamptz NULL;
ALTER TABLE "infra"."Inbox" ADD COLUMN IF NOT EXISTS "Priority" smallint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS "IX_Inbox_WorkQueue" ON "infra"."Inbox" ("NextAttemptAt") WHERE "Status" = 'Processing';
CREATE INDEX IF NOT EXISTS "IX_Inbox_Claim" ON "infra"."Inbox" ((("NextAttemptAt" AT TIME ZONE 'UTC') - "Priority" * interval '10 seconds')) WHERE ("Status" = 'Processing') IS TRUE AND "Starts" >= 0;
CREATE INDEX IF NOT EXISTS "IX_Inbox_Leased" ON "infra"."Inbox" ("LockedUntil") WHERE "Status" = 'Processing' AND "LockedUntil" IS NOT NULL;
CREATE INDEX IF NOT EXISTS "IX_Inbox_Cleanup" ON "infra"."Inbox" ("LastSeenUtc") WHERE "Status" = 'Done';
