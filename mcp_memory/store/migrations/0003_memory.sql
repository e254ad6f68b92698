-- Memory: agents, decisions, session context, synonyms and the full-text search index
-- (README, design note 6). Per-session tables are keyed by session_id first and carry
-- project_id, so that they can be distributed by session_id and protected by row-level security.

-- Agents are named by sessions.agent_source; a trigger keeps the list complete for every write path
-- (MCP, REST, import, restore) without each one having to remember it.
CREATE TABLE agents (
    name        text PRIMARY KEY CHECK (name <> ''),
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION mcp_memory_register_agent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.agent_source IS NOT NULL AND NEW.agent_source <> '' THEN
        INSERT INTO agents (name) VALUES (NEW.agent_source) ON CONFLICT (name) DO NOTHING;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER sessions_register_agent AFTER INSERT OR UPDATE OF agent_source ON sessions
    FOR EACH ROW EXECUTE FUNCTION mcp_memory_register_agent();

INSERT INTO agents (name)
SELECT DISTINCT agent_source FROM sessions WHERE agent_source IS NOT NULL AND agent_source <> ''
ON CONFLICT (name) DO NOTHING;

-- Decisions: what was proposed, accepted, rejected or superseded, and why.
-- decision_id is a uuid-based text id, unique by construction; the primary key still starts with
-- session_id (README, design note 8) and lookups by id use their own index.
CREATE TABLE decisions (
    session_id    text NOT NULL REFERENCES sessions (session_id),
    decision_id   text NOT NULL CHECK (decision_id ~ '^dec_[0-9a-f]{32}$'),
    project_id    text NOT NULL,
    message_seq   bigint CHECK (message_seq > 0),
    decision_type text NOT NULL CHECK (decision_type <> '' AND length(decision_type) <= 100),
    summary       text NOT NULL CHECK (summary <> ''),
    status        text NOT NULL DEFAULT 'accepted'
                  CHECK (status IN ('proposed', 'accepted', 'rejected', 'superseded')),
    rationale     text,
    alternatives  jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(alternatives) = 'array'),
    supersedes    text,
    superseded_by text,
    metadata      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    visibility    text NOT NULL DEFAULT 'team' CHECK (visibility IN ('private', 'team', 'public')),
    version       integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    tsv           tsvector NOT NULL DEFAULT ''::tsvector,
    created_by    text NOT NULL DEFAULT current_user,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, decision_id)
);
CREATE INDEX decisions_id ON decisions (decision_id);
CREATE INDEX decisions_project_created ON decisions (project_id, created_at DESC);
CREATE INDEX decisions_status_type ON decisions (project_id, status, decision_type);
CREATE INDEX decisions_tsv ON decisions USING gin (tsv);

-- Session context: key/value facts of a session (selected stack, constraints, related docs …).
-- Every set_context adds a revision; the current value is the newest revision of the key.
CREATE TABLE session_context (
    session_id text NOT NULL REFERENCES sessions (session_id),
    key        text NOT NULL CHECK (key <> '' AND length(key) <= 200),
    revision   integer NOT NULL CHECK (revision >= 1),
    project_id text NOT NULL,
    value      jsonb NOT NULL,
    created_by text NOT NULL DEFAULT current_user,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, key, revision)
);

-- Synonym groups applied at query time (消息队列 ↔ MQ). Global: words mean the same in every project.
CREATE TABLE synonyms (
    term       text PRIMARY KEY CHECK (term <> '' AND length(term) <= 200),
    group_id   bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX synonyms_group ON synonyms (group_id);
CREATE SEQUENCE synonym_groups;

-- The search index: one row per stored message (never per inherited one: a fork's history is found
-- once, in the session that holds it). The tsvector is built by the core's tokenizer (CJK unigrams +
-- bigrams, split identifiers, stemmed Latin words), so no extension or text-search config is needed.
CREATE TABLE message_search (
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    project_id text NOT NULL,
    role       text NOT NULL,
    created_at timestamptz NOT NULL,
    doc_len    integer NOT NULL CHECK (doc_len >= 0),
    tsv        tsvector NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX message_search_tsv ON message_search USING gin (tsv);
CREATE INDEX message_search_project_created ON message_search (project_id, created_at DESC);

-- BM25 statistics, kept on append (scanning a project per query does not scale). Counters are
-- split into shards by session so that concurrent appends to different sessions of one project
-- rarely wait on the same row; readers sum the shards.
CREATE TABLE search_term_stats (
    project_id text NOT NULL,
    term       text NOT NULL,
    shard      smallint NOT NULL,
    df         bigint NOT NULL,
    PRIMARY KEY (term, project_id, shard)  -- term first: one index serves one project and all projects
);

CREATE TABLE search_doc_stats (
    project_id text NOT NULL,
    shard      smallint NOT NULL,
    docs       bigint NOT NULL,
    total_len  bigint NOT NULL,
    PRIMARY KEY (project_id, shard)
);
