import type { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; its default export arrives wrapped under native ESM.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/**
 * ajv-formats' `email` (its full form) with the bounds of RFC 5321 4.5.3.1 and RFC 1035 2.3.4 it leaves out: a local
 * part of at most 64 characters and domain labels of at most 63. No mailbox can be beyond them (probe: a 180-letter
 * label was taken as a customer's email).
 */
const EMAIL =
  /^(?=[^@]{1,64}@)[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/**
 * The string formats every validator of the service knows (the routes' in src/app.ts, the customer bodies' in
 * participants.validation.ts): ajv-formats' formats, with `uuid` as PostgreSQL's uuid type reads it (ajv-formats
 * also takes `urn:uuid:…`, which then reached the database and came back as a 400 naming no field, "request: a
 * value is out of range…": review) and `email` bounded (EMAIL).
 */
export function withFormats(ajv: Ajv): Ajv {
  return addFormats(ajv)
    .addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i)
    .addFormat('email', EMAIL);
}
