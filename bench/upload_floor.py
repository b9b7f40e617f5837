#!/usr/bin/env python3
"""What an upload costs the server before its bytes do: N one-event traces uploaded one after
another as the chunks of one run (rank 0, each later in time, so none is refused as an overlap),
to a fresh server, each on a connection of its own as trainscope-collect sends them; then N
GET /healthz the same way, the HTTP floor. Prints, for both, the median wall time per request
and the server's CPU time (all threads, /proc) per request. Twenty chunks pay this twenty times
where the whole file pays it once (issues 45 and 51).

Usage: bench/upload_floor.py SERVER [N]    (N: 300)
Stdlib only.
"""
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
import chunks_bench as cb  # noqa: E402


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def main():
    server = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    work = tempfile.mkdtemp(prefix="upload-floor-")
    srv, base = cb.start_server(server, work, quiet=True)
    port = int(base.rsplit(":", 1)[1])
    try:
        for what in ("upload", "healthz"):
            times = []
            c0 = cb.server_cpu(srv)
            for i in range(n):
                t = time.monotonic()
                if what == "upload":
                    body = json.dumps({"traceEvents": [{"ph": "X", "name": "op", "ts": 10 * i, "dur": 5,
                                                        "pid": 1, "tid": 1}]}).encode()
                    st = request(port, "POST", f"/api/v1/runs/floor/artifacts?rank=0&name=p{i}.json", body)
                    if st != 201:
                        sys.exit(f"upload {i}: HTTP {st}")
                else:
                    request(port, "GET", "/healthz")
                times.append(time.monotonic() - t)
            per = (cb.server_cpu(srv) - c0) / n
            print(f"{what}: {n} one after another, median {statistics.median(times) * 1000:.2f} ms each,"
                  f" server CPU {per * 1000:.2f} ms each")
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
