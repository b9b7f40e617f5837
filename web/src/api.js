// The JSON API, as the pages read it. A server with read tokens answers 401:
// the page then asks for a token once and keeps it in this browser.
import { h } from './util.js';

const TOKEN_KEY = 'trainscope.token';

export class ApiError extends Error {
	constructor(status, code, message) {
		super(message);
		this.status = status;
		this.code = code;
	}
}

export function runUrl(run, tail = '', params = {}) {
	const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== ''));
	const qs = q.toString();
	return `/api/v1/runs/${encodeURIComponent(run)}${tail}${qs ? '?' + qs : ''}`;
}

function headers() {
	const t = localStorage.getItem(TOKEN_KEY);
	return t ? { Authorization: `Bearer ${t}` } : {};
}

async function request(url, as) {
	const resp = await fetch(url, { headers: headers() });
	if (!resp.ok) {
		let code = 'http_' + resp.status, message = `${resp.status} ${resp.statusText}`;
		try {
			const e = (await resp.json()).error;
			code = e.code;
			message = e.message;
		} catch { /* not our error body */ }
		throw new ApiError(resp.status, code, message);
	}
	return as === 'buffer' ? resp.arrayBuffer() : resp.json();
}

export const api = (url) => request(url, 'json');
export const apiBuffer = (url) => request(url, 'buffer');

// What a page shows instead of its content when a read failed.
export function errorBox(err) {
	if (err instanceof ApiError && err.status === 401) {
		const input = h('input', { type: 'password', placeholder: 'read token', autocomplete: 'off' });
		const form = h('form', { class: 'token', onsubmit: (e) => {
			e.preventDefault();
			localStorage.setItem(TOKEN_KEY, input.value.trim());
			location.reload();
		} }, input, h('button', { type: 'submit', text: 'Use token' }));
		return h('div', { class: 'error' }, h('p', { text: 'This server needs a token to read: ' + err.message }), form);
	}
	return h('div', { class: 'error' }, h('p', { text: err.message }));
}
