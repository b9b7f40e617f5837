-- 008: a memory snapshot's segments and blocks at dump time, per artifact and
-- device (GET /runs/{run}/memory/segments draws them).

CREATE TABLE memory_segments (
	artifact_id INTEGER NOT NULL,
	device TEXT NOT NULL,
	n INTEGER NOT NULL,			-- by address
	address INTEGER NOT NULL,
	total_size INTEGER NOT NULL,
	stream INTEGER NOT NULL,
	segment_type TEXT,			-- "large", "small", or NULL
	PRIMARY KEY (artifact_id, device, n)
) WITHOUT ROWID;

-- The blocks of each segment in its order; category and op only for a
-- block alive at dump time (allocated or pending free).
CREATE TABLE memory_blocks (
	artifact_id INTEGER NOT NULL,
	device TEXT NOT NULL,
	seg INTEGER NOT NULL,
	n INTEGER NOT NULL,
	offset INTEGER NOT NULL,		-- from the segment's address
	size INTEGER NOT NULL,
	requested_size INTEGER NOT NULL,
	state TEXT NOT NULL,			-- inactive, active_allocated, active_pending_free, other
	category TEXT,
	op TEXT,
	PRIMARY KEY (artifact_id, device, seg, n)
) WITHOUT ROWID;
