#!/usr/bin/env python3
"""The long run (bench/soak.sh): N uploads of distinct bytes to one server, the
server's RSS sampled as they go. Each upload is a real fixture trace with its
own first key ({"soak": i, ...}), so none is a duplicate, to a rank of its own
(8 ranks a run); every 25th is the 54 MB V100 trace, the rest cycle through
the smaller fixtures.
Prints one line per sample and a summary; exits 1 when the RSS after the last
upload is at or above --max-rss-mb."""
import argparse, gzip, http.client, os, sys, threading, time

ap = argparse.ArgumentParser()
ap.add_argument('--port', type=int, required=True)
ap.add_argument('--pid', type=int, required=True)
ap.add_argument('--uploads', type=int, default=1000)
ap.add_argument('--clients', type=int, default=4)
ap.add_argument('--fixtures', required=True)
ap.add_argument('--max-rss-mb', type=float, default=150)
a = ap.parse_args()

big = 'hta_v100_train_memory.json.gz'
small = ['kineto_resnet50_workers0.json.gz', 'hta_ns_resolution.json.gz', 'hta_nccl_rel_ts.json.gz',
         'hta_sampled_rank0.json.gz', 'hta_sampled_rank1.json.gz', 'hta_alexnet.json.gz',
         'hta_amd_mi250.json.gz', 'hta_event_sync.json.gz', 'hta_triton_tiny.json.gz']
texts = {}
for name in [big] + small:
    t = gzip.decompress(open(os.path.join(a.fixtures, name), 'rb').read()).lstrip()
    assert t[:1] == b'{', name
    texts[name] = t


def rss_kb(field):
    for line in open('/proc/%d/status' % a.pid):
        if line.startswith(field + ':'):
            return int(line.split()[1])
    return 0


lock = threading.Lock()
nxt = [0]
status = {}
t0 = time.time()


def worker():
    conn = http.client.HTTPConnection('127.0.0.1', a.port, timeout=600)
    while True:
        with lock:
            i = nxt[0]
            if i >= a.uploads:
                return
            nxt[0] += 1
        name = big if i % 25 == 0 else small[i % len(small)]
        body = b'{"soak": %d, ' % i + texts[name][1:]
        # each upload its own (run, rank): the same fixture twice on one rank overlaps in time, and
        # the server refuses that (409 overlapping_upload) as it must
        conn.request('POST', '/api/v1/runs/soak-%d/artifacts?name=%s&rank=%d' % (i // 8, name[:-3], i % 8),
                     body=body, headers={'Content-Type': 'application/json'})
        r = conn.getresponse()
        r.read()
        with lock:
            status[r.status] = status.get(r.status, 0) + 1
            done = sum(status.values())
            if done % 100 == 0:
                print('%5d uploads  %6.1f s  RSS %6.1f MB  peak %6.1f MB  statuses %s' %
                      (done, time.time() - t0, rss_kb('VmRSS') / 1024, rss_kb('VmHWM') / 1024, dict(status)),
                      flush=True)


ts = [threading.Thread(target=worker) for _ in range(a.clients)]
for t in ts:
    t.start()
for t in ts:
    t.join()
time.sleep(1)
rss = rss_kb('VmRSS') / 1024
print('after %d uploads (%d clients, %.0f s): RSS %.1f MB, peak %.1f MB, statuses %s' %
      (a.uploads, a.clients, time.time() - t0, rss, rss_kb('VmHWM') / 1024, dict(status)))
sys.exit(0 if rss < a.max_rss_mb and set(status) == {201} else 1)
