#!/usr/bin/env node
// Page load, as a new user meets the pages: a fresh server gets the H200 `train` run
// (tests/fixtures/gpu/train: ten traces, 124,574 events, its memory timeline export
// and snapshot), then headless chromium loads, RUNS times (default 5) each in a new
// browser context (a cold cache: every script fetched and compiled again):
//   - the run page /runs/train, to its 'trainscope:ready' mark (every card's content in:
//     headline, diagnosis, step charts, memory timeline, tables; what the window shows
//     painted), and to 'trainscope:drawn' (the cards off screen laid out and painted too);
//   - /api/docs, to its 'trainscope:ready' mark (every operation listed);
//   - the runs page /.
// With COPIES=N (N > 0), also a run of N copies of the V100 fixture made by
// bench/make_big_trace.py (10 copies: 2.16 M events, 268 k memory events) and its
// run page. Reports each page's median, min and max (ms from navigation), and the
// bytes the run page read. Target: the run page and /api/docs under 1 s.
//   node bench/page_load.mjs          (needs build/trainscope-server, web/node_modules)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { launchBrowser, newPage, repoRoot, startServer, upload } from '../tests/browser/harness.mjs';

const copies = +(process.env.COPIES || 0);
const runs = +(process.env.RUNS || 5);
const train = path.join(repoRoot, 'tests/fixtures/gpu/train');

const srv = await startServer();
try {
	let events = 0;
	for (const f of [...fs.readdirSync(train).filter((x) => x.includes('.pt.trace.json')).sort(), 'train.memory.raw.json.gz',
		'train.snapshot.pickle'])
		events += (await upload(srv.base, 'train', path.join(train, f))).events;
	console.log(`run train: ${events.toLocaleString('en-US')} events in 10 traces, a memory timeline and a snapshot`);
	const pages = [['/runs/train', 'run page (125 k events) to ready'], ['/api/docs', '/api/docs to ready'], ['/', 'runs page']];
	if (copies > 0) {
		const made = JSON.parse(execFileSync('python3', [path.join(repoRoot, 'bench/make_big_trace.py'), '--copies', String(copies),
			'--out', path.join(repoRoot, 'bench/out')], { encoding: 'utf8' }).trim().split('\n').pop());
		const t0 = Date.now();
		const art = await upload(srv.base, 'big', made.gz);
		console.log(`uploaded ${path.basename(made.gz)}: ${art.events.toLocaleString('en-US')} events in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
		pages.push(['/runs/big', `run page (${(art.events / 1e6).toFixed(2)} M events) to ready`]);
	}
	const browser = await launchBrowser();
	const time = async (url) => {
		const page = await newPage(browser);
		// Told by the page when #app or #docs gets data-ready (an observer of that attribute, set up
		// by an init script, calls a binding), so that nothing of playwright's runs in the page while
		// it loads: page.evaluate() or waitForSelector() inject playwright's script into the page
		// then (60 ms of its main thread in a performance trace), and waitForSelector checks the
		// element's box each frame (a layout each time).
		let told;
		const isReady = new Promise((resolve) => { told = resolve; });
		await page.exposeBinding('trainscopeReadyForBench', () => told());
		await page.addInitScript(() => new MutationObserver((_, mo) => {
			if (document.querySelector('#app[data-ready], #docs[data-ready]')) {
				mo.disconnect();
				window.trainscopeReadyForBench();
			}
		}).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-ready'] }));
		await page.goto(srv.base + url, { waitUntil: 'commit' });
		let timer;
		await Promise.race([isReady, new Promise((resolve, reject) => {
			timer = setTimeout(() => reject(new Error(`${url}: no data-ready after 60 s`)), 60000);
		})]);
		clearTimeout(timer);
		const [ms, all, bytes] = await page.evaluate(() => [performance.getEntriesByName('trainscope:ready')[0]?.startTime,
			performance.getEntriesByName('trainscope:drawn')[0]?.startTime,
			performance.getEntriesByType('resource').reduce((a, e) => a + e.transferSize, 0)]);
		if (page.problems.length)
			throw new Error(`${url}: ${page.problems.join('; ')}`);
		if (ms == null)
			throw new Error(`${url}: no trainscope:ready mark`);
		await page.context().close();
		return [ms, all ?? ms, bytes];
	};
	// The first read of a run derives it (its analyses; the server does that once a run's uploads
	// pause, the harness's server only when read): one load of each run page pays that, not timed
	// with the others.
	for (const run of ['train', ...(copies > 0 ? ['big'] : [])])
		console.log(`/runs/${run}, its first load (the run derived then): ${(await time('/runs/' + run))[0].toFixed(0)} ms`);
	const times = new Map(pages.map(([url]) => [url, []])), drawn = new Map(pages.map(([url]) => [url, []]));
	const bytes = new Map();
	for (let i = 0; i < runs; i++)
		for (const [url] of pages) {
			const [ms, all, b] = await time(url);
			times.get(url).push(ms);
			drawn.get(url).push(all);
			bytes.set(url, b);
		}
	console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}, ` +
		'chromium headless, 1400x900, a new context (cold cache) per load');
	const line = (what, ms) => {
		const s = [...ms].sort((a, b) => a - b);
		return `${what}: median ${s[s.length >> 1].toFixed(0)} ms, min ${s[0].toFixed(0)}, max ${s[s.length - 1].toFixed(0)} ` +
			`(${ms.map((x) => x.toFixed(0)).join(', ')})`;
	};
	for (const [url, what] of pages) {
		console.log(`${line(what, times.get(url))}; ${(bytes.get(url) / 1024).toFixed(0)} KiB transferred`);
		if (url.startsWith('/runs/'))
			console.log(`  ${line('and the cards off screen drawn too (trainscope:drawn)', drawn.get(url))}`);
	}
	await browser.close();
} finally {
	await srv.stop();
}
