import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import type { FastifyError } from 'fastify';
import { Type, type TSchema } from 'typebox';
import { describeValidation, validationErrorSummary } from '../../src/http/validation-messages.ts';

/** The lines of the 400 for `body` against `schema`, ajv set as src/app.ts sets it for bodies. */
function linesFor(schema: TSchema, body: unknown): string[] {
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes: false,
    useDefaults: true,
    strict: false,
    verbose: true,
  });
  const validate = ajv.compile(schema);
  assert.equal(validate(body), false, 'the body must fail');
  const error = Object.assign(validationErrorSummary(validate.errors!, 'body'), {
    validation: validate.errors!,
    validationContext: 'body',
  }) as unknown as FastifyError;
  return describeValidation(error);
}

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

test('a nullable union of values lists null among them', () => {
  const schema = Type.Object({ c: Nullable(Type.Union([Type.Literal('a'), Type.Literal('b')])) });
  assert.deepEqual(linesFor(schema, { c: 'z' }), ['c: must be one of a, b, null']);
});

test('a nullable list too long to say is said by its own rule alone', () => {
  const codes = Array.from({ length: 20 }, (_, i) => `C${i}`);
  const schema = Type.Object({ c: Nullable(Type.Enum(codes)) });
  assert.deepEqual(linesFor(schema, { c: 'zz' }), ['c: must be equal to one of the allowed values']);
});

test('values that are not plain text are said as JSON', () => {
  const schema = Type.Object({ c: Type.Union([Type.Literal(''), Type.Literal('x'), Type.Literal(3)]) });
  assert.deepEqual(linesFor(schema, { c: 'z' }), ['c: must be one of "", x, 3']);
});

test('unions of other schemas are left as ajv says them', () => {
  const schema = Type.Object({ c: Type.Union([Type.String(), Type.Integer(), Type.Null()]) });
  assert.deepEqual(linesFor(schema, { c: true }), [
    'c: must be string',
    'c: must be integer',
    'c: must be null',
    'c: must match a schema in anyOf',
  ]);
});

test('a union of object forms is told the problems of the form the value came closest to', () => {
  // The vendor's funding_details; every form's problems at once told an account, wrong in its description only, that
  // inbound_reference_id was required and its own fields were not allowed (probe).
  const schema = Type.Object({
    f: Type.Union([
      Type.Object({ inbound_reference_id: Type.String() }, { additionalProperties: false }),
      Type.Object(
        {
          external_account_id: Type.String(),
          description: Type.String({ maxLength: 10 }),
          bank_fee: Type.String(),
        },
        { additionalProperties: false },
      ),
    ]),
  });
  const account = { external_account_id: 'ext-1', description: 'ACH pull 11', bank_fee: '0.25' };
  assert.deepEqual(linesFor(schema, { f: account }), [
    'f.description: must NOT have more than 10 characters',
  ]);
  assert.deepEqual(linesFor(schema, { f: { inbound_reference_id: 7 } }), [
    'f.inbound_reference_id: must be string',
  ]);
  // One field of each: the form missing fewer fields is the nearer.
  assert.deepEqual(linesFor(schema, { f: { inbound_reference_id: 'r', bank_fee: '1' } }), [
    'f.bank_fee: is not allowed',
  ]);
});

test("the same union in two array elements: each element's errors fold alone", () => {
  const schema = Type.Object({ r: Type.Array(Type.Union([Type.Literal('a'), Type.Literal('b')])) });
  const body = { r: Array.from({ length: 11 }, (_, i) => (i === 1 || i === 10 ? 'z' : 'a')) };
  assert.deepEqual(linesFor(schema, body), ['r[1]: must be one of a, b', 'r[10]: must be one of a, b']);
});

test("Fastify's message of a failed validation stays short however many errors there are", () => {
  const errors = Array.from({ length: 400_000 }, () => ({
    keyword: 'required',
    instancePath: '/fees/0',
    schemaPath: '#/required',
    params: { missingProperty: 'name' },
    message: "must have required property 'name'",
  }));
  assert.equal(validationErrorSummary(errors, 'body').message, 'body: 400000 validation problems');
});

test('50 problems, a union among them, are listed without a line saying there are more', () => {
  // ajv's errors outnumber the problems once a union's branches are folded: counted against the errors, the 50th
  // problem read as one with more after it.
  const names = Array.from({ length: 49 }, (_, i) => `f${i}`);
  const schema = Type.Object({
    ...Object.fromEntries(names.map((name) => [name, Type.String()])),
    region: Type.Union(['us', 'eu', 'uk'].map((r) => Type.Literal(r))),
  });
  const lines = linesFor(schema, { region: 'xx' });
  assert.equal(lines.length, 50, JSON.stringify(lines));
  assert.equal(lines.at(-1), 'region: must be one of us, eu, uk');
});

test("a union cut off by the bound on errors read is not said by its branches' words", () => {
  // 998 unknown fields whose names are the same to 61 characters (a 400 shows 64): the first 1,000 of ajv's errors
  // hold few distinct lines, and end inside the union of region's values. (A body no longer comes to the validator
  // with more than 100 unknown fields, src/contract/schema-bounds.ts; the bound on errors read stands behind it.)
  const schema = Type.Object(
    { region: Type.Union(['us', 'eu', 'uk'].map((r) => Type.Literal(r))) },
    { additionalProperties: false },
  );
  const prefix = 'k'.repeat(70);
  const extra = Object.fromEntries(Array.from({ length: 998 }, (_, i) => [`${prefix}${i}`, 1]));
  // Not "region: must be us", "region: must be eu": two of its branches, read before the cut.
  assert.deepEqual(linesFor(schema, { region: 'xx', ...extra }), [
    `${'k'.repeat(61)}…: is not allowed`,
    'body: more problems than these, not listed',
  ]);
});
