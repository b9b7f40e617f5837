// Browser tests of what a newcomer sees first (issue 46), on the runs recorded on an H200
// (tests/fixtures/gpu): the run page leads with its headline cards, then the diagnosis
// (three findings, each linking to its evidence, the rest folded), then the charts and
// tables; kernel and operator names keep their function; the trace viewer at /viewer/
// opens on the busiest thread; a 401 asks for a read token; /api/docs lists its
// operations and tries one.
//   BUILD_DIR=build node --test tests/browser/first_screen.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { launchBrowser, newPage, repoRoot, screenshotDir, startServer, upload } from './harness.mjs';

const gpu = path.join(repoRoot, 'tests/fixtures/gpu');
let srv, browser;
const shots = screenshotDir();

// every trace of a scenario (PyTorch's own tables and the recorder's notes left out)
async function uploadScenario(name, query = () => 'rank=0') {
	for (const f of fs.readdirSync(path.join(gpu, name)).filter((x) => x.includes('.pt.trace.json')).sort())
		await upload(srv.base, 'gpu-' + name, path.join(gpu, name, f), query(f));
}

before(async () => {
	srv = await startServer();
	await uploadScenario('healthy');
	await uploadScenario('dist', (f) => `rank=${f.match(/^rank(\d)/)[1]}`);
	await uploadScenario('sync');
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

const card = (title) => `section:has(> h2:text-is("${title}"))`;
const top = (page, sel) => page.locator(sel).first().evaluate((el) => el.getBoundingClientRect().top + window.scrollY);

test('run page: headline cards, then the diagnosis, then the charts and tables', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-dist');
	await page.waitForSelector('#app[data-ready]');
	assert.ok(await page.locator('.headline .stat').count() >= 4);
	const order = ['.headline', card('Diagnosis'), card('Step time by component'), card('Memory timeline'),
		card('Top operators'), card('Top GPU kernels'), card('Artifacts')];
	const ys = [];
	for (const sel of order)
		ys.push(await top(page, sel));
	for (let k = 1; k < ys.length; k++)
		assert.ok(ys[k - 1] < ys[k], `${order[k - 1]} (${ys[k - 1]}) above ${order[k]} (${ys[k]})`);
	// the diagnosis begins on the first screen
	assert.ok(ys[1] < 900, `the diagnosis starts at ${ys[1]} px`);

	// the three most severe findings open, the rest under "N more", each linking to its evidence
	const findings = (await (await fetch(srv.base + '/api/v1/runs/gpu-dist/diagnosis?rank=0')).json()).findings;
	assert.ok(findings.length > 3, `${findings.length} findings`);
	const diag = page.locator(card('Diagnosis'));
	const open = diag.locator(':scope > div > article.finding');
	assert.equal(await open.count(), 3);
	assert.equal(await diag.locator('details.more-findings > summary').textContent(), `${findings.length - 3} more`);
	assert.equal(await diag.locator('details.more-findings article.finding').count(), findings.length - 3);
	const rank = { critical: 0, error: 1, warning: 2, info: 3 };
	const sevs = await diag.locator('article.finding .sev').allTextContents();
	assert.deepEqual(sevs, [...sevs].sort((a, b) => rank[a] - rank[b]));
	for (const a of await open.locator('a.evidence-link').all()) {
		const href = await a.getAttribute('href');
		assert.match(href, /^#card-/);
		assert.ok(await page.locator(`${href}:not([hidden])`).count() === 1, `${href} on the page`);
	}
	const first = open.first().locator('a.evidence-link');
	const href = await first.getAttribute('href');
	await first.click();
	await page.waitForFunction((h) => location.hash === h, href);
	const y = await page.locator(href).evaluate((el) => el.getBoundingClientRect().top);
	assert.ok(Math.abs(y) < 5, `the evidence card scrolled to the top (${y})`);

	// the delete button: red on white, readable (WCAG contrast at least 4.5)
	const [fg, bg] = await page.locator('.title .button.danger').evaluate((b) => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]);
	const lum = (c) => {
		const [r, g, b] = c.match(/\d+/g).slice(0, 3).map((x) => +x / 255).map((x) => (x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4));
		return 0.2126 * r + 0.7152 * g + 0.0722 * b;
	};
	const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
	assert.ok((hi + 0.05) / (lo + 0.05) >= 4.5, `delete button ${fg} on ${bg}`);
	// bandwidths in the page's binary units
	assert.doesNotMatch(await page.textContent(card('Distributed')), /\bGB\/s|\bMB\b/);
	await page.screenshot({ path: path.join(shots, 'first-screen-dist.png') });
	assert.deepEqual(page.problems, []);
});

test('run page of one finding: nothing folded, nothing else in the card', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-sync');
	await page.waitForSelector('#app[data-ready]');
	const diag = page.locator(card('Diagnosis'));
	assert.equal(await diag.locator('article.finding').count(), 1);
	assert.equal(await diag.locator('details.more-findings').count(), 0);
	// the card holds its heading and the finding, no stray text
	const texts = await diag.evaluate((el) => [...el.querySelectorAll(':scope > div > *')].map((x) => x.tagName));
	assert.deepEqual(texts, ['ARTICLE']);
	assert.equal(await diag.evaluate((el) => [...el.querySelector(':scope > div').childNodes].filter((n) => n.nodeType === 3).length), 0);
	assert.equal(await diag.locator('a.evidence-link').getAttribute('href'), '#card-operators');
	// nor inside the findings (a rule with no card to link to, say, adds no text either)
	assert.equal(await diag.locator('.finding-head').evaluate((el) => [...el.childNodes].filter((n) => n.nodeType === 3).length), 0);
	assert.deepEqual(page.problems, []);
});

test('run page of one profiling cycle: no "Whole run" repeating the step chart', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-healthy');
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator(`${card('Step time by component')} canvas`).first().isVisible(), true);
	await page.waitForSelector(`${card('Whole run')} .chart-box[data-cycles="1"]`, { state: 'attached' });
	assert.equal(await page.locator(card('Whole run')).isHidden(), true);
	assert.deepEqual(page.problems, []);
});

// What is outside every bracket of a C++ name, less "void " and "(anonymous namespace)::".
function functionOf(n) {
	let out = '', depth = 0;
	for (const c of n.replace(/^void /, '').replace(/\(anonymous namespace\)::/g, '')) {
		depth += c === '<' || c === '(' ? 1 : 0;
		if (!depth)
			out += c;
		depth -= c === '>' || c === ')' ? 1 : 0;
	}
	return out.trim();
}

test('kernel and operator names keep their function, the full name on hover and copy', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-healthy');
	await page.waitForSelector('#app[data-ready]');
	const kernels = page.locator(card('Top GPU kernels'));
	await kernels.locator('button[data-act=all]').click();
	const ops = page.locator(card('Top operators'));
	await ops.locator('button:text-is("GPU")').click();
	await ops.locator('tbody .name').first().waitFor();
	for (const [what, box] of [['kernels', kernels], ['operators', ops]]) {
		const names = await box.locator('tbody .name').evaluateAll((els) => els.map((el) => {
			const t = el.querySelector('.name-text');
			return { full: el.dataset.full, title: el.title, shown: t.textContent, clipped: t.scrollWidth > t.clientWidth + 1 };
		}));
		assert.ok(names.length >= 10, `${names.length} ${what}`);
		for (const n of names) {
			assert.equal(n.title, n.full);
			assert.ok(n.shown.startsWith(functionOf(n.full)), `${what}: "${n.shown}" lost "${functionOf(n.full)}"`);
			assert.ok(!n.clipped, `${what}: "${n.shown}" clipped`);
		}
		if (what === 'kernels') {
			// the example of issue 46: "at… <128, 2, gpu_kernel_impl_nocast…" before
			const copy = names.find((n) => n.full.includes('elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy'));
			assert.ok(copy, 'the direct_copy elementwise_kernel row');
			assert.match(copy.shown, /^at::native::elementwise_kernel<128, 2, gpu_kernel_impl_nocast</);
		}
	}
	// a selection inside one name copies the full name
	const cell = kernels.locator('tbody .name').first();
	const copied = await cell.evaluate((el) => {
		getSelection().selectAllChildren(el.querySelector('.name-text'));
		const ev = new ClipboardEvent('copy', { clipboardData: new DataTransfer(), bubbles: true, cancelable: true });
		el.querySelector('.name-text').dispatchEvent(ev);
		return ev.clipboardData.getData('text/plain');
	});
	assert.equal(copied, await cell.getAttribute('data-full'));
	await kernels.screenshot({ path: path.join(shots, 'first-screen-kernels.png') });
	assert.deepEqual(page.problems, []);
});

test('the trace viewer answers at /viewer/', async () => {
	const root = await fetch(srv.base + '/viewer/');
	assert.equal(root.status, 200);
	assert.match(await root.text(), /speedscope/);
});

test('the trace viewer opens a trace on its busiest thread', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gpu-healthy');
	await page.waitForSelector('#app[data-ready]');
	const [viewer] = await Promise.all([page.waitForEvent('popup'), page.click('#open-viewer')]);
	await viewer.waitForFunction(() => / - speedscope$/.test(document.title), null, { timeout: 60000 });
	// what the run page handed over, grouped as speedscope groups it: its first profile is the
	// thread whose "pid:tid" (each zero-padded to 10) sorts first
	const threads = await viewer.evaluate(async () => {
		const url = decodeURIComponent(location.hash.match(/profileURL=([^&]+)/)[1]);
		const t = await (await fetch(url)).json();
		const pad = (v) => String(v).padStart(10, '0');
		const by = {};
		for (const e of t.traceEvents)
			if (e.ph === 'X') {
				const k = `${pad(e.pid)}:${pad(e.tid)}`;
				(by[k] ??= { key: k, events: 0, names: new Set(), spans: [] }).events++;
				by[k].names.add(e.name);
				by[k].spans.push([e.ts, e.ts + (e.dur || 0)]);
			}
		return Object.values(by).map((g) => {
			g.spans.sort((a, b) => a[0] - b[0]);
			let busy = 0, end = -Infinity;
			for (const [s, e] of g.spans) {
				busy += Math.max(0, e - Math.max(s, end));
				end = Math.max(end, e);
			}
			return { key: g.key, events: g.events, busy, steps: [...g.names].some((n) => /^ProfilerStep#/.test(n)), names: g.names.size };
		}).sort((a, b) => (a.key < b.key ? -1 : 1));
	});
	const firstProfile = threads[0];
	const busiest = threads.filter((x) => x.events > 1).reduce((a, b) => (b.busy > a.busy ? b : a));
	assert.equal(firstProfile.key, busiest.key);
	assert.ok(firstProfile.events > 100 && firstProfile.names > 10, JSON.stringify(firstProfile));
	assert.ok(firstProfile.steps, 'the main thread, its ProfilerStep spans');
	await viewer.screenshot({ path: path.join(shots, 'first-screen-viewer.png') });
	assert.deepEqual(page.problems, []);
});

test('a 401 on the runs list asks for a read token, never "No runs yet"', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trainscope-tokens-'));
	const file = path.join(dir, 'tokens');
	const write = 'w'.repeat(24), read = 'r'.repeat(24);
	fs.writeFileSync(file, `${write}\nread ${read}\n`);
	const tsrv = await startServer(undefined, ['--token-file', file]);
	try {
		await upload(tsrv.base, 'tok', path.join(gpu, 'tiny', fs.readdirSync(path.join(gpu, 'tiny')).find((f) => f.includes('.pt.trace'))),
			'rank=0', { Authorization: `Bearer ${write}` });
		const page = await newPage(browser);
		await page.goto(tsrv.base + '/');
		await page.waitForSelector('#token-needed');
		assert.match(await page.textContent('#token-needed'), /A read token is needed/);
		assert.equal(await page.locator('#token-needed input[type=password]').isVisible(), true);
		assert.doesNotMatch(await page.innerText('#app'), /No runs yet/);
		await page.fill('#token-needed input', read);
		await Promise.all([page.waitForEvent('load'), page.click('#token-needed button')]);
		await page.waitForSelector('a:text-is("tok")');
		assert.equal(await page.locator('#token-needed').count(), 0);
		// the list's first read answered 401, as it should
		assert.deepEqual(page.problems.filter((p) => !/^401: |status of 401/.test(p)), []);
	} finally {
		await tsrv.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('/api/docs: the operations at once, one opened and tried', async () => {
	const page = await newPage(browser);
	const outside = [];
	await page.context().route((url) => !url.href.startsWith(srv.base), (r) => {
		outside.push(r.request().url());
		return r.abort();
	});
	const t0 = Date.now();
	await page.goto(srv.base + '/api/docs');
	await page.waitForSelector('details.op');
	const ms = Date.now() - t0;
	console.log(`/api/docs: the first operation visible ${ms} ms after navigating`);
	// what made it slow: Swagger UI's 1.6 MB bundle; the page's script is small
	const html = await (await fetch(srv.base + '/api/docs')).text();
	const js = await (await fetch(srv.base + html.match(/src="([^"]+\.js)"/)[1])).arrayBuffer();
	assert.ok(js.byteLength < 50000, `${js.byteLength} bytes of script`);
	const paths = await page.locator('details.op .path').allTextContents();
	assert.ok(paths.length >= 20, `${paths.length} operations`);
	assert.ok(paths.includes('/api/v1/runs/{run}/kernels'));
	const op = page.locator('details.op[data-method=get][data-path="/api/v1/runs"]');
	await op.locator('summary').click();
	await op.locator('.responses details.schema-box summary').first().click();
	await page.waitForFunction(() => /"runs"/.test(document.querySelector('details.op[open] pre.schema')?.textContent || ''));
	await op.locator('button[type=submit]').click();
	await page.waitForFunction(() => /^200 /.test(document.querySelector('details.op[open] pre.answer')?.textContent || ''));
	assert.match(await op.locator('pre.answer').textContent(), /"gpu-healthy"/);
	const kernels = page.locator('details.op[data-method=get][data-path="/api/v1/runs/{run}/kernels"]');
	await kernels.locator('summary').click();
	await kernels.locator('table:not(.responses) tbody tr').first().waitFor();
	const params = await kernels.locator('table:not(.responses) tbody tr td:first-child code').allTextContents();
	assert.deepEqual(params, ['run', 'wait', 'rank', 'kind', 'limit', 'format']);
	await page.screenshot({ path: path.join(shots, 'first-screen-docs.png'), fullPage: true });
	assert.deepEqual(outside, []);
	assert.deepEqual(page.problems, []);
});
