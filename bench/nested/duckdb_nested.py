"""The cost of a nested field kept in a JSON column, as another engine pays it: DuckDB filtering 1M rows on a field
read out of the JSON text (doc->>'$.address.city') against the same field as a top-level column (city).

The Parquet file is laid out as sluice's cold tier writes one (zstd, a string column for the JSON text, 128k-row row
groups, rows in time order so the field is not sorted). Each query runs 5 times after one warm-up; the median wall
time and the process's CPU time (user+system, all of DuckDB's threads) are printed with rows/s and rows/CPU-second,
and each column's compressed bytes (what a reader fetches to filter on it).

usage: python duckdb_nested.py [rows] [threads]   (the readers' venv: ~/.cache/sluice/iceberg-venv/bin/python)
"""
import json
import os
import resource
import statistics
import sys
import tempfile
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
cities = ["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø"]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


n = list(range(rows))
city = [cities[i % len(cities)] for i in n]
doc = [json.dumps({"address": {"street": "Storgata %d" % (i % 200), "zip": "%04d" % (i % 10000), "city": city[i],
                               "geo": {"lat": 59.91, "lon": 10.75}}, "items": [{"sku": "sku-%d" % i, "qty": i % 4}]},
                  ensure_ascii=False, separators=(",", ":")) for i in n]
path = os.path.join(tempfile.mkdtemp(prefix="nested-bench-"), "t.parquet")
pq.write_table(pa.table({"n": pa.array(n, pa.int64()), "city": city, "doc": doc}), path,
               compression="zstd", row_group_size=128 * 1024)
meta = pq.ParquetFile(path).metadata
size = {meta.schema.column(c).name: sum(meta.row_group(g).column(c).total_compressed_size
                                        for g in range(meta.num_row_groups)) for c in range(meta.num_columns)}

con = duckdb.connect()
con.execute("SET threads = %d" % threads)
con.execute("SET enable_progress_bar = false")
queries = {
    "top-level column": "SELECT count(*) FROM read_parquet('%s') WHERE city = 'Tromsø'" % path,
    "JSON path (->>)": "SELECT count(*) FROM read_parquet('%s') WHERE doc->>'$.address.city' = 'Tromsø'" % path,
}
print("rows %d, threads %d, duckdb %s; compressed bytes: city %d, doc %d" % (rows, threads, duckdb.__version__, size["city"], size["doc"]))
print("| filter | matches | wall ms (median of 5) | rows/s | CPU ms | rows/CPU-s |")
print("|---|---|---|---|---|---|")
for name, q in queries.items():
    got = con.execute(q).fetchone()[0]
    walls, cpus = [], []
    for _ in range(5):
        c0, w0 = cpu(), time.perf_counter()
        con.execute(q).fetchone()
        walls.append(time.perf_counter() - w0)
        cpus.append(cpu() - c0)
    w, c = statistics.median(walls), statistics.median(cpus)
    print("| %s | %d | %.1f | %.3g | %.1f | %.3g |" % (name, got, w * 1e3, rows / w, c * 1e3, rows / c if c else float("inf")))
