CREATE TABLE IF NOT EXISTS `Outbox` (
    `Id`            UUID NOT NULL PRIMARY KEY,
    `NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `LockedUntil`   DATETIME(6) NULL,
    `ProcessedAt`   DATETIME(6) NULL,
    `CreatedAt`     DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    `OwnerToken`    UUID NULL,
    `MessageId`     UUID NOT NULL,
    `RetryCount`    INT NOT NULL DEFAULT 0,
    `Starts`        INT NOT NULL DEFAULT 0,
    `Status`        TINYINT NOT NULL DEFAULT 0,
    `IsProcessed`   TINYINT NOT NULL DEFAULT 0,
    `Priority`      TINYINT NOT NULL DEFAULT 0,
    `Topic`         VARCHAR(255) NOT NULL,
    `Payload`       LONGTEXT NOT NULL,
    `ProcessedBy`   VARCHAR(100) NULL,
    `LastError`     LONGTEXT NULL,
    `CorrelationId` VARCHAR(255) NULL,
    `DueTimeUtc`    DATETIME(6) NULL,
    `OrderingKey`   VARCHAR(255) NULL,
    `OrderingSeq`   BIGINT NULL,
    `OrderingLive`  VARCHAR(255) AS (IF(`Status` <> 2, `OrderingKey`, NULL)) PERSISTENT,
    `OrderingState` TINYINT AS (IF(`Status` <> 2 AND `OrderingKey` IS NOT NULL, `Status`, NULL)) PERSISTENT,
    `TenantId`      VARCHAR(64) NULL,
    `AggregateType` VARCHAR(64) NULL,
    `AggregateId`   VARCHAR(128) NULL,
    `Headers`       JSON NULL,
    `ExpiresAt`     DATETIME(6) NULL,
    `ReadyRank`     DATETIME(6) AS (IF(`Status` = 0 AND `IsProcessed` = 0, IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND), NULL)) PERSISTENT,
    `LeasedUntil`   DATETIME(6) AS (IF(`Status` = 1, `LockedUntil`, NULL)) PERSISTENT,
    `DoneAt`        DATETIME(6) AS (IF(`Status` = 2, `ProcessedAt`, NULL)) PERSISTENT,
    `DeadAt`        DATETIME(6) AS (IF(`Status` = 3, `CreatedAt`, NULL)) PERSISTENT,
    `HasJoin`       TINYINT NOT NULL DEFAULT 1
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
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `ReadyRank` DATETIME(6) AS (IF(`Status` = 0 AND `IsProcessed` = 0, IF(`NextAttemptAt` >= '9999-01-01', `NextAttemptAt`, `NextAttemptAt` - INTERVAL (`Priority` * 10) SECOND), NULL)) VIRTUAL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `LeasedUntil` DATETIME(6) AS (IF(`Status` = 1, `LockedUntil`, NULL)) VIRTUAL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `DoneAt` DATETIME(6) AS (IF(`Status` = 2, `ProcessedAt`, NULL)) VIRTUAL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `DeadAt` DATETIME(6) AS (IF(`Status` = 3, `CreatedAt`, NULL)) VIRTUAL;
ALTER TABLE `Outbox` ADD COLUMN IF NOT EXISTS `HasJoin` TINYINT NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS `IX_Outbox_Ordering` ON `Outbox` (`OrderingLive`, `OrderingState`, `OrderingSeq`);
CREATE INDEX IF NOT EXISTS `IX_Outbox_ReadyRank` ON `Outbox` (`ReadyRank`, `NextAttemptAt`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX IF NOT EXISTS `IX_Outbox_LeasedUntil` ON `Outbox` (`LeasedUntil`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX IF NOT EXISTS `IX_Outbox_DoneAt` ON `Outbox` (`DoneAt`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX IF NOT EXISTS `IX_Outbox_DeadAt` ON `Outbox` (`DeadAt`) ALGORITHM=INPLACE LOCK=NONE;
CREATE TABLE IF NOT EXISTS `OutboxJoin` (
    `JoinId`         UUID NOT NULL PRIMARY KEY,
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
    `JoinId`          UUID NOT NULL,
    `OutboxMessageId` UUID NOT NULL,
    `Status`          TINYINT NOT NULL DEFAULT 0,
    `CreatedUtc`      DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (`JoinId`, `OutboxMessageId`),
    KEY `IX_OutboxJoinMember_Message` (`OutboxMessageId`),
    CONSTRAINT `FK_OutboxJoinMember_Join` FOREIGN KEY (`JoinId`) REFERENCES `OutboxJoin` (`JoinId`) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
DELIMITER $$
CREATE TRIGGER IF NOT EXISTS `Outbox_JoinStep2Flag` AFTER UPDATE ON `Outbox` FOR EACH ROW
    IF NEW.`HasJoin` <> 0 AND NEW.`Status` IN (2, 3) AND OLD.`Status` <> NEW.`Status` THEN
        UPDATE `OutboxJoinMember` SET `Status` = IF(NEW.`Status` = 2, 1, 2)
         WHERE `OutboxMessageId` = NEW.`Id` AND `Status` = 0;
    END IF$$
DELIMITER ;
DROP TRIGGER IF EXISTS `Outbox_JoinStep2`;
DROP TRIGGER IF EXISTS `Outbox_JoinStep`;
CREATE TRIGGER IF NOT EXISTS `Outbox_JoinFlag` AFTER INSERT ON `OutboxJoinMember` FOR EACH ROW
    UPDATE `Outbox` SET `HasJoin` = 1 WHERE `Id` = NEW.`OutboxMessageId`;
ALTER TABLE `Outbox` ALTER COLUMN `HasJoin` SET DEFAULT 0;
CREATE TRIGGER IF NOT EXISTS `Outbox_JoinCount` AFTER UPDATE ON `OutboxJoinMember` FOR EACH ROW
    UPDATE `OutboxJoin` SET
        `LastUpdatedUtc` = UTC_TIMESTAMP(6),
        `FailedSteps` = `FailedSteps` + (NEW.`Status` = 2 AND `CompletedSteps` + `FailedSteps` < `ExpectedSteps`),
        `CompletedSteps` = `CompletedSteps` + (NEW.`Status` = 1 AND `CompletedSteps` + `FailedSteps` < `ExpectedSteps`)
     WHERE `JoinId` = NEW.`JoinId` AND OLD.`Status` = 0 AND NEW.`Status` IN (1, 2);
