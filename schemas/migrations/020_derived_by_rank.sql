-- 020: what a rank's traces derive is the rank's, not an artifact's
-- (issue 45). steps, op_stats, kernel_stats and collectives were keyed by
-- the artifact they were stored under (the rank's first trace, or each
-- trace before 005), and every read gathered a rank's rows with
-- artifact_id IN (the rank's ready artifacts) and SELECT DISTINCT. They are
-- keyed by (run_id, rank) now: one analysis of the rank, written whole by
-- its upload (the rank's first trace) or by its derivation
-- (pipeline/runrank.h). steps.source_artifact names the artifact whose
-- ProfilerStep span gave the step, never NULL from here on.
--
-- Existing rows move to their artifact's (run_id, rank). A rank whose rows
-- were stored under more than one artifact (before 005) cannot be moved as
-- one analysis: its rows go and the rank is marked (rank_pending), so its
-- next read derives it again from its stored events.

CREATE TABLE derived_from (
	artifact_id INTEGER PRIMARY KEY,
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL
);
INSERT INTO derived_from(artifact_id, run_id, rank)
	SELECT a.id, a.run_id, a.rank FROM artifacts a WHERE a.status='ready' AND a.id IN
	(SELECT artifact_id FROM steps UNION SELECT artifact_id FROM op_stats
	 UNION SELECT artifact_id FROM kernel_stats UNION SELECT artifact_id FROM collectives);
INSERT INTO rank_pending(run_id, rank, seq)
	SELECT d.run_id, d.rank, 1 FROM derived_from d WHERE NOT EXISTS
	(SELECT 1 FROM rank_pending p WHERE p.run_id=d.run_id AND p.rank=d.rank)
	GROUP BY d.run_id, d.rank HAVING COUNT(*) > 1;
DELETE FROM derived_from WHERE EXISTS (SELECT 1 FROM derived_from o WHERE o.run_id=derived_from.run_id
	AND o.rank=derived_from.rank AND o.artifact_id<>derived_from.artifact_id);

CREATE TABLE rank_steps (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	step INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	dur_ns INTEGER NOT NULL,
	kernel_ns INTEGER NOT NULL DEFAULT 0,
	memcpy_ns INTEGER NOT NULL DEFAULT 0,
	memset_ns INTEGER NOT NULL DEFAULT 0,
	runtime_ns INTEGER NOT NULL DEFAULT 0,
	dataloader_ns INTEGER NOT NULL DEFAULT 0,
	cpu_ns INTEGER NOT NULL DEFAULT 0,
	idle_ns INTEGER NOT NULL DEFAULT 0,
	source_artifact INTEGER NOT NULL,
	cpu_dur_ns INTEGER,
	communication_ns INTEGER NOT NULL DEFAULT 0,
	comm_overlap_ns INTEGER NOT NULL DEFAULT 0,
	incomplete INTEGER NOT NULL DEFAULT 0,
	whole_trace INTEGER NOT NULL DEFAULT 0,
	gpu_busy_ns INTEGER,
	cpu_end_ns INTEGER,
	sync_calls INTEGER,
	sync_ns INTEGER,
	PRIMARY KEY (run_id, rank, step, start_ns)
) WITHOUT ROWID;
INSERT INTO rank_steps(run_id, rank, step, start_ns, dur_ns, kernel_ns, memcpy_ns, memset_ns, runtime_ns,
		       dataloader_ns, cpu_ns, idle_ns, source_artifact, cpu_dur_ns, communication_ns, comm_overlap_ns,
		       incomplete, whole_trace, gpu_busy_ns, cpu_end_ns, sync_calls, sync_ns)
	SELECT d.run_id, d.rank, s.step, s.start_ns, s.dur_ns, s.kernel_ns, s.memcpy_ns, s.memset_ns, s.runtime_ns,
	       s.dataloader_ns, s.cpu_ns, s.idle_ns, COALESCE(s.source_artifact, s.artifact_id), s.cpu_dur_ns,
	       s.communication_ns, s.comm_overlap_ns, s.incomplete, s.whole_trace, s.gpu_busy_ns, s.cpu_end_ns,
	       s.sync_calls, s.sync_ns
	FROM steps s JOIN derived_from d ON d.artifact_id=s.artifact_id;
DROP TABLE steps;
ALTER TABLE rank_steps RENAME TO steps;

CREATE TABLE rank_op_stats (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	device INTEGER NOT NULL,
	name TEXT NOT NULL,
	calls INTEGER NOT NULL,
	self_ns INTEGER NOT NULL,
	total_ns INTEGER NOT NULL,
	PRIMARY KEY (run_id, rank, device, name)
) WITHOUT ROWID;
INSERT INTO rank_op_stats(run_id, rank, device, name, calls, self_ns, total_ns)
	SELECT d.run_id, d.rank, o.device, o.name, o.calls, o.self_ns, o.total_ns
	FROM op_stats o JOIN derived_from d ON d.artifact_id=o.artifact_id;
DROP TABLE op_stats;
ALTER TABLE rank_op_stats RENAME TO op_stats;

CREATE TABLE rank_kernel_stats (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
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
	PRIMARY KEY (run_id, rank, kind, name)
) WITHOUT ROWID;
INSERT INTO rank_kernel_stats(run_id, rank, kind, name, calls, total_ns, min_ns, max_ns, tiny_calls, tiny_ns,
			      bps_ns, bps_sum, occ_ns, occ_sum)
	SELECT d.run_id, d.rank, k.kind, k.name, k.calls, k.total_ns, k.min_ns, k.max_ns, k.tiny_calls, k.tiny_ns,
	       k.bps_ns, k.bps_sum, k.occ_ns, k.occ_sum
	FROM kernel_stats k JOIN derived_from d ON d.artifact_id=k.artifact_id;
DROP TABLE kernel_stats;
ALTER TABLE rank_kernel_stats RENAME TO kernel_stats;

CREATE TABLE rank_collectives (
	run_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	n INTEGER NOT NULL,
	step INTEGER,
	kind TEXT NOT NULL,
	pg TEXT NOT NULL,
	seq INTEGER,
	launch_ns INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL,
	time_ns INTEGER NOT NULL,
	kernels INTEGER NOT NULL,
	bytes INTEGER,
	group_size INTEGER,
	before_op TEXT,
	before_ns INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, rank, n)
) WITHOUT ROWID;
INSERT INTO rank_collectives(run_id, rank, n, step, kind, pg, seq, launch_ns, start_ns, end_ns, time_ns, kernels,
			     bytes, group_size, before_op, before_ns)
	SELECT d.run_id, d.rank, c.n, c.step, c.kind, c.pg, c.seq, c.launch_ns, c.start_ns, c.end_ns, c.time_ns,
	       c.kernels, c.bytes, c.group_size, c.before_op, c.before_ns
	FROM collectives c JOIN derived_from d ON d.artifact_id=c.artifact_id;
DROP TABLE collectives;
ALTER TABLE rank_collectives RENAME TO collectives;

DROP TABLE derived_from;
