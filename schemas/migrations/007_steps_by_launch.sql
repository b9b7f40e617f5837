-- 007: steps own the GPU work they launched (server/analysis/analysis.c).
-- dur_ns now runs from the step's start to the later of its CPU end and the
-- end of the GPU work it launched; cpu_dur_ns is the ProfilerStep#N span as
-- written (NULL in rows analysed before: dur_ns was that span then).
-- communication_ns (exposed communication) is one more component of the
-- breakdown, which still sums to dur_ns; comm_overlap_ns is communication
-- under computation kernels, outside the sum. incomplete: 0, or why the step
-- is left out of means, medians, compare and drift (1: it launched no GPU
-- work while other steps did, 2: the trace ends before its work was
-- recorded). whole_trace: 1 for the one row of a trace without steps.
-- gpu_busy_ns: time with any kernel the step launched running (computation
-- or communication), for GPU utilization; NULL in rows analysed before.
ALTER TABLE steps ADD COLUMN cpu_dur_ns INTEGER;
ALTER TABLE steps ADD COLUMN communication_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN comm_overlap_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN incomplete INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN whole_trace INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN gpu_busy_ns INTEGER;
