import assert from 'node:assert/strict';
import { test } from 'node:test';
import { priceQuote } from '../../src/domain/quotes/pricing.ts';

/**
 * A quote whose amounts would pass the vendor's 30 characters is refused naming the field asked with, and
 * saying which amount came out too long: a quantity of 1 at a 60-digit price was told "quantity: too large"
 * as if the 1 were (review, fuzz).
 */
test('an amount too long: the problem names the amount that came out too long, and the price', () => {
  const hugePrice = `1${'0'.repeat(40)}`;
  const byQuantity = priceQuote({ side: 'buy', sourcePrice: hugePrice, spreadBps: '0', quantity: '1' });
  assert.ok('problem' in byQuantity, JSON.stringify(byQuantity));
  assert.equal(byQuantity.field, 'quantity');
  assert.match(
    byQuantity.problem,
    /^too large: the total at 1(0{40}) would be 41 characters; amounts are at most 30$/,
  );

  const byTotal = priceQuote({
    side: 'buy',
    sourcePrice: '0.000000000001',
    spreadBps: '0',
    total: `9${'9'.repeat(20)}`,
  });
  assert.ok('problem' in byTotal, JSON.stringify(byTotal));
  assert.equal(byTotal.field, 'total');
  assert.match(byTotal.problem, /^too large: the quantity at 0\.000000000001 would be \d+ characters/);

  const fine = priceQuote({ side: 'buy', sourcePrice: '65000.25', spreadBps: '0', quantity: '1' });
  assert.ok(!('problem' in fine), JSON.stringify(fine));
});

test('a spread that leaves no positive price is named as the cause, whether a quantity or a total was asked for', () => {
  for (const amount of [{ quantity: '1' }, { total: '1' }]) {
    const priced = priceQuote({
      side: 'sell',
      sourcePrice: '0.000000000000000001',
      spreadBps: '1',
      ...amount,
    });
    assert.ok('problem' in priced, JSON.stringify(priced));
    assert.deepEqual(priced, {
      field: 'spread',
      problem: 'leaves no positive price (from 0.000000000000000001)',
    });
  }
});
