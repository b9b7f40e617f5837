-- 001: runs, artifacts, raw uploads, events.
--
-- Row keys of the per-artifact tables are (artifact_id << 32) | ordinal, so
-- that an artifact's rows form one contiguous key range: written in order
-- (B-tree appends, no secondary index on the ingest path), read and deleted
-- as a range. Times are int64 ns; event times are as written in the trace
-- and artifacts.base_ns is added on read (baseTimeNanoseconds may come after
-- the events in a file).

CREATE TABLE runs (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	project TEXT,
	tags TEXT NOT NULL DEFAULT '[]',
	metadata TEXT NOT NULL DEFAULT '{}',
	baseline INTEGER NOT NULL DEFAULT 0,
	created_ns INTEGER NOT NULL
);

-- status: ingesting (invisible to readers) -> ready | error
CREATE TABLE artifacts (
	id INTEGER PRIMARY KEY,
	run_id INTEGER NOT NULL REFERENCES runs(id),
	rank INTEGER NOT NULL,
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	sha256 TEXT,
	bytes INTEGER NOT NULL DEFAULT 0,
	raw_encoding TEXT NOT NULL DEFAULT 'upload',	-- 'upload': raw_chunks hold the upload as sent; 'gzip': gzip of it
	status TEXT NOT NULL DEFAULT 'ingesting',
	error_code TEXT,
	error TEXT,
	events INTEGER NOT NULL DEFAULT 0,
	base_ns INTEGER NOT NULL DEFAULT 0,
	peak_allocated INTEGER,
	meta TEXT,
	created_ns INTEGER NOT NULL
);
CREATE INDEX artifacts_by_run ON artifacts(run_id, sha256);

CREATE TABLE raw_chunks (
	key INTEGER PRIMARY KEY,	-- artifact << 32 | seq
	data BLOB NOT NULL
);

CREATE TABLE strings (
	key INTEGER PRIMARY KEY,	-- artifact << 32 | string id
	s TEXT NOT NULL
);

-- Events, packed (server/evpack.h): one row per block of up to 16384 events
-- of one kind, in file order. kind 0: every event but [memory] ones and
-- CPU->GPU flows (those repeat "correlation"); kind 1: [memory] and
-- [OutOfMemory] events. min_ts/max_end bound the block's events in time
-- (as written, before base_ns), so a time window reads only its blocks.
CREATE TABLE event_blocks (
	key INTEGER PRIMARY KEY,	-- artifact << 32 | block number
	kind INTEGER NOT NULL,
	n INTEGER NOT NULL,
	first INTEGER NOT NULL,		-- ordinal of the block's first event among its kind
	min_ts INTEGER,
	max_end INTEGER,
	data BLOB NOT NULL
);

-- ProfilerStep#N spans, absolute times
CREATE TABLE steps (
	artifact_id INTEGER NOT NULL,
	step INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	dur_ns INTEGER NOT NULL,
	PRIMARY KEY (artifact_id, step, start_ns)
) WITHOUT ROWID;
