"""Reads a sluice Iceberg table with pyiceberg and DuckDB; prints each row's
date, time of day, uuid, bytes and decimal as text (ISO date, HH:MM:SS[.ffffff],
the uuid's canonical text, base64, the exact decimal), and the types each
reader sees.

argv: the SQLite catalog path, namespace.table, s3 endpoint, s3 POSIX root,
access key, secret key.
"""
import base64
import datetime
import decimal
import json
import sys
import uuid

import duckdb
from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, root, ak, sk = sys.argv[1:7]
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)
COLS = ["n", "d", "tod", "u", "b", "amount", "wide"]


def text(v):
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, datetime.time):
        return v.isoformat(timespec="microseconds")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")  # str would print a zero at scale 10 as 0E-10
    return v


arrow = tbl.scan(selected_fields=tuple(COLS)).to_arrow()
py_rows = [{k: text(v) for k, v in r.items()} for r in arrow.to_pylist()]
schema = {f.name: str(f.field_type) for f in tbl.schema().fields}

files = [t.file.file_path for t in tbl.scan().plan_files()]
local = [root + "/" + f[len("s3://"):] for f in files]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
duck_types, duck_rows = {}, []
if local:
    rel = con.sql("SELECT %s FROM read_parquet(%s)" % (", ".join(COLS), json.dumps(local).replace('"', "'")))
    duck_types = {c: str(t) for c, t in zip(rel.columns, rel.types)}
    for r in rel.fetchall():
        duck_rows.append({c: text(v) for c, v in zip(rel.columns, r)})
print(json.dumps({"schema": schema, "pyiceberg": py_rows, "duckdb_types": duck_types, "duckdb": duck_rows}))
