#!/usr/bin/env python3
"""TPC-H in DuckDB beside the DataFusion bench (issue 12: "DuckDB beside it, in one run").

    python3 duckdb_tpch.py DIR [REPS]

DIR is what `benches/tpch.rs` wrote with GPUJOIN_TPCH_DUCKDB_DIR=DIR: schema.sql, one folder of
CSV files per table, and q<N>.sql for each query. The tables are loaded into DuckDB's memory
(an in-memory database, every core), then each query runs once to warm up and REPS times (3 by
default); the median wall-clock time is printed, with the rows returned. Where the
GPUJOIN_BENCH_CSV variable names a file, rows `tpch_sf<SF>_duckdb,q<N>_duckdb,ms,,device,commit`
are appended to it (SF from GPUJOIN_TPCH_SF, default 10; device from GPUJOIN_DEVICE_NAME).
"""
import glob
import os
import statistics
import sys
import time

import duckdb


def main():
    d = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    con = duckdb.connect(":memory:")
    t = time.perf_counter()
    con.execute(open(os.path.join(d, "schema.sql")).read())
    tables = [line.split()[2] for line in open(os.path.join(d, "schema.sql")) if line.startswith("CREATE TABLE")]
    for table in tables:
        files = sorted(glob.glob(os.path.join(d, table, "*.csv")))
        if not files:
            sys.exit(f"no CSV files for {table} in {d}")
        con.execute(f"INSERT INTO {table} SELECT * FROM read_csv(?, header = true, auto_detect = false, columns = ?)",
                    [files, {c[0]: c[1] for c in con.execute(f"DESCRIBE {table}").fetchall()}])
    counts = {table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}
    print(f"DuckDB {duckdb.__version__}, {con.execute('SELECT current_setting(' + repr('threads') + ')').fetchone()[0]} threads; "
          f"loaded {counts} in {time.perf_counter() - t:.1f} s")

    queries = sorted(int(os.path.basename(p)[1:-4]) for p in glob.glob(os.path.join(d, "q*.sql")))
    sf = os.environ.get("GPUJOIN_TPCH_SF", "10")
    device = os.environ.get("GPUJOIN_DEVICE_NAME", "")
    commit = os.environ.get("GPUJOIN_COMMIT", "")
    rows_csv = []
    total = 0.0
    print("query | DuckDB ms (median) | rows")
    for q in queries:
        sql = open(os.path.join(d, f"q{q}.sql")).read()
        rows = len(con.execute(sql).fetchall())  # warm-up
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append((time.perf_counter() - t) * 1000.0)
        ms = statistics.median(times)
        total += ms
        print(f"Q{q} | {ms:.1f} | {rows}")
        rows_csv.append(f"tpch_sf{sf}_duckdb,q{q}_duckdb,{ms:.3f},,{device},{commit}")
    print(f"together: DuckDB {total:.1f} ms")
    path = os.environ.get("GPUJOIN_BENCH_CSV")
    if path:
        new = not os.path.exists(path)
        with open(path, "a") as f:
            if new:
                f.write("group,case,ms_median,floor_ms,device,commit\n")
            for r in rows_csv:
                f.write(r + "\n")


if __name__ == "__main__":
    main()
