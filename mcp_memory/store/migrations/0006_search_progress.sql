-- The search index follows appends instead of riding in them (README, design note 6). An append
-- stores its messages and commits; the core's indexer then tokenizes them and writes
-- message_search and the BM25 statistics in a transaction of its own, batching what arrived
-- meanwhile. The append no longer waits for tokenizing, the GIN index and the statistics upserts.

-- Per session: every own message up to indexed_seq is in message_search; stored_seq is the
-- session's last_seq, moved by the append in its own transaction. Where stored_seq > indexed_seq
-- the indexer has work: a process that died between its append and its indexing pass leaves the
-- row behind, and any later search or indexer of the project catches it up (the partial index
-- makes finding such rows cheap).
CREATE TABLE search_progress (
    session_id  text PRIMARY KEY,
    project_id  text NOT NULL,
    indexed_seq bigint NOT NULL CHECK (indexed_seq >= 0),
    stored_seq  bigint NOT NULL CHECK (stored_seq >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX search_progress_pending ON search_progress (project_id) WHERE stored_seq > indexed_seq;

-- Until now every append indexed its messages in its own transaction: the watermark of an
-- existing session is the last message it has in the index (or its fork point).
INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq)
SELECT s.session_id, s.project_id,
       greatest(coalesce(s.fork_seq, 0), coalesce((SELECT max(ms.seq) FROM message_search ms
                                                   WHERE ms.session_id = s.session_id), 0)),
       s.last_seq
FROM sessions s;

SELECT mm_enable_project_rls('search_progress'::regclass);

-- Two costs of a batch append that buy nothing:
-- * the foreign key to sessions is checked once per stored row by a trigger (40% of the server
--   time of a 10k-message batch). The append already locks its session row FOR UPDATE before it
--   inserts, which proves the session exists and keeps it there; sessions are never deleted.
-- * no query reads messages by (project_id, created_at): searches and recall read message_search,
--   which has its own index on those columns.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_session_id_fkey;
DROP INDEX IF EXISTS messages_project_created;
