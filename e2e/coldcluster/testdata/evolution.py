"""Reads every row of a sluice Iceberg table through a REST catalog with pyiceberg and DuckDB's iceberg_scan; prints JSON.

argv: the REST catalog URI, namespace.table, s3 endpoint, access key, secret key, the timestamp column, then the
other columns.

Output: {"pyiceberg": [[ts_ms, values...], ...], "duckdb": [...]}: each row's timestamp column as milliseconds since
the epoch, then the other columns in the order given (rows in no particular order); "duckdb_error" when DuckDB's
extensions are missing (the test decides). The DuckDB part loads the extensions from the duckdb-extension-* wheels,
as hour.py does.
"""
import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

uri, ident, endpoint, ak, sk, ts_col = sys.argv[1:7]
cols = sys.argv[7:]
cat = RestCatalog("sluice", uri=uri, **{
    "s3.endpoint": endpoint, "s3.access-key-id": ak, "s3.secret-access-key": sk,
    "s3.region": "us-east-1", "s3.path-style-access": "true",
})
tbl = cat.load_table(ident)
t = tbl.scan(selected_fields=tuple([ts_col] + cols)).to_arrow()
# The column is timestamptz in microseconds: its integer is exact, a datetime's float would not be.
ts_ms = [None if v is None else v // 1000 for v in t.column(ts_col).cast(pa.int64()).to_pylist()]
out = {"pyiceberg": [list(r) for r in zip(ts_ms, *(t.column(c).to_pylist() for c in cols))]}

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
    sql = "SELECT epoch_ms(\"%s\"), %s FROM iceberg_scan('%s')" % (ts_col, ", ".join('"%s"' % c for c in cols), tbl.metadata_location)
    out["duckdb"] = [list(r) for r in con.execute(sql).fetchall()]
except Exception as e:  # reported, the test decides
    out["duckdb_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
