// Browser tests of the run page's views of other profilers' outputs (issue 21): a run
// holding a Lightning SimpleProfiler report, an nvidia-smi log and a trace together; one
// with export_stacks' folded stacks (the flame graph and its frames, the offline viewer);
// one with a two-GPU headed log written here by nvidia-smi's grammar (no licensed sample
// has several GPUs); one with AdvancedProfiler reports, a key_averages table and the
// header-per-row log. Every expected figure is read from the fixture files here.
//   node --test tests/browser/formats.test.mjs   (BUILD_DIR picks the build)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { fixturesDir, launchBrowser, newPage, screenshotDir, startServer, upload } from './harness.mjs';

const LIGHTNING = 'formats/lightning_simple_pl1.2_hannah.txt';
const SMI = 'formats/nvidia_smi_noheader_plato.csv';
const STACKS = 'formats/export_stacks_gpt2_profile.txt';
const read = (f) => fs.readFileSync(path.join(fixturesDir, f), 'utf8');
let srv, browser, tmp;
const shots = screenshotDir();

// nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,memory.used,temperature.gpu,power.draw
// --format=csv -l 1 on two GPUs, one of GPU 1's rows missing (a stalled query): 12 and 11 rows
function twoGpuLog() {
	const rows = ['timestamp, index, name, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W]'];
	for (let s = 0; s < 12; s++)
		for (const gpu of [0, 1])
			if (!(gpu === 1 && s === 5))
				rows.push(`2026/04/25 16:06:${String(10 + s).padStart(2, '0')}.${gpu ? '781' : '780'}, ${gpu}, NVIDIA A100-SXM4-80GB, ` +
					`${(s * 7 + gpu * 3) % 101} %, ${1000 + s * 10 + gpu} MiB, ${40 + gpu}, ${(100 + s).toFixed(2)} W`);
	return rows.join('\n') + '\n';
}

// py-spy record --format raw, by its writer (FORMATS.md: no real file was found): root first,
// "name (file:line)" frames with spaces, a --threads pseudo-frame at the root end of one line
const PYSPY = `<module> (train.py:20);main (train.py:10);step (train.py:5) 30
<module> (train.py:20);main (train.py:10);load (data.py:4) 10
<module> (train.py:20);setup (train.py:2) 2
thread (7);<module> (train.py:20);main (train.py:10);step (train.py:5) 1
`;

before(async () => {
	srv = await startServer();
	tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trainscope-formats-'));
	fs.writeFileSync(path.join(tmp, 'gpu_usage.csv'), twoGpuLog());
	fs.writeFileSync(path.join(tmp, 'pyspy.txt'), PYSPY);
	await upload(srv.base, 'fit', LIGHTNING);
	await upload(srv.base, 'fit', SMI);
	await upload(srv.base, 'fit', 'traces/hta_triton_tiny.json.gz');
	await upload(srv.base, 'stacks', STACKS);
	await upload(srv.base, 'smi2', path.join(tmp, 'gpu_usage.csv'));
	await upload(srv.base, 'pyspy', path.join(tmp, 'pyspy.txt'));
	await upload(srv.base, 'advanced', 'formats/lightning_advanced_pl1.4_doc_robustness.txt');
	await upload(srv.base, 'advanced', 'formats/lightning_advanced_pl2.2_diffusion_policy.txt');
	await upload(srv.base, 'advanced', 'formats/key_averages_cuda_kernelheim.txt');
	await upload(srv.base, 'advanced', 'formats/nvidia_smi_repeated_header_slowfast.csv');
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
	fs.rmSync(tmp, { recursive: true, force: true });
});

async function open(run) {
	const page = await newPage(browser);
	await page.goto(`${srv.base}/runs/${run}`);
	await page.waitForSelector('#app[data-ready]');
	return page;
}

const cardOf = (title) => `section:has(h2:text-is("${title}"))`;
const cells = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) =>
	[...tr.children].map((td) => td.querySelector('[data-full]')?.dataset.full ?? td.textContent.trim())));

// A time as fmtNs prints it ("21.7 s", "30.9 ms"), in seconds, and half its last digit: how
// far from the file's figure it may be.
function shownSeconds(text) {
	const m = /^(-?[\d.]+) (s|ms|µs|ns)$/.exec(text);
	assert.ok(m, `a time: ${text}`);
	const unit = { s: 1, ms: 1e-3, 'µs': 1e-6, ns: 1e-9 }[m[2]];
	const digits = (m[1].split('.')[1] || '').length;
	return [+m[1] * unit, 0.5 * 10 ** -digits * unit];
}

// SimpleProfiler 1.2's rows: "action | mean (s) | calls | total (s) | percentage |", after the Total row
function lightningRows(text) {
	return text.split('\n').filter((l) => l.includes('|')).slice(2).map((l) => {
		const [action, mean, calls, total, share] = l.split('|').map((c) => c.trim());
		return { action, mean: +mean, calls: +calls, total: +total, share: +share };
	});
}

test('a run with a Lightning report, an nvidia-smi log and a trace shows all three', async () => {
	const page = await open('fit');
	// the trace's cards are there too
	for (const title of ['Step time by component', 'Top operators', 'GPUs (nvidia-smi)', 'Lightning profiler'])
		assert.equal(await page.locator(`h2:text-is("${title}")`).count(), 1, title);
	assert.equal(await page.locator('h2:text-is("Stacks")').count(), 0);

	// the actions: every row of the file, largest total first, its figures as printed
	const file = lightningRows(read(LIGHTNING));
	assert.equal(file.length, 33);
	const actions = cardOf('Lightning profiler');
	await page.click(`${actions} button[data-act=all]`);
	const rows = await cells(page, actions);
	assert.equal(rows.length, file.length);
	const biggest = file.reduce((a, b) => (b.total > a.total ? b : a));
	assert.equal(rows[0][0], biggest.action);
	for (const f of file) {
		const row = rows.find((r) => r[0] === f.action);
		assert.ok(row, f.action);
		assert.equal(row[1], f.calls.toLocaleString('en-US'), f.action);
		for (const [i, secs] of [[2, f.mean], [3, f.total]]) {
			const [shown, tol] = shownSeconds(row[i]);
			assert.ok(Math.abs(shown - secs) <= tol * 1.0001, `${f.action}: ${row[i]} for ${secs} s`);
		}
		assert.ok(Math.abs(parseFloat(row[4]) - f.share) <= 0.005 + 1e-9, `${f.action}: ${row[4]} for ${f.share} %`);
	}
	// sortable: by calls, the most called first
	await page.click(`${actions} th:text-is("Calls")`);
	const most = file.reduce((a, b) => (b.calls > a.calls ? b : a));
	assert.equal(file.filter((f) => f.calls === most.calls).length, 1);
	assert.equal((await cells(page, actions))[0][0], most.action);

	// nvidia-smi: a chart per unit, every row of the log a point of each column
	const smi = read(SMI).split('\n').filter((l) => l.trim());
	const util = smi.map((l) => parseFloat(l.split(', ')[1]));
	const charts = await page.$$eval('#gpu .gpu-chart', (els) => els.map((e) => [e.dataset.unit, JSON.parse(e.dataset.points)]));
	assert.deepEqual(charts.map(([u]) => u), ['%', 'B', 'C', 'W']);
	const points = Object.assign({}, ...charts.map(([, p]) => p));
	assert.equal(Object.keys(points).length, smi[0].split(', ').length - 1);	/* every column but the timestamp */
	for (const [line, n] of Object.entries(points))
		assert.equal(n, smi.length, line);
	assert.ok(await page.locator('#gpu canvas').count() >= 4);
	const mean = util.reduce((a, b) => a + b, 0) / util.length;
	assert.match(await page.textContent('.headline'), new RegExp(`nvidia-smi utilization${(mean).toFixed(1).replace('.', '\\.')}%`));
	const summary = await cells(page, cardOf('GPUs (nvidia-smi)'));
	assert.deepEqual(summary.find((r) => r[1] === 'utilization.gpu').slice(2, 6),
		[smi.length.toLocaleString('en-US'), mean.toFixed(1) + ' %', Math.min(...util).toFixed(1) + ' %', Math.max(...util).toFixed(1) + ' %']);
	await page.screenshot({ path: path.join(shots, 'run-formats.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

// export_stacks' lines: [frames leaf first (this Kineto build's order, FORMATS.md), weight]
function stackLines(text) {
	return text.split('\n').map((l) => /^(.*) (\d+)$/.exec(l)).filter(Boolean).map((m) => [m[1].split(';'), +m[2]]);
}
const sumBy = (lines, key) => lines.reduce((m, [f, w]) => m.set(key(f), (m.get(key(f)) || 0) + w), new Map());
const largest = (m) => [...m].reduce((a, b) => (b[1] > a[1] ? b : a));

test('folded stacks: a flame graph, root first, and the top frames', async () => {
	const page = await open('stacks');
	const lines = stackLines(read(STACKS));
	assert.equal(lines.length, 1620);
	const total = lines.reduce((a, [, w]) => a + w, 0);
	const [root, rootWeight] = largest(sumBy(lines, (f) => f.at(-1)));
	const [leaf, leafWeight] = largest(sumBy(lines, (f) => f[0]));
	assert.equal(await page.locator('h2:text-is("Stacks")').count(), 1);
	assert.equal(await page.locator('h2:text-is("Step time by component")').count(), 0);

	const frames = +(await page.getAttribute('#flame', 'data-frames'));
	assert.ok(frames > 10, `${frames} frames drawn`);
	assert.equal(await page.locator('#flame g.frame').count(), frames);
	const title = (name) => page.$eval(`#flame g.frame[name="${name}"] title`, (t) => t.textContent);
	// the bottom frame holds every line's weight; the file's root frames stand on it (reversed:
	// this file is written leaf first), its leaves at the top
	assert.match(await title('all'), new RegExp(`^all: ${total.toLocaleString('en-US')} \\(100\\.0 %\\)`));
	assert.match(await title(root), new RegExp(`: ${rootWeight.toLocaleString('en-US')} \\(`));
	const y = (name) => page.$eval(`#flame g.frame[name="${name}"]`, (g) => g.transform.baseVal[0].matrix.f);
	assert.ok(await y(root) < await y('all'), 'the root frame sits on the bottom one');
	assert.ok(await y(leaf) < await y(root), 'the leaves are above');

	// the frames' table: the largest self first, as summed from the file's leaves
	const rows = await cells(page, cardOf('Stacks'));
	assert.equal(rows[0][0], leaf);
	assert.equal(rows[0][1], leafWeight.toLocaleString('en-US'));
	assert.equal(rows[0][2], (100 * leafWeight / total).toFixed(1) + '%');	/* of every line's weight */
	// click a frame: it zooms to the whole width
	const width = await page.$eval('#flame svg', (s) => s.width.baseVal.value);
	await page.click(`#flame g.frame[name="${root}"]`);
	await page.waitForFunction(([r, w]) => Math.abs(document.querySelector(`#flame g.frame[name="${r}"] rect`).width.baseVal.value - w) < 1,
		[root, width]);
	await page.screenshot({ path: path.join(shots, 'run-stacks.png'), fullPage: true });

	// the offline viewer (speedscope) opens the same stacks, with no network
	const outside = [];
	await page.context().route((url) => !url.href.startsWith(srv.base), (r) => {
		outside.push(r.request().url());
		return r.abort();
	});
	const [viewer] = await Promise.all([page.waitForEvent('popup'), page.click('#open-stacks-viewer')]);
	const errors = [];
	viewer.on('pageerror', (e) => errors.push(e.message));
	await viewer.waitForFunction(() => /stacks rank 0 stacks - speedscope/.test(document.title), null, { timeout: 60000 });
	assert.ok(await viewer.locator('canvas').count() >= 1);
	await viewer.screenshot({ path: path.join(shots, 'viewer-stacks.png') });
	assert.deepEqual(errors, []);
	assert.deepEqual(outside, []);
	assert.deepEqual(page.problems, []);
});

test('py-spy stacks, written root first, stand the same way up', async () => {
	const page = await open('pyspy');
	const lines = stackLines(PYSPY);
	const weight = (frame) => lines.filter(([f]) => frame == null || f.includes(frame)).reduce((a, [, w]) => a + w, 0);
	const title = (name) => page.$eval(`#flame g.frame[name="${name}"] title`, (t) => t.textContent);
	const y = (name) => page.$eval(`#flame g.frame[name="${name}"]`, (g) => g.transform.baseVal[0].matrix.f);
	assert.match(await title('all'), new RegExp(`^all: ${weight(null)} `));
	assert.match(await title('load (data.py:4)'), new RegExp(`: ${weight('load (data.py:4)')} `));
	assert.match(await title('setup (train.py:2)'), new RegExp(`: ${weight('setup (train.py:2)')} `));
	// all, then <module>, then setup beside main, then load on main
	assert.ok(await y('load (data.py:4)') < await y('setup (train.py:2)'));
	assert.ok(await y('setup (train.py:2)') < await y('all'));
	assert.equal(await page.getAttribute('#flame', 'data-frames'), String(await page.locator('#flame g.frame').count()));
	assert.deepEqual(page.problems, []);
});

test('a two-GPU log: a line per GPU, each with its own number of points', async () => {
	const page = await open('smi2');
	const rows = fs.readFileSync(path.join(tmp, 'gpu_usage.csv'), 'utf8').trim().split('\n').slice(1).map((l) => l.split(', '));
	const per = (gpu) => rows.filter((r) => r[1] === String(gpu)).length;
	assert.deepEqual([per(0), per(1)], [12, 11]);
	const charts = await page.$$eval('#gpu .gpu-chart', (els) => els.map((e) => [e.dataset.unit, JSON.parse(e.dataset.points)]));
	assert.deepEqual(charts.map(([u]) => u), ['%', 'B', 'C', 'W']);
	for (const [unit, points] of charts) {
		assert.equal(Object.keys(points).length, 2, unit);
		for (const [line, n] of Object.entries(points))
			assert.equal(n, per(+/^GPU (\d+)/.exec(line)[1]), line);
	}
	// the legend names each GPU's line
	assert.deepEqual(await page.$$eval('#gpu .gpu-chart[data-unit="%"] .u-legend .u-series:not(:first-child) .u-label', (l) => l.map((x) => x.textContent)),
		['GPU 0 utilization.gpu', 'GPU 1 utilization.gpu']);
	await page.screenshot({ path: path.join(shots, 'run-gpu2.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

test('AdvancedProfiler reports, a key_averages table and a header-per-row log in one run', async () => {
	const page = await open('advanced');
	const actions = cardOf('Lightning profiler');
	const reports = await page.$$eval(`${actions} .segmented button`, (b) => b.map((x) => x.textContent));
	assert.deepEqual(reports, ['lightning_advanced_pl1.4_doc_robustness.txt', 'lightning_advanced_pl2.2_diffusion_policy.txt']);
	// the actions of each report, as the API gives them
	const api = await (await fetch(`${srv.base}/api/v1/runs/advanced/actions`)).json();
	for (const [i, name] of reports.entries()) {
		await page.click(`${actions} .segmented button:text-is("${name}")`);
		await page.waitForSelector(`${actions} .segmented button.on:text-is("${name}")`);
		const id = +(await page.getAttribute('#actions', 'data-artifact'));
		const mine = api.actions.filter((a) => a.artifact === id);
		assert.ok(mine.length > 0, name);
		const shown = await page.$eval(`${actions} .table-more`, (m) => m.textContent);
		assert.equal((await cells(page, actions)).length, Math.min(25, mine.length), `${i}: ${shown}`);
		// functions per action, where the API carries them (expandable), and not otherwise
		const withFns = mine.filter((a) => a.functions?.length).length;
		assert.equal(await page.locator(`${actions} details.action-functions`).count(), withFns);
	}
	// the ops card shows for the key_averages table; /ops's source where it says one
	assert.equal(await page.locator('h2:text-is("Top operators")').count(), 1);
	const ops = await (await fetch(`${srv.base}/api/v1/runs/advanced/ops?rank=0&device=cpu&limit=2000`)).json();
	assert.equal(await page.locator('#ops-source').count(), ops.source ? 1 : 0);
	// the shell loop's log has no timestamps: its rows are the x axis, every value a point
	const util = read('formats/nvidia_smi_repeated_header_slowfast.csv').split('\n').filter((l) => /^\d+ %$/.test(l));
	const points = await page.$eval('#gpu .gpu-chart[data-unit="%"]', (e) => JSON.parse(e.dataset.points));
	assert.deepEqual(points, { 'GPU 0 utilization.gpu': util.length });
	assert.doesNotMatch(await page.textContent(actions), /null|undefined/);
	await page.screenshot({ path: path.join(shots, 'run-advanced.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
});

// AdvancedProfiler's functions per action (the first 20 rows of each action's cProfile table, as
// /actions serves them): folded under their action, every row there, by cumulative time.
test('functions per action open under their action', async () => {
	const ans = await (await fetch(`${srv.base}/api/v1/runs/advanced/actions?rank=0`)).json();
	const first = Math.min(...ans.actions.map((x) => x.artifact));	/* the report shown first */
	const mine = ans.actions.filter((x) => x.artifact === first && x.functions?.length);
	assert.ok(mine.length > 10);
	const page = await newPage(browser);
	await page.goto(`${srv.base}/runs/advanced`);
	await page.waitForSelector('#app[data-ready]');
	const details = `${cardOf('Lightning profiler')} details.action-functions`;
	assert.equal(await page.locator(details).count(), mine.length);
	// the first is the action with the largest total; open it
	const top = mine.reduce((x, y) => ((y.total_ns ?? 0) > (x.total_ns ?? 0) ? y : x));
	const summary = page.locator(details).first().locator('summary');
	assert.ok((await summary.textContent()).includes(top.action));
	await summary.click();
	await page.waitForSelector(`${details}[open] tbody tr`);	/* built on its toggle event, after the click */
	const rows = await cells(page, `${details}[open]`);
	assert.equal(rows.length, top.functions.length);
	assert.deepEqual(rows.map((r) => r[0]).sort(), top.functions.map((f) => f.location).sort());
	const most = Math.max(...top.functions.map((f) => f.cumtime_ns));
	assert.equal(top.functions.find((f) => f.location === rows[0][0]).cumtime_ns, most);
	assert.deepEqual(await page.$$eval(`${details}[open] th`, (th) => th.map((x) => x.textContent)),
		['location', 'ncalls', 'primitive calls', 'tottime', 'cumtime']);
	await page.screenshot({ path: path.join(shots, 'run-advanced-functions.png'), fullPage: false });
	assert.deepEqual(page.problems, []);
});

// rlhf-canary metrics.json (tests/formats/: the synthetic example and the notebook's batch-1 run,
// README there): the run page's canary card and its findings, and the compare page's canary table
// with the notebook's figures, each computed here from the two files.
test('canary metrics: the run page shows its figures and findings, compare shows the notebook\'s table', async () => {
	const dir = path.resolve('tests/formats');
	const files = ['canary_baseline.json', 'canary_slow.json'].map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')));
	await upload(srv.base, 'canary-base', path.join(dir, 'canary_baseline.json'));
	await upload(srv.base, 'canary-slow', path.join(dir, 'canary_slow.json'));
	const [base, slow] = files.map((f) => f.perf);

	const page = await open('canary-slow');
	const box = '#canary';
	const figures = await page.$$eval(`${box} .stat`, (els) => Object.fromEntries(els.map((e) =>
		[e.querySelector('.stat-title').textContent, e.querySelector('.stat-value').textContent])));
	const [secs, tol] = shownSeconds(figures['Step time']);
	assert.ok(Math.abs(secs - slow.step_time.mean) <= tol, `${figures['Step time']} for ${slow.step_time.mean} s`);
	assert.equal(figures['Tokens/s'], Math.round(slow.approx_tokens_per_sec).toLocaleString('en-US'));
	assert.equal(figures['Max memory'], `${(slow.max_mem_mb / 1024).toFixed(2)} GiB`);	/* MiB in the file */
	// the top ops tables: as many rows as the file lists
	const prof = files[1].profiler;
	const opRows = await page.$$eval(`${box} .canary-ops table`, (ts) => ts.map((t) => t.querySelectorAll('tbody tr').length));
	assert.deepEqual(opRows, [prof.top_cuda_ops.length, prof.top_cpu_ops.length]);
	// the diagnosis card exists without a trace and shows what /diagnosis says
	const diag = await (await fetch(`${srv.base}/api/v1/runs/canary-slow/diagnosis`)).json();
	assert.ok(diag.findings.some((f) => f.id.startsWith('canary_')), 'a canary finding');
	const titles = await page.$$eval(`${cardOf('Diagnosis')} article.finding h3`, (els) => els.map((e) => e.textContent));
	assert.deepEqual(titles.sort(), diag.findings.map((f) => f.title).sort());
	await page.screenshot({ path: path.join(shots, 'formats-canary.png'), fullPage: true });
	await page.close();

	// compare: step time +x %, tokens/s -y %, memory +z MiB (the notebook's "MB" are MiB: the page says so)
	const cmp = await newPage(browser);
	await cmp.goto(`${srv.base}/compare?base=canary-base&target=canary-slow`);
	await cmp.waitForSelector('#app[data-ready]');
	const row = async (key) => cmp.$$eval(`#canary-compare tr[data-key=${key}] td`, (tds) => tds.map((td) => td.textContent));
	const pct = (a, b) => ((b - a) / a) * 100;
	const sign = (p) => (p > 0 ? '+' : '') + p.toFixed(1) + '%';
	assert.ok((await row('step_time'))[2].startsWith(sign(pct(base.step_time.mean, slow.step_time.mean))));
	assert.equal((await row('tokens_per_s'))[2], sign(pct(base.approx_tokens_per_sec, slow.approx_tokens_per_sec)));
	const dmb = slow.max_mem_mb - base.max_mem_mb;
	assert.equal((await row('max_mem'))[2], `${dmb > 0 ? '+' : ''}${dmb.toFixed(0)} MiB`);
	assert.equal((await cmp.locator('#verdict .verdict-word').textContent()).toLowerCase(), 'regression');
	await cmp.screenshot({ path: path.join(shots, 'formats-canary-compare.png'), fullPage: true });
	await cmp.close();
});

// Compare for the other kinds: a Lightning report whose optimizer step took 2 s longer (a copy
// edited here), and folded stacks with one stack's weight doubled: the compare page's cards put
// what grew first.
test('compare: Lightning actions and stack frames, what grew first', async () => {
	const text = read(LIGHTNING);
	assert.ok(text.includes('|  8.7402 '));
	fs.writeFileSync(path.join(tmp, 'slow-profile.txt'), text.replace('|  8.7402 ', '|  10.7402'));
	await upload(srv.base, 'lbase', LIGHTNING);
	await upload(srv.base, 'lslow', path.join(tmp, 'slow-profile.txt'));
	const stacks = read(STACKS);
	const first = stacks.slice(0, stacks.indexOf('\n'));
	const cut = first.lastIndexOf(' ');
	const w = +first.slice(cut + 1);
	fs.writeFileSync(path.join(tmp, 'grown-stacks.txt'), stacks.replace(first, `${first.slice(0, cut)} ${2 * w}`));
	await upload(srv.base, 'sbase', STACKS);
	await upload(srv.base, 'sgrown', path.join(tmp, 'grown-stacks.txt'));

	const page = await newPage(browser);
	await page.goto(`${srv.base}/compare?base=lbase&target=lslow`);
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator('h2:text-is("Step time")').count(), 0, 'no trace: no step time card');
	const rows = await cells(page, cardOf('Lightning actions'));
	assert.equal(rows[0][0], 'optimizer_step_and_closure_0');
	assert.equal(rows[0][1], 'changed');
	assert.ok(rows[0].some((c) => /^\+?2\.00 s$/.test(c)), `a change of 2.00 s in ${rows[0]}`);
	await page.screenshot({ path: path.join(shots, 'formats-compare-actions.png'), fullPage: true });

	await page.goto(`${srv.base}/compare?base=sbase&target=sgrown`);
	await page.waitForSelector('#app[data-ready]');
	const frames = await cells(page, cardOf('Stack frames'));
	const stackFrames = first.slice(0, cut).split(';');
	assert.ok(stackFrames.includes(frames[0][0]), `${frames[0][0]} is on the grown stack`);
	assert.equal(frames[0][1], 'changed');
	await page.close();
});

// nvidia-smi writes local time: a log written at UTC-5 over the V100 trace's steps. The GPU
// chart shades the trace's steps where the log's clock has them (shifted by -5 h).
test('the GPU chart shades the trace\'s steps on the log\'s clock', async () => {
	const rows = ['timestamp, index, utilization.gpu [%], memory.used [MiB], memory.free [MiB]'];
	for (let i = 0; i < 8; i++)	/* 23:48:05.000 to 23:48:08.500 local = 04:48:05 UTC on the 30th */
		rows.push(`2022/11/29 23:48:${String(5 + Math.floor(i / 2)).padStart(2, '0')}.${i % 2 ? '500' : '000'}, 0, ${50 + i} %, 1000 MiB, 9000 MiB`);
	fs.writeFileSync(path.join(tmp, 'local.csv'), rows.join('\n') + '\n');
	await upload(srv.base, 'aligned', 'traces/hta_v100_train_memory.json.gz');
	await upload(srv.base, 'aligned', path.join(tmp, 'local.csv'));
	const gpu = await (await fetch(`${srv.base}/api/v1/runs/aligned/gpu?rank=0`)).json();
	assert.equal(gpu.steps.utc_offset_min, -300);
	const page = await open('aligned');
	const shaded = await page.$eval('#gpu .gpu-chart[data-unit="%"]', (e) => +e.dataset.steps);
	assert.equal(shaded, gpu.steps.steps.length);
	assert.ok(shaded > 0);
	assert.match(await page.textContent('#gpu p.muted'), /shifted by -5 h/);
	await page.screenshot({ path: path.join(shots, 'formats-gpu-steps.png'), fullPage: true });
	assert.deepEqual(page.problems, []);
	await page.close();
});
