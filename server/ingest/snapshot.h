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
struct snap_reader;

/*
 * The rules that give an allocation its category from its frames, in the
 * order they are tried (categorize() in snapshot.c says each), and
 * SNAP_RULE_BASELINE: a block alive at dump time that neither an entry nor
 * its own frames explain, counted under parameter.
 */
enum {
	SNAP_RULE_SAME_LINE, SNAP_RULE_MODULE_INIT, SNAP_RULE_ZERO_GRAD, SNAP_RULE_OPTIMIZER, SNAP_RULE_BACKWARD,
	SNAP_RULE_DATA, SNAP_RULE_FORWARD, SNAP_RULE_FORWARD_ALIVE, SNAP_RULE_NONE, SNAP_RULE_BASELINE, SNAP_NRULES
};
/* "same_line", "module_init", "zero_grad", "optimizer", "backward", "data_loading", "forward",
 * "forward_alive", "no_phase", "before_recording" */
extern const char *const snap_rule_names[SNAP_NRULES];

/*
 * A reader of the snapshot p will read, attached to it: it takes the trace
 * entries as the pickle runs (pickle_parser_on_append), so it is made
 * before the first byte is fed. TP_ERR_TOOBIG from the feed when the entries pass max_entries.
 */
struct snap_reader *snap_reader_new(struct pickle_parser *p, uint64_t max_entries);
void snap_reader_free(struct snap_reader *rd);

/*
 * The snapshot dict (or a bare list of segments, as memory_viz takes it)
 * into series owned by *out until snap_result_free. TP_ERR_INVALID when root
 * is not a snapshot; TP_ERR_TOOBIG when its devices' trace entries and
 * blocks, a list counted each time it is used (a memoised list can be every
 * device's), pass max_entries. Once per reader.
 */
int snap_timeline(struct snap_reader *rd, const struct pk_obj *root, struct snap_result **out,
		  const struct mem_series **series, size_t *nseries, struct snap_stats *stats, struct tp_errbuf *err);
void snap_result_free(struct snap_result *r);

#endif
