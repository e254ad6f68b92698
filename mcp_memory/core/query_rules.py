"""What a query_memory statement may name, checked on PostgreSQL's own parse tree (pglast, the
server's parser as a library) before anything is sent.

The database confines the statement too (core/query.py), but a role can always read the system
catalogs and call the built-in functions granted to PUBLIC: role and database names, row counts,
settings, large objects (`lo_from_bytea` runs even in a READ ONLY transaction). So the statement
is held to an allow-list: one SELECT (WITH, VALUES, set operations allowed), relations only the
views of mm_read (or the statement's own WITH names), functions only from a list of the ordinary
text, number, date, JSON, array, text-search, aggregate and window functions, and no cast to the
catalog's object types (`'pg_authid'::regclass` reads the catalog too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import Invalid

VIEWS = ("sessions", "messages", "decisions", "context", "snapshots")

_FUNCTION_NAMES = """
count sum avg min max string_agg array_agg json_agg jsonb_agg json_object_agg jsonb_object_agg bool_and bool_or
every stddev stddev_pop stddev_samp variance var_pop var_samp percentile_cont percentile_disc mode corr
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
length char_length character_length octet_length bit_length lower upper initcap substr substring left right
position strpos replace trim btrim ltrim rtrim split_part concat concat_ws format lpad rpad repeat reverse
translate starts_with regexp_replace regexp_match regexp_matches regexp_split_to_array regexp_split_to_table
regexp_count regexp_like regexp_substr regexp_instr md5 ascii chr quote_literal quote_ident to_hex
to_char to_number to_date to_timestamp now current_timestamp clock_timestamp statement_timestamp date_trunc
date_part date_bin extract age make_date make_time make_timestamp make_timestamptz make_interval
justify_days justify_hours justify_interval isfinite timezone overlaps
abs round floor ceil ceiling trunc mod power pow sqrt cbrt ln log log10 exp sign div greatest least width_bucket
json_build_object jsonb_build_object json_build_array jsonb_build_array to_json to_jsonb row_to_json
array_to_json json_array_length jsonb_array_length json_typeof jsonb_typeof json_each jsonb_each
json_each_text jsonb_each_text json_array_elements jsonb_array_elements json_array_elements_text
jsonb_array_elements_text json_object_keys jsonb_object_keys json_extract_path jsonb_extract_path
json_extract_path_text jsonb_extract_path_text jsonb_pretty jsonb_strip_nulls json_strip_nulls jsonb_set
jsonb_insert jsonb_path_query jsonb_path_query_array jsonb_path_query_first jsonb_path_exists jsonb_path_match
array_length array_lower array_upper array_position array_positions array_to_string array_append
array_prepend array_cat array_remove array_replace cardinality unnest string_to_array generate_series
generate_subscripts to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank
ts_rank_cd ts_headline numnode querytree setweight strip tsvector_to_array
"""
FUNCTIONS = frozenset(_FUNCTION_NAMES.split())

# casts to these read the catalogs (an object's oid, or whether it exists)
CATALOG_TYPES = ("regclass", "regproc", "regprocedure", "regoper", "regoperator", "regtype", "regrole",
                 "regnamespace", "regconfig", "regdictionary", "regcollation")


def check_tree(sql: str) -> None:
    """[invalid] naming the rule when the statement reaches beyond the views of mm_read."""
    import pglast  # imported here: operations.py loads this module without needing the parser
    from pglast import ast

    try:
        statements = pglast.parse_sql(sql)
    except pglast.parser.ParseError as exc:
        raise Invalid(f"sql does not parse: {exc}") from None
    if len(statements) != 1:
        raise Invalid("sql must be one statement (one SELECT per call)")
    top = statements[0].stmt
    if not isinstance(top, ast.SelectStmt):
        raise Invalid(f"sql must be a read-only query (SELECT, WITH … SELECT, VALUES or TABLE), not "
                      f"{type(top).__name__.removesuffix('Stmt').upper()}")
    nodes = list(_walk(top))
    own = {str(n.ctename) for n in nodes if isinstance(n, ast.CommonTableExpr) and n.ctename}
    if any(name.startswith("pg_") for name in own):  # unqualified pg_… names are the catalog's elsewhere
        raise Invalid("sql may not name a WITH query pg_… (those names are the system catalog's)")
    for node in nodes:
        _check_node(node, own, ast)


def _check_node(node: Any, own: set[str], ast: Any) -> None:
    if isinstance(node, ast.SelectStmt) and (node.intoClause is not None or node.lockingClause):
        raise Invalid("sql must only read: no SELECT INTO, no FOR UPDATE/SHARE")
    if isinstance(node, ast.RangeVar):
        schema, name = node.schemaname, node.relname
        if not ((schema is None and name in own) or (schema in (None, "mm_read") and name in VIEWS)):
            shown = f"{schema}.{name}" if schema else name
            raise Invalid(f"sql may read only the views of mm_read ({', '.join(VIEWS)}), not {shown}")
    elif isinstance(node, ast.FuncCall):
        names = [part.sval for part in node.funcname]
        if names[-1] not in FUNCTIONS or names[:-1] not in ([], ["pg_catalog"]):
            raise Invalid(f"sql may call only ordinary built-in functions (text, number, date, JSON, array, "
                          f"text search, aggregates, window functions), not {'.'.join(names)}()")
    elif isinstance(node, ast.TypeCast) and node.typeName is not None:
        target = node.typeName.names[-1].sval
        if target in CATALOG_TYPES:
            raise Invalid(f"sql may not cast to {target} (it reads the system catalogs)")


def _walk(root: Any) -> Iterator[Any]:
    """Every node of the tree, without recursion (a hostile statement may nest deeply)."""
    from pglast import ast

    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Node):
            yield node
            stack.extend(getattr(node, name) for name in getattr(type(node), "__slots__", ()))
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
