// A free TCP port on loopback, for the node test drivers that start a server
// (tests/schema/validate.mjs, tests/browser/harness.mjs).
import net from 'node:net';

export function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.unref();
		s.on('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}
