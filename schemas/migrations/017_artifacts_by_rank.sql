-- 017: a rank's artifacts found by the index, not by a scan of the run's.
-- Every per-rank read (RANK_ARTIFACTS in server/store/store_int.h: run,
-- rank, status='ready') scanned all of the run's artifacts through
-- artifacts_by_run (run_id, sha256), once per rank: reads over every rank
-- were quadratic in ranks (issue 50: 10,000 ranks, 562 s for the first
-- /ranks; a 3,000-rank /ranks from 4.12 to 0.30 s with this index).
CREATE INDEX artifacts_by_rank ON artifacts(run_id, rank, status);
