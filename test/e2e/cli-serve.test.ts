import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AdminClient } from '../../src/cli/admin-client.ts';
import type { IssuedApiKey, Participant, Platform } from '../../src/contract/admin.schemas.ts';
import { createClient } from '../../src/sdk/platform.ts';
import { createTestDatabase, createTestPool, type TestDatabase } from '../helpers/database.ts';
import { eventually, PROJECT_ROOT, runCli, startCli, type CliProcess } from '../helpers/service-process.ts';

/**
 * `svc serve` as an operator runs it: what its start banner shows of the admin token (README Operations:
 * tokens never reach the logs, except the quick start's generated one), a SEC1 signing key that works, and
 * start-up failures reported as one line naming the setting or the problem, with no stack.
 */
let database: TestDatabase;
const dataDirs: string[] = [];
const processes: CliProcess[] = [];

before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  for (const proc of processes) proc.kill();
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  await database?.drop();
});

const SECRET_KEY = randomBytes(32).toString('base64');

function env(overrides: Record<string, string> = {}): Record<string, string> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-serve-'));
  dataDirs.push(dataDir);
  return {
    SVC_DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    // One deployment on one database: every instance has the key that sealed its secrets.
    SVC_SECRET_KEY: SECRET_KEY,
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    SVC_WORKER_POLL_INTERVAL_MS: '100',
    ...overrides,
  };
}

/** Starts `svc serve` and waits for its banner (written at once, when the process is ready). */
async function serve(args: string[], vars: Record<string, string>): Promise<CliProcess> {
  const proc = startCli(['serve', ...args], vars);
  processes.push(proc);
  await proc.waitFor(/^ {2}database .+$/m, 60_000);
  return proc;
}

async function stop(proc: CliProcess): Promise<void> {
  proc.child.kill('SIGTERM');
  const { code, signal } = await proc.exited;
  assert.equal(code, 0, `${signal} ${proc.stderr()}`);
}

const STACK_FRAME = /^\s+at .+[:(]/m;

/** The public API's address, from a started serve's banner. */
const publicUrlOf = (proc: CliProcess) => /^ {2}public API +(\S+)$/m.exec(proc.stdout())![1]!;

/** A platform with a key and one participant, made through the operator API; `clientOf` signs with its key. */
async function platformWithParticipant(url: string, adminToken: string, name: string) {
  const admin = new AdminClient(url, adminToken);
  const platform = await admin.post<Platform>('/platforms', { name, ip_allowlist: [] });
  const key = await admin.post<IssuedApiKey>(`/platforms/${platform.platform_code}/api_keys`);
  const participant = await admin.post<Participant>('/participants', {
    platform_code: platform.platform_code,
    email: `${name.toLowerCase()}@example.com`,
    first_name: name,
    last_name: 'Participant',
  });
  const clientOf = (baseUrl: string) =>
    createClient({
      baseUrl,
      apiKey: key.api_key,
      apiSecret: key.api_secret,
      passphrase: key.passphrase,
      retry: false,
    });
  return { participant, clientOf };
}

describe('the admin token in the start banner', () => {
  test('one from SVC_ADMIN_TOKEN is never printed: the banner says where it came from', async () => {
    const token = `op-${randomBytes(12).toString('hex')}`;
    const proc = await serve(['--role', 'api'], env({ SVC_ADMIN_TOKEN: token }));
    assert.match(proc.stdout(), /^ {2}admin token {2}\(from SVC_ADMIN_TOKEN\)$/m);
    await stop(proc);
    assert.ok(!proc.stdout().includes(token), proc.stdout());
    assert.ok(!proc.stderr().includes(token), proc.stderr());
  });

  test('a generated one is printed (the quick start uses it), and is the one kept in the data dir', async () => {
    const vars = env({ SVC_ROLE: 'api' });
    const proc = await serve([], vars);
    const printed = /^ {2}admin token {2}(\S+)$/m.exec(proc.stdout())?.[1];
    assert.equal(printed, readFileSync(path.join(vars.SVC_DATA_DIR!, 'admin-token'), 'utf8').trim());
    await stop(proc);
  });

  test('a worker, which has no operator API, prints no admin token at all', async () => {
    for (const vars of [env({ SVC_ADMIN_TOKEN: `op-${randomBytes(12).toString('hex')}` }), env()]) {
      const proc = await serve(['--role', 'worker'], vars);
      await proc.waitFor(/^ {2}worker {7}running$/m);
      await stop(proc);
      assert.doesNotMatch(proc.stdout(), /admin token/);
      const token =
        vars.SVC_ADMIN_TOKEN ?? readFileSync(path.join(vars.SVC_DATA_DIR!, 'admin-token'), 'utf8').trim();
      assert.ok(!proc.stdout().includes(token) && !proc.stderr().includes(token), proc.stdout());
    }
  });
});

test('a SEC1 ("BEGIN EC PRIVATE KEY") signing key works: /.well-known/jwks.json and token calls answer', async () => {
  const privateKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const sec1 = privateKey.export({ type: 'sec1', format: 'pem' }).toString();
  assert.match(sec1, /^-----BEGIN EC PRIVATE KEY-----/);
  const token = `op-${randomBytes(12).toString('hex')}`;
  const proc = await serve(['--role', 'api'], env({ SVC_ADMIN_TOKEN: token, SVC_JWT_PRIVATE_KEY: sec1 }));
  const url = publicUrlOf(proc);
  const { participant, clientOf } = await platformWithParticipant(url, token, 'Sec1');
  const client = clientOf(url);

  const jwks = await client.funding.signingKeys();
  const expected = createPublicKey(privateKey).export({ format: 'jwk' });
  assert.deepEqual(
    jwks.keys.map((k) => [k.alg, k.x, k.y]),
    [['ES256', expected.x, expected.y]],
  );
  const issued = await client.funding.createClientToken({
    participant_code: participant.participant_code,
    permissions: ['fwc'],
  });
  assert.match(issued.token, /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/, 'a JWT was issued');
  await stop(proc);
  assert.doesNotMatch(proc.stdout() + proc.stderr(), /PKCS#8|statusCode":500/);
});

test('a JWT key rotation: with SVC_JWT_PREVIOUS_KEY, tokens the old key signed are published for and revocable', async () => {
  // Probe: a restart with a new key refused every token of the past hour, their revocation included (a 400 "not a
  // token issued by this service"), and /.well-known/jwks.json had dropped the key outside verifiers needed.
  const pkcs8 = () =>
    generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
  const [oldKey, newKey] = [pkcs8(), pkcs8()];
  const token = `op-${randomBytes(12).toString('hex')}`;
  const started = async (vars: Record<string, string>) => {
    const proc = await serve(['--role', 'api'], env({ SVC_ADMIN_TOKEN: token, ...vars }));
    return { proc, url: publicUrlOf(proc) };
  };
  const before = await started({ SVC_JWT_PRIVATE_KEY: oldKey });
  const { participant, clientOf } = await platformWithParticipant(before.url, token, 'Rotation');
  const issue = () =>
    clientOf(before.url).funding.createClientToken({
      participant_code: participant.participant_code,
      permissions: ['fwc'],
    });
  const [first, second] = [(await issue()).token, (await issue()).token];
  const oldKid = (await clientOf(before.url).funding.signingKeys()).keys[0]!.kid;
  await stop(before.proc);

  const after = await started({ SVC_JWT_PRIVATE_KEY: newKey, SVC_JWT_PREVIOUS_KEY: oldKey });
  const kids = (await clientOf(after.url).funding.signingKeys()).keys.map((k) => k.kid);
  assert.equal(kids.length, 2);
  assert.equal(kids[1], oldKid, 'the new key first, then the previous one');
  await clientOf(after.url).funding.revokeClientToken(first);
  await stop(after.proc);

  // Without it, the old key's tokens are no longer this service's.
  const without = await started({ SVC_JWT_PRIVATE_KEY: newKey });
  await assert.rejects(
    clientOf(without.url).funding.revokeClientToken(second),
    /not a token issued by this service/,
  );
  await stop(without.proc);
});

test('a misspelt setting is said at the start, with the setting it may mean (it kept its default unsaid)', async () => {
  const proc = await serve(['--role', 'api'], env({ SVC_WORKER_CONCURENCY: '50', SVC_NOT_OURS: 'x' }));
  await stop(proc);
  const warning = proc
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; variables?: string[] })
    .find((line) => line.msg?.startsWith('environment variables svc does not read'));
  assert.deepEqual(
    warning?.variables,
    ['SVC_NOT_OURS', 'SVC_WORKER_CONCURENCY (SVC_WORKER_CONCURRENCY?)'],
    proc.stdout(),
  );
});

test('a reader of its output gone during the start does not end it: it serves, and stops cleanly', async () => {
  // Review: the banner's EPIPE ended `svc serve` with exit 0 and nothing said, before it served, as the CLI's
  // commands end when `| head` has read enough; a supervisor that restarts failures left it down.
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = (holder.address() as AddressInfo).port;
  await new Promise((resolve) => holder.close(resolve));
  const proc = startCli(['serve', '--role', 'api'], env({ SVC_PORT: String(port), SVC_LOG_LEVEL: 'info' }));
  processes.push(proc);
  proc.child.stdout!.destroy(); // the reading end closes before anything is written
  const healthy = await eventually(
    async () => {
      if (proc.child.exitCode !== null) return `exited ${proc.child.exitCode}: ${proc.stderr()}`;
      return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.ok ? 'serving' : undefined;
    },
    60_000,
    'svc serve answering /healthz',
  );
  assert.equal(healthy, 'serving');
  assert.match(proc.stderr(), /^warning: stdout cannot be written \(EPIPE\): serving on$/m);
  await stop(proc);
});

test("graphile-worker's own setting (GRAPHILE_WORKER_SCHEMA) does not move the job queue: jobs still run", async () => {
  // Review: the queue's migrations and runner followed it to another schema while svc added jobs to
  // graphile_worker's, which nothing then ran (a settlement stayed `accepted`); a `.graphile-workerrc` up the
  // directory tree did the same.
  const vars = env({ GRAPHILE_WORKER_SCHEMA: 'svc_elsewhere' });
  const migrated = await runCli(['migrate'], vars);
  assert.equal(migrated.code, 0, migrated.stderr);
  const proc = await serve(['--role', 'worker'], vars);
  const pool = createTestPool({ connectionString: database.url, max: 1 });
  try {
    const added = await pool.query<{ id: string }>(
      "select id from graphile_worker.add_job('quotes.purge_expired', '{}'::json)",
    );
    const id = added.rows[0]!.id;
    const ran = await eventually(
      async () =>
        (await pool.query('select 1 from graphile_worker.jobs where id = $1', [id])).rowCount === 0
          ? true
          : undefined,
      30_000,
      'the job run by the worker',
    );
    assert.equal(ran, true);
    const elsewhere = await pool.query("select 1 from pg_namespace where nspname = 'svc_elsewhere'");
    assert.equal(elsewhere.rowCount, 0, 'no queue made in the other schema');
  } finally {
    await pool.end();
    await stop(proc);
  }
});

test("a malformed config file of graphile-worker's own is said in one line, not as a stack", async () => {
  // Review: graphile-worker reads it as it loads: `{"pollInterval":"fast"}`, or a file cut short, stopped
  // `svc migrate` with a stack.
  const cases: Array<[string, RegExp]> = [
    [
      '{"pollInterval":"fast"}',
      /^error: graphile-worker could not load its own config file: Expected 'pollInterval' to be a number \(or not set\), but received fast \(it reads \.graphile-workerrc\*, .*; svc takes its settings from SVC_ variables only/,
    ],
    [
      '{"pollInterval": ',
      /^error: graphile-worker could not load its own config file: YAML Error in \S+\.graphile-workerrc: unexpected end of the stream/,
    ],
  ];
  /** `svc migrate` run in a directory of its own holding graphile-worker's config file `name`: its exit and stderr. */
  const migrateBeside = async (name: string, text: string, settings: Record<string, string> = {}) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-graphile-rc-'));
    dataDirs.push(dir);
    writeFileSync(path.join(dir, name), text);
    const proc = startCli(['migrate'], env(settings), {
      entry: [path.join(PROJECT_ROOT, 'bin', 'svc.mjs')],
      cwd: dir,
    });
    processes.push(proc);
    return { code: (await proc.exited).code, stderr: proc.stderr() };
  };
  for (const [text, message] of cases) {
    const { code, stderr } = await migrateBeside('.graphile-workerrc', text);
    assert.equal(code, 1, stderr);
    assert.match(stderr, message);
    assert.equal(stderr.trim().split('\n').length, 1, stderr);
  }
  // Its stack at debug, as every start failure's.
  const debug = await migrateBeside('.graphile-workerrc', '{"schema": 5}', { SVC_LOG_LEVEL: 'debug' });
  assert.equal(debug.code, 1);
  assert.match(debug.stderr, STACK_FRAME);
  assert.match(
    debug.stderr,
    /^error: graphile-worker could not load its own config file: Expected 'schema' to be a string/m,
  );
  // Any other failure of its loading keeps its stack, printed once at debug too (it was written twice).
  const other = await migrateBeside('.graphile-workerrc.js', "throw new Error('boom from the rc file');\n", {
    SVC_LOG_LEVEL: 'debug',
  });
  assert.equal(other.code, 1, other.stderr);
  assert.match(other.stderr, STACK_FRAME);
  assert.equal(other.stderr.match(/boom from the rc file/g)?.length, 1, other.stderr);
});

describe('start-up failures: one line naming the problem, no stack', () => {
  test('a bad setting stops the start before anything runs (exit 2), naming the setting', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ SVC_PORT: '99999' }, /^error: SVC_PORT: "99999" is not a port number/],
      [{ SVC_ADMIN_LISTEN: '127.0.0.1:99999' }, /^error: SVC_ADMIN_LISTEN: "99999" is not a port number/],
      [{ SVC_LOG_LEVEL: 'verbose' }, /^error: SVC_LOG_LEVEL: must be one of fatal, error, warn, info/],
      [{ SVC_JWT_PRIVATE_KEY: 'garbage' }, /^error: SVC_JWT_PRIVATE_KEY: not an unencrypted private key/],
      [{ DATABASE_URL: 'notaurl' }, /^error: DATABASE_URL: not a URL/],
      [
        { SVC_PORT: '18480', SVC_ADMIN_LISTEN: '127.0.0.1:18480' },
        /^error: SVC_ADMIN_LISTEN: 127\.0\.0\.1:18480 is the public listener's address/,
      ],
      [{ SVC_ADMIN_LISTEN: '::1:18483' }, /^error: SVC_ADMIN_LISTEN: "::1:18483" is not host:port/],
      // A host that cannot be one: refused here, not at the listen after the migrations.
      [
        { SVC_HOST: '999.1.1.1' },
        /^error: SVC_HOST: "999\.1\.1\.1" is neither an IP address nor a host name/,
      ],
      [{ SVC_OPS_LISTEN: ' 127.0.0.1:18484' }, /^error: SVC_OPS_LISTEN: " 127\.0\.0\.1" is neither/],
    ];
    const results = await Promise.all(cases.map(([vars]) => runCli(['serve'], env(vars))));
    results.forEach((result, i) => {
      const [vars, pattern] = cases[i]!;
      assert.equal(result.code, 2, `${JSON.stringify(vars)}: ${result.stderr}`);
      assert.match(result.stderr, pattern);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.doesNotMatch(result.stderr, STACK_FRAME);
    });
  });

  test("a host name that does not resolve is named with its setting (the database's or a listener's)", async () => {
    const url = new URL(database.url);
    url.hostname = 'db.invalid';
    const [db, listener] = await Promise.all([
      runCli(['serve'], env({ DATABASE_URL: url.href })),
      runCli(['serve', '--role', 'api'], env({ SVC_ADMIN_LISTEN: 'admin.invalid:18485' })),
    ]);
    // ENOTFOUND, or EAI_AGAIN on a machine with no DNS server to ask.
    for (const [result, line] of [
      [
        db,
        /^error: svc serve failed: DATABASE_URL: cannot resolve the host name "db\.invalid" \(E[A-Z_]+\)$/,
      ],
      [
        listener,
        /^error: svc serve failed: SVC_ADMIN_LISTEN: cannot resolve the host name "admin\.invalid" \(E[A-Z_]+\)$/,
      ],
    ] as const) {
      assert.equal(result.code, 1, result.stderr);
      const lines = result.stderr.split('\n').filter((l) => l.startsWith('error'));
      assert.equal(lines.length, 1, result.stderr);
      assert.match(lines[0]!, line);
      assert.doesNotMatch(result.stderr, STACK_FRAME);
    }
  });

  test('a database that takes the connection and never answers is named too', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const url = new URL(database.url);
      url.port = String((silent.address() as AddressInfo).port);
      const result = await runCli(['serve'], env({ DATABASE_URL: url.href }));
      assert.equal(result.code, 1, result.stderr);
      const lines = result.stderr.split('\n').filter((l) => l.startsWith('error'));
      assert.equal(lines.length, 1, result.stderr);
      assert.match(lines[0]!, /^error: svc serve failed: DATABASE_URL: Connection terminated/);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  test('a database that will not take TLS where DATABASE_URL asks for it is named too', async () => {
    // Was "svc serve failed: The server does not support SSL connections", naming no setting (probe).
    const refusesTls = createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.write('N'));
    });
    await new Promise<void>((resolve) => refusesTls.listen(0, '127.0.0.1', resolve));
    try {
      const url = new URL(database.url);
      url.port = String((refusesTls.address() as AddressInfo).port);
      url.search = '?sslmode=verify-full';
      // svc migrate's first connection too (review: only serve's was named).
      for (const command of ['serve', 'migrate']) {
        const result = await runCli([command], env({ DATABASE_URL: url.href }));
        assert.equal(result.code, 1, result.stderr);
        const lines = result.stderr.split('\n').filter((l) => l.startsWith('error'));
        assert.deepEqual(lines, [
          `error: svc ${command} failed: DATABASE_URL: The server does not support SSL connections`,
        ]);
      }
    } finally {
      refusesTls.close();
    }
  });

  test(
    'a REDIS_URL naming a database its Redis does not have, or credentials it refuses, stops the start (exit 2)',
    {
      skip: process.env.REDIS_URL ? false : 'REDIS_URL not set: no Redis to ask',
    },
    async () => {
      // The limit was shared in database 0, silently, with /readyz saying Redis was fine (review).
      const url = new URL(process.env.REDIS_URL!);
      url.pathname = '/99';
      const result = await runCli(['serve'], env({ REDIS_URL: url.href }));
      assert.equal(result.code, 2, result.stderr);
      assert.match(
        result.stderr,
        /^error: REDIS_URL: Redis refused SELECT 99 \(ERR DB index is out of range\)\n$/,
      );
      // Credentials it refuses, in database 0 too (probe: an outage, this instance limiting alone in memory).
      url.pathname = '/0';
      url.username = 'no-such-user';
      url.password = 'not-said';
      const refused = await runCli(['serve'], env({ REDIS_URL: url.href }));
      assert.equal(refused.code, 2, refused.stderr);
      assert.equal(
        refused.stderr,
        'error: REDIS_URL: Redis refused the credentials (WRONGPASS invalid username-password pair or user is disabled.)\n',
      );
    },
  );

  test('--role names the option, not SVC_ROLE', async () => {
    const result = await runCli(['serve', '--role', 'bogus'], env());
    assert.equal(result.code, 2);
    assert.equal(result.stderr, 'error: --role: must be one of api, worker, all, got "bogus"\n');
  });

  test('a data dir that cannot be made names SVC_DATA_DIR and why (was node\'s "ENOTDIR: not a directory, mkdir")', async () => {
    const vars = env();
    const file = path.join(vars.SVC_DATA_DIR!, 'a-file');
    writeFileSync(file, '');
    const result = await runCli(['serve'], { ...vars, SVC_DATA_DIR: path.join(file, 'data') });
    assert.equal(result.code, 1);
    assert.equal(
      result.stderr,
      `error: svc serve failed: SVC_DATA_DIR: cannot create ${path.join(file, 'data')}: ${file} is not a directory\n`,
    );
  });

  describe('a listener whose address is taken (exit 1), naming its setting', () => {
    let holder: Server;
    let port: number;
    before(async () => {
      holder = createServer();
      await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
      port = (holder.address() as AddressInfo).port;
    });
    after(() => new Promise<void>((resolve) => holder.close(() => resolve())));

    test('the public listener (SVC_HOST/SVC_PORT), the operator one (SVC_ADMIN_LISTEN) and the ops one (SVC_OPS_LISTEN)', async () => {
      const [pub, admin, ops] = await Promise.all([
        runCli(['serve', '--role', 'api'], env({ SVC_PORT: String(port) })),
        runCli(['serve', '--role', 'api'], env({ SVC_ADMIN_LISTEN: `127.0.0.1:${port}` })),
        runCli(['serve', '--role', 'api'], env({ SVC_OPS_LISTEN: `127.0.0.1:${port}` })),
      ]);
      for (const [result, setting] of [
        [pub, 'SVC_HOST/SVC_PORT'],
        [admin, 'SVC_ADMIN_LISTEN'],
        [ops, 'SVC_OPS_LISTEN'],
      ] as const) {
        assert.equal(result.code, 1, result.stderr);
        // Node's own warnings (deprecations) may share stderr; the failure is one line of its own.
        const lines = result.stderr.split('\n').filter((line) => line.startsWith('error'));
        assert.deepEqual(lines, [
          `error: svc serve failed: ${setting}: cannot listen on 127.0.0.1:${port}: the address is already in use (another process, or another of these settings, listens there)`,
        ]);
        assert.doesNotMatch(result.stderr, STACK_FRAME);
      }
    });

    test('a worker-side start fails before its worker starts: no jobs, no webhook partitions taken', async () => {
      const result = await runCli(
        ['serve', '--role', 'all'],
        env({ SVC_PORT: String(port), SVC_LOG_LEVEL: 'info' }),
      );
      assert.equal(result.code, 1, result.stderr);
      const output = result.stdout + result.stderr;
      assert.match(output, /the address is already in use/);
      // Started and stopped, its delivery logs both; its job runner would have taken the jobs that were due.
      assert.doesNotMatch(output, /webhook delivery stopping|webhook partitions taken/, output.slice(-2000));
    });
  });
});
