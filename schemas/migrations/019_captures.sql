-- 019: on-demand captures (issue 52): a request to profile the next steps
-- or seconds of a run that is already running, taken by the collectors of
-- its ranks (GET /api/v1/runs/{run}/captures/next), each of which ends its
-- part (POST /api/v1/captures/{id}/ranks/{rank}). server/store/captures.c.
--
-- captures.state: pending (no rank has taken it), running, done, failed,
-- expired (pending past expires_ns), cancelled. ranks: 'all', or the ranks
-- asked for as ',0,3,' (matched with LIKE '%,R,%'). activities: 'cpu,cuda'.
-- token: the first 8 hex of the SHA-256 of the write token that asked (NULL
-- when the server has no tokens); client: the address it asked from.
--
-- run_id names no foreign key: the run's removal (DELETE /runs/{run})
-- removes its captures after it, as it does its pending ranks.
CREATE TABLE captures (
	id INTEGER PRIMARY KEY,
	run_id INTEGER NOT NULL,
	created_ns INTEGER NOT NULL,
	expires_ns INTEGER NOT NULL,
	requested_by TEXT,
	token TEXT,
	client TEXT,
	steps INTEGER NOT NULL DEFAULT 0,
	seconds INTEGER NOT NULL DEFAULT 0,
	ranks TEXT NOT NULL,
	activities TEXT NOT NULL,
	state TEXT NOT NULL DEFAULT 'pending'
);
CREATE INDEX captures_by_run ON captures(run_id, id);
CREATE INDEX captures_by_state ON captures(state, expires_ns);

-- a rank's part: running (taken at started_ns) -> done | failed (reason)
CREATE TABLE capture_ranks (
	capture_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	state TEXT NOT NULL,
	reason TEXT,
	started_ns INTEGER NOT NULL,
	ended_ns INTEGER,
	PRIMARY KEY (capture_id, rank)
) WITHOUT ROWID;

-- the artifacts uploaded for a capture (?capture=ID), by the artifact's rank
CREATE TABLE capture_artifacts (
	capture_id INTEGER NOT NULL,
	rank INTEGER NOT NULL,
	artifact_id INTEGER NOT NULL,
	PRIMARY KEY (capture_id, rank, artifact_id)
) WITHOUT ROWID;
