-- 002: what analysis (server/analysis) computes at ingest, per artifact.

-- Step breakdown (server/analysis/analysis.c says how overlaps resolve);
-- the seven components sum to dur_ns.
ALTER TABLE steps ADD COLUMN kernel_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN memcpy_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN memset_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN runtime_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN dataloader_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN cpu_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN idle_ns INTEGER NOT NULL DEFAULT 0;

-- Operators by name; device 0: host time, 1: GPU time of the kernels they launched.
CREATE TABLE op_stats (
	artifact_id INTEGER NOT NULL,
	device INTEGER NOT NULL,
	name TEXT NOT NULL,
	calls INTEGER NOT NULL,
	self_ns INTEGER NOT NULL,
	total_ns INTEGER NOT NULL,
	PRIMARY KEY (artifact_id, device, name)
) WITHOUT ROWID;

-- GPU activity by name; kind 0 kernel, 1 memcpy, 2 memset. bps_*/occ_*:
-- duration-weighted sums of "blocks per SM" and "est. achieved occupancy %"
-- over the calls that gave them; tiny_*: calls shorter than AN_TINY_KERNEL_NS.
CREATE TABLE kernel_stats (
	artifact_id INTEGER NOT NULL,
	kind INTEGER NOT NULL,
	name TEXT NOT NULL,
	calls INTEGER NOT NULL,
	total_ns INTEGER NOT NULL,
	min_ns INTEGER NOT NULL,
	max_ns INTEGER NOT NULL,
	tiny_calls INTEGER NOT NULL,
	tiny_ns INTEGER NOT NULL,
	bps_ns INTEGER NOT NULL,
	bps_sum REAL NOT NULL,
	occ_ns INTEGER NOT NULL,
	occ_sum REAL NOT NULL,
	PRIMARY KEY (artifact_id, kind, name)
) WITHOUT ROWID;
