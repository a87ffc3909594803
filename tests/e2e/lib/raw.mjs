// One raw exchange on a fresh loopback connection: writes bytes as they are (malformed HTTP
// included) and resolves with everything the server sent, when it closes or after timeoutMs.
import net from 'node:net';

export function raw(port, bytes, { timeoutMs = 5000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    const timer = setTimeout(() => { sock.destroy(); resolve(data); }, timeoutMs);
    sock.on('data', (c) => (data += c));
    sock.on('error', () => {});
    sock.on('close', () => { clearTimeout(timer); resolve(data); });
    sock.write(bytes);
  });
}
