import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { WebhookNotification } from '../../src/contract/webhooks.schemas.ts';
import { freePort } from '../../src/store/embedded-postgres.ts';
import { runCli } from '../helpers/service-process.ts';
import { startTestService, TEST_ADMIN_TOKEN, type TestService } from '../helpers/test-service.ts';

/**
 * Where the CLI connects and what it says when that goes wrong: the operator API on its own listener
 * (`--admin-url`/`SVC_ADMIN_URL`), answers with no body, servers that never answer (`--timeout-ms`), no
 * server at all, and command lines the CLI refuses before it sends anything (README "CLI": exit codes
 * 1 refused, 2 usage, 3 no server answered; one JSON object on stderr with --json).
 */
const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-connection-'));
const base = { SVC_DATA_DIR: tmp, SVC_LOG_LEVEL: 'warn', SVC_ADMIN_URL: undefined };
after(() => rmSync(tmp, { recursive: true, force: true }));

const STACK_FRAME = /^\s+at .+[:(]/m;

/** The one JSON error object of --json on stderr. */
function jsonError(stderr: string): { status: number | null; errors: string[]; body: unknown } {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, stderr);
  return (JSON.parse(lines[0]!) as { error: { status: number | null; errors: string[]; body: unknown } })
    .error;
}

/** A local server for the failure cases, on a free port; `close` also ends the connections it holds. */
async function listen(
  server: Server | ReturnType<typeof createHttpServer>,
): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('the operator API on its own listener (SVC_ADMIN_LISTEN)', () => {
  let svc: TestService;
  let adminUrl: string;
  before(async () => {
    svc = await startTestService({ env: { SVC_ADMIN_LISTEN: '127.0.0.1:0' } });
    adminUrl = svc.runtime.adminUrl!;
    assert.notEqual(adminUrl, svc.url);
  });
  after(() => svc?.close());

  test('operator commands go to --admin-url / SVC_ADMIN_URL; the public URL serves no /admin', async () => {
    const viaEnv = await runCli(['platforms', 'list', '--json'], {
      ...base,
      SVC_URL: svc.url,
      SVC_ADMIN_URL: adminUrl,
      SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    const viaFlag = await runCli(
      ['platforms', 'list', '--url', svc.url, '--admin-url', adminUrl, '--token', TEST_ADMIN_TOKEN],
      base,
    );
    assert.equal(viaFlag.code, 0, viaFlag.stderr);
    // The address as `svc serve` shows it, with its /admin (probe: it went to /admin/admin/platforms, a 404).
    for (const shown of [`${adminUrl}/admin`, `${adminUrl}/admin/`]) {
      const banner = await runCli(
        ['platforms', 'list', '--admin-url', shown, '--token', TEST_ADMIN_TOKEN],
        base,
      );
      assert.equal(banner.code, 0, banner.stderr);
      const env = await runCli(['platforms', 'list'], {
        ...base,
        SVC_ADMIN_URL: shown,
        SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      });
      assert.equal(env.code, 0, env.stderr);
    }
    // Unset, the operator URL is the public one (one listener serves both by default): here, refused.
    const unset = await runCli(['platforms', 'list', '--json'], {
      ...base,
      SVC_URL: svc.url,
      SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    });
    assert.equal(unset.code, 1, unset.stderr);
    assert.ok([401, 403].includes(jsonError(unset.stderr).status!), unset.stderr);
    // --json prints no hint line: the report says it with a field (probe: a script was not told).
    assert.equal(
      (jsonError(unset.stderr) as { not_operator_api?: boolean }).not_operator_api,
      true,
      unset.stderr,
    );
    const told = await runCli(['platforms', 'list'], {
      ...base,
      SVC_URL: svc.url,
      SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    });
    assert.match(told.stderr, /no operator API answered: is --admin-url/);
  });

  test('a client command with its URLs given does not read the server settings: a bad SVC_PORT does not stop it', async () => {
    // The shell of someone who also runs a server; it used to fail with "SVC_PORT: must be …" (exit 2).
    const shell = {
      ...base,
      SVC_PORT: 'not-a-port',
      // GET /time is not authenticated, but the client signs every request.
      SVC_API_KEY: 'k',
      SVC_API_SECRET: 's',
      SVC_PASSPHRASE: 'p',
    };
    const operator = await runCli(['platforms', 'list', '--json'], {
      ...shell,
      SVC_URL: svc.url,
      SVC_ADMIN_URL: adminUrl,
      SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    });
    assert.equal(operator.code, 0, operator.stderr);
    // The token from the data dir, as the operator of the quick start has it: SVC_DATA_DIR alone is read.
    const dataDir = mkdtempSync(path.join(tmp, 'data-'));
    writeFileSync(path.join(dataDir, 'admin-token'), TEST_ADMIN_TOKEN);
    const fromDataDir = await runCli(['platforms', 'list', '--json'], {
      ...shell,
      SVC_DATA_DIR: dataDir,
      SVC_URL: svc.url,
      SVC_ADMIN_URL: adminUrl,
    });
    assert.equal(fromDataDir.code, 0, fromDataDir.stderr);
    // One it cannot read (another user's, mode 0600; here a directory, as root reads any file): missing
    // credentials, said in one line, not a stack (probe).
    const unreadable = mkdtempSync(path.join(tmp, 'data-'));
    mkdirSync(path.join(unreadable, 'admin-token'));
    for (const json of [[], ['--json']]) {
      const refused = await runCli(['platforms', 'list', ...json], {
        ...shell,
        SVC_DATA_DIR: unreadable,
        SVC_URL: svc.url,
        SVC_ADMIN_URL: adminUrl,
      });
      assert.equal(refused.code, 2, refused.stderr);
      assert.doesNotMatch(refused.stderr, STACK_FRAME);
      const message = json.length ? jsonError(refused.stderr).errors.join() : refused.stderr;
      assert.match(message, /admin-token cannot be read \(EISDIR\)/);
    }
    await svc.newPlatform(); // its allow-list lets this machine through the firewall
    const time = await runCli(['api', 'time', '--url', svc.url], shell);
    assert.equal(time.code, 0, time.stderr);
    // Without a URL the server's settings are what it has to go on, and a bad one is still named.
    const local = await runCli(['api', 'time'], { ...shell, SVC_URL: undefined });
    assert.equal(local.code, 2, local.stderr);
    assert.match(local.stderr, /SVC_PORT/);
  });

  test('svc demo makes its public calls on, and points at, the public URL', async () => {
    const result = await runCli(['demo', '--json'], {
      ...base,
      SVC_URL: svc.url,
      SVC_ADMIN_URL: adminUrl,
      SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    });
    assert.equal(result.code, 0, result.stderr);
    const demo = JSON.parse(result.stdout) as {
      base_url: string;
      admin_url: string;
      api_key: string;
      api_secret: string;
      passphrase: string;
      fund_quote: { deposit_address?: string; error?: string };
      trading: { with_the_cli: string[] };
    };
    assert.equal(demo.base_url, svc.url);
    assert.equal(demo.admin_url, adminUrl);
    // The fund quote is a signed public call: it worked.
    assert.ok(demo.fund_quote.deposit_address, JSON.stringify(demo.fund_quote));
    assert.ok(
      demo.trading.with_the_cli[0]!.startsWith(`export SVC_URL=${svc.url} SVC_ADMIN_URL=${adminUrl} `),
      demo.trading.with_the_cli[0],
    );
    // The printed credentials and URL work for `svc api`.
    const time = await runCli(['api', 'time', '--json'], {
      ...base,
      SVC_URL: demo.base_url,
      SVC_API_KEY: demo.api_key,
      SVC_API_SECRET: demo.api_secret,
      SVC_PASSPHRASE: demo.passphrase,
    });
    assert.equal(time.code, 0, time.stderr);
  });
});

describe('a live server: command lines refused before anything is sent', () => {
  let svc: TestService;
  let env: Record<string, string | undefined>;
  before(async () => {
    svc = await startTestService();
    env = { ...base, SVC_URL: svc.url, SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  });
  after(() => svc?.close());

  test('prices set refuses a malformed PAIR=PRICE (exit 2) and sets nothing', async () => {
    const cases = await Promise.all([
      runCli(['prices', 'set', 'BTC/USD=1=2'], env),
      runCli(['prices', 'set', 'ETH/USD=3000', '=5'], env),
      runCli(['prices', 'set', 'ETH/USD=3000', 'ETH/USD=3100'], env),
    ]);
    assert.deepEqual(
      cases.map((c) => c.code),
      [2, 2, 2],
      cases.map((c) => c.stderr).join('\n'),
    );
    assert.equal(cases[0]!.stderr, 'error: "BTC/USD=1=2" is not PAIR=PRICE (e.g. BTC/USD=65000.25)\n');
    assert.match(cases[1]!.stderr, /"=5" is not PAIR=PRICE/);
    assert.match(cases[2]!.stderr, /ETH\/USD is given twice/);
    const prices = await runCli(['prices', 'list', '--json'], env);
    assert.deepEqual(JSON.parse(prices.stdout), []);
  });

  test('an option the command does not take is a usage error naming it (it used to be ignored)', async () => {
    const cases = await Promise.all([
      runCli(['platforms', 'list', '--name', 'x'], env),
      runCli(['api', 'time', '--token', 'x'], env),
      runCli(['migrate', '--role', 'api'], env),
      runCli(['serve', '--url', svc.url], env),
      runCli(['platforms', 'list', '--name', 'x', '--json'], env),
    ]);
    assert.deepEqual(
      cases.map((c) => c.code),
      [2, 2, 2, 2, 2],
      cases.map((c) => c.stderr).join('\n'),
    );
    assert.equal(cases[0]!.stderr, 'error: --name: not an option of "svc platforms list"; see svc --help\n');
    assert.match(cases[1]!.stderr, /^error: --token: not an option of "svc api time"/);
    assert.match(cases[2]!.stderr, /--role: not an option of "svc migrate"/);
    assert.match(cases[3]!.stderr, /--url: not an option of "svc serve"/);
    assert.deepEqual(jsonError(cases[4]!.stderr).errors, [
      '--name: not an option of "svc platforms list"; see svc --help',
    ]);
  });

  test('webhooks notifications --page-size is passed on', async () => {
    const { platform } = await svc.newPlatform();
    const code = platform.platform_code;
    await svc.admin.put(`/platforms/${code}/webhook`, { url: 'http://127.0.0.1:9/hooks', secret: 's3cret' });
    const participant = (await svc.newParticipant(code)).participant_code;
    await svc.admin.patch(`/participants/${participant}`, { status: 'locked' });
    await svc.admin.patch(`/participants/${participant}`, { status: 'approved' });
    const list = async (...extra: string[]) => {
      const result = await runCli(['webhooks', 'notifications', code, '--json', ...extra], env);
      assert.equal(result.code, 0, result.stderr);
      return JSON.parse(result.stdout) as {
        notifications: WebhookNotification[];
        page: number;
        page_size: number;
        total_pages: number;
        count: number;
      };
    };
    const all = await list();
    assert.ok(all.notifications.length >= 2);
    // With where the page is, so the operator sees there is more.
    const first = await list('--page-size', '1');
    assert.equal(first.notifications.length, 1);
    assert.deepEqual(
      [first.page, first.page_size, first.total_pages, first.count],
      [1, 1, all.count, all.count],
    );
    // A filter given empty is a usage error, as any option given empty (audit: the server's 400, exit 1).
    for (const option of ['--status', '--type', '--resource']) {
      const result = await runCli(['webhooks', 'notifications', code, '--json', option, ''], env);
      assert.equal(result.code, 2, result.stderr);
      assert.deepEqual(jsonError(result.stderr).errors, [`${option} must not be empty`]);
    }
  });
});

describe('no usable answer', () => {
  let emptyUrl: string;
  let portalUrl: string;
  let silentUrl: string;
  const servers: Array<{ close(): Promise<void> }> = [];
  before(async () => {
    // Answers 502 with no body, as a proxy with no upstream does.
    const empty = await listen(createHttpServer((_req, res) => res.writeHead(502).end()));
    // Answers 200 with a page, as a captive portal does.
    const portal = await listen(
      createHttpServer((_req, res) =>
        res.writeHead(200, { 'content-type': 'text/html' }).end('<p>hello</p>'),
      ),
    );
    servers.push(portal);
    portalUrl = portal.url;
    // Accepts connections and never answers.
    const silent = await listen(createTcpServer((socket) => socket.on('data', () => {})));
    servers.push(empty, silent);
    [emptyUrl, silentUrl] = [empty.url, silent.url];
  });
  after(() => Promise.all(servers.map((server) => server.close())));

  test('a refusal with an empty body: exit 1, the status, no TypeError or stack; JSON under --json', async () => {
    const [text, json] = await Promise.all([
      runCli(['platforms', 'list', '--url', emptyUrl, '--token', 'x'], base),
      runCli(['platforms', 'list', '--url', emptyUrl, '--token', 'x', '--json'], base),
    ]);
    assert.equal(text.code, 1, text.stderr);
    assert.equal(text.stderr, 'error: the operator API answered 502 (empty body)\n');
    assert.equal(json.code, 1, json.stderr);
    assert.deepEqual(jsonError(json.stderr), { status: 502, request_id: null, errors: [], body: null });
  });

  test('a server that never answers: the request times out (--timeout-ms, SVC_REQUEST_TIMEOUT_MS), exit 3', async () => {
    const [operator, api, apiJson] = await Promise.all([
      runCli(['platforms', 'list', '--url', silentUrl, '--token', 'x', '--timeout-ms', '200'], base),
      runCli(['api', 'time', '--no-retry'], {
        ...base,
        SVC_URL: silentUrl,
        SVC_REQUEST_TIMEOUT_MS: '200',
        SVC_API_KEY: 'k',
        SVC_API_SECRET: 's',
        SVC_PASSPHRASE: 'p',
      }),
      runCli(['demo', '--json', '--url', silentUrl, '--token', 'x', '--timeout-ms', '200'], base),
    ]);
    assert.equal(operator.code, 3, operator.stderr);
    assert.equal(
      operator.stderr,
      `error: server unreachable at ${silentUrl} (GET /admin/platforms: timed out)\n`,
    );
    assert.equal(api.code, 3, api.stderr);
    assert.equal(api.stderr, `error: server unreachable at ${silentUrl} (GET /time: timed out)\n`);
    assert.equal(apiJson.code, 3, apiJson.stderr);
    assert.deepEqual(jsonError(apiJson.stderr).errors, ['POST /admin/platforms: timed out']);
  });

  test('an operator write with no answer, or a 502, says its outcome is unknown; one never sent does not', async () => {
    const port = await freePort();
    const adjust = ['balances', 'adjust', '--participant', 'ABC123', '--label', 'general', '--asset', 'USD'];
    const [silent, gateway, refused] = await Promise.all([
      runCli([...adjust, '--amount', '7', '--url', silentUrl, '--token', 'x', '--timeout-ms', '200'], base),
      runCli([...adjust, '--amount', '7', '--url', emptyUrl, '--token', 'x', '--json'], base),
      runCli([...adjust, '--amount', '7', '--url', `http://127.0.0.1:${port}`, '--token', 'x'], base),
    ]);
    assert.equal(silent.code, 3, silent.stderr);
    assert.equal(
      silent.stderr,
      `error: server unreachable at ${silentUrl} (POST /admin/balances: timed out)\n` +
        // Where an operator's write is recorded, not the platform's trades (probe); this write's, not every read but
        // the one that shows it (review: it named platforms, keys and prices).
        '  outcome unknown: the request may have been carried out; look with svc balances show PARTICIPANT before repeating it\n',
    );
    assert.equal(gateway.code, 1, gateway.stderr);
    assert.equal((jsonError(gateway.stderr) as { outcome_unknown?: boolean }).outcome_unknown, true);
    assert.equal(refused.code, 3, refused.stderr);
    assert.doesNotMatch(refused.stderr, /outcome unknown/);
    // A port fetch will not use (6000, X11's) is never reached either.
    const badPort = await runCli(
      [...adjust, '--amount', '7', '--url', 'http://127.0.0.1:6000', '--token', 'x'],
      base,
    );
    assert.equal(badPort.code, 3, badPort.stderr);
    assert.match(badPort.stderr, /bad port/);
    assert.doesNotMatch(badPort.stderr, /outcome unknown/);
    // A 200 that is not the operator API's answer: the write may have reached it or not.
    const portal = await runCli([...adjust, '--amount', '7', '--url', portalUrl, '--token', 'x'], base);
    assert.equal(portal.code, 1, portal.stderr);
    assert.match(
      portal.stderr,
      /^error: the operator API answered 200: <p>hello<\/p>\n {2}no operator API answered: is --admin-url \(SVC_ADMIN_URL\) its address .*\n {2}outcome unknown: /,
    );
    const list = await runCli(['platforms', 'list', '--url', portalUrl, '--token', 'x'], base);
    assert.doesNotMatch(list.stderr, /outcome unknown/);
  });

  test("svc demo against a server whose 2xx has a `message` but not the operator API's fields: exit 1, said so", async () => {
    // Probe: the demo went on with `undefined` for the platform and its key, and ended as a usage error (exit 2),
    // "apiKey must be a string, got undefined".
    // Review: a `null` message threw a TypeError with its stack, and a 201 was reported as a 200.
    for (const message of ['{}', 'null']) {
      const hollow = await listen(
        createHttpServer((_req, res) =>
          res.writeHead(201, { 'content-type': 'application/json' }).end(`{"message":${message}}`),
        ),
      );
      servers.push(hollow);
      const demo = await runCli(['demo', '--url', hollow.url, '--token', 'x'], base);
      assert.equal(demo.code, 1, demo.stderr);
      assert.ok(
        demo.stderr.startsWith(
          `error: the operator API answered 201: {"message":${message}}\n  no operator API answered: is --admin-url`,
        ),
        demo.stderr,
      );
      assert.match(demo.stderr, /\n {2}outcome unknown: /);
      assert.doesNotMatch(demo.stderr, /undefined|TypeError/);
    }
  });

  test('no server, or a port fetch refuses: exit 3 with one line (JSON under --json)', async () => {
    const port = await freePort();
    const [refused, refusedJson, badPort] = await Promise.all([
      runCli(['platforms', 'list', '--url', `http://127.0.0.1:${port}`, '--token', 'x'], base),
      runCli(['platforms', 'list', '--url', `http://127.0.0.1:${port}`, '--token', 'x', '--json'], base),
      runCli(['platforms', 'list', '--url', 'http://127.0.0.1:6000', '--token', 'x'], base),
    ]);
    for (const result of [refused, refusedJson, badPort]) {
      assert.equal(result.code, 3, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.doesNotMatch(result.stderr, STACK_FRAME);
    }
    // Where it looked, so that a wrong port or URL shows (review: the quick start's second terminal).
    assert.ok(
      refused.stderr.startsWith(
        `error: server unreachable at http://127.0.0.1:${port} (GET /admin/platforms: `,
      ),
      refused.stderr,
    );
    assert.match(refused.stderr, /ECONNREFUSED/);
    assert.match(jsonError(refusedJson.stderr).errors[0]!, /ECONNREFUSED/);
    assert.match(badPort.stderr, /^error: server unreachable at http:\/\/127\.0\.0\.1:6000 \(.*bad port/);
  });

  test('a URL or timeout that cannot be used is a usage error naming where it came from', async () => {
    const cases = await Promise.all([
      runCli(['platforms', 'list', '--url', 'http://127.0.0.1:99999', '--token', 'x'], base),
      runCli(['platforms', 'list', '--token', 'x'], { ...base, SVC_ADMIN_URL: 'ftp://host' }),
      runCli(['platforms', 'list', '--token', 'x', '--timeout-ms', 'soon'], base),
      runCli(['api', 'time'], { ...base, SVC_REQUEST_TIMEOUT_MS: '0' }),
      // fetch refuses credentials in a URL: it was "server unreachable", with the password echoed (probe).
      runCli(['api', 'time', '--url', 'http://admin:hunter2@127.0.0.1:8080'], base),
      // A path segment the URL parser would climb: it went to POST /admin/api_keys (probe).
      runCli(['keys', 'create', '..', '--token', 'x', '--url', 'http://127.0.0.1:9'], base),
      // Not a usable URL, with credentials in it: they are not repeated either (review).
      runCli(['api', 'time', '--url', 'http://admin:hunter2@127.0.0.1:99999'], base),
      // The path goes after it: a query or fragment sent every call elsewhere, an "invalid signature" (probe).
      runCli(['api', 'time', '--url', 'http://127.0.0.1:8080#prod'], base),
      runCli(['platforms', 'list', '--token', 'x'], {
        ...base,
        SVC_ADMIN_URL: 'http://127.0.0.1:8081/?token=s3cret',
      }),
      // URL() trims spaces, but the path went after them (review: an env file's trailing space).
      runCli(['platforms', 'list', '--token', 'x'], { ...base, SVC_ADMIN_URL: 'http://127.0.0.1:8081/ ' }),
    ]);
    assert.deepEqual(
      cases.map((c) => c.code),
      [2, 2, 2, 2, 2, 2, 2, 2, 2, 2],
      cases.map((c) => c.stderr).join('\n'),
    );
    assert.match(cases[0]!.stderr, /^error: --url: "http:\/\/127\.0\.0\.1:99999" is not a valid http/);
    assert.match(cases[1]!.stderr, /^error: SVC_ADMIN_URL: "ftp:\/\/host" is not a valid http/);
    assert.match(cases[2]!.stderr, /^error: --timeout-ms: must be a whole number of milliseconds/);
    assert.match(cases[3]!.stderr, /^error: SVC_REQUEST_TIMEOUT_MS: must be a whole number/);
    assert.match(
      cases[4]!.stderr,
      /^error: --url: "http:\/\/127\.0\.0\.1:8080\/" was given with a user name or password \(not shown\): give the URL without them$/m,
    );
    assert.doesNotMatch(cases[4]!.stderr, /hunter2/);
    assert.match(cases[5]!.stderr, /^error: <PLATFORM>: "\.\." cannot be sent as a path segment/);
    assert.match(cases[6]!.stderr, /^error: --url: "http:\/\/…@127\.0\.0\.1:99999" is not a valid http/);
    assert.equal(
      cases[7]!.stderr.trim(),
      'error: --url: "http://127.0.0.1:8080/" was given with a query or fragment (not shown): give the URL without it (each command adds its path after it)',
    );
    assert.equal(
      cases[8]!.stderr.trim(),
      'error: SVC_ADMIN_URL: "http://127.0.0.1:8081/" was given with a query or fragment (not shown): give the URL without it (each command adds its path after it)',
    );
    assert.equal(
      cases[9]!.stderr.trim(),
      'error: SVC_ADMIN_URL: "http://127.0.0.1:8081/ " must be given without spaces',
    );
  });

  test('an option given empty is refused, not read as left out: that hid its variable', async () => {
    // Review: `--admin-url ""` (a "$X" of nothing) sent the command to SVC_URL's listener, neither address given.
    const cases = await Promise.all([
      runCli(['platforms', 'list', '--token', 'x', '--admin-url', ''], {
        ...base,
        SVC_ADMIN_URL: 'http://127.0.0.1:9',
        SVC_URL: 'http://127.0.0.1:9',
      }),
      runCli(['api', 'time', '--url', ''], { ...base, SVC_URL: 'http://127.0.0.1:9' }),
      runCli(['platforms', 'list', '--token', 'x', '--url', 'http://127.0.0.1:9', '--timeout-ms='], base),
    ]);
    assert.deepEqual(
      cases.map((c) => [c.code, c.stderr.trim()]),
      [
        [2, 'error: --admin-url: is empty (leave it out to use SVC_ADMIN_URL or the default)'],
        [2, 'error: --url: is empty (leave it out to use SVC_URL or the default)'],
        [2, 'error: --timeout-ms: is empty (leave it out to use SVC_REQUEST_TIMEOUT_MS or the default)'],
      ],
    );
    // So are the credentials' flags (probe: `--token ""` said there was no token, `--api-key ""` named as missing the
    // SVC_API_KEY that was set), and every text option of a command (probe: `--label ""` went to the server, whose 400
    // was an exit 1). Nothing is sent: nothing listens at port 9.
    const keys = {
      SVC_API_KEY: 'k',
      SVC_API_SECRET: 's',
      SVC_PASSPHRASE: 'p',
      SVC_URL: 'http://127.0.0.1:9',
    };
    const operator = ['--token', 'x', '--admin-url', 'http://127.0.0.1:9'];
    const empties = await Promise.all([
      runCli(['platforms', 'list', '--admin-url', 'http://127.0.0.1:9', '--token', ''], {
        ...base,
        SVC_ADMIN_TOKEN: 'an-operator-token-set-in-the-environment',
      }),
      runCli(['api', 'accounts', '--api-key', ''], { ...base, ...keys }),
      runCli(['api', 'accounts', '--passphrase', ''], { ...base, ...keys }),
      runCli(['balances', 'show', 'ABC123', '--label', '', ...operator], base),
      runCli(['deposits', 'record', '0xabc', '1', '--tx', '', ...operator], base),
      runCli(['api', 'trades', '--client-trade-id', ''], { ...base, ...keys }),
    ]);
    assert.deepEqual(
      empties.map((c) => [c.code, c.stderr.trim()]),
      [
        [2, "error: --token: is empty (leave it out to use SVC_ADMIN_TOKEN or the data dir's admin-token)"],
        [2, 'error: --api-key: is empty (leave it out to use SVC_API_KEY)'],
        [2, 'error: --passphrase: is empty (leave it out to use SVC_PASSPHRASE)'],
        [2, 'error: --label must not be empty'],
        [2, 'error: --tx must not be empty'],
        [2, 'error: --client-trade-id must not be empty'],
      ],
    );
    // A variable set empty is one left out, as usual: the address of SVC_PORT, where nothing listens (port 9).
    const unset = await runCli(['api', 'time'], {
      ...base,
      SVC_URL: '',
      SVC_REQUEST_TIMEOUT_MS: '',
      SVC_PORT: '9',
    });
    assert.equal(unset.code, 3, unset.stderr);
    assert.match(unset.stderr, /^error: server unreachable at http:\/\/127\.0\.0\.1:9\b/);
  });
});
