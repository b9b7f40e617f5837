/*
 * fmt_stacks.c: folded stacks' own rows: each frame's self and total
 * (stack_frames), under the artifact.
 */
#include "ingest/textfmt.h"
#include "store/fmt_stacks.h"
#include "store/store_int.h"

int store_insert_stacks(struct store_writer *w, int64_t artifact, const struct store_final *f, struct tp_errbuf *err)
{
	const struct tf_result *t = f->result;
	struct db_stmt *st = NULL;
	int rc = TP_OK;

	if (db_prepare(w->db, "INSERT INTO stack_frames(artifact_id, frame, self, total) VALUES(?1, ?2, ?3, ?4)", 0, &st) != DB_OK)
		rc = store_db_fail(err, w->db, "prepare");
	for (size_t i = 0; i < t->nframes && !rc; i++) {
		db_bind_int64(st, 1, artifact);
		store_bind_text(st, 2, t->frames[i].name);
		db_bind_int64(st, 3, t->frames[i].self);
		db_bind_int64(st, 4, t->frames[i].total);
		rc = store_step_reset(w->db, st, err);
	}
	db_finalize(st);
	return rc;
}
