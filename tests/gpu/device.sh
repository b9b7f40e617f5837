#!/bin/bash
# tests/gpu/device.sh: what issue 20 asks of a GPU machine, in one go, for a
# lease of a few minutes. Not run in CI (it needs a GPU). Writes under $OUT
# (default /tmp/gpu-out) as each phase ends, so a run cut short still returns
# what it finished:
#   log.txt               everything printed
#   fixtures.tar.gz       record.py's runs (tests/fixtures/gpu/ is made from it)
#   cupti.tar.gz          the CUPTI library's checks: run_cupti.sh's output, the
#                         live run's answers, the overhead figures (JSON lines)
#   loop.tar.gz           the library's chunks of the training loop and
#                         Kineto's trace of the same loop
#
# Usage: tests/gpu/device.sh [PHASE ...]   phases: record dist live cupti overhead
#                                          (default: all, in that order)
# Needs: nvidia-smi, nvcc, python3 with torch; the server, collector and
# library built on Debian under .gpu/ (tests/gpu/stage.sh), whose libraries
# are used by those binaries alone (never by python: LD_LIBRARY_PATH is set
# only in their wrappers).
set -u
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/gpu-out}
W=/tmp/gpuw
mkdir -p "$OUT" "$W"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
G=$root/.gpu
phases=${*:-record dist live cupti overhead}
T0=$(date +%s)
say() { echo "== $(($(date +%s) - T0)) s: $*"; }

say "start: $(nvidia-smi -L | head -1); $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
nproc

# the library, built here against this machine's CUPTI (rpath to it); else the carried one
cupti_h=$(ls /usr/local/cuda/extras/CUPTI/include/cupti.h /usr/local/cuda/include/cupti.h 2>/dev/null | head -1)
[ -n "$cupti_h" ] || cupti_h=$(find / -xdev -name cupti.h -path '*include*' 2>/dev/null | head -1)
cupti_so=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so /usr/local/cuda/lib64/libcupti.so 2>/dev/null | head -1)
[ -n "$cupti_so" ] || cupti_so=$(find / -xdev -name 'libcupti.so*' 2>/dev/null | head -1)
say "CUPTI: $cupti_h $cupti_so"
lib=$W/libtrainscope-cupti.so
if ! gcc -std=c11 -D_POSIX_C_SOURCE=200809L -shared -fPIC -O2 -fvisibility=hidden -Icollector/cupti -Icommon -I"$(dirname "$cupti_h")" \
	collector/cupti/inject.c collector/cupti/convert.c collector/cupti/spool.c \
	"$cupti_so" -lpthread -ldl -Wl,-rpath,"$(dirname "$cupti_so")" -Wl,-z,defs -o "$lib"; then
	say "gcc failed: the carried library"
	lib=$G/real/libtrainscope-cupti.so
	export LD_LIBRARY_PATH=$(dirname "$cupti_so")
fi
ldd "$lib" | grep -i cupti

# the server and collector from Debian, their libraries beside them
mkdir -p "$W/bin"
for b in trainscope-server trainscope-collect; do
	printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/real/%s "$@"\n' "$G" "$G" "$b" >"$W/bin/$b"
	chmod +x "$W/bin/$b"
done
port=18470
srv=
# GET /api/v1/runs/live/$1 (or /$1 for healthz) to stdout; python, so no curl is needed
get() {
	local path=/api/v1/runs/live/$1
	[ "$1" = healthz ] && path=/healthz
	python3 -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=5).read())' \
		"http://127.0.0.1:$port$path" 2>/dev/null
}
start_server() {
	"$W/bin/trainscope-server" --listen 127.0.0.1:$port --db "$W/ts.db" --log-level warn 2>"$W/server.log" &
	srv=$!
	for _ in $(seq 100); do get healthz >/dev/null && return 0; sleep 0.1; done
	say "the server did not start"; cat "$W/server.log"; return 1
}
trap '[ -n "$srv" ] && kill $srv 2>/dev/null' EXIT
pack_fixtures() { (cd "$W" && tar czf "$OUT/fixtures.tar.gz" fix); ls -la "$OUT"; }
mkdir -p "$W/cupti" "$W/loop"
pack_cupti() { (cd "$W" && tar czf "$OUT/cupti.tar.gz" cupti); ls -la "$OUT"; }

for phase in $phases; do
case $phase in
record)
	# one at a time: a run beside another on the GPU has steps it slowed
	say "record"
	timeout 200 python3 tests/gpu/record.py --out "$W/fix" train healthy healthy_b half_batch dataloader sync \
		tiny growth ckpt_on ckpt_off compiled cudagraphs
	say "record done ($?)"
	pack_fixtures
	;;
dist)
	timeout 90 python3 tests/gpu/record.py --out "$W/fix" dist
	say "dist done ($?)"
	pack_fixtures
	;;
live)
	# the collector ships chunks while training runs; the steps are read as they arrive
	start_server || continue
	(
		for i in $(seq 60); do
			n=$(get steps | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["steps"]))' 2>/dev/null)
			echo "$(date +%s.%N) ${n:-none}"
			sleep 0.5
		done
	) >"$W/cupti/live_poll.txt" &
	poll=$!
	TRAINSCOPE_FLUSH_MS=500 timeout 90 "$W/bin/trainscope-collect" run --server http://127.0.0.1:$port --run live \
		--rank 0 --cupti "$lib" --drain-timeout 20 -- env -u LD_LIBRARY_PATH \
		python3 tests/gpu/train_loop.py --steps 1200 --warmup 10
	say "live: collect exited $?"
	sleep 2
	kill $poll 2>/dev/null
	for r in steps kernels ops diagnosis artifacts; do
		get $r >"$W/cupti/live_$r.json"
	done
	python3 -c 'import json; d=json.load(open("'"$W"'/cupti/live_steps.json")); print("live: server steps", len(d["steps"]))'
	kill $srv; wait $srv 2>/dev/null; srv=
	pack_cupti
	;;
cupti)
	# the CUDA sample: stdout alike, chunks checked, overhead (and through the server)
	mkdir -p "$W/build"
	ln -sf "$lib" "$W/build/libtrainscope-cupti.so"
	ln -sf "$W/bin/trainscope-server" "$W/build/trainscope-server"
	RUNS=5 timeout 120 tests/gpu/run_cupti.sh "$W/build" 2>&1 | tee "$W/cupti/run_cupti.txt"
	say "run_cupti: ${PIPESTATUS[0]}"
	pack_cupti
	;;
overhead)
	# the training loop: without, with the library (its chunks kept), with torch.profiler; interleaved
	# cost per launch: a launch-bound loop (1 MiB kernels, 50,000 launches)
	nvcc -O2 -arch=native -o "$W/app" tests/gpu/cupti_app.cu
	"$W/app" 2 2 1 >/dev/null
	for i in 1 2 3; do
		for mode in plain lib; do
			rm -rf "$W/sp" && mkdir "$W/sp"
			t0=$(date +%s%N)
			if [ $mode = lib ]; then
				CUDA_INJECTION64_PATH=$lib NVTX_INJECTION64_PATH=$lib TRAINSCOPE_SPOOL=$W/sp "$W/app" 10 5000 1 >/dev/null
			else
				"$W/app" 10 5000 1 >/dev/null
			fi
			t1=$(date +%s%N)
			echo "{\"bench\": \"launch\", \"mode\": \"$mode\", \"launches\": 50000, \"wall_ns\": $((t1 - t0))}"
		done
	done | tee -a "$W/cupti/overhead.jsonl"
	for i in 1 2 3; do
		timeout 60 python3 tests/gpu/train_loop.py --steps 100 | sed 's/^{/{"bench": "train", "mode": "none", /'
		rm -rf "$W/loop/spool" && mkdir -p "$W/loop/spool"
		CUDA_INJECTION64_PATH=$lib NVTX_INJECTION64_PATH=$lib TRAINSCOPE_SPOOL=$W/loop/spool timeout 60 \
			python3 tests/gpu/train_loop.py --steps 100 | sed 's/^{/{"bench": "train", "mode": "cupti", /'
		[ $i = 3 ] && continue
		k=$W/loop/kineto.pt.trace.json
		[ $i = 2 ] && k=$W/kineto2.json
		timeout 60 python3 tests/gpu/train_loop.py --steps 100 --torch-profiler "$k" |
			sed 's/^{/{"bench": "train", "mode": "torch_profiler", /'
	done | tee -a "$W/cupti/overhead.jsonl"
	gzip -9f "$W/loop/kineto.pt.trace.json"
	ls -la "$W/loop/spool" | head
	(cd "$W" && tar czf - loop | split -b 15M - "$OUT/loop.tar.gz.")
	pack_cupti
	;;
esac
done
say "all done"
