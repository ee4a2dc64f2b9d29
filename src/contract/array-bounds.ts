/**
 * Bodies are checked with every error collected (a 400 lists every bad field), and Ajv goes on checking an
 * array's items after the array has failed its `maxItems`. A 1 MB body of 340,000 `{}` agreements made
 * 1,000,000 errors: the onboarding check held the event loop for 9 s and took 2 GB of heap (probe). So the
 * validators see a body whose arrays are cut to one item past their schema's `maxItems`: still too long, so
 * the answer is the same 400 (and what is wrong in the items kept is still listed), at a cost the schema
 * bounds rather than the body limit.
 *
 * Ajv has no option that stops collecting errors after some number, hence this walk. It follows a schema's
 * `properties` and `items`, and a union (`anyOf`) only into the one branch of the value's JSON type (the
 * others refuse the value whatever its length); anything else is left whole. A value
 * with nothing cut is returned as it is (the same object), so a valid body is validated, and given its
 * defaults, itself.
 */

interface SchemaNode {
  type?: unknown;
  maxItems?: number;
  items?: unknown;
  properties?: Record<string, unknown>;
  anyOf?: unknown[];
}

const jsonType = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value === 'object' ? 'object' : '';

const isSchema = (value: unknown): value is SchemaNode => value !== null && typeof value === 'object';

/** `value`, its arrays cut to one item past their `maxItems` in `schema`; `value` itself when nothing is cut. */
export function withinArrayBounds(value: unknown, schema: unknown): unknown {
  if (!isSchema(schema)) return value;
  const kind = jsonType(value);
  if (kind === '' || kind === 'null') return value;
  if (schema.anyOf) {
    const branches = schema.anyOf.filter((branch) => isSchema(branch) && branch.type === kind);
    return branches.length === 1 ? withinArrayBounds(value, branches[0]) : value;
  }
  if (kind === 'array') return arrayWithinBounds(value as unknown[], schema);
  return objectWithinBounds(value as Record<string, unknown>, schema);
}

function arrayWithinBounds(array: unknown[], schema: SchemaNode): unknown[] {
  const kept =
    typeof schema.maxItems === 'number' && array.length > schema.maxItems + 1
      ? array.slice(0, schema.maxItems + 1)
      : array;
  if (!isSchema(schema.items)) return kept;
  let out = kept;
  kept.forEach((item, i) => {
    const bounded = withinArrayBounds(item, schema.items);
    if (bounded === item) return;
    if (out === array) out = array.slice();
    out[i] = bounded;
  });
  return out;
}

function objectWithinBounds(object: Record<string, unknown>, schema: SchemaNode): Record<string, unknown> {
  const properties = schema.properties ?? {};
  let out = object;
  for (const key of Object.keys(properties)) {
    if (!Object.hasOwn(object, key)) continue;
    const bounded = withinArrayBounds(object[key], properties[key]);
    if (bounded === object[key]) continue;
    if (out === object) out = { ...object };
    // As a property of its own: a key such as `__proto__` (JSON.parse makes it one) must not set a prototype.
    Object.defineProperty(out, key, { value: bounded, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

type Validator = ((data: unknown) => unknown) & { errors?: unknown };

/** `validate`, given the value within `schema`'s array bounds: the same answer, at a cost the schema bounds. */
export function validatingWithinArrayBounds<V extends Validator>(schema: unknown, validate: V): V {
  const wrapped = ((data: unknown) => {
    const result = validate(withinArrayBounds(data, schema));
    wrapped.errors = validate.errors;
    return result;
  }) as V;
  return wrapped;
}
