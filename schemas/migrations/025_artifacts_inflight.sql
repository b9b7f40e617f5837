-- 025: a run's uploads in flight found by the index, not by a scan of the
-- run's artifacts. Deriving a rank asks for the run's lowest artifact id
-- still being uploaded (store_trace_inflight in server/store/trace.c:
-- run, status='ingesting', any rank), which artifacts_by_rank (run_id,
-- rank, status) cannot answer without a rank: it read all of the run's
-- artifacts, twice per rank derived, so deriving every rank was quadratic
-- in ranks (issue 50: 3,000 ranks of two traces each, 0.89 ms a call,
-- 5.3 s of the first /ranks' 7.9 s of SQL). The index holds only the
-- artifacts being uploaded, so it costs the finished ones nothing.
CREATE INDEX artifacts_inflight ON artifacts(run_id) WHERE status='ingesting';
