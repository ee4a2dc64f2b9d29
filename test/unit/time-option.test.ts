import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { timeOption } from '../../src/cli/time-option.ts';

const UTC_MIDNIGHT = Date.UTC(2026, 11, 6);

test('--since: epoch ms, a date, or a date and time; a time without a zone is UTC, as a date alone is', () => {
  assert.equal(timeOption('0'), 0);
  assert.equal(timeOption(String(UTC_MIDNIGHT)), UTC_MIDNIGHT);
  for (const raw of ['2026-12-06', '2026-12-06T00:00', '2026-12-06 00:00:00', '2026-12-06T00:00:00.000Z']) {
    assert.equal(timeOption(raw), UTC_MIDNIGHT, raw);
  }
  // A zone given is kept, in each of its ISO 8601 forms (the hour alone too).
  for (const raw of ['2026-12-06T09:00+09', '2026-12-06T09:00+0900', '2026-12-06 09:00:00+09:00']) {
    assert.equal(timeOption(raw), UTC_MIDNIGHT, raw);
  }
  assert.equal(timeOption('2026-12-05T19:00:00.5-05'), UTC_MIDNIGHT + 500);
});

test("--since does not depend on the machine's time zone (probe: Tokyo read a time without a zone 9 h early)", () => {
  const script = `import { timeOption } from ${JSON.stringify(new URL('../../src/cli/time-option.ts', import.meta.url).href)};
    process.stdout.write(JSON.stringify(['2026-12-06', '2026-12-06T00:00', '2026-12-06 00:00:00.5'].map(timeOption)));`;
  for (const zone of ['Asia/Tokyo', 'America/Los_Angeles', 'UTC']) {
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env: { ...process.env, TZ: zone },
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), [UTC_MIDNIGHT, UTC_MIDNIGHT, UTC_MIDNIGHT + 500], zone);
  }
});

test('--since refuses what could be either, and what only Date.parse would take', () => {
  for (const raw of ['2026', '20261206']) {
    assert.throws(() => timeOption(raw), {
      message: `--since: "${raw}" could be epoch ms or an ISO 8601 date; give epoch ms in full, or the date with dashes (2026-12-01)`,
    });
  }
  // Epoch seconds (review: 1733443200 was read as ms of January 1970, and redelivered the whole history).
  assert.throws(() => timeOption('1733443200'), {
    message: '--since: "1733443200" looks like epoch seconds; give epoch ms (1733443200000)',
  });
  for (const raw of [
    '-5',
    '1.5',
    'x 1',
    '12/1',
    '2026-02-30',
    '2026-12-06T25:00',
    '2026-12-06T00:00+1',
    '99999999999999999999',
  ]) {
    assert.throws(
      () => timeOption(raw),
      { message: `--since: "${raw}" is neither epoch ms nor an ISO 8601 time` },
      raw,
    );
  }
});

test('--until reads and refuses as --since does, naming itself', () => {
  assert.equal(timeOption('2026-12-06T09:00+09', '--until'), UTC_MIDNIGHT);
  assert.throws(() => timeOption('2026', '--until'), { message: /^--until: "2026" could be epoch ms/ });
});
