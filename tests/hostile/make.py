#!/usr/bin/env python3
"""Writes the hostile corpus (see README.md); run from anywhere, it writes beside itself."""
import gzip, json, os, pickle

here = os.path.dirname(os.path.abspath(__file__))


def put(rel, data):
    with open(os.path.join(here, rel), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def trace(events):
    return json.dumps({"traceEvents": events}, separators=(',', ':'))


BIG = "4611686018427387"  # µs: about 2^62 ns
put('trace/dur_near_2p62.json',
    '{"traceEvents":[' + ','.join(
        '{"ph":"X","cat":"%s","name":"%s","pid":%d,"tid":%d,"ts":%d,"dur":%s%s}' % (c, n, pid, tid, ts, BIG, a)
        for ts in (1, 2, 3)
        for c, n, pid, tid, a in (("user_annotation", "ProfilerStep#%d" % ts, 1, 1, ""),
                                  ("cpu_op", "aten::mm", 1, 1, ',"args":{"External id":%d}' % ts),
                                  ("cuda_runtime", "cudaLaunchKernel", 1, 1, ',"args":{"correlation":%d}' % ts),
                                  ("kernel", "gemm", 0, 7, ',"args":{"correlation":%d}' % ts),
                                  ("gpu_memcpy", "Memcpy DtoH", 0, 7, ""))) + ']}')
put('trace/ts_int64_min.json',
    '[{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":-9223372036854775.808,"dur":1}]')
mem = []
for i, (b, ta, tr) in enumerate(((9223372036854775807, 9223372036854775807, 9223372036854775807),
                                 (9223372036854775807, 9223372036854775807, 9223372036854775807),
                                 (-9223372036854775808, -9223372036854775808, 0),
                                 (-9223372036854775808, 0, 0))):
    mem.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 10 + i, "s": "t",
                "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 * (i % 2 + 1), "Bytes": b,
                         "Total Allocated": ta, "Total Reserved": tr}})
put('trace/memory_bytes_extreme.json', trace(
    [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1, "dur": 100}] + mem))
# a memory event with no address pairs nothing: Bytes of INT64_MIN is a free of INT64_MIN's negation
put('trace/memory_no_addr_int64_min.json', trace(
    [{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 10 + i, "s": "t",
      "args": {"Device Type": 1, "Device Id": 0, "Bytes": b}}
     for i, b in enumerate((9223372036854775807, -9223372036854775808, 9223372036854775807, 5))]))
put('trace/amap_high_bits.json.gz', gzip.compress(trace(
    [{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 10 + i, "s": "t",
      "args": {"Device Type": 1, "Device Id": 0, "Addr": (i % 1400) << 40, "Bytes": 512 if i < 1400 else -512,
               "Total Allocated": 512 * (i + 1 if i < 1400 else 2800 - i - 1), "Total Reserved": 1 << 30}}
     for i in range(2800)]).encode(), mtime=0))
# communication operators alike at one instant of one thread: each span scanned the whole group
put('trace/comm_same_instant.json', trace(
    [{"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 1000, "dur": 10,
      "args": {"Collective name": "allreduce", "In msg nelems": i, "dtype": "Float"}} for i in range(2900)]))
put('trace/formula_names.json', trace(
    [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1, "dur": 1000}] +
    [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 10 + 100 * i, "dur": 50}
     for i, n in enumerate(('=HYPERLINK("http://example.invalid/x","click")', '+SUM(1,2)', '-2+3', '@SUM(A1)',
                            '\t=1+1', '\r=1+1', 'aten::mm'))] +
    [{"ph": "X", "cat": "kernel", "name": '=cmd|" /C calc"!A0', "pid": 0, "tid": 7, "ts": 20, "dur": 30}]))
# a memory timeline whose first row (the times of [times, sizes]) is longer than --max-events
put('timeline/first_row_long.json', '[[' + ','.join('0' for _ in range(5000)) + '],[[0,1,2,3,4,5,6,7,8]]]')
put('timeline/raw_extreme.json', json.dumps(
    [[1, 1, 9223372036854775807, 0], [1, 1, 9223372036854775807, 0], [2, 1, 9223372036854775807, 1],
     [3, 2, -9223372036854775808, 0], [4, 2, -9223372036854775808, 2], [5, 1, 1, 7]]))
put('timeline/sizes_extreme.json', json.dumps(
    [[1, 2, 3], [[0] + [9223372036854775807] * 8, [0] + [-9223372036854775808] * 8, [0, 1, 2, 3, 4, 5, 6, 7, 8]]]))


def snapshot(traces, segments):
    return pickle.dumps({"segments": segments, "device_traces": traces}, protocol=4)


# one memoised list used by 64 devices (pickle values: about 6,000; entries used: 25,600)
entries = [{"action": "alloc", "addr": 4096 * i, "size": 512} for i in range(400)]
put('pickle/memo_device_traces.pickle', snapshot([entries] * 64, []))
# one memoised segment 64 times (pickle values: about 7,000; blocks used: 32,000)
seg = {"device": 0, "total_size": 1 << 20,
       "blocks": [{"address": 512 * i, "size": 512, "state": "active_allocated"} for i in range(500)]}
put('pickle/memo_segments.pickle', snapshot([], [seg] * 64))
# issue 50: copies counted as what they hold. One entry dict named 498,000 times (memo GETs) in a list
# used by 64 devices: 31.9 million entries, under the default cap of 32 million when each counted 1;
# 1,835 bytes gzip'd, 490 MiB of memory and a 1.1 GB database; now 413 (check_bad_input.c, default caps)
one = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0}
put('pickle/memo_entry_x64.pickle.gz', gzip.compress(snapshot([[one] * 498000] * 64, []), 9, mtime=0))
# under this corpus's cap of 20,000: one entry named 3,000 times (3,000 entries counted once; now
# 3,000 x (its 9 values + 3)); 50 entries in a list used by 64 devices (3,200; now 50 x 10 x 63 more)
put('pickle/memo_entry_3000.pickle', snapshot([[one] * 3000], []))
put('pickle/list_50_x64.pickle', snapshot([[{"action": "alloc", "addr": 512 * i, "size": 512} for i in range(50)]] * 64,
                                          []))
put('pickle/none_flood.pickle', b'\x80\x04(' + b'N' * 30000 + b'l.')
put('pickle/dup_flood.pickle', b'\x80\x04](' + b'2' * 30000 + b'e.')
put('pickle/binget_flood.pickle', b'\x80\x04]\x94(' + b'h\x00' * 30000 + b'e.')
# one list shared by two devices whose entries make no record (snapshot markers only): the copy
# each device gets starts from empty arrays (fuzz_pickle, UBSan: memcpy from NULL)
marks = [{"action": "snapshot", "addr": 0, "size": 0}]
put('pickle/shared_marks_only.pickle', snapshot(
    [marks, marks], [{"device": d, "address": 0, "total_size": 4096, "blocks": []} for d in (0, 1)]))
M = 9223372036854775807
put('pickle/sizes_extreme.pickle', snapshot(
    [[{"action": "segment_alloc", "addr": 0, "size": M, "stream": 0},
      {"action": "alloc", "addr": 1, "size": M, "stream": 0},
      {"action": "alloc", "addr": 2, "size": M, "stream": 0},
      {"action": "free_requested", "addr": 3, "size": M, "stream": 0},
      {"action": "free_completed", "addr": 4, "size": M, "stream": 0},
      {"action": "segment_free", "addr": 5, "size": M, "stream": 0},
      {"action": "segment_free", "addr": 6, "size": M, "stream": 0}]],
    [{"device": 0, "address": 0, "total_size": M, "allocated_size": M, "active_size": M, "stream": 0,
      "segment_type": "large", "blocks": [{"address": 9, "size": M, "state": "active_allocated"},
                                          {"address": 10, "size": M, "state": "active_allocated"}]}] * 2))
# token files (tests/e2e/check_upload.c): a 600-character read line, a NUL, a 33rd token
put('tokens/tokens_long_read_line.txt', 'secret-token-0123456789\nread ' + 'r' * 506 + 'W' * 94 + '\n')
put('tokens/tokens_nul.txt', b'secret-token-0123456789\nread reader-token-0123\x00456789abcdef\n')
put('tokens/tokens_33.txt', ''.join('token-%02d-0123456789abcdef\n' % i for i in range(33)))

# Other profilers' text reports (issue 21): cut, a column missing, units the tools never write, a
# line far over the cap, a year whose nanoseconds overflow, and text that is none of them.
os.makedirs(os.path.join(here, 'formats'), exist_ok=True)
SEP = '-' * 25 + '  ' + '  '.join(['-' * 12] * 4) + '  \n'
HDR = '%25s  %12s  %12s  %12s  %12s  \n' % ('Name', 'Self CPU %', 'Self CPU', 'CPU total', '# of Calls')
ROW = '%25s  %12s  %12s  %12s  %12s  \n'
put('formats/key_averages_cut.txt', SEP + HDR + SEP + ROW % ('aten::mm', '1.00%', '12.979us', '12.979us', '1'))
put('formats/key_averages_no_calls.txt', SEP + HDR + SEP + '%25s  %12s  %12s  %12s  \n' % ('aten::mm', '1.00%', '12.979us',
    '12.979us') + SEP)
put('formats/key_averages_furlongs.txt', SEP + HDR + SEP + ROW % ('aten::mm', '1.00%', '12.979fl', '12.979us', '1') + SEP)
# a table whose header lacks CPU total: no operator table (torch >= 1.7 always prints it)
SEP3 = '-' * 25 + '  ' + '  '.join(['-' * 12] * 3) + '  \n'
ROW3 = '%25s  %12s  %12s  %12s  \n'
put('formats/key_averages_no_cpu_total.txt', SEP3 + ROW3 % ('Name', 'Self CPU %', 'Self CPU', '# of Calls') + SEP3
    + ROW3 % ('aten::mm', '1.00%', '1.0us', '1') + SEP3)

# rlhf-canary metrics.json (issue 21): cut, a type or a range the canary never writes, nesting past
# jansson's depth, a number past a double, more ops than it lists, and past the 1 MiB cap (gzipped:
# the server inflates it); a JSON object that is neither a canary nor a trace keeps the trace's error.
CANARY = {'run_id': 'dpo_1_abcd', 'timestamp': '2026-01-26T16:05:40.123456', 'duration_seconds': 1.5,
          'perf': {'step_time': {'count': 2, 'mean': 0.5, 'median': 0.5, 'p50': 0.5, 'p95': 0.5, 'p99': 0.5,
                                 'min': 0.5, 'max': 0.5, 'std': 0.0},
                   'approx_tokens_per_sec': 100.0, 'max_mem_mb': 1.0},
          'status': 'completed'}
def canary(**perf):
    c = json.loads(json.dumps(CANARY))
    c['perf'].update(perf)
    return json.dumps(c, indent=2)
put('formats/canary_truncated.json', canary()[:120])
put('formats/canary_mean_text.json', canary(step_time={'count': 2, 'mean': 'fast'}))
put('formats/canary_negative_step.json', canary(step_time={'count': 2, 'mean': -0.5, 'std': 0.0}))
put('formats/canary_step_ns_overflow.json', canary(step_time={'count': 2, 'mean': 1e10, 'std': 0.0}))
put('formats/canary_mem_overflow.json', canary(max_mem_mb=1e400).replace('Infinity', '1e400'))
put('formats/canary_deep.json', '{"run_id": "x", "env": ' + '[' * 3000 + ']' * 3000 + '}')
put('formats/canary_many_ops.json', json.dumps(dict(CANARY, profiler={
    'cuda_time_total_ms': 1.0, 'cpu_time_total_ms': 1.0,
    'top_cuda_ops': [{'name': 'k%d' % i, 'self_cuda_time_ms': 1.0, 'count': 1} for i in range(101)]})))
put('formats/canary_too_large.json.gz', gzip.compress(json.dumps(dict(CANARY, stability={
    'loss_values': [0.5] * 300000})).encode(), mtime=0))
put('formats/json_neither.json', '{"hello": 1}')
put('formats/lightning_missing_total.txt',
    'FIT Profiler Report\n\nAction\t|  Mean duration (s)\t|  Num calls\t|  Total time (s)\t|  Percentage %\t|\n'
    + '-' * 80 + '\nrun_training_epoch\t|  21.692\t|  1\t|\n')
# AdvancedProfiler: a cProfile row whose time is not a number; ncalls of 2^64 (past int64)
adv = ('FIT Profiler Report\nProfile stats for: run_training_epoch\n         3 function calls in 0.500 seconds\n\n'
       '   Ordered by: cumulative time\n\n   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n')
put('formats/lightning_advanced_bad_row.txt', adv + '        1    0.100    0.100    x.500    0.500 train.py:1(step)\n')
put('formats/lightning_advanced_calls_overflow.txt', adv + '18446744073709551616/1    0.100    0.100    0.500    0.500 a.py:1(f)\n')
put('formats/stacks_long_line.txt', ';'.join(['f%d' % i for i in range(20000)]) + ' 5\n')
put('formats/stacks_weight_overflow.txt', 'a;b 9223372036854775807\na;c 9223372036854775807\n')
put('formats/smi_year_overflow.csv', '9999/12/31 23:59:59.999, 50 %, 1 MiB\n')
put('formats/smi_header_changes.csv', 'utilization.gpu [%]\n85 %\nmemory.used [MiB]\n100 MiB\n')
put('formats/prose.txt', 'Epoch 1: loss 0.25\nEpoch 2: loss 0.21\n')
put('formats/dashes_only.txt', '-' * 9)

# The same events twice in one rank (issue 50): a trace, then it again with a trailing space;
# chunks that overlap by a fifth; a chunk sent again with one byte of one event changed. Each
# later upload that repeats an event of the rank is refused (409 overlapping_upload); chunks that
# share only their thread names ('M' events, which each chunk may carry) are not.
ovl = []
for s in range(1, 5):
    t0 = 1000 * s
    ovl += [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % s, "pid": 1, "tid": 1, "ts": t0,
             "dur": 900},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 100,
             "args": {"External id": s}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 20,
             "dur": 10, "args": {"correlation": s, "External id": s}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t0 + 40, "dur": 500,
             "args": {"correlation": s, "External id": s, "device": 0, "stream": 7}},
            {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": t0 + 15,
             "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 * s, "Bytes": 1 << 20,
                                "Total Allocated": 1 << 20, "Total Reserved": 2 << 20}},
            {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": t0 + 800,
             "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 * s, "Bytes": -(1 << 20),
                                "Total Allocated": 0, "Total Reserved": 2 << 20}}]
names = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 1000, "args": {"name": "main"}}]
put('trace/overlap_whole.json', trace(names + ovl))
put('trace/overlap_whole_space.json', trace(names + ovl) + ' ')
put('trace/overlap_first_60.json', trace(names + ovl[:15]))
put('trace/overlap_last_60.json', trace(names + ovl[9:]))
put('trace/overlap_first_half.json', trace(names + ovl[:12]))
put('trace/overlap_last_half.json', trace(names + ovl[12:]))
put('trace/overlap_last_half_changed.json', trace(names + ovl[12:]).replace('"dur":500', '"dur":501', 1))

# Issue 50, what an input costs, not what it is called. Sent under the default caps by
# tests/e2e/check_bad_input.c (test_cost_default_caps), not by the MANIFEST (its --max-events of
# 3,000 would refuse them first).
gz = lambda b: gzip.compress(b, 9, mtime=0)  # noqa: E731
# raw rows whose t goes 1, 0, 1, 0: a point each, out of time order: sorted unpacked (80 bytes a
# point) up to 2^20 points, 413 past (a 970 KB gzip of them held 1.6 GiB)
put('timeline/raw_t_back_and_forth.json.gz', gz(b'[' + b'[1,0,512,2],[0,0,-512,2],' * 540000 + b'[2,0,0,0]]'))
# nvidia-smi rows of one column: 4 M are 96 MiB held past the 4 M-row cap's doubling, 413; 100,000
# pass, and GET /gpu answers one row in 50 of them (4 M of them answered 36 MB, held 1,053 MiB)
put('formats/smi_4m_rows.csv.gz', gz(b'utilization.gpu [%]\n' + b'0 %\n' * 4000000))
put('formats/smi_100k_rows.csv.gz', gz(b'utilization.gpu [%]\n' + b''.join(b'%d %%\n' % (i % 101) for i in range(100000))))
