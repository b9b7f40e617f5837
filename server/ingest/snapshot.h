/*
 * snapshot.h: memory timelines by category from a torch.cuda.memory
 * snapshot (source "snapshot"; shared/reference/formats.md 3.2), read by
 * ingest/pickle.c. One series per device that has trace entries or
 * segments. Pure: no SQL.
 */
#ifndef SNAPSHOT_H
#define SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "ingest/pickle.h"
#include "memmodel.h"
#include "tp.h"

struct snap_stats {
	uint64_t entries;		/* trace entries, all devices */
	uint64_t allocs, frees_completed;
	int64_t reserved_end;		/* segments' total_size at dump time, all devices */
};

struct snap_result;

/*
 * The snapshot dict (or a bare list of segments, as memory_viz takes it)
 * into series owned by *out until snap_result_free. TP_ERR_INVALID when root
 * is not a snapshot; TP_ERR_TOOBIG when its devices' trace entries, a list
 * counted each time it is used (a memoised list can be every device's), pass
 * max_entries.
 */
int snap_timeline(const struct pk_obj *root, uint64_t max_entries, struct snap_result **out,
		  const struct mem_series **series, size_t *nseries, struct snap_stats *stats, struct tp_errbuf *err);
void snap_result_free(struct snap_result *r);

#endif
