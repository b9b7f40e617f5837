// Browser test of a run still uploading: 2 ranks, 20 chunks, 2 profiling cycles.
// The page shows the whole run (steps across cycles, the cycles), the rank
// picker and the artifact list, and draws itself again as chunks land, without
// a reload.
//   node --test tests/browser/run_live.test.mjs   (BUILD_DIR picks the build)
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { colorPixels, launchBrowser, newPage, screenshotDir, startServer } from './harness.mjs';

const KERNEL_BLUE = [51, 34, 136];	// the kernel bars (util.js: Tol's indigo)
let srv, browser;
const shots = screenshotDir();

// One chunk: step `step` of a synthetic run (a ProfilerStep span, an operator in it,
// the kernel it launched), at t microseconds; the step takes dur microseconds.
function chunk(step, t, dur) {
	const ev = [
		{ ph: 'X', cat: 'user_annotation', name: `ProfilerStep#${step}`, pid: 1, tid: 1, ts: t, dur },
		{ ph: 'X', cat: 'cpu_op', name: 'aten::mm', pid: 1, tid: 1, ts: t + 10, dur: 50, args: { 'External id': step } },
		{ ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', pid: 1, tid: 1, ts: t + 20, dur: 10, args: { correlation: step } },
		{ ph: 'X', cat: 'kernel', name: 'gemm', pid: 0, tid: 7, ts: t + 40, dur: dur / 2, args: { correlation: step, 'External id': step } },
	];
	return JSON.stringify({ traceEvents: ev });
}

// The chunks of one rank: two cycles of 5 steps (#1..#5 and #11..#15), one chunk per step.
function chunks(rank) {
	const out = [];
	for (const [c, first] of [[0, 1], [1, 11]])
		for (let k = 0; k < 5; k++)
			out.push({ name: `r${rank}c${c}s${k}.json`, body: chunk(first + k, 1e6 * c * 10 + k * 100000, 80000 + 1000 * rank) });
	return out;
}

async function post(rank, c) {
	const r = await fetch(`${srv.base}/api/v1/runs/live/artifacts?rank=${rank}&name=${c.name}`, { method: 'POST', body: c.body });
	assert.equal(r.status, 201, await r.text());
}

before(async () => {
	srv = await startServer();
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

test('a run of 2 ranks, 20 chunks, 2 cycles updates live', async () => {
	const all = [0, 1].flatMap((r) => chunks(r).map((c) => [r, c]));
	// the first cycle of each rank is there when the page opens
	for (const [r, c] of all.filter(([, c]) => c.name.includes('c0')))
		await post(r, c);
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/live');
	await page.waitForSelector('#app[data-ready]');
	const whole = 'section:has(h2:text-is("Whole run"))';
	assert.equal(await page.getAttribute(`${whole} .chart-box`, 'data-steps'), '5');
	assert.equal(await page.getAttribute(`${whole} .chart-box`, 'data-cycles'), '1');
	assert.equal((await page.$$(`section:has(h2:text-is("Artifacts")) tbody tr`)).length, 10);
	const navigations = [];
	page.on('framenavigated', (f) => f === page.mainFrame() && navigations.push(f.url()));
	// once drawn, the page never waits for an analysis: its reads of derived data say wait=0
	const derivedReads = [];
	page.on('request', (r) => /\/api\/v1\/runs\/live\/(steps|ops|kernels|ranks|timeline|diagnosis|distributed)/.test(r.url()) &&
		derivedReads.push(r.url()));

	// the second cycle lands while the page is open: it shows without a reload
	for (const [r, c] of all.filter(([, c]) => c.name.includes('c1')))
		await post(r, c);
	await page.waitForSelector(`${whole} .chart-box[data-steps="10"]`, { timeout: 15000 });
	assert.deepEqual(navigations, []);
	assert.ok(derivedReads.length >= 4, derivedReads.join(' '));
	assert.deepEqual(derivedReads.filter((u) => !/[?&]wait=0(&|$)/.test(u)), []);
	const info = await (await fetch(srv.base + '/api/v1/runs/live')).json();
	assert.equal(info.run.analysis_pending, false);
	assert.equal(await page.getAttribute(`${whole} .chart-box`, 'data-cycles'), '2');
	assert.match(await page.textContent(whole), /10 steps in 2 profiling cycles/);
	const cycles = await page.$$eval(`${whole} table.data tbody tr`, (trs) => trs.map((tr) => tr.textContent));
	assert.equal(cycles.length, 2);
	assert.match(cycles[0], /#1–#5/);
	assert.match(cycles[1], /#11–#15.*\+10\.0 s.*80\.0 ms/);
	assert.ok(await colorPixels(page, `${whole} canvas`, KERNEL_BLUE) > 500);
	assert.equal((await page.$$(`section:has(h2:text-is("Artifacts")) tbody tr`)).length, 20);
	// the step chart of the rank: every step of both cycles
	assert.match(await page.textContent('.headline'), /10 steps/);

	// rank 1 through the picker: its own steps, slower by 1 ms each
	await Promise.all([page.waitForURL(/\?rank=1$/), page.selectOption('.rank-pick select', '1')]);
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.getAttribute(`${whole} .chart-box`, 'data-steps'), '10');
	assert.match(await page.textContent('.headline'), /81\.0 ms|81 ms/);
	await page.screenshot({ path: path.join(shots, 'run-live.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('the runs list marks a run whose traces are not analysed yet', async () => {
	const postTo = async (run, c) => {
		const r = await fetch(`${srv.base}/api/v1/runs/${run}/artifacts?rank=0&name=${c.name}`, { method: 'POST', body: c.body });
		assert.equal(r.status, 201, await r.text());
	};
	const cs = chunks(0);
	for (const c of cs.slice(0, 5))
		await postTo('listed', c);
	await fetch(`${srv.base}/api/v1/runs/listed/steps`);	// derived: 5 steps
	for (const c of cs.slice(5))
		await postTo('listed', c);	// joined since: pending, and the list derives nothing
	const list = await (await fetch(srv.base + '/api/v1/runs')).json();
	const entry = list.runs.find((r) => r.name === 'listed');
	assert.equal(entry.analysis_pending, true);
	assert.equal(entry.steps, 5);
	const page = await newPage(browser);
	await page.goto(srv.base + '/');
	const row = 'tr:has(a[href="/runs/listed"])';
	await page.waitForSelector(`${row} .chip.pending`);
	assert.match(await page.textContent(`${row} td.num:has(.chip.pending)`), /^5\s*pending$/);
	await page.screenshot({ path: path.join(shots, 'runs-pending.png'), fullPage: true });
	// a read of the run derives what joined: the list's next refresh has every step, unmarked
	await fetch(`${srv.base}/api/v1/runs/listed/steps`);
	await page.waitForSelector(`${row}:not(:has(.chip.pending))`, { timeout: 15000 });
	assert.ok((await page.$$eval(`${row} td.num`, (tds) => tds.map((td) => td.textContent))).includes('10'));
	assert.deepEqual(page.problems, []);
});
