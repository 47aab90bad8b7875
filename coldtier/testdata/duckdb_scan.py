"""Times DuckDB's iceberg_scan of one Iceberg table (a local warehouse), prints JSON.

argv: the table's metadata file, how many scans. Each scan reads the columns sluice's benchmark query returns
(every column of the keyed benchmark's table) and aggregates them in DuckDB, so no row crosses into Python.
Prints {"available", "why", "rows", "seconds", "cpu"}: the rows of one scan and the mean wall and process CPU
seconds per scan (DuckDB's threads included), the first scan (extension loading, metadata caching) left out.
"""
import glob
import json
import os
import sys
import time

import duckdb

metadata, scans = sys.argv[1], int(sys.argv[2])


def ext_path(name):
    try:
        mod = __import__("duckdb_extension_" + name)
    except ImportError:
        return None
    found = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*", name + ".duckdb_extension"))
    return found[0] if found else None


paths = {n: ext_path(n) for n in ("avro", "iceberg")}
missing = [n for n, p in paths.items() if p is None]
if missing:
    print(json.dumps({"available": False, "why": "duckdb-extension-%s not installed" % ",".join(missing)}))
    sys.exit(0)
con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
con.execute("SET enable_progress_bar = false")
for n in ("avro", "iceberg"):
    con.execute("LOAD '%s'" % paths[n])
sql = ("SELECT count(*), sum(hash(\"user\", ts, n, f, ok, note, doc)) FROM iceberg_scan('%s')" % metadata)
rows = con.sql(sql).fetchall()[0][0]
wall = cpu = 0.0
for _ in range(scans):
    w0, c0 = time.perf_counter(), time.process_time()
    con.sql(sql).fetchall()
    wall += time.perf_counter() - w0
    cpu += time.process_time() - c0
print(json.dumps({"available": True, "rows": rows, "seconds": wall / scans, "cpu": cpu / scans}))
