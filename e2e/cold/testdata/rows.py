"""Reads columns of a sluice Iceberg table with pyiceberg and with DuckDB's iceberg_scan, prints JSON.

argv: the SQLite catalog path, namespace.table, s3 endpoint, access key, secret key, then the columns.

Output: {"pyiceberg": [[values...], ...], "duckdb": [[values...], ...]} (rows in no particular order);
"duckdb_error" when DuckDB's extensions are not installed (the test decides). The DuckDB part loads the
extensions from the duckdb-extension-* wheels, as e2e/coldcluster/testdata/count.py does.
"""
import json
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, ak, sk = sys.argv[1:6]
cols = sys.argv[6:]
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)
t = tbl.scan(selected_fields=tuple(cols)).to_arrow()
out = {"pyiceberg": [list(r) for r in zip(*(t.column(c).to_pylist() for c in cols))]}

try:
    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for ext in ("httpfs", "avro", "iceberg"):
        mod = __import__("duckdb_extension_" + ext)
        base = os.path.join(os.path.dirname(mod.__file__), "extensions")
        path = [os.path.join(r, f) for r, _, fs in os.walk(base) for f in fs if f.endswith(".duckdb_extension")][0]
        con.execute("LOAD '%s'" % path)
    host = endpoint.split("://", 1)[1]
    con.execute("CREATE SECRET s3 (TYPE s3, KEY_ID '%s', SECRET '%s', ENDPOINT '%s', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
                % (ak, sk, host))
    rows = con.execute("SELECT %s FROM iceberg_scan('%s')" % (", ".join('"%s"' % c for c in cols), tbl.metadata_location)).fetchall()
    out["duckdb"] = [list(r) for r in rows]
except Exception as e:  # reported, the test decides
    out["duckdb_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out, default=str))
