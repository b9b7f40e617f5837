// Browser tests of a run made of several artifacts: two ranks' traces, a memory
// timeline export and a memory snapshot in one run (the run page used to stay on
// "Loading…" for any run of two or more artifacts).
//   node --test tests/browser/run_multi.test.mjs   (BUILD_DIR picks the build)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, test } from 'node:test';

import { fixturesDir, launchBrowser, newPage, screenshotDir, startServer, upload } from './harness.mjs';

let srv, browser;
const shots = screenshotDir();

before(async () => {
	srv = await startServer();
	await upload(srv.base, 'multi', 'traces/hta_sampled_rank0.json.gz', 'rank=0');
	await upload(srv.base, 'multi', 'traces/hta_sampled_rank1.json.gz', 'rank=1');
	await upload(srv.base, 'multi', 'memory/hta_memory_timeline.raw.json.gz', 'rank=0');
	await upload(srv.base, 'multi', 'memory/cs336_memory_snapshot.pickle', 'rank=0');
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
	await srv?.stop();
});

const rowTexts = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => tr.textContent));

test('run page of 2 ranks, a memory timeline and a snapshot', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/multi');
	await page.waitForSelector('#app[data-ready]');
	const art = await rowTexts(page, 'section:has(h2:text-is("Artifacts"))');
	assert.equal(art.length, 4);
	// in upload order
	assert.match(art[0], /hta_sampled_rank0\.json\.gz.*trace.*ready/);
	assert.match(art[1], /hta_sampled_rank1\.json\.gz.*trace.*ready/);
	assert.match(art[2], /hta_memory_timeline\.raw\.json\.gz/);
	assert.match(art[3], /cs336_memory_snapshot\.pickle/);
	assert.match(await page.textContent('.headline'), /4 artifacts/);
	assert.equal(await page.locator('h2:text-is("Step time by component")').count(), 1);
	assert.equal(await page.locator('h2:text-is("Memory timeline")').count(), 1);
	assert.equal(await rowTexts(page, 'section:has(h2:text-is("Ranks"))').then((r) => r.length), 2);
	await page.screenshot({ path: path.join(shots, 'run-multi.png'), fullPage: true });

	// rank 1 through the picker
	await Promise.all([page.waitForURL(/\?rank=1$/), page.selectOption('.rank-pick select', '1')]);
	await page.waitForSelector('#app[data-ready]');
	assert.equal(await page.locator('.rank-pick select').inputValue(), '1');
	assert.equal((await rowTexts(page, 'section:has(h2:text-is("Artifacts"))')).length, 4);
	assert.equal(await page.locator('h2:text-is("Step time by component")').count(), 1);
	// the memory files are rank 0's: rank 1 has no memory card (and asks for no /memory)
	assert.equal(await page.locator('h2:text-is("Memory timeline")').count(), 0);
	assert.deepEqual(page.problems, []);
});

test('run page: delete an artifact, then the run, each after a confirmation', async () => {
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/multi');
	await page.waitForSelector('#app[data-ready]');
	const artifacts = 'section:has(h2:text-is("Artifacts"))';
	// dismissed: nothing goes
	page.once('dialog', (d) => d.dismiss());
	await page.click('button[aria-label="delete hta_sampled_rank1.json.gz"]');
	assert.equal((await (await fetch(srv.base + '/api/v1/runs/multi')).json()).artifacts.length, 4);
	// accepted: the artifact goes and the page comes back without it, and without rank 1
	let question;
	page.once('dialog', (d) => { question = d.message(); d.accept(); });
	await Promise.all([page.waitForEvent('load'), page.click('button[aria-label="delete hta_sampled_rank1.json.gz"]')]);
	assert.match(question, /Delete hta_sampled_rank1\.json\.gz \(trace, rank 1\) from run multi\?/);
	await page.waitForSelector('#app[data-ready]');
	const rows = await rowTexts(page, artifacts);
	assert.equal(rows.length, 3);
	assert.ok(!rows.some((r) => r.includes('rank1')));
	assert.equal(await page.locator('.rank-pick').count(), 0);
	// the run: back to the runs list, which no longer has it
	page.once('dialog', (d) => { question = d.message(); d.accept(); });
	await Promise.all([page.waitForURL(srv.base + '/'), page.click('button:text-is("Delete run")')]);
	assert.match(question, /Delete run multi and its 3 artifacts\?/);
	assert.equal((await fetch(srv.base + '/api/v1/runs/multi')).status, 404);
	await page.waitForSelector('td:has-text("No runs yet")');
	assert.deepEqual(page.problems, []);
});

test('run page: two recordings of memory stitched, the gap between them shaded and the lines broken', async () => {
	// two profiling cycles' memory exports, 100 s apart: one timeline with a gap
	const rows = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(fixturesDir, 'memory/hta_memory_timeline.raw.json.gz'))));
	const later = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ts-')), 'cycle2.json');
	fs.writeFileSync(later, JSON.stringify(rows.map(([t, ...r]) => [t < 0 ? t : t + 100e9, ...r])));
	await upload(srv.base, 'cycles', 'memory/hta_memory_timeline.raw.json.gz', 'rank=0');
	await upload(srv.base, 'cycles', later, 'rank=0');
	fs.rmSync(path.dirname(later), { recursive: true });
	const page = await newPage(browser);
	await page.goto(srv.base + '/runs/cycles');
	await page.waitForSelector('#app[data-ready]');
	const box = page.locator('section:has(h2:text-is("Memory timeline")) .chart-box');
	await box.locator('canvas').waitFor();
	const d = await box.evaluate((el) => ({ gaps: el.dataset.gaps, rows: el.dataset.gapRows, xMax: +el.dataset.xMax }));
	assert.equal(d.gaps, '1');
	assert.equal(d.rows, '1');
	// the chart spans both recordings: more than the 100 s between them
	assert.ok(d.xMax > 100, `x extent ${d.xMax}`);
	await page.screenshot({ path: path.join(shots, 'run-memory-gap.png'), fullPage: true });
	// the shaded gap: a wide band of the gap's grey in the middle of the plot
	const grey = await box.evaluate((el) => {
		const c = el.querySelector('canvas');
		const ctx = c.getContext('2d'), y = Math.round(c.height * 0.3);
		const row = ctx.getImageData(0, y, c.width, 1).data;
		let n = 0;
		for (let i = 0; i < row.length; i += 4)
			// the band alone: its grey at its alpha on the canvas (transparent elsewhere but the grid)
			if (Math.abs(row[i] - 113) < 16 && Math.abs(row[i + 2] - 122) < 16 && row[i + 3] > 20 && row[i + 3] < 45)
				n++;
		return n / (c.width || 1);
	});
	assert.ok(grey > 0.3, `grey share of a row ${grey}`);
	assert.deepEqual(page.problems, []);
});
