"""Reads a sluice Iceberg table with DuckDB's iceberg_scan, prints JSON.

argv: the catalog (a SQLite path), namespace.table, s3 endpoint (http://host:port), access key, secret key.

pyiceberg gives the current metadata file; DuckDB reads it, the manifests and the data files over S3 with its
iceberg, avro and httpfs extensions, loaded from the duckdb-extension-* wheels (DuckDB cannot download them here).
Prints {"available": false, "why": ...} when the wheels are not installed.
"""
import glob
import json
import os
import sys

import duckdb
from pyiceberg.catalog.sql import SqlCatalog

cat_path, ident, endpoint, ak, sk = sys.argv[1:6]


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
    print(json.dumps({"available": False, "why": "duckdb-extension-%s not installed" % ",".join(missing)}))
    sys.exit(0)
cat = SqlCatalog("sluice", uri="sqlite:///" + cat_path, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)
con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
con.execute("SET enable_progress_bar = false")  # on a loaded machine it prints to stdout
for n in ("httpfs", "avro", "iceberg"):
    con.execute("LOAD '%s'" % paths[n])
host = endpoint.split("://", 1)[1]
con.execute("CREATE SECRET (TYPE s3, KEY_ID '%s', SECRET '%s', ENDPOINT '%s', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
            % (ak, sk, host))
rows = con.sql("SELECT n FROM iceberg_scan('%s')" % tbl.metadata_location).fetchall()
print(json.dumps({"available": True, "n": [r[0] for r in rows]}))
