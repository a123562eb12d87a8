SET QUOTED_IDENTIFIER ON; SET ANSI_NULLS ON; SET XACT_ABORT ON;
DECLARE @lock INT;
IF @@TRANCOUNT = 0 AND (@@OPTIONS & 2) = 0 BEGIN TRANSACTION;
IF @@TRANCOUNT = 0 BEGIN CREATE TABLE #ibx_deploy (x INT); DROP TABLE #ibx_deploy; END;
IF @@TRANCOUNT = 0 THROW 50000, N'ibx deploy: no transaction for the deploy lock', 1;
EXEC @lock = sp_getapplock @Resource = N'ibx deploy [infra].[Inbox]', @LockMode = N'Exclusive', @LockOwner = N'Transaction';
IF @lock < 0 THROW 50000, N'ibx deploy: the deploy lock was not granted', 1;
GO
IF SCHEMA_ID(PARSENAME(N'[infra]', 1)) IS NULL EXEC sp_executesql N'CREATE SCHEMA [infra]'
GO
IF OBJECT_ID(N'[infra].[Inbox]', N'U') IS NULL
CREATE TABLE [infra].[Inbox] (
    [Source]        NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [MessageId]     NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [Topic]         NVARCHAR(255) NOT NULL DEFAULT N'',
    [Payload]       NVARCHAR(MAX) NOT NULL DEFAULT N'',
    [Hash]          VARBINARY(MAX) NULL,
    [FirstSeenUtc]  DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),
    [LastSeenUtc]   DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),
    [Status]        VARCHAR(20) NOT NULL DEFAULT 'Seen',
    [LockedUntil]   DATETIME2(3) NULL,
    [OwnerToken]    UNIQUEIDENTIFIER NULL,
    [Attempt]       INT NOT NULL DEFAULT 0,
    [LastError]     NVARCHAR(MAX) NULL,
    [NextAttemptAt] DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(),
    [DueTimeUtc]    DATETIME2(3) NULL,
    [Starts]        INT NOT NULL DEFAULT 0,
    [TenantId]      NVARCHAR(64) NULL,
    [AggregateType] NVARCHAR(64) NULL,
    [AggregateId]   NVARCHAR(128) NULL,
    [Headers]       NVARCHAR(MAX) NULL,
    [ExpiresAt]     DATETIME2(3) NULL,
    [Priority]      SMALLINT NOT NULL DEFAULT 0,
    [Seq]           BIGINT IDENTITY(1, 1) NOT NULL,
    CONSTRAINT [PK_Inbox] PRIMARY KEY NONCLUSTERED ([Source], [MessageId]),
    CONSTRAINT [CX_Inbox] UNIQUE CLUSTERED ([Seq])
)
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'Starts') IS NULL ALTER TABLE [infra].[Inbox] ADD [Starts] INT NOT NULL DEFAULT 0
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'TenantId') IS NULL ALTER TABLE [infra].[Inbox] ADD [TenantId] NVARCHAR(64) NULL
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'AggregateType') IS NULL ALTER TABLE [infra].[Inbox] ADD [AggregateType] NVARCHAR(64) NULL
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'AggregateId') IS NULL ALTER TABLE [infra].[Inbox] ADD [AggregateId] NVARCHAR(128) NULL
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'Headers') IS NULL ALTER TABLE [infra].[Inbox] ADD [Headers] NVARCHAR(MAX) NULL
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'ExpiresAt') IS NULL ALTER TABLE [infra].[Inbox] ADD [ExpiresAt] DATETIME2(3) NULL
GO
IF COL_LENGTH(N'[infra].[Inbox]', N'Priority') IS NULL ALTER TABLE [infra].[Inbox] ADD [Priority] SMALLINT NOT NULL DEFAULT 0
GO
IF INDEXPROPERTY(OBJECT_ID(N'[infra].[Inbox]'), N'IX_Inbox_WorkQueue', 'IndexID') IS NULL
CREATE INDEX [IX_Inbox_WorkQueue] ON [infra].[Inbox] ([NextAttemptAt]) INCLUDE ([LockedUntil], [OwnerToken]) WHERE [Status] = 'Processing'
GO
IF INDEXPROPERTY(OBJECT_ID(N'[infra].[Inbox]'), N'IX_Inbox_Leased', 'IndexID') IS NULL
CREATE INDEX [IX_Inbox_Leased] ON [infra].[Inbox] ([LockedUntil]) WHERE [Status] = 'Processing' AND [LockedUntil] IS NOT NULL
GO
IF INDEXPROPERTY(OBJECT_ID(N'[infra].[Inbox]'), N'IX_Inbox_Cleanup', 'IndexID') IS NULL
CREATE INDEX [IX_Inbox_Cleanup] ON [infra].[Inbox] ([LastSeenUtc]) WHERE [Status] = 'Done'
GO
CREATE OR ALTER PROCEDURE [infra].[Inbox_Claim] @OwnerToken UNIQUEIDENTIFIER, @LeaseSeconds INT, @BatchSize INT, @MaxStarts INT = 3 AS
BEGIN
    SET NOCOUNT ON;
    WITH picked AS (
        SELECT TOP (@BatchSize) * FROM [infra].[Inbox] WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)
         WHERE [Status] = 'Processing' AND [NextAttemptAt] <= SYSUTCDATETIME()
           AND ([LockedUntil] IS NULL OR [LockedUntil] < SYSUTCDATETIME()) AND [Starts] < @MaxStarts
         ORDER BY [NextAttemptAt])
    UPDATE picked SET [OwnerToken] = @OwnerToken,
           [LockedUntil] = DATEADD(SECOND, @LeaseSeconds, SYSUTCDATETIME()), [Starts] = [Starts] + 1
    OUTPUT inserted.[Source], inserted.[MessageId], inserted.[Topic], inserted.[Payload], inserted.[Hash], DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), inserted.[FirstSeenUtc]), DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), inserted.[LastSeenUtc]), inserted.[Status], DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), inserted.[LockedUntil]), LOWER(CONVERT(NCHAR(36), inserted.[OwnerToken])), inserted.[Attempt], inserted.[LastError], DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), inserted.[NextAttemptAt]), DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), inserted.[DueTimeUtc]), inserted.[Starts], inserted.[TenantId], inserted.[AggregateType], inserted.[AggregateId], inserted.[Headers], DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2(3)), inserted.[ExpiresAt]);
END
GO
CREATE OR ALTER PROCEDURE [infra].[Inbox_Ack] @OwnerToken UNIQUEIDENTIFIER, @Sources NVARCHAR(MAX), @MessageIds NVARCHAR(MAX) AS
BEGIN
    SET NOCOUNT ON;
    UPDATE t SET [Status] = CASE WHEN SUBSTRING(CONVERT(NCHAR(36), t.[OwnerToken]), 15, 1) = N'0' THEN 'Processing' ELSE 'Done' END, [Starts] = CASE WHEN SUBSTRING(CONVERT(NCHAR(36), t.[OwnerToken]), 15, 1) = N'0' AND t.[Starts] > 0 THEN t.[Starts] - 1 ELSE t.[Starts] END, [OwnerToken] = NULL, [LockedUntil] = NULL, [LastSeenUtc] = SYSUTCDATETIME()
      FROM [infra].[Inbox] AS t JOIN (SELECT CAST(s.[value] AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2 AS [Source],
                                 CAST(m.[value] AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2 AS [MessageId]
                            FROM OPENJSON(@Sources) AS s JOIN OPENJSON(@MessageIds) AS m
                              ON m.[key] = s.[key]) AS k
        ON t.[Source] = k.[Source] AND t.[MessageId] = k.[MessageId]
     WHERE t.[OwnerToken] IN (@OwnerToken, CAST(STUFF(CONVERT(NCHAR(36), @OwnerToken), 15, 1, N'0') AS UNIQUEIDENTIFIER)) AND t.[Status] = 'Processing';
    SELECT @@ROWCOUNT;
END
GO
CREATE OR ALTER PROCEDURE [infra].[Inbox_Abandon] @DelayMs BIGINT, @Attempts INT, @LastError NVARCHAR(MAX), @OwnerToken UNIQUEIDENTIFIER, @Sources NVARCHAR(MAX), @MessageIds NVARCHAR(MAX) AS
BEGIN
    SET NOCOUNT ON;
    UPDATE t SET [NextAttemptAt] = DATEADD(MILLISECOND, CAST(COALESCE(@DelayMs, CASE WHEN t.[Attempt] >= 6 THEN 60000 ELSE 1000 * POWER(2, t.[Attempt]) END) % 86400000 AS INT), DATEADD(DAY, CAST(COALESCE(@DelayMs, CASE WHEN t.[Attempt] >= 6 THEN 60000 ELSE 1000 * POWER(2, t.[Attempt]) END) / 86400000 AS INT), SYSUTCDATETIME())), [Attempt] = t.[Attempt] + @Attempts, [LastError] = COALESCE(@LastError, t.[LastError]), [OwnerToken] = NULL, [LockedUntil] = NULL, [Starts] = CASE WHEN t.[Starts] > 0 THEN t.[Starts] - 1 ELSE 0 END
      FROM [infra].[Inbox] AS t JOIN (SELECT CAST(s.[value] AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2 AS [Source],
                                 CAST(m.[value] AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2 AS [MessageId]
                            FROM OPENJSON(@Sources) AS s JOIN OPENJSON(@MessageIds) AS m
                              ON m.[key] = s.[key]) AS k
        ON t.[Source] = k.[Source] AND t.[MessageId] = k.[MessageId]
     WHERE t.[OwnerToken] IN (@OwnerToken, CAST(STUFF(CONVERT(NCHAR(36), @OwnerToken), 15, 1, N'0') AS UNIQUEIDENTIFIER)) AND t.[Status] = 'Processing';
    SELECT @@ROWCOUNT;
END
GO
CREATE OR ALTER PROCEDURE [infra].[Inbox_Fail] @LastError NVARCHAR(MAX), @OwnerToken UNIQUEIDENTIFIER, @Sources NVARCHAR(MAX), @MessageIds NVARCHAR(MAX) AS
BEGIN
    SET NOCOUNT ON;
    UPDATE t SET [Status] = CASE WHEN SUBSTRING(CONVERT(NCHAR(36), t.[OwnerToken]), 15, 1) = N'0' THEN 'Processing' ELSE 'Dead' END, [Starts] = CASE WHEN SUBSTRING(CONVERT(NCHAR(36), t.[OwnerToken]), 15, 1) = N'0' AND t.[Starts] > 0 THEN t.[Starts] - 1 ELSE t.[Starts] END, [OwnerToken] = NULL, [LockedUntil] = NULL, [LastSeenUtc] = SYSUTCDATETIME(), [LastError] = @LastError
      FROM [infra].[Inbox] AS t JOIN (SELECT CAST(s.[value] AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2 AS [Source],
                                 CAST(m.[value] AS NVARCHAR(255)) COLLATE Latin1_General_100_BIN2 AS [MessageId]
                            FROM OPENJSON(@Sources) AS s JOIN OPENJSON(@MessageIds) AS m
                              ON m.[key] = s.[key]) AS k
        ON t.[Source] = k.[Source] AND t.[MessageId] = k.[MessageId]
     WHERE t.[OwnerToken] IN (@OwnerToken, CAST(STUFF(CONVERT(NCHAR(36), @OwnerToken), 15, 1, N'0') AS UNIQUEIDENTIFIER)) AND t.[Status] = 'Processing';
    SELECT @@ROWCOUNT;
END
GO
CREATE OR ALTER PROCEDURE [infra].[Inbox_ReapExpired] @MaxStarts INT = 3 AS
BEGIN
    SET NOCOUNT ON;
    UPDATE [infra].[Inbox] SET [OwnerToken] = NULL, [LockedUntil] = NULL,
           [Status] = CASE WHEN [Starts] >= @MaxStarts THEN 'Dead' ELSE [Status] END,
           [LastError] = CASE WHEN [Starts] >= @MaxStarts THEN N'crash loop: claimed '
               + CAST(@MaxStarts AS NVARCHAR(11)) + N' times without an outcome (the handler crashed or was killed, or its lease expired)' ELSE [LastError] END
     WHERE [Status] = 'Processing' AND [LockedUntil] IS NOT NULL AND [LockedUntil] < SYSUTCDATETIME();
    SELECT @@ROWCOUNT;
END
GO
IF @@TRANCOUNT > 0 AND (@@OPTIONS & 2) = 0 COMMIT;
GO
