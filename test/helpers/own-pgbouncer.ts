import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './own-redis.ts';
import { asRoot, postgresUserIds } from './postgres-user.ts';

/** A PgBouncer of the test's own in front of the test's PostgreSQL. */
export interface OwnPgBouncer {
  /** `databaseUrl` with PgBouncer's address in place of PostgreSQL's. */
  url: string;
  stop(): Promise<void>;
}

const BINARIES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

function pgbouncerBinary(): string | undefined {
  return BINARIES.find((file) => existsSync(file));
}

/** Why a test of PgBouncer cannot run here (no pgbouncer; as root, no `postgres` user to run it as), or null. */
export function pgbouncerUnavailable(): string | null {
  if (!pgbouncerBinary())
    return 'pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it)';
  // It refuses to run as root; root has it switch to the postgres user (-u), which must exist.
  if (asRoot && !postgresUserIds())
    return 'running as root, and there is no postgres user for pgbouncer to run as';
  return null;
}

/**
 * Starts PgBouncer in `poolMode` on a free port of loopback, passing every database through to the server
 * `databaseUrl` names, with its user and password (PgBouncer trusts its own clients), at most 4 server
 * connections a database.
 */
export async function startOwnPgBouncer(
  databaseUrl: string,
  poolMode: 'session' | 'transaction',
  /** More of its settings (e.g. `server_round_robin: '1'`). */
  settings: Record<string, string> = {},
): Promise<OwnPgBouncer> {
  const binary = pgbouncerBinary();
  if (!binary) throw new Error(pgbouncerUnavailable()!);
  const server = new URL(databaseUrl);
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-pgbouncer-'));
  // Readable by the postgres user it runs as under root.
  chmodSync(dir, 0o755);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const target = `host=${server.hostname} port=${server.port || '5432'} user=${user}${password ? ` password=${password}` : ''}`;
  writeFileSync(path.join(dir, 'users.txt'), `"${user}" ""\n`, { mode: 0o644 });
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = ${target}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      `pool_mode = ${poolMode}`,
      'default_pool_size = 4',
      ...Object.entries(settings).map(([name, value]) => `${name} = ${value}`),
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const args = [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')];
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = once(child, 'exit');
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  url.password = '';
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url.toString() });
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill();
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`pgbouncer on port ${port} did not start: ${String(err)}\n${output}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url: url.toString(),
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGINT');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
