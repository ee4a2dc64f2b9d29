import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP pass-through in front of PostgreSQL, so a test can take the database away from a running service
 * without touching the shared server: either refused (every connection cut, new ones refused) or silent (a
 * black hole: connections stay open and nothing comes back).
 */
export interface TcpProxy {
  /** The database URL with host and port replaced by the proxy's. */
  url: string;
  /** Cuts every connection and refuses new ones. */
  down(): Promise<void>;
  /** Accepts connections again, on the same port. */
  up(): Promise<void>;
  /**
   * A black hole, as in a network partition or a hung database host: every open connection stays open but
   * carries no more bytes, and new connections are accepted and never answered.
   */
  freeze(): void;
  /**
   * New connections are carried again. Those frozen stay open and silent until `down()` or `close()`, as a
   * client's connections to a server that failed over: only connections made afresh answer.
   */
  thaw(): void;
  /**
   * New connections carry the client's startup packet, and the server's answers, but nothing more the client
   * sends: a server that accepts a session and then answers no statement (a hung backend). `thaw()` ends it.
   */
  muteAfterStartup(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(databaseUrl: string): Promise<TcpProxy> {
  const target = new URL(databaseUrl);
  const connections = new Set<{ client: Socket; upstream: Socket | null }>();
  let server: Server | null = null;
  let port = 0;
  let frozen = false;
  let muted = false;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const srv = createServer((client) => {
        const connection = { client, upstream: null as Socket | null };
        connections.add(connection);
        const drop = () => {
          client.destroy();
          connection.upstream?.destroy();
          connections.delete(connection);
        };
        client.on('error', drop).on('close', drop);
        if (frozen) {
          client.pause();
          return;
        }
        const upstream = connect(Number(target.port || 5432), target.hostname);
        connection.upstream = upstream;
        upstream.on('error', drop).on('close', drop);
        if (muted) {
          upstream.pipe(client);
          // The first chunk is the startup packet (with trust auth the client sends nothing else before the
          // server is ready); whatever comes after is dropped.
          client.once('data', (startup: Buffer) => {
            upstream.write(startup);
            client.on('data', () => {});
          });
          return;
        }
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
    for (const { client, upstream } of connections) {
      client.destroy();
      upstream?.destroy();
    }
    connections.clear();
    if (srv) await new Promise<void>((resolve) => srv.close(() => resolve()));
  };

  const freeze = () => {
    frozen = true;
    for (const { client, upstream } of connections) {
      client.unpipe();
      client.pause();
      upstream?.unpipe();
      upstream?.pause();
    }
  };

  await listen();
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    down,
    up: listen,
    freeze,
    thaw: () => {
      frozen = false;
      muted = false;
    },
    muteAfterStartup: () => {
      muted = true;
    },
    close: down,
  };
}
