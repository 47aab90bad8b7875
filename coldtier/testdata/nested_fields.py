"""Reads nested fields of a sluice Iceberg table's json column with pyiceberg and DuckDB, running the statements
docs/streams.md ("Nested values") gives for each; prints JSON {"pyiceberg": [[n, city, sku, color]...],
"duckdb": [...]}.

argv: the REST catalog URI, s3 endpoint, access key, secret key, namespace.table, the s3 server's POSIX root,
the DuckDB statement (over a view named events), the pyiceberg snippet (given tbl, it sets fields).
"""
import json
import sys

import duckdb
from pyiceberg.catalog import load_catalog

uri, endpoint, ak, sk, ident, root, duck_sql, py_snippet = sys.argv[1:9]
cat = load_catalog("rest", **{
    "type": "rest", "uri": uri,
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)

ns = {"tbl": tbl}
exec(py_snippet, ns)  # noqa: S102 - the docs' snippet, run as a user would paste it
py_rows = [list(f) for f in ns["fields"]]

# DuckDB reads the table's data files (the table has no delete files) from the S3 server's directory.
files = [t.file.file_path for t in tbl.scan().plan_files()]
local = [root + "/" + f[len("s3://"):] for f in files]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute("CREATE VIEW events AS SELECT * FROM read_parquet(%s)" % json.dumps(local).replace('"', "'"))
duck_rows = [list(r) for r in con.sql(duck_sql).fetchall()]
print(json.dumps({"pyiceberg": py_rows, "duckdb": duck_rows}))
