#!/usr/bin/env python3
"""DuckDB beside gpujoin: TPC-H queries on the same machine, for issue 12's comparison.

The tables come from `tpchgen-cli parquet` (the tpchgen 4.0 generator that gpujoin's
`gpujoin bench` uses in process, so the data is the same), loaded into DuckDB's memory before
timing; the query texts are gpujoin-datafusion's (crates/datafusion/src/tpch/qN.sql).
Each query: one warm-up, then `--reps` runs; the median wall-clock time.

    python3 tpch_duckdb.py --data /tmp/tpch10 --queries crates/datafusion/src/tpch \
        --list 3,5,7,8,9,10,18,21 --reps 3 --sf 10 [-o out.csv]

Prints one CSV row per query: engine,sf,query,ms_median,rows,threads,version
"""
import argparse
import glob
import os
import statistics
import sys
import time

import duckdb

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--data", required=True)
    a.add_argument("--queries", required=True)
    a.add_argument("--list", default="3,5,7,8,9,10,18,21")
    a.add_argument("--reps", type=int, default=3)
    a.add_argument("--sf", default="10")
    a.add_argument("--threads", type=int, default=os.cpu_count())
    a.add_argument("-o", "--output")
    o = a.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {o.threads}")
    t0 = time.perf_counter()
    for t in TABLES:
        files = sorted(glob.glob(os.path.join(o.data, f"{t}.parquet")) + glob.glob(os.path.join(o.data, t, "*.parquet")))
        if not files:
            sys.exit(f"tpch_duckdb: no parquet files for {t} under {o.data}")
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet({files!r})")
    rows_li = con.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    print(f"# duckdb {duckdb.__version__}, {o.threads} threads: tables loaded in {time.perf_counter() - t0:.1f} s (lineitem {rows_li} rows)", file=sys.stderr)
    out = []
    for q in [int(x) for x in o.list.split(",") if x.strip()]:
        sql = open(os.path.join(o.queries, f"q{q}.sql")).read().strip().rstrip(";")
        res = con.execute(sql).fetchall()  # warm-up
        times = []
        for _ in range(o.reps):
            s = time.perf_counter()
            res = con.execute(sql).fetchall()
            times.append((time.perf_counter() - s) * 1000)
        med = statistics.median(times)
        out.append(f"duckdb,{o.sf},q{q},{med:.1f},{len(res)},{o.threads},{duckdb.__version__}")
        print(f"Q{q}: {med:.1f} ms median of {o.reps} ({', '.join(f'{t:.1f}' for t in times)}), {len(res)} rows", file=sys.stderr)
    total = sum(float(r.split(",")[3]) for r in out)
    print(f"# together: {total:.1f} ms", file=sys.stderr)
    text = "engine,sf,query,ms_median,rows,threads,version\n" + "\n".join(out) + "\n"
    if o.output:
        open(o.output, "w").write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
