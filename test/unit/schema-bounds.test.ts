import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FastifyError } from 'fastify';
import { Type } from 'typebox';
import { withinSchemaBounds } from '../../src/contract/schema-bounds.ts';
import { ClientAuthTokenBody } from '../../src/contract/funding.schemas.ts';
import { checkCustomerBody } from '../../src/contract/participants.validation.ts';
import { LiquidityQuoteBody } from '../../src/contract/quotes.schemas.ts';
import { compileBodyValidator, newBodyAjv } from '../../src/http/body-validator.ts';
import { describeValidation } from '../../src/http/validation-messages.ts';
import { euCustomer, nonUsRelianceCustomer, usCustomer } from '../helpers/onboarding-fixtures.ts';

/**
 * A body's arrays are checked up to one item past their schema's bound: a 1 MB body of items each failing the
 * schema cost a million errors (onboarding: 9 s of event loop and 2 GB of heap, probe), now as many as the bound.
 */
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);

/** The app's body validator (src/app.ts). */
const bodyAjv = newBodyAjv();

/** The 400's lines for `errors` of a body, as the error handler words them. */
function linesOf(errors: readonly object[]): string[] {
  const error = Object.assign(new Error('body'), { validation: errors, validationContext: 'body' });
  return describeValidation(error as unknown as FastifyError);
}

/** `count` items made by `make`, and how many times their properties were read since. */
function watchedItems(count: number, make: () => Record<string, unknown>) {
  const reads = { count: 0 };
  const items = Array.from({ length: count }, () => {
    const target = make();
    return new Proxy(target, {
      get: (object, key) => {
        if (typeof key === 'string') reads.count += 1;
        return Reflect.get(object, key);
      },
    });
  });
  return { items, reads };
}

describe('withinSchemaBounds', () => {
  const schema = Type.Object({
    list: Type.Array(Type.Object({ tags: Type.Array(Type.String(), { maxItems: 2 }) }), { maxItems: 3 }),
    either: Type.Union([Type.Array(Type.String(), { maxItems: 1 }), Type.Null()]),
    other: Type.String(),
  });

  test('a value within every bound is itself, not a copy', () => {
    const body = { list: [{ tags: ['a', 'b'] }], either: ['x'], other: 'y', extra: [1, 2, 3, 4, 5] };
    assert.equal(withinSchemaBounds(body, schema), body);
  });

  test('an array past its bound keeps its first items and one more, at every depth; the value is not changed', () => {
    const body = {
      list: [{ tags: ['a', 'b', 'c', 'd'] }, { tags: [] }, { tags: [] }, { tags: [] }, { tags: [] }],
      either: ['1', '2', '3', '4'],
      other: 'y',
    };
    const bounded = withinSchemaBounds(body, schema) as typeof body;
    assert.deepEqual(bounded, {
      list: [{ tags: ['a', 'b', 'c'] }, { tags: [] }, { tags: [] }, { tags: [] }],
      either: ['1', '2'],
      other: 'y',
    });
    assert.equal(body.list.length, 5);
    assert.equal(body.list[0]!.tags.length, 4);
    assert.equal(body.either.length, 4);
  });

  test('a union with more than one branch of the array type is left whole (no branch can be judged alone)', () => {
    const either = Type.Union([
      Type.Array(Type.String(), { maxItems: 1 }),
      Type.Array(Type.Number(), { maxItems: 9 }),
    ]);
    const list = ['a', 'b', 'c', 'd'];
    assert.equal(withinSchemaBounds(list, either), list);
  });
});

describe('withinSchemaBounds: objects', () => {
  const fields = (n: number, prefix = 'f') =>
    Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));

  test('an object that allows no other fields keeps its own and the first 100 of the others', () => {
    const schema = Type.Object(
      { a: Type.Array(Type.String(), { maxItems: 1 }) },
      { additionalProperties: false },
    );
    const body = { ...fields(150), a: ['x', 'y', 'z'] };
    const bounded = withinSchemaBounds(body, schema) as Record<string, unknown>;
    assert.deepEqual(Object.keys(bounded), [...Object.keys(fields(100)), 'a']);
    assert.deepEqual(bounded.a, ['x', 'y']);
    const few = { ...fields(100), a: [] };
    assert.equal(withinSchemaBounds(few, schema), few);
  });

  test('a key __proto__ stays a field of the copy, not its prototype', () => {
    const schema = Type.Object(
      { a: Type.Array(Type.String(), { maxItems: 1 }) },
      { additionalProperties: false },
    );
    const body = JSON.parse(`{"__proto__": {"polluted": true}, "a": ["x", "y", "z"]}`) as Record<
      string,
      unknown
    >;
    const bounded = withinSchemaBounds(body, schema) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(bounded), Object.prototype);
    assert.ok(Object.hasOwn(bounded, '__proto__'));
    assert.deepEqual(bounded.a, ['x', 'y']);
  });

  test('an object past its maxProperties keeps one more; one whose other fields a pattern may allow is left whole', () => {
    const capped = Type.Record(Type.String({ pattern: '^f' }), Type.Number(), { maxProperties: 10 });
    assert.equal(Object.keys(withinSchemaBounds(fields(500), capped) as object).length, 11);
    const patterned = Type.Record(Type.String({ pattern: '^f' }), Type.Number(), { minProperties: 300 });
    const many = fields(500);
    assert.equal(withinSchemaBounds(many, { ...patterned, additionalProperties: false }), many);
  });
});

describe('checks bounded by the schema, not by the body', () => {
  test("an onboarding body's agreements are read up to one past the bound, in each variant", () => {
    const { items, reads } = watchedItems(5_000, () => ({}));
    const result = checkCustomerBody({ ...usCustomer({}, NOW), signed_agreements: items }, NOW);
    assert.equal(result.ok, false);
    assert.ok(
      !result.ok &&
        result.errors.some((e) => e.instancePath === '/signed_agreements' && e.keyword === 'maxItems'),
    );
    // 51 items in each of the four full variants, a few reads each; all 5,000 were read before.
    assert.ok(reads.count < 51 * 4 * 20, `${reads.count} reads`);
    assert.ok(!result.ok && result.errors.length < 500, `${!result.ok && result.errors.length} errors`);
  });

  test('the checks beyond the schema walk the body once, not once per variant', () => {
    // metadata takes any object: no bound there, so its walk (for text with no canonical JSON form) is the body's size.
    const { items, reads } = watchedItems(2_000, () => ({ a: 1 }));
    const result = checkCustomerBody({ ...usCustomer({}, NOW), metadata: { items }, unknown_field: 1 }, NOW);
    assert.equal(result.ok, false, 'every variant tried');
    assert.ok(reads.count >= 2_000, `${reads.count} reads`);
    assert.ok(reads.count < 2 * 2_000, `${reads.count} reads: once a variant`);
  });

  test('an onboarding body with thousands of fields no variant takes is cut once, to the first 100 of them', () => {
    let reads = 0;
    const unknown = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`x${i}`, i]));
    const body = new Proxy(
      { ...usCustomer({}, NOW), ...unknown },
      {
        get: (object, key) => {
          if (typeof key === 'string' && key.startsWith('x')) reads++;
          return Reflect.get(object, key);
        },
      },
    );
    const result = checkCustomerBody(body, NOW);
    assert.equal(result.ok, false);
    // Before: each variant cut them afresh, and the checks beyond the schema read all 5,000.
    assert.ok(reads <= 100, `${reads} reads`);
  });

  test('with 100 fields or more that no variant takes, the closest variant is the one it is without them', () => {
    // An EU body with a zip (which only the general form takes): the general form is the closest, whatever else.
    const closest = (unknown: number) => {
      const extra = Object.fromEntries(Array.from({ length: unknown }, (_, i) => [`x${i}`, 1]));
      const result = checkCustomerBody({ ...euCustomer({}, NOW), zip: '60601', ...extra }, NOW);
      return result.ok ? 'accepted' : result.variant;
    };
    for (const unknown of [1, 99, 100, 150, 5_000])
      assert.equal(closest(unknown), 'Customer - All accepted fields');
  });

  test('unknown fields inside a field weigh as its wrong value, not as the shape: no count of them changes the variant', () => {
    const told = (inW8: number, inResidence: number) => {
      const keys = (prefix: string, n: number) =>
        Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 1]));
      const body = nonUsRelianceCustomer(
        {
          w8_ben: { ftin_required: false, ...keys('w', inW8) },
          tax_residence: { jurisdiction_code: 'NL-NH', ...keys('t', inResidence) },
        },
        NOW,
      );
      const result = checkCustomerBody(body, NOW);
      return result.ok ? 'accepted' : result.variant;
    };
    // Counted with the shape: 30 and 1 told one variant, 1 and 30 another; cut to 100 each, 150 and 120 told
    // another than uncut (review).
    for (const [inW8, inResidence] of [
      [30, 1],
      [1, 30],
      [150, 120],
      [120, 150],
    ] as const)
      assert.equal(told(inW8, inResidence), told(1, 1), `${inW8}, ${inResidence}`);
  });

  test('problems left out by a cut are said to be there, even where those listed fold into one line', () => {
    // 100 unknown fields of one long prefix are said in one line; a typo after them was dropped unsaid (review).
    const prefix = 'k'.repeat(70);
    const fields = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`${prefix}${i}`, 1]));
    const body = {
      side: 'buy',
      underlying: 'BTC',
      quoted_currency: 'USD',
      quantity: '1',
      ...fields,
      totl: '1',
    };
    const validate = compileBodyValidator(bodyAjv, LiquidityQuoteBody);
    assert.equal(validate(body), false);
    assert.deepEqual(linesOf(validate.errors ?? []), [
      `${'k'.repeat(61)}…: is not allowed`,
      'body: more problems than these, not listed',
    ]);
    // Onboarding's values without a canonical form: the 51 found, then the walk stopped.
    const infinite = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`${prefix}${i}`, Infinity]));
    const result = checkCustomerBody(usCustomer({ metadata: { ...infinite, other: Infinity } }, NOW), NOW);
    assert.ok(!result.ok);
    const lines = linesOf(result.ok ? [] : result.errors);
    assert.equal(lines.length, 2, JSON.stringify(lines));
    assert.match(lines[0]!, /^metadata\.k+…: must be a number within the range of a double$/);
    assert.equal(lines[1], 'body: more problems than these, not listed');
  });

  test("the body validator's errors are as many as the bound allows, the bound's own among them", () => {
    for (const [schema, body, path] of [
      [LiquidityQuoteBody, { fees: Array.from({ length: 10_000 }, () => ({})) }, '/fees'],
      [LiquidityQuoteBody, Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`x${i}`, 1])), ''],
      [
        ClientAuthTokenBody,
        { participant_code: 'ABCDEF', permissions: Array.from({ length: 10_000 }, () => ({})) },
        '/permissions',
      ],
    ] as const) {
      const validate = compileBodyValidator(bodyAjv, schema);
      assert.equal(validate(body), false);
      const errors = validate.errors ?? [];
      const bound = path === '' ? 'additionalProperties' : 'maxItems';
      assert.ok(
        errors.some((e) => e.instancePath === path && e.keyword === bound),
        path,
      );
      assert.ok(errors.length <= 110, `${path}: ${errors.length} errors`);
    }
  });
});
