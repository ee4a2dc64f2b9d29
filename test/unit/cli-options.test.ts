import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API_COMMANDS, API_OPTIONS } from '../../src/cli/api-commands.ts';
import { refuseOtherOptions, UsageError, usageOptions } from '../../src/cli/command-args.ts';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS } from '../../src/cli/operator-commands.ts';

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
