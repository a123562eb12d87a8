-- Frozen: sql/mariadb/outbox.sql as release 36c7606 deployed it (storage layout 1, with Priority); the upgrade tests (CORE-SCHEMA-UPGRADE-V1) create old tables from it.
CREATE TABLE IF NOT EXISTS `Outbox` (
    `Id`            CHAR(36) NOT NULL PRIMARY KEY,
    `Topic`         VARCHAR(255) NOT NULL,
    `Payload`       LONGTEXT NOT NULL,
    `CreatedAt`     DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `Status`        TINYINT NOT NULL DEFAULT 0,
    `LockedUntil`   DATETIME(6) NULL,
    `OwnerToken`    CHAR(36) NULL,
    `IsProcessed`   TINYINT NOT NULL DEFAULT 0,
    `ProcessedAt`   DATETIME(6) NULL,
    `ProcessedBy`   VARCHAR(100) NULL,
    `RetryCount`    INT NOT NULL DEFAULT 0,
    `LastError`     LONGTEXT NULL,
    `NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `MessageId`     CHAR(36) NOT NULL,
    `CorrelationId` VARCHAR(255) NULL,
    `DueTimeUtc`    DATETIME(6) NULL,
    `Starts`        INT NOT NULL DEFAULT 0,
    `OrderingKey`   VARCHAR(255) NULL,
    `OrderingSeq`   BIGINT NULL,
    `OrderingLive`  VARCHAR(255) AS (IF(`Status` <> 2, `OrderingKey`, NULL)) PERSISTENT,
    `OrderingState` TINYINT AS (IF(`Status` <> 2 AND `OrderingKey` IS NOT NULL, `Status`, NULL)) PERSISTENT,
    `TenantId`      VARCHAR(64) NULL,
    `AggregateType` VARCHAR(64) NULL,
    `AggregateId`   VARCHAR(128) NULL,
    `Headers`       JSON NULL,
    `ExpiresAt`     DATETIME(6) NULL,
    `Priority`      TINYINT NOT NULL DEFAULT 0,
    `ClaimRank`     DATETIME(6) AS (IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND)) PERSISTENT,
    KEY `IX_Outbox_Ready` (`Status`, `NextAttemptAt`),
    KEY `IX_Outbox_Leased` (`Status`, `LockedUntil`),
    KEY `IX_Outbox_Done` (`Status`, `ProcessedAt`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `Starts` INT NOT NULL DEFAULT 0;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `OrderingKey` VARCHAR(255) NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `OrderingSeq` BIGINT NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `OrderingLive` VARCHAR(255) AS (IF(`Status` <> 2, `OrderingKey`, NULL)) PERSISTENT;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `OrderingState` TINYINT AS (IF(`Status` <> 2 AND `OrderingKey` IS NOT NULL, `Status`, NULL)) PERSISTENT;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `TenantId` VARCHAR(64) NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `AggregateType` VARCHAR(64) NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `AggregateId` VARCHAR(128) NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `Headers` JSON NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `ExpiresAt` DATETIME(6) NULL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `Priority` TINYINT NOT NULL DEFAULT 0;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `ClaimRank` DATETIME(6) AS (IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND)) PERSISTENT;
CREATE INDEX IF NOT EXISTS `IX_Outbox_Ordering` ON `Outbox` (`OrderingLive`, `OrderingState`, `OrderingSeq`);
CREATE INDEX IF NOT EXISTS `IX_Outbox_Claim` ON `Outbox` (`Status`, `ClaimRank`, `NextAttemptAt`);
CREATE TABLE IF NOT EXISTS `OutboxJoin` (
    `JoinId`         CHAR(36) NOT NULL PRIMARY KEY,
    `GroupingKey`    VARCHAR(255) NULL,
    `ExpectedSteps`  INT NOT NULL,
    `CompletedSteps` INT NOT NULL DEFAULT 0,
    `FailedSteps`    INT NOT NULL DEFAULT 0,
    `Status`         TINYINT NOT NULL DEFAULT 0,
    `CreatedUtc`     DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `LastUpdatedUtc` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `Metadata`       LONGTEXT NULL,
    KEY `IX_OutboxJoin_GroupingKey` (`GroupingKey`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
CREATE TABLE IF NOT EXISTS `OutboxJoinMember` (
    `JoinId`          CHAR(36) NOT NULL,
    `OutboxMessageId` CHAR(36) NOT NULL,
    `Status`          TINYINT NOT NULL DEFAULT 0,
    `CreatedUtc`      DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (`JoinId`, `OutboxMessageId`),
    KEY `IX_OutboxJoinMember_Message` (`OutboxMessageId`),
    CONSTRAINT `FK_OutboxJoinMember_Join` FOREIGN KEY (`JoinId`) REFERENCES `OutboxJoin` (`JoinId`) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
DELIMITER $$
CREATE TRIGGER IF NOT EXISTS `Outbox_JoinStep2` AFTER UPDATE ON `Outbox` FOR EACH ROW
    IF NEW.`Status` IN (2, 3) AND OLD.`Status` <> NEW.`Status` THEN
        UPDATE `OutboxJoinMember` SET `Status` = IF(NEW.`Status` = 2, 1, 2)
         WHERE `OutboxMessageId` = NEW.`Id` AND `Status` = 0;
    END IF$$
DELIMITER ;
DROP TRIGGER IF EXISTS `Outbox_JoinStep`;
CREATE TRIGGER IF NOT EXISTS `Outbox_JoinCount` AFTER UPDATE ON `OutboxJoinMember` FOR EACH ROW
    UPDATE `OutboxJoin` SET
        `LastUpdatedUtc` = UTC_TIMESTAMP(6),
        `FailedSteps` = `FailedSteps` + (NEW.`Status` = 2 AND `CompletedSteps` + `FailedSteps` < `ExpectedSteps`),
        `CompletedSteps` = `CompletedSteps` + (NEW.`Status` = 1 AND `CompletedSteps` + `FailedSteps` < `ExpectedSteps`)
     WHERE `JoinId` = NEW.`JoinId` AND OLD.`Status` = 0 AND NEW.`Status` IN (1, 2);
