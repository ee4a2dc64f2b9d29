/**
 * Booleans in query strings as the vendor's clients write them. The vendor types its query-string booleans
 * (`no_destination_tag`, `fee_inclusive`, `success`) as strings of `true` or `false`, and its clients send
 * what their language prints: Python's `requests` sends `False`, which Ajv's coercion (only `true` and
 * `false`) refused with a 400 (wire-contract: vendor clients work unchanged). A query-string validator is
 * wrapped so that the schema's boolean parameters take `true` and `false` in any letter case; nothing else
 * in the query is touched.
 */
type Validator = ((data: unknown) => unknown) & { errors?: unknown };

const BOOLEAN_TEXT = /^(true|false)$/i;

export function acceptingBooleansInAnyCase<V extends Validator>(schema: unknown, validate: V): V {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  const booleans = Object.keys(properties).filter((name) => properties[name]!.type === 'boolean');
  if (booleans.length === 0) return validate;
  const wrapped = ((data: unknown) => {
    const query = data as Record<string, unknown> | null;
    for (const name of booleans) {
      const value = query?.[name];
      if (typeof value === 'string' && BOOLEAN_TEXT.test(value)) query![name] = value.toLowerCase();
    }
    const result = validate(data);
    wrapped.errors = validate.errors;
    return result;
  }) as V;
  return wrapped;
}
