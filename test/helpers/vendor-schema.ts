import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

/**
 * Conformance: validates our responses against the vendor's published OpenAPI document, so platforms' existing
 * clients work. `assertVendorSchema(body, 'GetFundTransactionsResponse')` checks against components.schemas.<name>.
 */
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/**
 * The vendor's document as the tests read it: a copy in the repository, so that `npm test` runs on a fresh clone
 * (probe: 54 failures where ../shared was not beside it). `test/unit/vendor-openapi-copy.test.ts` checks that it is
 * the shared spec's, where that is beside the project.
 */
export const VENDOR_OPENAPI_PATH = path.resolve(import.meta.dirname, '..', 'fixtures', 'vendor-openapi.json');

/** The shared spec's document, beside the project root (`../shared/spec`), where the project's spec lives. */
export const SHARED_VENDOR_OPENAPI_PATH = path.resolve(
  import.meta.dirname,
  '..',
  '..',
  '..',
  'shared',
  'spec',
  'vendor-openapi.json',
);

let ajv: Ajv | null = null;
const compiled = new Map<string, ValidateFunction>();

function load(): Ajv {
  if (ajv) return ajv;
  const spec = JSON.parse(readFileSync(VENDOR_OPENAPI_PATH, 'utf8')) as {
    components: { schemas: Record<string, unknown> };
  };
  // ajv 8 understands OpenAPI's "nullable" keyword itself; "example" and friends pass with strict off.
  ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
  ajv.addSchema({ $id: 'vendor', components: oneOfAsAnyOf(spec.components) });
  return ajv;
}

/**
 * The vendor's document lists response variants under `oneOf` although they overlap (TradeResponseEntity
 * has two identical variants; the RFQ responses' variants only add optional fields), so no body could
 * match exactly one. They are alternatives, which is `anyOf`; validating them so keeps every field rule.
 */
function oneOfAsAnyOf(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(oneOfAsAnyOf);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => [key === 'oneOf' ? 'anyOf' : key, oneOfAsAnyOf(value)]),
  );
}

export function vendorValidator(schemaName: string): ValidateFunction {
  let validate = compiled.get(schemaName);
  if (!validate) {
    validate = load().compile({ $ref: `vendor#/components/schemas/${schemaName}` });
    compiled.set(schemaName, validate);
  }
  return validate;
}

export function assertVendorSchema(body: unknown, schemaName: string): void {
  const validate = vendorValidator(schemaName);
  const ok = validate(body);
  assert.ok(
    ok,
    `response does not match vendor schema ${schemaName}: ${JSON.stringify(validate.errors, null, 1)}\n${JSON.stringify(body)}`,
  );
}

/**
 * The names a response's `message` may have under the vendor's schema: the properties of the message, or of any of
 * its variants. A client generated from the document with strict models (openapi-generator's Java okhttp-gson, by
 * default) refuses an answer with any other field.
 */
export function vendorMessageFields(schemaName: string): Set<string> {
  const spec = JSON.parse(readFileSync(VENDOR_OPENAPI_PATH, 'utf8')) as {
    components: { schemas: Record<string, VendorSchema> };
  };
  const message = spec.components.schemas[schemaName]?.properties?.message;
  assert.ok(message, `vendor schema ${schemaName} has no message`);
  const variants = message.oneOf ?? message.anyOf ?? [message];
  return new Set(variants.flatMap((variant) => Object.keys(variant.properties ?? {})));
}

interface VendorSchema {
  properties?: Record<string, VendorSchema>;
  oneOf?: VendorSchema[];
  anyOf?: VendorSchema[];
}

/** Fails naming each field of `message` that the vendor's schema does not have. */
export function assertNoFieldsBeyondVendor(message: object, schemaName: string): void {
  const known = vendorMessageFields(schemaName);
  const beyond = Object.keys(message).filter((field) => !known.has(field));
  assert.deepEqual(beyond, [], `fields ${schemaName} does not have: a strict generated client refuses them`);
}
