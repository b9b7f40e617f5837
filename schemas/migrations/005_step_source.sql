-- 005: a run's rank is one timeline (server/ingest/runrank.h): its steps are
-- stored once, under the rank's newest trace artifact; source_artifact is the
-- artifact whose ProfilerStep span gave the step (NULL: artifact_id itself).
ALTER TABLE steps ADD COLUMN source_artifact INTEGER;
