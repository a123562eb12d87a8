-- Frozen: sql/mariadb/inbox.sql as release 36c7606 deployed it (storage layout 1, with Priority); the upgrade tests (CORE-SCHEMA-UPGRADE-V1) create old tables from it.
CREATE TABLE IF NOT EXISTS `Inbox` (
    `Source`        VARCHAR(255) NOT NULL,
    `MessageId`     VARCHAR(255) NOT NULL,
    `Topic`         VARCHAR(255) NOT NULL DEFAULT '',
    `Payload`       LONGTEXT NOT NULL DEFAULT '',
    `Hash`          BLOB NULL,
    `FirstSeenUtc`  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `LastSeenUtc`   DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `Status`        VARCHAR(20) NOT NULL DEFAULT 'Seen',
    `LockedUntil`   DATETIME(6) NULL,
    `OwnerToken`    CHAR(36) NULL,
    `Attempt`       INT NOT NULL DEFAULT 0,
    `LastError`     LONGTEXT NULL,
    `NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `DueTimeUtc`    DATETIME(6) NULL,
    `Starts`        INT NOT NULL DEFAULT 0,
    `TenantId`      VARCHAR(64) NULL,
    `AggregateType` VARCHAR(64) NULL,
    `AggregateId`   VARCHAR(128) NULL,
    `Headers`       JSON NULL,
    `ExpiresAt`     DATETIME(6) NULL,
    `Priority`      TINYINT NOT NULL DEFAULT 0,
    `ClaimRank`     DATETIME(6) AS (IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND)) PERSISTENT,
    PRIMARY KEY (`Source`, `MessageId`),
    KEY `IX_Inbox_WorkQueue` (`Status`, `NextAttemptAt`),
    KEY `IX_Inbox_Leased` (`Status`, `LockedUntil`),
    KEY `IX_Inbox_Cleanup` (`Status`, `LastSeenUtc`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `Starts` INT NOT NULL DEFAULT 0;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `TenantId` VARCHAR(64) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `AggregateType` VARCHAR(64) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `AggregateId` VARCHAR(128) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `Headers` JSON NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `ExpiresAt` DATETIME(6) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `Priority` TINYINT NOT NULL DEFAULT 0;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `ClaimRank` DATETIME(6) AS (IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND)) PERSISTENT;
CREATE INDEX IF NOT EXISTS `IX_Inbox_Claim` ON `Inbox` (`Status`, `ClaimRank`, `NextAttemptAt`);
