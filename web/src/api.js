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

// While a page follows a growing run, its reads of what traces derive answer from the
// analysis as it stands (?wait=0): traces that joined since are analysed in the background
// and the page is drawn again once they are (GET /runs/{run}'s analysis_pending), so a
// redraw never waits for an analysis.
let following = false;
export function follow(on) {
	following = on;
}

export function runUrl(run, tail = '', params = {}) {
	if (following && tail)
		params = { ...params, wait: 0 };
	const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== ''));
	const qs = q.toString();
	return `/api/v1/runs/${encodeURIComponent(run)}${tail}${qs ? '?' + qs : ''}`;
}

function headers() {
	const t = localStorage.getItem(TOKEN_KEY);
	return t ? { Authorization: `Bearer ${t}` } : {};
}

async function request(url, as, method = 'GET', body = undefined) {
	const hdrs = body === undefined ? headers() : { ...headers(), 'Content-Type': 'application/json' };
	const resp = await fetch(url, { method, headers: hdrs, body: body === undefined ? undefined : JSON.stringify(body) });
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

// Saves bytes under a file name, as a download link would.
export function saveBlob(blob, filename) {
	const href = URL.createObjectURL(blob);
	const a = h('a', { href, download: filename, class: 'offscreen' });
	document.body.append(a);
	a.click();
	a.remove();
	setTimeout(() => URL.revokeObjectURL(href), 60000);
}

// A download link (CSV, raw artifact, trace) that works on a server with read
// tokens: with a token kept in this browser, a click fetches the file with it and
// saves the blob (a plain link cannot send the header). The link's href stays
// the API's URL, to copy for curl.
export function downloadLink(attrs, text) {
	const a = h('a', attrs, text);
	a.addEventListener('click', async (e) => {
		if (!localStorage.getItem(TOKEN_KEY))
			return;
		e.preventDefault();
		a.classList.add('busy');
		try {
			const resp = await fetch(a.href, { headers: headers() });
			if (!resp.ok)
				throw new ApiError(resp.status, 'http_' + resp.status, `${resp.status} ${resp.statusText}`);
			saveBlob(await resp.blob(), a.getAttribute('download') || 'download');
		} catch (err) {
			a.title = 'download failed: ' + err.message;
		} finally {
			a.classList.remove('busy');
		}
	});
	return a;
}
export const apiBuffer = (url) => request(url, 'buffer');
// Writes (DELETE, POST of a JSON body): need the write token where the server has one.
export const apiDelete = (url) => request(url, 'json', 'DELETE');
export const apiPost = (url, body) => request(url, 'json', 'POST', body);
// Keep token in this browser for the next requests (reads and writes alike).
export const keepToken = (token) => localStorage.setItem(TOKEN_KEY, token);

// What a page shows instead of its content when a read failed.
export function errorBox(err) {
	if (err instanceof ApiError && err.status === 401) {
		const input = h('input', { type: 'password', placeholder: 'read token', autocomplete: 'off', 'aria-label': 'read token' });
		const form = h('form', { class: 'token', onsubmit: (e) => {
			e.preventDefault();
			localStorage.setItem(TOKEN_KEY, input.value.trim());
			location.reload();
		} }, input, h('button', { type: 'submit', text: 'Use token' }));
		const kept = localStorage.getItem(TOKEN_KEY);
		return h('div', { class: 'error', id: 'token-needed' },
			h('p', { text: kept ? `The read token kept in this browser was refused (${err.message}): enter another.`
				: `A read token is needed: this server answers only requests that carry one (${err.message}). Enter it here; this browser keeps it.` }),
			form);
	}
	return h('div', { class: 'error' }, h('p', { text: err.message }));
}
