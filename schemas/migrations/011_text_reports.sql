-- 011: other profilers' text reports stored with the run (issue 21).

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

-- An nvidia-smi --query-gpu CSV log, one row per sample and column (GET
-- /runs/{run}/gpu), in base units: % as printed, MiB as bytes, W, degC, MHz as
-- Hz; value NULL for [N/A]. gpu: the index column, else 0; t_ns: the timestamp
-- as written, read as UTC (NULL when the log has none).
CREATE TABLE gpu_samples (
	artifact_id INTEGER NOT NULL,
	n INTEGER NOT NULL,
	col INTEGER NOT NULL,
	gpu INTEGER NOT NULL,
	t_ns INTEGER,
	name TEXT NOT NULL,
	unit TEXT NOT NULL,
	value REAL,
	PRIMARY KEY (artifact_id, n, col)
) WITHOUT ROWID;
