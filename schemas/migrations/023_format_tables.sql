-- 023: the tables a format keeps its own rows in (issue 45), keyed by
-- artifact_id: deleting an artifact deletes its rows in each table listed
-- here (store_delete_rows, server/store/base.c), so that no list in the code
-- has to name them. The migration that makes a new format's tables lists
-- them here too, beside its CREATE TABLE; one that drops such a table takes
-- its row out. The memory series' tables, which several formats fill, and
-- the tables keyed by row key (event_blocks, strings, raw_chunks) are not
-- listed: base.c names them.

CREATE TABLE format_tables (
	name TEXT PRIMARY KEY
);

INSERT INTO format_tables(name) VALUES
	('lightning_actions'), ('lightning_functions'),	-- lightning_report (011, 013)
	('keyavg_ops'), ('keyavg_tables'),		-- key_averages (012)
	('stack_frames'),				-- stacks (011)
	('gpu_samples'),				-- gpu_log (011)
	('canary_metrics'), ('canary_ops');		-- canary_metrics (012)
