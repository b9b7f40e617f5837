// Bundles the dashboards: web/src/main.js (and the CSS it imports) through
// esbuild into web/dist/assets/app-HASH.{js,css}, the modules it loads with
// import() (a page each, the flame graph) and the code they share as
// assets/NAME-HASH.js chunks, and web/src/index.html into a shell per page
// (index.html, run.html, compare.html: PAGES below) pointing at them. With an
// argument, also writes that C file: every file of dist as a table entry
// (name, content type, the bytes, a gzip copy and a strong ETag from the
// SHA-256), which server/h_web.c serves, so trainscope-server needs no files
// at run time. Also web/src/docs.js (the API reference page, docs.html) and
// speedscope's built app (viewer/).
//
//   node web/build.mjs [OUT.c]
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
const TYPES = {
	'.html': 'text/html; charset=utf-8',
	'.js': 'text/javascript; charset=utf-8',
	'.css': 'text/css; charset=utf-8',
	'.woff2': 'font/woff2',
	'.png': 'image/png',
	'.ico': 'image/x-icon',
};
// The offline trace viewer: speedscope's built app as its package ships it
// (served at /viewer/, opened with #profileURL=blob:... by the run page).
const VIEWER = path.join(here, 'node_modules/speedscope/dist/release');
const VIEWER_FILES = /^(index\.html|speedscope-\w+\.(js|css)|SourceCodePro-[\w.-]+\.woff2|favicon-[\w-]+\.(png|ico))$/;

// d3-flame-graph's module imports its own stylesheet; main.js imports it into the one
// stylesheet instead (a stylesheet of a module loaded with import() is linked by nothing), so
// the module's import is made empty.
const flameCss = {
	name: 'flame-css',
	setup(b) {
		b.onResolve({ filter: /\.css$/ }, (args) => (args.importer.includes('/node_modules/d3-flame-graph/')
			? { path: args.path, namespace: 'flame-css' } : undefined));
		b.onLoad({ filter: /.*/, namespace: 'flame-css' }, () => ({ contents: '', loader: 'css' }));
	},
};

// uPlot makes an Intl.NumberFormat and an Intl.DateTimeFormat when its module is evaluated;
// the first Intl object of a page loads ICU's data, 30-290 ms in a fresh page on a busy 2-core
// machine. The pages format every number shown themselves (util.js), so those two are made on
// first use instead. The build stops if uPlot's text no longer has them.
const UPLOT_LAZY = [
	["const numFormatter = new Intl.NumberFormat(domEnv ? nav.language : 'en-US');\nconst fmtNum = val => numFormatter.format(val);",
		"let numFormatter;\nconst fmtNum = val => (numFormatter ||= new Intl.NumberFormat(domEnv ? nav.language : 'en-US')).format(val);"],
	['const localTz = new Intl.DateTimeFormat().resolvedOptions().timeZone;', 'let localTz;'],
	['else if (tz == localTz)', 'else if (tz == (localTz ||= new Intl.DateTimeFormat().resolvedOptions().timeZone))'],
];
const uplotLazy = {
	name: 'uplot-lazy-intl',
	setup(b) {
		b.onLoad({ filter: /node_modules\/uplot\/dist\/uPlot\.esm\.js$/ }, (args) => {
			let text = fs.readFileSync(args.path, 'utf8');
			for (const [from, to] of UPLOT_LAZY) {
				if (!text.includes(from))
					throw new Error(`${args.path}: no "${from.split('\n')[0]}" (web/build.mjs UPLOT_LAZY)`);
				text = text.replace(from, to);
			}
			return { contents: text, loader: 'js' };
		});
	},
};

const result = await esbuild.build({
	entryPoints: { app: path.join(here, 'src/main.js'), docs: path.join(here, 'src/docs.js') },
	bundle: true,
	// the pages' modules, loaded by main.js with import(), and what they share as chunks
	splitting: true,
	minify: true,
	format: 'esm',
	target: 'es2020',
	outdir: path.join(dist, 'assets'),
	entryNames: '[name]-[hash]',
	chunkNames: '[name]-[hash]',
	legalComments: 'none',
	plugins: [flameCss, uplotLazy],
	absWorkingDir: here,
	metafile: true,
	write: false,
	logLevel: 'warning',
});

// name (as served: "index.html", "assets/app-HASH.js") -> bytes
const files = new Map();
for (const f of result.outputFiles)
	if (f.contents.length || !f.path.endsWith('.css'))	/* no empty stylesheet for the modules import() loads */
		files.set(path.relative(dist, f.path), Buffer.from(f.contents));
const asset = (entry, ext) => [...files.keys()].find((n) => n.startsWith(`assets/${entry}-`) && n.endsWith(ext));
// A module's output and every module it imports statically, transitively ("assets/NAME.js").
const outputs = result.metafile.outputs;
const output = (src) => Object.keys(outputs).find((o) => outputs[o].entryPoint === src && o.endsWith('.js'));
const statics = (out, seen = new Set()) => {
	if (!seen.has(out)) {
		seen.add(out);
		for (const i of outputs[out].imports)
			if (i.kind === 'import-statement')
				statics(i.path, seen);
	}
	return seen;
};
// Each page's shell: the entry's script and stylesheet, and a modulepreload link for each module
// the page will load (the entry's imports, the page's module that main.js import()s, and theirs),
// so that the browser fetches them all at once instead of one import after another.
// server/h_web.c answers run.html at /runs/{run}, compare.html at /compare, index.html at /.
const PAGES = [['index.html', 'app', 'src/index.html', 'src/runs.js'], ['run.html', 'app', 'src/index.html', 'src/run.js'],
	['compare.html', 'app', 'src/index.html', 'src/compare.js'], ['docs.html', 'docs', 'src/docs.html', null]];
for (const [page, entry, template, module] of PAGES) {
	const js = output(entry === 'app' ? 'src/main.js' : 'src/docs.js');
	const preload = new Set([...statics(js), ...(module ? statics(output(module)) : [])]);
	preload.delete(js);
	const html = fs.readFileSync(path.join(here, template), 'utf8')
		.replace('%CSS%', '/' + asset(entry, '.css'))
		.replace('%JS%', '/' + asset(entry, '.js'))
		.replace('%PRELOAD%\n', [...preload].map((o) => `<link rel="modulepreload" href="/${path.relative('dist', o)}">\n`).join(''));
	files.set(page, Buffer.from(html));
}
for (const name of fs.readdirSync(VIEWER).filter((n) => VIEWER_FILES.test(n)))
	files.set('viewer/' + name, fs.readFileSync(path.join(VIEWER, name)));

fs.rmSync(dist, { recursive: true, force: true });
for (const [name, bytes] of files) {
	fs.mkdirSync(path.dirname(path.join(dist, name)), { recursive: true });
	fs.writeFileSync(path.join(dist, name), bytes);
}

if (process.argv[2]) {
	// Bytes as adjacent string literals (octal escapes for all but plain
	// printable ASCII): a 16 MB table compiles several times faster than as
	// a list of 0x.. initialisers. The array's size is given, so no NUL is added.
	const lit = (b) => {
		const rows = [];
		let row = '';
		for (const x of b) {
			row += x >= 0x20 && x < 0x7f && x !== 0x22 && x !== 0x5c && x !== 0x3f
				? String.fromCharCode(x) : '\\' + x.toString(8).padStart(3, '0');
			if (row.length >= 96) { rows.push('"' + row + '"'); row = ''; }
		}
		if (row || !rows.length) rows.push('"' + row + '"');
		return rows.join('\n');
	};
	const out = ['/* generated by web/build.mjs from web/src: do not edit */', '#include "web_assets.h"', ''];
	const entries = [];
	[...files.keys()].sort().forEach((name, i) => {
		const bytes = files.get(name);
		const gz = zlib.gzipSync(bytes, { level: 9 });
		const etag = '"' + crypto.createHash('sha256').update(bytes).digest('hex').slice(0, 32) + '"';
		out.push(`static const unsigned char raw${i}[${bytes.length}] =\n${lit(bytes)};`);
		out.push(`static const unsigned char gz${i}[${gz.length}] =\n${lit(gz)};`);
		entries.push(`\t{ ${JSON.stringify(name)}, ${JSON.stringify(TYPES[path.extname(name)])}, ` +
			`raw${i}, sizeof(raw${i}), gz${i}, sizeof(gz${i}), ${JSON.stringify(etag)} },`);
	});
	out.push('const struct web_asset web_assets[] = {', ...entries, '};');
	out.push(`const size_t web_nassets = ${entries.length};`, '');
	fs.writeFileSync(process.argv[2] + '.tmp', out.join('\n'));
	fs.renameSync(process.argv[2] + '.tmp', process.argv[2]);
}
for (const [name, bytes] of files)
	console.log(`web: ${name} ${bytes.length} bytes`);
