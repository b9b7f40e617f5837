#!/usr/bin/env node
// Page load on a big run: builds a trace of COPIES (default 10) copies of the
// V100 fixture with bench/make_big_trace.py (10 copies: 2.16 M events, 268 k
// memory events), uploads it to a fresh server, then loads its run page in
// headless chromium RUNS times (default 5), each in a new browser context (a
// cold cache), and reports the time from navigation to the charts being drawn
// (the page's 'trainscope:ready' mark: steps, memory timeline, tables,
// diagnosis all in), plus the runs page. Target: under 1 s.
//   node bench/page_load.mjs          (needs build/trainscope-server, web/node_modules)
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import { launchBrowser, newPage, repoRoot, startServer, upload } from '../tests/browser/harness.mjs';

const copies = +(process.env.COPIES || 10);
const runs = +(process.env.RUNS || 5);
const made = JSON.parse(execFileSync('python3', [path.join(repoRoot, 'bench/make_big_trace.py'), '--copies', String(copies),
	'--out', path.join(repoRoot, 'bench/out')], { encoding: 'utf8' }).trim().split('\n').pop());
const gz = made.gz;

const srv = await startServer();
try {
	const t0 = Date.now();
	const art = await upload(srv.base, 'big', gz);
	console.log(`uploaded ${path.basename(gz)}: ${art.events.toLocaleString('en-US')} events in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
	const mem = await (await fetch(`${srv.base}/api/v1/runs/big/memory?points=1`)).json();
	console.log(`memory timeline: ${mem.points_total.toLocaleString('en-US')} points`);

	const browser = await launchBrowser();
	const time = async (url) => {
		const page = await newPage(browser);
		await page.goto(srv.base + url);
		await page.waitForSelector('#app[data-ready], table.data tbody tr', { timeout: 60000 });
		const ms = await page.evaluate(() => performance.getEntriesByName('trainscope:ready')[0]?.startTime ?? performance.now());
		if (page.problems.length)
			throw new Error(`${url}: ${page.problems.join('; ')}`);
		await page.context().close();
		return ms;
	};
	const report = (what, ms) => {
		const s = [...ms].sort((a, b) => a - b);
		console.log(`${what}: median ${s[s.length >> 1].toFixed(0)} ms, min ${s[0].toFixed(0)}, max ${s[s.length - 1].toFixed(0)} ` +
			`(${ms.map((x) => x.toFixed(0)).join(', ')})`);
	};
	const page = [], list = [];
	for (let i = 0; i < runs; i++) {
		page.push(await time('/runs/big'));
		list.push(await time('/'));
	}
	console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, chromium headless, 1400x900, a new context (cold cache) per load`);
	report('run page to charts drawn', page);
	report('runs page', list);
	await browser.close();
} finally {
	await srv.stop();
}
