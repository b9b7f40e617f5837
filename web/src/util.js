// Small DOM and formatting helpers shared by the pages.

// h('div', {class: 'x', onclick: f}, child, 'text', ...): an element. Attributes
// starting with "on" become listeners; null/false children are skipped.
export function h(tag, attrs, ...kids) {
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

export const DASH = '–';

// A row of buttons, one on: [[value, text]...]; onpick(value) on a click.
export function segmented(options, current, onpick) {
	return h('div', { class: 'segmented' }, options.map(([value, text]) =>
		h('button', { type: 'button', class: value === current ? 'on' : null, onclick: () => onpick(value), text })));
}

export function fmtNs(ns) {
	if (ns == null || Number.isNaN(ns))
		return DASH;
	const a = Math.abs(ns);
	if (a >= 1e9)
		return (ns / 1e9).toFixed(a >= 1e10 ? 1 : 2) + ' s';
	if (a >= 1e6)
		return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 1) + ' ms';
	if (a >= 1e3)
		return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 1) + ' µs';
	return Math.round(ns) + ' ns';
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function fmtBytes(b) {
	if (b == null || Number.isNaN(b))
		return DASH;
	let i = 0, v = Math.abs(b);
	while (v >= 1024 && i < UNITS.length - 1) {
		v /= 1024;
		i++;
	}
	return (b < 0 ? '-' : '') + (i ? v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) : v) + ' ' + UNITS[i];
}

export function fmtPct(x, digits = 1) {
	return x == null || Number.isNaN(x) ? DASH : (x * 100).toFixed(digits) + '%';
}

export function fmtSignedPct(p) {
	return p == null ? DASH : (p > 0 ? '+' : '') + p.toFixed(1) + '%';
}

// n as toLocaleString('en-US') writes it (a comma every three digits, at most three decimals)
// without Intl, whose first use in a page loads ICU's data: 30-290 ms in a fresh page on a busy
// 2-core machine, more than the rest of a table.
export function fmtInt(n) {
	if (n == null)
		return DASH;
	if (!Number.isFinite(n) || Math.abs(n) >= 1e15)
		return n.toLocaleString('en-US');
	const [int, frac] = String(Math.round(Math.abs(n) * 1000) / 1000).split('.');
	return (n < 0 ? '-' : '') + int.replace(/\B(?=(\d{3})+$)/g, ',') + (frac ? '.' + frac : '');
}

export function fmtDate(ns) {
	if (ns == null)
		return DASH;
	const d = new Date(ns / 1e6);
	const pad = (x) => String(x).padStart(2, '0');
	return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function card(title, ...body) {
	return h('section', { class: 'card' }, h('h2', { text: title }), ...body);
}

export function setCrumbs(...items) {
	const nav = document.getElementById('crumbs');
	nav.replaceChildren(...items.map((it) => (typeof it === 'string' ? h('span', { text: it }) : it)));
}

// Colours, colour-blind safe and fixed per category on every chart, and no colour
// used for two things: the memory categories in Okabe and Ito's palette, the step
// components in Paul Tol's "muted" one (style.css's swatches repeat them).
export const CATEGORIES = ['parameter', 'optimizer_state', 'input', 'temporary', 'activation', 'gradient',
	'autograd_detail', 'unknown'];
export const CATEGORY_COLORS = {
	parameter: '#0072b2', optimizer_state: '#e69f00', input: '#56b4e9', temporary: '#d55e00',
	activation: '#009e73', gradient: '#f0e442', autograd_detail: '#cc79a7', unknown: '#999999',
};
export const COMPONENTS = ['kernel', 'memcpy', 'memset', 'communication', 'runtime', 'dataloader', 'cpu', 'idle'];
export const COMPONENT_COLORS = {
	kernel: '#332288', memcpy: '#ddcc77', memset: '#999933', communication: '#117733', runtime: '#cc6677',
	dataloader: '#882255', cpu: '#44aa99', idle: '#dddddd',
};
export const label = (key) => key.replace(/_/g, ' ');

// The page is drawn: every card's content is in and what the window shows is painted (the
// 'trainscope:ready' mark, which bench/page_load.mjs times). The cards off screen, skipped by
// the style sheet until then, are laid out and painted next: once that frame is painted too,
// the 'trainscope:drawn' mark and #app[data-ready], which tests wait for.
const painted = (f) => requestAnimationFrame(() => setTimeout(f));
export function ready(app) {
	painted(() => {
		performance.mark('trainscope:ready');
		document.body.classList.add('drawn');
		painted(() => {
			performance.mark('trainscope:drawn');
			app.dataset.ready = '1';
		});
	});
}
