// A sortable table: click a header to sort by it (again to reverse).
//   const t = table({columns, rows, sort: 'key', desc: true, rowClass(row)});
//   parent.append(t.el); t.setRows(newRows);
// A column: {key, label, num (right-aligned, sorts descending first),
// value(row) (what shows and sorts; default row[key]), sortBy(row) (what sorts, when not the
// value), fmt(value, row) (text or a Node)}.
import { h } from './util.js';

export function table({ columns, rows, sort, desc = true, rowClass, empty = 'Nothing here.' }) {
	const state = { key: sort, desc, rows };
	const thead = h('thead');
	const tbody = h('tbody');
	const el = h('div', { class: 'table-wrap' }, h('table', { class: 'data' }, thead, tbody));
	const col = (key) => columns.find((c) => c.key === key);
	const value = (c, row) => (c.value ? c.value(row) : row[c.key]);

	function compare(a, b) {
		const c = col(state.key);
		const key = c.sortBy || ((row) => value(c, row));
		const va = key(a), vb = key(b);
		if (va == null || vb == null)
			return va == null ? (vb == null ? 0 : 1) : -1;	/* empty cells last either way */
		const r = typeof va === 'number' && typeof vb === 'number' ? va - vb : String(va).localeCompare(String(vb));
		return state.desc ? -r : r;
	}

	function render() {
		thead.replaceChildren(h('tr', null, columns.map((c) => h('th', {
			class: [c.num ? 'num' : '', c.key === state.key ? (state.desc ? 'sorted desc' : 'sorted asc') : ''].join(' ').trim() || null,
			title: c.sortable === false ? null : 'sort by ' + c.label,
			onclick: c.sortable === false ? null : () => {
				state.desc = state.key === c.key ? !state.desc : !!c.num;
				state.key = c.key;
				render();
			},
		}, c.label))));
		const rows = state.key ? [...state.rows].sort(compare) : state.rows;
		tbody.replaceChildren(...(rows.length ? rows.map((row) => h('tr', { class: rowClass ? rowClass(row) : null },
			columns.map((c) => {
				const v = value(c, row);
				return h('td', { class: c.num ? 'num' : c.cls || null }, c.fmt ? c.fmt(v, row) : v ?? '');
			}))) : [h('tr', null, h('td', { class: 'muted', colspan: columns.length, text: empty }))]));
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
