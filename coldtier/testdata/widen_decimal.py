"""Reads a sluice Iceberg table whose decimal column m was promoted in place
(decimal(18,2) -> decimal(38,2)) with pyiceberg and with DuckDB's
iceberg_scan (metadata, manifests and data over S3, so DuckDB resolves the
files written before the promotion by field id, as Iceberg asks); prints
JSON: the schema (name -> [field id, type]), each reader's rows (n, and m as
its exact text) and DuckDB's type of m.

argv: the SQLite catalog path, namespace.table, s3 endpoint
(http://host:port), access key, secret key.
"""
import decimal
import glob
import json
import os
import sys

import duckdb
from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, ak, sk = sys.argv[1:6]
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)


def text(v):
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return v


out = {"schema": {f.name: [f.field_id, str(f.field_type)] for f in tbl.schema().fields}}
out["pyiceberg"] = [{"n": r["n"], "m": text(r["m"])}
                    for r in tbl.scan(selected_fields=("n", "m")).to_arrow().to_pylist()]


def ext_path(name):
    try:
        mod = __import__("duckdb_extension_" + name)
    except ImportError:
        return None
    found = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*", name + ".duckdb_extension"))
    return found[0] if found else None


paths = {n: ext_path(n) for n in ("httpfs", "avro", "iceberg")}
missing = [n for n, p in paths.items() if p is None]
if missing:
    out["duckdb_why"] = "duckdb-extension-%s not installed" % ",".join(missing)
else:
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    con.execute("SET enable_progress_bar = false")  # on a loaded machine it prints to stdout
    for n in ("httpfs", "avro", "iceberg"):
        con.execute("LOAD '%s'" % paths[n])
    host = endpoint.split("://", 1)[1]
    con.execute("CREATE SECRET (TYPE s3, KEY_ID '%s', SECRET '%s', ENDPOINT '%s', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
                % (ak, sk, host))
    rel = con.sql("SELECT n, m FROM iceberg_scan('%s')" % tbl.metadata_location)
    out["duckdb_type"] = str(rel.types[1])
    out["duckdb"] = [{"n": n, "m": text(m)} for n, m in rel.fetchall()]
print(json.dumps(out))
