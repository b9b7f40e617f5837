-- 003: memory timelines, per artifact and device.

-- One row per series: where its points came from and its peak.
CREATE TABLE memory_series (
	artifact_id INTEGER NOT NULL,
	device TEXT NOT NULL,			-- "cuda:N" or "cpu"
	source TEXT NOT NULL,			-- "pytorch", "trace" or "snapshot"
	points INTEGER NOT NULL,
	peak_seq INTEGER,			-- the first point with the highest allocated
	baseline INTEGER NOT NULL DEFAULT 0,	-- trace: allocated before the first event
	PRIMARY KEY (artifact_id, device)
) WITHOUT ROWID;

-- What was alive at a series' peak: by category and the operator that made
-- it (op NULL: pre-existing memory; count NULL then).
CREATE TABLE memory_groups (
	artifact_id INTEGER NOT NULL,
	device TEXT NOT NULL,
	n INTEGER NOT NULL,			-- largest first
	category TEXT NOT NULL,
	op TEXT,
	bytes INTEGER NOT NULL,
	count INTEGER,
	PRIMARY KEY (artifact_id, device, n)
) WITHOUT ROWID;

-- The points in time order; the eight categories sum to allocated.
-- Times absolute ns; reserved NULL when the source does not know it.
CREATE TABLE memory_points (
	artifact_id INTEGER NOT NULL,
	device TEXT NOT NULL,
	seq INTEGER NOT NULL,
	t_ns INTEGER NOT NULL,
	parameter INTEGER NOT NULL,
	optimizer_state INTEGER NOT NULL,
	input INTEGER NOT NULL,
	temporary INTEGER NOT NULL,
	activation INTEGER NOT NULL,
	gradient INTEGER NOT NULL,
	autograd_detail INTEGER NOT NULL,
	unknown INTEGER NOT NULL,
	allocated INTEGER NOT NULL,
	reserved INTEGER,
	PRIMARY KEY (artifact_id, device, seq)
) WITHOUT ROWID;
