"""Counts the ids of a sluice Iceberg table with pyiceberg and with DuckDB's iceberg_scan, prints JSON.

argv: the SQLite catalog path, namespace.table, s3 endpoint, access key, secret key, the id column.

pyiceberg loads the table from the SQL catalog and scans it (S3 through pyarrow). DuckDB reads the
table's current metadata file with iceberg_scan through httpfs; its extensions are loaded from the
duckdb-extension-* wheels (LOAD of their files: DuckDB's own download needs the internet), and when
they are not installed the output says so in "duckdb_error".
"""
import collections
import json
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, ak, sk, col = sys.argv[1:7]
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)


def summary(ids):
    c = collections.Counter(ids)
    dups = sorted(i for i, n in c.items() if n > 1)
    return {"rows": len(ids), "distinct": len(c), "dups": len(dups), "dup_sample": dups[:10],
            "min": min(c) if c else None, "max": max(c) if c else None}


out = {"pyiceberg": summary(tbl.scan(selected_fields=(col,)).to_arrow().column(col).to_pylist()),
       "snapshots": len(tbl.metadata.snapshots),
       "claims": {k: v for k, v in tbl.properties.items() if k.startswith("sluice.claims.")}}

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
    rows = con.execute("SELECT %s FROM iceberg_scan('%s')" % (col, tbl.metadata_location)).fetchall()
    out["duckdb"] = summary([r[0] for r in rows])
except Exception as e:  # reported, the test decides
    out["duckdb_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
