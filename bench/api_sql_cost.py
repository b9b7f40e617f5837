#!/usr/bin/env python3
"""SQL cost of the analysis endpoints, measured outside the server.

Runs the statements each endpoint runs (copied from server/store/tables.c and
inputs.c: store_steps, store_ops, store_kernels, store_diag_input, with rank_of's
run_exists + lowest_rank first) against a trainscope database, N times, in
two ways:
  reused  - one read-only connection for all calls (statements re-prepared
            each call, as the server does);
  fresh   - a new read-only connection per call plus the server's PRAGMAs
            (what a request cost while store_reader_open opened a new
            connection each time, before the pooled readers of commit
            e31bf3d: the schema is parsed again on the first prepare).
Prints microseconds per endpoint call, and the bare connect cost.
Python's sqlite3 adds a few us per statement; the C server pays less per
statement, so read the numbers as upper bounds of the SQL part.

Usage: api_sql_cost.py DB [--run big] [--n 2000]
"""
import argparse
import sqlite3
import time

# the rows of one rank in the tables its traces derive (server/store/store_int.h, migration 020)
RANK_ROWS = "run_id=(SELECT id FROM runs WHERE name=?1) AND rank=?2"
RUN_EXISTS = ("SELECT 1 FROM runs r WHERE r.name=?1 AND EXISTS (SELECT 1 FROM artifacts a"
              " WHERE a.run_id=r.id AND a.status!='ingesting')")
LOWEST_RANK = ("SELECT MIN(a.rank) FROM artifacts a JOIN runs r ON r.id=a.run_id"
               " WHERE r.name=?1 AND a.status='ready'")
# server/analysis/diagnosis.c diag_sync_names
SYNC_NAMES = ["aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize",
              "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"]

STEPS = ("SELECT step, start_ns, dur_ns, kernel_ns, memcpy_ns, memset_ns,"
         " runtime_ns, dataloader_ns, cpu_ns, idle_ns FROM steps"
         " WHERE " + RANK_ROWS + " ORDER BY start_ns, step")
OPS = ("SELECT name, SUM(calls) calls, SUM(self_ns) self_ns, SUM(total_ns) total_ns"
       " FROM op_stats WHERE " + RANK_ROWS + " AND device=?3"
       " GROUP BY name ORDER BY self_ns DESC, name LIMIT ?4")
OPS_TOTAL = ("SELECT COUNT(DISTINCT name), COALESCE(SUM(calls), 0), COALESCE(SUM(self_ns), 0)"
             " FROM op_stats WHERE " + RANK_ROWS + " AND device=?3")
KERNELS = ("SELECT name, SUM(calls), SUM(total_ns), SUM(total_ns) / SUM(calls), MAX(max_ns),"
           " MIN(min_ns), SUM(bps_sum) / NULLIF(SUM(bps_ns), 0), SUM(occ_sum) / NULLIF(SUM(occ_ns), 0)"
           " FROM kernel_stats WHERE " + RANK_ROWS + " AND kind=?3"
           " GROUP BY name ORDER BY 3 DESC, name LIMIT ?4")
KERNELS_TOTAL = ("SELECT COUNT(DISTINCT name), COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0)"
                 " FROM kernel_stats WHERE " + RANK_ROWS + " AND kind=?3")
DURS = ("SELECT step, start_ns, dur_ns FROM steps"
        " WHERE " + RANK_ROWS + " ORDER BY start_ns, step")
DIAG_STEPS = ("SELECT COALESCE(SUM(dur_ns), 0), COALESCE(SUM(kernel_ns), 0), COALESCE(SUM(memcpy_ns), 0),"
              " COALESCE(SUM(memset_ns), 0), COALESCE(SUM(runtime_ns), 0), COALESCE(SUM(dataloader_ns), 0),"
              " COALESCE(SUM(cpu_ns), 0), COALESCE(SUM(idle_ns), 0) FROM (SELECT step, start_ns,"
              " dur_ns, kernel_ns, memcpy_ns, memset_ns, runtime_ns, dataloader_ns, cpu_ns, idle_ns"
              " FROM steps WHERE " + RANK_ROWS + ")")
DIAG_KERNELS = ("SELECT kind, COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0),"
                " COALESCE(SUM(tiny_calls), 0), COALESCE(SUM(tiny_ns), 0),"
                " COALESCE(SUM(CASE WHEN name LIKE '%DtoH%' THEN calls END), 0),"
                " COALESCE(SUM(CASE WHEN name LIKE '%DtoH%' THEN total_ns END), 0)"
                " FROM kernel_stats WHERE " + RANK_ROWS + " GROUP BY kind")
DIAG_SYNC = ("SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0) FROM op_stats"
             " WHERE " + RANK_ROWS + " AND device=0 AND name=?3")

PRAGMAS = "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;"


def rank_of(db, run):
    db.execute(RUN_EXISTS, (run,)).fetchall()
    return db.execute(LOWEST_RANK, (run,)).fetchone()[0]


def ep_steps(db, run):
    rank = rank_of(db, run)
    return len(db.execute(STEPS, (run, rank)).fetchall())


def ep_ops(db, run):
    rank = rank_of(db, run)
    n = len(db.execute(OPS, (run, rank, 0, 50)).fetchall())  # device=cpu (default)
    db.execute(OPS_TOTAL, (run, rank, 0)).fetchall()
    return n


def ep_kernels(db, run):
    rank = rank_of(db, run)
    n = len(db.execute(KERNELS, (run, rank, 0, 50)).fetchall())
    db.execute(KERNELS_TOTAL, (run, rank, 0)).fetchall()
    return n


def ep_diagnosis(db, run):
    rank = rank_of(db, run)
    n = len(db.execute(DURS, (run, rank)).fetchall())
    db.execute(DIAG_STEPS, (run, rank)).fetchall()
    db.execute(DIAG_KERNELS, (run, rank)).fetchall()
    for name in SYNC_NAMES:
        db.execute(DIAG_SYNC, (run, rank, name)).fetchall()
    return n


def connect(path):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, check_same_thread=False,
                         cached_statements=0)
    db.executescript(PRAGMAS)
    return db


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("db")
    ap.add_argument("--run", default="big")
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()

    print("sqlite %s, %d calls each, microseconds per call" % (sqlite3.sqlite_version, a.n))
    t0 = time.perf_counter()
    for _ in range(a.n):
        db = connect(a.db)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # forces the schema read
        db.close()
    print("%-12s %8.1f us  (open + PRAGMAs + schema read + close)" % ("connect", (time.perf_counter() - t0) / a.n * 1e6))
    print("%-12s %5s %10s %10s" % ("endpoint", "rows", "reused", "fresh"))
    for name, fn in (("steps", ep_steps), ("ops", ep_ops), ("kernels", ep_kernels),
                     ("diagnosis", ep_diagnosis)):
        db = connect(a.db)
        rows = fn(db, a.run)
        t0 = time.perf_counter()
        for _ in range(a.n):
            fn(db, a.run)
        reused = (time.perf_counter() - t0) / a.n * 1e6
        db.close()
        t0 = time.perf_counter()
        for _ in range(a.n):
            db = connect(a.db)
            fn(db, a.run)
            db.close()
        fresh = (time.perf_counter() - t0) / a.n * 1e6
        print("%-12s %5d %10.1f %10.1f" % (name, rows, reused, fresh))


if __name__ == "__main__":
    main()
