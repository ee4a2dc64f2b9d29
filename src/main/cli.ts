import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { AdminClient } from '../cli/admin-client.ts';
import { API_COMMANDS, API_OPTIONS, apiClient, findApiCommand } from '../cli/api-commands.ts';
import { runDemo } from '../cli/demo-command.ts';
import { reportFailure } from '../cli/error-report.ts';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS, UsageError } from '../cli/operator-commands.ts';
import { startWebhookListener } from '../cli/webhooks-listen.ts';

/** `svc`: the one entry point: serve, migrate, demo, every operator command and the platform calls. */
const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3 } as const;

const HELP = `svc: svc-platform service, operator and platform CLI

Service:
  svc serve [--role api|worker|all]   run the service (embedded PostgreSQL unless DATABASE_URL is set)
  svc migrate                          apply database migrations and exit
  svc demo                             create a demo platform, key, participants, account and prices
  svc webhooks listen --port N --secret S [--host H] [--json]
                                       local webhook receiver: verifies and prints each delivery

Operator commands (talk to a running server; --url, --token or SVC_URL, SVC_ADMIN_TOKEN):
${Object.values(OPERATOR_COMMANDS)
  .map((c) => `  ${c.usage}\n      ${c.summary}`)
  .join('\n')}

Platform API commands (signed with a platform API key: --api-key, --api-secret, --passphrase or
SVC_API_KEY, SVC_API_SECRET, SVC_PASSPHRASE; the SDK's retry rules of spec 7 apply):
${Object.values(API_COMMANDS)
  .map((c) => `  ${c.usage}\n      ${c.summary}`)
  .join('\n')}

Global options:
  --json        print the raw JSON result only (errors: one JSON object on stderr)
  --url URL     API base URL (default http://SVC_HOST:SVC_PORT; operator commands: SVC_ADMIN_LISTEN if set)
  --token T     operator token (default SVC_ADMIN_TOKEN, else <SVC_DATA_DIR>/admin-token)
  --no-retry    svc api: send each request once
  -h, --help    this help

Exit codes: 0 ok, 1 the API refused (4xx/5xx), 2 usage error, 3 server unreachable.
`;

function adminClient(
  config: Readonly<Config>,
  url: string | undefined,
  token: string | undefined,
): AdminClient {
  const listen = config.adminListen ?? config.listen;
  const base = url ?? process.env.SVC_URL ?? `http://${listen.host}:${listen.port}`;
  const tokenFile = path.join(config.dataDir, 'admin-token');
  const resolved =
    token ??
    config.adminToken ??
    (existsSync(tokenFile) ? readFileSync(tokenFile, 'utf8').trim() : undefined);
  if (!resolved)
    throw new UsageError(
      'no operator token: pass --token, set SVC_ADMIN_TOKEN, or run where the data dir is',
    );
  return new AdminClient(base, resolved);
}

/**
 * The server's modules (Fastify, PostgreSQL, the job queue) load only for the commands that run it, so
 * the operator and platform commands start in a fraction of the time.
 */
async function serverModules() {
  const [{ createLogger }, { openDatabase, startRuntime }, { createStore }, { migrate }] = await Promise.all([
    import('./logger.ts'),
    import('./runtime.ts'),
    import('../store/database.ts'),
    import('../store/migrate.ts'),
  ]);
  return { createLogger, openDatabase, startRuntime, createStore, migrate };
}

async function serve(config: Readonly<Config>): Promise<void> {
  const { createLogger, startRuntime } = await serverModules();
  const logger = createLogger(config.logLevel);
  const runtime = await startRuntime(config, { logger });
  const lines = [`svc-platform ${config.env} (${config.role})`];
  if (runtime.url) lines.push(`  public API   ${runtime.url}`, `  docs         ${runtime.url}/docs`);
  if (runtime.adminUrl) lines.push(`  operator API ${runtime.adminUrl}/admin`);
  lines.push(`  admin token  ${runtime.secrets.adminToken}`);
  lines.push(
    `  database     ${config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL in ${config.dataDir}`}`,
  );
  if (runtime.opsUrl) lines.push(`  metrics      ${runtime.opsUrl}/metrics`);
  if (runtime.worker) lines.push('  worker       running');
  process.stdout.write(lines.join('\n') + '\n');

  // DESIGN §6: on SIGTERM stop accepting, finish in-flight requests and jobs, exit within the timeout.
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('shutdown timed out; exiting');
      process.exit(EXIT.failed);
    }, config.shutdownTimeoutMs);
    force.unref();
    runtime.close().then(
      () => process.exit(EXIT.ok),
      () => process.exit(EXIT.failed),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A closed terminal: stop the same way, so the embedded PostgreSQL is not left running.
  process.on('SIGHUP', () => stop('SIGHUP'));
}

/** `svc webhooks listen`: a local verifying receiver (issue 4 point 6); runs until SIGINT or SIGTERM. */
async function listenForWebhooks(values: Record<string, unknown>): Promise<void> {
  const secret = typeof values.secret === 'string' ? values.secret : '';
  if (!secret) throw new UsageError('--secret is required (the secret configured for the platform)');
  const port = typeof values.port === 'string' ? Number(values.port) : NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError('--port N is required (0 = any free port)');
  const listener = await startWebhookListener({
    port,
    host: typeof values.host === 'string' ? values.host : undefined,
    secret,
    json: values.json === true,
  });
  const stop = () => void listener.close().then(() => process.exit(EXIT.ok));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

async function migrateOnly(config: Readonly<Config>): Promise<void> {
  const { createLogger, openDatabase, createStore, migrate } = await serverModules();
  const logger = createLogger(config.logLevel);
  const { url, embedded } = await openDatabase(config, logger);
  const store = createStore(url, { max: 2 });
  try {
    const applied = await migrate(store.pool, (msg) => logger.info(msg));
    process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  } finally {
    await store.close();
    await embedded?.stop();
  }
}

/**
 * util.parseArgs refuses "--amount -0.1" (a value that starts with a dash looks like an option), which
 * made debits impossible to type the way the usage line shows; a negative number after an option is its
 * value, so it is passed as "--amount=-0.1".
 */
function negativeNumbersAsValues(argv: string[], stringOptions: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    const takesValue = arg.startsWith('--') && stringOptions.has(arg.slice(2));
    if (takesValue && next !== undefined && /^-\d+(\.\d+)?$/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

export async function main(argv: string[]): Promise<number> {
  const options = {
    ...OPERATOR_OPTIONS,
    ...API_OPTIONS,
    json: { type: 'boolean' },
    url: { type: 'string' },
    token: { type: 'string' },
    role: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  } as const;
  const stringOptions = new Set(
    Object.entries(options)
      .filter(([, o]) => o.type === 'string')
      .map(([name]) => name),
  );
  const { values, positionals } = parseArgs({
    args: negativeNumbersAsValues(argv, stringOptions),
    allowPositionals: true,
    options,
  });
  if (values.help || positionals.length === 0) {
    process.stdout.write(HELP);
    return positionals.length === 0 && !values.help ? EXIT.usage : EXIT.ok;
  }
  const env = values.role ? { ...process.env, SVC_ROLE: values.role } : process.env;
  const config = loadConfig(env);
  const [first, second] = positionals;
  if (first === 'serve') {
    await serve(config);
    return -1; // keeps running
  }
  if (first === 'migrate') {
    await migrateOnly(config);
    return EXIT.ok;
  }
  const print = (result: unknown) =>
    process.stdout.write(
      values.json ? JSON.stringify(result) + '\n' : JSON.stringify(result, null, 2) + '\n',
    );
  if (first === 'demo') {
    print(await runDemo(adminClient(config, values.url, values.token), { env: config.env }));
    return EXIT.ok;
  }
  if (first === 'webhooks' && second === 'listen') {
    await listenForWebhooks(values);
    return -1; // keeps running
  }
  if (first === 'api') {
    // Credentials come from the command line or the environment, read here only (src/cli reads no env).
    const { command, positionals: rest } = findApiCommand(positionals.slice(1));
    const client = apiClient({
      baseUrl: values.url ?? process.env.SVC_URL ?? `http://${config.listen.host}:${config.listen.port}`,
      apiKey: values['api-key'] ?? process.env.SVC_API_KEY,
      apiSecret: values['api-secret'] ?? process.env.SVC_API_SECRET,
      passphrase: values.passphrase ?? process.env.SVC_PASSPHRASE,
      retry: values['no-retry'] !== true,
    });
    print(await command.run(client, rest, values));
    return EXIT.ok;
  }
  const command = OPERATOR_COMMANDS[`${first} ${second}`];
  if (!command) throw new UsageError(`unknown command "${positionals.join(' ')}"; see svc --help`);
  print(await command.run(adminClient(config, values.url, values.token), positionals.slice(2), values));
  return EXIT.ok;
}

/** fetch failures that mean no server answered at that address (exit 3), as opposed to a refusal (exit 1). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/** Runs a command and maps failures to readable messages and exit codes; -1 means "still serving". */
export async function runCli(argv: string[]): Promise<number> {
  try {
    return await main(argv);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (error instanceof UsageError || error instanceof ConfigError || code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`error: ${(error as Error).message}\n`);
      return EXIT.usage;
    }
    // An API's refusal, or no answer through the SDK: status, the server's errors, the request id.
    const report = reportFailure(error);
    if (report) {
      process.stderr.write(
        (argv.includes('--json') ? JSON.stringify({ error: report.json }) : report.text) + '\n',
      );
      return report.exitCode;
    }
    if (UNREACHABLE_CODES.has((error as { cause?: { code?: string } }).cause?.code ?? '')) {
      process.stderr.write(`error: server unreachable (${(error as Error).message})\n`);
      return EXIT.unreachable;
    }
    process.stderr.write(`error: ${(error as Error).stack ?? String(error)}\n`);
    return EXIT.failed;
  }
}

const isEntry =
  process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isEntry) {
  void runCli(process.argv.slice(2)).then((code) => {
    if (code >= 0) process.exitCode = code;
  });
}
