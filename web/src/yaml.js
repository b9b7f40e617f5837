// A reader of the YAML that schemas/openapi.yaml is written in, for the API reference
// page: block mappings and sequences ("- key: value" items too), flow mappings and
// sequences over several lines, plain scalars over several lines, single- and
// double-quoted scalars, literal (|) and folded (>) blocks, and comment lines. No
// anchors, aliases, tags or documents: a file with them is read wrong, not refused.
//   parseYaml('a: {b: [1, two]}') => {a: {b: [1, 'two']}}
// A line that is neither a key nor a sequence item where one is due throws an Error
// that names its number.

export function parseYaml(text) {
	const lines = text.replace(/\r\n?/g, '\n').split('\n').map((raw, n) => ({ raw, n: n + 1, indent: raw.search(/\S|$/), body: raw.trim() }));
	let i = 0;
	const skip = () => {
		while (i < lines.length && (lines[i].body === '' || lines[i].body.startsWith('#')))
			i++;
	};
	const isItem = (l) => l.body === '-' || l.body.startsWith('- ');

	function block() {
		skip();
		if (i >= lines.length)
			return null;
		return isItem(lines[i]) ? seq(lines[i].indent) : map(lines[i].indent);
	}

	function map(indent) {
		const out = {};
		for (skip(); i < lines.length && lines[i].indent === indent && !isItem(lines[i]); skip()) {
			const kv = splitKey(lines[i].body);
			if (!kv)
				throw new Error(`YAML line ${lines[i].n}: a key was expected: ${lines[i].body}`);
			i++;
			out[kv.key] = value(kv.rest, indent);
		}
		if (i < lines.length && lines[i].indent > indent && lines[i].body)
			throw new Error(`YAML line ${lines[i].n}: indented more than its mapping`);
		return out;
	}

	function seq(indent) {
		const out = [];
		for (skip(); i < lines.length && lines[i].indent === indent && isItem(lines[i]); skip()) {
			const l = lines[i];
			const rest = l.body.slice(1).trimStart();
			const inner = l.raw.length - l.raw.slice(indent + 1).trimStart().length;
			if (rest && !/^[{[]/.test(rest) && splitKey(rest)) {
				// "- key: value": a mapping whose keys are at the item's column
				lines[i] = { ...l, indent: inner, body: rest };
				out.push(map(inner));
			} else {
				i++;
				out.push(value(rest, indent));
			}
		}
		return out;
	}

	// The value after "key:" or "- " on a line already read; what follows on lines indented
	// more than indent belongs to it.
	function value(rest, indent) {
		const more = () => i < lines.length && lines[i].body !== '' && lines[i].indent > indent;
		if (rest === '') {
			skip();
			if (i < lines.length && (lines[i].indent > indent || (lines[i].indent === indent && isItem(lines[i]))))
				return block();
			return null;
		}
		const lit = /^([|>])([-+]?)$/.exec(rest);
		if (lit) {
			const body = [];
			let at = null;
			for (; i < lines.length && (lines[i].body === '' || lines[i].indent > indent); i++) {
				at ??= lines[i].body ? lines[i].indent : null;
				body.push(lines[i].body ? lines[i].raw.slice(at) : '');
			}
			while (body.length && body.at(-1) === '')
				body.pop();
			const joined = lit[1] === '|' ? body.join('\n') : body.join('\n').replace(/([^\n])\n(?=[^\n])/g, '$1 ');
			return joined + (lit[2] === '-' ? '' : '\n');
		}
		let s = rest;
		if (s[0] === '{' || s[0] === '[') {
			while (!closed(s) && more())
				s += ' ' + lines[i++].body;
			return flow(s);
		}
		if (s[0] === '\'' || s[0] === '"') {
			while (quoteEnd(s, 0) < 0 && more())
				s += ' ' + lines[i++].body;
			return quoted(s, 0).value;
		}
		while (more())
			s += ' ' + lines[i++].body;
		return scalar(s);
	}

	return block();
}

// "key: rest" (the key plain or quoted), or null when the text is not a key.
function splitKey(body) {
	if (body[0] === '\'' || body[0] === '"') {
		const q = quoted(body, 0);
		const after = body.slice(q.end);
		return /^:(\s|$)/.test(after) ? { key: q.value, rest: after.slice(1).trim() } : null;
	}
	const m = /:(\s|$)/.exec(body);
	return m ? { key: body.slice(0, m.index).trim(), rest: body.slice(m.index + 1).trim() } : null;
}

// Where the quoted scalar starting at p ends (after its closing quote), or -1.
function quoteEnd(s, p) {
	const q = s[p];
	for (let k = p + 1; k < s.length; k++) {
		if (q === '"' && s[k] === '\\')
			k++;
		else if (s[k] === q) {
			if (q === '\'' && s[k + 1] === '\'')
				k++;
			else
				return k + 1;
		}
	}
	return -1;
}

function quoted(s, p) {
	const end = quoteEnd(s, p);
	if (end < 0)
		throw new Error(`YAML: an unclosed quote: ${s.slice(p, p + 40)}`);
	const inner = s.slice(p + 1, end - 1);
	const value = s[p] === '\'' ? inner.replace(/''/g, '\'') : JSON.parse('"' + inner.replace(/\t/g, '\\t') + '"');
	return { value, end };
}

// Whether the flow collection's brackets are all closed (quotes skipped).
function closed(s) {
	let depth = 0;
	for (let k = 0; k < s.length; k++) {
		if (s[k] === '\'' || s[k] === '"') {
			const e = quoteEnd(s, k);
			if (e < 0)
				return false;
			k = e - 1;
		} else if (s[k] === '{' || s[k] === '[') {
			depth++;
		} else if (s[k] === '}' || s[k] === ']') {
			depth--;
		}
	}
	return depth <= 0;
}

function scalar(t) {
	if (t === '' || t === '~' || t === 'null')
		return null;
	if (t === 'true' || t === 'false')
		return t === 'true';
	if (/^-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?$/.test(t))
		return Number(t);
	return t;
}

// A flow collection ({a: 1, b: [x, 'y']}) on one line.
function flow(s) {
	let p = 0;
	const ws = () => {
		while (p < s.length && /\s/.test(s[p]))
			p++;
	};
	const fail = () => {
		throw new Error(`YAML: cannot read ${JSON.stringify(s.slice(Math.max(0, p - 20), p + 20))}`);
	};
	const plain = (stop) => {
		const m = stop.exec(s.slice(p));
		p += m[0].length;
		return m[0].trim();
	};
	function node() {
		ws();
		if (s[p] === '{') {
			p++;
			const o = {};
			for (ws(); s[p] !== '}'; ws()) {
				let key;
				if (s[p] === '\'' || s[p] === '"') {
					const q = quoted(s, p);
					key = q.value;
					p = q.end;
				} else {
					key = plain(/^[^,}]*?(?=:[\s{[]|:$|[,}])/);
				}
				ws();
				o[key] = s[p] === ':' ? (p++, node()) : null;
				ws();
				if (s[p] === ',')
					p++;
				else if (s[p] !== '}')
					fail();
			}
			p++;
			return o;
		}
		if (s[p] === '[') {
			p++;
			const a = [];
			for (ws(); s[p] !== ']'; ws()) {
				a.push(node());
				ws();
				if (s[p] === ',')
					p++;
				else if (s[p] !== ']')
					fail();
			}
			p++;
			return a;
		}
		if (s[p] === '\'' || s[p] === '"') {
			const q = quoted(s, p);
			p = q.end;
			return q.value;
		}
		if (p >= s.length)
			fail();
		return scalar(plain(/^[^,}\]]*/));
	}
	const v = node();
	ws();
	if (p < s.length)
		fail();
	return v;
}
