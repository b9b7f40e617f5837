-- 009: other profilers' text reports stored with the run (issue 21).

-- A Lightning profiler report's actions, per artifact, in file order
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

-- Folded stacks' frames, per artifact (GET /runs/{run}/stacks): the weight of
-- the stacks a frame is in (total, once per stack) and of those it is the leaf
-- of (self), in the file's unit (us for export_stacks, samples for py-spy).
CREATE TABLE stack_frames (
	artifact_id INTEGER NOT NULL,
	frame TEXT NOT NULL,
	self INTEGER NOT NULL,
	total INTEGER NOT NULL,
	PRIMARY KEY (artifact_id, frame)
) WITHOUT ROWID;
