// Browser test of the run page's Distributed section (issue 18) on the two real
// hta_sampled ranks: per rank and step bars, the collectives, who arrives last,
// the lateness heat map and the slowest rank per step, as GET /distributed says.
//   BUILD_DIR=build node --test tests/browser/distributed.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

import { launchBrowser, newPage, screenshotDir, startServer, upload } from './harness.mjs';
import { shortName } from '../../web/src/table.js';

// the real 2-rank gloo run (tests/fixtures/gpu/dist): rank 1 sleeps 30 ms a step
const glooDir = fileURLToPath(new URL('../fixtures/gpu/dist/', import.meta.url));
const glooTraces = fs.readdirSync(glooDir).filter((f) => f.endsWith('.pt.trace.json.gz'));

let srv, browser;
const shots = screenshotDir();

before(async () => {
	srv = await startServer();
	await upload(srv.base, 'dist', 'traces/hta_sampled_rank0.json.gz', 'rank=0');
	await upload(srv.base, 'dist', 'traces/hta_sampled_rank1.json.gz', 'rank=1');
	await upload(srv.base, 'solo', 'traces/hta_sampled_rank0.json.gz', 'rank=0');
	for (const f of glooTraces)
		await upload(srv.base, 'gloo', path.join(glooDir, f), `rank=${f.startsWith('rank1.') ? 1 : 0}`);
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

const section = 'section:has(h2:text-is("Distributed"))';
const rowTexts = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => tr.textContent));

test('run page of two ranks: the Distributed section', async () => {
	const api = await (await fetch(srv.base + '/api/v1/runs/dist/distributed')).json();
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/dist');
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator(section).count(), 1);
	// one bar per rank and step: 2 ranks x 2 steps, drawn
	assert.equal(await page.getAttribute(`${section} .chart-box`, 'data-bars'), '4');
	assert.equal(await page.locator(`${section} canvas`).count() > 0, true);
	// the collectives: 3 kinds on each rank; all_to_all's time on rank 0 (182,403 us)
	const colls = await page.$$eval(`${section} h3:text-is("Collectives") + div.table tbody tr`, (trs) => trs.map((tr) => tr.textContent));
	assert.equal(colls.length, api.collectives.length);
	assert.equal(colls.length, 6);
	assert.ok(colls.some((t) => /^0all_to_all–4182 ms$/.test(t)), colls.join(' | '));
	// who arrives last: rank 0 in 6 of 10 (60.0 %)
	const last = await page.$$eval(`${section} h3:text-is("Who arrives last") + div.table tbody tr`, (trs) => trs.map((tr) => tr.textContent));
	assert.equal(last.length, 2);
	assert.ok(last.some((t) => /^010660\.0 ?%/.test(t)), last.join(' | '));
	// the heat map: rank x step, each cell the summed lateness of /distributed's instances
	const cells = await page.$$eval('#lateness tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.dataset.ns)));
	assert.equal(cells.length, 2);
	assert.equal(cells[0].length, 2);
	const want = {};
	for (const inst of api.stragglers.instances) {
		const first = Math.min(...inst.ranks.map((r) => r.launch_ns));
		for (const r of inst.ranks)
			want[`${r.rank}:${inst.step}`] = (want[`${r.rank}:${inst.step}`] || 0) + r.launch_ns - first;
	}
	assert.equal(Number(cells[0][0] || 0), want['0:551'] || 0);
	assert.equal(Number(cells[1][1] || 0), want['1:552'] || 0);
	// the slowest rank per step: rank 1 in both (630,639 us against 622,928 in #552)
	const slow = await page.$$eval(`${section} h3:text-is("Slowest rank per step") + div.table tbody tr`, (trs) => trs.map((tr) => tr.textContent));
	assert.equal(slow.length, 2);
	assert.match(slow[1], /^5521631 ms0623 ms$/);
	// the run-level findings in the Diagnosis card, arrays of figures in words
	const diag = await page.textContent('section:has(h2:text-is("Diagnosis"))');
	assert.match(diag, /Rank 1 computes 29\.3% longer per step than rank 0/);
	assert.match(diag, /rank 0, exposed communication 27%, overlap 15%; rank 1, exposed communication 24%, overlap 20%/);
	assert.doesNotMatch(diag, /object Object/);
	await page.screenshot({ path: path.join(shots, 'run-distributed.png'), fullPage: true });
	await page.locator(section).screenshot({ path: path.join(shots, 'run-distributed-section.png') });
	assert.deepEqual(page.problems, []);
});

test('run page of two ranks: the critical path of a chosen step', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/dist');
	await page.waitForSelector('#app[data-ready]');
	// the slowest step first: #552 (rank 1, 630,639 us)
	await page.waitForSelector('#critical-path[data-step]');
	assert.equal(await page.inputValue('#critical-step'), '552');
	const api = await (await fetch(srv.base + '/api/v1/runs/dist/critical_path?step=552')).json();
	assert.equal(await page.getAttribute('#critical-path', 'data-step'), '552');
	assert.equal(await page.getAttribute('#critical-path', 'data-segments'), String(api.segments.length));
	assert.equal(await page.getAttribute('#critical-path', 'data-ranks'), '2');
	assert.equal(await page.locator('#critical-path canvas').count(), 1);
	// the headline names the largest contributor by rank and kind (idle last), with its share,
	// and its largest category's name, shortened as the tables' are, whole on hover
	const by = new Map();
	for (const s of api.segments)
		by.set(`${s.rank}:${s.kind}`, (by.get(`${s.rank}:${s.kind}`) || 0) + s.dur_ns);
	const [key, ns] = [...by].filter(([k]) => !k.endsWith(':idle')).sort((a, b) => b[1] - a[1])[0];
	const [rank, kind] = key.split(':');
	const top = api.by_category.find((c) => c.rank === +rank && c.kind === kind && c.name);
	const head = await page.textContent(`${section} p.path-head`);
	assert.ok(head.includes(`of step 552's critical path`) && head.includes(`was rank ${rank}'s `) &&
		head.includes(`most of it ${shortName(top.name)}`) && head.includes((100 * ns / api.dur_ns).toFixed(1)), head);
	assert.equal(await page.getAttribute(`${section} p.path-head`, 'title'), top.name);
	// every rank on the path has its lane
	assert.equal(await page.getAttribute('#critical-path', 'data-path-ranks'), [...new Set(api.segments.map((s) => s.rank))].sort().join(','));
	const rows = await page.$$eval(`${section} p.path-head ~ div .table tbody tr, ${section} p.path-head ~ div table tbody tr`, (trs) => trs.length);
	assert.ok(rows > 0);
	// another step
	await page.selectOption('#critical-step', '551');
	await page.waitForSelector('#critical-path[data-step="551"]');
	const other = await (await fetch(srv.base + '/api/v1/runs/dist/critical_path?step=551')).json();
	assert.equal(await page.getAttribute('#critical-path', 'data-segments'), String(other.segments.length));
	assert.match(await page.textContent(`${section} p.path-head`), /of step 551's critical path/);
	await page.locator('#critical-path').screenshot({ path: path.join(shots, 'run-critical-path.png') });
	assert.deepEqual(page.problems, []);
});

test('run page of the gloo run: the path crosses to the straggler, whose host gap is named', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/gloo');
	await page.waitForSelector('#app[data-ready]');
	// the headline cards say which rank they show
	assert.equal(await page.locator('.stat:has(.stat-title:text-is("Rank")) .stat-value').textContent(), '0');
	assert.match(await page.locator('.stat:has(.stat-title:text-is("Rank")) .stat-sub').textContent(), /^of 2/);
	// the diagnosis leads with rank 1 as the straggler, not with batch-size advice
	await page.waitForSelector('section:has(h2:text-is("Diagnosis")) article.finding');
	const diag = await page.textContent('section:has(h2:text-is("Diagnosis"))');
	assert.match(diag, /Rank 1 arrives last at \d+ of 15 collectives/);
	assert.ok(diag.indexOf('Rank 1 arrives last') < diag.indexOf('GPU runs kernels only'), diag.slice(0, 400));
	assert.doesNotMatch(diag, /object Object/);
	// the clock offset /distributed estimated for rank 1, in words
	const dist = await (await fetch(srv.base + '/api/v1/runs/gloo/distributed')).json();
	const r1 = dist.ranks.find((r) => r.rank === 1);
	assert.match(await page.textContent('#clock-offsets'), new RegExp(`rank 1 [−+].* \\(${r1.clock_collectives} collectives\\)`));
	// step 6's path: on both ranks, rank 1's host gap named
	await page.waitForSelector('#critical-path[data-step]');
	await page.selectOption('#critical-step', '6');
	await page.waitForSelector('#critical-path[data-step="6"]');
	const api = await (await fetch(srv.base + '/api/v1/runs/gloo/critical_path?step=6')).json();
	assert.equal(await page.getAttribute('#critical-path', 'data-path-ranks'), '0,1');
	const gap = api.segments.filter((s) => s.rank === 1 && s.kind === 'host_gap').reduce((a, s) => a + s.dur_ns, 0);
	assert.ok(gap >= 25e6, String(gap));
	const head = await page.textContent(`${section} p.path-head`);
	assert.match(head, /of step 6's critical path .* was rank \d's /);
	assert.match(head, /rank 1's host gap \(no operator running\)/);
	assert.match(await page.textContent(`${section} .path-legend`), /host_gap/);
	await page.locator('#critical-path').screenshot({ path: path.join(shots, 'run-critical-path-gloo.png') });
	assert.deepEqual(page.problems, []);
});

test('compare page: both runs\' distributed figures', async () => {
	const api = await (await fetch(srv.base + '/api/v1/compare?base=dist&target=solo')).json();
	const d = api.distributed;
	assert.equal(d.base.ranks, 2);
	assert.equal(d.target.ranks, 1);
	const page = await newPage(browser);
	await page.goto(srv.base + '/compare?base=dist&target=solo');
	await page.waitForSelector('#app[data-ready]');
	const rows = await page.$$eval('#dist-compare tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent.trim())));
	assert.deepEqual(rows[0], ['Ranks', '2', '1', '']);
	const step = rows.find((r) => r[0] === 'Step');
	const want = d.delta_pct.dur_ns;
	assert.equal(step[3], want == null ? '–' : (want > 0 ? '+' : '') + want.toFixed(1) + '%');
	assert.deepEqual(rows.find((r) => r[0] === 'Matched collectives'), ['Matched collectives', String(d.base.matched), String(d.target.matched), '']);
	assert.match(rows.find((r) => r[0] === 'Last to arrive most often')[1], /^rank 0 \(60\.0 %\)$/);
	assert.deepEqual(page.problems, []);
	// one rank on each side: no Distributed card
	await page.goto(srv.base + '/compare?base=solo&target=solo');
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator('#dist-compare').count(), 0);
	assert.deepEqual(page.problems, []);
});

test('run page of one rank: no Distributed section', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/solo');
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator(section).count(), 0);
	assert.deepEqual(page.problems, []);
});
