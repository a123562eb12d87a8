SET QUOTED_IDENTIFIER ON; SET ANSI_NULLS ON; SET XACT_ABORT ON;
DECLARE @lock INT;
IF @@TRANCOUNT = 0 AND (@@OPTIONS & 2) = 0 BEGIN TRANSACTION;
IF @@TRANCOUNT = 0 BEGIN CREATE TABLE #obx_deploy (x INT); DROP TABLE #obx_deploy; END;
IF @@TRANCOUNT = 0 THROW 50000, N'obx deploy: no transaction for the deploy lock', 1;
EXEC @lock = sp_getapplock @Resource = N'obx deploy [dbo].[Outbox]', @LockMode = N'Exclusive', @LockOwner = N'Transaction';
IF @lock < 0 THROW 50000, N'obx deploy: the deploy lock was not granted', 1;
GO
IF SCHEMA_ID(PARSENAME(N'[dbo]', 1)) IS NULL EXEC sp_executesql N'CREATE SCHEMA [dbo]'
GO
IF OBJECT_ID(N'[dbo].[Outbox]', N'U') IS NULL
CREATE TABLE [dbo].[Outbox] (
    [Id]            UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID(),
    [Topic]         NVARCHAR(255) NOT NULL,
    [Payload]       NVARCHAR(MAX) NOT NULL,
    [CreatedAt]     DATETIMEOFFSET NOT NULL DEFAULT SYSDATETIMEOFFSET(),
    [Status]        TINYINT NOT NULL DEFAULT 0,
    [LockedUntil]   DATETIME2(3) NULL,
    [OwnerToken]    UNIQUEIDENTIFIER NULL,
    [IsProcessed]   BIT NOT NULL DEFAULT 0,
    [ProcessedAt]   DATETIMEOFFSET NULL,
    [ProcessedBy]   NVARCHAR(100) NULL,
    [RetryCount]    INT NOT NULL DEFAULT 0,
    [LastError]     NVARCHAR(MAX) NULL,
    [NextAttemptAt] DATETIMEOFFSET NOT NULL DEFAULT SYSDATETIMEOFFSET(),
    [MessageId]     UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID(),
    [CorrelationId] NVARCHAR(255) NULL,
    [DueTimeUtc]    DATETIMEOFFSET NULL,
    [Starts]        INT NOT NULL DEFAULT 0,
    [OrderingKey]   NVARCHAR(255) NULL,
    [OrderingSeq]   BIGINT NULL,
    [TenantId]      NVARCHAR(64) NULL,
    [AggregateType] NVARCHAR(64) NULL,
    [AggregateId]   NVARCHAR(128) NULL,
    [Headers]       NVARCHAR(MAX) NULL,
    [ExpiresAt]     DATETIMEOFFSET NULL,
    [Priority]      SMALLINT NOT NULL DEFAULT 0,
    [Seq]           BIGINT IDENTITY(1, 1) NOT NULL,
    CONSTRAINT [PK_Outbox] PRIMARY KEY NONCLUSTERED ([Id]),
    CONSTRAINT [CX_Outbox] UNIQUE CLUSTERED ([Seq])
)
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'Starts') IS NULL ALTER TABLE [dbo].[Outbox] ADD [Starts] INT NOT NULL DEFAULT 0
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'OrderingKey') IS NULL ALTER TABLE [dbo].[Outbox] ADD [OrderingKey] NVARCHAR(255) NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'OrderingSeq') IS NULL ALTER TABLE [dbo].[Outbox] ADD [OrderingSeq] BIGINT NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'TenantId') IS NULL ALTER TABLE [dbo].[Outbox] ADD [TenantId] NVARCHAR(64) NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'AggregateType') IS NULL ALTER TABLE [dbo].[Outbox] ADD [AggregateType] NVARCHAR(64) NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'AggregateId') IS NULL ALTER TABLE [dbo].[Outbox] ADD [AggregateId] NVARCHAR(128) NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'Headers') IS NULL ALTER TABLE [dbo].[Outbox] ADD [Headers] NVARCHAR(MAX) NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'ExpiresAt') IS NULL ALTER TABLE [dbo].[Outbox] ADD [ExpiresAt] DATETIMEOFFSET NULL
GO
IF COL_LENGTH(N'[dbo].[Outbox]', N'Priority') IS NULL ALTER TABLE [dbo].[Outbox] ADD [Priority] SMALLINT NOT NULL DEFAULT 0
GO
IF INDEXPROPERTY(OBJECT_ID(N'[dbo].[Outbox]'), N'IX_Outbox_Ready', 'IndexID') IS NULL
CREATE INDEX [IX_Outbox_Ready] ON [dbo].[Outbox] ([NextAttemptAt]) WHERE [Status] = 0
GO
IF INDEXPROPERTY(OBJECT_ID(N'[dbo].[Outbox]'), N'IX_Outbox_Ordering', 'IndexID') IS NULL
CREATE INDEX [IX_Outbox_Ordering] ON [dbo].[Outbox] ([OrderingKey], [Status], [OrderingSeq]) WHERE [OrderingKey] IS NOT NULL AND [Status] <> 2
GO
IF INDEXPROPERTY(OBJECT_ID(N'[dbo].[Outbox]'), N'IX_Outbox_Leased', 'IndexID') IS NULL
CREATE INDEX [IX_Outbox_Leased] ON [dbo].[Outbox] ([LockedUntil]) WHERE [Status] = 1
GO
IF INDEXPROPERTY(OBJECT_ID(N'[dbo].[Outbox]'), N'IX_Outbox_Done', 'IndexID') IS NULL
CREATE INDEX [IX_Outbox_Done] ON [dbo].[Outbox] ([ProcessedAt]) WHERE [Status] = 2
GO
IF OBJECT_ID(N'[dbo].[OutboxJoin]', N'U') IS NULL
CREATE TABLE [dbo].[OutboxJoin] (
    [JoinId]         UNIQUEIDENTIFIER NOT NULL PRIMARY KEY DEFAULT NEWID(),
    [GroupingKey]    NVARCHAR(255) NULL,
    [ExpectedSteps]  INT NOT NULL,
    [CompletedSteps] INT NOT NULL DEFAULT 0,
    [FailedSteps]    INT NOT NULL DEFAULT 0,
    [Status]         TINYINT NOT NULL DEFAULT 0,
    [CreatedUtc]     DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),
    [LastUpdatedUtc] DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),
    [Metadata]       NVARCHAR(MAX) NULL
)
GO
IF INDEXPROPERTY(OBJECT_ID(N'[dbo].[OutboxJoin]'), N'IX_OutboxJoin_GroupingKey', 'IndexID') IS NULL
CREATE INDEX [IX_OutboxJoin_GroupingKey] ON [dbo].[OutboxJoin] ([GroupingKey]) WHERE [GroupingKey] IS NOT NULL
GO
IF OBJECT_ID(N'[dbo].[OutboxJoinMember]', N'U') IS NULL
CREATE TABLE [dbo].[OutboxJoinMember] (
    [JoinId]          UNIQUEIDENTIFIER NOT NULL,
    [OutboxMessageId] UNIQUEIDENTIFIER NOT NULL,
    [Status]          TINYINT NOT NULL DEFAULT 0,
    [CreatedUtc]      DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),
    CONSTRAINT [PK_OutboxJoinMember] PRIMARY KEY ([JoinId], [OutboxMessageId]),
    CONSTRAINT [FK_OutboxJoinMember_Join] FOREIGN KEY ([JoinId]) REFERENCES [dbo].[OutboxJoin] ([JoinId]) ON DELETE CASCADE
)
GO
IF INDEXPROPERTY(OBJECT_ID(N'[dbo].[OutboxJoinMember]'), N'IX_OutboxJoinMember_Message', 'IndexID') IS NULL
CREATE INDEX [IX_OutboxJoinMember_Message] ON [dbo].[OutboxJoinMember] ([OutboxMessageId])
GO
CREATE OR ALTER TRIGGER [dbo].[Outbox_JoinStep] ON [dbo].[Outbox] AFTER UPDATE AS
BEGIN
    SET NOCOUNT ON;
    IF NOT EXISTS (SELECT 1 FROM inserted WHERE [Status] IN (2, 3)) RETURN; -- a claim, a reap
    UPDATE m SET [Status] = CASE i.[Status] WHEN 2 THEN 1 ELSE 2 END
      FROM [dbo].[OutboxJoinMember] AS m JOIN inserted AS i ON m.[OutboxMessageId] = i.[Id]
      JOIN deleted AS d ON d.[Id] = i.[Id]
     WHERE i.[Status] IN (2, 3) AND d.[Status] <> i.[Status] AND m.[Status] = 0;
END
GO
CREATE OR ALTER TRIGGER [dbo].[Outbox_JoinCount] ON [dbo].[OutboxJoinMember] AFTER UPDATE AS
BEGIN
    SET NOCOUNT ON;
    IF NOT EXISTS (SELECT 1 FROM inserted WHERE [Status] IN (1, 2)) RETURN;
    UPDATE j SET [CompletedSteps] = j.[CompletedSteps] + c.[Done],
           [FailedSteps] = j.[FailedSteps] + c.[Failed], [LastUpdatedUtc] = SYSUTCDATETIME()
      FROM [dbo].[OutboxJoin] AS j
      JOIN (SELECT i.[JoinId], SUM(CASE i.[Status] WHEN 1 THEN 1 ELSE 0 END) AS [Done],
                   SUM(CASE i.[Status] WHEN 2 THEN 1 ELSE 0 END) AS [Failed]
              FROM inserted AS i JOIN deleted AS d
                ON d.[JoinId] = i.[JoinId] AND d.[OutboxMessageId] = i.[OutboxMessageId]
             WHERE d.[Status] = 0 AND i.[Status] IN (1, 2)
             GROUP BY i.[JoinId]) AS moved ON moved.[JoinId] = j.[JoinId]
      CROSS APPLY (SELECT CASE WHEN j.[ExpectedSteps] > j.[CompletedSteps] + j.[FailedSteps]
                          THEN j.[ExpectedSteps] - j.[CompletedSteps] - j.[FailedSteps] ELSE 0 END AS [Room]) AS r
      CROSS APPLY (SELECT CASE WHEN moved.[Done] < r.[Room] THEN moved.[Done] ELSE r.[Room] END AS [Done]) AS d1
      CROSS APPLY (SELECT d1.[Done], CASE WHEN moved.[Failed] < r.[Room] - d1.[Done] THEN moved.[Failed]
                          ELSE r.[Room] - d1.[Done] END AS [Failed]) AS c;
END
GO
CREATE OR ALTER PROCEDURE [dbo].[Outbox_Claim] @OwnerToken UNIQUEIDENTIFIER, @LeaseSeconds INT, @BatchSize INT, @DeadHolds INT = 0 AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @claimed TABLE ([ClaimedId] UNIQUEIDENTIFIER PRIMARY KEY);
    WITH picked AS (
        SELECT TOP (@BatchSize) c.[Status], c.[OwnerToken], c.[LockedUntil], c.[Id], c.[NextAttemptAt], c.[Starts]
          FROM [dbo].[Outbox] AS c WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)
         WHERE c.[Status] = 0 AND c.[NextAttemptAt] <= SYSDATETIMEOFFSET() AND c.[IsProcessed] = 0
           AND (c.[OrderingKey] IS NULL OR (NOT EXISTS (SELECT 1 FROM [dbo].[Outbox] AS o WHERE o.[OrderingKey] IS NOT NULL AND o.[OrderingKey] = c.[OrderingKey] AND o.[Status] <> 2 AND o.[Status] IN (0, 3 * @DeadHolds) AND o.[OrderingSeq] <= c.[OrderingSeq] AND (o.[OrderingSeq] < c.[OrderingSeq] OR o.[Id] < c.[Id])) AND NOT EXISTS (SELECT 1 FROM [dbo].[Outbox] AS o WHERE o.[OrderingKey] IS NOT NULL AND o.[OrderingKey] = c.[OrderingKey] AND o.[Status] <> 2 AND o.[Status] = 1)))
         ORDER BY c.[NextAttemptAt])
    UPDATE picked SET [Status] = 1, [OwnerToken] = @OwnerToken,
           [LockedUntil] = DATEADD(SECOND, @LeaseSeconds, SYSUTCDATETIME()), [Starts] = [Starts] + 1
    OUTPUT inserted.[Id] INTO @claimed;
    SELECT LOWER(CONVERT(NCHAR(36), t.[Id])), LOWER(CONVERT(NCHAR(36), t.[MessageId])), t.[Topic], t.[Payload], t.[CorrelationId], DATEDIFF_BIG(MILLISECOND, '19700101', CAST(SWITCHOFFSET(t.[CreatedAt], '+00:00') AS DATETIME2(7))), DATEDIFF_BIG(MILLISECOND, '19700101', CAST(SWITCHOFFSET(t.[DueTimeUtc], '+00:00') AS DATETIME2(7))), t.[RetryCount], t.[LastError], t.[Status], DATEDIFF_BIG(MILLISECOND, '19700101', CAST(SWITCHOFFSET(t.[ProcessedAt], '+00:00') AS DATETIME2(7))), t.[ProcessedBy], DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), t.[LockedUntil]), LOWER(CONVERT(NCHAR(36), t.[OwnerToken])), DATEDIFF_BIG(MILLISECOND, '19700101', CAST(SWITCHOFFSET(t.[NextAttemptAt], '+00:00') AS DATETIME2(7))), t.[Starts], t.[OrderingKey], t.[TenantId], t.[AggregateType], t.[AggregateId], t.[Headers], DATEDIFF_BIG(MILLISECOND, '19700101', CAST(SWITCHOFFSET(t.[ExpiresAt], '+00:00') AS DATETIME2(7)))
      FROM [dbo].[Outbox] AS t JOIN @claimed AS c ON t.[Id] = c.[ClaimedId]
     ORDER BY t.[NextAttemptAt];
END
GO
CREATE OR ALTER PROCEDURE [dbo].[Outbox_Ack] @ProcessedBy NVARCHAR(100), @OwnerToken UNIQUEIDENTIFIER, @Ids NVARCHAR(MAX) AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @changed TABLE ([ChangedId] UNIQUEIDENTIFIER);
    UPDATE t SET [Status] = 2, [IsProcessed] = 1, [ProcessedAt] = SYSDATETIMEOFFSET(), [ProcessedBy] = @ProcessedBy, [LockedUntil] = NULL
    OUTPUT inserted.[Id] INTO @changed
      FROM [dbo].[Outbox] AS t JOIN OPENJSON(@Ids) AS j ON t.[Id] = CAST(j.[value] AS UNIQUEIDENTIFIER)
     WHERE t.[OwnerToken] = @OwnerToken AND t.[Status] = 1;
    SELECT COUNT(*) FROM @changed;
END
GO
CREATE OR ALTER PROCEDURE [dbo].[Outbox_Abandon] @DelayMs BIGINT, @Retries INT, @LastError NVARCHAR(MAX), @OwnerToken UNIQUEIDENTIFIER, @Ids NVARCHAR(MAX) AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @changed TABLE ([ChangedId] UNIQUEIDENTIFIER);
    UPDATE t SET [Status] = 0, [OwnerToken] = NULL, [LockedUntil] = NULL, [Starts] = CASE WHEN t.[Starts] > 0 THEN t.[Starts] - 1 ELSE 0 END, [RetryCount] = t.[RetryCount] + @Retries, [LastError] = COALESCE(@LastError, t.[LastError]), [NextAttemptAt] = DATEADD(MILLISECOND, CAST(COALESCE(@DelayMs, CASE WHEN t.[RetryCount] >= 6 THEN 60000 ELSE 1000 * POWER(2, t.[RetryCount]) END) % 86400000 AS INT), DATEADD(DAY, CAST(COALESCE(@DelayMs, CASE WHEN t.[RetryCount] >= 6 THEN 60000 ELSE 1000 * POWER(2, t.[RetryCount]) END) / 86400000 AS INT), SYSDATETIMEOFFSET()))
    OUTPUT inserted.[Id] INTO @changed
      FROM [dbo].[Outbox] AS t JOIN OPENJSON(@Ids) AS j ON t.[Id] = CAST(j.[value] AS UNIQUEIDENTIFIER)
     WHERE t.[OwnerToken] = @OwnerToken AND t.[Status] = 1;
    SELECT COUNT(*) FROM @changed;
END
GO
CREATE OR ALTER PROCEDURE [dbo].[Outbox_Fail] @LastError NVARCHAR(MAX), @OwnerToken UNIQUEIDENTIFIER, @Ids NVARCHAR(MAX) AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @changed TABLE ([ChangedId] UNIQUEIDENTIFIER);
    UPDATE t SET [Status] = 3, [LockedUntil] = NULL, [LastError] = @LastError
    OUTPUT inserted.[Id] INTO @changed
      FROM [dbo].[Outbox] AS t JOIN OPENJSON(@Ids) AS j ON t.[Id] = CAST(j.[value] AS UNIQUEIDENTIFIER)
     WHERE t.[OwnerToken] = @OwnerToken AND t.[Status] = 1;
    SELECT COUNT(*) FROM @changed;
END
GO
CREATE OR ALTER PROCEDURE [dbo].[Outbox_ReapExpired] @MaxStarts INT = 3 AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @changed TABLE ([ChangedId] UNIQUEIDENTIFIER);
    UPDATE [dbo].[Outbox] SET [Status] = CASE WHEN [Starts] >= @MaxStarts THEN 3 ELSE 0 END,
           [LastError] = CASE WHEN [Starts] >= @MaxStarts THEN N'crash loop: claimed '
               + CAST(@MaxStarts AS NVARCHAR(11)) + N' times without an outcome (the handler crashed or was killed, or its lease expired)' ELSE [LastError] END,
           [OwnerToken] = NULL, [LockedUntil] = NULL
    OUTPUT inserted.[Id] INTO @changed
     WHERE [Status] = 1 AND [LockedUntil] < SYSUTCDATETIME();
    SELECT COUNT(*) FROM @changed;
END
GO
IF @@TRANCOUNT > 0 AND (@@OPTIONS & 2) = 0 COMMIT;
GO
