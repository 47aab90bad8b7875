"""Reads column n of Iceberg tables in a REST catalog with pyiceberg and with DuckDB's iceberg_scan, prints JSON.

argv: the REST catalog URI, s3 endpoint (http://host:port), access key, secret key, then namespace.table names.

For each table: {"pyiceberg": [n...] or {"error": ...}, "duckdb": [n...] or {"error": ...} or null when the
duckdb-extension wheels are missing}. An engine that cannot read a table (an unsupported format) is reported,
not raised, so the test can say which reader needs what.
"""
import glob
import json
import os
import sys

import duckdb
from pyiceberg.catalog import load_catalog

uri, endpoint, ak, sk = sys.argv[1:5]
idents = sys.argv[5:]
cat = load_catalog("rest", **{
    "type": "rest", "uri": uri,
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})


def ext_path(name):
    try:
        mod = __import__("duckdb_extension_" + name)
    except ImportError:
        return None
    found = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*", name + ".duckdb_extension"))
    return found[0] if found else None


con = None
paths = {n: ext_path(n) for n in ("httpfs", "avro", "iceberg")}
if all(paths.values()):
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    con.execute("SET enable_progress_bar = false")
    for n in ("httpfs", "avro", "iceberg"):
        con.execute("LOAD '%s'" % paths[n])
    con.execute("CREATE SECRET (TYPE s3, KEY_ID '%s', SECRET '%s', ENDPOINT '%s', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
                % (ak, sk, endpoint.split("://", 1)[1]))

out = {}
for ident in idents:
    res = {}
    try:
        tbl = cat.load_table(ident)
    except Exception as e:  # noqa: BLE001 - reported to the test
        out[ident] = {"pyiceberg": {"error": "load: %s" % e}, "duckdb": {"error": "load: %s" % e}}
        continue
    try:
        res["pyiceberg"] = sorted(tbl.scan(selected_fields=("n",)).to_arrow().column("n").to_pylist())
    except Exception as e:  # noqa: BLE001
        res["pyiceberg"] = {"error": str(e)[:500]}
    if con is None:
        res["duckdb"] = None
    else:
        try:
            res["duckdb"] = sorted(r[0] for r in con.sql("SELECT n FROM iceberg_scan('%s')" % tbl.metadata_location).fetchall())
        except Exception as e:  # noqa: BLE001
            res["duckdb"] = {"error": str(e)[:500]}
    out[ident] = res
print(json.dumps(out))
