// Browser tests of the dashboards as a daily tool (issue 17):
//   BUILD_DIR=build node --test tests/browser/dashboards.test.mjs
// Tables fit their cards at 1440x900 and 1920x1080 with kernel names told
// apart (their function names whole); the compare page says not comparable and per trace; memory shown for
// an all-unknown timeline and a state-only snapshot (its segments and blocks
// too); the offline trace viewer
// and the API reference with no network; downloads with a read token.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { colorPixels, fixturesDir, launchBrowser, newPage, screenshotDir, startServer, upload } from './harness.mjs';

const UNKNOWN_GREY = [153, 153, 153];	// util.js: the "unknown" category
const VIEWPORTS = [{ width: 1440, height: 900 }, { width: 1920, height: 1080 }];
let srv, browser;
const shots = screenshotDir();

before(async () => {
	srv = await startServer();
	await upload(srv.base, 'v100', 'traces/hta_v100_train_memory.json.gz');
	await upload(srv.base, 'v100-b', 'traces/hta_v100_train_memory.json.gz');
	await upload(srv.base, 'resnet', 'traces/kineto_resnet50_workers0.json.gz');
	await upload(srv.base, 'tiny', 'traces/hta_triton_tiny.json.gz');
	await upload(srv.base, 'cpu', 'traces/hta_cpu_only.json.gz');
	await upload(srv.base, 'state', 'memory/docubox_state_only_snapshot.pickle');
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

// Every table's columns inside its card: nothing scrolls sideways, no header past the edge.
async function assertNoClipping(page, where) {
	const tables = await page.$$eval('.table-wrap', (wraps) => wraps.map((w) => {
		const r = w.getBoundingClientRect(), card = w.closest('.card').getBoundingClientRect();
		return {
			title: w.closest('.card').querySelector('h2')?.textContent,
			scroll: w.scrollWidth, client: w.clientWidth, right: r.right, cardRight: card.right,
			headers: [...w.querySelectorAll('th')].map((th) => [th.textContent, th.getBoundingClientRect().right]),
		};
	}));
	assert.ok(tables.length >= 2, `${where}: tables drawn`);
	for (const t of tables) {
		assert.ok(t.scroll <= t.client + 1, `${where} "${t.title}": scrolls ${t.scroll} in ${t.client}`);
		assert.ok(t.right <= t.cardRight + 1, `${where} "${t.title}": wider than its card`);
		for (const [label, right] of t.headers)
			assert.ok(right <= t.right + 1, `${where} "${t.title}": column "${label}" clipped`);
	}
	return tables;
}

for (const vp of VIEWPORTS) {
	test(`tables fit at ${vp.width}x${vp.height}; vectorized_elementwise_kernel names told apart`, async () => {
		const page = await newPage(browser, vp);
		await page.goto(srv.base + '/runs/v100');
		await page.waitForSelector('#app[data-ready]');
		const tables = await assertNoClipping(page, `run page ${vp.width}`);
		assert.ok(tables.some((t) => t.headers.some(([l]) => l === 'Occupancy')));
		const kernels = page.locator('section:has(h2:text-is("Top GPU kernels"))');
		await kernels.locator('button[data-act=all]').click();
		await assertNoClipping(page, `run page ${vp.width}, all kernels`);
		const names = await kernels.locator('tbody .name').evaluateAll((els) => els.map((el) => ({
			full: el.dataset.full, title: el.title, shown: el.querySelector('.name-text').textContent,
			cellFits: el.scrollWidth <= el.clientWidth + 1 })));
		const vec = names.filter((n) => n.full.startsWith('void at::native::vectorized_elementwise_kernel<'));
		assert.ok(vec.length >= 3, `${vec.length} vectorized_elementwise_kernel rows`);
		for (const n of vec) {
			assert.equal(n.title, n.full);
			// the function whole, then its first template argument
			assert.ok(n.shown.startsWith('at::native::vectorized_elementwise_kernel<4, '), n.shown);
			assert.ok(n.cellFits);
		}
		assert.equal(new Set(vec.map((n) => n.shown)).size, vec.length, 'the visible template arguments differ: ' + vec.map((n) => n.shown).join(' | '));
		await page.screenshot({ path: path.join(shots, `run-${vp.width}.png`), fullPage: true });

		await page.goto(srv.base + '/compare?base=v100&target=v100-b');
		await page.waitForSelector('#app[data-ready]');
		await assertNoClipping(page, `compare page ${vp.width}`);
		assert.deepEqual(page.problems, []);
	});
}

test('tables: top 25, show all, filter, copy the full name', async () => {
	const page = await newPage(browser);
	await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
	await page.goto(srv.base + '/runs/v100');
	await page.waitForSelector('#app[data-ready]');
	const ops = page.locator('section:has(h2:text-is("Top operators"))');
	assert.equal(await ops.locator('tbody tr').count(), 25);
	await ops.locator('button[data-act=all]').click();
	const all = await ops.locator('tbody tr').count();
	assert.ok(all > 25, `${all} operators`);
	await ops.locator('input.table-filter').fill('aten::add');
	const shown = await ops.locator('tbody .name').evaluateAll((els) => els.map((el) => el.dataset.full));
	assert.ok(shown.length >= 2 && shown.length < all);
	assert.ok(shown.every((n) => n.toLowerCase().includes('aten::add')), shown.join());
	const kernels = page.locator('section:has(h2:text-is("Top GPU kernels"))');
	const first = kernels.locator('tbody tr').first();
	await first.hover();
	await first.locator('button.copy').click();
	assert.equal(await page.evaluate(() => navigator.clipboard.readText()), await first.locator('.name').getAttribute('data-full'));
	assert.deepEqual(page.problems, []);
});

test('compare: unchanged rows folded; unrelated runs not comparable, figures per trace', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/compare?base=v100&target=v100-b');
	await page.waitForSelector('#app[data-ready]');
	const kernels = page.locator('section:has(h2:text-is("Kernels"))');
	// the same trace twice: every kernel unchanged, folded away behind a button
	assert.equal(await kernels.locator('tbody tr').count(), 1);
	assert.match(await kernels.locator('tbody').textContent(), /Every row is unchanged/);
	await kernels.locator('button[data-act=unfold]').click();
	assert.equal(await kernels.locator('tbody tr').count(), 25);
	assert.ok(await kernels.locator('tbody tr.unchanged').count() === 25);
	assert.ok((await kernels.locator('th').allTextContents()).some((t) => /per step$/.test(t)));

	const cmp = await (await fetch(srv.base + '/api/v1/compare?base=state&target=cpu')).json();
	assert.equal(cmp.verdict, 'not_comparable');
	assert.equal(cmp.per, 'trace');
	await page.goto(srv.base + '/compare?base=state&target=cpu');
	await page.waitForSelector('#app[data-ready]');
	assert.match(await page.getAttribute('#verdict', 'class'), /\bnot_comparable\b/);
	assert.equal(await page.locator('#verdict .verdict-word').textContent(), 'Not comparable');
	assert.match(await page.locator('#verdict .reasons li').first().textContent(), /not comparable: .*ProfilerStep/);
	const heads = await page.locator('section:has(h2:text-is("Operators")) th').allTextContents();
	assert.ok(heads.some((t) => /per trace$/.test(t)), heads.join(' | '));
	assert.ok(!heads.some((t) => /per step/.test(t)));
	assert.match(await page.locator('#verdict .headline').textContent(), /Whole trace, base/);

	// different models (no shared operator): said so, with the reason
	await page.goto(srv.base + '/compare?base=tiny&target=cpu');
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator('#verdict .verdict-word').textContent(), 'Not comparable');
	assert.match(await page.locator('#verdict .reasons').textContent(), /share no operator/);
	await page.screenshot({ path: path.join(shots, 'compare-not-comparable.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('memory: an all-unknown timeline and a state-only snapshot are shown', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/resnet');
	await page.waitForSelector('#app[data-ready]');
	const card = page.locator('section:has(h2:text-is("Memory timeline"))');
	assert.equal(await card.locator('.uplot').count(), 1);
	assert.ok(await colorPixels(page, 'section:has(h2:text-is("Memory timeline")) canvas', UNKNOWN_GREY, 12) > 2000);
	// one peak: the headline's is the chart's
	const peak = (await (await fetch(srv.base + '/api/v1/runs/resnet/memory?points=10')).json()).peak.bytes;
	assert.ok(peak > 2e9);
	const fmt = (await card.locator('.peak-marker').textContent()).replace('peak ', '');
	assert.match(await page.locator('.stat:has(.stat-title:text-is("Peak memory")) .stat-value').textContent(), new RegExp(fmt));

	await page.goto(srv.base + '/runs/state');
	await page.waitForSelector('#app[data-ready]');
	const box = page.locator('section:has(h2:text-is("Memory timeline")) .chart-box');
	assert.equal(await box.getAttribute('data-state'), '1');
	assert.equal(await box.locator('.uplot').count(), 0, 'no chart on a made-up time axis');
	assert.match(await box.textContent(), /state at dump time, 86\.7 MiB allocated of 104 MiB reserved/);
	const part = await box.locator('.state-part[data-cat=parameter]').evaluate((el) => el.getBoundingClientRect().width /
		el.parentElement.getBoundingClientRect().width);
	assert.ok(Math.abs(part - 90861056 / 109051904) < 0.02, `parameter part ${part}`);
	// and its segments and blocks (the pickle's own: 12 segments, 105 blocks alive, 11 free, the largest free 11534336 bytes)
	const segs = page.locator('#segments');
	assert.equal(await segs.getAttribute('data-segments'), '12');
	assert.equal(await segs.getAttribute('data-blocks'), '105');
	assert.match(await segs.textContent(), /12 segments on cuda:0, 104 MiB reserved; 86\.7 MiB alive in 105 blocks; 17\.3 MiB free in 11 blocks, the largest 11\.0 MiB: a larger allocation needs a new segment\./);
	assert.doesNotMatch(await segs.textContent(), /false|undefined|NaN/);
	assert.equal(await segs.locator('.seg-row').count(), 12);
	// the largest segment (48234496 bytes) is a row as wide as the track, its one live block 46881792 bytes of it
	const first = await segs.locator('.seg-bar').first().evaluate((bar) => ({
		bar: bar.getBoundingClientRect().width / bar.parentElement.getBoundingClientRect().width,
		blocks: [...bar.querySelectorAll('.seg-block')].map((b) => [b.dataset.cat, b.getBoundingClientRect().width / bar.clientWidth]),
	}));
	assert.ok(Math.abs(first.bar - 1) < 0.01, `widest bar ${first.bar}`);
	assert.equal(first.blocks.length, 1);
	assert.equal(first.blocks[0][0], 'parameter');
	assert.ok(Math.abs(first.blocks[0][1] - 46881792 / 48234496) < 0.02, `block ${first.blocks[0][1]}`);
	await segs.screenshot({ path: path.join(shots, 'segments-state.png') });
	assert.deepEqual(page.problems.filter((p) => !/404: .*\/memory\?/.test(p) && !/status of 404/.test(p)), []);
});

test('memory: a run with two snapshots draws the newest one\'s segments and switches to the other', async () => {
	await upload(srv.base, 'snaps', 'memory/docubox_state_only_snapshot.pickle');
	await upload(srv.base, 'snaps', 'memory/cs336_memory_snapshot.pickle');
	const page = await newPage(browser, { width: 1440, height: 900 });
	await page.goto(srv.base + '/runs/snaps');
	await page.waitForSelector('#app[data-ready]');
	const segs = page.locator('#segments');
	// cs336: 216 segments, 229 blocks alive (1377753600 bytes), its memory timeline drawn above
	assert.equal(await segs.getAttribute('data-segments'), '216');
	assert.equal(await segs.getAttribute('data-blocks'), '229');
	assert.equal(await page.locator('section:has(h2:text-is("Memory timeline")) .uplot').count(), 1);
	assert.equal(await segs.locator('.seg-row').count(), 32, 'the largest 32 first');
	await segs.locator('button:text("Show all 216 segments")').click();
	assert.equal(await segs.locator('.seg-row').count(), 216);
	await segs.locator('.snapshot-pick select').selectOption({ label: 'docubox_state_only_snapshot.pickle' });
	await page.waitForFunction(() => document.querySelector('#segments')?.dataset.segments === '12');
	assert.equal(await segs.locator('.seg-row').count(), 12);
	assert.deepEqual(page.problems, []);
});

// Four steps, the last launching no GPU work while the others each ran a 5 ms kernel: incomplete.
function incompleteTrace() {
	const ev = [];
	for (let i = 0; i < 4; i++) {
		const t = 1000 + i * 10000;
		ev.push({ ph: 'X', cat: 'user_annotation', name: `ProfilerStep#${i + 1}`, pid: 1, tid: 1, ts: t, dur: 9000 });
		if (i < 3) {
			ev.push({ ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', pid: 1, tid: 1, ts: t + 100, dur: 20, args: { correlation: 100 + i } });
			ev.push({ ph: 'X', cat: 'kernel', name: 'gemm_kernel', pid: 0, tid: 7, ts: t + 200, dur: 5000, args: { correlation: 100 + i, stream: 7, device: 0 } });
		}
	}
	const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'inc-')), 'incomplete.json');
	fs.writeFileSync(file, JSON.stringify({ traceEvents: ev }));
	return file;
}

test('incomplete steps: starred and explained, left out of the headline and the compare breakdown', async () => {
	const file = incompleteTrace();
	await upload(srv.base, 'inc', file);
	await upload(srv.base, 'inc2', file);
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/inc');
	await page.waitForSelector('#app[data-ready]');
	assert.match(await page.locator('.incomplete-note').first().textContent(),
		/^\* incomplete: #4 \(launched no GPU work while the trace's other steps did\); left out of the means/);
	// 5 ms of kernel in each 9 ms complete step: 55.6%, not the 41.7% all four would give
	assert.equal(await page.locator('.stat:has(.stat-title:text-is("GPU utilization")) .stat-value').textContent(), '55.6%');
	await page.goto(srv.base + '/compare?base=inc&target=inc2');
	await page.waitForSelector('#app[data-ready]');
	const kernel = await page.$$eval('table', (tables) => {
		const t = tables.find((x) => /Change per step/.test(x.querySelector('thead')?.textContent ?? ''));
		const row = [...(t?.querySelectorAll('tbody tr') ?? [])].find((r) => r.cells[0].textContent.trim() === 'kernel');
		return row && [...row.cells].map((c) => c.textContent.trim());
	});
	assert.deepEqual(kernel?.slice(0, 3), ['kernel', '5.0 ms', '5.0 ms'], `kernel row ${kernel}`);
	assert.deepEqual(page.problems, []);
});

test('the offline trace viewer opens the chosen steps with no network', async () => {
	const page = await newPage(browser);
	const outside = [];
	await page.context().route((url) => !url.href.startsWith(srv.base), (r) => {
		outside.push(r.request().url());
		return r.abort();
	});
	await page.goto(srv.base + '/runs/v100');
	await page.waitForSelector('#app[data-ready]');
	const [viewer] = await Promise.all([page.waitForEvent('popup'), page.click('#open-viewer')]);
	const errors = [];
	viewer.on('pageerror', (e) => errors.push(e.message));
	viewer.on('console', (m) => /Failed to load|error/i.test(m.text()) && m.type() !== 'warning' && errors.push(m.text()));
	// speedscope titles the page with the profile's name once it has read it
	await viewer.waitForFunction(() => /v100 rank 0 steps #2-#3 - speedscope/.test(document.title), null, { timeout: 60000 });
	assert.match(viewer.url(), /\/viewer\/index\.html#profileURL=blob%3A/);
	assert.ok(await viewer.locator('canvas').count() >= 1);
	await viewer.screenshot({ path: path.join(shots, 'viewer.png') });
	assert.deepEqual(errors, []);
	assert.deepEqual(outside, []);
	const csp = (await fetch(srv.base + '/viewer/index.html')).headers.get('content-security-policy');
	assert.match(csp, /connect-src 'self' blob:/);
	assert.doesNotMatch(csp, /script-src[^;]*'unsafe-eval'/);
	assert.deepEqual(page.problems, []);
});

test('the API reference at /api/docs renders openapi.yaml offline', async () => {
	const page = await newPage(browser);
	const outside = [];
	await page.context().route((url) => !url.href.startsWith(srv.base), (r) => {
		outside.push(r.request().url());
		return r.abort();
	});
	await page.goto(srv.base + '/api/docs');
	await page.waitForSelector('#docs[data-ready]', { timeout: 30000 });
	const paths = await page.locator('details.op .path').allTextContents();
	assert.ok(paths.some((p) => p.includes('/api/v1/compare')), paths.join());
	assert.ok(paths.length >= 10);
	assert.deepEqual(outside, []);
	assert.deepEqual(page.problems, []);
});

test('downloads with a read token: CSV, raw and trace saved from the page', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trainscope-tokens-'));
	const file = path.join(dir, 'tokens');
	const write = 'w'.repeat(24), read = 'r'.repeat(24);
	fs.writeFileSync(file, `${write}\nread ${read}\n`);
	const tsrv = await startServer(undefined, ['--token-file', file]);
	try {
		await upload(tsrv.base, 'tok', 'traces/hta_compare_base.json.gz', 'rank=0', { Authorization: `Bearer ${write}` });
		const page = await newPage(browser);
		await page.context().addInitScript((t) => localStorage.setItem('trainscope.token', t), read);
		// without the page's fetch a link gets 401
		assert.equal((await fetch(tsrv.base + '/api/v1/runs/tok/ops?format=csv')).status, 401);
		await page.goto(tsrv.base + '/runs/tok');
		await page.waitForSelector('#app[data-ready]');
		const save = async (locator) => {
			const [dl] = await Promise.all([page.waitForEvent('download'), locator.click()]);
			return { name: dl.suggestedFilename(), text: fs.readFileSync(await dl.path()) };
		};
		const csv = await save(page.locator('section:has(h2:text-is("Top operators")) a:text-is("CSV")'));
		assert.equal(csv.name, 'tok.ops.cpu.csv');
		assert.match(csv.text.toString().split('\n')[0], /name/);
		const raw = await save(page.locator('section:has(h2:text-is("Artifacts")) tbody a').first());
		assert.equal(raw.name, 'hta_compare_base.json.gz');
		assert.deepEqual(raw.text, fs.readFileSync(path.join(fixturesDir, 'traces/hta_compare_base.json.gz')));
		const trace = await save(page.locator('section:has(h2:text-is("Trace")) a:text-is("Download trace")'));
		assert.ok(JSON.parse(trace.text.toString()).traceEvents.length > 0);
		// the run page asks /memory of a trace without memory events: 404 no_memory_data, no card
		assert.equal(await page.locator('section:has(h2:text-is("Memory timeline"))').count(), 0);
		assert.deepEqual(page.problems.filter((p) => !/404: .*\/memory\?/.test(p) && !/status of 404/.test(p)), []);
	} finally {
		await tsrv.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
