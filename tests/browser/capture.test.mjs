// Browser test of the run page's on-demand capture control (web/src/capture.js):
// the form posts a capture of the steps, ranks and activities asked for; the
// list shows it pending, then follows it as collectors (this test, through the
// API) take it and end their parts; on a server with a write token the form
// asks for the token, keeps it, and the capture carries its prefix. A run that
// a collector polled for and that has no upload yet (issue 52) is listed as
// waiting, and its page draws the capture control first, with when the
// collector was seen, and the run's data once the capture's trace lands.
//   node --test tests/browser/capture.test.mjs   (BUILD_DIR picks the build)
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { launchBrowser, newPage, screenshotDir, startServer, upload } from './harness.mjs';

let browser;
const shots = screenshotDir();

before(async () => {
	browser = await launchBrowser();
});

after(async () => {
	await browser?.close();
});

async function call(base, method, url, body, headers = {}) {
	const r = await fetch(base + url, { method, body: body && JSON.stringify(body), headers });
	return { status: r.status, json: r.status === 204 ? null : await r.json() };
}

test('capture next N steps from the run page, and follow it to done', async () => {
	const srv = await startServer();
	try {
		await upload(srv.base, 'cap', 'traces/hta_alexnet.json.gz');
		const page = await newPage(browser);
		await page.goto(srv.base + '/runs/cap');
		await page.waitForSelector('#app[data-ready]');
		await page.waitForSelector('#card-capture #capture-list p');
		assert.match(await page.textContent('#capture-list'), /No captures/);
		await page.fill('#capture-steps', '7');
		await page.fill('#capture-ranks', '0, 2');
		await page.uncheck('#capture-form input[value=cuda]');
		await page.check('#capture-form input[value=memory]');
		await page.click('#capture-go');
		await page.waitForSelector('#captures tr[data-state=pending]');
		assert.match(await page.textContent('#capture-status'), /pending until a collector takes it/);
		const list = (await call(srv.base, 'GET', '/api/v1/runs/cap/captures')).json.captures;
		assert.equal(list.length, 1);
		const c = list[0];
		assert.equal(c.steps, 7);
		assert.deepEqual(c.ranks, [0, 2]);
		assert.deepEqual(c.activities, ['cpu', 'memory']);
		assert.equal(c.requested_by, 'run page');
		// collectors take it and end their parts: the list follows without a reload
		assert.equal((await call(srv.base, 'GET', '/api/v1/runs/cap/captures/next?rank=0')).status, 200);
		await page.waitForSelector(`#captures tr[data-id="${c.id}"][data-state=running]`, { timeout: 10000 });
		assert.match(await page.textContent(`#captures tr[data-id="${c.id}"]`), /0: running/);
		assert.equal((await call(srv.base, 'GET', '/api/v1/runs/cap/captures/next?rank=2')).status, 200);
		assert.equal((await call(srv.base, 'POST', `/api/v1/captures/${c.id}/ranks/0`, { state: 'done' })).status, 200);
		assert.equal((await call(srv.base, 'POST', `/api/v1/captures/${c.id}/ranks/2`, { state: 'failed', reason: 'no GPU' })).status, 200);
		await page.waitForSelector(`#captures tr[data-id="${c.id}"][data-state=done]`, { timeout: 10000 });
		assert.match(await page.textContent(`#captures tr[data-id="${c.id}"]`), /2: failed/);
		// done: the list is no longer read again
		let reads = 0;
		page.on('request', (r) => r.url().endsWith('/api/v1/runs/cap/captures') && reads++);
		await page.waitForTimeout(4500);
		assert.equal(reads, 0);
		// a bad request is told in the card, nothing made
		await page.fill('#capture-ranks', '0, x');
		await page.click('#capture-go');
		await page.waitForSelector('#capture-status.bad');
		assert.match(await page.textContent('#capture-status'), /ranks/);
		assert.equal((await call(srv.base, 'GET', '/api/v1/runs/cap/captures')).json.captures.length, 1);
		await page.screenshot({ path: path.join(shots, 'run-capture.png'), fullPage: true });
		// the one refusal asked for, and the browser's console line about it
		assert.deepEqual(page.problems.filter((p) => !/^400: .*\/captures$|status of 400/.test(p)), []);
	} finally {
		await srv.stop();
	}
});

test('on a server with a write token, the form asks for it and keeps it', async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trainscope-capture-'));
	const token = 'capture-write-token-0123456789';
	fs.writeFileSync(path.join(dir, 'tokens'), token + '\n');
	const srv = await startServer(undefined, ['--token-file', path.join(dir, 'tokens')]);
	try {
		await upload(srv.base, 'cap', 'traces/hta_alexnet.json.gz', 'rank=0', { Authorization: `Bearer ${token}` });
		const page = await newPage(browser);
		await page.goto(srv.base + '/runs/cap');
		await page.waitForSelector('#app[data-ready]');
		await page.click('#capture-go');
		await page.waitForSelector('#capture-token');
		assert.match(await page.textContent('#capture-status'), /write token is needed/);
		await page.fill('#capture-token', token);
		await page.click('#capture-form .token button');
		await page.waitForSelector('#captures tr[data-state=pending]');
		const list = (await call(srv.base, 'GET', '/api/v1/runs/cap/captures')).json.captures;
		assert.equal(list.length, 1);
		assert.equal(list[0].token, crypto.createHash('sha256').update(token).digest('hex').slice(0, 8));
		assert.equal(await page.evaluate(() => localStorage.getItem('trainscope.token')), token);
		assert.ok(await page.isHidden('#capture-token'));
		assert.deepEqual(page.problems.filter((p) => !/^401: .*\/captures$|status of 401/.test(p)), []);
	} finally {
		await srv.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('a run waiting for its first capture: listed, its page asks for one, and draws the trace', async () => {
	const srv = await startServer();
	try {
		// a collector's poll (run --captures), nothing uploaded
		assert.equal((await call(srv.base, 'GET', '/api/v1/runs/fresh/captures/next?rank=0')).status, 204);
		const page = await newPage(browser);
		await page.goto(srv.base + '/');
		await page.waitForSelector('#app[data-ready]');
		const row = await page.textContent('tr:has(a[href="/runs/fresh"])');
		assert.match(row, /waiting for first capture/);
		await page.click('a[href="/runs/fresh"]');
		await page.waitForSelector('#app[data-ready]');
		await page.waitForSelector('#card-waiting');
		await page.waitForSelector('#card-capture #capture-list p');
		assert.match(await page.textContent('#capture-seen'), /^Collector seen \d+ s ago\.$/);
		assert.match(await page.textContent('#capture-list'), /No captures/);
		await page.screenshot({ path: path.join(shots, 'run-waiting.png'), fullPage: true });
		// the control comes before the (empty) artifacts
		const order = await page.$$eval('#app > section, #app > div', (els) => els.map((e) => e.id).filter(Boolean));
		assert.ok(order.indexOf('card-capture') < order.indexOf('card-artifacts'), order.join(' '));
		await page.fill('#capture-steps', '3');
		await page.click('#capture-go');
		await page.waitForSelector('#captures tr[data-state=pending]');
		const c = (await call(srv.base, 'GET', '/api/v1/runs/fresh/captures')).json.captures[0];
		assert.equal(c.steps, 3);
		// the collector takes it, its trace lands with the capture, the rank ends it
		assert.equal((await call(srv.base, 'GET', '/api/v1/runs/fresh/captures/next?rank=0')).status, 200);
		await upload(srv.base, 'fresh', 'traces/hta_alexnet.json.gz', `rank=0&capture=${c.id}`);
		assert.equal((await call(srv.base, 'POST', `/api/v1/captures/${c.id}/ranks/0`, { state: 'done' })).status, 200);
		// the page follows: the run's data drawn, no longer waiting, the capture done
		await page.waitForSelector('#card-operators', { timeout: 15000 });
		assert.equal(await page.$('#card-waiting'), null);
		await page.waitForSelector(`#captures tr[data-id="${c.id}"][data-state=done]`, { timeout: 10000 });
		await page.screenshot({ path: path.join(shots, 'run-first-capture.png'), fullPage: true });
		assert.deepEqual(page.problems, []);
	} finally {
		await srv.stop();
	}
});
