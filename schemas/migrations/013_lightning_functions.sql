-- 013: an AdvancedProfiler report's cProfile rows per action (issue 21).

-- The first rows (textfmt.h TF_FUNCTIONS_PER_ACTION) of each action's cProfile
-- table as printed (ordered by cumulative time), per artifact: action is
-- lightning_actions.n. ncalls "3/1" is 3 calls, 1 primitive (not recursive).
CREATE TABLE lightning_functions (
	artifact_id INTEGER NOT NULL,
	action INTEGER NOT NULL,
	n INTEGER NOT NULL,
	location TEXT NOT NULL,
	ncalls INTEGER NOT NULL,
	primitive_calls INTEGER NOT NULL,
	tottime_ns INTEGER NOT NULL,
	cumtime_ns INTEGER NOT NULL,
	PRIMARY KEY (artifact_id, action, n)
) WITHOUT ROWID;
