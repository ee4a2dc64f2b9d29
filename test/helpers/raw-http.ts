import { connect } from 'node:net';

/**
 * Sends `request` (raw bytes, as written) to the server at `url` over a new connection and resolves with the first
 * answer as received: once its head and the body its Content-Length announces have come, or when the server closes
 * the connection. The connection is not half-closed after the request: node's server answers no request still in
 * its hooks once the client has ended its side. `untilClose`: only when the server closes the connection (a test
 * that the answer closes it).
 */
export function rawHttp(url: string, request: string, { untilClose = false } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url);
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(request));
    let answer = '';
    const complete = () => {
      const end = answer.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const length = /\r\ncontent-length: *(\d+)/i.exec(answer.slice(0, end))?.[1];
      return length !== undefined && Buffer.byteLength(answer.slice(end + 4)) >= Number(length);
    };
    socket.on('data', (chunk) => {
      answer += String(chunk);
      if (!untilClose && complete()) {
        socket.destroy();
        resolve(answer);
      }
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}
