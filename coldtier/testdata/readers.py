"""Reads a sluice Iceberg table with pyiceberg and with DuckDB, prints JSON.

argv: the catalog (a SQLite path, or a postgres:// URL), namespace.table, s3 endpoint, s3 POSIX root (the
versitygw directory behind the bucket), access key, secret key.

pyiceberg loads the table from the SQL catalog and scans it (S3 through
pyarrow). DuckDB's iceberg and httpfs extensions download at run time and
cannot be installed offline, so DuckDB reads the data files the manifests
list (pyiceberg's plan_files), with read_parquet on the same bytes through
the S3 server's POSIX directory.
"""
import datetime
import json
import sys

import duckdb
from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, root, ak, sk = sys.argv[1:7]
if cat_path.startswith(("postgres://", "postgresql://")):
    # SQLAlchemy names the driver in the scheme: psycopg2 (libpq).
    uri = "postgresql+psycopg2://" + cat_path.split("://", 1)[1]
else:
    uri = "sqlite:///" + cat_path
cat = SqlCatalog("sluice", uri=uri, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)


def norm(v):
    if isinstance(v, datetime.datetime):
        return int(v.timestamp() * 1_000_000) if v.tzinfo else None
    return v


arrow = tbl.scan().to_arrow()
py_rows = [{k: norm(v) for k, v in r.items()} for r in arrow.to_pylist()]
schema = [[f.name, str(f.field_type), f.required] for f in tbl.schema().fields]
spec = [[f.name, str(f.transform)] for f in tbl.spec().fields]

files = [t.file.file_path for t in tbl.scan().plan_files()]
local = [root + "/" + f[len("s3://"):] for f in files]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # on a loaded machine it prints to stdout
con.execute("SET TimeZone='UTC'")
duck_types, duck_rows = [], []
if local:
    rel = con.sql("SELECT * FROM read_parquet(%s, union_by_name=true, hive_partitioning=false)" % json.dumps(local).replace('"', "'"))
    duck_types = [[c, str(t)] for c, t in zip(rel.columns, rel.types)]
    for r in rel.fetchall():
        duck_rows.append({c: norm(v) for c, v in zip(rel.columns, r)})
# The declared sort order, and for each data file whether its rows follow
# it (pyarrow reads the file in its stored order; nulls first).
import pyarrow.parquet as pq
sort_order = [[tbl.schema().find_column_name(f.source_id), str(f.transform), str(f.direction), str(f.null_order)]
              for f in tbl.sort_order().fields]
unsorted = []
for path in local:
    # Without a declared order, the tests' key column (user) is checked, so
    # that a test can tell files in hash order too.
    names = [f.name for f in tbl.schema().fields]
    for col in [o[0] for o in sort_order[:1]] or [c for c in ("user",) if c in names]:
        vals = pq.read_table(path, columns=[col]).column(0).to_pylist()
        key = [(v is not None, v) for v in vals]
        if any(key[i] > key[i + 1] for i in range(len(key) - 1)):
            unsorted.append(path)
snaps = [dict(s.summary.additional_properties, operation=str(s.summary.operation)) for s in tbl.snapshots()]
print(json.dumps({"schema": schema, "spec": spec, "files": files, "pyiceberg": py_rows,
                  "duckdb_types": duck_types, "duckdb": duck_rows, "snapshots": snaps,
                  "sort_order": sort_order, "unsorted_files": unsorted}, default=str))
