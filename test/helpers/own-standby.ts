import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './own-redis.ts';
import { asRoot, postgresUserIds } from './postgres-user.ts';

/** A private PostgreSQL primary and its streaming standby, for what only a server in recovery does. */
export interface OwnStandby {
  primaryUrl: string;
  standbyUrl: string;
  stop(): void;
}

/** The machine's PostgreSQL server programs (Debian's layout), or undefined. */
function serverBinaries(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  return readdirSync(root)
    .map((version) => path.join(root, version, 'bin'))
    .find((bin) => ['initdb', 'pg_ctl', 'pg_basebackup'].every((tool) => existsSync(path.join(bin, tool))));
}

/** Why a standby cannot be made here, or null. */
export function standbyUnavailable(): string | null {
  if (!serverBinaries())
    return "no PostgreSQL server programs in /usr/lib/postgresql/*/bin (Debian's postgresql)";
  if (asRoot && !postgresUserIds())
    return 'running as root, and there is no postgres user to run PostgreSQL as';
  return null;
}

/** Runs a server program, as the postgres user when root (initdb and postgres refuse root). */
function run(bin: string, tool: string, args: string[]): void {
  execFileSync(path.join(bin, tool), args, { stdio: 'pipe', ...(asRoot ? postgresUserIds() : {}) });
}

/** Makes and starts a primary (trust on loopback) and a standby streaming from it, each on a free port. */
export async function startOwnStandby(): Promise<OwnStandby> {
  const bin = serverBinaries();
  if (!bin) throw new Error(standbyUnavailable()!);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-standby-'));
  const user = asRoot ? postgresUserIds() : null;
  if (user) chownSync(dir, user.uid, user.gid);
  const primary = path.join(dir, 'primary');
  const standby = path.join(dir, 'standby');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const options = (port: number) => `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir}`;
  const started: string[] = [];
  const stop = () => {
    for (const data of started.reverse()) {
      try {
        run(bin, 'pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    run(bin, 'initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '--locale=C', '--encoding=UTF8']);
    run(bin, 'pg_ctl', [
      '-D',
      primary,
      '-o',
      options(primaryPort),
      '-l',
      path.join(dir, 'primary.log'),
      '-w',
      'start',
    ]);
    started.push(primary);
    run(bin, 'pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standby,
      '-R',
    ]);
    run(bin, 'pg_ctl', [
      '-D',
      standby,
      '-o',
      options(standbyPort),
      '-l',
      path.join(dir, 'standby.log'),
      '-w',
      'start',
    ]);
    started.push(standby);
  } catch (error) {
    stop();
    throw error;
  }
  return {
    primaryUrl: `postgres://postgres@127.0.0.1:${primaryPort}/postgres`,
    standbyUrl: `postgres://postgres@127.0.0.1:${standbyPort}/postgres`,
    stop,
  };
}
