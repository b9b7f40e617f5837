/*
 * event.h: one trace event as the ingest path carries it from the parser
 * (ingest/trace.c) through the pipeline (pipeline/ingest.c) to the store.
 * Plain data, shared by those three so that no copy is needed in between.
 */
#ifndef EVENT_H
#define EVENT_H

#include <stdint.h>

/* Which optional fields an event carried (tp_event.have). */
enum tp_have {
	TH_TS = 1 << 0, TH_DUR = 1 << 1, TH_PID = 1 << 2, TH_TID = 1 << 3,
	TH_EXT = 1 << 4, TH_CORR = 1 << 5, TH_STREAM = 1 << 6, TH_DEVICE = 1 << 7,
	TH_BYTES = 1 << 8, TH_SEQ = 1 << 9, TH_FWD_TID = 1 << 10, TH_FLOW = 1 << 11,
	TH_BPS = 1 << 12, TH_OCC = 1 << 13, TH_EV_IDX = 1 << 14, TH_DEV_TYPE = 1 << 15,
	TH_DEV_ID = 1 << 16, TH_ADDR = 1 << 17, TH_TOTAL_ALLOC = 1 << 18,
	TH_TOTAL_RES = 1 << 19, TH_SORT = 1 << 20,
	/* collectives: args PyTorch writes on record_param_comms and on NCCL kernels */
	TH_COLL = 1 << 21, TH_PG = 1 << 22, TH_DTYPE = 1 << 23, TH_IN_NELEMS = 1 << 24,
	TH_OUT_NELEMS = 1 << 25, TH_GROUP_SIZE = 1 << 26, TH_COLL_SEQ = 1 << 27,
};

struct tp_event {
	char ph;			/* 'X', 'i', 'M', 's', 'f', ...; never 0 */
	uint32_t name, cat;		/* interned string ids; 0 when absent */
	uint32_t arg;			/* M events: args.name (process or thread name), or args.labels */
	uint32_t have;			/* enum tp_have */
	int64_t ts_ns, dur_ns;		/* as written, before baseTimeNanoseconds */
	int64_t pid, tid;		/* numeric pid/tid */
	const char *pid_s, *tid_s;	/* set instead when pid/tid were strings; owned by the parser */
	uint32_t pid_sid, tid_sid;	/* and their interned ids */
	int64_t ext_id, corr, stream, device, bytes, seq, fwd_tid, flow_id;
	double blocks_per_sm, occupancy;	/* the string "inf" becomes INFINITY */
	/* [memory] events (bytes above is their signed "Bytes") */
	int64_t ev_idx, dev_type, dev_id, addr, total_alloc, total_reserved;
	int64_t sort_index;		/* M events process_sort_index, thread_sort_index: args.sort_index */
	/* collectives: "Collective name", "Process Group Name" and "dtype" as interned string ids
	 * (held in int64 so that the store packs them as the other fields), "In msg nelems",
	 * "Out msg nelems", "Group size", and "Seq" (the collective's sequence number in its group) */
	int64_t coll, pg, dtype, in_nelems, out_nelems, group_size, coll_seq;
};

/* Strings a parser interns before any input, so that their ids are constants (ingest/trace.c). */
enum trace_known_string {
	TRACE_S_MEMORY = 1,		/* "[memory]" */
	TRACE_S_OOM,			/* "[OutOfMemory]" */
	TRACE_S_USER_ANNOTATION,	/* "user_annotation" */
	TRACE_S_GPU_USER_ANNOTATION,	/* "gpu_user_annotation" */
	TRACE_S_AC2G,			/* "ac2g": CPU -> GPU flow, the same link as "correlation" */
	TRACE_S_ASYNC,			/* PyTorch 1.9's name for ac2g */
	TRACE_S_ASYNC_CPU_TO_GPU,	/* 2021-2022's name for ac2g */
	TRACE_S_OPERATOR,		/* PyTorch 1.9's cpu_op */
	TRACE_S_CPU_OP,
	TRACE_S_KNOWN_END
};
/* The text of a known string id (1 .. TRACE_S_KNOWN_END - 1); NULL for any other id. */
const char *trace_known_string(uint32_t id);

#endif
