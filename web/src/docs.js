// The API reference (/api/docs): schemas/openapi.yaml as the server serves it (GET
// /api/v1/openapi.yaml), read by yaml.js and drawn here, no library, so the page is
// interactive as soon as the file is read (Swagger UI took seconds on a small machine). An
// operation opens to its description, parameters, request body and responses; a schema
// opens to its JSON (the api/*.schema.json files it refers to are fetched then); a GET
// has "Try it", which sends the request with the page's read token and shows the answer.
// Works offline: nothing comes from another origin.
import './docs.css';
import { parseYaml } from './yaml.js';

const TOKEN_KEY = 'trainscope.token';
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const root = document.getElementById('docs');

function h(tag, attrs, ...kids) {
	const el = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (v == null || v === false)
			continue;
		if (k.startsWith('on'))
			el.addEventListener(k.slice(2), v);
		else if (k === 'text')
			el.textContent = v;
		else
			el.setAttribute(k, v === true ? '' : v);
	}
	for (const kid of kids.flat(Infinity))
		if (kid != null && kid !== false)
			el.append(kid instanceof Node ? kid : String(kid));
	return el;
}

// A $ref inside the file ("#/components/parameters/run"), followed.
function local(spec, x) {
	let v = x;
	for (let n = 0; v && typeof v.$ref === 'string' && v.$ref.startsWith('#/') && n < 10; n++)
		v = v.$ref.slice(2).split('/').reduce((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
	return v ?? x;
}

// The schema's references resolved, fetching the api/*.schema.json files they name
// (each once); a reference to a schema already being resolved stays a $ref.
const files = new Map();
async function resolve(spec, schema, seen = new Set()) {
	if (Array.isArray(schema))
		return Promise.all(schema.map((s) => resolve(spec, s, seen)));
	if (!schema || typeof schema !== 'object')
		return schema;
	if (typeof schema.$ref === 'string') {
		const ref = schema.$ref;
		if (seen.has(ref))
			return { $ref: ref };
		let target;
		if (ref.startsWith('#/')) {
			target = local(spec, schema);
		} else {
			const [file, pointer = ''] = ref.split('#');
			if (!files.has(file))
				files.set(file, fetch('/api/v1/' + file).then((r) => (r.ok ? r.json() : { description: `${file}: ${r.status}` })));
			const doc = await files.get(file);
			target = pointer.split('/').filter(Boolean).reduce((o, k) => o?.[k], doc) ?? doc;
			// references inside that file are relative to it
			target = JSON.parse(JSON.stringify(target).replace(/"\$ref":"#/g, `"$ref":"${file}#`));
		}
		return resolve(spec, target, new Set([...seen, ref]));
	}
	const out = {};
	for (const [k, v] of Object.entries(schema))
		out[k] = await resolve(spec, v, seen);
	return out;
}

// "string, enum: cpu | gpu, default cpu": a schema in a table cell.
function brief(s) {
	if (!s)
		return '';
	const parts = [[s.type].flat().filter(Boolean).join(' or ') || (s.$ref ? s.$ref.split('/').pop() : 'any')];
	if (s.enum)
		parts.push('one of ' + s.enum.join(' | '));
	if (s.pattern)
		parts.push('pattern ' + s.pattern);
	if (s.minimum != null || s.maximum != null)
		parts.push(`${s.minimum ?? ''}..${s.maximum ?? ''}`);
	if (s.default != null)
		parts.push('default ' + s.default);
	return parts.join(', ');
}

// A schema, opened: its JSON with references resolved.
function schemaBox(spec, schema, label) {
	const pre = h('pre', { class: 'schema' });
	const d = h('details', { class: 'schema-box' }, h('summary', null, label, ' ', h('code', { text: brief(local(spec, schema)) })), pre);
	d.addEventListener('toggle', async () => {
		if (!d.open || pre.textContent)
			return;
		pre.textContent = 'reading…';
		try {
			pre.textContent = JSON.stringify(await resolve(spec, schema), null, 2);
		} catch (err) {
			pre.textContent = 'could not read it: ' + err.message;
		}
	});
	return d;
}

function content(spec, c) {
	return Object.entries(c || {}).map(([type, m]) => (m?.schema ? schemaBox(spec, m.schema, type) : h('div', null, h('code', { text: type }))));
}

// Sends the GET with its parameters, the page's read token and shows what came back.
function tryIt(path, params) {
	const inputs = params.filter((p) => p.in === 'path' || p.in === 'query').map((p) => {
		const input = h('input', { name: p.name, placeholder: p.schema?.default != null ? String(p.schema.default) : (p.required ? 'required' : ''),
			'aria-label': p.name });
		return { p, input, el: h('label', null, h('span', { text: p.name + (p.required ? ' *' : '') }), input) };
	});
	const out = h('pre', { class: 'answer', hidden: true });
	const url = h('code', { class: 'url' });
	const send = async (e) => {
		e.preventDefault();
		let u = path;
		const q = new URLSearchParams();
		for (const { p, input } of inputs) {
			const v = input.value.trim();
			if (p.in === 'path')
				u = u.replace(`{${p.name}}`, encodeURIComponent(v));
			else if (v)
				q.set(p.name, v);
		}
		u += q.toString() ? '?' + q : '';
		url.textContent = 'GET ' + u;
		out.hidden = false;
		out.textContent = 'sending…';
		const token = localStorage.getItem(TOKEN_KEY);
		try {
			const r = await fetch(u, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
			const type = r.headers.get('content-type') || '';
			let body = await r.text();
			if (type.includes('json'))
				try { body = JSON.stringify(JSON.parse(body), null, 2); } catch { /* as it came */ }
			const cut = body.length > 20000;
			out.textContent = `${r.status} ${r.statusText} · ${type}\n\n${cut ? body.slice(0, 20000) + `\n… (${body.length.toLocaleString('en-US')} characters in all)` : body}`;
		} catch (err) {
			out.textContent = 'failed: ' + err.message;
		}
	};
	return h('form', { class: 'try', onsubmit: send }, h('h4', { text: 'Try it' }), h('div', { class: 'inputs' }, inputs.map((x) => x.el)),
		h('div', null, h('button', { type: 'submit', text: 'Send' }), ' ', url), out);
}

function operation(spec, path, method, op, shared) {
	const params = [...(shared || []), ...(op.parameters || [])].map((p) => local(spec, p));
	const body = h('div', { class: 'op-body' });
	const d = h('details', { class: 'op', id: `${method}-${path}`, 'data-method': method, 'data-path': path },
		h('summary', null, h('span', { class: 'method ' + method, text: method.toUpperCase() }), h('code', { class: 'path', text: path }),
			h('span', { class: 'summary', text: op.summary || '' })), body);
	// drawn when opened
	d.addEventListener('toggle', () => {
		if (!d.open || body.childElementCount)
			return;
		const rb = op.requestBody && local(spec, op.requestBody);
		body.append(...[
			op.description && h('p', { class: 'desc', text: op.description }),
			op.security?.length && h('p', { class: 'note', text: 'Needs a write token when the server has tokens (Authorization: Bearer TOKEN).' }),
			params.length && h('h4', { text: 'Parameters' }),
			params.length && h('table', null, h('thead', null, h('tr', null, ['Name', 'In', 'Schema', 'Description'].map((t) => h('th', { text: t })))),
				h('tbody', null, params.map((p) => h('tr', null, h('td', null, h('code', { text: p.name }), p.required ? h('span', { class: 'req', text: ' required' }) : null),
					h('td', { text: p.in }), h('td', null, h('code', { text: brief(p.schema) })), h('td', { text: p.description || '' }))))),
			rb && h('h4', { text: 'Request body' + (rb.required ? ' (required)' : '') }),
			rb?.description && h('p', { class: 'desc', text: rb.description }),
			rb && content(spec, rb.content),
			h('h4', { text: 'Responses' }),
			h('table', { class: 'responses' }, h('tbody', null, Object.entries(op.responses || {}).map(([code, r]) => {
				const rr = local(spec, r);
				return h('tr', null, h('td', null, h('code', { text: code })), h('td', null, h('div', { text: rr.description || '' }), content(spec, rr.content)));
			}))),
			method === 'get' && tryIt(path, params)].flat().filter((x) => x instanceof Node));
	});
	return d;
}

async function main() {
	let spec;
	try {
		const r = await fetch('/api/v1/openapi.yaml');
		if (!r.ok)
			throw new Error(`${r.status} ${r.statusText}`);
		spec = parseYaml(await r.text());
	} catch (err) {
		root.replaceChildren(h('p', { class: 'error', text: 'Could not read /api/v1/openapi.yaml: ' + err.message }));
		return;
	}
	const ops = [];
	for (const [path, item] of Object.entries(spec.paths || {}))
		for (const m of METHODS.filter((x) => item[x]))
			ops.push(operation(spec, path, m, item[m], item.parameters));
	const filter = h('input', { type: 'search', class: 'filter', placeholder: 'Filter operations', 'aria-label': 'filter operations' });
	filter.addEventListener('input', () => {
		const q = filter.value.trim().toLowerCase();
		for (const op of ops)
			op.hidden = !!q && !op.textContent.toLowerCase().includes(q);
	});
	const intro = h('details', { class: 'intro' }, h('summary', { text: 'About this API' }), h('p', { class: 'desc', text: spec.info?.description || '' }));
	root.replaceChildren(h('h1', null, spec.info?.title || 'API', ' ', h('span', { class: 'version', text: 'version ' + (spec.info?.version ?? '') })),
		h('p', null, 'The operations of ', h('a', { href: '/api/v1/openapi.yaml', text: 'openapi.yaml' }),
			'; open one for its parameters, responses and schemas, and "Try it" on a GET.'),
		intro, filter, h('div', { class: 'ops' }, ops));
	// a link to an operation (#get-/api/v1/runs) opens it
	const target = location.hash ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
	if (target?.classList.contains('op')) {
		target.open = true;
		target.scrollIntoView();
	}
	// drawn: marked once the next frame is painted, as the dashboards are (util.js ready())
	requestAnimationFrame(() => setTimeout(() => {
		performance.mark('trainscope:ready');
		root.dataset.ready = '1';
	}));
}

main();
