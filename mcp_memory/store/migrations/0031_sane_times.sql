-- Times every reader can show (README, design notes: "Checked writes"): a session, message, snapshot, decision or context
-- revision carries a time from 1970-01-01 to 9999-12-31 (UTC). PostgreSQL itself stores years up
-- to 294276, but no client's clock reads them (a datetime ends with year 9999), so one such row made
-- the session list fail for everyone. mm_append checked its messages already (migration 0014); the
-- owner's own writes (restore, a bulk import's COPY, raw SQL) did not. CHECK constraints hold for
-- every writer, whichever function or login it is.
--
-- NOT VALID: rows stored before this migration are not scanned (a large messages table would be
-- read whole under a lock, and an out-of-range row already there would stop the migration); every
-- new or changed row is checked.

ALTER TABLE sessions ADD CONSTRAINT sessions_created_at_range
    CHECK (created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00') NOT VALID;
ALTER TABLE sessions ADD CONSTRAINT sessions_updated_at_range
    CHECK (updated_at >= '1970-01-01 00:00:00+00' AND updated_at < '10000-01-01 00:00:00+00') NOT VALID;
ALTER TABLE messages ADD CONSTRAINT messages_created_at_range
    CHECK (created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00') NOT VALID;
ALTER TABLE snapshots ADD CONSTRAINT snapshots_created_at_range
    CHECK (created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00') NOT VALID;
ALTER TABLE decisions ADD CONSTRAINT decisions_times_range
    CHECK (created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00'
           AND updated_at >= '1970-01-01 00:00:00+00' AND updated_at < '10000-01-01 00:00:00+00') NOT VALID;
ALTER TABLE session_context ADD CONSTRAINT session_context_created_at_range
    CHECK (created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00') NOT VALID;

-- A month retired before this migration (`db partitions --retire`, migration 0023) is a table apart
-- that did not get the constraint; attaching it again (mm_restore_month) needs it, as a partition
-- made from now on has it.
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT d FROM retired_months r, pg_catalog.unnest(r.detached) AS d LOOP
        IF t LIKE 'messages\_p%' AND pg_catalog.to_regclass(pg_catalog.quote_ident(t)) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c
                           WHERE c.conrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(t))
                             AND c.conname = 'messages_created_at_range') THEN
            EXECUTE pg_catalog.format('ALTER TABLE %I ADD CONSTRAINT messages_created_at_range CHECK (created_at >= '
                                      '''1970-01-01 00:00:00+00'' AND created_at < ''10000-01-01 00:00:00+00'') NOT VALID',
                                      t);
        END IF;
    END LOOP;
END $$;
