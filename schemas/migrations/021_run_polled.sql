-- 021: a run waiting for its first capture (issue 52). A collector started
-- with --captures polls GET /api/v1/runs/{run}/captures/next before the
-- run has any upload (in on-demand mode the CUPTI library records nothing
-- until a capture is taken). The poll creates the run, as an upload would,
-- and stamps polled_ns: when a collector last polled for it (written at
-- most every 10 s per run, server/store/captures.c). A run is listed when
-- it has an artifact that is not ingesting or polled_ns is set; one with
-- no artifact is "waiting for its first capture".
ALTER TABLE runs ADD COLUMN polled_ns INTEGER;
