/**
 * Bodies are checked with every error collected (a 400 lists every bad field), and Ajv goes on checking an
 * array's items after the array has failed its `maxItems`, and names every field an object does not allow. A 1 MB
 * body of 340,000 `{}` agreements made 1,000,000 errors: the onboarding check held the event loop for 9 s and took
 * 2 GB of heap (probe); 100,000 unknown fields cost 0.6 s (review). So the validators see a body cut to what its
 * schema bounds: an array to one item past its `maxItems`, an object to one property past its `maxProperties`, and
 * to its first UNKNOWN_FIELDS_KEPT fields of those an object that allows no others does not know. Each is still
 * refused as before, so the answer is still a 400 (what is wrong in what was kept is listed: more than a 400
 * lists), at a cost the schema bounds rather than the body limit.
 *
 * Ajv has no option that stops collecting errors after some number, hence this walk. It follows a schema's
 * `properties` and `items`, and a union (`anyOf`) only into the one branch of the value's JSON type (the others
 * refuse the value whatever its size); anything else is left whole. A value with nothing cut is returned as it is
 * (the same object), so a valid body is validated, and given its defaults, itself.
 *
 * Fields left out are problems left unlisted: a 400 then says there are more ({@link NOT_ALL_CHECKED}), even where
 * those listed fold into fewer lines (review: 100 unknown fields of one long prefix, said in one line, hid a typo
 * after them).
 */

interface SchemaNode {
  type?: unknown;
  maxItems?: number;
  items?: unknown;
  maxProperties?: number;
  properties?: Record<string, unknown>;
  additionalProperties?: unknown;
  patternProperties?: unknown;
  anyOf?: unknown[];
}

/** Of the fields an object does not allow, how many are kept: more than a 400 lists (50). */
const UNKNOWN_FIELDS_KEPT = 100;

const jsonType = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value === 'object' ? 'object' : '';

const isSchema = (value: unknown): value is SchemaNode => value !== null && typeof value === 'object';

/** What a cut left out that is certainly a problem: fields an object does not take. */
export interface Cuts {
  unknownFields: number;
}

/**
 * An error that says not all of a value was checked: a validator adds it after its own, and the 400's lines end
 * with "more problems than these, not listed" for it (src/http/validation-messages.ts).
 */
export const NOT_ALL_CHECKED = {
  keyword: 'notAllChecked',
  instancePath: '',
  schemaPath: '#',
  params: {},
  message: 'has more problems than those listed',
} as const;

/** `value` cut to the bounds `schema` sets (see above); `value` itself when nothing is cut. */
export function withinSchemaBounds(
  value: unknown,
  schema: unknown,
  cuts: Cuts = { unknownFields: 0 },
): unknown {
  if (!isSchema(schema)) return value;
  const kind = jsonType(value);
  if (kind === '' || kind === 'null') return value;
  if (schema.anyOf) {
    const branches = schema.anyOf.filter((branch) => isSchema(branch) && branch.type === kind);
    return branches.length === 1 ? withinSchemaBounds(value, branches[0], cuts) : value;
  }
  if (kind === 'array') return arrayWithinBounds(value as unknown[], schema, cuts);
  return objectWithinBounds(value as Record<string, unknown>, schema, cuts);
}

function arrayWithinBounds(array: unknown[], schema: SchemaNode, cuts: Cuts): unknown[] {
  const kept =
    typeof schema.maxItems === 'number' && array.length > schema.maxItems + 1
      ? array.slice(0, schema.maxItems + 1)
      : array;
  if (!isSchema(schema.items)) return kept;
  let out = kept;
  kept.forEach((item, i) => {
    const bounded = withinSchemaBounds(item, schema.items, cuts);
    if (bounded === item) return;
    if (out === array) out = array.slice();
    out[i] = bounded;
  });
  return out;
}

function objectWithinBounds(
  object: Record<string, unknown>,
  schema: SchemaNode,
  cuts: Cuts,
): Record<string, unknown> {
  const properties = schema.properties ?? {};
  const keys = Object.keys(object);
  let kept =
    typeof schema.maxProperties === 'number' && keys.length > schema.maxProperties + 1
      ? keys.slice(0, schema.maxProperties + 1)
      : keys;
  // Only where every field not in `properties` is refused: one a pattern allows may be needed (minProperties).
  const othersRefused = schema.additionalProperties === false && schema.patternProperties === undefined;
  if (othersRefused && kept.length > UNKNOWN_FIELDS_KEPT) {
    let unknown = 0;
    kept = kept.filter((key) => Object.hasOwn(properties, key) || ++unknown <= UNKNOWN_FIELDS_KEPT);
    cuts.unknownFields += Math.max(0, unknown - UNKNOWN_FIELDS_KEPT);
  }
  // Made with fromEntries, a key such as `__proto__` (JSON.parse makes it one) is a property, not a prototype.
  let out = kept.length === keys.length ? object : Object.fromEntries(kept.map((key) => [key, object[key]]));
  for (const key of Object.keys(properties)) {
    if (!Object.hasOwn(out, key)) continue;
    const bounded = withinSchemaBounds(out[key], properties[key], cuts);
    if (bounded === out[key]) continue;
    if (out === object) out = { ...object };
    Object.defineProperty(out, key, { value: bounded, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** `errors`, and the word that not all was checked when `cuts` left fields out. */
export function sayingWhatWasCut<E>(errors: readonly E[], cuts: Cuts): Array<E | typeof NOT_ALL_CHECKED> {
  return cuts.unknownFields > 0 ? [...errors, NOT_ALL_CHECKED] : [...errors];
}

type Validator = ((data: unknown) => unknown) & { errors?: unknown };

/** `validate`, given the value within `schema`'s bounds: the same answer, at a cost the schema bounds. */
export function validatingWithinSchemaBounds<V extends Validator>(schema: unknown, validate: V): V {
  const wrapped = ((data: unknown) => {
    const cuts: Cuts = { unknownFields: 0 };
    const result = validate(withinSchemaBounds(data, schema, cuts));
    wrapped.errors = Array.isArray(validate.errors)
      ? sayingWhatWasCut(validate.errors, cuts)
      : validate.errors;
    return result;
  }) as V;
  return wrapped;
}
