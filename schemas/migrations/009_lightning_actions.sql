-- 009: a Lightning profiler report's actions, per artifact, in file order
-- (GET /runs/{run}/actions). Times in ns, share in hundredths of a percent;
-- NULL where the report does not print the figure (AdvancedProfiler reports
-- give a total per action only).

CREATE TABLE lightning_actions (
	artifact_id INTEGER NOT NULL,
	n INTEGER NOT NULL,
	action TEXT NOT NULL,
	calls INTEGER,
	mean_ns INTEGER,
	total_ns INTEGER,
	share_bp INTEGER,
	PRIMARY KEY (artifact_id, n)
) WITHOUT ROWID;
