-- 024: a rank's trace memory timelines are the rank's (issue 45), as its
-- steps are since 020. The series a trace's [memory] events give
-- (analysis/memory.c: source "trace") were stored in memory_series,
-- memory_point_blocks and memory_groups under an artifact (the rank's first
-- trace), and reads gathered them with artifact_id IN (the rank's ready
-- artifacts). They are keyed by (run_id, rank, device) now, in tables of
-- their own: written whole by the rank's first trace's upload or by its
-- derivation (pipeline/runrank.h). A memory export's and a snapshot's
-- series, files of their own, stay in the artifact's tables.
--
-- Existing trace series move to their artifact's (run_id, rank). A rank
-- whose trace series were stored under more than one artifact cannot be
-- moved as one: its series go and the rank is marked (rank_pending), so its
-- next read derives it again from its stored events.

CREATE TABLE rank_memory_series (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	device TEXT NOT NULL,			-- "cuda:N" or "cpu"
	points INTEGER NOT NULL,
	peak_seq INTEGER,			-- the first point with the highest allocated
	baseline INTEGER NOT NULL DEFAULT 0,	-- allocated before the first event
	first_t_ns INTEGER,			-- the first point's time
	peak_allocated INTEGER,			-- allocated at peak_seq
	max_reserved INTEGER,			-- NULL: no point knows it
	PRIMARY KEY (run_id, rank, device)
) WITHOUT ROWID;

-- The points packed as memory_point_blocks' (store/evpack.h's ptpack).
CREATE TABLE rank_memory_point_blocks (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	device TEXT NOT NULL,
	first_seq INTEGER NOT NULL,		-- seq of the block's first point
	n INTEGER NOT NULL,			-- points in the block
	data BLOB NOT NULL,
	PRIMARY KEY (run_id, rank, device, first_seq)
) WITHOUT ROWID;

-- What was alive at a series' peak, as memory_groups.
CREATE TABLE rank_memory_groups (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	device TEXT NOT NULL,
	n INTEGER NOT NULL,			-- largest first
	category TEXT NOT NULL,
	op TEXT,
	bytes INTEGER NOT NULL,
	count INTEGER,
	PRIMARY KEY (run_id, rank, device, n)
) WITHOUT ROWID;

CREATE TABLE memory_from (
	artifact_id INTEGER PRIMARY KEY,
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL
);
INSERT INTO memory_from(artifact_id, run_id, rank)
	SELECT a.id, a.run_id, a.rank FROM artifacts a WHERE a.status='ready' AND a.id IN
	(SELECT artifact_id FROM memory_series WHERE source='trace');
INSERT INTO rank_pending(run_id, rank, seq)
	SELECT d.run_id, d.rank, 1 FROM memory_from d WHERE NOT EXISTS
	(SELECT 1 FROM rank_pending p WHERE p.run_id=d.run_id AND p.rank=d.rank)
	GROUP BY d.run_id, d.rank HAVING COUNT(*) > 1;
DELETE FROM memory_from WHERE EXISTS (SELECT 1 FROM memory_from o WHERE o.run_id=memory_from.run_id
	AND o.rank=memory_from.rank AND o.artifact_id<>memory_from.artifact_id);

INSERT INTO rank_memory_series(run_id, rank, device, points, peak_seq, baseline, first_t_ns, peak_allocated,
			       max_reserved)
	SELECT d.run_id, d.rank, m.device, m.points, m.peak_seq, m.baseline, m.first_t_ns, m.peak_allocated,
	       m.max_reserved
	FROM memory_series m JOIN memory_from d ON d.artifact_id=m.artifact_id WHERE m.source='trace';
INSERT INTO rank_memory_point_blocks(run_id, rank, device, first_seq, n, data)
	SELECT d.run_id, d.rank, b.device, b.first_seq, b.n, b.data
	FROM memory_point_blocks b JOIN memory_from d ON d.artifact_id=b.artifact_id
	JOIN memory_series m ON m.artifact_id=b.artifact_id AND m.device=b.device AND m.source='trace';
INSERT INTO rank_memory_groups(run_id, rank, device, n, category, op, bytes, count)
	SELECT d.run_id, d.rank, g.device, g.n, g.category, g.op, g.bytes, g.count
	FROM memory_groups g JOIN memory_from d ON d.artifact_id=g.artifact_id
	JOIN memory_series m ON m.artifact_id=g.artifact_id AND m.device=g.device AND m.source='trace';

DELETE FROM memory_point_blocks WHERE EXISTS (SELECT 1 FROM memory_series m WHERE
	m.artifact_id=memory_point_blocks.artifact_id AND m.device=memory_point_blocks.device AND m.source='trace');
DELETE FROM memory_groups WHERE EXISTS (SELECT 1 FROM memory_series m WHERE
	m.artifact_id=memory_groups.artifact_id AND m.device=memory_groups.device AND m.source='trace');
DELETE FROM memory_series WHERE source='trace';
DROP TABLE memory_from;
