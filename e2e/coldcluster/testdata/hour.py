"""Reads a sluice Iceberg table through a REST catalog with pyiceberg and DuckDB's iceberg_scan; prints JSON.

argv: the REST catalog URI, namespace.table, s3 endpoint, access key, secret key, the id column.

Output: each reader's id counts (as count.py), the current snapshot's data files per day partition (files and
bytes, from pyiceberg's files metadata table), the number of snapshots and manifests, and the current metadata
location. DuckDB's extensions are loaded from the duckdb-extension-* wheels; when they are missing the output
says so in "duckdb_error".
"""
import collections
import json
import os
import sys

from pyiceberg.catalog.rest import RestCatalog

uri, ident, endpoint, ak, sk, col = sys.argv[1:7]
cat = RestCatalog("sluice", uri=uri, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)


def summary(ids):
    c = collections.Counter(ids)
    dups = sorted(i for i, n in c.items() if n > 1)
    return {"rows": len(ids), "distinct": len(c), "dups": len(dups), "dup_sample": dups[:10],
            "min": min(c) if c else None, "max": max(c) if c else None}


partitions = collections.defaultdict(lambda: {"files": 0, "bytes": 0, "rows": 0})
files = tbl.inspect.files()
for part, size, rows in zip(files.column("partition").to_pylist(), files.column("file_size_in_bytes").to_pylist(),
                            files.column("record_count").to_pylist()):
    day = str(next(iter(part.values())))
    p = partitions[day]
    p["files"] += 1
    p["bytes"] += size
    p["rows"] += rows

out = {"pyiceberg": summary(tbl.scan(selected_fields=(col,)).to_arrow().column(col).to_pylist()),
       "snapshots": len(tbl.metadata.snapshots),
       "manifests": len(tbl.current_snapshot().manifests(tbl.io)) if tbl.current_snapshot() else 0,
       "partitions": partitions,
       "metadata_location": tbl.metadata_location}

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
