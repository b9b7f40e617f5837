#!/usr/bin/env node
// Schema test: starts trainscope-server on a free loopback port with a fresh
// database, uploads real fixtures, fetches every JSON endpoint and validates
// each answer against schemas/api/*.schema.json (JSON Schema 2020-12, ajv),
// plus a few figures the schemas cannot say (each step's breakdown adds up
// to its duration, kernel totals cover the listed kernels, ...). Also parses
// schemas/openapi.yaml and checks that its $refs resolve.
//
//   node tests/schema/validate.mjs [BUILD_DIR]
//
// BUILD_DIR (argument, else $BUILD_DIR, else "build") is taken relative to
// the repository root and must hold trainscope-server. Fixtures come from
// $FIXTURES_DIR, else ../shared/fixtures beside the checkout. Prints one line
// per check and exits 1 when any fails; the server is stopped in every case.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { freePort } from '../lib/free_port.mjs';

import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../..');
const buildDir = path.resolve(repoRoot, process.argv[2] || process.env.BUILD_DIR || 'build');
const serverBin = path.join(buildDir, 'trainscope-server');
const fixturesDir = path.resolve(process.env.FIXTURES_DIR || path.resolve(repoRoot, '../shared/fixtures'));
const schemaDir = path.join(repoRoot, 'schemas/api');
const openapiFile = path.join(repoRoot, 'schemas/openapi.yaml');
// SERVER_WRAPPER runs the server under a tool, e.g. "valgrind --error-exitcode=99 --leak-check=full"
// (scripts/valgrind.sh): then its exit status says what the tool found
const wrapper = (process.env.SERVER_WRAPPER || '').split(' ').filter(Boolean);
const slow = wrapper.length ? 10 : 1;
const startTimeoutMs = 30000 * slow;	// ASan builds start slowly, valgrind more so
const requestTimeoutMs = 120000 * slow;

// run name -> fixture; nosteps has no ProfilerStep spans (the null cases)
const FIXTURES = [
	['v100', 'traces/hta_v100_train_memory.json.gz'],
	['resnet', 'traces/kineto_resnet50_workers0.json.gz'],
	['nccl', 'traces/hta_nccl_rel_ts.json.gz'],
	['cpuonly', 'traces/hta_cpu_only.json.gz'],
	['nosteps', 'traces/hta_alexnet.json.gz'],
	['cmp_base', 'traces/hta_compare_base.json.gz'],
	['cmp_test', 'traces/hta_compare_test.json.gz'],
];

let failures = 0;
let checks = 0;

function pass(what) {
	checks++;
	console.log(`ok   ${what}`);
}

function fail(what, why) {
	checks++;
	failures++;
	console.log(`FAIL ${what}: ${why}`);
}

function check(what, cond, why) {
	if (cond)
		pass(what);
	else
		fail(what, why);
	return cond;
}

// ---- schemas ----

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const schemaIds = {};

function loadSchemas() {
	for (const f of fs.readdirSync(schemaDir).filter((f) => f.endsWith('.schema.json')).sort()) {
		const file = path.join(schemaDir, f);
		const name = f.replace(/\.schema\.json$/, '');
		try {
			const schema = JSON.parse(fs.readFileSync(file, 'utf8'));
			// relative $refs ("artifact.schema.json#/$defs/artifact") resolve as files do
			schema.$id = pathToFileURL(file).href;
			ajv.addSchema(schema);
			schemaIds[name] = schema.$id;
		} catch (e) {
			fail(`schema ${f}`, e.message);
		}
	}
	for (const name of Object.keys(schemaIds)) {
		try {
			ajv.getSchema(schemaIds[name]);
			pass(`schema ${name}.schema.json compiles (draft 2020-12)`);
		} catch (e) {
			fail(`schema ${name}.schema.json compiles`, e.message);
		}
	}
}

// name: a schema file's name, or name#/$defs/... for one of its definitions
function validate(what, name, body) {
	const [file, frag] = name.split('#');
	const v = schemaIds[file] && ajv.getSchema(schemaIds[file] + (frag ? `#${frag}` : ''));
	if (!v)
		return fail(what, `no schema ${name}`);
	if (v(body))
		return pass(`${what} ~ ${name}`);
	const errs = v.errors.slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
	fail(`${what} ~ ${name}`, errs);
}

// ---- openapi.yaml ----

function checkOpenapi() {
	let doc;
	try {
		doc = YAML.parse(fs.readFileSync(openapiFile, 'utf8'));
	} catch (e) {
		return fail('openapi.yaml parses', e.message);
	}
	pass('openapi.yaml parses as YAML');
	const bad = [];
	(function walk(node) {
		if (Array.isArray(node))
			return node.forEach(walk);
		if (!node || typeof node !== 'object')
			return;
		const ref = node.$ref;
		if (typeof ref === 'string') {
			const [file, pointer] = ref.split('#');
			let target;
			if (file) {
				const p = path.resolve(path.dirname(openapiFile), file);
				try {
					target = JSON.parse(fs.readFileSync(p, 'utf8'));
				} catch (e) {
					bad.push(`${ref}: ${e.message}`);
				}
			} else {
				target = doc;
			}
			if (target && pointer) {
				for (const part of pointer.split('/').slice(1)) {
					target = target?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
				}
				if (target === undefined)
					bad.push(`${ref}: no such pointer`);
			}
		}
		Object.values(node).forEach(walk);
	})(doc);
	check('openapi.yaml $refs resolve', bad.length === 0, bad.slice(0, 5).join('; '));
	return doc;
}

// ---- the server ----

let server = null;
let serverLog = '';
let serverExit = null;
let tmpDir = null;

function killServer() {
	if (server && serverExit === null) {
		try {
			server.kill('SIGKILL');
		} catch { /* gone */ }
	}
	if (tmpDir) {
		fs.rmSync(tmpDir, { recursive: true, force: true });
		tmpDir = null;
	}
}
process.on('exit', killServer);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
	process.on(sig, () => {
		killServer();
		process.exit(130);
	});
}

async function startServer() {
	tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trainscope-schema-'));
	const port = await freePort();
	const base = `http://127.0.0.1:${port}`;
	const args = ['--listen', `127.0.0.1:${port}`, '--db', process.env.SCHEMA_DB || path.join(tmpDir, 't.db')];
	server = spawn(wrapper.length ? wrapper[0] : serverBin, [...wrapper.slice(1), ...(wrapper.length ? [serverBin] : []), ...args], {
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	const keep = (d) => {
		serverLog = (serverLog + d.toString()).slice(-8000);
	};
	server.stdout.on('data', keep);
	server.stderr.on('data', keep);
	server.on('exit', (code, sig) => {
		serverExit = { code, sig };
	});
	server.on('error', (e) => {
		serverExit = { code: null, sig: null, error: e.message };
	});
	const until = Date.now() + startTimeoutMs;
	while (Date.now() < until && serverExit === null) {
		try {
			const r = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) });
			if (r.status === 200)
				return base;
		} catch { /* not yet */ }
		await new Promise((r) => setTimeout(r, 100));
	}
	throw new Error(serverExit
		? `server exited before serving (${serverExit.error || `code ${serverExit.code}, signal ${serverExit.sig}`})`
		: `server did not answer /healthz within ${startTimeoutMs / 1000} s`);
}

async function stopServer() {
	if (!server || serverExit !== null)
		return;
	server.kill('SIGTERM');
	const until = Date.now() + 20000 * slow;
	while (serverExit === null && Date.now() < until)
		await new Promise((r) => setTimeout(r, 50));
	if (serverExit === null) {
		server.kill('SIGKILL');
		return fail('server stops on SIGTERM', 'still running after 20 s; killed');
	}
	check('server stops on SIGTERM with status 0', serverExit.code === 0,
		`exit code ${serverExit.code}, signal ${serverExit.sig}`);
}

// ---- requests ----

let base;
const answerText = new WeakMap();	// parsed body -> the text it came from

// JSON with the integers a double cannot hold (t_ns of epoch nanoseconds,
// 1.7e18 > 2^53) as BigInt; the rest as JSON.parse reads it. Node 20's
// JSON.parse has no source text in its reviver, so such integers are quoted
// first (they are never inside strings in the answers this reads).
function exactJson(text) {
	return JSON.parse(text.replace(/([:,[])(-?\d{16,})(?=[,\]}])/g, '$1"$2"'),
		(k, v) => (typeof v === 'string' && /^-?\d{16,}$/.test(v)
			? (Number.isSafeInteger(Number(v)) ? Number(v) : BigInt(v)) : v));
}

// a body expect() returned, read again with exact integers
function exactBody(body) {
	const text = body && answerText.get(body);
	return text === undefined ? undefined : exactJson(text);
}

function show(x) {
	return JSON.stringify(x, (k, v) => (typeof v === 'bigint' ? v.toString() : v));
}

// One request; body parsed as JSON when it is. Node's fetch asks for gzip and
// inflates it, so the JSON answers are read gzip-encoded.
async function request(method, url, body) {
	const r = await fetch(base + url, { method, body, signal: AbortSignal.timeout(requestTimeoutMs) });
	const text = await r.text();
	let json;
	try {
		json = JSON.parse(text);
	} catch { /* not JSON */ }
	return { status: r.status, headers: r.headers, text, json };
}

// GET (or POST) url, expect status, validate against schema; returns the body.
async function expect(method, url, status, schema, body) {
	const what = `${method} ${url}`;
	let r;
	try {
		r = await request(method, url, body);
	} catch (e) {
		fail(what, `request failed: ${e.message}`);
		return undefined;
	}
	if (r.status !== status) {
		fail(what, `status ${r.status}, expected ${status}: ${r.text.slice(0, 300)}`);
		return undefined;
	}
	const ct = r.headers.get('content-type') || '';
	if (!ct.startsWith('application/json')) {
		fail(what, `content-type ${ct}`);
		return undefined;
	}
	if (r.json === undefined) {
		fail(what, `not JSON: ${r.text.slice(0, 200)}`);
		return undefined;
	}
	validate(`${what} ${status}`, schema, r.json);
	if (r.json && typeof r.json === 'object')
		answerText.set(r.json, r.text);
	return r.json;
}

// ---- figures the schemas cannot express ----

function checkSteps(what, body) {
	if (!body?.steps)
		return;
	const bad = [];
	let prev = -Infinity;
	for (const s of body.steps) {
		const b = s.breakdown_ns || {};
		const sum = ['kernel', 'memcpy', 'memset', 'communication', 'runtime', 'dataloader', 'cpu', 'idle']
			.reduce((a, k) => a + (b[k] ?? 0), 0);
		if (sum !== s.dur_ns)
			bad.push(`step ${s.step}: parts add up to ${sum}, dur_ns ${s.dur_ns}`);
		if (s.start_ns < prev)
			bad.push(`step ${s.step} overlaps the step ahead of it`);
		if (s.whole_trace !== (s.step === null) || (s.incomplete !== (s.note !== null)))
			bad.push(`step ${s.step}: whole_trace ${s.whole_trace}, incomplete ${s.incomplete}, note ${s.note}`);
		prev = s.start_ns + s.dur_ns;	// steps never overlap
	}
	check(`${what}: breakdown_ns adds up to dur_ns for all ${body.steps.length} steps, in order`, !bad.length,
		bad.slice(0, 3).join('; '));
}

function checkTable(what, body, member, limit, totalKey) {
	if (!body?.[member] || !body.total)
		return;
	const rows = body[member];
	const calls = rows.reduce((a, r) => a + r.calls, 0);
	const time = rows.reduce((a, r) => a + r[totalKey], 0);
	check(`${what}: ${rows.length} rows within limit ${limit}, total covers them`,
		rows.length <= limit && body.total.calls >= calls && body.total[totalKey] >= time &&
		(body.total.names === undefined || body.total.names >= rows.length),
		`rows ${rows.length}, listed calls ${calls} ${totalKey} ${time} vs total ${JSON.stringify(body.total)}`);
}

// memory: the eight categories in PyTorch's export order
const CATEGORIES = ['parameter', 'optimizer_state', 'input', 'temporary', 'activation', 'gradient', 'autograd_detail', 'unknown'];
const MEMORY_TIMELINE = 'memory/hta_memory_timeline.raw.json.gz';

function memoryRow(body, i) {
	return CATEGORIES.map((k) => body.categories[k][i]);
}

// PyTorch's export_memory_timeline_raw rows [t_ns, action, bytes, category]
// (t_ns -1 for what existed before profiling, bytes signed) turned into time
// points the way PyTorch's own _coalesce_timeline does: one point per change
// of t_ns, the -1 point then dated at the smallest t_ns (so that timestamp
// comes twice). Categories are indices into CATEGORIES.
function pytorchTimeline(rows) {
	const t = [];
	const sizes = [];
	let tMin = null;
	for (const [ts, , bytes, cat] of rows) {
		if (ts >= 0 && (tMin === null || ts < tMin))
			tMin = ts;
		if (!t.length || ts !== t[t.length - 1]) {
			t.push(ts);
			sizes.push(sizes.length ? [...sizes[sizes.length - 1]] : CATEGORIES.map(() => 0));
		}
		sizes[sizes.length - 1][cat] += bytes;
	}
	return { t: t.map((x) => (x < 0 ? tMin : x)), sizes };
}

// one /memory answer: all arrays as long as t_ns, t_ns non-decreasing, the
// categories add up to allocated at every point, the peak is the largest
// allocated and is among the points answered
function checkMemory(what, body) {
	if (!body?.t_ns || !body.categories || !body.peak)
		return;
	const n = body.t_ns.length;
	const bad = [];
	for (const [k, a] of [...CATEGORIES.map((c) => [`categories.${c}`, body.categories[c]]),
		['allocated', body.allocated], ['reserved', body.reserved]])
		if (a?.length !== n)
			bad.push(`${k} has ${a?.length} elements, t_ns ${n}`);
	if (!bad.length) {
		for (let i = 1; i < n && bad.length < 3; i++)
			if (body.t_ns[i] < body.t_ns[i - 1])
				bad.push(`t_ns[${i}] ${body.t_ns[i]} before t_ns[${i - 1}] ${body.t_ns[i - 1]}`);
		for (let i = 0; i < n && bad.length < 3; i++) {
			const sum = memoryRow(body, i).reduce((a, b) => a + b, 0);
			if (sum !== body.allocated[i])
				bad.push(`point ${i}: categories add up to ${sum}, allocated ${body.allocated[i]}`);
		}
	}
	check(`${what}: ${n} points of ${body.points_total}, t_ns non-decreasing, categories add up to allocated`,
		!bad.length && n <= body.points_total, bad.slice(0, 3).join('; ') || `points_total ${body.points_total}`);
	if (bad.length)
		return;
	const max = body.allocated.reduce((a, b) => (b > a ? b : a), -Infinity);
	const at = body.t_ns.findIndex((t, i) => t === body.peak.t_ns && body.allocated[i] === body.peak.bytes);
	const sum = CATEGORIES.reduce((a, k) => a + body.peak.by_category[k], 0);
	check(`${what}: peak ${body.peak.bytes} B at ${body.peak.t_ns} is max(allocated), among the points, by_category adds up`,
		max === body.peak.bytes && at >= 0 && sum === body.peak.bytes &&
		CATEGORIES.every((k) => body.categories[k][at] === body.peak.by_category[k]),
		`max(allocated) ${max}, peak point index ${at}, by_category sum ${sum}`);
}

// a downsampled answer keeps real points: each (t_ns, categories) is one of the full series
function checkSampled(what, body, full) {
	if (!body?.t_ns || !full?.t_ns)
		return;
	const rows = new Set(full.t_ns.map((t, i) => show([t, ...memoryRow(full, i)])));
	const foreign = body.t_ns.findIndex((t, i) => !rows.has(show([t, ...memoryRow(body, i)])));
	check(`${what}: every point is one of the ${full.t_ns.length} of points=0, same peak`,
		foreign < 0 && body.points_total === full.points_total && body.peak.t_ns === full.peak.t_ns &&
		body.peak.bytes === full.peak.bytes,
		foreign >= 0 ? `point ${foreign} (t_ns ${body.t_ns[foreign]}) is not` : `peak ${show(body.peak)}`);
}

// ---- the run ----

async function main() {
	const doc = checkOpenapi();
	loadSchemas();

	if (!fs.existsSync(serverBin))
		throw new Error(`no server at ${serverBin} (build it first, or pass the build directory)`);
	if (!fs.existsSync(path.join(fixturesDir, 'traces')))
		throw new Error(`no fixtures at ${fixturesDir} (shared/ beside the checkout, or set FIXTURES_DIR)`);
	base = await startServer();
	pass(`server up at ${base} (${path.relative(repoRoot, serverBin) || serverBin})`);

	await expect('GET', '/healthz', 200, 'healthz');

	// uploads: 201, the same bytes again 200, a body that does not parse 400 with its artifact
	const ids = {};
	for (const [run, file] of FIXTURES) {
		const bytes = fs.readFileSync(path.join(fixturesDir, file));
		const a = await expect('POST', `/api/v1/runs/${run}/artifacts?name=${path.basename(file)}`, 201, 'artifact', bytes);
		if (a?.artifact) {
			ids[run] = a.artifact.id;
			check(`upload ${run}: ready, ${a.artifact.bytes} bytes, ${a.artifact.events} events`,
				a.artifact.status === 'ready' && a.artifact.bytes === bytes.length && a.artifact.events > 0,
				JSON.stringify(a.artifact));
		}
	}
	const again = await expect('POST', '/api/v1/runs/cpuonly/artifacts?name=again.json.gz', 200, 'artifact',
		fs.readFileSync(path.join(fixturesDir, 'traces/hta_cpu_only.json.gz')));
	if (again)
		check('upload of the same bytes answers the earlier artifact', again.artifact.id === ids.cpuonly,
			`id ${again.artifact.id}, first ${ids.cpuonly}`);
	const broken = await expect('POST', '/api/v1/runs/broken/artifacts?name=broken.json', 400, 'error',
		Buffer.from('{"traceEvents":[{"ph":"X",'));
	if (broken)
		check('unparsable upload is kept as an artifact with status error',
			broken.artifact?.status === 'error' && typeof broken.artifact?.error?.code === 'string',
			JSON.stringify(broken));

	// PyTorch's memory timeline export; device is the upload's to say (default cuda:0)
	const timeline = fs.readFileSync(path.join(fixturesDir, MEMORY_TIMELINE));
	const mt = await expect('POST', `/api/v1/runs/memraw/artifacts?name=${path.basename(MEMORY_TIMELINE)}`, 201, 'artifact',
		timeline);
	if (mt?.artifact)
		check('upload memraw: memory_timeline, ready, 7721 time points',
			mt.artifact.kind === 'memory_timeline' && mt.artifact.status === 'ready' && mt.artifact.events === 7721 &&
			mt.artifact.bytes === timeline.length, JSON.stringify(mt.artifact));
	const mtCpu = await expect('POST', '/api/v1/runs/memcpu/artifacts?name=timeline.json.gz&device=cpu', 201, 'artifact',
		timeline);
	if (mtCpu?.artifact)
		check('upload memcpu with device=cpu: memory_timeline, ready', mtCpu.artifact.kind === 'memory_timeline' &&
			mtCpu.artifact.status === 'ready', JSON.stringify(mtCpu.artifact));
	await expect('POST', '/api/v1/runs/memdev/artifacts?name=timeline.json.gz&device=gpu0', 400, 'error', timeline);
	// a Lightning SimpleProfiler report (issue 21): detected from its text, its actions at /actions
	{
		const up = await expect('POST', '/api/v1/runs/lightning/artifacts?name=profile.txt', 201, 'artifact',
			fs.readFileSync(path.join(fixturesDir, 'formats/lightning_simple_pl1.2_hannah.txt')));
		if (up?.artifact)
			check('upload lightning: lightning_report, ready', up.artifact.kind === 'lightning_report' &&
				up.artifact.status === 'ready', JSON.stringify(up.artifact));
		exactBody(await expect('GET', '/api/v1/runs/lightning/actions', 200, 'actions'));
		await expect('GET', '/api/v1/runs/v100/actions', 404, 'error');	/* a trace: no report */
		await expect('POST', '/api/v1/runs/lightning/artifacts?name=stacks.txt', 201, 'artifact',
			fs.readFileSync(path.join(fixturesDir, 'formats/export_stacks_gpt2_profile.txt')));
		exactBody(await expect('GET', '/api/v1/runs/lightning/stacks?top=5', 200, 'stacks'));
		await expect('GET', '/api/v1/runs/lightning/stacks?top=0', 400, 'error');
		await expect('GET', '/api/v1/runs/v100/stacks', 404, 'error');
		await expect('POST', '/api/v1/runs/lightning/artifacts?name=gpu.csv', 201, 'artifact',
			fs.readFileSync(path.join(fixturesDir, 'formats/nvidia_smi_noheader_plato.csv')));
		exactBody(await expect('GET', '/api/v1/runs/lightning/gpu', 200, 'gpu'));
		await expect('GET', '/api/v1/runs/v100/gpu', 404, 'error');
	}
	// a key_averages table: /ops answers from it (source key_averages) when the rank has no trace;
	// a trace's /ops says source trace (the analysis loop below validates those)
	{
		await expect('POST', '/api/v1/runs/keyavg/artifacts?name=key_averages.txt', 201, 'artifact',
			fs.readFileSync(path.join(fixturesDir, 'formats/key_averages_cuda_kernelheim.txt')));
		for (const q of ['', '?device=gpu', '?sort=name&limit=2']) {
			const ops = exactBody(await expect('GET', `/api/v1/runs/keyavg/ops${q}`, 200, 'ops'));
			if (ops)
				check(`GET /api/v1/runs/keyavg/ops${q}: source key_averages, its footers`, ops.source === 'key_averages' &&
					ops.key_averages.tables === 1 && ops.key_averages.device === 'CUDA', JSON.stringify(ops.key_averages));
		}
		const t = await expect('GET', '/api/v1/runs/v100/ops?limit=1', 200, 'ops');
		if (t)
			check('GET /api/v1/runs/v100/ops: source trace', t.source === 'trace', t.source);
	}
	// rlhf-canary metrics.json: /canary, its findings, and a baseline/slow compare (tests/formats)
	{
		for (const [run, file] of [['canary_base', 'canary_baseline.json'], ['canary_slow', 'canary_slow.json']]) {
			const up = await expect('POST', `/api/v1/runs/${run}/artifacts?name=metrics.json`, 201, 'artifact',
				fs.readFileSync(path.join(repoRoot, 'tests/formats', file)));
			if (up?.artifact)
				check(`upload ${run}: canary_metrics, ready`, up.artifact.kind === 'canary_metrics' &&
					up.artifact.status === 'ready' && up.artifact.events === 1, JSON.stringify(up.artifact));
			exactBody(await expect('GET', `/api/v1/runs/${run}/canary`, 200, 'canary'));
			await expect('GET', `/api/v1/runs/${run}/diagnosis`, 200, 'diagnosis');
		}
		await expect('GET', '/api/v1/runs/v100/canary', 404, 'error');
		const c = exactBody(await expect('GET', '/api/v1/compare?base=canary_base&target=canary_slow', 200, 'compare'));
		if (c)
			check('compare canary_base -> canary_slow: regression from the canary step time', c.verdict === 'regression' &&
				c.canary?.step_time?.significant === true, JSON.stringify(c.canary?.step_time));
		const k = exactBody(await expect('GET', '/api/v1/compare?base=keyavg&target=keyavg', 200, 'compare'));
		if (k)
			check('compare keyavg with itself: ops from key_averages', k.ops_source.base === 'key_averages' &&
				k.ops.length === 7 && k.canary === null, JSON.stringify(k.ops_source));
	}
	// memory snapshot pickles (protocol 4 starts with 0x80): the cs336 trace and a state-only dump
	for (const [run, file, points] of [['snapshot', 'memory/docubox_state_only_snapshot.pickle', 1],
		['snapcs336', 'memory/cs336_memory_snapshot.pickle', 3442]]) {
		const up = await expect('POST', `/api/v1/runs/${run}/artifacts?name=${path.basename(file)}`, 201, 'artifact',
			fs.readFileSync(path.join(fixturesDir, file)));
		if (up?.artifact)
			check(`upload ${run}: memory_snapshot, ready`, up.artifact.kind === 'memory_snapshot' &&
				up.artifact.status === 'ready', JSON.stringify(up.artifact));
		const p = `/api/v1/runs/${run}/memory`;
		const all = exactBody(await expect('GET', `${p}?points=0`, 200, 'memory'));
		checkMemory(`GET ${p}?points=0`, all);
		if (all?.t_ns)
			check(`GET ${p}?points=0: source snapshot, ${points} points, reserved known`,
				all.source === 'snapshot' && all.points_total === points && all.reserved.every((x) => x > 0),
				`${all.source}, ${all.points_total} points`);
		const some = exactBody(await expect('GET', `${p}?points=100`, 200, 'memory'));
		checkMemory(`GET ${p}?points=100`, some);
		checkSampled(`GET ${p}?points=100`, some, all);
		if (all?.t_ns?.length > 10) {
			// a window: real points of the series, from the state it opens with
			const [a0, a1] = [all.t_ns[Math.floor(all.t_ns.length / 3)], all.t_ns[Math.floor(all.t_ns.length / 2)]];
			const w = exactBody(await expect('GET', `${p}?points=50&start_ns=${a0}&end_ns=${a1}`, 200, 'memory'));
			checkSampled(`GET ${p}?points=50&start_ns=..&end_ns=..`, w, all);
			if (w?.t_ns)
				check(`GET ${p} window: ${w.t_ns.length} points from ${a0} to ${a1}`, w.t_ns[0] === a0 &&
					w.t_ns[w.t_ns.length - 1] === a1 && w.window_points >= w.t_ns.length, show(w.t_ns.slice(0, 3)));
		}
		await expect('GET', `${p}/peak`, 200, 'memory_peak');
		await expect('GET', `/api/v1/runs/${run}/diagnosis`, 200, 'diagnosis');
		// the segments at dump time: what the timeline's last point says was reserved (and, for a
		// state-only dump, allocated: with trace entries it counts the sizes requested, the blocks are rounded up)
		const seg = exactBody(await expect('GET', `${p}/segments`, 200, 'memory_segments'));
		if (seg?.segments && all?.t_ns) {
			const tiled = seg.segments.every((sg) => sg.blocks.reduce((o, b) => (o === b.offset ? o + b.size : NaN), 0) === sg.total_size);
			const alive = seg.segments.reduce((a, sg) => a + sg.allocated_bytes, 0);
			check(`GET ${p}/segments: blocks tile each segment, reserved as the timeline's end, allocated the segments' sum`,
				tiled && seg.reserved_bytes === all.reserved.at(-1) && alive === seg.allocated_bytes &&
				(points === 1 ? seg.allocated_bytes === all.allocated.at(-1)
					: Math.abs(seg.allocated_bytes - all.allocated.at(-1)) < all.allocated.at(-1) / 1e4),
				`tiled ${tiled}, reserved ${seg.reserved_bytes} vs ${all.reserved.at(-1)}, allocated ${seg.allocated_bytes} vs ${all.allocated.at(-1)}`);
			const again = exactBody(await expect('GET', `${p}/segments?artifact=${seg.artifact}&device=${seg.device}`, 200, 'memory_segments'));
			check(`GET ${p}/segments?artifact=${seg.artifact}: the same answer`, JSON.stringify(again) === JSON.stringify(seg), '');
		}
		await expect('GET', `${p}/segments?artifact=999999`, 404, 'error');
		await expect('GET', `${p}/segments?device=cuda:7`, 404, 'error');
		await expect('GET', `${p}/segments?artifact=0`, 400, 'error');
		await expect('GET', `${p}/segments?format=csv`, 400, 'error');
		await expect('GET', `${p}/segments?rank=7`, 404, 'error');
	}

	// runs
	const runs = await expect('GET', '/api/v1/runs', 200, 'runs');
	if (runs) {
		const names = runs.runs.map((r) => r.name);
		check('GET /api/v1/runs lists every uploaded run',
			[...FIXTURES.map(([r]) => r), 'broken'].every((n) => names.includes(n)), `got ${names.join(', ')}`);
		const ns = runs.runs.find((r) => r.name === 'nosteps');
		check('run without steps: steps 0, step_time_ns mean and median null',
			ns && ns.steps === 0 && ns.step_time_ns.mean === null && ns.step_time_ns.median === null,
			JSON.stringify(ns));
		const v = runs.runs.find((r) => r.name === 'v100');
		check('run v100: 5 steps, peak_allocated_bytes 6629508096 (fixtures README)',
			v && v.steps === 5 && v.peak_allocated_bytes === 6629508096, JSON.stringify(v));
		const m = runs.runs.find((r) => r.name === 'memraw');
		check('run memraw: no steps, peak_allocated_bytes 3082832104 (the memory timeline\'s peak)',
			m && m.steps === 0 && m.peak_allocated_bytes === 3082832104, JSON.stringify(m));
	}
	for (const run of [...FIXTURES.map(([r]) => r), 'broken']) {
		const r = await expect('GET', `/api/v1/runs/${run}`, 200, 'run');
		if (r && ids[run])
			check(`GET /api/v1/runs/${run} lists artifact ${ids[run]}`, r.artifacts.some((a) => a.id === ids[run]),
				JSON.stringify(r.artifacts.map((a) => a.id)));
	}
	for (const [run] of FIXTURES)
		if (ids[run])
			await expect('GET', `/api/v1/runs/${run}/artifacts/${ids[run]}`, 200, 'artifact');

	// analysis, every run
	for (const [run] of FIXTURES) {
		const p = `/api/v1/runs/${run}`;
		const steps = await expect('GET', `${p}/steps`, 200, 'steps');
		checkSteps(`GET ${p}/steps`, steps);
		for (const q of ['', '?device=cpu&sort=total_ns&limit=5', '?device=gpu', '?device=gpu&sort=calls&limit=3', '?sort=name&limit=100000']) {
			const ops = await expect('GET', `${p}/ops${q}`, 200, 'ops');
			checkTable(`GET ${p}/ops${q}`, ops, 'ops', Number(new URLSearchParams(q).get('limit') || 100), 'self_ns');
		}
		for (const q of ['', '?kind=kernel&limit=3', '?kind=memcpy', '?kind=memset']) {
			const k = await expect('GET', `${p}/kernels${q}`, 200, 'kernels');
			checkTable(`GET ${p}/kernels${q}`, k, 'kernels', Number(new URLSearchParams(q).get('limit') || 100), 'total_ns');
		}
		const ranks = await expect('GET', `${p}/ranks`, 200, 'ranks');
		if (ranks && steps)
			check(`GET ${p}/ranks: rank ${steps.rank} has the complete steps of /steps`,
				ranks.ranks.some((x) => x.rank === steps.rank &&
					x.steps === steps.steps.filter((s) => !s.incomplete && !s.whole_trace).length),
				JSON.stringify(ranks.ranks));
		await expect('GET', `${p}/diagnosis`, 200, 'diagnosis');
		if (steps)
			await expect('GET', `${p}/diagnosis?rank=${steps.rank}`, 200, 'diagnosis');
		const dist = await expect('GET', `${p}/distributed`, 200, 'distributed');
		if (dist && steps) {
			const mine = dist.ranks.find((x) => x.rank === steps.rank);
			check(`GET ${p}/distributed: rank ${steps.rank}'s steps are /steps' (compute = kernel, communication, idle)`,
				mine && mine.steps.length === steps.steps.length && mine.steps.every((x, i) =>
					x.step === steps.steps[i].step && x.dur_ns === steps.steps[i].dur_ns &&
					x.compute_ns === steps.steps[i].breakdown_ns.kernel &&
					x.communication_ns === steps.steps[i].breakdown_ns.communication &&
					x.overlap_ns === steps.steps[i].comm_overlap_ns && x.idle_ns === steps.steps[i].breakdown_ns.idle),
				show([mine, steps.steps]));
			const first = steps.steps.find((x) => !x.whole_trace);
			if (first) {
				const one = await expect('GET', `${p}/distributed?step=${first.step}`, 200, 'distributed');
				check(`GET ${p}/distributed?step=${first.step}: that step alone`, one && one.step === first.step &&
					one.ranks.every((x) => x.steps.every((y) => y.step === first.step)), show(one?.ranks));
				const cpl = await expect('GET', `${p}/critical_path?step=${first.step}`, 200, 'critical_path');
				const cp = cpl && exactBody(cpl);	// absolute times pass 2^53: BigInt
				let at = cp ? BigInt(cp.start_ns) : 0n;
				check(`GET ${p}/critical_path?step=${first.step}: the segments tile [start_ns, end_ns), by_kind sums to dur_ns`,
					cp && cp.step === first.step && BigInt(cp.end_ns) - BigInt(cp.start_ns) === BigInt(cp.dur_ns) &&
					cp.segments.every((x) => { const ok = BigInt(x.start_ns) === at && x.dur_ns > 0; at += BigInt(x.dur_ns); return ok; }) &&
					at === BigInt(cp.end_ns) && cp.by_kind.reduce((a, x) => a + x.ns, 0) === cp.dur_ns &&
					cp.segments.every((x) => cp.ranks.some((r) => r.rank === x.rank)), show(cpl && { ...cpl, segments: cpl.segments.slice(0, 20) }));
			}
		}
	}
	const v100 = await expect('GET', '/api/v1/runs/v100/steps?rank=65535', 404, 'error');
	if (v100)
		check('steps of a rank the run lacks: 404 rank_not_found', v100.error.code === 'rank_not_found', JSON.stringify(v100));
	await expect('GET', '/api/v1/runs/broken/steps', 200, 'steps');
	await expect('GET', '/api/v1/runs/broken/ranks', 200, 'ranks');
	await expect('GET', '/api/v1/runs/broken/diagnosis', 200, 'diagnosis');

	// memory: PyTorch's export (figures from the fixtures README, HTA's own test)
	{
		const p = '/api/v1/runs/memraw/memory';
		const all = exactBody(await expect('GET', `${p}?points=0`, 200, 'memory'));
		checkMemory(`GET ${p}?points=0`, all);
		if (all?.t_ns) {
			check(`GET ${p}?points=0: source pytorch, cuda:0, rank 0, all 7721 points`,
				all.source === 'pytorch' && all.device === 'cuda:0' && all.rank === 0 && all.t_ns.length === 7721 &&
				all.points_total === 7721, `${all.source} ${all.device} rank ${all.rank}, ${all.t_ns.length} of ${all.points_total}`);
			const row744 = [102440608, 102228128, 19395584, 0, 2618160128, 58417152, 41811968, 25494440];
			const last = [102440608, 102228128, 19395584, 0, 128000, 107868160, 0, 424];
			const got744 = all.t_ns.length > 744 ? memoryRow(all, 744) : [];
			const gotLast = memoryRow(all, all.t_ns.length - 1);
			check(`GET ${p}?points=0: row 744 is ${JSON.stringify(row744)}`,
				JSON.stringify(got744) === JSON.stringify(row744), JSON.stringify(got744));
			check(`GET ${p}?points=0: last row is ${JSON.stringify(last)}`,
				JSON.stringify(gotLast) === JSON.stringify(last), JSON.stringify(gotLast));
			const max = all.allocated.reduce((a, b) => (b > a ? b : a), 0);
			check(`GET ${p}?points=0: max(allocated) = peak.bytes = 3082832104`,
				max === 3082832104 && all.peak?.bytes === 3082832104, `max ${max}, peak ${all.peak?.bytes}`);
			check(`GET ${p}?points=0: reserved unknown (null) for source pytorch`, all.reserved.every((x) => x === null),
				JSON.stringify(all.reserved.filter((x) => x !== null).slice(0, 3)));
			// every point, t_ns to the nanosecond, against the fixture read here
			const want = pytorchTimeline(exactJson(zlib.gunzipSync(timeline).toString('utf8')));
			const n = Math.max(want.t.length, all.t_ns.length);
			let i = 0;
			while (i < n && want.t[i] === all.t_ns[i] && show(want.sizes[i]) === show(memoryRow(all, i)))
				i++;
			check(`GET ${p}?points=0: t_ns and categories of all ${want.t.length} points are those of the fixture, coalesced as PyTorch does`,
				i === n, `point ${i}: ${show([all.t_ns[i], ...(i < all.t_ns.length ? memoryRow(all, i) : [])])}, ` +
				`fixture ${show([want.t[i], ...(want.sizes[i] || [])])}`);
		}
		const dflt = exactBody(await expect('GET', p, 200, 'memory'));
		checkMemory(`GET ${p}`, dflt);
		if (dflt?.t_ns)
			check(`GET ${p}: 2000 points by default`, dflt.t_ns.length === 2000, `${dflt.t_ns.length} points`);
		checkSampled(`GET ${p}`, dflt, all);
		const hundred = exactBody(await expect('GET', `${p}?points=100`, 200, 'memory'));
		checkMemory(`GET ${p}?points=100`, hundred);
		if (hundred?.t_ns)
			check(`GET ${p}?points=100: 100 points, the peak among them`, hundred.t_ns.length === 100 &&
				hundred.t_ns.some((t, i) => t === hundred.peak.t_ns && hundred.allocated[i] === 3082832104),
				`${hundred.t_ns.length} points, peak ${show(hundred.peak)}`);
		checkSampled(`GET ${p}?points=100`, hundred, all);

		const peak = exactBody(await expect('GET', `${p}/peak`, 200, 'memory_peak'));
		if (peak?.groups && all?.peak) {
			const sum = peak.groups.reduce((a, g) => a + g.bytes, 0);
			const byCat = Object.fromEntries(CATEGORIES.map((k) => [k, 0]));
			for (const g of peak.groups)
				byCat[g.category] += g.bytes;
			check(`GET ${p}/peak: the peak of /memory (t_ns, bytes), groups add up to it and to by_category`,
				peak.source === all.source && peak.device === all.device && peak.rank === all.rank &&
				peak.t_ns === all.peak.t_ns && peak.bytes === all.peak.bytes && sum === peak.bytes &&
				CATEGORIES.every((k) => byCat[k] === all.peak.by_category[k]),
				`peak ${peak.t_ns} ${peak.bytes} B, groups ${sum} B, by category ${show(byCat)} vs ${show(all.peak)}`);
		}

		// device from the upload; another device of the run has no data
		const cpu = await expect('GET', '/api/v1/runs/memcpu/memory?points=10', 200, 'memory');
		if (cpu)
			check('GET /api/v1/runs/memcpu/memory: device cpu, as uploaded', cpu.device === 'cpu' && cpu.t_ns.length === 10,
				`${cpu.device}, ${cpu.t_ns.length} points`);
		for (const q of ['?device=cpu', '?device=cuda:1', '?rank=1', '/peak?device=cpu']) {
			const e = await expect('GET', `${p}${q}`, 404, 'error');
			const code = q === '?rank=1' ? 'rank_not_found' : 'no_memory_data';
			if (e)
				check(`GET ${p}${q}: ${code}`, e.error.code === code, JSON.stringify(e));
		}

		// a trace run: no memory categories from [memory] events yet, so 404 no_memory_data;
		// once they are built, a valid source "trace" answer passes (and is checked) instead
		for (const url of ['/api/v1/runs/v100/memory?points=0', '/api/v1/runs/v100/memory/peak']) {
			let r;
			try {
				r = await request('GET', url);
			} catch (e) {
				fail(`GET ${url}`, `request failed: ${e.message}`);
				continue;
			}
			if (r.status === 404) {
				validate(`GET ${url} 404`, 'error', r.json);
				check(`GET ${url}: no_memory_data (trace memory not built yet)`, r.json?.error?.code === 'no_memory_data',
					r.text.slice(0, 300));
			} else if (r.status === 200) {
				const peakUrl = url.includes('/peak');
				validate(`GET ${url} 200`, peakUrl ? 'memory_peak' : 'memory', r.json);
				if (!peakUrl)
					checkMemory(`GET ${url}`, exactJson(r.text));
				check(`GET ${url}: source trace, peak 6629508096 B (fixtures README)`, r.json?.source === 'trace' &&
					(peakUrl ? r.json.bytes : r.json?.peak?.bytes) === 6629508096, r.text.slice(0, 300));
			} else {
				fail(`GET ${url}`, `status ${r.status}, expected 404 no_memory_data or 200: ${r.text.slice(0, 300)}`);
			}
		}
	}

	// CSV
	{
		const r = await request('GET', '/api/v1/runs/v100/steps?format=csv');
		const head = r.text.split('\r\n')[0];
		check('GET /api/v1/runs/v100/steps?format=csv: text/csv with a header row',
			r.status === 200 && (r.headers.get('content-type') || '').startsWith('text/csv') &&
			head.startsWith('rank,step,start_ns,dur_ns,cpu_dur_ns,') && head.includes('breakdown_ns.communication'),
			`status ${r.status}, first line ${head}`);
	}

	// the description, served as compiled in
	{
		const r = await request('GET', '/api/v1/openapi.yaml');
		check('GET /api/v1/openapi.yaml: schemas/openapi.yaml as it is', r.status === 200 &&
			r.text === fs.readFileSync(openapiFile, 'utf8'), `status ${r.status}, ${r.text.length} characters`);
	}

	// a trace without steps is analysed whole
	{
		const w = (await request('GET', '/api/v1/runs/nosteps/steps')).json?.steps || [];
		check('GET /api/v1/runs/nosteps/steps: one whole-trace entry, step null, with GPU work',
			w.length === 1 && w[0].whole_trace === true && w[0].step === null && w[0].breakdown_ns.kernel > 0,
			JSON.stringify(w).slice(0, 300));
	}

	// trace window: Chrome trace JSON, gzip when accepted
	{
		const steps = (await request('GET', '/api/v1/runs/resnet/steps')).json?.steps || [];
		const s = steps[0];
		const url = s ? `/api/v1/runs/resnet/trace?start_ns=${s.start_ns}&end_ns=${s.start_ns + s.dur_ns}` : '/api/v1/runs/resnet/trace';
		try {
			const r = await fetch(base + url, { headers: { 'accept-encoding': 'gzip' }, signal: AbortSignal.timeout(requestTimeoutMs) });
			const enc = r.headers.get('content-encoding');
			const t = await r.json();
			validate(`GET ${url} ${r.status}`, 'trace', t);
			const ev = t.traceEvents;
			const inWindow = s ? ev.filter((e) => e.ph === 'X').every((e) =>
				Math.round(e.ts * 1000) < s.start_ns + s.dur_ns && Math.round((e.ts + (e.dur || 0)) * 1000) >= s.start_ns) : true;
			check(`GET ${url}: gzip Chrome trace, ${Array.isArray(ev) ? ev.length : '?'} events, all in the window`,
				r.status === 200 && enc === 'gzip' && Array.isArray(ev) && ev.length > 0 && inWindow &&
				ev.some((e) => e.name === `ProfilerStep#${s?.step}`),
				`status ${r.status}, content-encoding ${enc}, in window ${inWindow}`);
		} catch (e) {
			fail(`GET ${url}`, e.message);
		}
	}

	// on-demand captures: made, listed, taken by a rank, ended, cancelled
	{
		const made = await expect('POST', '/api/v1/runs/v100/captures', 201, 'capture',
			'{"steps": 5, "ranks": [0], "activities": ["cpu", "cuda", "memory"], "requested_by": "schema test"}');
		const other = await expect('POST', '/api/v1/runs/v100/captures', 201, 'capture', '{"seconds": 10}');
		if (made && other) {
			await expect('GET', '/api/v1/runs/v100/captures', 200, 'captures');
			const taken = await expect('GET', '/api/v1/runs/v100/captures/next?rank=0', 200, 'capture');
			if (taken)
				check('captures/next?rank=0: the oldest, running at rank 0', taken.capture.id === made.capture.id &&
					taken.capture.state === 'running' && taken.capture.by_rank[0].state === 'running', JSON.stringify(taken));
			await expect('POST', `/api/v1/captures/${made.capture.id}/ranks/0`, 200, 'capture', '{"state": "done"}');
			await expect('DELETE', `/api/v1/captures/${other.capture.id}`, 200, 'capture');
			const done = await expect('GET', `/api/v1/captures/${made.capture.id}`, 200, 'capture');
			if (done)
				check('a capture whose one rank is done: done', done.capture.state === 'done', JSON.stringify(done));
			await expect('GET', '/api/v1/captures/999999', 404, 'error');
			await expect('POST', '/api/v1/runs/v100/captures', 400, 'error', '{"steps": 5, "seconds": 5}');
		}
	}
	// a run a collector polled for, no upload yet: listed, waiting, its captures with when it polled; deleted
	{
		const poll = await request('GET', '/api/v1/runs/waiting/captures/next?rank=0');
		check('captures/next for a run with no upload: 204, the run made', poll.status === 204, String(poll.status));
		const r = await expect('GET', '/api/v1/runs/waiting', 200, 'run');
		if (r)
			check('a polled run without artifacts: waiting_for_capture', r.run.waiting_for_capture === true &&
				r.run.artifacts === 0 && r.artifacts.length === 0, JSON.stringify(r.run));
		const list = await expect('GET', '/api/v1/runs', 200, 'runs');
		if (list)
			check('the runs list holds it, the runs with uploads not waiting', list.runs.every((x) =>
				x.waiting_for_capture === (x.name === 'waiting')) && list.runs.some((x) => x.name === 'waiting'));
		const caps = await expect('GET', '/api/v1/runs/waiting/captures', 200, 'captures');
		if (caps)
			check('its captures: none, polled just now', caps.captures.length === 0 && caps.polled?.ago_s >= 0 &&
				caps.polled.ago_s < 60, JSON.stringify(caps));
		await expect('POST', '/api/v1/runs/waiting/captures', 201, 'capture', '{"steps": 2}');
		await expect('DELETE', '/api/v1/runs/waiting', 200, 'deleted');
		await expect('GET', '/api/v1/runs/waiting', 404, 'error');
	}

	// metrics, baselines and comparisons
	{
		const lines = '{"step": 1009, "name": "tokens_per_step", "value": 4096}\n{"step": 1010, "name": "tokens_per_step", "value": 4096}\n';
		for (const run of ['cmp_base', 'cmp_test'])
			await expect('POST', `/api/v1/runs/${run}/metrics`, 200, 'metrics#/$defs/written', lines);
		const m = await expect('GET', '/api/v1/runs/cmp_base/metrics', 200, 'metrics');
		if (m)
			check('GET /api/v1/runs/cmp_base/metrics: the two lines posted, by step', m.metrics.length === 2 &&
				m.metrics[0].step === 1009 && m.metrics[1].value === 4096, JSON.stringify(m));
		await expect('GET', '/api/v1/runs/v100/metrics?name=loss', 200, 'metrics');
		const bad = await expect('POST', '/api/v1/runs/cmp_base/metrics', 400, 'error', `${lines}{"step": 1}\n`);
		if (bad)
			check('POST metrics with a bad third line: invalid_metrics, line 3', bad.error.code === 'invalid_metrics' &&
				bad.line === 3, JSON.stringify(bad));

		const pair = await expect('GET', '/api/v1/compare?base=cmp_base&target=cmp_test', 200, 'compare');
		if (pair)
			// test lacks the kernel that ended base's step #1010: 137.3 ms -> 111.2 ms, not significant over 2 steps
			check('compare cmp_base -> cmp_test: no_change, p > 0.05, three operators added, throughput, no memory',
				pair.verdict === 'no_change' && pair.step_time.p_value > 0.05 && pair.ops_counts.added === 3 &&
				pair.throughput.length === 1 && pair.memory === null, JSON.stringify(pair).slice(0, 300));
		for (const [a, b] of [['v100', 'resnet'], ['resnet', 'v100'], ['v100', 'v100'], ['memraw', 'memcpu'],
			['nosteps', 'cpuonly'], ['v100', 'memraw'], ['nccl', 'broken']]) {
			const url = `/api/v1/compare?base=${a}&target=${b}&limit=100000`;
			const c = await expect('GET', url, 200, 'compare');
			if (!c)
				continue;
			const bad = [];
			for (const e of c.breakdown)
				if (e.delta_ns !== e.target_ns - e.base_ns)
					bad.push(`breakdown ${e.component}: ${e.delta_ns} is not ${e.target_ns} - ${e.base_ns}`);
			for (const key of ['ops', 'kernels']) {
				const list = c[key], n = c[`${key}_counts`];
				if (n.changed + n.unchanged + n.added + n.removed !== n.total || list.length !== n.total)
					bad.push(`${key}: counts ${JSON.stringify(n)} for ${list.length} listed`);
				for (let i = 0; i < list.length; i++) {
					const e = list[i];
					if (i && Math.abs(e.delta_ns_per_step) > Math.abs(list[i - 1].delta_ns_per_step))
						bad.push(`${key}[${i}] moved more than ${key}[${i - 1}]`);
					if (e.delta_ns_per_step !== (e.target_ns_per_step ?? 0) - (e.base_ns_per_step ?? 0))
						bad.push(`${key} ${e.name}: delta ${e.delta_ns_per_step}`);
					if ((e.status === 'added') !== (e.base_ns_per_step === null) || (e.status === 'removed') !== (e.target_ns_per_step === null))
						bad.push(`${key} ${e.name}: status ${e.status}`);
				}
			}
			if (c.memory)
				for (const k of CATEGORIES)
					if (c.memory.by_category[k] !== c.memory.target_by_category[k] - c.memory.base_by_category[k])
						bad.push(`memory ${k}`);
			if (a === b && (c.verdict !== 'no_change' || (c.step_time.p_value !== null && c.step_time.p_value !== 1)))
				bad.push(`against itself: ${c.verdict}, p ${c.step_time.p_value}`);
			check(`${url}: deltas are target - base, counts add up, sorted by absolute change${a === b ? ', no_change' : ''}`,
				!bad.length, bad.slice(0, 3).join('; '));
		}
		await expect('PATCH', '/api/v1/runs/cmp_base', 200, 'run', '{"baseline": true}');
		const auto = await expect('GET', '/api/v1/compare?target=cmp_test', 200, 'compare');
		if (auto)
			check('compare with no base: the project baseline cmp_base', auto.base === 'cmp_base' && auto.baseline === true,
				`base ${auto.base}, baseline ${auto.baseline}`);
		await expect('PATCH', '/api/v1/runs/cmp_base', 200, 'run', '{"baseline": false}');
		const none = await expect('GET', '/api/v1/compare?target=cmp_test', 404, 'error');
		if (none)
			check('compare with no base and no baseline: 404 no_baseline', none.error.code === 'no_baseline', JSON.stringify(none));
		await expect('GET', '/api/v1/compare?base=v100&target=nope', 404, 'error');
		await expect('GET', '/api/v1/compare?base=v100', 400, 'error');
		await expect('GET', '/api/v1/compare?base=v100&target=resnet&alpha=0', 400, 'error');
		await expect('GET', '/api/v1/compare?base=v100&target=resnet&threshold_pct=-1', 400, 'error');
		await expect('POST', '/api/v1/runs/nope/metrics', 404, 'error', lines);
		await expect('GET', '/api/v1/runs/nope/metrics', 404, 'error');
	}

	// the whole training of a rank: every step, its cycle and memory at its end
	{
		const t = await expect('GET', '/api/v1/runs/v100/timeline', 200, 'timeline');
		const st = await expect('GET', '/api/v1/runs/v100/steps', 200, 'steps');
		if (t && st)
			check('GET /api/v1/runs/v100/timeline: the 5 steps of /steps, one cycle, memory at every step end',
				t.steps_total === 5 && t.steps.length === 5 && t.cycles.length === 1 &&
				t.steps.every((s, i) => s.start_ns === st.steps[i].start_ns && s.dur_ns === st.steps[i].dur_ns &&
					s.allocated_bytes > 0 && s.artifact_id === ids.v100), show(t).slice(0, 300));
		const few = await expect('GET', '/api/v1/runs/v100/timeline?points=3', 200, 'timeline');
		if (few)
			check('GET /api/v1/runs/v100/timeline?points=3: the first, the slowest between, the last', few.points === 3 &&
				few.steps[0].step === st?.steps[0].step && few.steps[2].step === st?.steps[4].step, show(few.steps.map((s) => s.step)));
		await expect('GET', '/api/v1/runs/memraw/timeline', 200, 'timeline');
		await expect('GET', '/api/v1/runs/v100/timeline?points=x', 400, 'error');
		await expect('GET', '/api/v1/runs/nope/timeline', 404, 'error');
	}

	// removal: one artifact (the run answers as the rest), then the run
	{
		const up = [];
		for (const [rank, file] of [[0, 'traces/hta_sampled_rank0.json.gz'], [1, 'traces/hta_sampled_rank1.json.gz']])
			up.push(await expect('POST', `/api/v1/runs/doomed/artifacts?rank=${rank}&name=${path.basename(file)}`, 201,
				'artifact', fs.readFileSync(path.join(fixturesDir, file))));
		if (up[1]) {
			const two = await expect('GET', '/api/v1/runs/doomed/distributed', 200, 'distributed');
			check('GET /distributed of the two hta_sampled ranks: both ranks, 10 matched collectives, each rank in all',
				two?.ranks.length === 2 && two.stragglers.matched === 10 &&
				two.stragglers.by_rank.every((x) => x.matched === 10), show(two?.stragglers.by_rank));
			const cmp = await expect('GET', '/api/v1/compare?base=doomed&target=doomed', 200, 'compare');
			check('GET /compare of the two hta_sampled ranks with themselves: their distributed figures, every delta 0',
				cmp?.distributed?.base.ranks === 2 && cmp.distributed.target.matched === 10 &&
				Object.values(cmp.distributed.delta_pct).every((v) => v === 0), show(cmp?.distributed));
			const d = await expect('DELETE', `/api/v1/runs/doomed/artifacts/${up[1].artifact.id}`, 200, 'deleted');
			const one = await expect('GET', '/api/v1/runs/doomed/distributed', 200, 'distributed');
			check('GET /distributed after a rank went: rank 0 alone, nothing matched',
				one?.ranks.length === 1 && one.stragglers.matched === 0 && one.collectives.every((x) => x.rank === 0),
				show(one?.ranks.map((x) => x.rank)));
			const rk = await expect('GET', '/api/v1/runs/doomed/ranks', 200, 'ranks');
			check('DELETE an artifact: one went, the run stays with rank 0 only', d?.deleted_artifacts === 1 &&
				d?.run_deleted === false && rk?.ranks.length === 1 && rk.ranks[0].rank === 0, show([d, rk]));
			await expect('DELETE', `/api/v1/runs/doomed/artifacts/${up[1].artifact.id}`, 404, 'error');
		}
		const d = await expect('DELETE', '/api/v1/runs/doomed', 200, 'deleted');
		check('DELETE a run: its last artifact and the run went', d?.deleted_artifacts === 1 && d?.run_deleted === true,
			show(d));
		await expect('GET', '/api/v1/runs/doomed', 404, 'error');
		await expect('DELETE', '/api/v1/runs/doomed', 404, 'error');
		await expect('DELETE', '/api/v1/runs/bad%20name', 400, 'error');
	}

	// errors
	await expect('GET', '/api/v1/runs/nope', 404, 'error');
	for (const ep of ['steps', 'ops', 'kernels', 'ranks', 'diagnosis', 'distributed', 'trace', 'memory', 'memory/peak', 'memory/segments'])
		await expect('GET', `/api/v1/runs/nope/${ep}`, 404, 'error');
	await expect('GET', '/api/v1/runs/v100/artifacts/999999', 404, 'error');
	await expect('GET', '/api/v1/runs/v100/ops?limit=0', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/kernels?limit=100001', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/ops?device=tpu', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/ops?sort=bogus', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/kernels?kind=bogus', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/steps?format=xml', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/steps?wait=2', 400, 'error');
	// without waiting for an analysis: the same answers' shapes
	for (const ep of ['steps', 'ops', 'memory', 'timeline', 'diagnosis'])
		await expect('GET', `/api/v1/runs/v100/${ep}?wait=0`, 200, ep);
	await expect('GET', '/api/v1/runs/v100/steps?rank=65536', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/steps?rank=7', 404, 'error');
	await expect('GET', '/api/v1/runs/v100/memory?format=csv', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/diagnosis?rank=-1', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/distributed?step=x', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/distributed?step=-1', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/critical_path', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/critical_path?step=x', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/critical_path?step=999999', 404, 'error');
	await expect('GET', '/api/v1/runs/nope/critical_path?step=1', 404, 'error');
	await expect('GET', '/api/v1/runs/v100/trace?start_ns=10&end_ns=10', 400, 'error');
	await expect('GET', '/api/v1/runs/memraw/memory?points=-1', 400, 'error');
	await expect('GET', '/api/v1/runs/memraw/memory?points=1000001', 400, 'error');
	await expect('GET', '/api/v1/runs/memraw/memory?device=gpu0', 400, 'error');
	await expect('GET', '/api/v1/runs/memraw/memory/peak?device=gpu0', 400, 'error');
	await expect('GET', '/api/v1/runs/memraw/memory/segments?device=gpu0', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/memory/segments', 404, 'error');	/* a trace: no segments */
	await expect('GET', '/api/v1/runs/memraw/memory?rank=65536', 400, 'error');
	await expect('GET', '/api/v1/runs/bad%20name/steps', 400, 'error');
	await expect('GET', '/api/v1/nothing-here', 404, 'error');
	await expect('DELETE', '/api/v1/runs/v100/steps', 405, 'error');

	// every path fetched above is described in openapi.yaml
	if (doc?.paths) {
		const want = ['/healthz', '/api/v1/runs', '/api/v1/runs/{run}', '/api/v1/runs/{run}/artifacts',
			'/api/v1/runs/{run}/artifacts/{id}', '/api/v1/runs/{run}/steps', '/api/v1/runs/{run}/ops',
			'/api/v1/runs/{run}/kernels', '/api/v1/runs/{run}/ranks', '/api/v1/runs/{run}/diagnosis',
			'/api/v1/runs/{run}/distributed', '/api/v1/runs/{run}/critical_path', '/api/v1/runs/{run}/trace', '/api/v1/runs/{run}/memory', '/api/v1/runs/{run}/memory/peak',
			'/api/v1/runs/{run}/memory/segments', '/api/v1/runs/{run}/actions', '/api/v1/runs/{run}/stacks', '/api/v1/runs/{run}/gpu', '/api/v1/runs/{run}/canary', '/api/v1/runs/{run}/metrics', '/api/v1/compare', '/api/v1/openapi.yaml', '/api/v1/api/{name}',
			'/api/v1/runs/{run}/timeline', '/api/v1/runs/{run}/captures', '/api/v1/runs/{run}/captures/next',
			'/api/v1/captures/{id}', '/api/v1/captures/{id}/ranks/{rank}'];
		const missing = want.filter((p) => !doc.paths[p]);
		check('openapi.yaml describes every endpoint tested here', !missing.length, `missing ${missing.join(', ')}`);
	}

	await stopServer();
}

try {
	await main();
} catch (e) {
	fail('schema test', e.message);
} finally {
	if (serverExit === null)
		await stopServer().catch(() => {});
	killServer();
	if (failures && serverLog)
		console.log(`--- server log (tail) ---\n${serverLog.trimEnd()}\n---`);
	console.log(`${failures ? 'FAILED' : 'passed'}: ${checks - failures} of ${checks} checks passed`);
	process.exitCode = failures ? 1 : 0;
}
