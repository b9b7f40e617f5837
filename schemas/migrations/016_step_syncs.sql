-- 016: where each step's host part ends, and the runtime calls in it that
-- wait for the GPU (server/analysis/analysis.c step_syncs()). cpu_end_ns is
-- the ProfilerStep#N span's end: memory is sampled there (the host allocates,
-- and it runs ahead of the GPU work that ends dur_ns). sync_calls and sync_ns
-- count cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
-- cudaMemcpy and their driver forms started in that span; the gpu_sync
-- finding sums them over complete steps. NULL in rows analysed before: the
-- finding then falls back to whole-trace operator counts.
ALTER TABLE steps ADD COLUMN cpu_end_ns INTEGER;
ALTER TABLE steps ADD COLUMN sync_calls INTEGER;
ALTER TABLE steps ADD COLUMN sync_ns INTEGER;
