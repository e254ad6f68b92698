-- query_memory (store/query_store.py, migration 0019)

-- name: query_limits
SELECT pg_catalog.set_config('statement_timeout', %(timeout)s, true),
       pg_catalog.set_config('work_mem', %(work_mem)s, true),
       pg_catalog.set_config('idle_in_transaction_session_timeout', '60s', true)

-- name: query_function_present
SELECT pg_catalog.to_regprocedure('mm_read.query(text, integer, integer, integer)') IS NOT NULL

-- name: query_run
SELECT mm_read.query(%(sql)s::text, %(rows)s::integer, %(cell)s::integer, %(max)s::integer)

-- name: query_type_names
SELECT pg_catalog.format_type(t.oid, nullif(t.mod, -1))
FROM ROWS FROM (pg_catalog.unnest(%(oids)s::oid[]), pg_catalog.unnest(%(mods)s::integer[])) WITH ORDINALITY AS t(oid, mod, n)
ORDER BY t.n
