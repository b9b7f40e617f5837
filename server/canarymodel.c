/*
 * canarymodel.c: the canary model's names and its release (canarymodel.h).
 */
#include <string.h>

#include "alloc.h"
#include "canarymodel.h"

const char *const canary_stat_names[CANARY_NSTAT] = { "mean", "median", "p50", "p95", "p99", "min", "max", "std" };

void canary_metrics_clear(struct canary_metrics *m)
{
	if (!m)
		return;
	for (int d = 0; d < 2; d++) {
		for (size_t i = 0; i < m->nops[d]; i++)
			tp_free(m->ops[d][i].name);
		tp_free(m->ops[d]);
	}
	tp_free(m->run_id);
	tp_free(m->timestamp);
	tp_free(m->status);
	tp_free(m->trace_path);
	tp_free(m->env_json);
	tp_free(m->config_json);
	memset(m, 0, sizeof(*m));
}
