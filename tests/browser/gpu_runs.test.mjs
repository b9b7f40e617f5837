// Browser tests on the runs recorded on an H200 with PyTorch 2.11 (tests/fixtures/gpu):
// the QLoRA-style run of 10 profiling cycles with its memory export and snapshot,
// the 2-rank gloo run, and the comparison that catches a slow data loader.
//   BUILD_DIR=build node --test tests/browser/gpu_runs.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { launchBrowser, newPage, repoRoot, screenshotDir, startServer, upload } from './harness.mjs';

const gpu = path.join(repoRoot, 'tests/fixtures/gpu');
let srv, browser;
const shots = screenshotDir();

// every file of a scenario but PyTorch's own tables and the recorder's notes
async function uploadScenario(name, query = () => 'rank=0') {
	const files = fs.readdirSync(path.join(gpu, name)).filter((f) => !/key_averages|meta\.json/.test(f)).sort();
	for (const f of files)
		await upload(srv.base, 'gpu-' + name, path.join(gpu, name, f), query(f));
	return files.length;
}

before(async () => {
	srv = await startServer();
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

const rowTexts = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => tr.textContent));

test('run page: 10 profiling cycles, a memory export and a snapshot', async () => {
	assert.equal(await uploadScenario('train'), 12);
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-train');
	await page.waitForSelector('#app[data-ready]');
	assert.equal((await rowTexts(page, 'section:has(h2:text-is("Artifacts"))')).length, 12);
	assert.match(await page.textContent('.headline'), /12 artifacts/);
	// the whole run: one step in each of the 10 cycles (steps 9, 19, ..., 99)
	const whole = page.locator('section:has(h2:text-is("Whole run")) .chart-box');
	await page.waitForSelector('section:has(h2:text-is("Whole run")) .chart-box[data-cycles]');
	assert.equal(await whole.getAttribute('data-cycles'), '10');
	assert.equal(await whole.getAttribute('data-steps'), '10');
	assert.match(await page.textContent('#whole-run-note'), /10 steps in 10 profiling cycles/);
	const cycles = await rowTexts(page, 'section:has(h2:text-is("Whole run")) table.data');
	assert.equal(cycles.length, 10);
	// the memory card draws the export's timeline (a trace's [memory] events are on the same device)
	const mem = page.locator('section:has(h2:text-is("Memory timeline")) .chart-box');
	await mem.locator('canvas').first().waitFor();
	assert.match(await mem.getAttribute('data-device'), /^cuda:0$/);
	// the snapshot's segments
	await page.waitForSelector('section:has(h2:text-is("Allocator segments at dump time")):not([hidden])');
	// 2,453,667,840 bytes reserved, as Python's pickle reads the file (tests/fixtures/gpu/README.md)
	assert.match(await page.textContent('#segments'), /2\.29 GiB reserved/);
	const kernels = await rowTexts(page, 'section:has(h2:text-is("Top GPU kernels"))');
	assert.ok(kernels.length >= 10, `${kernels.length} kernel rows`);
	const ops = await rowTexts(page, 'section:has(h2:text-is("Top operators"))');
	assert.ok(ops.some((r) => /aten::/.test(r)), ops.slice(0, 3).join(' | '));
	await page.screenshot({ path: path.join(shots, 'gpu-train.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('run page of the 2-rank gloo run: rank picker, collectives, who arrives last', async () => {
	assert.equal(await uploadScenario('dist', (f) => `rank=${f.match(/^rank(\d)/)[1]}`), 2);
	const section = 'section:has(h2:text-is("Distributed"))';
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-dist');
	await page.waitForSelector('#app[data-ready]');
	assert.deepEqual(await page.$$eval('.rank-pick option', (o) => o.map((x) => x.value)), ['0', '1']);
	// 2 ranks x 5 steps
	assert.equal(await page.getAttribute(`${section} .chart-box`, 'data-bars'), '10');
	// gloo's all_reduce runs on host threads: 15 a rank, no kernels
	const colls = await page.$$eval(`${section} h3:text-is("Collectives") + div.table tbody tr`, (trs) => trs.map((tr) => tr.textContent));
	assert.equal(colls.length, 2);
	assert.ok(colls.every((t) => /all_reduce.*15/.test(t)), colls.join(' | '));
	// rank 1 sleeps 30 ms a step: it arrives last at 12 of the 15 once its clock is aligned on
	// rank 0's (-24 µs: at step 7's third all_reduce the two arrive 3.5 µs apart)
	const last = await page.$$eval(`${section} h3:text-is("Who arrives last") + div.table tbody tr`, (trs) => trs.map((tr) => tr.textContent));
	assert.equal(last.length, 2);
	assert.ok(last.some((t) => /^11512/.test(t)), last.join(' | '));
	await page.screenshot({ path: path.join(shots, 'gpu-dist.png'), fullPage: true });
	// rank 1 through the picker
	await Promise.all([page.waitForURL(/\?rank=1$/), page.selectOption('.rank-pick select', '1')]);
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator('h2:text-is("Step time by component")').count(), 1);
	assert.deepEqual(page.problems, []);
});

test('compare page: a data loader that doubles the step is a regression', async () => {
	await uploadScenario('healthy');
	await uploadScenario('dataloader');
	const page = await newPage(browser);
	await page.goto(srv.base + '/compare?base=gpu-healthy&target=gpu-dataloader');
	await page.waitForSelector('#app[data-ready]');
	assert.match(await page.getAttribute('#verdict', 'class'), /\bregression\b/);
	const reasons = await page.$$eval('#verdict .reasons li', (li) => li.map((x) => x.textContent));
	assert.match(reasons[0], /step time \+10\d\.\d%.*each profiling window's first left out.*dataloader time/);
	await page.screenshot({ path: path.join(shots, 'gpu-compare.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});
