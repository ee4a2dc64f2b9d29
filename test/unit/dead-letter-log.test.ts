import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/lib/clock.ts';
import { createDeadLetterLog } from '../../src/domain/webhooks/dead-letter-log.ts';

test("a platform's first dead letter at warn, then a line a minute at most saying how many more", () => {
  const clock = new ManualClock();
  const lines: Array<{ fields: Record<string, unknown>; message?: string }> = [];
  const tell = createDeadLetterLog(
    { warn: (fields, message) => lines.push({ fields: fields as Record<string, unknown>, message }) },
    clock,
  );
  const dead = (platformCode: string, n: number) => ({
    platformCode,
    notificationId: `n-${n}`,
    payloadType: 'trade_status_changed',
    reason: '410 Gone',
  });
  tell(dead('AAAAAA', 1));
  for (let n = 2; n <= 5; n++) tell(dead('AAAAAA', n));
  tell(dead('BBBBBB', 6)); // another platform: a line of its own
  clock.advance(59_999);
  tell(dead('AAAAAA', 7));
  clock.advance(1);
  tell(dead('AAAAAA', 8));
  clock.advance(60_000);
  tell(dead('AAAAAA', 9));
  assert.deepEqual(
    lines.map(({ fields }) => [fields.platform, fields.notification, fields.moreSinceLastLine]),
    [
      ['AAAAAA', 'n-1', undefined],
      ['BBBBBB', 'n-6', undefined],
      ['AAAAAA', 'n-8', 5],
      ['AAAAAA', 'n-9', undefined],
    ],
  );
  assert.deepEqual(lines[0]!.fields, {
    platform: 'AAAAAA',
    notification: 'n-1',
    payloadType: 'trade_status_changed',
    reason: '410 Gone',
  });
  assert.match(lines[0]!.message!, /^webhook notification dead-lettered/);
});
