import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFailureLog } from '../../src/lib/failure-log.ts';

test('a failure that repeats is logged once with its error, then every period while it lasts, then its end', () => {
  const lines: Array<[string, string, Record<string, unknown>]> = [];
  const log = (level: string) => (fields: object, message?: string) =>
    void lines.push([level, message ?? '', fields as Record<string, unknown>]);
  let now = 1_000;
  const failures = createFailureLog(
    { info: log('info'), warn: log('warn'), error: log('error') },
    { failed: 'x failed', stillFailing: 'x still failing', recovered: 'x back' },
    { everyMs: 30_000, now: () => now },
  );
  failures.succeeded(); // nothing failed: nothing to say
  const err = new Error('connection refused');
  for (let second = 0; second < 65; second++, now += 1_000) failures.failed(err);
  failures.succeeded();
  failures.succeeded();
  assert.deepEqual(
    lines.map(([level, message]) => [level, message]),
    [
      ['error', 'x failed'],
      ['error', 'x still failing'],
      ['error', 'x still failing'],
      ['info', 'x back'],
    ],
  );
  assert.equal(lines[0]![2].err, err, 'the first with its error (and stack)');
  assert.deepEqual(lines[1]![2], { failures: 31, forMs: 30_000, error: 'connection refused' });
  assert.deepEqual(lines[3]![2], { failures: 65, forMs: 65_000 });
});
