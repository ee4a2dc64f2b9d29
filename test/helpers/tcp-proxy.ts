import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP pass-through in front of PostgreSQL, so a test can take the database away from a running service
 * (every connection cut, new ones refused) and give it back, without touching the shared server.
 */
export interface TcpProxy {
  /** The database URL with host and port replaced by the proxy's. */
  url: string;
  /** Cuts every connection and refuses new ones. */
  down(): Promise<void>;
  /** Accepts connections again, on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(databaseUrl: string): Promise<TcpProxy> {
  const target = new URL(databaseUrl);
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const srv = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname);
        sockets.add(client).add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        client.pipe(upstream).pipe(client);
      });
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const address = srv.address();
        port = typeof address === 'object' && address ? address.port : port;
        server = srv;
        resolve();
      });
    });

  const down = async () => {
    const srv = server;
    server = null;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (srv) await new Promise<void>((resolve) => srv.close(() => resolve()));
  };

  await listen();
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return { url: url.toString(), down, up: listen, close: down };
}
