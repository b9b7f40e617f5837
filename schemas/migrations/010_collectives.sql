-- 010: collectives (server/analysis/analysis.h, struct an_coll), per artifact
-- beside steps, op_stats and kernel_stats: one row per collective one rank ran,
-- for GET /runs/{run}/distributed. kind: an_ckind_names; pg: "Process Group
-- Name" ('' when the trace writes none); seq: "Seq" (NULL: none written);
-- step: the step whose CPU span holds the launch (NULL: none); launch_ns: the
-- host operator's start (the rank's arrival), absolute like steps.start_ns;
-- start_ns/end_ns: its kernels' first start and last end; time_ns: the sum of
-- its kernels' durations; bytes NULL and group_size NULL when not written;
-- before_op / before_ns: the top-level host operator with the most time on
-- the launching thread since its previous collective launch or the step's
-- start (NULL / 0: none).
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
	before_op TEXT,
	before_ns INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (artifact_id, n)
) WITHOUT ROWID;
