import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SHARED_VENDOR_OPENAPI_PATH, VENDOR_OPENAPI_PATH } from '../helpers/vendor-schema.ts';

/**
 * The tests check our answers against a copy of the vendor's OpenAPI document kept in the repository (so that a fresh
 * clone's `npm test` has it); the spec beside the project is the source of truth, and the copy must be it.
 */
const shared = existsSync(SHARED_VENDOR_OPENAPI_PATH);

test(
  "the repository's copy of vendor-openapi.json is the shared spec's",
  {
    skip: shared
      ? false
      : `${SHARED_VENDOR_OPENAPI_PATH} is not beside the project: nothing to compare the copy with`,
  },
  () => {
    const copy = readFileSync(VENDOR_OPENAPI_PATH);
    assert.ok(
      copy.equals(readFileSync(SHARED_VENDOR_OPENAPI_PATH)),
      `test/fixtures/vendor-openapi.json differs from ${SHARED_VENDOR_OPENAPI_PATH}: copy the spec's over it`,
    );
  },
);
