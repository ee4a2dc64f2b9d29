import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  checkServing,
  ConfigError,
  dataDirOf,
  loadConfig,
  ROLES,
  type Config,
  type Listen,
} from '../config.ts';
import { AdminClient } from '../cli/admin-client.ts';
import { API_COMMANDS, API_OPTIONS, apiClient, findApiCommand } from '../cli/api-commands.ts';
import { refuseExtraArguments, refuseOtherOptions, usageOptions, type Options } from '../cli/command-args.ts';
import { runDemo } from '../cli/demo-command.ts';
import { failureJson, noteWhereSeen, reportFailure, type FailureReport } from '../cli/error-report.ts';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS, UsageError } from '../cli/operator-commands.ts';
import { startWebhookListener } from '../cli/webhooks-listen.ts';
import { LISTEN_PROBLEMS, listenPlace, startupProblem } from './startup-problem.ts';
import { EXIT } from './exit-codes.ts';
import { firstStop, keepingStops, stopAgain } from './kept-stops.ts';
import { baseUrlFault, MAX_TIMEOUT_MS, type BaseUrlFault } from '../sdk/client.ts';
import { SvcArgumentError } from '../sdk/errors.ts';

/** `svc`: the one entry point: serve, migrate, demo, every operator command and the platform calls. */
const HELP = `svc: svc-platform service, operator and platform CLI

Service:
  svc serve [--role api|worker|all]   run the service (embedded PostgreSQL unless DATABASE_URL is set)
  svc migrate                          apply database migrations and exit
  svc demo                             create a demo platform, key, participants, account and prices
  svc webhooks listen --port N --secret S [--host H] [--json]
                                       local webhook receiver: verifies and prints each delivery

Operator commands (the operator API of a running server: --admin-url or SVC_ADMIN_URL, else the public
URL; --token or SVC_ADMIN_TOKEN, else <SVC_DATA_DIR>/admin-token):
${Object.values(OPERATOR_COMMANDS)
  .map((c) => `  ${c.usage}\n      ${c.summary}`)
  .join('\n')}

Platform API commands (signed with a platform API key: --api-key, --api-secret, --passphrase or
SVC_API_KEY, SVC_API_SECRET, SVC_PASSPHRASE; the SDK's retry rules of spec 7 apply):
${Object.values(API_COMMANDS)
  .map((c) => `  ${c.usage}\n      ${c.summary}`)
  .join('\n')}

Global options:
  --json            print the raw JSON result only (errors: one JSON object on stderr)
  --url URL         public API base URL (default SVC_URL, else http://SVC_HOST:SVC_PORT)
  --admin-url URL   operator API base URL (default SVC_ADMIN_URL, else the --url/SVC_URL, else
                    SVC_ADMIN_LISTEN or http://SVC_HOST:SVC_PORT)
  --token T         operator token (default SVC_ADMIN_TOKEN, else <SVC_DATA_DIR>/admin-token)
  --timeout-ms N    give up on a request after N ms (default SVC_REQUEST_TIMEOUT_MS, else 30000)
  --no-retry        svc api: send each request once
  -h, --help        this help

Exit codes: 0 ok, 1 the API refused (4xx/5xx), 2 usage error, 3 server unreachable (refused, timed out).
`;

/** What the client commands accept besides their own options: where to connect and how long to wait. */
const OPERATOR_CLIENT_OPTIONS = ['json', 'url', 'admin-url', 'token', 'timeout-ms'];
const API_CLIENT_OPTIONS = ['json', 'url', 'api-key', 'api-secret', 'passphrase', 'no-retry', 'timeout-ms'];

/**
 * Where the client commands connect and how long they wait for an answer. Read here, with the credentials,
 * because they are the CLI's own settings (the server's are in config); a bad value is a usage error
 * naming the flag or variable it came from.
 */
class Connection {
  constructor(
    /** The server's configuration, read only when a URL is not given (a bad SVC_PORT must not block a client). */
    private readonly config: () => Readonly<Config>,
    private readonly values: Options,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** --url, SVC_URL, else the public listener of the local configuration. */
  get publicUrl(): string {
    return this.given('url', 'SVC_URL') ?? localUrl(this.config().listen);
  }

  /**
   * --admin-url, SVC_ADMIN_URL, else the public URL when one is given (one listener serves both), else the
   * local configuration's operator listener (SVC_ADMIN_LISTEN, or the public one).
   */
  get adminUrl(): string {
    const given = this.given('admin-url', 'SVC_ADMIN_URL');
    return (
      // As `svc serve` shows it ("operator API http://…/admin"): each command adds /admin/… itself, and the
      // address as shown went to /admin/admin/… (probe).
      given?.replace(/\/admin\/?$/, '') ??
      this.given('url', 'SVC_URL') ??
      localUrl(this.config().adminListen ?? this.config().listen)
    );
  }

  /** The SDK's per-request timeout, from --timeout-ms or SVC_REQUEST_TIMEOUT_MS; undefined: its default. */
  get timeoutMs(): number | undefined {
    const [name, raw] = this.flagOrVariable('timeout-ms', 'SVC_REQUEST_TIMEOUT_MS');
    if (raw === undefined || raw === '') return undefined;
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_TIMEOUT_MS)
      throw new UsageError(
        `${name}: must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got "${raw}"`,
      );
    return Number(raw);
  }

  /**
   * The flag's value when given, else the variable's, with where it came from. A flag given empty (`--admin-url "$X"`
   * with X unset) is refused, as every empty value is: read as left out, it also hid its variable, and the command, a
   * write perhaps, went to a third address, neither given (review). A variable set empty is left out, as is usual.
   */
  private flagOrVariable(
    flag: string,
    variable: string,
    leftOut = `${variable} or the default`,
  ): [string, string | undefined] {
    const fromFlag = this.values[flag];
    if (typeof fromFlag !== 'string') return [variable, this.env[variable]];
    if (fromFlag === '') throw new UsageError(`--${flag}: is empty (leave it out to use ${leftOut})`);
    return [`--${flag}`, fromFlag];
  }

  /**
   * A credential from its flag, else its variable (set empty, left out); undefined when neither. A flag given empty
   * is refused as the URLs' are: read as left out, `--token ""` said there was no token while the data dir held one,
   * and `--api-key ""` named as missing the SVC_API_KEY that was set (probe).
   */
  credential(flag: string, variable: string, leftOut = variable): string | undefined {
    return this.flagOrVariable(flag, variable, leftOut)[1] || undefined;
  }

  private given(flag: string, variable: string): string | undefined {
    const [name, raw] = this.flagOrVariable(flag, variable);
    if (raw === undefined || raw === '') return undefined;
    const refused = baseUrlFault(raw);
    if (refused) throw new UsageError(`${name}: ${URL_REFUSALS[refused.fault](refused.shown)}`);
    return raw;
  }
}

/** The CLI's words for each way a URL setting cannot be used (the SDK's rule, `baseUrlFault`). */
const URL_REFUSALS: Record<BaseUrlFault, (shown: string) => string> = {
  'not-http': (shown) => `"${shown}" is not a valid http:// or https:// URL`,
  // The URL is shown without what is refused (a password, a query that may hold a token): said as given with it, so
  // that the message does not read as refusing the very URL it shows (probe).
  credentials: (shown) =>
    `"${shown}" was given with a user name or password (not shown): give the URL without them`,
  query: (shown) =>
    `"${shown}" was given with a query or fragment (not shown): give the URL without it (each command adds its path after it)`,
  spaces: (shown) => `${JSON.stringify(shown)} must be given without spaces`,
};

function localUrl(at: Listen): string {
  return `http://${at.host.includes(':') ? `[${at.host}]` : at.host}:${at.port}`;
}

function adminClient(connection: Connection): AdminClient {
  const fromDataDir = () => {
    // SVC_DATA_DIR alone: a bad server setting (SVC_PORT) must not stop a client that has its URL.
    const tokenFile = path.join(dataDirOf(process.env), 'admin-token');
    if (!existsSync(tokenFile)) return undefined;
    try {
      return readFileSync(tokenFile, 'utf8').trim();
    } catch (error) {
      // The service writes it readable by its own user only: another user's svc gets EACCES (probe: a stack).
      const reason = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new UsageError(
        `no operator token: ${tokenFile} cannot be read (${reason}): run as the service's user, pass --token or set SVC_ADMIN_TOKEN`,
      );
    }
  };
  // SVC_ADMIN_TOKEN as config reads it, without reading the rest of the configuration.
  const resolved =
    connection.credential('token', 'SVC_ADMIN_TOKEN', "SVC_ADMIN_TOKEN or the data dir's admin-token") ??
    fromDataDir();
  if (!resolved)
    throw new UsageError(
      'no operator token: pass --token, set SVC_ADMIN_TOKEN, or run where the data dir is',
    );
  return new AdminClient(connection.adminUrl, resolved, { timeoutMs: connection.timeoutMs });
}

/**
 * A start (or migration) that failed for a reason outside the command line: the listener's address is
 * taken, the database refused, … Reported as one line naming the problem; the stack is logged at debug
 * level (SVC_LOG_LEVEL=debug).
 */
class StartupError extends Error {}

/**
 * The configuration, read (and validated) on first use: a client command reads it only for what its command
 * line and SVC_URL/SVC_ADMIN_URL/SVC_ADMIN_TOKEN do not give, so that a server setting it does not use (a bad
 * SVC_PORT in the shell) does not stop it.
 */
function configOnDemand(): () => Readonly<Config> {
  let config: Readonly<Config> | undefined;
  return () => (config ??= loadConfig());
}

/**
 * The server's modules (Fastify, PostgreSQL, the job queue) load only for the commands that run it, so
 * the operator and platform commands start in a fraction of the time.
 */
async function serverModules(config: Readonly<Config>) {
  // graphile-worker reads a config file of its own as it loads (`.graphile-workerrc*`, `.config/graphile-workerrc*`,
  // `graphile-worker.config.*`, a "graphile-worker" key of a package.json, from the working directory up to the home
  // directory), and throws on one it cannot parse or a value of the wrong type: said in one line, not as a stack
  // (review). Loaded first and alone, so that it throws once.
  await import('graphile-worker').catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    // Anything else (a dependency missing) is no config file's, and keeps its stack (review).
    if (!/^(Expected '\w+' to be a |YAML Error in |JSON Error in )/.test(message)) throw error;
    // Its stack at debug, as every start failure's (README Configuration): no logger is made yet. Only for the
    // failure said in one line: one rethrown above is printed with its stack already (it showed twice).
    if (config.logLevel === 'debug' || config.logLevel === 'trace')
      process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    // cosmiconfig names the file on the first line and says what is wrong on the next (review: only the first was kept).
    const said = message
      .split('\n')
      .map((line) => line.trim())
      .filter(Boolean)
      .slice(0, 2)
      .join(' ');
    throw new StartupError(
      `graphile-worker could not load its own config file: ${said} (it reads .graphile-workerrc*, .config/graphile-workerrc*, graphile-worker.config.* or "graphile-worker" in a package.json, from ${process.cwd()} up; svc takes its settings from SVC_ variables only: remove or mend it, or start svc from another directory)`,
    );
  });
  const [
    { createLogger },
    { openDatabase, startRuntime },
    { createStore },
    { migrate },
    { refuseSharedSessions },
  ] = await Promise.all([
    import('./logger.ts'),
    import('./runtime.ts'),
    import('../store/database.ts'),
    import('../store/migrate.ts'),
    import('../store/session-check.ts'),
  ]);
  return { createLogger, openDatabase, startRuntime, createStore, migrate, refuseSharedSessions };
}

/** Runs a start-up step; a failure becomes a one-line StartupError, its stack logged at debug level. */
async function starting<T>(
  what: string,
  config: Readonly<Config>,
  logger: { debug(obj: object, msg: string): void },
  step: () => Promise<T>,
): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    logger.debug({ err: error }, `${what} failed`);
    throw new StartupError(`${what} failed: ${startupProblem(error, config)}`);
  }
}

async function serve(config: Readonly<Config>): Promise<void> {
  checkServing(config);
  outputIsOptional = true;
  const { createLogger, startRuntime } = await serverModules(config);
  const logger = createLogger(config.logLevel);
  // A rejection nobody handles would end the process, and with role `all` the API with it. graphile-worker
  // completes and fails jobs without awaiting them, so a database that drops while a job runs rejects there:
  // logged, and the job, left locked by this live process, is unlocked by its own reaper after 30 s and runs again
  // (src/jobs/worker-liveness.ts; jobs are at least once and idempotent).
  process.on('unhandledRejection', (reason) => {
    logger.error({ err: reason }, 'unhandled promise rejection; the process carries on');
  });
  // A signal during the start (the embedded PostgreSQL takes seconds) is kept and acted on once the runtime
  // is up, so that its shutdown stops that PostgreSQL too; Node's default would end the process and leave it
  // running, holding the data dir.
  // Bounded, though: a start that cannot finish (waiting for another instance's migrations, or for a table
  // lock) ignored its supervisor's stop for as long as it waited (review). It gets SVC_SHUTDOWN_TIMEOUT_MS
  // from the signal, as a running instance does, then the process ends.
  const { result: runtime, handOver } = await keepingStops(config, logger, {
    kept: 'stop asked during the start: stopping once started',
    timedOut: 'the start did not finish within SVC_SHUTDOWN_TIMEOUT_MS of the stop; exiting',
    step: () => starting('svc serve', config, logger, () => startRuntime(config, { logger })),
  });
  const lines = [`svc-platform ${config.env} (${config.role})`];
  if (runtime.url) lines.push(`  public API   ${runtime.url}`, `  docs         ${runtime.url}/docs`);
  if (runtime.adminUrl) {
    lines.push(`  operator API ${runtime.adminUrl}/admin`);
    // README Operations: tokens stay out of the logs. The quick start's token, generated by the service and
    // kept in its data dir, is shown so that it can be used; one the operator set is not repeated.
    const generated = runtime.secrets.fromDataDir.includes('SVC_ADMIN_TOKEN');
    lines.push(`  admin token  ${generated ? runtime.secrets.adminToken : '(from SVC_ADMIN_TOKEN)'}`);
  }
  lines.push(
    `  database     ${config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL in ${config.dataDir}`}`,
  );
  if (runtime.opsUrl) lines.push(`  metrics      ${runtime.opsUrl}/metrics`);
  if (runtime.worker) lines.push('  worker       running');

  // DESIGN §6: on SIGTERM stop accepting, finish in-flight requests and jobs, exit within the timeout.
  let stopping = false;
  /** `keptForMs`: a stop asked during the start, that long ago; the shutdown's bound counts from the signal. */
  const stop = (
    signal: string,
    { exitCode = EXIT.ok, keptForMs }: { exitCode?: number; keptForMs?: number } = {},
  ) => {
    if (stopping) return stopAgain(logger, signal);
    firstStop(logger, signal, 'shutting down');
    stopping = true;
    const force = setTimeout(
      () => {
        logger.error('shutdown timed out; exiting');
        process.exit(EXIT.failed);
      },
      Math.max(0, config.shutdownTimeoutMs - (keptForMs ?? 0)),
    );
    force.unref();
    // The drain is for a supervisor's stop (SIGTERM), not for Ctrl-C at a terminal; nor for a stop asked during
    // the start, while no load balancer had found the instance ready.
    const drainMs = signal === 'SIGTERM' && keptForMs === undefined ? config.shutdownDrainMs : 0;
    runtime.close({ drainMs, askedAgoMs: keptForMs }).then(
      () => process.exit(exitCode),
      () => process.exit(EXIT.failed),
    );
  };
  // The job runner ending on its own (a fatal error of the queue) would leave the process up with nothing
  // doing its background work: it stops, failed, for its supervisor to start it again.
  runtime.worker?.promise.catch((err: unknown) => {
    logger.error({ err }, 'the job runner failed; shutting down');
    stop('job runner failed', { exitCode: EXIT.failed });
  });
  handOver((signal, keptForMs) => stop(signal, { keptForMs }));
  if (stopping) return; // a stop asked during the start
  // Last: whoever waits for the banner (a supervisor, a test) may signal the process as soon as it shows.
  process.stdout.write(lines.join('\n') + '\n');
}

/** `svc webhooks listen`: a local verifying receiver (issue 4 point 6); runs until SIGINT or SIGTERM. */
async function listenForWebhooks(values: Record<string, unknown>): Promise<void> {
  // Given empty, it was not forgotten: said so, as every option given empty is (review).
  if (values.secret === '') throw new UsageError('--secret must not be empty');
  const secret = typeof values.secret === 'string' ? values.secret : '';
  if (!secret) throw new UsageError('--secret is required (the secret configured for the platform)');
  if (typeof values.port !== 'string') throw new UsageError('--port N is required (0 = any free port)');
  // Digits only: Number() read "" as 0 (any port) and " 0x7631" as 30257.
  const port = /^\d{1,5}$/.test(values.port) ? Number(values.port) : NaN;
  if (!(port <= 65535))
    throw new UsageError(`--port must be a port number 0-65535 (0 = any free port), got "${values.port}"`);
  const host = typeof values.host === 'string' ? values.host : undefined;
  // Node reads an empty host as every interface: the opposite of the default (127.0.0.1), so refused (review); so
  // are spaces around one, and an IPv6 address in the brackets of a URL, which were looked up as names.
  if (host !== undefined && (host.trim() !== host || host === '' || host.startsWith('[')))
    throw new UsageError(
      `--host must name an address or a host name (127.0.0.1 when left out; IPv6 without brackets, e.g. ::1), got ${JSON.stringify(host)}`,
    );
  const listener = await startWebhookListener({ port, host, secret, json: values.json === true }).catch(
    (error: NodeJS.ErrnoException & { address?: string; port?: number }) => {
      // A name that does not resolve reached the user as a stack trace (review).
      if (error.syscall === 'getaddrinfo')
        throw new StartupError(`--host: cannot resolve the host name "${host}" (${error.code})`);
      if (error.syscall !== 'listen' || !error.code) throw error;
      const problem =
        error.code === 'EADDRINUSE'
          ? 'the address is already in use (another process listens there)'
          : (LISTEN_PROBLEMS[error.code] ?? error.message);
      throw new StartupError(
        `--host/--port: cannot listen on ${listenPlace(error.address, error.port)}: ${problem}`,
      );
    },
  );
  const stop = () => void listener.close().then(() => process.exit(EXIT.ok));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

async function migrateOnly(config: Readonly<Config>): Promise<void> {
  const { createLogger, openDatabase, createStore, migrate, refuseSharedSessions } =
    await serverModules(config);
  const logger = createLogger(config.logLevel);
  // A stop (a supervisor's SIGTERM, a terminal's Ctrl-C) waits for the migration to end and the embedded PostgreSQL
  // to stop, as a start's does: Node's default ended the process and left that PostgreSQL running, holding the data
  // dir (probe). The cluster runs in a process group of its own, so that a Ctrl-C does not stop it under the
  // migration either. Past SVC_SHUTDOWN_TIMEOUT_MS from the signal, the cluster, once started, is stopped (a
  // migration under way ends within the smart shutdown's wait, or is rolled back); a start still under way is
  // waited for as long again, no longer (a hung one's cluster is signalled as svc exits, embedded-postgres.ts).
  let opened: ReturnType<typeof openDatabase> | undefined;
  const { result: applied, handOver } = await keepingStops(config, logger, {
    kept: 'stop asked during svc migrate: stopping once it has ended',
    timedOut: 'svc migrate did not end within SVC_SHUTDOWN_TIMEOUT_MS of the stop; exiting',
    step: () =>
      starting('svc migrate', config, logger, async () => {
        opened = openDatabase(config, logger, { ownProcessGroup: true });
        const { url, embedded } = await opened;
        const store = createStore(url, { max: 2 });
        try {
          await refuseSharedSessions(store.pool);
          return await migrate(store.pool, logger, { lockTimeoutMs: config.migrationLockTimeoutMs });
        } finally {
          await store.close();
          await embedded?.stop();
        }
      }),
    giveUp: () =>
      Promise.race([
        opened?.then(({ embedded }) => embedded?.stop()),
        new Promise((resolve) => setTimeout(resolve, config.shutdownTimeoutMs)),
      ]),
  });
  // Done: a stop now has nothing left to wait for, and the process ends once this is written.
  handOver(() => {});
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
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
    'admin-url': { type: 'string' },
    token: { type: 'string' },
    'timeout-ms': { type: 'string' },
    role: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  } as const;
  const stringOptions = new Set(
    Object.entries(options)
      .filter(([, o]) => o.type === 'string')
      .map(([name]) => name),
  );
  const { values, positionals, tokens } = parseArgs({
    args: negativeNumbersAsValues(argv, stringOptions),
    allowPositionals: true,
    options,
    tokens: true,
  });
  // parseArgs keeps the last of a repeated option that takes one value: "--amount 5 --amount 500" sent 500.
  // Refused, as everything else the CLI would otherwise silently ignore (review).
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    const repeatable = 'multiple' in options[token.name as keyof typeof options];
    if (seen.has(token.name) && !repeatable)
      throw new UsageError(`--${token.name} is given more than once; give it once`);
    seen.add(token.name);
  }
  if (values.help) {
    process.stdout.write(HELP);
    return EXIT.ok;
  }
  // With --json, every error is one JSON object; without, the help text says what there is to run. It goes to
  // stderr, as every usage error does: `svc > out` with no command left the help in the file and nothing on screen.
  if (positionals.length === 0) {
    if (values.json) throw new UsageError('no command given; see svc --help');
    process.stderr.write(HELP);
    return EXIT.usage;
  }
  const [first, second] = positionals;
  if (first === 'serve') {
    refuseOtherOptions(values, ['role'], 'svc serve');
    refuseExtraArguments(positionals.slice(1), 'svc serve', 'svc serve');
    if (values.role !== undefined && !(ROLES as readonly string[]).includes(values.role))
      throw new UsageError(`--role: must be one of ${ROLES.join(', ')}, got "${values.role}"`);
    await serve(loadConfig(values.role ? { ...process.env, SVC_ROLE: values.role } : process.env));
    return -1; // keeps running
  }
  if (first === 'migrate') {
    refuseOtherOptions(values, [], 'svc migrate');
    refuseExtraArguments(positionals.slice(1), 'svc migrate', 'svc migrate');
    await migrateOnly(loadConfig());
    return EXIT.ok;
  }
  const print = (result: unknown) =>
    process.stdout.write(
      values.json ? JSON.stringify(result) + '\n' : JSON.stringify(result, null, 2) + '\n',
    );
  if (first === 'demo') {
    refuseOtherOptions(values, OPERATOR_CLIENT_OPTIONS, 'svc demo');
    refuseExtraArguments(positionals.slice(1), 'svc demo', 'svc demo');
    const config = configOnDemand();
    const connection = new Connection(config, values);
    const admin = adminClient(connection);
    print(
      await runDemo(admin, {
        publicUrl: connection.publicUrl,
        timeoutMs: connection.timeoutMs,
      }),
    );
    return EXIT.ok;
  }
  if (first === 'webhooks' && second === 'listen') {
    refuseOtherOptions(values, ['port', 'secret', 'host', 'json'], 'svc webhooks listen');
    refuseExtraArguments(positionals.slice(2), 'svc webhooks listen', 'svc webhooks listen');
    await listenForWebhooks(values);
    return -1; // keeps running
  }
  if (first === 'api') {
    const { command, positionals: rest } = findApiCommand(positionals.slice(1));
    const name = `svc api ${positionals.slice(1, positionals.length - rest.length).join(' ')}`;
    refuseOtherOptions(values, [...API_CLIENT_OPTIONS, ...usageOptions(command.usage)], name);
    refuseExtraArguments(rest, command.usage, name);
    const connection = new Connection(configOnDemand(), values);
    // Credentials come from the command line or the environment, read here only (src/cli reads no env).
    const client = apiClient(
      {
        baseUrl: connection.publicUrl,
        apiKey: connection.credential('api-key', 'SVC_API_KEY'),
        apiSecret: connection.credential('api-secret', 'SVC_API_SECRET'),
        passphrase: connection.credential('passphrase', 'SVC_PASSPHRASE'),
        retry: values['no-retry'] !== true,
        timeoutMs: connection.timeoutMs,
      },
      {},
      command.unauthenticated ? 'unused' : 'required',
    );
    print(await command.run(client, rest, values));
    return EXIT.ok;
  }
  const command = OPERATOR_COMMANDS[`${first} ${second}`];
  if (!command) {
    // A group named without (or with an unknown) command: its commands listed, as `svc api` does.
    const group = [
      ...Object.keys(OPERATOR_COMMANDS),
      // Not an operator API call, so not among them (dispatched above).
      'webhooks listen',
    ]
      .filter((name) => name.startsWith(`${first} `))
      .map((name) => name.slice(first!.length + 1));
    if (group.length > 0 && positionals.length <= 2)
      throw new UsageError(
        `${second === undefined ? `svc ${first} needs a command` : `unknown command "svc ${first} ${second}"`}: ${group.join(', ')}; see svc --help`,
      );
    throw new UsageError(`unknown command "${positionals.join(' ')}"; see svc --help`);
  }
  refuseOtherOptions(
    values,
    [...OPERATOR_CLIENT_OPTIONS, ...usageOptions(command.usage)],
    `svc ${first} ${second}`,
  );
  refuseExtraArguments(positionals.slice(2), command.usage, `svc ${first} ${second}`);
  const config = configOnDemand();
  const client = adminClient(new Connection(config, values));
  const result = await command.run(client, positionals.slice(2), values).catch((error: unknown) => {
    throw noteWhereSeen(error, command.seenWith);
  });
  print(result);
  return EXIT.ok;
}

/**
 * node's parseArgs words for an unknown option run on into advice with an unbalanced quote (`as in '-- "--x"`):
 * said in ours. Its other messages are kept.
 */
function parseArgsMessage(error: Error & { code?: string }): string {
  const unknown = /^Unknown option '([^']*)'/.exec(error.message);
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown)
    return `unknown option ${unknown[1]}; see svc --help (a value starting with "-" goes after "--")`;
  return error.message;
}

/**
 * Runs a command and maps failures to readable messages (one JSON object with --json) and exit codes; -1
 * means "still serving".
 */
export async function runCli(argv: string[]): Promise<number> {
  const fail = (exitCode: number, text: string, json: FailureReport['json']) => {
    process.stderr.write((argv.includes('--json') ? JSON.stringify({ error: json }) : text) + '\n');
    return exitCode;
  };
  try {
    return await main(argv);
  } catch (error) {
    const code = (error as { code?: string }).code;
    // An SvcArgumentError is a command-line argument the SDK cannot send (`svc api trade ..`).
    if (
      error instanceof UsageError ||
      error instanceof ConfigError ||
      error instanceof SvcArgumentError ||
      code?.startsWith('ERR_PARSE_ARGS')
    ) {
      const message = parseArgsMessage(error as Error & { code?: string });
      return fail(EXIT.usage, `error: ${message}`, failureJson(message));
    }
    if (error instanceof StartupError)
      return fail(EXIT.failed, `error: ${error.message}`, failureJson(error.message));
    // An API's refusal, or no answer (refused, reset, timed out, bad port): status, errors, request id.
    const report = reportFailure(error);
    if (report) return fail(report.exitCode, report.text, report.json);
    // Anything else is a bug: its stack is what a report of it needs.
    process.stderr.write(`error: ${(error as Error).stack ?? String(error)}\n`);
    return EXIT.failed;
  }
}

/**
 * Whether the command goes on when its output cannot be written: a server's banner and logs are not its work, and a
 * reader gone during the start (a log pipe that died, `svc serve | head`) ended `svc serve` with exit 0, silent,
 * before it served, so that a supervisor that restarts failures did not (review).
 */
let outputIsOptional = false;

/** Runs the CLI as the process's command: `src/main/cli.ts` itself, or `bin/svc.mjs` (`npx svc`). */
export async function runAsCommand(argv: string[]): Promise<void> {
  // A reader that went away (`svc api trades | head -1`) ends the output, not in failure: without this, the
  // write's EPIPE was an uncaught error with a stack and exit 1 ("the API refused"), and `svc webhooks listen`
  // died at its next delivery. Any other failure to write (a full disk) says so on one line.
  let toldOutputLost = false;
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (outputIsOptional) {
      if (!toldOutputLost)
        process.stderr.write(
          `warning: stdout cannot be written (${error.code ?? error.message}): serving on\n`,
        );
      toldOutputLost = true;
      return;
    }
    if (error.code === 'EPIPE') process.exit(EXIT.ok);
    process.stderr.write(`error: cannot write the output: ${error.message}\n`);
    process.exit(EXIT.failed);
  });
  const code = await runCli(argv);
  if (code >= 0) process.exitCode = code;
}

const isEntry =
  process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isEntry) void runAsCommand(process.argv.slice(2));
