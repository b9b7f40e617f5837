#!/bin/bash
# tests/gpu/run_cupti.sh: libtrainscope-cupti.so on a real GPU (not run in CI:
# it needs one). Builds tests/gpu/cupti_app.cu with nvcc, runs it RUNS times
# without and RUNS times with the library (CUDA_INJECTION64_PATH and
# NVTX_INJECTION64_PATH, TRAINSCOPE_SPOOL), checks the spooled chunks of one
# traced run (every chunk parses; kernels, both copy directions, [memory]
# allocations and frees and the NVTX steps are there, with times inside the
# run's wall-clock window), uploads them to a trainscope-server when one is
# built and reads the steps and kernels back, and prints the overhead: the
# median wall time with against without.
#
# Usage: tests/gpu/run_cupti.sh [BUILD_DIR]   (default build/; run
#        `cmake -S . -B build && cmake --build build -j` first)
# Env:   RUNS (5), STEPS (50), KERNELS (20), MIB (16), NVCC_ARCH (native),
#        CUDA_HOME (/usr/local/cuda)
# Exit:  0 all checks passed; 1 a check failed; 2 missing GPU, nvcc or library.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
lib=$build/libtrainscope-cupti.so
cuda=${CUDA_HOME:-/usr/local/cuda}
runs=${RUNS:-5} steps=${STEPS:-50} kernels=${KERNELS:-20} mib=${MIB:-16}

[ -f "$lib" ] || { echo "no $lib: build first" >&2; exit 2; }
[ -x "$cuda/bin/nvcc" ] || { echo "no nvcc under $cuda" >&2; exit 2; }
if ! nvidia-smi -L >/dev/null 2>&1; then echo "no GPU (nvidia-smi -L failed)" >&2; exit 2; fi

work=$(mktemp -d)
trap 'kill "${srv:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
app=$work/cupti_app
"$cuda/bin/nvcc" -O2 -arch="${NVCC_ARCH:-native}" -o "$app" tests/gpu/cupti_app.cu
nvidia-smi -L | head -1

now() { date +%s%N; }
# one run: $1 = spool dir or "" (no library); prints the wall time in ns
run() {
	local t0 t1
	t0=$(now)
	if [ -n "$1" ]; then
		CUDA_INJECTION64_PATH=$lib NVTX_INJECTION64_PATH=$lib TRAINSCOPE_SPOOL=$1 \
			"$app" "$steps" "$kernels" "$mib" >"$work/out" 2>"$work/err"
	else
		"$app" "$steps" "$kernels" "$mib" >"$work/out" 2>"$work/err"
	fi
	t1=$(now)
	echo $((t1 - t0))
}

"$app" 2 2 1 >/dev/null	# warm-up: driver load, JIT cache
base_out=$("$app" "$steps" "$kernels" "$mib")
plain=() traced=()
for _ in $(seq "$runs"); do
	plain+=("$(run "")")
	rm -rf "$work/spool" && mkdir "$work/spool"
	t0=$(now)
	traced+=("$(run "$work/spool")")
	t1=$(now)
	[ "$(cat "$work/out")" = "$base_out" ] || { echo "FAIL: the traced run's stdout differs" >&2; exit 1; }
	[ ! -s "$work/err" ] || { echo "FAIL: the library wrote to stderr:" >&2; cat "$work/err" >&2; exit 1; }
done

# the last traced run's chunks
python3 - "$work/spool" "$t0" "$t1" "$steps" "$kernels" <<'EOF'
import glob, json, os, re, sys
spool, t0, t1, steps, kernels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
files = sorted(glob.glob(os.path.join(spool, "*")) + glob.glob(os.path.join(spool, ".*")))
bad = [f for f in files if not re.fullmatch(r"trace-\d+-\d+\.pt\.trace\.json", os.path.basename(f))]
assert not bad, f"unexpected files in the spool: {bad}"
assert files, "no chunk in the spool"
ev = []
for f in files:
    d = json.load(open(f))
    base = d["baseTimeNanoseconds"]
    for e in d["traceEvents"]:
        e["t"] = base + round(float(e["ts"]) * 1000)
        ev.append(e)
def cat(c, name=None):
    return [e for e in ev if e.get("cat") == c and (name is None or re.search(name, e["name"]))]
k = cat("kernel", "axpb")
h2d, d2h = cat("gpu_memcpy", "HtoD"), cat("gpu_memcpy", "DtoH")
mem = cat("cpu_instant_event", r"^\[memory\]$")
alloc = [e for e in mem if e["args"]["Bytes"] > 0 and e["args"]["Device Type"] == 1]
free = [e for e in mem if e["args"]["Bytes"] < 0 and e["args"]["Device Type"] == 1]
st = cat("user_annotation", r"^ProfilerStep#\d+$")
rt = cat("cuda_runtime", "^cudaLaunchKernel$")
print(f"{len(files)} chunks, {len(ev)} events: {len(k)} kernels, {len(h2d)} HtoD, {len(d2h)} DtoH, "
      f"{len(alloc)} allocs, {len(free)} frees, {len(st)} steps, {len(rt)} cudaLaunchKernel")
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", what); ok = False
check(len(k) == steps * kernels, f"kernels: {len(k)}, want {steps * kernels}")
check(len(h2d) >= steps and len(d2h) >= steps, "copies in both directions, one per step each")
check(len(alloc) >= steps and len(free) >= steps, "a cudaMalloc and a cudaFree per step")
check(len(st) == steps and sorted(int(e["name"].split("#")[1]) for e in st) == list(range(steps)), "steps 0..N-1")
check(len(rt) == steps * kernels, "one cudaLaunchKernel per kernel")
corr = {e["args"]["correlation"] for e in rt}
check(all(e["args"]["correlation"] in corr for e in k), "every kernel's correlation names a launch")
check(all(t0 <= e["t"] <= t1 for e in ev), "every event inside the run's wall-clock window")
check(all(float(e["dur"]) > 0 for e in k + h2d + d2h), "GPU spans have durations")
check(all(e["args"]["Total Allocated"] >= 0 for e in mem), "Total Allocated never negative")
per_step = sorted(st, key=lambda e: e["t"])
inside = sum(1 for e in k if any(s["t"] <= e["t"] <= s["t"] + float(s["dur"]) * 1000 + 1e7 for s in per_step))
check(inside == len(k), f"kernels within (10 ms of) a step: {inside}/{len(k)}")
sys.exit(0 if ok else 1)
EOF

# through the server, when one is built
if [ -x "$build/trainscope-server" ] && command -v curl >/dev/null; then
	port=$((20000 + RANDOM % 20000))
	"$build/trainscope-server" --listen "127.0.0.1:$port" --db "$work/ts.db" 2>"$work/server.log" &
	srv=$!
	for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
	for f in "$work"/spool/trace-*.pt.trace.json; do
		curl -fsS --data-binary @"$f" "http://127.0.0.1:$port/api/v1/runs/gpu/artifacts?rank=0&name=$(basename "$f")" >/dev/null
	done
	n=$(curl -fsS "http://127.0.0.1:$port/api/v1/runs/gpu/steps" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["steps"]))')
	kn=$(curl -fsS "http://127.0.0.1:$port/api/v1/runs/gpu/kernels?limit=1" | python3 -c 'import json,sys; k=json.load(sys.stdin)["kernels"][0]; print(k["name"], k["calls"])')
	echo "server: $n steps; top kernel: $kn"
	[ "$n" = "$steps" ] || { echo "FAIL: the server found $n steps, want $steps" >&2; exit 1; }
	kill "$srv"
	wait "$srv" || true
fi

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
mp=$(median "${plain[@]}") mt=$(median "${traced[@]}")
echo "wall time, median of $runs runs ($steps steps x $kernels kernels, $mib MiB copies):"
echo "  without the library: $((mp / 1000000)) ms   with: $((mt / 1000000)) ms   overhead: $(awk -v a="$mt" -v b="$mp" 'BEGIN {printf "%.1f%%", (a - b) * 100 / b}')"
