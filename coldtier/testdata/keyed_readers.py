"""Reads a keyed sluice table's Iceberg table (n, note) with pyiceberg and DuckDB's iceberg_scan, prints JSON.

argv: the catalog (a SQLite path), namespace.table, s3 endpoint (http://host:port), access key, secret key.

Both readers apply the position delete files. DuckDB loads its iceberg, avro and httpfs extensions from the
duckdb-extension-* wheels (it cannot download them here); without them "duckdb" is {"available": false}.
"""
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
py = [[r["n"], r["note"]] for r in tbl.scan(selected_fields=("n", "note")).to_arrow().to_pylist()]


def ext_path(name):
    try:
        mod = __import__("duckdb_extension_" + name)
    except ImportError:
        return None
    found = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*", name + ".duckdb_extension"))
    return found[0] if found else None


paths = {n: ext_path(n) for n in ("httpfs", "avro", "iceberg")}
missing = [n for n, p in paths.items() if p is None]
duck = {"available": False, "why": "duckdb-extension-%s not installed" % ",".join(missing)}
if not missing:
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    con.execute("SET enable_progress_bar = false")  # on a loaded machine it prints to stdout
    for n in ("httpfs", "avro", "iceberg"):
        con.execute("LOAD '%s'" % paths[n])
    host = endpoint.split("://", 1)[1]
    con.execute("CREATE SECRET (TYPE s3, KEY_ID '%s', SECRET '%s', ENDPOINT '%s', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
                % (ak, sk, host))
    rows = con.sql("SELECT n, note FROM iceberg_scan('%s')" % tbl.metadata_location).fetchall()
    duck = {"available": True, "rows": [[r[0], r[1]] for r in rows]}
print(json.dumps({"pyiceberg": py, "duckdb": duck}))
