import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createDeadLetterLog,
  DEAD_LETTER_MESSAGE,
  DEAD_LETTER_QUIET_MS,
  MORE_DEAD_LETTERS_MESSAGE,
} from '../../src/domain/webhooks/dead-letter-log.ts';

/** A dead-letter log whose lines are kept and whose timers run when the test says. */
function harness() {
  const lines: Array<{ fields: Record<string, unknown>; message?: string }> = [];
  const timers = new Set<{ run: () => void; ms: number }>();
  const log = createDeadLetterLog(
    { warn: (fields, message) => lines.push({ fields: fields as Record<string, unknown>, message }) },
    (run, ms) => {
      const timer = { run, ms };
      timers.add(timer);
      return { clear: () => timers.delete(timer) };
    },
  );
  /** The quiet minutes end: the timers due run (and those they start wait for the next call). */
  const minutePasses = () => {
    const due = [...timers];
    timers.clear();
    for (const timer of due) {
      assert.equal(timer.ms, DEAD_LETTER_QUIET_MS);
      timer.run();
    }
  };
  return { lines, log, timers, minutePasses };
}

const dead = (platformCode: string, n: number) => ({
  platformCode,
  notificationId: `n-${n}`,
  payloadType: 'trade_status_changed',
  reason: '410 Gone',
});

test("a platform's first dead letter at warn; the count of its next minute's when that minute ends", () => {
  const { lines, log, timers, minutePasses } = harness();
  log.tell(dead('AAAAAA', 1));
  for (let n = 2; n <= 5; n++) log.tell(dead('AAAAAA', n));
  log.tell(dead('BBBBBB', 6)); // another platform: a line of its own
  assert.deepEqual(lines[0], {
    fields: {
      platform: 'AAAAAA',
      notification: 'n-1',
      payloadType: 'trade_status_changed',
      reason: '410 Gone',
    },
    message: DEAD_LETTER_MESSAGE,
  });
  minutePasses(); // AAAAAA's 4 told (and a new quiet minute begun); BBBBBB had none more
  log.tell(dead('AAAAAA', 7)); // within AAAAAA's new quiet minute
  log.tell(dead('BBBBBB', 8)); // BBBBBB's minute ended with nothing: told at once
  minutePasses();
  minutePasses(); // nothing more: no line, no timer left
  assert.equal(timers.size, 0);
  log.tell(dead('AAAAAA', 9));
  assert.deepEqual(
    lines.map(({ fields, message }) => [
      message === MORE_DEAD_LETTERS_MESSAGE ? 'more' : 'one',
      fields.platform,
      fields.notification ?? fields.moreSinceLastLine,
    ]),
    [
      ['one', 'AAAAAA', 'n-1'],
      ['one', 'BBBBBB', 'n-6'],
      ['more', 'AAAAAA', 4],
      ['one', 'BBBBBB', 'n-8'],
      ['more', 'AAAAAA', 1],
      ['one', 'AAAAAA', 'n-9'],
    ],
  );
});

test('a stop tells the counts still held, and leaves no timer', () => {
  const { lines, log, timers } = harness();
  log.tell(dead('AAAAAA', 1));
  log.tell(dead('AAAAAA', 2));
  log.tell(dead('BBBBBB', 3));
  log.flush();
  assert.equal(timers.size, 0);
  assert.deepEqual(lines.at(-1), {
    fields: { platform: 'AAAAAA', moreSinceLastLine: 1 },
    message: MORE_DEAD_LETTERS_MESSAGE,
  });
  assert.equal(lines.length, 3);
});
