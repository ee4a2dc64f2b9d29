import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP pass-through in front of the real HTTP service that can lose the answer to the next request: the
 * request reaches the server, which does the work and commits it, but the connection is cut as soon as the
 * response starts to come back, so the client sees a network error. That is spec 7.1.2's indeterminate
 * case for real (no answer, state unknown), with nothing faked on either side.
 */
export interface LossyProxy {
  /** The service's URL with the proxy's port. */
  url: string;
  /** The next request sent through the proxy is served, but its answer is lost. */
  loseNextAnswer(): void;
  /** How many answers were lost so far. */
  lost(): number;
  close(): Promise<void>;
}

export async function startLossyProxy(targetUrl: string): Promise<LossyProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let armed = false;
  let lost = 0;

  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    // Set when a request on this connection is the one whose answer must be lost.
    let doomed = false;
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      if (armed && !doomed) {
        armed = false;
        doomed = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (doomed) {
        lost++;
        drop();
        return;
      }
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String(typeof address === 'object' && address ? address.port : 0);
  return {
    url: url.origin,
    loseNextAnswer: () => {
      armed = true;
    },
    lost: () => lost,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
