// Browser tests of the runs page and a run's page, in headless chromium against
// a real server holding real fixtures (the V100 trace, PyTorch's raw memory
// timeline export, the ResNet-50 trace). Screenshots go to build/browser/.
//   node --test tests/browser/pages.test.mjs   (BUILD_DIR picks the build)
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { colorPixels, launchBrowser, newPage, patchRun, screenshotDir, startServer, upload } from './harness.mjs';

const KERNEL = [51, 34, 136];	// the kernel bars (util.js: Tol's indigo)
const PARAMETER = [0, 114, 178];	// the parameter area (util.js: Okabe-Ito's blue)
let srv, browser;
const shots = screenshotDir();

before(async () => {
	srv = await startServer();
	await upload(srv.base, 'v100-ddp', 'traces/hta_v100_train_memory.json.gz');
	await upload(srv.base, 'llm-memory', 'memory/hta_memory_timeline.raw.json.gz');
	await patchRun(srv.base, 'v100-ddp', { project: 'recsys', tags: ['v100', 'ddp'] });
	await patchRun(srv.base, 'llm-memory', { project: 'llm', tags: ['timeline'] });
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

const rowTexts = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => tr.textContent));

test('runs page: table, filters, sorting, selection, live refresh', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/');
	// marked drawn once its first list is in, as the other pages are (bench/page_load.mjs waits on it)
	await page.waitForSelector('#app[data-ready]');
	let rows = await rowTexts(page, 'table.data');
	assert.equal(rows.length, 2);
	const v100 = rows.find((r) => r.includes('v100-ddp'));
	// fixtures/README: steps #2..#6 average 347,544 us; peak Total Allocated 6,629,508,096 B
	assert.match(v100, /recsys/);
	assert.match(v100, /348 ms/);
	assert.match(v100, /6\.17 GiB/);

	await page.fill('input[type=search]', 'timeline');
	rows = await rowTexts(page, 'table.data');
	assert.equal(rows.length, 1);
	assert.match(rows[0], /llm-memory/);
	await page.fill('input[type=search]', '');
	await page.selectOption('select', 'recsys');
	rows = await rowTexts(page, 'table.data');
	assert.deepEqual(rows.length, 1);
	assert.match(rows[0], /v100-ddp/);
	await page.selectOption('select', '');

	// sort by peak memory, largest first, then smallest first
	await page.click('th:has-text("Peak memory")');
	assert.match((await rowTexts(page, 'table.data'))[0], /v100-ddp/);
	await page.click('th:has-text("Peak memory")');
	assert.match((await rowTexts(page, 'table.data'))[0], /llm-memory/);

	assert.equal(await page.getAttribute('#compare', 'href'), null);
	await page.check('input[aria-label="select v100-ddp"]');
	await page.check('input[aria-label="select llm-memory"]');
	// the older run is the base
	assert.equal(await page.getAttribute('#compare', 'href'), '/compare?base=v100-ddp&target=llm-memory');

	// an upload arriving while the page is open shows up without a reload
	await upload(srv.base, 'resnet50', 'traces/kineto_resnet50_workers0.json.gz');
	await page.waitForSelector('tr:has-text("resnet50")', { timeout: 12000 });
	assert.equal((await rowTexts(page, 'table.data')).length, 3);
	await page.screenshot({ path: path.join(shots, 'runs.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('run page: charts, tables, diagnosis, peak, trace window', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/v100-ddp');
	await page.waitForSelector('#app[data-ready]');
	const cards = page.locator('section.card');
	const card = (title) => cards.filter({ has: page.locator(`h2:text-is("${title}")`) });

	// both charts drawn with data: kernel bars, parameter area
	assert.ok(await colorPixels(page, 'section:has(h2:text-is("Step time by component")) canvas', KERNEL) > 2000);
	assert.ok(await colorPixels(page, 'section:has(h2:text-is("Memory timeline")) canvas', PARAMETER) > 2000);
	const headline = await page.textContent('.headline');
	assert.match(headline, /348 ms/);
	assert.match(headline, /6\.17 GiB/);

	// fixtures/README: the largest kernel by total time is the NCCL all-reduce, 357,343 us
	const kernels = await rowTexts(page, 'section:has(h2:text-is("Top GPU kernels"))');
	assert.ok(kernels.length > 10);
	assert.match(kernels[0], /^ncclKernel_AllReduce_RING_LL_Sum_float/);
	assert.match(kernels[0], /357 ms/);
	// sorting by calls puts the most-called kernel first
	await card('Top GPU kernels').locator('th:text-is("Calls")').click();
	const calls = await page.$$eval('section:has(h2:text-is("Top GPU kernels")) tbody tr td:nth-child(2)',
		(tds) => tds.map((td) => +td.textContent.replace(/,/g, '')));
	assert.deepEqual(calls, [...calls].sort((a, b) => b - a));
	const csv = await card('Top GPU kernels').locator('a:text-is("CSV")').getAttribute('href');
	const csvText = await (await fetch(srv.base + csv)).text();
	assert.match(csvText.split('\n')[0], /^rank,name,/);
	assert.match(csvText.split('\n')[1], /^0,"?ncclKernel_AllReduce/);

	const ops = await rowTexts(page, 'section:has(h2:text-is("Top operators"))');
	assert.ok(ops.length > 10);
	await card('Top operators').locator('button:text-is("GPU")').click();
	await page.waitForFunction(() => document.querySelector('section:has(h2) .segmented button.on')?.textContent === 'GPU');
	assert.match((await rowTexts(page, 'section:has(h2:text-is("Top operators"))'))[0], /nccl:all_reduce/);

	assert.ok(await page.locator('.finding').count() >= 1);
	// V100 DDP: NCCL's all-reduce runs with no computation under it for 20.6% of step time, and
	// the host waits in nccl:all_reduce with no GPU work running for 2.4% more (torch-tb-profiler's
	// Communication)
	const findings = (await page.locator('.finding').allTextContents()).join('\n');
	assert.match(findings, /Communication no computation hides takes 23\.0% of step time/);
	assert.match(findings, /kernels run shorter than 10 us/);

	// the peak: what was alive, by category and operator
	await page.click('.peak-marker');
	await page.waitForSelector('#peak-detail tbody tr');
	const alive = await rowTexts(page, '#peak-detail');
	assert.ok(alive.length > 5);
	assert.match(alive[0], /parameter/);
	assert.ok(alive.some((r) => r.includes('aten::mm')));

	// the trace window of steps #2..#3 downloads a Chrome trace of that span
	const href = await card('Trace').locator('a:text-is("Download trace")').getAttribute('href');
	assert.match(href, /start_ns=\d+&end_ns=\d+/);
	const trace = await (await fetch(srv.base + href)).json();
	assert.ok(trace.traceEvents.length > 1000);
	assert.ok(await card('Trace').locator('button:text-is("Open in Perfetto")').isVisible());

	const art = await rowTexts(page, 'section:has(h2:text-is("Artifacts"))');
	assert.equal(art.length, 1);
	assert.match(art[0], /hta_v100_train_memory\.json\.gz.*trace.*ready/);
	await page.screenshot({ path: path.join(shots, 'run-v100.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('run page of a memory timeline export', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/llm-memory');
	await page.waitForSelector('#app[data-ready]');
	assert.ok(await colorPixels(page, 'section:has(h2:text-is("Memory timeline")) canvas', PARAMETER) > 500);
	// fixtures/README: the largest row total is 3,082,832,104 B
	assert.match(await page.textContent('.headline'), /2\.87 GiB/);
	assert.match(await page.textContent('.headline'), /mostly activation/);
	await page.click('.peak-marker');
	await page.waitForSelector('#peak-detail tbody tr');
	assert.match((await rowTexts(page, '#peak-detail'))[0], /activation/);
	assert.equal(await page.locator('h2:text-is("Step time by component")').count(), 0);
	// drag-zoom into a tenth of the timeline: the chart asks the server for that window's own points
	const over = page.locator('section:has(h2:text-is("Memory timeline")) .u-over');
	const box = await over.boundingBox();
	const windowed = page.waitForResponse((r) => /\/memory\?.*start_ns=\d+.*end_ns=\d+/.test(r.url()) && r.status() === 200);
	await page.mouse.move(box.x + box.width * 0.40, box.y + box.height / 2);
	await page.mouse.down();
	await page.mouse.move(box.x + box.width * 0.50, box.y + box.height / 2, { steps: 5 });
	await page.mouse.up();
	const w = await (await windowed).json();
	assert.ok(w.window_points > 10 && w.window_points < w.points_total, `window_points ${w.window_points}`);
	await page.waitForFunction(() => document.querySelector('section:has(h2) .chart-box[data-window-points]'));
	assert.ok(await colorPixels(page, 'section:has(h2:text-is("Memory timeline")) canvas', PARAMETER) > 500);
	// double-click: the whole timeline again
	await over.dblclick();
	await page.screenshot({ path: path.join(shots, 'run-memory.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('pages: headers, caching and unknown runs', async () => {
	const r = await fetch(srv.base + '/runs/v100-ddp');
	assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
	assert.equal(r.headers.get('cache-control'), 'no-cache');
	assert.match(r.headers.get('content-security-policy'), /script-src 'self';/);
	assert.doesNotMatch(r.headers.get('content-security-policy'), /unsafe/);
	const html = await r.text();
	const js = html.match(/src="(\/assets\/app-[A-Z0-9]+\.js)"/)[1];
	const etag = r.headers.get('etag');
	assert.equal((await fetch(srv.base + '/runs/other', { headers: { 'If-None-Match': etag } })).status, 304);
	// each page's shell preloads the modules that page loads: the run page's, not the runs list's
	const preloads = (text) => [...text.matchAll(/<link rel="modulepreload" href="\/assets\/([a-z]+)-/g)].map((m) => m[1]);
	assert.ok(preloads(html).includes('run'), html);
	const list = await (await fetch(srv.base + '/')).text();
	assert.ok(preloads(list).includes('runs') && !preloads(list).includes('run'), list);
	assert.equal(list.match(/src="(\/assets\/app-[A-Z0-9]+\.js)"/)[1], js);
	// the gzip'd and the plain bytes are two representations, with two ETags
	const plain = { 'Accept-Encoding': 'identity' };
	assert.match(etag, /-gz"$/);
	assert.equal((await fetch(srv.base + '/', { headers: { ...plain, 'If-None-Match': etag } })).status, 200);
	const petag = (await fetch(srv.base + '/', { headers: plain })).headers.get('etag');
	assert.notEqual(petag, etag);
	assert.equal((await fetch(srv.base + '/', { headers: { ...plain, 'If-None-Match': petag } })).status, 304);
	const a = await fetch(srv.base + js, { headers: { 'Accept-Encoding': 'gzip' } });
	assert.equal(a.headers.get('content-type'), 'text/javascript; charset=utf-8');
	assert.equal(a.headers.get('content-encoding'), 'gzip');
	assert.equal(a.headers.get('cache-control'), 'public, max-age=31536000, immutable');
	assert.equal(a.headers.get('x-content-type-options'), 'nosniff');
	assert.equal((await fetch(srv.base + '/assets/app.js')).status, 404);

	const page = await newPage(browser);
	const res = await page.goto(srv.base + '/runs/nope');
	assert.equal(res.status(), 200);
	await page.waitForSelector('.error');
	assert.match(await page.textContent('.error'), /no run named 'nope'/);
	// only the API's 404s (and the console's note of them)
	assert.ok(page.problems.length > 0);
	assert.deepEqual(page.problems.filter((p) => !p.includes('/api/v1/runs/nope') &&
		!/status of 404/.test(p)), []);
});
