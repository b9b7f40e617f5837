// A sortable table: click a header to sort by it (again to reverse).
//   const t = table({columns, rows, sort: 'key', desc: true, rowClass(row), top: 25, filter: true, fold(row)});
//   parent.append(t.el); t.setRows(newRows);
// A column: {key, label, num (right-aligned, sorts descending first),
// name (a long identifier: shortened in the middle, full on hover, a copy button),
// value(row) (what shows and sorts; default row[key]), sortBy(row) (what sorts, when not the
// value), fmt(value, row) (text or a Node)}.
// top: show the first N rows and a "show all" button; filter: a box that keeps the rows
// whose name column holds the text; fold(row): rows folded away behind a button (unchanged ones).
// The table scrolls inside its card when its columns do not fit; the name column takes the
// width that is left and gives it up first, so the figures stay in view.
import { h } from './util.js';

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
		more.replaceChildren(...[
			list.length < total && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'all',
				onclick: () => { state.all = true; render(); } }, `Show all ${total.toLocaleString('en-US')}`),
			top && state.all && total > top && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'top',
				onclick: () => { state.all = false; render(); } }, `Top ${top} only`),
			folded.length && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'unfold',
				onclick: () => { state.folded = false; render(); } }, `Show ${folded.length.toLocaleString('en-US')} ${foldLabel}`),
			fold && !state.folded && h('button', { type: 'button', class: 'button small ghost', 'data-act': 'fold',
				onclick: () => { state.folded = true; render(); } }, `Hide ${foldLabel}`),
		].filter(Boolean));
	}

	render();
	return {
		el,
		setRows(rows) {
			state.rows = rows;
			render();
		},
	};
}

// A C++ or operator name as it reads best in a narrow cell: no "void " return
// type, no parameter list after the template arguments (it repeats them), no
// "(anonymous namespace)::", lambdas as λ, namespaces dropped inside the
// template arguments. "void at::native::vectorized_elementwise_kernel<4,
// at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, ...)"
// reads "at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3>>".
export function shortName(name) {
	let s = String(name ?? '');
	if (!/[<(]/.test(s) || s.length < 48)
		return s;
	s = s.replace(/^void /, '').replace(/\(anonymous namespace\)::/g, '')
		.replace(/::operator\(\)\(\) const/g, '').replace(/\{lambda\([^()]*\)#\d+\}/g, 'λ');
	// the trailing "(params)" after a template's closing ">"
	if (s.endsWith(')')) {
		let depth = 0, i = s.length - 1;
		for (; i >= 0; i--) {
			depth += s[i] === ')' ? 1 : s[i] === '(' ? -1 : 0;
			if (!depth)
				break;
		}
		if (i > 0 && /[>\w]\s*$/.test(s.slice(0, i)) && s.slice(0, i).includes('<'))
			s = s.slice(0, i);
	}
	// inside <...> and (...): drop namespace qualifiers and parameter lists of functions
	let out = '', depth = 0;
	for (let i = 0; i < s.length; i++) {
		const c = s[i];
		if (c === '<' || c === '(')
			depth++;
		else if (c === '>' || c === ')')
			depth--;
		if (depth > 0) {
			const m = /^(?:[A-Za-z_]\w*::)+/.exec(s.slice(i));
			if (m && !/\w/.test(s[i - 1] || '')) {
				i += m[0].length - 1;
				continue;
			}
		}
		out += c;
	}
	return out.replace(/\([\w:&*, ]*\)(?=::)/g, '()').replace(/(::λ)+/g, '::λ').replace(/ >/g, '>');
}

// Where a shortened name is cut when it does not fit: the head (the function,
// "at::native::vectorized_elementwise_kernel") gives way first, with an
// ellipsis; the tail (its template arguments, else the last characters) stays.
function splitName(s) {
	const lt = s.indexOf('<');
	if (lt > 0)
		return [s.slice(0, lt), s.slice(lt)];
	const k = Math.min(18, Math.floor(s.length / 2));
	return [s.slice(0, s.length - k), s.slice(s.length - k)];
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

// A name cell: shortened in the middle, the full name on hover and in the copy button.
export function nameCell(v) {
	if (v == null || v === '')
		return h('span', { class: 'muted', text: '–' });
	const full = String(v);
	const [head, tail] = splitName(shortName(full));
	// its label comes from the style sheet, so that the cell's text is the name alone
	const btn = h('button', { type: 'button', class: 'copy', title: 'copy the full name', 'aria-label': 'copy the full name' });
	btn.addEventListener('click', (e) => {
		e.stopPropagation();
		copy(full, btn);
	});
	return h('span', { class: 'name', title: full, 'data-full': full },
		h('span', { class: 'name-head', text: head }), h('span', { class: 'name-tail', text: tail }), btn);
}
