/* schema_v0.h: tables as older releases deployed them, for the upgrade
 * tests (CORE-SCHEMA-UPGRADE and CORE-SCHEMA-UPGRADE-V1 in test_outbox.c
 * and test_inbox.c). The DDL is frozen in tests/schema/v0/<dialect>/ (the
 * first release) and tests/schema/v1/<dialect>/ (storage layout 1 with
 * Priority, before layout 2); these helpers read it under other names and
 * split it into statements. Test code only. */
#ifndef SCHEMA_V0_H
#define SCHEMA_V0_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file at `path` with `prefix` put before every `base` ("Outbox" becomes
 * "V0Outbox", "IX_Outbox_Ready" "IX_V0Outbox_Ready") except where base starts
 * a column name ("OutboxMessageId"), and every `schema_from` replaced by
 * `schema_to` (NULL: none). Malloc'ed; NULL when the file cannot be read. */
TT_UNUSED static char *v0_text(const char *path, const char *base, const char *prefix, const char *schema_from,
                     const char *schema_to) {
    FILE *f = fopen(path, "rb");
    char *in, *out;
    size_t n, o = 0, i, bl = strlen(base), pl = strlen(prefix);
    size_t fl = schema_from ? strlen(schema_from) : 0, tl = schema_to ? strlen(schema_to) : 0;
    long size;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    in = (char *)malloc((size_t)size + 1);
    n = in ? fread(in, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!in) return NULL;
    in[n] = '\0';
    out = (char *)malloc(n * (pl + tl + 1) + 1);
    for (i = 0; out && i < n;) {
        if (strncmp(in + i, base, bl) == 0 && strncmp(in + i + bl, "MessageId", 9) != 0) {
            memcpy(out + o, prefix, pl);
            o += pl;
        } else if (fl && strncmp(in + i, schema_from, fl) == 0) {
            memcpy(out + o, schema_to, tl);
            o += tl;
            i += fl;
            continue;
        }
        out[o++] = in[i++];
    }
    if (out) out[o] = '\0';
    free(in);
    return out;
}

/* The next statement of a schema text, cut out in place (its end
 * overwritten with NUL), or NULL at the end. Statements end with ";\n",
 * except inside a $$ body (PostgreSQL) and a trigger's BEGIN ... END
 * (SQLite) and between "DELIMITER $$" lines (MariaDB); lines starting
 * with "--" are skipped. */
TT_UNUSED static char *v0_next(char **pos) {
    char *start = *pos, *p;
    while (strncmp(start, "--", 2) == 0) {
        char *nl = strchr(start, '\n');
        start = nl ? nl + 1 : start + strlen(start);
    }
    if (!*start) return NULL;
    if (strncmp(start, "DELIMITER $$\n", 13) == 0 && (p = strstr(start, "$$\nDELIMITER ;\n")) != NULL) {
        *p = '\0'; /* a MariaDB trigger with a compound body (v1 on) */
        *pos = p + 15;
        return start + 13;
    }
    for (p = start; (p = strstr(p, ";\n")) != NULL; p++) {
        int dollars = 0;
        const char *q;
        char keep = *p;
        *p = '\0';
        for (q = start; (q = strstr(q, "$$")) != NULL; q += 2) dollars++;
        if (dollars % 2 == 0 && (dollars > 0 || !strstr(start, "\nBEGIN\n") ||
                                 (p - start >= 4 && strcmp(p - 4, "\nEND") == 0))) {
            *pos = p + 2;
            return start;
        }
        *p = keep;
    }
    *pos = start + strlen(start);
    return start;
}

/* A query that gives a table's columns as one text, "name type, ..." in
 * column order: {T} the quoted table, {N} its bare name. */
TT_UNUSED static const char *v0_columns_sql(const char *backend) {
    if (strcmp(backend, "postgresql") == 0)
        return "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
               "FROM pg_attribute WHERE attrelid = to_regclass('{T}') AND attnum > 0 AND NOT attisdropped";
    if (strcmp(backend, "mariadb") == 0)
        return "SELECT GROUP_CONCAT(CONCAT(COLUMN_NAME, ' ', COLUMN_TYPE) ORDER BY ORDINAL_POSITION "
               "SEPARATOR ', ') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
               "AND TABLE_NAME = '{N}'";
    return "SELECT group_concat(c, ', ') FROM (SELECT name || ' ' || type AS c FROM "
           "pragma_table_info('{N}') ORDER BY cid)";
}

/* A query that lists the indexes, triggers and functions of a table and
 * its join tables as one text, each name with the table name as "*", so
 * that an upgraded table compares equal to a new one. {S} is the quoted
 * schema, {N} the bare table name. */
TT_UNUSED static const char *v0_objects_sql(const char *backend) {
    if (strcmp(backend, "postgresql") == 0)
        return "SELECT string_agg(x, ', ' ORDER BY x) FROM ("
               "SELECT 'index ' || replace(c.relname, '{N}', '*') AS x FROM pg_index AS i "
               "JOIN pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid IN "
               "(to_regclass('{S}.\"{N}\"'), to_regclass('{S}.\"{N}Join\"'), to_regclass('{S}.\"{N}JoinMember\"')) "
               "UNION ALL SELECT 'trigger ' || replace(tgname, '{N}', '*') FROM pg_trigger WHERE NOT tgisinternal "
               "AND tgrelid IN (to_regclass('{S}.\"{N}\"'), to_regclass('{S}.\"{N}JoinMember\"')) "
               "UNION ALL SELECT 'function ' || replace(proname, '{N}', '*') || '(' || "
               "pg_get_function_identity_arguments(oid) || ')' FROM pg_proc "
               "WHERE pronamespace = to_regnamespace('{S}') AND proname LIKE '{N}\\_%') AS o";
    if (strcmp(backend, "mariadb") == 0)
        return "SELECT GROUP_CONCAT(x ORDER BY x SEPARATOR ', ') FROM ("
               "SELECT DISTINCT CONCAT('index ', REPLACE(INDEX_NAME, '{N}', '*')) AS x "
               "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
               "AND TABLE_NAME IN ('{N}', '{N}Join', '{N}JoinMember') "
               "UNION ALL SELECT CONCAT('trigger ', REPLACE(TRIGGER_NAME, '{N}', '*')) "
               "FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() "
               "AND EVENT_OBJECT_TABLE IN ('{N}', '{N}JoinMember')) AS o";
    return "SELECT group_concat(x, ', ') FROM (SELECT type || ' ' || replace(name, '{N}', '*') AS x "
           "FROM sqlite_master WHERE tbl_name IN ('{N}', '{N}Join', '{N}JoinMember') "
           "AND type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_autoindex%' ORDER BY 1)";
}

/* Whether every item of `want` (", "-separated) is in `have`; names_only:
 * items are "name type" and only the names count (a MariaDB table upgraded
 * in place keeps its layout-1 key types and column order, and its layout-1
 * indexes beside layout 2's). The first missing item is printed. */
TT_UNUSED static int v0_has_all(const char *have, const char *want, int names_only) {
    const char *p = want;
    while (*p) {
        size_t n = strcspn(p, ","), k = names_only ? strcspn(p, " ,") : n, at;
        const char *h = have;
        int found = 0;
        while (!found && *h) {
            size_t hn = strcspn(h, ","), hk = names_only ? strcspn(h, " ,") : hn;
            found = hk == k && strncmp(h, p, k) == 0;
            h += hn;
            while (*h == ',' || *h == ' ') h++;
        }
        if (!found) {
            printf("    missing: %.*s\n", (int)k, p);
            return 0;
        }
        at = n;
        p += at;
        while (*p == ',' || *p == ' ') p++;
    }
    return 1;
}

/* The dialect's "now plus `later`" for fixture rows: 'l' an hour ahead,
 * 'p' a minute ago, 'd' two days ago, 'k' the parked time, anything else
 * now. SQLite keeps Unix ms. */
TT_UNUSED static const char *v0_time(const char *backend, char when) {
    int pg = strcmp(backend, "postgresql") == 0, my = strcmp(backend, "mariadb") == 0;
    if (when == 'l')
        return pg ? "now() + interval '1 hour'" : my ? "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR" : "({W} + 3600000)";
    if (when == 'p')
        return pg ? "now() - interval '1 minute'" : my ? "UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE" : "({W} - 60000)";
    if (when == 'd') /* two days ago */
        return pg ? "now() - interval '2 days'" : my ? "UTC_TIMESTAMP(6) - INTERVAL 2 DAY" : "({W} - 172800000)";
    if (when == 'k') /* parked behind its ordering key's message in flight */
        return pg ? "CAST('10000-01-01 00:00:00+00' AS timestamptz)" : my ? "'9999-12-31 23:59:59.999999'"
                  : "253402300800000";
    return "{W}";
}
#endif
