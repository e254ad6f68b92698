-- Search whose cost follows the answer (README, "Growth"): a query whose words match more rows than
-- search_store.NEWEST_ABOVE ranks only the newest NEWEST_CUT of them. Within a project the index
-- message_search_project_created gives those newest first; across projects this one does, so that a
-- common word over all projects reads a few thousand rows newest first instead of every match.
-- Built in the migration's transaction: writes to message_search wait for the build (about 2 s per
-- million indexed messages on a 2-core machine).
CREATE INDEX IF NOT EXISTS message_search_created ON message_search (created_at DESC);
