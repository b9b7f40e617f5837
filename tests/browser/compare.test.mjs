// Browser test of the comparison page against GET /api/v1/compare (issues 6, 46):
//   BUILD_DIR=build node --test tests/browser/compare.test.mjs
// The HTA compare pair: inside the steps the target runs the add kernel once
// instead of twice, nccl:all_reduce once instead of twice, and three CPU
// operators are added; the V100 trace uploaded to two runs is the same run
// twice; the H200 runs (tests/fixtures/gpu): the answer first, the kernels' time
// a step equal to the breakdown's, names by their function.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { colorPixels, launchBrowser, newPage, repoRoot, screenshotDir, startServer, upload } from './harness.mjs';

const KERNEL = [51, 34, 136];	// the kernel bars (util.js: Tol's indigo)
const PARAMETER = [0, 114, 178];	// the parameter area (util.js: Okabe-Ito's blue)
let srv, browser;
const shots = screenshotDir();

before(async () => {
	srv = await startServer();
	await upload(srv.base, 'cmp-base', 'traces/hta_compare_base.json.gz');
	await upload(srv.base, 'cmp-test', 'traces/hta_compare_test.json.gz');
	await upload(srv.base, 'v100-a', 'traces/hta_v100_train_memory.json.gz');
	await upload(srv.base, 'v100-b', 'traces/hta_v100_train_memory.json.gz');
	for (const s of ['healthy', 'healthy_b', 'dataloader', 'ckpt_off', 'ckpt_on']) {
		const dir = path.join(repoRoot, 'tests/fixtures/gpu', s);
		await upload(srv.base, s, path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.pt.trace.json.gz'))));
	}
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

const rows = (page, title) => page.$$eval(`section:has(h2:text-is("${title}")) tbody tr`,
	(trs) => trs.map((tr) => ({ cls: tr.className, cells: [...tr.cells].map((td) => td.textContent.trim()) })));

test('compare page: verdict, steps side by side, added and removed', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/compare?base=cmp-base&target=cmp-test');
	await page.waitForSelector('#app[data-ready]');
	const verdict = await page.getAttribute('#verdict', 'class');
	assert.match(verdict, /\b(regression|improvement|no_change)\b/);
	assert.ok(await page.locator('#verdict .reasons li').count() >= 1);
	assert.match(verdict, /\bno_change\b/);
	assert.equal(await page.locator('section:has(h2:text-is("Step time")) .uplot').count(), 2);
	const ops = await rows(page, 'Operators');
	// name, status, ...
	assert.deepEqual(ops.filter((r) => r.cls === 'added' && r.cells[1] === 'added').map((r) => r.cells[0]).sort(),
		['AddmmBackward0', 'All2All_Pooled_Req', 'CatBackward0']);
	assert.deepEqual(ops.filter((r) => r.cells[1] === 'changed').map((r) => r.cells[0]), ['nccl:all_reduce']);
	// inside the steps: the add kernel and the memset changed, base's copy is not in test's steps
	const kernels = await rows(page, 'Kernels');
	assert.equal(kernels.filter((r) => r.cells[1] === 'changed').length, 2);
	assert.deepEqual(kernels.filter((r) => r.cls === 'removed').map((r) => r.cells[0]), ['Memcpy HtoD (Pinned -> Device)']);
	assert.equal(kernels.filter((r) => r.cls === 'added').length, 0);
	await page.screenshot({ path: path.join(shots, 'compare.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('compare page: memory timelines on the same axes', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/compare?base=v100-a&target=v100-b');
	await page.waitForSelector('#app[data-ready]');
	assert.match(await page.getAttribute('#verdict', 'class'), /\bno_change\b/);
	// the steps are mostly kernels (the all-reduce): both step charts draw them
	assert.ok(await colorPixels(page, 'section:has(h2:text-is("Step time")) canvas', KERNEL) > 1000);
	const charts = page.locator('section:has(h2:text-is("Memory timelines (same axes)")) .uplot');
	assert.equal(await charts.count(), 2);
	for (let i = 0; i < 2; i++)
		assert.ok(await colorPixels(page, `section:has(h2:text-is("Memory timelines (same axes)")) .grid2 > div:nth-child(${i + 1}) canvas`, PARAMETER) > 2000);
	// both drawn to the same extent (charts.js notes it on the chart's box)
	const boxes = page.locator('section:has(h2:text-is("Memory timelines (same axes)")) .chart-box');
	const extent = await boxes.evaluateAll((els) => els.map((el) => [+el.dataset.xMax, +el.dataset.yMax]));
	assert.ok(extent[0][0] > 1 && extent[0][1] > 6e9);
	assert.deepEqual(extent[0], extent[1]);
	await page.screenshot({ path: path.join(shots, 'compare-memory.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('compare page: the peak by allocation site, as the answer has it', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/compare?base=ckpt_off&target=ckpt_on');
	await page.waitForSelector('#app[data-ready]');
	const cmp = await (await fetch(`${srv.base}/api/v1/compare?base=ckpt_off&target=ckpt_on`)).json();
	const sites = cmp.memory.by_site;
	assert.ok(sites.length > 0 && sites[0].delta_bytes < 0, 'checkpointing frees activations at some site');
	const shown = await page.$$eval('#memory-sites tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
	assert.equal(shown.length, sites.length);
	// the largest change first, its site and category as the answer names them
	assert.equal(shown[0][0], sites[0].site);
	assert.equal(shown[0][1], sites[0].category.replace(/_/g, ' '));
	assert.match(shown[0][4], /^-/);
	await page.locator('#memory-sites').screenshot({ path: path.join(shots, 'compare-memory-sites.png') });
	assert.deepEqual(page.problems, []);
});

// The cards in page order: the verdict's section, then each card's title.
const order = (page) => page.$$eval('#app > section', (els) => els.map((el) => (el.id === 'verdict' ? 'verdict' : el.querySelector('h2')?.textContent)));

for (const target of ['healthy_b', 'dataloader']) {
	test(`compare page healthy -> ${target}: the answer first, the kernels a step as the breakdown has them`, async () => {
		const page = await newPage(browser);
		await page.goto(`${srv.base}/compare?base=healthy&target=${target}`);
		await page.waitForSelector('#app[data-ready]');
		assert.match(await page.getAttribute('#verdict', 'class'), target === 'dataloader' ? /\bregression\b/ : /\bno_change\b/);
		// the verdict with its figure and p-value, then what explains it, then the rest
		assert.match(await page.locator('#verdict .headline').textContent(), /Change[+-]\d+\.\d%p = \d/);
		const cards = await order(page);
		assert.equal(cards[0], 'verdict');
		assert.equal(cards[1], 'Step breakdown');
		// the data loader's host time moved most: operators before kernels; else the kernels lead
		assert.deepEqual(cards.slice(2, 4), target === 'dataloader' ? ['Operators', 'Kernels'] : ['Kernels', 'Operators']);
		assert.ok(cards.indexOf('Step time') > 3 && cards.indexOf('Memory timelines (same axes)') > 3, cards.join(' | '));
		const firstTable = await page.locator('table').first().boundingBox();
		assert.ok((await page.locator('#verdict').boundingBox()).y < firstTable.y);

		// the step breakdown's kernel time a step (from /steps) is the kernels' total a step shown
		const kernelRow = (await rows(page, 'Step breakdown')).find((r) => r.cells[0] === 'kernel').cells;
		const total = page.locator('#kernel-total');
		assert.equal(await total.locator('.total-base').textContent(), kernelRow[1]);
		assert.equal(await total.locator('.total-target').textContent(), kernelRow[2]);
		assert.match(await total.textContent(), /inside the steps, as the step breakdown counts it/);
		// and the rows add up to it: every kernel row of the answer, per step, to within 1 ns a row
		const cmp = await (await fetch(`${srv.base}/api/v1/compare?base=healthy&target=${target}&limit=100000`)).json();
		const steps = await Promise.all(['healthy', target].map(async (r) => (await (await fetch(`${srv.base}/api/v1/runs/${r}/steps`)).json()).steps));
		const kern = cmp.kernels.filter((k) => k.kind === 'kernel');
		['base', 'target'].forEach((side, i) => {
			const done = steps[i].filter((s) => !s.incomplete);
			const mean = done.reduce((a, s) => a + s.breakdown_ns.kernel, 0) / done.length;
			const sum = kern.reduce((a, k) => a + (k[side + '_ns_per_step'] ?? 0), 0);
			assert.ok(Math.abs(sum - mean) <= kern.length, `${side}: ${sum} ns of kernels a step, breakdown ${mean}`);
		});
		assert.equal(cmp.in_steps, true);
		assert.equal(await page.locator('.per-note').count(), 0);

		// names: the full name on hover and to copy, the function name in what shows
		const names = await page.locator('section:has(h2:text-is("Kernels")) tbody .name').evaluateAll((els) => els.map((el) => ({
			full: el.dataset.full, title: el.title, shown: el.querySelector('.name-text').textContent })));
		assert.ok(names.length >= 10);
		for (const n of names) {
			assert.equal(n.title, n.full);
			const fn = functionOf(n.full);
			assert.ok(n.shown.includes(fn), `${fn} not in "${n.shown}"`);
		}
		await page.screenshot({ path: path.join(shots, `compare-h200-${target}.png`), fullPage: true });
		assert.deepEqual(page.problems, []);
	});
}

// A kernel's function name: the last name before its template arguments or parameters, less
// the return type and namespaces ("void at::native::(anonymous namespace)::foo<4, ...>(int)": foo).
function functionOf(full) {
	const head = full.replace(/\(anonymous namespace\)/g, 'anon').split(/[<(]/)[0].trim();
	return head.split(/\s+/).pop().split('::').pop();
}

// Shown, not only in the text: each templated kernel's visible name holds its function name
// (table.js's shortName cuts inside the template arguments and parameters) and is not cut by
// an ellipsis; the full name stays in data-full.
test('compare page: kernel function names are not cut', async () => {
	const page = await newPage(browser);
	await page.goto(`${srv.base}/compare?base=healthy&target=healthy_b`);
	await page.waitForSelector('#app[data-ready]');
	const names = await page.locator('section:has(h2:text-is("Kernels")) tbody .name').evaluateAll((els) => els
		.filter((el) => el.dataset.full.includes('<'))
		.map((el) => {
			const full = el.dataset.full;
			const text = el.querySelector('.name-text');
			return { full, shown: text.textContent, cut: text.scrollWidth > text.clientWidth + 1 };
		}));
	assert.ok(names.length >= 3, `templated kernels on the page: ${names.length}`);
	for (const n of names) {
		assert.ok(n.shown.includes(functionOf(n.full)), `"${n.shown}" keeps ${functionOf(n.full)}`);
		assert.ok(!n.cut, `"${n.shown}" fits its cell`);
	}
	await page.close();
});
