import { Ajv, type AnySchema } from 'ajv';
import { validatingWithinSchemaBounds } from '../contract/schema-bounds.ts';
import { withFormats } from '../contract/schema-formats.ts';

/**
 * The Ajv of the routes' bodies (src/app.ts). Bodies are validated strictly (no type coercion: "12" is not 12).
 * Every error is collected so a 400 lists every bad field. `verbose` gives each error its schema, whose description
 * says in words what a pattern wants (describeValidation).
 */
export function newBodyAjv(): Ajv {
  return withFormats(
    new Ajv({ allErrors: true, coerceTypes: false, useDefaults: true, strict: false, verbose: true }),
  );
}

/** A route's body validator: `ajv`'s for `schema`, given the body within the schema's bounds (schema-bounds.ts). */
export function compileBodyValidator(ajv: Ajv, schema: AnySchema) {
  return validatingWithinSchemaBounds(schema, ajv.compile(schema));
}
