-- Semantic search (README, design note 6): vectors derived asynchronously by `mcp-memory embed`.
-- Everything here is optional. Without pgvector on the server (or without the right to create the
-- extension) only the progress tables exist, and search stays full text; the code checks at run
-- time whether message_embeddings exists.

-- Which models have been used, with their dimension: vectors of two models are never compared.
CREATE TABLE embedding_models (
    model      text PRIMARY KEY CHECK (model <> '' AND length(model) <= 200),
    dim        integer NOT NULL CHECK (dim BETWEEN 1 AND 16000),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The watermark: per model and session, every message up to done_seq is embedded (or had no
-- text). Messages of a session are appended in seq order, so a session's watermark only grows.
CREATE TABLE embedding_watermarks (
    model      text NOT NULL REFERENCES embedding_models (model) ON DELETE CASCADE,
    session_id text NOT NULL,
    project_id text NOT NULL,
    done_seq   bigint NOT NULL CHECK (done_seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, model)
);
SELECT mm_enable_project_rls('embedding_watermarks'::regclass);

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RAISE NOTICE 'mcp-memory: pgvector is not available on this server; semantic search is off';
        RETURN;
    END IF;
    BEGIN
        EXECUTE 'CREATE EXTENSION IF NOT EXISTS vector';
    EXCEPTION
        WHEN insufficient_privilege THEN
            RAISE NOTICE 'mcp-memory: cannot create extension vector (needs a superuser); semantic search is off';
            RETURN;
    END;
    -- kind: 'message' (the message alone) or 'window' (the message after the one before it).
    -- The column has no fixed dimension; each (model, dim) gets its own partial HNSW index over
    -- the expression embedding::vector(dim) (mm_embedding_index).
    EXECUTE $sql$
        CREATE TABLE message_embeddings (
            session_id text NOT NULL,
            seq        bigint NOT NULL,
            model      text NOT NULL REFERENCES embedding_models (model) ON DELETE CASCADE,
            kind       text NOT NULL CHECK (kind IN ('message', 'window')),
            project_id text NOT NULL,
            embedding  vector NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (session_id, seq, model, kind)
        )$sql$;
    EXECUTE 'CREATE INDEX message_embeddings_model_project ON message_embeddings (model, project_id)';
    PERFORM mm_enable_project_rls('message_embeddings'::regclass);
END $$;

-- The HNSW index of one model (cosine distance), created when the model is first used.
CREATE FUNCTION mm_embedding_index(model_name text, dim integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    index_name text := format('message_embeddings_hnsw_%s_%s', left(md5(model_name), 12), dim);
BEGIN
    IF to_regclass('message_embeddings') IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON message_embeddings USING hnsw ((embedding::vector(%s)) '
                   'vector_cosine_ops) WHERE model = %L', index_name, dim, model_name);
    RETURN index_name;
END $$;

-- A host token may run `mcp-memory embed`: the index is created with the owner's rights.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION mm_embedding_index(text, integer) SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
    REVOKE ALL ON FUNCTION mm_embedding_index(text, integer) FROM PUBLIC;
    IF to_regrole('mcp_memory_rw') IS NULL THEN
        RETURN;
    END IF;
    GRANT EXECUTE ON FUNCTION mm_embedding_index(text, integer) TO mcp_memory_rw;
    GRANT SELECT ON embedding_models TO mcp_memory_ro, mcp_memory_rw, mcp_memory_archiver;
    GRANT INSERT ON embedding_models TO mcp_memory_rw;
END $$;
