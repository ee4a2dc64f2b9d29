import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/lib/clock.ts';
import { RefusalLog } from '../../src/http/refusal-log.ts';

test("a source's first refusal of a kind at info, then none for 10 s; each kind and source its own", () => {
  const clock = new ManualClock();
  const refusals = new RefusalLog(clock);
  assert.equal(refusals.atInfo('firewall', '192.0.2.1'), true);
  assert.equal(refusals.atInfo('firewall', '192.0.2.1'), false);
  assert.equal(refusals.atInfo('operator token', '192.0.2.1'), true, 'another kind');
  assert.equal(refusals.atInfo('firewall', '::ffff:192.0.2.1'), false, 'the same address, IPv4-mapped');
  assert.equal(refusals.atInfo('firewall', '2001:db8:1:2::a'), true);
  assert.equal(refusals.atInfo('firewall', '2001:db8:1:2::b'), false, 'the same /64');
  // Whatever the rate limit counts per address: link-local, a translator's prefix, with a zone or not.
  for (const [first, second] of [
    ['fe80::1', 'fe80::2%eth0'],
    ['64:ff9b::1.2.3.4', '64:ff9b::1.2.3.5'],
    ['::ffff:0:1.2.3.4', '::ffff:0:1.2.3.5'],
  ]) {
    assert.equal(refusals.atInfo('firewall', first!), true, first);
    assert.equal(refusals.atInfo('firewall', second!), false, second);
  }
  assert.equal(refusals.atInfo('firewall', 'not:an:address'), true, 'no address: no throw');
  clock.advance(9_999);
  assert.equal(refusals.atInfo('firewall', '192.0.2.1'), false);
  clock.advance(1);
  assert.equal(refusals.atInfo('firewall', '192.0.2.1'), true);
});

test('follows 10,000 sources at most: beyond, a new one is at debug until the quiet of others ends', () => {
  const clock = new ManualClock();
  const refusals = new RefusalLog(clock);
  const source = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  for (let i = 0; i < 10_000; i++) assert.equal(refusals.atInfo('firewall', source(i)), true);
  assert.equal(refusals.atInfo('firewall', source(10_000)), false, 'full');
  clock.advance(5_000);
  assert.equal(refusals.atInfo('firewall', source(10_001)), false, 'still full: no quiet has ended');
  clock.advance(5_000);
  // Swept at most once a second: the quiet of the first 10,000 is over now.
  assert.equal(refusals.atInfo('firewall', source(10_002)), true);
  assert.equal(refusals.atInfo('firewall', source(0)), true, 'its quiet over, and room again');
});
