-- Partitions that retire whole (README, "Partitions: months that leave whole").
--
-- The tables that grow (messages, message_search, message_embeddings) are range-partitioned by
-- part_month: the month (UTC) in which the session started, carried on every row of the session.
-- A session's rows therefore sit in ONE partition (seq stays gap-free per session, append_id stays
-- unique per session), and old history leaves as whole partitions (DETACH + DROP: a catalog change)
-- instead of a DELETE of millions of rows. A fork's own rows carry the fork's month; its inherited
-- prefix stays in the parent's partition (zero-copy, read through the lineage as before).
--
-- Keys: session_id first (the future distribution column, README design note 8), the partition key
-- last: (session_id, seq, part_month), (session_id, append_id, part_month); an index on
-- (session_id, seq, …) still returns a session's rows in seq order.
--
-- The month comes from the sessions row (sessions.part_month, generated from created_at, which may
-- no longer change); the write functions copy it onto each row. One partition per month
-- (<table>_pYYYYMM) plus a default partition (<table>_default) for anything outside the created
-- months; mm_ensure_partitions(months_ahead) creates the months ahead and moves rows out of the
-- default partition into months of their own; mm_retire_month detaches (and optionally drops) one
-- month of all three tables. The conversion below runs in the migration's one transaction: the
-- tables are locked for its length (README, "Upgrading": measured seconds per million messages).
-- Each step may run again on its own result (a table already partitioned is left as it is).

-- 1. The session's month, fixed for its life.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS part_month date
    GENERATED ALWAYS AS ((pg_catalog.date_trunc('month', created_at AT TIME ZONE 'UTC'))::date) STORED;

CREATE OR REPLACE FUNCTION mm_session_month_fixed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'sessions.created_at of % may not change: it places the session''s rows in month %',
            OLD.session_id, OLD.part_month USING ERRCODE = 'MM400';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS sessions_month_fixed ON sessions;
CREATE TRIGGER sessions_month_fixed BEFORE UPDATE OF created_at ON sessions
    FOR EACH ROW EXECUTE FUNCTION mm_session_month_fixed();

-- 2. Months that left the hot tables: read_session answers a coded error for their sessions.
CREATE TABLE IF NOT EXISTS retired_months (
    part_month date PRIMARY KEY CHECK (pg_catalog.date_trunc('month', part_month) = part_month),
    retired_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    sessions   bigint NOT NULL,
    messages   bigint NOT NULL,
    dropped    boolean NOT NULL,
    detached   text[] NOT NULL
);
ALTER TABLE retired_months ENABLE ROW LEVEL SECURITY;
-- tokens read which months retired (read_session's check), not the counts
DROP POLICY IF EXISTS mm_read ON retired_months;
CREATE POLICY mm_read ON retired_months FOR SELECT USING (true);
REVOKE ALL ON retired_months FROM PUBLIC;

-- 3. The partitioned tables this schema keeps (message_embeddings only where pgvector is).
CREATE OR REPLACE FUNCTION mm_partitioned_tables() RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT pg_catalog.array_agg(t ORDER BY o)
    FROM pg_catalog.unnest(ARRAY['messages', 'message_search', 'message_embeddings']) WITH ORDINALITY AS x(t, o)
    WHERE pg_catalog.to_regclass(t) IS NOT NULL
$$;

-- The partition of `tbl` that holds exactly month `m`, or NULL.
CREATE OR REPLACE FUNCTION mm_month_partition(tbl text, m date) RETURNS regclass
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass
    FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = pg_catalog.to_regclass(tbl)
      AND pg_catalog.pg_get_expr(c.relpartbound, c.oid)
          = pg_catalog.format('FOR VALUES FROM (%L) TO (%L)', m, (m + interval '1 month')::date)
$$;

-- One month partition of `tbl`. Rows of that month already in the default partition move into it
-- (a new partition may not overlap rows the default partition holds).
CREATE OR REPLACE FUNCTION mm_add_month_partition(tbl text, m date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    -- in the parent's schema (the function's search_path starts with pg_catalog)
    nsp text := (SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = pg_catalog.to_regclass(tbl));
    name text := pg_catalog.format('%I.%I', nsp, tbl || '_p' || pg_catalog.to_char(m, 'YYYYMM'));
    hi date := (m + interval '1 month')::date;
    spill boolean;
BEGIN
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT 1 FROM %I WHERE part_month >= %L AND part_month < %L)',
                              tbl || '_default', m, hi) INTO spill;
    IF spill THEN
        EXECUTE pg_catalog.format('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, tbl);
        EXECUTE pg_catalog.format('WITH moved AS (DELETE FROM %I WHERE part_month >= %L AND part_month < %L RETURNING *)'
                                  ' INSERT INTO %s SELECT * FROM moved', tbl || '_default', m, hi, name);
        EXECUTE pg_catalog.format('ALTER TABLE %I ATTACH PARTITION %s FOR VALUES FROM (%L) TO (%L)', tbl, name, m, hi);
    ELSE
        EXECUTE pg_catalog.format('CREATE TABLE %s PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', name, tbl, m, hi);
    END IF;
    -- reached only through the parent (whose grants and policies apply); direct access is refused
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', name);
    EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', name);
    RETURN name;
END $$;

-- Month partitions from the current month to `p_months_ahead` months after it, and one for every
-- month found in a default partition, in every partitioned table (one layout for all three); the
-- partitions it created. Run by `db migrate` and by `mcp-memory db partitions` (README, "Partitions").
CREATE OR REPLACE FUNCTION mm_ensure_partitions(p_months_ahead integer) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    tbl text;
    m date;
    months date[];
    spilled date[];
    made text[] := '{}';
    this_month date := pg_catalog.date_trunc('month', pg_catalog.now() AT TIME ZONE 'UTC')::date;
BEGIN
    IF p_months_ahead IS NULL OR p_months_ahead NOT BETWEEN 0 AND 120 THEN
        RAISE EXCEPTION 'months_ahead must be 0 to 120' USING ERRCODE = 'MM400';
    END IF;
    SELECT pg_catalog.array_agg((this_month + pg_catalog.make_interval(months => i))::date)
    INTO months FROM pg_catalog.generate_series(0, p_months_ahead) AS i;
    FOREACH tbl IN ARRAY coalesce(mm_partitioned_tables(), '{}') LOOP
        EXECUTE pg_catalog.format('SELECT pg_catalog.array_agg(DISTINCT part_month) FROM %I', tbl || '_default')
            INTO spilled;
        months := months || coalesce(spilled, '{}');
    END LOOP;
    FOREACH tbl IN ARRAY coalesce(mm_partitioned_tables(), '{}') LOOP
        FOR m IN SELECT DISTINCT x FROM pg_catalog.unnest(months) AS x ORDER BY 1 LOOP
            IF mm_month_partition(tbl, m) IS NULL THEN
                made := made || mm_add_month_partition(tbl, m);
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END $$;

-- Detach month `p_month` from every partitioned table (its sessions' rows leave the hot tables as
-- whole partitions), drop the detached tables when `p_drop`, record the month in retired_months.
-- A month is retired once: its sessions then answer read_session with a coded error.
CREATE OR REPLACE FUNCTION mm_retire_month(p_month date, p_drop boolean) RETURNS retired_months
LANGUAGE plpgsql AS $$
DECLARE
    tbl text;
    part regclass;
    done text[] := '{}';
    r retired_months;
    n_sessions bigint;
    n_messages bigint := 0;
    spilled boolean;
BEGIN
    IF p_month IS NULL OR pg_catalog.date_trunc('month', p_month) <> p_month THEN
        RAISE EXCEPTION 'month must be the first day of a month' USING ERRCODE = 'MM400';
    END IF;
    IF p_month >= pg_catalog.date_trunc('month', pg_catalog.now() AT TIME ZONE 'UTC')::date THEN
        RAISE EXCEPTION 'month % is not over yet: only past months retire', p_month USING ERRCODE = 'MM400';
    END IF;
    IF EXISTS (SELECT 1 FROM retired_months WHERE part_month = p_month) THEN
        RAISE EXCEPTION 'month % is already retired', p_month USING ERRCODE = 'MM409';
    END IF;
    -- the month's own rows, from the session rows (no scan of the partition)
    SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(last_seq - coalesce(fork_seq, 0)), 0)
    INTO n_sessions, n_messages FROM sessions WHERE part_month = p_month;
    FOREACH tbl IN ARRAY coalesce(mm_partitioned_tables(), '{}') LOOP
        part := mm_month_partition(tbl, p_month);
        IF part IS NULL THEN
            -- rows of the month that sit in the default partition first get a partition of their own
            EXECUTE pg_catalog.format('SELECT EXISTS (SELECT 1 FROM %I WHERE part_month = %L)', tbl || '_default', p_month)
                INTO STRICT spilled;
            IF NOT spilled THEN
                CONTINUE;
            END IF;
            part := mm_add_month_partition(tbl, p_month)::regclass;
        END IF;
        EXECUTE pg_catalog.format('ALTER TABLE %I DETACH PARTITION %s', tbl, part);
        done := done || part::text;
        IF p_drop THEN
            EXECUTE pg_catalog.format('DROP TABLE %s', part);
        END IF;
    END LOOP;
    INSERT INTO retired_months (part_month, sessions, messages, dropped, detached)
    VALUES (p_month, n_sessions, n_messages, p_drop, done)
    RETURNING * INTO r;
    RETURN r;
END $$;

-- 4. The conversion: for each table, the old one steps aside (renamed, with its indexes), a
--    partitioned table of the same columns + part_month takes its name, the rows move, then the
--    keys, indexes, foreign keys, policies, grants and dependent views (mm_read.messages of 0019)
--    are made again from the old table's catalog entries, and the old table is dropped.
CREATE TEMP TABLE mm_0021_views ON COMMIT DROP AS
SELECT pg_catalog.format('%I.%I', n.nspname, v.relname) AS name, pg_catalog.pg_get_viewdef(v.oid) AS body,
       v.reloptions, v.relacl, pg_catalog.pg_get_userbyid(v.relowner) AS owner
FROM pg_catalog.pg_class v JOIN pg_catalog.pg_namespace n ON n.oid = v.relnamespace
WHERE v.relkind = 'v' AND v.oid IN (
    SELECT r.ev_class FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
    WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass
      AND d.refobjid IN (SELECT c.oid FROM pg_catalog.pg_class c
                         WHERE c.oid IN (SELECT pg_catalog.to_regclass(t) FROM pg_catalog.unnest(
                                             ARRAY['messages', 'message_search', 'message_embeddings']) AS t)
                           AND c.relkind = 'r'));

DO $$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT name FROM mm_0021_views LOOP
        EXECUTE pg_catalog.format('DROP VIEW %s', v.name);
    END LOOP;
END $$;

DO $$
DECLARE
    tbl text;
    old text;
    keys text[];
    k text;
    x record;
    cols text;
    month_of text := '(pg_catalog.date_trunc(''month'', o.created_at AT TIME ZONE ''UTC''))::date';
BEGIN
    FOREACH tbl IN ARRAY ARRAY['messages', 'message_search', 'message_embeddings'] LOOP
        IF pg_catalog.to_regclass(tbl) IS NULL
           OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass(tbl)) = 'p' THEN
            CONTINUE;
        END IF;
        old := tbl || '_unpartitioned';
        keys := CASE tbl
            WHEN 'messages' THEN ARRAY['messages_pkey PRIMARY KEY (session_id, seq, part_month)',
                                       'messages_session_id_append_id_key UNIQUE (session_id, append_id, part_month)']
            WHEN 'message_search' THEN ARRAY['message_search_pkey PRIMARY KEY (session_id, seq, part_month)']
            ELSE ARRAY['message_embeddings_pkey PRIMARY KEY (session_id, seq, model, kind, part_month)'] END;
        EXECUTE pg_catalog.format('ALTER TABLE %I RENAME TO %I', tbl, old);
        FOR x IN SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
                 WHERE i.indrelid = old::regclass LOOP
            EXECUTE pg_catalog.format('ALTER INDEX %I RENAME TO %I', x.relname, 'mm0021_' || x.relname);
        END LOOP;
        EXECUTE pg_catalog.format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS,'
                                  ' part_month date NOT NULL) PARTITION BY RANGE (part_month)', tbl, old);
        EXECUTE pg_catalog.format('CREATE TABLE %I PARTITION OF %I DEFAULT', tbl || '_default', tbl);
        EXECUTE pg_catalog.format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl || '_default');
        EXECUTE pg_catalog.format('REVOKE ALL ON %I FROM PUBLIC', tbl || '_default');
        -- a month partition for every month that has sessions (before the rows come)
        FOR x IN SELECT DISTINCT s.part_month AS m FROM sessions s ORDER BY 1 LOOP
            PERFORM mm_add_month_partition(tbl, x.m);
        END LOOP;
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
        FROM pg_catalog.pg_attribute a WHERE a.attrelid = old::regclass AND a.attnum > 0 AND NOT a.attisdropped;
        EXECUTE pg_catalog.format('INSERT INTO %I (%s, part_month) SELECT %s, coalesce(s.part_month, %s) FROM %I o'
                                  ' LEFT JOIN sessions s ON s.session_id = o.session_id',
                                  tbl, cols, (SELECT pg_catalog.string_agg('o.' || c, ', ')
                                              FROM pg_catalog.unnest(pg_catalog.string_to_array(cols, ', ')) AS c),
                                  month_of, old);
        FOREACH k IN ARRAY keys LOOP
            EXECUTE pg_catalog.format('ALTER TABLE %I ADD CONSTRAINT %s', tbl, k);
        END LOOP;
        -- the other indexes (GIN of the search rows, HNSW of each embedding model, …), same names
        FOR x IN SELECT c.relname, pg_catalog.pg_get_indexdef(i.indexrelid) AS def
                 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
                 WHERE i.indrelid = old::regclass
                   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint n WHERE n.conindid = i.indexrelid) LOOP
            EXECUTE pg_catalog.regexp_replace(
                pg_catalog.regexp_replace(x.def, '^CREATE (UNIQUE )?INDEX \S+ ON (ONLY )?\S+ ',
                                          'CREATE \1INDEX ' || pg_catalog.quote_ident(pg_catalog.substr(x.relname, 8))
                                          || ' ON ' || pg_catalog.quote_ident(tbl) || ' '), '\s+$', '');
        END LOOP;
        FOR x IN SELECT n.conname, pg_catalog.pg_get_constraintdef(n.oid) AS def FROM pg_catalog.pg_constraint n
                 WHERE n.conrelid = old::regclass AND n.contype = 'f' LOOP
            EXECUTE pg_catalog.format('ALTER TABLE %I ADD CONSTRAINT %I %s', tbl, x.conname, x.def);
        END LOOP;
        FOR x IN SELECT t.tgname, pg_catalog.pg_get_triggerdef(t.oid) AS def FROM pg_catalog.pg_trigger t
                 WHERE t.tgrelid = old::regclass AND NOT t.tgisinternal LOOP
            EXECUTE pg_catalog.regexp_replace(x.def, ' ON \S+ ', ' ON ' || pg_catalog.quote_ident(tbl) || ' ');
        END LOOP;
        -- row-level security: the same switches and policies
        IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c WHERE c.oid = old::regclass) THEN
            EXECUTE pg_catalog.format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
        END IF;
        IF (SELECT c.relforcerowsecurity FROM pg_catalog.pg_class c WHERE c.oid = old::regclass) THEN
            EXECUTE pg_catalog.format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
        END IF;
        FOR x IN SELECT p.polname, p.polpermissive, p.polcmd,
                        pg_catalog.pg_get_expr(p.polqual, p.polrelid) AS qual,
                        pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) AS chk,
                        (SELECT pg_catalog.string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r)) END, ', ')
                         FROM pg_catalog.unnest(p.polroles) AS r) AS roles
                 FROM pg_catalog.pg_policy p WHERE p.polrelid = old::regclass LOOP
            EXECUTE pg_catalog.format('CREATE POLICY %I ON %I AS %s FOR %s TO %s%s%s', x.polname, tbl,
                CASE WHEN x.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                CASE x.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                              WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                x.roles,
                CASE WHEN x.qual IS NOT NULL THEN ' USING (' || x.qual || ')' ELSE '' END,
                CASE WHEN x.chk IS NOT NULL THEN ' WITH CHECK (' || x.chk || ')' ELSE '' END);
        END LOOP;
        -- grants: the table's and each column's, as the old table had them
        EXECUTE pg_catalog.format('REVOKE ALL ON %I FROM PUBLIC', tbl);
        FOR x IN SELECT a.privilege_type, a.grantee, a.is_grantable
                 FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) AS a
                 WHERE c.oid = old::regclass AND a.grantee <> c.relowner LOOP
            EXECUTE pg_catalog.format('GRANT %s ON %I TO %s%s', x.privilege_type, tbl,
                CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)) END,
                CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        FOR x IN SELECT t.attname, a.privilege_type, a.grantee
                 FROM pg_catalog.pg_attribute t, pg_catalog.aclexplode(t.attacl) AS a
                 WHERE t.attrelid = old::regclass AND t.attacl IS NOT NULL LOOP
            EXECUTE pg_catalog.format('GRANT %s (%I) ON %I TO %s', x.privilege_type, x.attname, tbl,
                CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)) END);
        END LOOP;
        EXECUTE pg_catalog.format('DROP TABLE %I', old);
        EXECUTE pg_catalog.format('ANALYZE %I', tbl);
    END LOOP;
END $$;

DO $$
DECLARE
    v record;
    a record;
BEGIN
    FOR v IN SELECT * FROM mm_0021_views LOOP
        EXECUTE pg_catalog.format('CREATE VIEW %s%s AS %s', v.name,
            CASE WHEN v.reloptions IS NOT NULL THEN ' WITH (' || pg_catalog.array_to_string(v.reloptions, ', ') || ')' ELSE '' END,
            v.body);
        IF v.owner <> current_user THEN
            EXECUTE pg_catalog.format('ALTER VIEW %s OWNER TO %I', v.name, v.owner);
        END IF;
        FOR a IN SELECT x.privilege_type, x.grantee FROM pg_catalog.aclexplode(v.relacl) AS x
                 WHERE x.grantee <> (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = v.owner) LOOP
            EXECUTE pg_catalog.format('GRANT %s ON %s TO %s', a.privilege_type, v.name,
                CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END);
        END LOOP;
    END LOOP;
END $$;

-- 5. The write functions carry the session's month onto its rows (and prune by it).
CREATE OR REPLACE FUNCTION mm_append(p_session_id text, p_append_ids text[], p_roles text[], p_payloads text[],
                                     p_hashes bytea[], p_created timestamptz[])
RETURNS TABLE(seq bigint, duplicate boolean)
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    trusted boolean := mm_require_write(s.project_id);
    who text := mm_caller();
    n integer := coalesce(pg_catalog.cardinality(p_append_ids), 0);
    last bigint := s.last_seq;
    payload jsonb;
    digest bytea;
    stored_seq bigint;
    stored_hash bytea;
BEGIN
    IF n = 0 OR pg_catalog.cardinality(p_roles) <> n OR pg_catalog.cardinality(p_payloads) <> n
       OR (p_hashes IS NOT NULL AND pg_catalog.cardinality(p_hashes) <> n)
       OR (p_created IS NOT NULL AND pg_catalog.cardinality(p_created) <> n) THEN
        RAISE EXCEPTION 'append needs one append_id, role and payload per message' USING ERRCODE = 'MM400';
    END IF;
    IF EXISTS (SELECT 1 FROM retired_months r WHERE r.part_month = s.part_month) THEN
        RAISE EXCEPTION 'session % belongs to month %, which has retired from the hot tables: append to a new session',
            p_session_id, pg_catalog.to_char(s.part_month, 'YYYY-MM') USING ERRCODE = 'MM409';
    END IF;
    FOR i IN 1..n LOOP
        IF p_append_ids[i] IS NULL OR p_append_ids[i] = '' OR pg_catalog.length(p_append_ids[i]) > 200 THEN
            RAISE EXCEPTION 'messages[%] append_id must be 1 to 200 characters', i - 1 USING ERRCODE = 'MM400';
        END IF;
        payload := mm_check_message(i, p_roles[i], p_payloads[i], p_created[i]);
        digest := CASE WHEN trusted AND p_hashes[i] IS NOT NULL THEN p_hashes[i] ELSE mm_payload_hash(payload) END;
        SELECT m.seq, m.payload_hash INTO stored_seq, stored_hash
        FROM messages m WHERE m.session_id = p_session_id AND m.part_month = s.part_month
                          AND m.append_id = p_append_ids[i];
        IF FOUND THEN
            IF stored_hash <> digest THEN
                RAISE EXCEPTION 'append_id % was already used with a different payload (seq %)', p_append_ids[i],
                    stored_seq USING ERRCODE = 'MM409';
            END IF;
            seq := stored_seq;
            duplicate := true;
        ELSE
            last := last + 1;
            INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,
                                  written_by, part_month)
            VALUES (p_session_id, last, s.project_id, p_append_ids[i], p_roles[i], payload, digest,
                    coalesce(p_created[i], pg_catalog.now()), who, s.part_month);
            seq := last;
            duplicate := false;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last <> s.last_seq THEN
        UPDATE sessions SET last_seq = last, updated_at = pg_catalog.now() WHERE session_id = p_session_id;
        UPDATE search_progress SET stored_seq = last WHERE session_id = p_session_id;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION mm_index_messages(p_session_id text, p_seqs bigint[], p_doc_lens integer[], p_tsvs text[],
                                             p_terms text[], p_dfs bigint[], p_shard smallint, p_indexed_seq bigint,
                                             p_echoes boolean[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
    mark bigint;
    n integer := coalesce(pg_catalog.cardinality(p_seqs), 0);
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    IF p_shard < 0 OR p_shard >= 64 OR pg_catalog.cardinality(p_doc_lens) <> n OR pg_catalog.cardinality(p_tsvs) <> n
       OR coalesce(pg_catalog.cardinality(p_terms), 0) <> coalesce(pg_catalog.cardinality(p_dfs), 0)
       OR (p_echoes IS NOT NULL AND pg_catalog.cardinality(p_echoes) <> n) THEN
        RAISE EXCEPTION 'index rows do not line up' USING ERRCODE = 'MM400';
    END IF;
    SELECT coalesce(p.indexed_seq, s.fork_seq, 0) INTO mark
    FROM (SELECT 1) AS one LEFT JOIN search_progress p ON p.session_id = p_session_id;
    IF p_indexed_seq < mark OR p_indexed_seq > s.last_seq
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(p_seqs) AS x(seq) WHERE x.seq <= mark OR x.seq > p_indexed_seq) THEN
        RAISE EXCEPTION 'index rows of session % must lie in (%, %]', p_session_id, mark, s.last_seq
            USING ERRCODE = 'MM400';
    END IF;
    INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv, echo, part_month)
    SELECT p_session_id, m.seq, s.project_id, m.role, m.created_at, greatest(x.doc_len, 0), x.tsv::tsvector,
           coalesce(x.echo, false), s.part_month
    FROM ROWS FROM (pg_catalog.unnest(p_seqs), pg_catalog.unnest(p_doc_lens), pg_catalog.unnest(p_tsvs),
                    pg_catalog.unnest(coalesce(p_echoes, '{}'::boolean[]))) AS x(seq, doc_len, tsv, echo)
    JOIN messages m ON m.session_id = p_session_id AND m.part_month = s.part_month AND m.seq = x.seq;
    IF n > 0 THEN
        INSERT INTO search_term_stats AS t (project_id, term, shard, df)
        SELECT s.project_id, x.term, p_shard, least(x.df, n)
        FROM ROWS FROM (pg_catalog.unnest(p_terms), pg_catalog.unnest(p_dfs)) AS x(term, df)
        WHERE x.df > 0
        ORDER BY x.term
        ON CONFLICT (term, project_id, shard) DO UPDATE SET df = t.df + excluded.df;
        INSERT INTO search_doc_stats AS d (project_id, shard, docs, total_len)
        SELECT s.project_id, p_shard, n, coalesce(pg_catalog.sum(greatest(l, 0)), 0) FROM pg_catalog.unnest(p_doc_lens) AS l
        ON CONFLICT (project_id, shard) DO UPDATE SET docs = d.docs + excluded.docs,
                                                      total_len = d.total_len + excluded.total_len;
    END IF;
    INSERT INTO search_progress AS p (session_id, project_id, indexed_seq, stored_seq)
    VALUES (p_session_id, s.project_id, p_indexed_seq, s.last_seq)
    ON CONFLICT (session_id) DO UPDATE
    SET indexed_seq = greatest(p.indexed_seq, excluded.indexed_seq),
        stored_seq = greatest(p.stored_seq, excluded.stored_seq), updated_at = pg_catalog.now();
END $$;

CREATE OR REPLACE FUNCTION mm_store_embeddings(p_session_id text, p_model text, p_seqs bigint[], p_kinds text[],
                                               p_vectors text[], p_done_seq bigint)
RETURNS void
LANGUAGE plpgsql AS $_$
DECLARE
    s sessions;
    dim integer;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session_id;
    IF NOT FOUND OR NOT mm_may_read(s.project_id) THEN
        RAISE EXCEPTION 'session % does not exist', p_session_id USING ERRCODE = 'MM404';
    END IF;
    PERFORM mm_require_write(s.project_id);
    SELECT m.dim INTO dim FROM embedding_models m WHERE m.model = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'embedding model % is not registered', p_model USING ERRCODE = 'MM400';
    END IF;
    IF p_done_seq > s.last_seq THEN
        RAISE EXCEPTION 'done_seq % is beyond the session''s last seq (%)', p_done_seq, s.last_seq USING ERRCODE = 'MM400';
    END IF;
    IF coalesce(pg_catalog.cardinality(p_seqs), 0) > 0 THEN
        EXECUTE 'INSERT INTO message_embeddings (session_id, seq, model, kind, project_id, embedding, part_month)'
                ' SELECT $1, e.seq, $2, e.kind, $3, e.embedding::vector(' || dim::text || ')::vector, $7'
                ' FROM ROWS FROM (pg_catalog.unnest($4::bigint[]), pg_catalog.unnest($5::text[]),'
                ' pg_catalog.unnest($6::text[])) AS e(seq, kind, embedding)'
                ' WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = $1 AND m.part_month = $7'
                ' AND m.seq = e.seq)'
                ' ON CONFLICT (session_id, seq, model, kind, part_month) DO NOTHING'
        USING p_session_id, p_model, s.project_id, p_seqs, p_kinds, p_vectors, s.part_month;
    END IF;
    INSERT INTO embedding_watermarks AS w (model, session_id, project_id, done_seq)
    VALUES (p_model, p_session_id, s.project_id, p_done_seq)
    ON CONFLICT (session_id, model)
    DO UPDATE SET done_seq = greatest(w.done_seq, excluded.done_seq), updated_at = pg_catalog.now();
END $_$;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('mm_append', 'mm_index_messages', 'mm_store_embeddings', 'mm_session_month_fixed',
                            'mm_partitioned_tables', 'mm_month_partition', 'mm_add_month_partition',
                            'mm_ensure_partitions', 'mm_retire_month')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
    ALTER FUNCTION mm_append(text, text[], text[], text[], bytea[], timestamptz[]) SECURITY DEFINER;
    ALTER FUNCTION mm_index_messages(text, bigint[], integer[], text[], text[], bigint[], smallint, bigint, boolean[])
        SECURITY DEFINER;
    ALTER FUNCTION mm_store_embeddings(text, text, bigint[], text[], text[], bigint) SECURITY DEFINER;
    -- partition upkeep is the owner's: no token runs DDL
    REVOKE ALL ON FUNCTION mm_partitioned_tables(), mm_month_partition(text, date), mm_add_month_partition(text, date),
        mm_ensure_partitions(integer), mm_retire_month(date, boolean) FROM PUBLIC;
    IF to_regrole('mcp_memory_rw') IS NOT NULL THEN
        GRANT SELECT (part_month, retired_at) ON retired_months TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    END IF;
END $$;

SELECT mm_ensure_partitions(3);
