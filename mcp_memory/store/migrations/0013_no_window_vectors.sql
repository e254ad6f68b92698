-- Semantic search ranks by each message's own vector only (mcp_memory/embeddings/texts.py): the
-- "window" vectors of earlier versions (a message with the one before it) are never read again,
-- so they go, with their share of the HNSW indexes. Without pgvector there is nothing to delete.
DO $$
BEGIN
    IF to_regclass('message_embeddings') IS NOT NULL THEN
        DELETE FROM message_embeddings WHERE kind = 'window';
    END IF;
END $$;
