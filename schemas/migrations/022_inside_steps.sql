-- 022: the operators and GPU spans inside a rank's complete steps, what
-- compare sets side by side (issue 45): derived with the rest of the rank's
-- analysis (analysis/inside.c), keyed by (run_id, rank), where compare
-- walked the rank's stored events at each uncached read before. gpu 0: an
-- operator (kind 0: calls starting in their step's ProfilerStep#N span on
-- the host, self time); gpu 1: a GPU span (kind: 0 kernel, 1 memcpy, 2
-- memset; calls starting in a step, time clipped to the steps).
--
-- A rank with a complete step is marked (rank_pending), so that its next
-- read derives it again from its stored events and fills the table.

CREATE TABLE inside_steps (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	gpu INTEGER NOT NULL,
	kind INTEGER NOT NULL,
	name TEXT NOT NULL,
	calls INTEGER NOT NULL,
	ns INTEGER NOT NULL,
	PRIMARY KEY (run_id, rank, gpu, kind, name)
) WITHOUT ROWID;
INSERT INTO rank_pending(run_id, rank, seq)
	SELECT s.run_id, s.rank, 1 FROM steps s WHERE s.incomplete=0 AND s.whole_trace=0 AND NOT EXISTS
	(SELECT 1 FROM rank_pending p WHERE p.run_id=s.run_id AND p.rank=s.rank)
	GROUP BY s.run_id, s.rank;
