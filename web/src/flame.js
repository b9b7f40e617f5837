// Folded stacks (torch export_stacks, py-spy record --format raw: "frame;frame;frame weight"
// a line) read into a tree for the flame graph (flamegraph.js draws it) and as text for the
// offline viewer.

const LINE = /^(.*) (\d+)\r?$/;	/* the weight is after the last space: py-spy frames hold spaces */

// [{frames, weight}] of one file, root first. torch's export_stacks writes leaf first in
// Kineto builds and root first before them; as the server does (textfmt.c), the end with
// fewer distinct frames is the root, so the graph and /stacks agree.
export function parseFolded(text) {
	const stacks = [];
	const firsts = new Set(), lasts = new Set();
	for (const line of text.split('\n')) {
		const m = LINE.exec(line);
		if (!m || !m[1])
			continue;
		const frames = m[1].split(';');
		firsts.add(frames[0]);
		lasts.add(frames[frames.length - 1]);
		stacks.push({ frames, weight: +m[2] });
	}
	if (lasts.size < firsts.size)
		for (const s of stacks)
			s.frames.reverse();
	return stacks;
}

// The stacks as a tree for d3-flame-graph: {name, value, children}, value the weight of the
// stacks through the node (d3-flame-graph's default, not selfValue).
export function stackTree(stacks, rootName = 'all') {
	const root = { name: rootName, value: 0, children: [], index: new Map() };
	for (const { frames, weight } of stacks) {
		let node = root;
		node.value += weight;
		for (const f of frames) {
			let child = node.index.get(f);
			if (!child) {
				child = { name: f, value: 0, children: [], index: new Map() };
				node.index.set(f, child);
				node.children.push(child);
			}
			child.value += weight;
			node = child;
		}
	}
	const strip = (n) => {	/* the lookup maps are ours, not the library's */
		delete n.index;
		n.children.forEach(strip);
		return n;
	};
	return strip(root);
}

// Root-first folded text (speedscope's collapsed-stack importer takes the first frame as the root).
export const foldedText = (stacks) => stacks.map((s) => `${s.frames.join(';')} ${s.weight}`).join('\n') + '\n';
