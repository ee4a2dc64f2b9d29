import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API_COMMANDS, API_OPTIONS } from '../../src/cli/api-commands.ts';
import { argumentLimit, refuseOtherOptions, UsageError, usageOptions } from '../../src/cli/command-args.ts';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS } from '../../src/cli/operator-commands.ts';
import { runCli } from '../../src/main/cli.ts';
import { OPERATOR_OFFLINE_ARGS, PLATFORM_OFFLINE_ARGS } from '../helpers/service-process.ts';

/**
 * A command takes the options its usage line names (and the connection options); any other is refused. So
 * every option the parser knows must be named by some usage line, or it could never be used.
 */
test('usageOptions reads the options of a usage line', () => {
  assert.deepEqual(
    usageOptions('svc deposits record ADDRESS QUANTITY [--tx ID] [--failed --reason TEXT] [--page-size N]'),
    ['tx', 'failed', 'reason', 'page-size'],
  );
});

test('refuseOtherOptions names every option the command does not take', () => {
  assert.doesNotThrow(() =>
    refuseOtherOptions({ name: 'x', json: true }, ['name', 'json'], 'svc platforms create'),
  );
  assert.throws(
    () => refuseOtherOptions({ name: 'x', page: '2', status: 'dead' }, ['status'], 'svc platforms list'),
    (error: unknown) =>
      error instanceof UsageError &&
      error.message === '--name, --page: not options of "svc platforms list"; see svc --help',
  );
});

test('every option the parser knows is taken by some command', () => {
  const named = new Set(
    [...Object.values(OPERATOR_COMMANDS), ...Object.values(API_COMMANDS)].flatMap((c) =>
      usageOptions(c.usage),
    ),
  );
  // Taken by every `svc api` command (credentials, retries) and by `svc webhooks listen`.
  for (const option of ['api-key', 'api-secret', 'passphrase', 'no-retry', 'port', 'host']) named.add(option);
  const unused = Object.keys({ ...OPERATOR_OPTIONS, ...API_OPTIONS }).filter((option) => !named.has(option));
  assert.deepEqual(unused, []);
});

test('argumentLimit reads how many arguments a usage line takes', () => {
  assert.equal(argumentLimit('svc keys revoke API_KEY', 'svc keys revoke'), 1);
  assert.equal(argumentLimit('svc platforms list', 'svc platforms list'), 0);
  assert.equal(
    argumentLimit('svc webhooks set PLATFORM URL [--secret S | --no-secret]', 'svc webhooks set'),
    2,
  );
  assert.equal(argumentLimit('svc allowlist set PLATFORM [CIDR[,CIDR]...]', 'svc allowlist set'), Infinity);
  assert.equal(
    argumentLimit('svc prices set PAIR=PRICE... (e.g. BTC/USD=65000.25)', 'svc prices set'),
    Infinity,
  );
  // An option's value is not an argument; nor is a repeated option.
  assert.equal(
    argumentLimit('svc platforms create --name NAME [--allow CIDR]...', 'svc platforms create'),
    0,
  );
});

test('every command has a usage line that starts with its name (its arguments are counted from there)', () => {
  for (const [name, command] of Object.entries(OPERATOR_COMMANDS))
    assert.doesNotThrow(() => argumentLimit(command.usage, `svc ${name}`), name);
  for (const [name, command] of Object.entries(API_COMMANDS))
    assert.doesNotThrow(() => argumentLimit(command.usage, `svc api ${name}`), name);
});

/** Runs the CLI in this process: its exit code and what it wrote to stderr. */
async function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  }) as typeof process.stderr.write;
  try {
    return { code: await runCli(args), stderr };
  } finally {
    process.stderr.write = write;
  }
}

test('arguments a command does not take are refused (exit 2), not ignored: nothing is sent', async () => {
  // `svc keys revoke K1 K2` revoked K1 only and exited 0, K2 left live. The URL has no server: a refusal
  // before any request is the only way to exit 2.
  const offline = OPERATOR_OFFLINE_ARGS;
  for (const args of [
    ['keys', 'revoke', 'K1', 'K2', ...offline],
    ['platforms', 'list', 'extra', ...offline],
    ['api', 'trade', 'a', 'b', ...PLATFORM_OFFLINE_ARGS],
    ['migrate', 'now'],
  ]) {
    const { code, stderr } = await cli(args);
    assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
    assert.match(stderr, /does not take; usage: svc /);
  }
  const { code, stderr } = await cli(['keys', 'revoke', 'K1', 'K2', '--json', ...offline]);
  assert.equal(code, 2);
  assert.deepEqual(JSON.parse(stderr).error.errors, [
    '"K2": an argument "svc keys revoke" does not take; usage: svc keys revoke API_KEY',
  ]);
});

test('a value outside its few, or a change of nothing, is a usage error (exit 2) said before sending', async () => {
  // Review: these went to the server, whose 400 was an exit 1, as other commands' same mistakes were an exit 2.
  const cases: Array<[string[], string]> = [
    [
      ['platforms', 'update', 'ABC123', ...OPERATOR_OFFLINE_ARGS],
      'give what changes: --name, --quote-expiry-ms, --quote-expiry-requests or --deposit-fee-bps',
    ],
    [
      ['participants', 'set-status', 'ABC123', 'bogus', ...OPERATOR_OFFLINE_ARGS],
      'STATUS must be one of submitted, approved, rejected, locked, disabled, divested, closed, got "bogus"',
    ],
    [
      ['webhooks', 'notifications', 'ABC123', '--status', 'bogus', ...OPERATOR_OFFLINE_ARGS],
      '--status must be one of pending, retrying, delivered, dead, skipped, got "bogus"',
    ],
    [
      ['api', 'accounts', '--type', 'bogus', ...PLATFORM_OFFLINE_ARGS],
      '--type must be one of available, collateral, payable, receivable, collateral_deficiency, staked, got "bogus"',
    ],
    [
      ['api', 'participants', '--status', 'bogus', ...PLATFORM_OFFLINE_ARGS],
      '--status must be one of submitted, pending_approval, approved, rejected, locked, pending_unlock, pending_disable, disabled, divested, closed, got "bogus"',
    ],
  ];
  const create = ['--platform', 'ABC123', '--participant', 'ABC123'];
  cases.push(
    [
      [
        'participants',
        'create',
        ...create.slice(0, 2),
        '--email',
        'a@b.co',
        '--first-name',
        'A',
        '--last-name',
        'B',
        '--status',
        'bogus',
        ...OPERATOR_OFFLINE_ARGS,
      ],
      '--status must be one of submitted, approved, rejected, locked, disabled, divested, closed, got "bogus"',
    ],
    [
      [
        'balances',
        'adjust',
        '--participant',
        'ABC123',
        '--label',
        'general',
        '--asset',
        'USD',
        '--amount',
        '1',
        '--type',
        'bogus',
        ...OPERATOR_OFFLINE_ARGS,
      ],
      '--type must be one of available, collateral, payable, receivable, collateral_deficiency, staked, got "bogus"',
    ],
    [
      ['accounts', 'create', ...create, '--region', 'bogus', ...OPERATOR_OFFLINE_ARGS],
      '--region must be one of us, eu, uk, ww, bz, au, got "bogus"',
    ],
    [
      [
        'webhooks',
        'redeliver-since',
        'ABC123',
        '--since',
        '0',
        '--status',
        'dead,bogus',
        ...OPERATOR_OFFLINE_ARGS,
      ],
      '--status: each must be one of pending, retrying, delivered, dead, skipped, got "bogus"',
    ],
  );
  for (const [args, message] of cases) {
    const { code, stderr } = await cli(args);
    assert.deepEqual([code, stderr], [2, `error: ${message}\n`], args.join(' '));
  }
});

test('a path argument the SDK cannot send (`.`, `..`) is a usage error (exit 2), not a stack trace', async () => {
  const { code, stderr } = await cli(['api', 'trade', '..', ...PLATFORM_OFFLINE_ARGS]);
  assert.equal(code, 2, stderr);
  assert.equal(stderr, 'error: tradeId: ".." cannot be sent as a path segment\n');
});

test('a pool sized for --role api does not stop the commands that run no jobs (svc migrate, the clients)', async () => {
  // The shared environment of a deployment whose API instances run with a small pool.
  process.env.SVC_DB_POOL_MAX = '8';
  try {
    const { code, stderr } = await cli(['prices', 'list', ...OPERATOR_OFFLINE_ARGS]);
    // No server there: exit 3 (unreachable), not 2 for the pool.
    assert.equal(code, 3, stderr);
    const serving = await cli(['serve']);
    assert.equal(serving.code, 2, 'svc serve (role all) still refuses it');
    assert.match(serving.stderr, /SVC_DB_POOL_MAX: 8 is too small for role all/);
  } finally {
    delete process.env.SVC_DB_POOL_MAX;
  }
});
