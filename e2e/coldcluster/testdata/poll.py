"""Polls a sluice Iceberg table for probe rows with DuckDB's iceberg_scan; prints one JSON line per new snapshot.

argv: the SQLite catalog path, namespace.table, s3 endpoint, access key, secret key, seconds to poll, the lowest
probe id. Each line: {"t": unix seconds when the probes became visible, "ids": [new probe ids], "query_s": ...}.
"""
import json
import os
import sys
import time

import duckdb
from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, ak, sk, seconds, low = sys.argv[1:8]
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
for ext in ("httpfs", "avro", "iceberg"):
    mod = __import__("duckdb_extension_" + ext)
    base = os.path.join(os.path.dirname(mod.__file__), "extensions")
    path = [os.path.join(r, f) for r, _, fs in os.walk(base) for f in fs if f.endswith(".duckdb_extension")][0]
    con.execute("LOAD '%s'" % path)
con.execute("CREATE SECRET s3 (TYPE s3, KEY_ID '%s', SECRET '%s', ENDPOINT '%s', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
            % (ak, sk, endpoint.split("://", 1)[1]))
seen, last = set(), None
deadline = time.time() + float(seconds)
while time.time() < deadline:
    try:
        loc = cat.load_table(ident).metadata_location
    except Exception:
        time.sleep(0.2)
        continue
    if loc != last:
        last = loc
        q0 = time.time()
        ids = [r[0] for r in con.execute("SELECT id FROM iceberg_scan('%s') WHERE id >= %s" % (loc, low)).fetchall()]
        now = time.time()
        new = sorted(set(ids) - seen)
        seen.update(new)
        print(json.dumps({"t": now, "ids": new, "query_s": now - q0}), flush=True)
    time.sleep(0.2)
