-- 018: the latest start (ts) of a block's events, beside min_ts and max_end
-- (the latest ts + dur). A trace upload that joins its rank looks for its
-- events among the rank's others that start in its span of time
-- (server/pipeline/overlap.h); max_end alone makes a block that holds one
-- long span (a step, a module's forward) match every window it covers. NULL
-- in blocks written before: max_end stands in for it.
ALTER TABLE event_blocks ADD COLUMN max_ts INTEGER;
