// Browser test of the comparison page against GET /api/v1/compare (issue 6):
//   BUILD_DIR=build node --test tests/browser/compare.test.mjs
// The HTA compare pair: in the target one add kernel runs 2 times instead of 3,
// nccl:all_reduce once instead of twice, and three CPU operators are added; the
// V100 trace uploaded to two runs is the same run twice.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { colorPixels, launchBrowser, newPage, screenshotDir, startServer, upload } from './harness.mjs';

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
	const kernels = await rows(page, 'Kernels');
	assert.equal(kernels.filter((r) => r.cells[1] === 'changed').length, 1);
	assert.equal(kernels.filter((r) => r.cls === 'removed' || r.cls === 'added').length, 0);
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
