-- 009: ranks whose timeline waits to be derived again (pipeline/runrank.h).
-- A trace that joins a rank which already has one is committed with a row
-- here instead of replaying the rank inside its upload; the first read of
-- the run derives it (runrank_settle) and removes the row when seq is the
-- one it derived from. Persistent, so a restart never leaves a rank stale.

CREATE TABLE rank_pending (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	seq INTEGER NOT NULL,			-- bumped by every trace that joins
	PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;
