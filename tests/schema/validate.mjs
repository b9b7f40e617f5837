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
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
const startTimeoutMs = 30000;	// ASan builds start slowly
const requestTimeoutMs = 120000;

// run name -> fixture; nosteps has no ProfilerStep spans (the null cases)
const FIXTURES = [
	['v100', 'traces/hta_v100_train_memory.json.gz'],
	['resnet', 'traces/kineto_resnet50_workers0.json.gz'],
	['nccl', 'traces/hta_nccl_rel_ts.json.gz'],
	['cpuonly', 'traces/hta_cpu_only.json.gz'],
	['nosteps', 'traces/hta_alexnet.json.gz'],
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

function validate(what, name, body) {
	const v = schemaIds[name] && ajv.getSchema(schemaIds[name]);
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

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.unref();
		s.on('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

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
	server = spawn(serverBin, ['--listen', `127.0.0.1:${port}`, '--db', path.join(tmpDir, 't.db')], {
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
	const until = Date.now() + 20000;
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
		const sum = ['kernel', 'memcpy', 'memset', 'runtime', 'dataloader', 'cpu', 'idle']
			.reduce((a, k) => a + (b[k] ?? 0), 0);
		if (sum !== s.dur_ns)
			bad.push(`step ${s.step}: parts add up to ${sum}, dur_ns ${s.dur_ns}`);
		if (s.start_ns < prev)
			bad.push(`step ${s.step} starts before the step ahead of it`);
		prev = s.start_ns;
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
			check(`GET ${p}/ranks: rank ${steps.rank} has the ${steps.steps.length} steps of /steps`,
				ranks.ranks.some((x) => x.rank === steps.rank && x.steps === steps.steps.length),
				JSON.stringify(ranks.ranks));
		await expect('GET', `${p}/diagnosis`, 200, 'diagnosis');
		if (steps)
			await expect('GET', `${p}/diagnosis?rank=${steps.rank}`, 200, 'diagnosis');
	}
	const v100 = await expect('GET', '/api/v1/runs/v100/steps?rank=65535', 200, 'steps');
	if (v100)
		check('steps of a rank without data: an empty list', v100.steps.length === 0, JSON.stringify(v100));
	await expect('GET', '/api/v1/runs/broken/steps', 200, 'steps');
	await expect('GET', '/api/v1/runs/broken/ranks', 200, 'ranks');
	await expect('GET', '/api/v1/runs/broken/diagnosis', 200, 'diagnosis');

	// CSV
	{
		const r = await request('GET', '/api/v1/runs/v100/steps?format=csv');
		const head = r.text.split('\r\n')[0];
		check('GET /api/v1/runs/v100/steps?format=csv: text/csv with a header row',
			r.status === 200 && (r.headers.get('content-type') || '').startsWith('text/csv') &&
			head.startsWith('step,start_ns,dur_ns,breakdown_ns.kernel'), `status ${r.status}, first line ${head}`);
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

	// errors
	await expect('GET', '/api/v1/runs/nope', 404, 'error');
	for (const ep of ['steps', 'ops', 'kernels', 'ranks', 'diagnosis', 'trace'])
		await expect('GET', `/api/v1/runs/nope/${ep}`, 404, 'error');
	await expect('GET', '/api/v1/runs/v100/artifacts/999999', 404, 'error');
	await expect('GET', '/api/v1/runs/v100/ops?limit=0', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/kernels?limit=100001', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/ops?device=tpu', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/ops?sort=bogus', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/kernels?kind=bogus', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/steps?format=xml', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/steps?rank=65536', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/diagnosis?rank=-1', 400, 'error');
	await expect('GET', '/api/v1/runs/v100/trace?start_ns=10&end_ns=10', 400, 'error');
	await expect('GET', '/api/v1/runs/bad%20name/steps', 400, 'error');
	await expect('GET', '/api/v1/nothing-here', 404, 'error');
	await expect('DELETE', '/api/v1/runs/v100/steps', 405, 'error');

	// every path fetched above is described in openapi.yaml
	if (doc?.paths) {
		const want = ['/healthz', '/api/v1/runs', '/api/v1/runs/{run}', '/api/v1/runs/{run}/artifacts',
			'/api/v1/runs/{run}/artifacts/{id}', '/api/v1/runs/{run}/steps', '/api/v1/runs/{run}/ops',
			'/api/v1/runs/{run}/kernels', '/api/v1/runs/{run}/ranks', '/api/v1/runs/{run}/diagnosis',
			'/api/v1/runs/{run}/trace'];
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
