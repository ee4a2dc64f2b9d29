import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { closest, distance } from 'fastest-levenshtein';
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';
import path from 'node:path';
import { everyAddressIn, parseCidr } from './lib/cidr.ts';

/**
 * The only reader of process.env. Every variable is listed, with its default, in .env.example.
 * The result is validated once and frozen; everything else receives it as a value.
 */
export type ServiceEnv = 'cert' | 'prod';
export type ServiceRole = 'api' | 'worker' | 'all';

export interface Listen {
  host: string;
  port: number;
}

export interface WebhookConfig {
  /** Success means any 2xx within this time (wire-contract §5). */
  timeoutMs: number;
  fastRetries: number;
  fastRetryDelayMs: number;
  /** Exponential schedule after the fast retries, in ms; then dead-lettered. */
  retryScheduleMs: number[];
  jitter: number;
  /**
   * Delivered and skipped notifications are purged this long after they were recorded (null: kept for
   * ever). Dead and undelivered ones are always kept (wire-contract §5: dead letters stay redeliverable).
   */
  retentionMs: number | null;
  /**
   * Undelivered notifications a worker keeps in memory at most (webhook-delivery.ts). Past it, the lanes waiting for
   * a retry keep their first only; if that is not enough, no new ones are read until the slots have worked through
   * half.
   */
  maxHeldNotifications: number;
  /**
   * How long one operator call redelivering notifications since a time goes on before it answers with where to
   * resume (webhooks.service.ts): below the timeouts of the proxies and clients in front of the operator API.
   */
  redeliverCallMs: number;
}

export interface RateLimitConfig {
  limit: number;
  windowMs: number;
  blockMs: number;
  /** The leading bits of an IPv6 address counted as one client (128: every address alone). */
  ipv6PrefixLength: number;
  /** Namespace of the limiter's Redis keys: deployments sharing one Redis must differ. */
  redisKeyPrefix: string;
  /** A Redis answer slower than this decides the request from memory instead. */
  redisTimeoutMs: number;
}

export interface Config {
  env: ServiceEnv;
  role: ServiceRole;
  listen: Listen;
  /** When set, the operator API is served only on this listener. */
  adminListen: Listen | null;
  /**
   * When set, /healthz, /readyz and /metrics are served here and only here, in every role: a worker (which
   * serves no API) so that its job and webhook-delivery metrics can be scraped, an api or all process so that
   * they are off the public listener. Unset, roles api and all serve them with the API, and a worker none.
   */
  opsListen: Listen | null;
  /** Undefined until main resolves it (generated and saved in the data dir on first start). */
  adminToken: string | undefined;
  /** `SVC_` variables set that svc does not read, each with the setting it may misspell (see {@link unreadSettings}). */
  unreadSettings: string[];
  dataDir: string;
  databaseUrl: string | undefined;
  /**
   * Connections of the process's main pool (the API, the jobs, the domain services). A worker process also
   * opens DELIVERY_POOL_SIZE (4) for webhook bookkeeping, and every process one for LISTEN.
   */
  databasePoolMax: number;
  /**
   * How long a migration's statement waits for a table lock before its try is undone and run again: while it
   * waits, every query on that table waits behind it.
   */
  migrationLockTimeoutMs: number;
  redisUrl: string | undefined;
  trustProxy: string[];
  /** Base64 of 32 bytes: encrypts API secrets at rest. Undefined → generated in the data dir. */
  secretKey: string | undefined;
  /**
   * PKCS#8 PEM of the JWT signing key (EC P-256 or Ed25519), whatever PEM form it was given in. Undefined →
   * generated in the data dir.
   */
  jwtPrivateKey: string | undefined;
  /** The signing key SVC_JWT_PRIVATE_KEY replaced, as PKCS#8 PEM: its tokens verify until they expire. */
  jwtPreviousKey: string | undefined;
  logLevel: LogLevel;
  bodyLimitBytes: number;
  /** Time a client has to send a whole request (headers and body) before it gets a 408 and is disconnected. */
  requestTimeoutMs: number;
  shutdownTimeoutMs: number;
  /**
   * On SIGTERM, how long an instance goes on serving with /readyz answering 503 and every answer closing its
   * connection, before its listeners close: the time a load balancer needs to stop sending it requests.
   */
  shutdownDrainMs: number;
  worker: { concurrency: number; pollIntervalMs: number };
  rateLimit: RateLimitConfig;
  webhooks: WebhookConfig;
  /** Default quote lifetime for platforms that did not set their own (wire-contract §7). */
  quoteExpiryMs: number;
  settlement: { activeAfterMs: number; terminateAfterMs: number };
  /** A funding session from a token with no deposit in this time is reported expired (wire-contract §5). */
  fundingSessionExpiryMs: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string, fallback: string): string {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

/** SVC_DATA_DIR as an absolute path; also read alone, by client commands that need nothing else of config. */
export function dataDirOf(env: Env): string {
  return path.resolve(str(env, 'SVC_DATA_DIR', './.svc-data'));
}

function optional(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The operator token is the operator API's only credential, and that API is never rate-limited (DESIGN §3):
 * a short one could be guessed. 24 characters is what `openssl rand -base64 18` or a generated token gives.
 */
const MIN_ADMIN_TOKEN_LENGTH = 24;

function adminTokenOf(env: Env): string | undefined {
  const token = optional(env, 'SVC_ADMIN_TOKEN');
  const problem = token === undefined ? undefined : adminTokenProblem(token);
  if (problem) throw new ConfigError(`SVC_ADMIN_TOKEN: ${problem.rule} ${problem.why}`);
  return token;
}

/**
 * What is wrong with an operator token, set or kept in the data dir (src/main/secrets.ts): the rule it breaks, and
 * why the rule holds. Sent as a header value, which carries printable ASCII and loses white space at either end, a
 * token with a trailing space (as `docker --env-file` keeps it) started, then never matched what any client could
 * send (probe).
 */
export function adminTokenProblem(token: string): { rule: string; why: string } | undefined {
  if (token.length < MIN_ADMIN_TOKEN_LENGTH) {
    return {
      rule: `must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters`,
      why: `(it is ${token.length}): it is the only credential of the operator API, which is never rate-limited; e.g. openssl rand -base64 24`,
    };
  }
  if (!ADMIN_TOKEN_FORM.test(token)) {
    return {
      rule: 'must be printable ASCII with no space at either end',
      why: '(it is sent in the Authorization header, which cannot carry the others); e.g. openssl rand -base64 24',
    };
  }
  return undefined;
}

/** Printable ASCII, spaces only between other characters: what an Authorization header carries as sent. */
const ADMIN_TOKEN_FORM = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * What this configuration serves on a public listener that should not be there, one warning each (none outside
 * prod, on loopback, or in role worker, which has no public listener). Without SVC_ADMIN_LISTEN, `/admin` is
 * served on the public listener: outside the firewall (which must let the operator create the first platform) and
 * the rate limit, to anyone who reaches that address, with the token as the only bar (review). Without
 * SVC_OPS_LISTEN, `/metrics` (every route's counts, the queues' state) and `/readyz` (a database statement a call)
 * are too, to anyone, the firewall's refused included (review).
 */
export function publicListenerExposures(config: Readonly<Config>): string[] {
  if (config.env !== 'prod' || config.role === 'worker') return [];
  const { host, port } = config.listen;
  if (host === 'localhost' || host === '::1' || host.startsWith('127.')) return [];
  const exposures: string[] = [];
  if (config.adminListen === null)
    exposures.push(
      `the operator API (/admin) is served on the public listener ${host}:${port}: set SVC_ADMIN_LISTEN to a private address`,
    );
  if (config.opsListen === null)
    exposures.push(
      `/metrics and /readyz are served on the public listener ${host}:${port}, outside the firewall and the rate limit: set SVC_OPS_LISTEN to a private address`,
    );
  return exposures;
}

/** The longest delay a Node timer keeps (a longer one fires at once, with a warning). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * The longest lifetime or delay of a quote, a funding session or a settlement step: a year. Unbounded, a value
 * past the last date a timestamp holds was accepted at start, and every quote, session or trade was then
 * refused with a 400 that blamed the caller (review).
 */
const MAX_LIFETIME_MS = 365 * 24 * 3_600_000;
/**
 * The longest webhook retry delay: with +20 % jitter it must still fit the lane functions' integer
 * milliseconds (about 497 h); a longer one failed every record of the attempt.
 */
export const MAX_RETRY_DELAY_MS = Math.floor(MAX_TIMER_MS / 1.2);

/**
 * Bounds on a process's database connections and concurrent jobs, far above what one process can use (a PostgreSQL
 * allows 100 connections by default, for every process): a typo's 100000 was taken, took every connection of the
 * server from the other instances, spun idle workers on the CPU and missed the shutdown deadline (probe).
 */
const MAX_POOL_CONNECTIONS = 1_000;
const MAX_WORKER_CONCURRENCY = 500;

function int(env: Env, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = optional(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new ConfigError(`${name}: must be an integer ${range}, got "${raw}"`);
  }
  return Number(raw);
}

/** SVC_WEBHOOK_RETENTION_DAYS: 0 keeps notifications for ever. */
function retentionMs(days: number): number | null {
  return days === 0 ? null : days * 24 * 60 * 60_000;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const value = str(env, name, fallback);
  if (!allowed.includes(value as T))
    throw new ConfigError(`${name}: must be one of ${allowed.join(', ')}, got "${value}"`);
  return value as T;
}

/** A TCP port: 0 (any free port, reported at start) to 65535. */
function parsePort(name: string, raw: string): number {
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN;
  if (!(port >= 0 && port <= 65535))
    throw new ConfigError(`${name}: "${raw}" is not a port number (0 to 65535; 0 = any free port)`);
  return port;
}

function port(env: Env, name: string, fallback: number): number {
  const raw = optional(env, name);
  return raw === undefined ? fallback : parsePort(name, raw);
}

/** "host:port", or "[ipv6]:port" (an IPv6 address has colons of its own, so it needs the brackets). */
function listen(env: Env, name: string): Listen | null {
  const raw = optional(env, name);
  if (raw === undefined) return null;
  const ipv6 = /^\[([0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]:([^:]*)$/.exec(raw);
  const match = ipv6 ?? /^([^:[\]]+):([^:]*)$/.exec(raw);
  if (!match)
    throw new ConfigError(`${name}: "${raw}" is not host:port (an IPv6 address in brackets: [::1]:9000)`);
  return { host: ipv6 ? match[1]! : listenHost(name, match[1]!), port: parsePort(name, match[2]!) };
}

/** A host name (RFC 1123) or an IP address. */
const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * A host to listen on: an IP address, or a name to resolve. Refused here, a stray space or `999.1.1.1` (no IPv4
 * address) failed only at the listen, after the migrations, as "cannot resolve" naming no setting (review).
 */
function listenHost(name: string, host: string): string {
  if (isIP(host) !== 0) return host;
  if (!HOST_NAME.test(host) || /^[0-9.]+$/.test(host))
    throw new ConfigError(`${name}: "${host}" is neither an IP address nor a host name`);
  return host;
}

/** A connection URL with one of `protocols`; its value is never quoted back (it may hold a password). */
function serviceUrl(
  env: Env,
  name: string,
  protocols: readonly string[],
  example: string,
): string | undefined {
  const raw = optional(env, name);
  if (raw === undefined) return undefined;
  let protocol: string;
  try {
    protocol = new URL(raw).protocol;
  } catch {
    throw new ConfigError(`${name}: not a URL; expected one like ${example}`);
  }
  if (!protocols.includes(protocol))
    throw new ConfigError(
      `${name}: must be a ${protocols.map((p) => `${p}//`).join(' or ')} URL like ${example}, not ${protocol}//`,
    );
  return raw;
}

/**
 * Every environment variable svc reads, but DATABASE_URL and REDIS_URL: the service's (here), the CLI's (main/cli.ts)
 * and the test runner's (scripts/test.ts), which the services a test starts inherit; and the examples' (a receiver's
 * webhook secret), which are often set in the same shell. The .env.example test holds it to the sources.
 */
export const SETTINGS = [
  'SVC_ENV',
  'SVC_ROLE',
  'SVC_HOST',
  'SVC_PORT',
  'SVC_ADMIN_LISTEN',
  'SVC_OPS_LISTEN',
  'SVC_ADMIN_TOKEN',
  'SVC_DATA_DIR',
  'SVC_LOG_LEVEL',
  'SVC_SHUTDOWN_TIMEOUT_MS',
  'SVC_SHUTDOWN_DRAIN_MS',
  'SVC_HTTP_REQUEST_TIMEOUT_MS',
  'SVC_DB_POOL_MAX',
  'SVC_MIGRATION_LOCK_TIMEOUT_MS',
  'SVC_SECRET_KEY',
  'SVC_JWT_PRIVATE_KEY',
  'SVC_JWT_PREVIOUS_KEY',
  'SVC_TRUST_PROXY',
  'SVC_RATE_LIMIT',
  'SVC_RATE_LIMIT_WINDOW_MS',
  'SVC_RATE_LIMIT_BLOCK_MS',
  'SVC_RATE_LIMIT_IPV6_PREFIX',
  'SVC_RATE_LIMIT_REDIS_PREFIX',
  'SVC_RATE_LIMIT_REDIS_TIMEOUT_MS',
  'SVC_WORKER_CONCURRENCY',
  'SVC_WORKER_POLL_INTERVAL_MS',
  'SVC_WEBHOOK_TIMEOUT_MS',
  'SVC_WEBHOOK_FAST_RETRIES',
  'SVC_WEBHOOK_FAST_RETRY_DELAY_MS',
  'SVC_WEBHOOK_RETRY_SCHEDULE',
  'SVC_WEBHOOK_MAX_HELD',
  'SVC_WEBHOOK_RETENTION_DAYS',
  'SVC_WEBHOOK_REDELIVER_CALL_MS',
  'SVC_QUOTE_EXPIRY_MS',
  'SVC_SETTLEMENT_ACTIVE_AFTER_MS',
  'SVC_SETTLEMENT_TERMINATE_AFTER_MS',
  'SVC_FUNDING_SESSION_EXPIRY_MS',
  'SVC_URL',
  'SVC_ADMIN_URL',
  'SVC_REQUEST_TIMEOUT_MS',
  'SVC_API_KEY',
  'SVC_API_SECRET',
  'SVC_PASSPHRASE',
  'SVC_TEST_CONCURRENCY',
  'SVC_TEST_TIMEOUT_MS',
  'SVC_WEBHOOK_SECRET',
];
const READ = new Set(SETTINGS);

/**
 * The `SVC_` variables set that svc does not read, each with the setting it is likely a misspelling of (a letter
 * off in three of its name past `SVC_`, at most three): the worker concurrency set one R short kept its default, unsaid (probe). Logged at the
 * start, not refused: other tools of an operator's may share the prefix.
 */
export function unreadSettings(env: Env): string[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('SVC_') && !READ.has(name))
    .sort()
    .map((name) => {
      const near = closest(name, SETTINGS);
      // Past the prefix, a letter off in three (at most three): a DB_URL of its own is not SVC_URL misspelt (review).
      // Two letters swapped are one slip, not the two edits Levenshtein counts (review: PORT typed with R and O swapped had no hint).
      const [typed, meant] = [name.slice(4), near.slice(4)];
      const off = isOneSwapAway(typed, meant) ? 1 : distance(typed, meant);
      return off <= Math.min(3, Math.max(1, Math.floor((near.length - 4) / 3))) ? `${name} (${near}?)` : name;
    });
}

/** Whether `a` is `b` with two neighbouring letters swapped. */
function isOneSwapAway(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const differ = [...a].flatMap((letter, i) => (letter === b[i] ? [] : [i]));
  return (
    differ.length === 2 &&
    differ[1] === differ[0]! + 1 &&
    a[differ[0]!] === b[differ[1]!] &&
    a[differ[1]!] === b[differ[0]!]
  );
}

/** The `sslmode`s pg knows (pg-connection-string). */
const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'];
const FILE_PROBLEMS: Record<string, string> = {
  ENOENT: 'does not exist',
  EISDIR: 'is a directory, not a file',
  EACCES: 'is not readable',
  EPERM: 'is not readable',
};
const SSL_FILES = ['sslcert', 'sslkey', 'sslrootcert'];

/**
 * DATABASE_URL's query parameters as pg reads them: pg-connection-string's own reading (2.14), in its two steps (the
 * URL re-encoded where it holds a space or a stray `%`; the last of a repeated parameter), not its parse itself,
 * which warns of what some sslmodes will mean in its next major version: that warning came up in every CLI command,
 * where pg says it again when it connects (review).
 */
function pgQuery(url: string): Map<string, string> {
  const text = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(url)
    ? encodeURI(url).replace(/%25(\d\d)/g, '%$1')
    : url;
  return new Map(new URL(text, 'postgres://base').searchParams);
}

/**
 * DATABASE_URL, with the TLS settings pg only met at the first connection, read as pg reads them (review: the first of
 * a repeated parameter was checked, pg takes the last): an `sslmode` it does not know turned TLS on unsaid, and a
 * certificate file it could not read stopped the start with node's own "ENOENT: no such file or directory, open
 * '…'", naming no setting (probe).
 */
function databaseUrl(env: Env): string | undefined {
  const raw = serviceUrl(
    env,
    'DATABASE_URL',
    ['postgres:', 'postgresql:'],
    'postgres://user:password@host:5432/database',
  );
  if (raw === undefined) return undefined;
  let query: Map<string, string>;
  try {
    query = pgQuery(raw);
  } catch {
    throw new ConfigError(
      'DATABASE_URL: not a URL pg can read; expected one like postgres://user:password@host:5432/database',
    );
  }
  const mode = query.get('sslmode');
  if (mode !== undefined && !SSL_MODES.includes(mode))
    throw new ConfigError(`DATABASE_URL: sslmode must be one of ${SSL_MODES.join(', ')}, not "${mode}"`);
  for (const name of SSL_FILES) {
    const file = query.get(name);
    if (file === undefined) continue;
    try {
      // As pg reads it, whole, at its first connection.
      readFileSync(file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      throw new ConfigError(
        `DATABASE_URL: ${name} ${file} ${FILE_PROBLEMS[code] ?? `cannot be read (${code})`}`,
      );
    }
  }
  return raw;
}

/**
 * REDIS_URL, whose path names the database (ioredis reads `/N` as `SELECT N`): a path that is not a number was
 * dropped with a warning in the log, and the shared limit ran in database 0 (review, session 31).
 */
function redisUrl(env: Env): string | undefined {
  const url = serviceUrl(env, 'REDIS_URL', ['redis:', 'rediss:'], 'redis://host:6379');
  if (url === undefined) return undefined;
  const databaseIndex = /^[0-9]{1,9}$/;
  const { pathname, searchParams } = new URL(url);
  if (pathname !== '' && pathname !== '/' && !databaseIndex.test(pathname.slice(1)))
    throw new ConfigError(
      `REDIS_URL: the path names the database, a number like redis://host:6379/0, not ${JSON.stringify(pathname)}`,
    );
  // ioredis takes `?db=` too (the last one given): `?db=abc` became SELECT NaN, which Redis refused and the process
  // died of.
  const db = searchParams.getAll('db');
  if (db.length > 1 || (db.length === 1 && !databaseIndex.test(db[0]!)))
    throw new ConfigError(
      `REDIS_URL: db names the database, one number like ?db=0, not ${db.map((d) => JSON.stringify(d)).join(' and ')}`,
    );
  return url;
}

/** The listeners of one process must not share an address (the second would fail with EADDRINUSE). */
function sameAddress(a: Listen, b: Listen): boolean {
  if (a.port === 0 || a.port !== b.port) return false;
  const wildcard = (host: string) => host === '0.0.0.0' || host === '::';
  return a.host === b.host || wildcard(a.host) || wildcard(b.host);
}

/** A listener's address and how a message names it. */
type Taken = [Listen | null, string];

/** Refuses a listener set at the address of one before it: each gets a port of its own. */
function requireOwnPort(name: string, own: Listen | null, serves: string, before: Taken[]): void {
  for (const [other, whose] of before) {
    if (own && other && sameAddress(own, other)) {
      throw new ConfigError(`${name}: ${own.host}:${own.port} is ${whose}; give ${serves} a port of its own`);
    }
  }
}

/** What a process runs (SVC_ROLE, `svc serve --role`). */
export const ROLES = ['api', 'worker', 'all'] as const;

/** pino's levels. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * wire-contract §6: the key that signs Account Funding SDK tokens, from any PEM form node reads (PKCS#8,
 * SEC1 "EC PRIVATE KEY", …; on one line with its line breaks written \n) to the PKCS#8 PEM the signer imports; `source` names where it came from
 * (SVC_JWT_PRIVATE_KEY or the data-dir file) in the error.
 */
export function jwtSigningKeyPem(source: string, pem: string): string {
  // An env file (docker --env-file, systemd EnvironmentFile, node --env-file) holds one line per variable: a PEM
  // goes there with its line breaks written as \n, which is taken as the PEM (review: it was refused). And in single
  // quotes, for a shell that sources the file (its `-----BEGIN PRIVATE KEY-----` has spaces: probe), which docker's
  // reader keeps: a PEM has no quote of its own, so a pair around it is taken off.
  const unquoted = /^'[^']*'$|^"[^"]*"$/.test(pem) ? pem.slice(1, -1) : pem;
  const text =
    !unquoted.includes('\n') && unquoted.includes('\\n') ? unquoted.replaceAll('\\n', '\n') : unquoted;
  let key: KeyObject;
  try {
    key = createPrivateKey(text);
  } catch {
    throw new ConfigError(
      `${source}: not an unencrypted private key in PEM form (make one with: openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)`,
    );
  }
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (!((key.asymmetricKeyType === 'ec' && curve === 'prime256v1') || key.asymmetricKeyType === 'ed25519')) {
    const kind = key.asymmetricKeyType === 'ec' ? `EC ${curve}` : (key.asymmetricKeyType ?? 'unknown');
    throw new ConfigError(
      `${source}: a key of type ${kind} cannot sign tokens; use an EC P-256 or an Ed25519 key`,
    );
  }
  return key.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** "5s,30s,2m,1h" → milliseconds. */
export function parseDurationList(name: string, raw: string, maxMs = Number.MAX_SAFE_INTEGER): number[] {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return raw.split(',').map((part) => {
    const match = /^(\d+)(ms|s|m|h)$/.exec(part.trim());
    if (!match) throw new ConfigError(`${name}: "${part}" is not a duration like 250ms, 5s, 2m or 1h`);
    const ms = Number(match[1]) * units[match[2]!]!;
    if (ms > maxMs)
      throw new ConfigError(`${name}: "${part}" is longer than the longest allowed, ${maxMs} ms`);
    return ms;
  });
}

export const DEFAULT_WEBHOOK_SCHEDULE = '5s,30s,2m,10m,30m,1h,2h,4h,8h,16h';

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const trustProxy = str(env, 'SVC_TRUST_PROXY', '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const cidr of trustProxy) {
    if (!parseCidr(cidr)) throw new ConfigError(`SVC_TRUST_PROXY: "${cidr}" is not a CIDR`);
  }
  // Every address a proxy: any client could name the address the firewall and the rate limit see.
  const trustsAll = everyAddressIn(trustProxy);
  const why =
    "so any client could choose the IP the firewall and rate limit see; list the proxies' own addresses";
  if (trustsAll.alone.length > 0)
    throw new ConfigError(
      `SVC_TRUST_PROXY: "${trustProxy[trustsAll.alone[0]!]}" trusts every address, ${why}`,
    );
  if (trustsAll.together)
    throw new ConfigError(`SVC_TRUST_PROXY: together trusts every ${trustsAll.together} address, ${why}`);
  // The parser that reads the list at start (proxy-addr's: ipaddr.js) is stricter than node's isIP: it
  // refuses a zone id with a `-` or `.` (`fe80::1%br-lan`), which otherwise failed the start after the
  // migrations with a message naming no setting (review).
  for (const cidr of trustProxy) {
    if (!ipaddr.isValid(cidr.split('/')[0]!))
      throw new ConfigError(
        `SVC_TRUST_PROXY: "${cidr}" is not a CIDR (a zone id after % takes letters and digits only)`,
      );
  }
  const secretKey = optional(env, 'SVC_SECRET_KEY');
  if (secretKey !== undefined && Buffer.from(secretKey, 'base64').length !== 32) {
    throw new ConfigError('SVC_SECRET_KEY: must be base64 of exactly 32 bytes');
  }
  const webhookTimeoutMs = int(env, 'SVC_WEBHOOK_TIMEOUT_MS', 10_000, 1, 600_000);
  const publicListen = {
    host: listenHost('SVC_HOST', str(env, 'SVC_HOST', '127.0.0.1')),
    port: port(env, 'SVC_PORT', 8080),
  };
  const adminListen = listen(env, 'SVC_ADMIN_LISTEN');
  const opsListen = listen(env, 'SVC_OPS_LISTEN');
  const role = oneOf(env, 'SVC_ROLE', ROLES, 'all');
  // Role worker opens none of the API's listeners (only the ops one, if set): nothing to clash with.
  if (role !== 'worker') {
    const publicAddress: Taken = [publicListen, "the public listener's address (SVC_HOST, SVC_PORT)"];
    requireOwnPort('SVC_ADMIN_LISTEN', adminListen, 'the operator API', [publicAddress]);
    requireOwnPort('SVC_OPS_LISTEN', opsListen, 'the probes and metrics', [
      publicAddress,
      [adminListen, "the operator API's address (SVC_ADMIN_LISTEN)"],
    ]);
  }
  const jwtPrivateKey = optional(env, 'SVC_JWT_PRIVATE_KEY');
  const jwtPreviousKey = optional(env, 'SVC_JWT_PREVIOUS_KEY');
  const shutdownTimeoutMs = int(env, 'SVC_SHUTDOWN_TIMEOUT_MS', 10_000, 1, MAX_TIMER_MS);
  const shutdownDrainMs = int(env, 'SVC_SHUTDOWN_DRAIN_MS', 0, 0, MAX_TIMER_MS);
  if (shutdownDrainMs >= shutdownTimeoutMs) {
    throw new ConfigError(
      `SVC_SHUTDOWN_DRAIN_MS: ${shutdownDrainMs} must be less than SVC_SHUTDOWN_TIMEOUT_MS (${shutdownTimeoutMs}): the drain is part of the shutdown`,
    );
  }
  const config: Config = {
    env: oneOf(env, 'SVC_ENV', ['cert', 'prod'] as const, 'cert'),
    role,
    listen: publicListen,
    adminListen,
    opsListen,
    adminToken: adminTokenOf(env),
    dataDir: dataDirOf(env),
    databaseUrl: databaseUrl(env),
    databasePoolMax: int(env, 'SVC_DB_POOL_MAX', 20, 2, MAX_POOL_CONNECTIONS),
    migrationLockTimeoutMs: int(env, 'SVC_MIGRATION_LOCK_TIMEOUT_MS', 3_000, 1, MAX_TIMER_MS),
    redisUrl: redisUrl(env),
    trustProxy,
    unreadSettings: unreadSettings(env),
    secretKey,
    jwtPreviousKey:
      jwtPreviousKey === undefined ? undefined : jwtSigningKeyPem('SVC_JWT_PREVIOUS_KEY', jwtPreviousKey),
    jwtPrivateKey:
      jwtPrivateKey === undefined ? undefined : jwtSigningKeyPem('SVC_JWT_PRIVATE_KEY', jwtPrivateKey),
    logLevel: oneOf(env, 'SVC_LOG_LEVEL', LOG_LEVELS, 'info'),
    bodyLimitBytes: 1024 * 1024,
    requestTimeoutMs: int(env, 'SVC_HTTP_REQUEST_TIMEOUT_MS', 30_000, 1, MAX_TIMER_MS),
    shutdownTimeoutMs,
    shutdownDrainMs,
    worker: {
      concurrency: int(env, 'SVC_WORKER_CONCURRENCY', 10, 1, MAX_WORKER_CONCURRENCY),
      pollIntervalMs: int(env, 'SVC_WORKER_POLL_INTERVAL_MS', 2_000, 10, MAX_TIMER_MS),
    },
    rateLimit: {
      limit: int(env, 'SVC_RATE_LIMIT', 2_000, 1),
      windowMs: int(env, 'SVC_RATE_LIMIT_WINDOW_MS', 10_000, 1, MAX_TIMER_MS),
      blockMs: int(env, 'SVC_RATE_LIMIT_BLOCK_MS', 10_000, 1, MAX_TIMER_MS),
      // 32: the rate limiter's MIN_IPV6_PREFIX_LENGTH, not imported: the CLI reads this file and no domain code.
      ipv6PrefixLength: int(env, 'SVC_RATE_LIMIT_IPV6_PREFIX', 128, 32, 128),
      redisKeyPrefix: str(env, 'SVC_RATE_LIMIT_REDIS_PREFIX', 'svc:rl:'),
      redisTimeoutMs: int(env, 'SVC_RATE_LIMIT_REDIS_TIMEOUT_MS', 1_000, 1, MAX_TIMER_MS),
    },
    webhooks: {
      timeoutMs: webhookTimeoutMs,
      fastRetries: int(env, 'SVC_WEBHOOK_FAST_RETRIES', 4, 0, 100),
      fastRetryDelayMs: int(env, 'SVC_WEBHOOK_FAST_RETRY_DELAY_MS', 250, 0, MAX_RETRY_DELAY_MS),
      retryScheduleMs: parseDurationList(
        'SVC_WEBHOOK_RETRY_SCHEDULE',
        str(env, 'SVC_WEBHOOK_RETRY_SCHEDULE', DEFAULT_WEBHOOK_SCHEDULE),
        MAX_RETRY_DELAY_MS,
      ),
      jitter: 0.2,
      retentionMs: retentionMs(int(env, 'SVC_WEBHOOK_RETENTION_DAYS', 30, 0, 36_500)),
      maxHeldNotifications: int(env, 'SVC_WEBHOOK_MAX_HELD', 100_000, 10),
      // At most 25 s: the statement bound of a batch is 30 s, and the CLI's timeout 30 s.
      redeliverCallMs: int(env, 'SVC_WEBHOOK_REDELIVER_CALL_MS', 10_000, 0, 25_000),
    },
    quoteExpiryMs: int(env, 'SVC_QUOTE_EXPIRY_MS', 30_000, 1, MAX_LIFETIME_MS),
    settlement: {
      activeAfterMs: int(env, 'SVC_SETTLEMENT_ACTIVE_AFTER_MS', 5_000, 0, MAX_LIFETIME_MS),
      terminateAfterMs: int(env, 'SVC_SETTLEMENT_TERMINATE_AFTER_MS', 10_000, 0, MAX_LIFETIME_MS),
    },
    fundingSessionExpiryMs: int(env, 'SVC_FUNDING_SESSION_EXPIRY_MS', 30 * 60_000, 1, MAX_LIFETIME_MS),
  };
  return deepFreeze(config);
}

/**
 * The settings `svc serve` needs beyond what loadConfig checks, for the role it serves: the job runner's jobs
 * take their connections from the main pool (and the runner one for its LISTEN), so a smaller pool would
 * leave jobs waiting for a connection until they time out. Not part of loadConfig: the other commands (svc
 * migrate, the clients) run no jobs, and an environment sized for `--role api` made them refuse to run.
 */
export function checkServing(config: Readonly<Config>): void {
  const neededByJobs = config.worker.concurrency + 2;
  if (config.role !== 'api' && config.databasePoolMax < neededByJobs) {
    throw new ConfigError(
      `SVC_DB_POOL_MAX: ${config.databasePoolMax} is too small for role ${config.role}: at least SVC_WORKER_CONCURRENCY + 2 (${neededByJobs})`,
    );
  }
}

function deepFreeze<T>(value: T): Readonly<T> {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
