-- 012: key_averages tables as an operator table, and rlhf-canary metrics.json (issue 21).

-- A prof.key_averages().table()'s rows, per artifact, in file order. /ops answers
-- from them when the rank has no trace. Times in ns, memory in bytes, exactly as
-- textfmt converts the printed cells; NULL where the table has no such column
-- (memory columns need profile_memory=True, device columns device time).
CREATE TABLE keyavg_ops (
	artifact_id INTEGER NOT NULL,
	n INTEGER NOT NULL,
	name TEXT NOT NULL,
	calls INTEGER NOT NULL,
	self_cpu_ns INTEGER,
	cpu_total_ns INTEGER,
	self_dev_ns INTEGER,
	dev_total_ns INTEGER,
	cpu_mem_bytes INTEGER,
	self_cpu_mem_bytes INTEGER,
	dev_mem_bytes INTEGER,
	self_dev_mem_bytes INTEGER,
	PRIMARY KEY (artifact_id, n)
) WITHOUT ROWID;

-- Each table's footers ("Self CPU time total", "Self CUDA time total") and the
-- word its device columns use (CUDA, XPU, ...; NULL: no device columns).
CREATE TABLE keyavg_tables (
	artifact_id INTEGER PRIMARY KEY,
	device TEXT,
	self_cpu_total_ns INTEGER,
	self_dev_total_ns INTEGER
);

-- rlhf-canary's metrics.json, one row per artifact, figures in the file's own
-- units (seconds, MiB, milliseconds) as parsed: NULL where the file has null.
-- env and config are the file's objects as compact JSON.
CREATE TABLE canary_metrics (
	artifact_id INTEGER PRIMARY KEY,
	run_id TEXT NOT NULL,
	timestamp TEXT,
	status TEXT,
	duration_s REAL,
	env_json TEXT,
	config_json TEXT,
	steps INTEGER NOT NULL,
	step_mean_s REAL,
	step_median_s REAL,
	step_p50_s REAL,
	step_p95_s REAL,
	step_p99_s REAL,
	step_min_s REAL,
	step_max_s REAL,
	step_std_s REAL,
	tokens_per_s REAL,
	max_mem_mb REAL,
	gpu_util_pct REAL,
	dataloader_wait_pct REAL,
	nan_steps INTEGER,
	inf_steps INTEGER,
	final_loss REAL,
	loss_diverged INTEGER,
	has_profiler INTEGER NOT NULL,
	trace_path TEXT,
	cuda_total_ms REAL,
	cpu_total_ms REAL,
	self_cuda_total_ms REAL
);

-- Its profiler block's top ops: device 0 top_cpu_ops, 1 top_cuda_ops, in file order.
CREATE TABLE canary_ops (
	artifact_id INTEGER NOT NULL,
	device INTEGER NOT NULL,
	n INTEGER NOT NULL,
	name TEXT NOT NULL,
	self_ms REAL NOT NULL,
	count INTEGER NOT NULL,
	PRIMARY KEY (artifact_id, device, n)
) WITHOUT ROWID;
