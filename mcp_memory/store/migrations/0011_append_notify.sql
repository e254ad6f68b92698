-- read_session(wait_seconds): a reader waiting for new messages is woken by a NOTIFY on
-- `mcp_memory_append` sent when a session's last_seq moves — by the append function (mm_append,
-- migration 0007) and by an owner's COPY of a big batch (set_last_seq) alike, so a trigger rather
-- than a change to each write path. PostgreSQL delivers it at commit, i.e. once the messages can be
-- read. Any role may LISTEN on any channel, whatever its projects: the payload is the SHA-256 of the
-- session id (a waiter knows the id it waits for; nobody learns ids from the channel).
CREATE FUNCTION mm_notify_append() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mcp_memory_append', encode(sha256(convert_to(NEW.session_id, 'UTF8')), 'hex'));
    RETURN NULL;
END $$;

CREATE TRIGGER sessions_notify_append
    AFTER UPDATE OF last_seq ON sessions
    FOR EACH ROW WHEN (NEW.last_seq > OLD.last_seq)
    EXECUTE FUNCTION mm_notify_append();

DO $$
BEGIN
    REVOKE ALL ON FUNCTION mm_notify_append() FROM PUBLIC;
    EXECUTE format('ALTER FUNCTION mm_notify_append() SET search_path = %I, pg_temp', current_schema());
END $$;
