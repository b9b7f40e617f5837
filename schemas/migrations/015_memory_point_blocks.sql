-- 015: memory timeline points packed in blocks (store/evpack.h's ptpack),
-- as events are: one row per point took 0.73 s of a 1 GB trace's commit
-- (700,250 points) and most of a 1 GB snapshot's upload (12 M points).
-- Nothing reads one point with SQL: the reads walk a series in order, and
-- the three figures they looked up point by point are columns of the series.
-- After this SQL, store.c (pack_legacy_points) packs memory_points' rows
-- into blocks and drops the table, in the same transaction.
CREATE TABLE memory_point_blocks (
	artifact_id INTEGER NOT NULL,
	device TEXT NOT NULL,
	first_seq INTEGER NOT NULL,		-- seq of the block's first point
	n INTEGER NOT NULL,			-- points in the block, seq first_seq .. first_seq + n - 1
	data BLOB NOT NULL,
	PRIMARY KEY (artifact_id, device, first_seq)
) WITHOUT ROWID;
ALTER TABLE memory_series ADD COLUMN first_t_ns INTEGER;		-- the first point's time
ALTER TABLE memory_series ADD COLUMN peak_allocated INTEGER;	-- allocated at peak_seq
ALTER TABLE memory_series ADD COLUMN max_reserved INTEGER;		-- NULL: no point knows it
UPDATE memory_series SET
	first_t_ns = (SELECT t_ns FROM memory_points p WHERE p.artifact_id=memory_series.artifact_id
		      AND p.device=memory_series.device ORDER BY seq LIMIT 1),
	peak_allocated = (SELECT allocated FROM memory_points p WHERE p.artifact_id=memory_series.artifact_id
			  AND p.device=memory_series.device AND p.seq=memory_series.peak_seq),
	max_reserved = (SELECT MAX(reserved) FROM memory_points p WHERE p.artifact_id=memory_series.artifact_id
			AND p.device=memory_series.device);
