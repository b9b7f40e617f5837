-- 004: run comparison: figures a trace does not hold (tokens_per_step,
-- samples_per_step, loss, ...), posted per step by the training job, one
-- value per (run, name, step); a repost of the same step replaces it.
CREATE TABLE metrics (
	run_id INTEGER NOT NULL,
	name TEXT NOT NULL,
	step INTEGER NOT NULL,
	value REAL NOT NULL,
	PRIMARY KEY (run_id, name, step)
) WITHOUT ROWID;
