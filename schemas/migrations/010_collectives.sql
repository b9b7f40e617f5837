-- 010: collectives (server/analysis/analysis.h, struct an_coll), per artifact
-- beside steps, op_stats and kernel_stats: one row per collective one rank ran,
-- for GET /runs/{run}/distributed. kind: an_ckind_names; pg: "Process Group
-- Name" ('' when the trace writes none); seq: "Seq" (NULL: none written);
-- step: the step whose CPU span holds the launch (NULL: none); launch_ns: the
-- host operator's start (the rank's arrival), absolute like steps.start_ns;
-- start_ns/end_ns: its kernels' first start and last end; time_ns: the sum of
-- its kernels' durations; bytes NULL and group_size NULL when not written.
CREATE TABLE collectives (
	artifact_id INTEGER NOT NULL,
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
	PRIMARY KEY (artifact_id, n)
) WITHOUT ROWID;
