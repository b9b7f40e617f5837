// A sortable table: click a header to sort by it (again to reverse).
//   const t = table({columns, rows, sort: 'key', desc: true, rowClass(row), top: 25, filter: true, fold(row)});
//   parent.append(t.el); t.setRows(newRows);
// A column: {key, label, num (right-aligned, sorts descending first),
// name (a long identifier: nameCell(), shortened to the column's width by shortName(), full on
// hover and on copy),
// value(row) (what shows and sorts; default row[key]), sortBy(row) (what sorts, when not the
// value), fmt(value, row) (text or a Node)}.
// top: show the first N rows and a "show all" button; filter: a box that keeps the rows
// whose name column holds the text; fold(row): rows folded away behind a button (unchanged ones).
// The table scrolls inside its card when its columns do not fit; the name column takes the
// width that is left and gives it up first, so the figures stay in view.
import { fmtInt, h } from './util.js';

export function table({ columns, rows, sort, desc = true, rowClass, empty = 'Nothing here.', top = null, filter = false, fold = null,
	foldLabel = 'unchanged' }) {
	const state = { key: sort, desc, rows, all: false, folded: true, q: '' };
	const thead = h('thead');
	const tbody = h('tbody');
	const more = h('div', { class: 'table-more' });
	const el = h('div', { class: 'table' });
	const wrap = h('div', { class: 'table-wrap' }, h('table', { class: 'data' }, thead, tbody));
	const col = (key) => columns.find((c) => c.key === key);
	const value = (c, row) => (c.value ? c.value(row) : row[c.key]);
	const nameCol = columns.find((c) => c.name);

	if (filter) {
		const box = h('input', { type: 'search', class: 'table-filter', placeholder: `Filter ${(nameCol?.label || 'rows').toLowerCase()}`,
			'aria-label': 'filter rows' });
		box.addEventListener('input', () => {
			state.q = box.value.trim().toLowerCase();
			render();
		});
		el.append(box);
	}
	el.append(wrap, more);

	function compare(a, b) {
		const c = col(state.key);
		const key = c.sortBy || ((row) => value(c, row));
		const va = key(a), vb = key(b);
		if (va == null || vb == null)
			return va == null ? (vb == null ? 0 : 1) : -1;	/* empty cells last either way */
		const r = typeof va === 'number' && typeof vb === 'number' ? va - vb : String(va).localeCompare(String(vb));
		return state.desc ? -r : r;
	}

	function cell(c, row) {
		const v = value(c, row);
		if (c.name)
			return h('td', { class: 'namecol' }, c.fmt ? c.fmt(v, row) : nameCell(v));
		return h('td', { class: c.num ? 'num' : c.cls || null }, c.fmt ? c.fmt(v, row) : v ?? '');
	}

	function render() {
		thead.replaceChildren(h('tr', null, columns.map((c) => h('th', {
			class: [c.num ? 'num' : '', c.name ? 'namecol' : '', c.key === state.key ? (state.desc ? 'sorted desc' : 'sorted asc') : '']
				.join(' ').trim() || null,
			title: c.sortable === false ? null : 'sort by ' + c.label,
			onclick: c.sortable === false ? null : () => {
				state.desc = state.key === c.key ? !state.desc : !!c.num;
				state.key = c.key;
				render();
			},
		}, c.label))));
		let list = state.key ? [...state.rows].sort(compare) : state.rows;
		if (state.q && nameCol)
			list = list.filter((r) => String(value(nameCol, r) ?? '').toLowerCase().includes(state.q));
		const folded = fold && state.folded ? list.filter(fold) : [];
		if (folded.length)
			list = list.filter((r) => !fold(r));
		const total = list.length;
		if (top && !state.all && list.length > top)
			list = list.slice(0, top);
		tbody.replaceChildren(...(list.length ? list.map((row) => h('tr', { class: rowClass ? rowClass(row) : null },
			columns.map((c) => cell(c, row)))) : [h('tr', null, h('td', { class: 'muted', colspan: columns.length,
			text: state.q ? 'No row matches the filter.' : folded.length ? `Every row is ${foldLabel}.` : empty }))]));
		fitNames(el);
		more.replaceChildren(...[
			list.length < total && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'all',
				onclick: () => { state.all = true; render(); } }, `Show all ${fmtInt(total)}`),
			top && state.all && total > top && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'top',
				onclick: () => { state.all = false; render(); } }, `Top ${top} only`),
			folded.length && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'unfold',
				onclick: () => { state.folded = false; render(); } }, `Show ${fmtInt(folded.length)} ${foldLabel}`),
			fold && !state.folded && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'fold',
				onclick: () => { state.folded = true; render(); } }, `Hide ${foldLabel}`),
		].filter(Boolean));
	}

	render();
	// the names are fitted again when the table's width changes (and once it is first laid out)
	if (nameCol && typeof ResizeObserver === 'function') {
		let width = 0;
		new ResizeObserver(() => {
			if (wrap.clientWidth !== width) {
				width = wrap.clientWidth;
				fitNames(el);
			}
		}).observe(wrap);
	}
	return {
		el,
		setRows(rows) {
			state.rows = rows;
			render();
		},
	};
}

// A C++ kernel, operator or frame name as it reads in a table cell, at most about max
// characters, never losing the function name (the part outside every <...> and (...)):
//   shortName('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
//     std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)', 50)
//   === 'at::native::vectorized_elementwise_kernel<4, …>(…)'
// A name without brackets is returned as it is (a long identifier too: the cell wraps it).
// One with brackets loses its "void " return type, "(anonymous namespace)::" and
// "::operator()() const", and its lambdas read λ. While it is longer than max: the
// namespaces inside its brackets go, then the contents of its parameter lists, then of its
// deepest template arguments, then of shallower ones, each cut template keeping the arguments
// that fit (those with brackets of their own first: "<4, FillFunctor<float>, …>").
export function shortName(name, max = 80) {
	const full = String(name ?? '');
	if (!/[<(]/.test(full))
		return full;
	const s = full.replace(/^void /, '').replace(/\(anonymous namespace\)::/g, '')
		.replace(/\{lambda\((?:[^(){}]|\([^(){}]*\))*\)#\d+\}/g, 'λ').replace(/::operator\(\)\(\) const/g, '')
		.replace(/(::λ)+/g, '::λ').replace(/ >/g, '>');
	const tree = parseBrackets(s);
	if (!tree || s.length <= max)
		return s;
	const depth = (list) => Math.max(0, ...list.map((x) => (typeof x === 'string' ? 0 : 1 + depth(x.kids))));
	// a name that is all brackets ("<built-in method ...>") keeps its outermost ones' contents
	const least = tree.some((x) => typeof x === 'string' && /\w/.test(x)) ? 0 : 1;
	let out = renderBrackets(tree, 0, Infinity, false);
	for (let limit = depth(tree); limit >= least && out.length > max; limit--) {
		// once without the cut brackets' arguments, then with as many as the room left holds
		// (less what the "…" between kept ones take, when they overflow it)
		let room = max - renderBrackets(tree, 0, limit, true).length;
		out = renderBrackets(tree, 0, limit, true, { left: room });
		for (let k = 0; k < 4 && out.length > max && room > 0; k++) {
			room -= out.length - max;
			out = renderBrackets(tree, 0, limit, true, { left: room });
		}
	}
	return out;
}

// "a<b, c(d)>e" as ['a', {open: '<', close: '>', kids: ['b, c', {open: '(', ...}]}, 'e'];
// null when the brackets do not pair up (the name is then left as it is).
function parseBrackets(s) {
	const root = [], stack = [root];
	let text = '';
	const flush = () => {
		if (text)
			stack.at(-1).push(text);
		text = '';
	};
	for (const c of s) {
		if (c === '<' || c === '(') {
			flush();
			const g = { open: c, close: c === '<' ? '>' : ')', kids: [] };
			stack.at(-1).push(g);
			stack.push(g.kids);
		} else if (c === '>' || c === ')') {
			if (stack.length === 1)
				return null;
			flush();
			stack.pop();
		} else {
			text += c;
		}
	}
	flush();
	return stack.length === 1 ? root : null;
}

const unqualify = (t) => t.replace(/(^|[^\w:])(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~λ])/g, '$1');

// A bracket's contents as its arguments: lists of items split at its own commas.
function splitArgs(kids) {
	const args = [[]];
	for (const k of kids) {
		if (typeof k !== 'string') {
			args.at(-1).push(k);
			continue;
		}
		k.split(',').forEach((piece, i) => {
			if (i)
				args.push([]);
			if (piece.trim())
				args.at(-1).push(piece.trim());
		});
	}
	return args;
}

// The tree as text; names inside brackets lose their namespaces. Brackets nested deeper than
// limit, and parameter lists when params is set, are cut: a template's arguments stay where they
// fit in budget.left characters (an argument's own brackets cut by plainArgs()), "…" for those
// that do not.
function renderBrackets(list, depth, limit, params, budget = { left: 0 }) {
	return list.map((x) => {
		if (typeof x === 'string')
			return depth ? unqualify(x) : x;
		if (!x.kids.length || (depth < limit && !(params && x.open === '(')))
			return x.open + renderBrackets(x.kids, depth + 1, limit, params, budget) + x.close;
		// the arguments that have brackets of their own first (the functors and types that tell
		// kernels apart), then the plain ones (float, 4), each where it fits; in their order, a
		// "…" for those left out
		const args = splitArgs(x.kids);
		const plain = [...args.keys()].filter((k) => args[k].every((a) => typeof a === 'string'));
		const kept = [];
		for (const i of x.open === '<' ? [...args.keys()].filter((k) => !plain.includes(k)).concat(plain) : []) {
			const text = args[i].map((k) => (typeof k === 'string' ? unqualify(k) : plainArgs(k))).join('');
			if (text.length + 2 > budget.left)
				continue;
			kept[i] = text;
			budget.left -= text.length + 2;
		}
		const shown = args.map((a, i) => kept[i] ?? '…').filter((t, i, all) => t !== '…' || all[i - 1] !== '…');
		return x.open + shown.join(', ') + x.close;
	}).join('');
}

// A bracket inside a kept argument, cut short: its leading plain arguments (words, numbers)
// up to 24 characters, then its last argument (the functor of "BinaryFunctor<float, float,
// float, MulFunctor<float>>") up to 32, with the brackets in it cut the same way.
function plainArgs(x) {
	if (x.open !== '<')
		return x.kids.length ? '(…)' : '()';
	const args = splitArgs(x.kids);
	const plain = (arg) => arg.length === 1 && typeof arg[0] === 'string';
	const shown = args.map(() => null);
	let used = 0;
	for (const [i, arg] of args.entries()) {
		if (!plain(arg) || used + arg[0].length > 24)
			break;
		shown[i] = unqualify(arg[0]);
		used += arg[0].length + 2;
	}
	const last = args.length - 1;
	if (shown[last] == null) {
		const text = args[last].map((k) => (typeof k === 'string' ? unqualify(k) : plainArgs(k))).join('');
		if (text.length <= 32)
			shown[last] = text;
	}
	return x.open + shown.map((t) => t ?? '…').filter((t, i, all) => t !== '…' || all[i - 1] !== '…').join(', ') + x.close;
}

// The width of a character of a name cell's font, measured once.
let charPx = 0;
function charWidth() {
	if (!charPx) {
		const probe = h('span', { class: 'name offscreen' }, h('span', { class: 'name-text', text: '0'.repeat(40) }));
		document.body.append(probe);
		charPx = probe.firstChild.getBoundingClientRect().width / 40 || 7.5;
		probe.remove();
	}
	return charPx;
}

// The table's name cells shortened to what their column holds (at least 40 characters;
// a name that still does not fit wraps), by shortName().
function fitNames(root) {
	const first = root.querySelector('tbody .name');
	if (!first || !first.isConnected || !first.clientWidth)
		return;
	const copyBtn = first.querySelector('.copy');
	const chars = Math.max(40, Math.floor((first.clientWidth - (copyBtn?.offsetWidth ?? 0) - 8) / charWidth()));
	for (const t of root.querySelectorAll('tbody .name > .name-text'))
		t.textContent = shortName(t.parentNode.dataset.full, chars);
}

async function copy(text, btn) {
	try {
		await navigator.clipboard.writeText(text);
	} catch {
		// http on another host has no clipboard API: the old way
		const ta = h('textarea', { class: 'offscreen' }, text);
		document.body.append(ta);
		ta.select();
		document.execCommand('copy');
		ta.remove();
	}
	btn.classList.add('copied');
	setTimeout(() => btn.classList.remove('copied'), 1200);
}

// A name cell: the name shortened by shortName() to max characters (in a table's name
// column, to what the column holds: fitNames), wrapped when it still does not fit; the full
// name on hover (title), in data-full, in the copy button and when the cell's text is copied.
export function nameCell(v, max = 80) {
	if (v == null || v === '')
		return h('span', { class: 'muted', text: '–' });
	const full = String(v);
	// its label comes from the style sheet, so that the cell's text is the name alone
	const btn = h('button', { type: 'button', class: 'copy', title: 'copy the full name', 'aria-label': 'copy the full name' });
	btn.addEventListener('click', (e) => {
		e.stopPropagation();
		copy(full, btn);
	});
	const el = h('span', { class: 'name', title: full, 'data-full': full }, h('span', { class: 'name-text', text: shortName(full, max) }), btn);
	// a selection inside the one name copies the full name, not the shortened one
	el.addEventListener('copy', (e) => {
		const sel = document.getSelection();
		if (!sel || !el.contains(sel.anchorNode) || !el.contains(sel.focusNode))
			return;
		e.clipboardData.setData('text/plain', full);
		e.preventDefault();
	});
	return el;
}
