/*
 * reads.c: store reads shaped into answers (reads.h).
 */
#include "alloc.h"
#include "answer.h"
#include "reads.h"

static json_t *shaped(json_t *o, struct tp_errbuf *err)
{
	if (!o)
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	return o;
}

json_t *read_runs(struct store_reader *r, struct tp_errbuf *err)
{
	struct store_run_info *v;
	size_t n;
	json_t *o;

	if (store_runs(r, NULL, &v, &n, err))
		return NULL;
	o = shaped(answer_runs(v, n), err);
	store_runs_free(v, n);
	return o;
}

json_t *read_run(struct store_reader *r, const char *run, struct tp_errbuf *err)
{
	struct store_run_info *v;
	struct store_artifact_info *a = NULL;
	size_t n, na = 0;
	json_t *o = NULL;

	if (store_runs(r, run, &v, &n, err))
		return NULL;
	if (!store_artifacts(r, run, 0, &a, &na, err))
		o = shaped(answer_run(&v[0], a, na), err);
	store_runs_free(v, n);
	store_artifacts_free(a, na);
	return o;
}

json_t *read_artifact(struct store_reader *r, const char *run, int64_t id, struct tp_errbuf *err)
{
	struct store_artifact_info *v = NULL;
	size_t n = 0;
	json_t *o = NULL;

	if (!store_artifacts(r, run, id, &v, &n, err))
		o = shaped(answer_artifact(&v[0]), err);
	store_artifacts_free(v, n);
	return o;
}

json_t *read_steps(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	struct store_step *v;
	size_t n;
	json_t *o;

	if (store_steps(r, run, rank, &rank, &v, &n, err))
		return NULL;
	o = shaped(answer_steps(rank, v, n), err);
	tp_free(v);
	return o;
}

json_t *read_ops(struct store_reader *r, const char *run, int rank, int device, const char *sort, long limit,
		 struct tp_errbuf *err)
{
	struct store_table t;
	json_t *o;

	if (store_ops(r, run, rank, device, sort, limit, &t, err))
		return NULL;
	o = shaped(answer_ops(&t), err);
	store_table_free(&t);
	return o;
}

json_t *read_kernels(struct store_reader *r, const char *run, int rank, int kind, long limit, struct tp_errbuf *err)
{
	struct store_table t;
	json_t *o;

	if (store_kernels(r, run, rank, kind, limit, &t, err))
		return NULL;
	o = shaped(answer_kernels(&t), err);
	store_table_free(&t);
	return o;
}

json_t *read_ranks(struct store_reader *r, const char *run, struct tp_errbuf *err)
{
	struct store_rank *v;
	size_t n;
	json_t *o;

	if (store_ranks(r, run, &v, &n, err))
		return NULL;
	o = shaped(answer_ranks(v, n), err);
	store_ranks_free(v, n);
	return o;
}

json_t *read_metrics(struct store_reader *r, const char *run, const char *name, struct tp_errbuf *err)
{
	struct store_rows rows;
	json_t *o;

	if (store_metrics(r, run, name, &rows, err))
		return NULL;
	o = shaped(answer_metrics(run, &rows), err);
	store_rows_free(&rows);
	return o;
}

json_t *read_stacks(struct store_reader *r, const char *run, int rank, int top, struct tp_errbuf *err)
{
	struct store_rows rows;
	json_t *o;

	if (store_run_stacks(r, run, rank, top, &rank, &rows, err))
		return NULL;
	o = shaped(answer_stacks(run, rank, &rows), err);
	store_rows_free(&rows);
	return o;
}

json_t *read_actions(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	struct store_rows a, f;
	json_t *o;

	if (store_run_actions(r, run, rank, &rank, &a, &f, err))
		return NULL;
	o = shaped(answer_actions(run, rank, &a, &f), err);
	store_rows_free(&a);
	store_rows_free(&f);
	return o;
}

json_t *read_canary(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	struct canary_metrics m;
	int64_t artifact;
	json_t *o = NULL;

	if (!store_run_canary(r, run, rank, &rank, &m, &artifact, err))
		o = shaped(answer_canary(run, rank, artifact, &m), err);
	canary_metrics_clear(&m);
	return o;
}

json_t *read_gpu(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	struct store_rows rows;
	json_t *o = NULL;

	if (!store_run_gpu(r, run, rank, &rank, &rows, err))
		o = shaped(answer_gpu(run, rank, &rows), err);
	store_rows_free(&rows);
	return o;
}

json_t *read_segments(struct store_reader *r, const char *run, int rank, const char *device, int64_t artifact,
		      struct tp_errbuf *err)
{
	struct store_segments g;
	json_t *o = NULL;

	if (!store_memory_segments(r, run, rank, device, artifact, &g, err))
		o = shaped(answer_segments(&g), err);
	store_segments_free(&g);
	return o;
}
