// Browser test harness: a real trainscope-server on a free loopback port with a
// temporary database, fixture uploads, and Debian's chromium driven by
// playwright-core (from web/node_modules; npm cannot download browsers here).
// Used by tests/browser/*.test.mjs and bench/page_load.mjs.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { freePort } from '../lib/free_port.mjs';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const fixturesDir = path.resolve(process.env.FIXTURES_DIR || path.resolve(repoRoot, '../shared/fixtures'));
const { chromium } = createRequire(path.join(repoRoot, 'web/package.json'))('playwright-core');

// Start build/trainscope-server (BUILD_DIR, else "build"); resolves to {base, stop()}.
// args: more command-line arguments (--token-file FILE). Runs are derived by the reads the tests make,
// not by the server once their uploads pause (--derive-quiet 0; args may set it again).
export async function startServer(buildDir = process.env.BUILD_DIR || 'build', args = []) {
	const bin = path.resolve(repoRoot, buildDir, 'trainscope-server');
	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trainscope-browser-'));
	const port = await freePort();
	const base = `http://127.0.0.1:${port}`;
	let log = '', exited = false;
	const proc = spawn(bin, ['--listen', `127.0.0.1:${port}`, '--db', path.join(tmp, 't.db'), '--log-level', 'warn',
		'--derive-quiet', '0', ...args],
		{ stdio: ['ignore', 'ignore', 'pipe'] });
	proc.stderr.on('data', (d) => { log = (log + d).slice(-8000); });
	proc.on('exit', () => { exited = true; });
	const stop = async () => {
		if (!exited) {
			proc.kill('SIGTERM');
			await new Promise((r) => (exited ? r() : proc.on('exit', r)));
		}
		fs.rmSync(tmp, { recursive: true, force: true });
	};
	process.on('exit', () => exited || proc.kill('SIGKILL'));
	for (let until = Date.now() + 30000; Date.now() < until && !exited;) {
		try {
			if ((await fetch(`${base}/healthz`)).ok)
				return { base, stop, log: () => log };
		} catch { /* not yet */ }
		await new Promise((r) => setTimeout(r, 100));
	}
	await stop();
	throw new Error(`${bin} did not start: ${log}`);
}

// Upload a file (a path, relative to the fixtures) to run; resolves to the artifact.
export async function upload(base, run, file, query = 'rank=0', headers = {}) {
	const body = fs.readFileSync(path.isAbsolute(file) ? file : path.join(fixturesDir, file));
	const r = await fetch(`${base}/api/v1/runs/${run}/artifacts?${query}&name=${path.basename(file)}`, { method: 'POST', body, headers });
	if (r.status !== 201 && r.status !== 200)
		throw new Error(`upload ${file} to ${run}: ${r.status} ${await r.text()}`);
	return (await r.json()).artifact;
}

export async function patchRun(base, run, body) {
	const r = await fetch(`${base}/api/v1/runs/${run}`, { method: 'PATCH', body: JSON.stringify(body),
		headers: { 'Content-Type': 'application/json' } });
	if (!r.ok)
		throw new Error(`PATCH ${run}: ${r.status} ${await r.text()}`);
}

export function launchBrowser() {
	return chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu'] });
}

// A page whose console errors, uncaught exceptions, failed requests and 4xx/5xx
// answers are collected in page.problems.
export async function newPage(browser, viewport = { width: 1400, height: 900 }) {
	const ctx = await browser.newContext({ viewport, deviceScaleFactor: 1 });
	const page = await ctx.newPage();
	page.problems = [];
	page.on('console', (m) => m.type() === 'error' && page.problems.push(`console: ${m.text()}`));
	page.on('pageerror', (e) => page.problems.push(`exception: ${e.message}`));
	page.on('requestfailed', (r) => page.problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
	page.on('response', (r) => r.status() >= 400 && page.problems.push(`${r.status()}: ${r.url()}`));
	return page;
}

// How many pixels of the canvases under selector are close to colour [r, g, b]
// (fills are drawn with some transparency, so a tolerance).
export function colorPixels(page, selector, [r, g, b], tol = 40) {
	return page.$$eval(selector, (canvases, [r, g, b, tol]) => {
		let n = 0;
		for (const c of canvases) {
			const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
			for (let i = 0; i < d.length; i += 4)
				if (d[i + 3] > 0 && Math.abs(d[i] - r) < tol && Math.abs(d[i + 1] - g) < tol && Math.abs(d[i + 2] - b) < tol)
					n++;
		}
		return n;
	}, [r, g, b, tol]);
}

export function screenshotDir(buildDir = process.env.BUILD_DIR || 'build') {
	const dir = path.resolve(repoRoot, buildDir, 'browser');
	fs.mkdirSync(dir, { recursive: true });
	return dir;
}
