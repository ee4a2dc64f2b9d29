import assert from 'node:assert/strict';
import { test } from 'node:test';
import { refusingRepeatedParameters } from '../../src/http/query-coercion.ts';

/**
 * A query parameter given twice is refused as such (the query parser makes it a list), unless its schema takes a
 * list: an array type, or a union with an array branch (review: only a top-level `type: 'array'` was looked at).
 */
const schema = {
  type: 'object',
  properties: {
    page: { type: 'integer' },
    tags: { type: 'array', items: { type: 'string' } },
    ids: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
    codes: { type: ['array', 'null'] },
  },
};
const accepting = Object.assign((_query: unknown) => true, { errors: null as unknown });

test('a list is refused where the schema takes one value, and passed on where it takes a list', () => {
  const validate = refusingRepeatedParameters(schema, accepting);
  assert.equal(validate({ tags: ['a', 'b'], ids: ['1', '2'], codes: ['x', 'y'], page: '1' }), true);
  assert.equal(validate({ page: ['1', '2'] }), false);
  assert.deepEqual(
    (validate.errors as Array<{ instancePath: string; message: string }>).map((e) => [
      e.instancePath,
      e.message,
    ]),
    [['/page', 'is given more than once (send it once)']],
  );
});
