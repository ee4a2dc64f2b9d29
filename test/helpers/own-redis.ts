import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

/** A redis-server of the test's own, for what cannot be done to the shared one (other files use it meanwhile). */
export interface OwnRedis {
  url: string;
  /** A command to it (e.g. `replicaof no one`). */
  command(...args: string[]): Promise<unknown>;
  stop(): Promise<void>;
}

/** A port of loopback nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/**
 * Starts `redis-server` (it must be on the PATH: it is wherever REDIS_URL's tests run here) on a free port of
 * loopback, keeping nothing on disk, with `args` (e.g. `--replicaof 127.0.0.1 1`: a read-only replica of nothing);
 * its `command`s are sent with `options.password` (one it was started with, `--requirepass`).
 */
export async function startOwnRedis(
  args: string[] = [],
  options: { password?: string } = {},
): Promise<OwnRedis> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
    { stdio: 'ignore' },
  );
  const exited = once(child, 'exit');
  const url = `redis://127.0.0.1:${port}`;
  const connection = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 100,
    password: options.password,
  });
  connection.on('error', () => {}); // refused until it listens
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if (connection.status !== 'ready') await connection.connect();
      await connection.ping();
      break;
    } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill();
        throw new Error(`redis-server on port ${port} did not start: ${String(err)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    command: (name, ...rest) => connection.call(name, ...rest),
    async stop() {
      connection.disconnect();
      child.kill();
      await exited;
    },
  };
}
