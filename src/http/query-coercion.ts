/**
 * How query-string text becomes the typed values the route schemas declare, where Ajv's own coercion is
 * wrong for our clients: booleans in any letter case, numbers only in decimal digits.
 */
type Validator = ((data: unknown) => unknown) & { errors?: unknown };

/**
 * Booleans in query strings as the vendor's clients write them. The vendor types its query-string booleans
 * (`no_destination_tag`, `fee_inclusive`, `success`) as strings of `true` or `false`, and its clients send
 * what their language prints: Python's `requests` sends `False`, which Ajv's coercion (only `true` and
 * `false`) refused with a 400 (wire-contract: vendor clients work unchanged). A query-string validator is
 * wrapped so that the schema's boolean parameters take `true` and `false` in any letter case; nothing else
 * in the query is touched.
 */
const BOOLEAN_TEXT = /^(true|false)$/i;

/** The parameters a query-string schema declares, by name. */
function propertiesOf(schema: unknown): Record<string, { type?: unknown }> {
  return (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
}

export function acceptingBooleansInAnyCase<V extends Validator>(schema: unknown, validate: V): V {
  const properties = propertiesOf(schema);
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

/** A number as a person or a client library writes one in a query string: decimal digits, a sign, a fraction. */
const DECIMAL_TEXT = /^-?[0-9]+(\.[0-9]+)?$/;
/**
 * A fraction that is not zero: not an integer, however close. `Number()` reads `1.9999999999999999` as 2, which an
 * integer parameter then took (review: `page_size=100.0000000000000001` passed a maximum of 100).
 */
const NONZERO_FRACTION = /\.[0-9]*[1-9]/;

/**
 * Numbers in query strings in decimal digits only. Ajv's coercion reads a query value with `Number()`, so
 * `page=0x10` was page 16, `page_size=1e1` 10, `0b11` 3 and a lone space 0 (review): a mistyped parameter was
 * silently another number. The schema's integer and number parameters must be written in digits, an integer's
 * fraction only if it is zero, or the request is a 400 naming them, as for any other bad value.
 */
export function refusingNumbersNotInDigits<V extends Validator>(schema: unknown, validate: V): V {
  const properties = propertiesOf(schema);
  const numbers = Object.keys(properties).filter((name) =>
    ['integer', 'number'].includes(properties[name]!.type as string),
  );
  if (numbers.length === 0) return validate;
  /** Why the text of a number parameter is refused before Ajv reads it as a number, or null. */
  const problemOf = (name: string, value: unknown): string | null => {
    if (typeof value !== 'string') return null;
    if (!DECIMAL_TEXT.test(value)) return 'must be a number written in decimal digits';
    if (properties[name]!.type === 'integer' && NONZERO_FRACTION.test(value)) return 'must be integer';
    return null;
  };
  return refusingFirst(validate, (query) =>
    numbers.flatMap((name) => {
      const message = problemOf(name, query?.[name]);
      return message === null ? [] : [{ name, message, params: { type: properties[name]!.type } }];
    }),
  );
}

/**
 * A parameter given more than once (`?page=1&page=2`): the query parser makes it a list, which Ajv's coercion then
 * refused as `page: must be integer` or `side: must be one of buy, sell` though each value was one (review). No
 * parameter of the API is a list (the vendor's OpenAPI has none), so one given twice is refused as such, even with
 * the same value twice: which one the caller meant is not for us to guess.
 */
export function refusingRepeatedParameters<V extends Validator>(schema: unknown, validate: V): V {
  const properties = propertiesOf(schema);
  const single = Object.keys(properties).filter((name) => !allowsList(properties[name]));
  if (single.length === 0) return validate;
  return refusingFirst(validate, (query) =>
    single
      .filter((name) => Array.isArray(query?.[name]))
      .map((name) => ({ name, message: 'is given more than once (send it once)', params: {} })),
  );
}

/** Whether a parameter's schema takes a list: an array type, or a union with one among its branches. */
function allowsList(schema: unknown): boolean {
  const s = schema as { type?: unknown; anyOf?: unknown[]; oneOf?: unknown[] } | undefined;
  if (s === undefined) return false;
  if (s.type === 'array' || (Array.isArray(s.type) && s.type.includes('array'))) return true;
  return [...(s.anyOf ?? []), ...(s.oneOf ?? [])].some(allowsList);
}

interface QueryRefusal {
  name: string;
  message: string;
  params: Record<string, unknown>;
}

/**
 * `validate`, with the problems `refusalsOf` finds in the query's text before Ajv coerces it. They are listed with
 * the query's other problems, as a 400 lists every bad field; Ajv's own word on a parameter named here is left out
 * (it read a value the caller did not write).
 */
function refusingFirst<V extends Validator>(
  validate: V,
  refusalsOf: (query: Record<string, unknown> | null) => QueryRefusal[],
): V {
  const wrapped = ((data: unknown) => {
    const refused = refusalsOf(data as Record<string, unknown> | null);
    const result = validate(data);
    if (refused.length === 0) {
      wrapped.errors = validate.errors;
      return result;
    }
    const named = new Set(refused.map(({ name }) => `/${name}`));
    const others = ((validate.errors ?? []) as Array<{ instancePath?: string }>).filter(
      (error) => !named.has(error.instancePath ?? ''),
    );
    wrapped.errors = [
      ...refused.map(({ name, message, params }) => ({
        keyword: 'type',
        instancePath: `/${name}`,
        schemaPath: `#/properties/${name}/type`,
        params,
        message,
      })),
      ...others,
    ];
    return false;
  }) as V;
  return wrapped;
}
