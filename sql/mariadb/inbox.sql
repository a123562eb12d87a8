CREATE TABLE IF NOT EXISTS `Inbox` (
    `Source`        VARCHAR(255) NOT NULL,
    `MessageId`     VARCHAR(255) NOT NULL,
    `NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `LockedUntil`   DATETIME(6) NULL,
    `LastSeenUtc`   DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `FirstSeenUtc`  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `OwnerToken`    UUID NULL,
    `Attempt`       INT NOT NULL DEFAULT 0,
    `Starts`        INT NOT NULL DEFAULT 0,
    `Priority`      TINYINT NOT NULL DEFAULT 0,
    `Status`        VARCHAR(20) NOT NULL DEFAULT 'Seen',
    `Topic`         VARCHAR(255) NOT NULL DEFAULT '',
    `Payload`       LONGTEXT NOT NULL DEFAULT '',
    `Hash`          BLOB NULL,
    `LastError`     LONGTEXT NULL,
    `DueTimeUtc`    DATETIME(6) NULL,
    `TenantId`      VARCHAR(64) NULL,
    `AggregateType` VARCHAR(64) NULL,
    `AggregateId`   VARCHAR(128) NULL,
    `Headers`       JSON NULL,
    `ExpiresAt`     DATETIME(6) NULL,
    `ReadyRank`     DATETIME(6) AS (IF(`Status` = 'Processing' AND `LockedUntil` IS NULL, IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND), NULL)) PERSISTENT,
    `LeasedUntil`   DATETIME(6) AS (IF(`Status` = 'Processing', `LockedUntil`, NULL)) PERSISTENT,
    `DoneAt`        DATETIME(6) AS (IF(`Status` = 'Done', `LastSeenUtc`, NULL)) PERSISTENT,
    `DeadAt`        DATETIME(6) AS (IF(`Status` = 'Dead', `FirstSeenUtc`, NULL)) PERSISTENT,
    PRIMARY KEY (`Source`, `MessageId`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `Starts` INT NOT NULL DEFAULT 0;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `TenantId` VARCHAR(64) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `AggregateType` VARCHAR(64) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `AggregateId` VARCHAR(128) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `Headers` JSON NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `ExpiresAt` DATETIME(6) NULL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `Priority` TINYINT NOT NULL DEFAULT 0;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `ReadyRank` DATETIME(6) AS (IF(`Status` = 'Processing' AND `LockedUntil` IS NULL, IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND), NULL)) VIRTUAL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `LeasedUntil` DATETIME(6) AS (IF(`Status` = 'Processing', `LockedUntil`, NULL)) VIRTUAL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `DoneAt` DATETIME(6) AS (IF(`Status` = 'Done', `LastSeenUtc`, NULL)) VIRTUAL;
ALTER TABLE `Inbox` ADD COLUMN IF NOT EXISTS `DeadAt` DATETIME(6) AS (IF(`Status` = 'Dead', `FirstSeenUtc`, NULL)) VIRTUAL;
CREATE INDEX IF NOT EXISTS `IX_Inbox_ReadyRank` ON `Inbox` (`ReadyRank`, `NextAttemptAt`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX IF NOT EXISTS `IX_Inbox_LeasedUntil` ON `Inbox` (`LeasedUntil`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX IF NOT EXISTS `IX_Inbox_DoneAt` ON `Inbox` (`DoneAt`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX IF NOT EXISTS `IX_Inbox_DeadAt` ON `Inbox` (`DeadAt`) ALGORITHM=INPLACE LOCK=NONE;
