-- Relay lineage (README.md, "Relays"). `export` writes a session into another agent's native format;
-- when that native session is continued there and captured or imported again, it must become a fork
-- of the source at the exported seq that stores only the new turns, not a second copy of the history.
-- The export records which native session came from which snapshot (taken at the exported seq), and
-- the append_ids the native session starts with; the import finds the record and forks.

CREATE TABLE relay_exports (
    project_id   text NOT NULL,
    agent        text NOT NULL CHECK (agent ~ '^[a-z][a-z0-9-]{0,39}$'),
    native_id    text NOT NULL CHECK (native_id <> '' AND length(native_id) <= 300),
    snapshot_id  bigint NOT NULL REFERENCES snapshots (snapshot_id),
    session_id   text NOT NULL REFERENCES sessions (session_id),
    carried      text[] NOT NULL CHECK (cardinality(carried) <= 100000),  -- append_ids, in order
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, agent, native_id)
);
CREATE INDEX relay_exports_native ON relay_exports (agent, native_id);
SELECT mm_enable_project_rls('relay_exports', false, ARRAY['created_by']);

-- Record (or renew) a relay: a snapshot of the session at its last seq (the newest one when it is
-- already there), then the record. The caller must be able to write the session.
CREATE FUNCTION mm_record_relay(p_session_id text, p_agent text, p_native_id text, p_carried text[])
RETURNS relay_exports
LANGUAGE plpgsql AS $$
DECLARE
    s sessions := mm_writable_session(p_session_id);
    snap_id bigint;
    r relay_exports;
BEGIN
    SELECT snapshot_id INTO snap_id FROM snapshots
    WHERE session_id = s.session_id AND up_to_seq = s.last_seq ORDER BY snapshot_id DESC LIMIT 1;
    IF NOT FOUND THEN
        SELECT snapshot_id INTO snap_id
        FROM mm_snapshot(s.session_id, format('relay to %s', p_agent), jsonb_build_object('relay_to', p_agent));
    END IF;
    INSERT INTO relay_exports (project_id, agent, native_id, snapshot_id, session_id, carried, created_by)
    VALUES (s.project_id, p_agent, p_native_id, snap_id, s.session_id, coalesce(p_carried, '{}'), mm_caller())
    ON CONFLICT (project_id, agent, native_id) DO UPDATE
        SET snapshot_id = EXCLUDED.snapshot_id, session_id = EXCLUDED.session_id, carried = EXCLUDED.carried,
            created_by = EXCLUDED.created_by, created_at = now()
    RETURNING * INTO r;
    RETURN r;
END $$;

DO $$
DECLARE
    f regprocedure := 'mm_record_relay(text, text, text, text[])'::regprocedure;
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    IF to_regrole('mcp_memory_rw') IS NOT NULL THEN
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mcp_memory_rw, mcp_memory_ro, mcp_memory_archiver', f);
    END IF;
END $$;
