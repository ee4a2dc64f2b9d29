import type { FastifyError, FastifySchemaValidationError } from 'fastify';
import { NOT_ALL_CHECKED } from '../contract/schema-bounds.ts';

/**
 * The lines of a 400 for a request that failed its route's schema (wire-contract §3 `{"errors": [...]}`): ajv's
 * errors as "<field>: <problem>", the field named as the caller wrote it, each problem once, in words where ajv's
 * own are a regex or a union's branches, and at most MAX_PROBLEMS_LISTED of them.
 */

/** The most allowed values a 400 lists. */
const MAX_VALUES_LISTED = 16;
/**
 * The most problems a 400 lists, and the most of ajv's errors read to find them. Every bad element of an array is an
 * error of its own: a body of 200,000 empty `fees` (600 KB, under the 1 MiB limit) made a 13 MB answer and held the
 * event loop for about a second (review, session 31). The first ones name the problem; a last line says more were
 * found.
 */
export const MAX_PROBLEMS_LISTED = 50;
/** The last line of a 400 that lists MAX_PROBLEMS_LISTED of more problems, after the part of the request named. */
export const MORE_PROBLEMS = 'more problems than these, not listed';
const MAX_ERRORS_READ = 1_000;
/** How many errors one union cut by MAX_ERRORS_READ may have read to be folded (readable). */
const MAX_UNION_ERRORS_READ = 4 * MAX_ERRORS_READ;

type AjvError = FastifySchemaValidationError & {
  /** With ajv's `verbose`: the keyword's value (for anyOf, its branches) and the schema holding it. */
  schema?: unknown;
  parentSchema?: { description?: unknown };
};

/**
 * Fastify's `schemaErrorFormatter`: the error's message is not what the caller reads (describeValidation is), and
 * Fastify's own joined every one of ajv's errors into it, 21 MB for the body above (review).
 */
export function validationErrorSummary(errors: FastifySchemaValidationError[], dataVar: string): Error {
  return new Error(`${dataVar}: ${errors.length} validation problem${errors.length === 1 ? '' : 's'}`);
}

/** ajv errors → the lines of the 400, naming each field as the caller sent it. */
export function describeValidation(error: FastifyError): string[] {
  const given = (error.validation ?? []) as AjvError[];
  // The validator's word that it left part of the value unchecked (src/contract/schema-bounds.ts): no line of its own.
  const all = given.filter((item) => item.keyword !== NOT_ALL_CHECKED.keyword);
  const read = readable(all);
  const problems = foldUnions(read);
  const messages = new Set<string>();
  let unread = all.length > read.length || all.length < given.length;
  for (const [i, item] of problems.entries()) {
    messages.add(describeOne(error, item));
    if (messages.size === MAX_PROBLEMS_LISTED) {
      unread ||= i < problems.length - 1;
      break;
    }
  }
  if (unread) messages.add(`${contextName(error)}: ${MORE_PROBLEMS}`);
  return [...messages];
}

/**
 * The errors to read of `all`: at most MAX_ERRORS_READ. ajv reports a union's branches before the union, so a cut
 * between them would leave the branches alone, unfolded: they are not read. Unless they are all there is (a union of
 * object forms given hundreds of unknown fields; probe: the 400 then named no problem at all): then up to the union
 * itself, so that they are told as its closest form's, within MAX_UNION_ERRORS_READ; beyond that, as they are.
 */
function readable(all: AjvError[]): AjvError[] {
  const read = all.slice(0, MAX_ERRORS_READ);
  if (all.length === read.length) return read;
  let kept = read.length;
  while (kept > 0 && read[kept - 1]!.schemaPath.includes('/anyOf/')) kept--;
  if (kept > 0) return read.slice(0, kept);
  const union = all.findIndex((item, at) => at >= MAX_ERRORS_READ && item.keyword === 'anyOf');
  return union !== -1 && union < MAX_UNION_ERRORS_READ ? all.slice(0, union + 1) : read;
}

/** The values a schema allows, when it is a list of them (a literal, an enum, null, or a union of those); else null. */
function valuesOf(schema: unknown): unknown[] | null {
  const s = schema as { const?: unknown; enum?: unknown; type?: unknown; anyOf?: unknown } | null;
  if (s === null || typeof s !== 'object') return null;
  if ('const' in s) return [s.const];
  if (Array.isArray(s.enum)) return s.enum;
  if (s.type === 'null') return [null];
  if (Array.isArray(s.anyOf)) {
    const values = s.anyOf.map(valuesOf);
    return values.every((v) => v !== null) ? values.flat() : null;
  }
  return null;
}

/** A value of a list, as a 400 says it: text as it is, anything else (null, '', a number…) as JSON. */
function valueText(value: unknown): string {
  return typeof value === 'string' && value !== '' ? value : JSON.stringify(value);
}

/**
 * ajv reports a failed anyOf (a union) as an error per branch and one for the anyOf: "must be equal to constant",
 * "must match a schema in anyOf" (review: a 400 that did not say what is allowed). Said once instead: a union of
 * values (TypeBox's union of literals, nullable or not) as the list of them; a nullable of anything else (a schema
 * or null) as its schema's problems alone. Other unions are left as ajv says them.
 */
function foldUnions(items: AjvError[]): AjvError[] {
  const dropped = new Set<AjvError>();
  const replaced = new Map<AjvError, AjvError>();
  for (const union of items) {
    if (union.keyword !== 'anyOf' || !Array.isArray(union.schema)) continue;
    const branches = union.schema as unknown[];
    /** The errors of the union's branch `at` (every branch's when `at` is omitted), at its place or within it. */
    const errorsOfBranch = (at?: number) => {
      const prefix = `${union.schemaPath}/${at === undefined ? '' : `${at}/`}`;
      return items.filter(
        (other) =>
          other.schemaPath.startsWith(prefix) &&
          (other.instancePath === union.instancePath ||
            other.instancePath.startsWith(`${union.instancePath}/`)),
      );
    };
    const values = valuesOf({ anyOf: branches });
    if (values !== null && values.length <= MAX_VALUES_LISTED) {
      for (const other of errorsOfBranch()) dropped.add(other);
      // Said as an enum's error is (describeOne).
      replaced.set(union, { ...union, keyword: 'enum', params: { allowedValues: values.map(valueText) } });
      continue;
    }
    const nullAt = branches.findIndex((branch) => (branch as { type?: unknown } | null)?.type === 'null');
    if (branches.length === 2 && nullAt >= 0) {
      for (const other of errorsOfBranch(nullAt)) dropped.add(other);
      dropped.add(union);
      // A value of another type is said to be of neither: "must be string or null".
      for (const other of errorsOfBranch(1 - nullAt)) {
        if (other.keyword === 'type' && other.instancePath === union.instancePath)
          replaced.set(other, { ...other, message: `${other.message ?? 'is of another type'} or null` });
      }
      continue;
    }
    // A union of object forms (the vendor's funding_details: a reference, or an account with its fee): the problems
    // of the form the value came closest to, as the customer body's variants are told (participants.validation.ts).
    // Every form's at once told a value of the second form, wrong in one field, that the first form's field was
    // required and its own were not allowed (probe).
    if (!branches.every((branch) => (branch as { type?: unknown } | null)?.type === 'object')) continue;
    const forms = branches.map((_, at) => errorsOfBranch(at));
    const closest = forms.reduce((best, form, at) => (closer(form, forms[best]!) ? at : best), 0);
    for (const [at, form] of forms.entries())
      if (at !== closest) for (const other of form) dropped.add(other);
    dropped.add(union);
  }
  return items.filter((item) => !dropped.has(item)).map((item) => replaced.get(item) ?? item);
}

/**
 * Whether a form with problems `a` is closer to the value than one with `b`: fewer fields it does not take, then fewer
 * fields missing, then fewer problems (the order participants.validation.ts ranks the customer body's variants by).
 */
function closer(a: AjvError[], b: AjvError[]): boolean {
  const score = (form: AjvError[]) => [
    form.filter((e) => e.keyword === 'additionalProperties').length,
    form.filter((e) => e.keyword === 'required').length,
    form.length,
  ];
  const [x, y] = [score(a), score(b)];
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! < y[i]!;
  return false;
}

/** What a problem of the request part as a whole is said of: `body`, `querystring`… */
function contextName(error: FastifyError): string {
  return error.validationContext === 'body' ? 'body' : (error.validationContext ?? 'request');
}

function describeOne(error: FastifyError, item: AjvError): string {
  const params = item.params as Record<string, unknown>;
  const base = fieldName(item.instancePath);
  if (item.keyword === 'required') {
    const field = [base, clip(String(params.missingProperty))].filter(Boolean).join('.');
    return `${field}: is required`;
  }
  if (item.keyword === 'additionalProperties') {
    // One with no name (`?=x`, `{"": 1}`) was said as ": is not allowed" (probe).
    if (params.additionalProperty === '') {
      const what = error.validationContext === 'querystring' ? 'a parameter' : 'a field';
      return `${base || contextName(error)}: ${what} with an empty name is not allowed`;
    }
    const field = [base, clip(String(params.additionalProperty))].filter(Boolean).join('.');
    return `${field}: is not allowed`;
  }
  const field = base || contextName(error);
  // A pattern is said in the words of its schema's description where it has one, not as the regex.
  // (ajv's `verbose` adds parentSchema; Fastify's type of the error does not declare it.)
  const description = item.parentSchema?.description;
  if (item.keyword === 'pattern' && typeof description === 'string')
    return `${field}: is not in the expected form (${description})`;
  // Node reads a header's value a byte a character (latin1): its length bound is in bytes, said so (probe: an
  // X-REQUEST-ID of 128 × "é", 256 bytes in UTF-8, was refused as "more than 255 characters").
  if (item.keyword === 'maxLength' && error.validationContext === 'headers')
    return `${field}: must NOT have more than ${String(params.limit)} bytes`;
  // A short list is said (review: "must be equal to one of the allowed values" left the caller guessing); a long
  // one (countries) is in the API docs.
  const allowed = params.allowedValues;
  if (item.keyword === 'enum' && Array.isArray(allowed) && allowed.length <= MAX_VALUES_LISTED)
    return `${field}: must be one of ${allowed.join(', ')}`;
  // A single value (a literal): said, not "must be equal to constant" (review: `include=everything`).
  if (item.keyword === 'const' && ['string', 'number', 'boolean'].includes(typeof params.allowedValue))
    return `${field}: must be ${String(params.allowedValue)}`;
  return `${field}: ${item.message ?? 'is invalid'}`;
}

/**
 * ajv's instancePath is a JSON pointer ("/pairs/BTC~1USD", "/cidrs/0"): shown as the caller wrote the field,
 * "pairs.BTC/USD", "cidrs[0]".
 */
function fieldName(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((segment) => clip(segment.replaceAll('~1', '/').replaceAll('~0', '~')))
    .reduce(
      (path, segment) =>
        /^\d+$/.test(segment) ? `${path}[${segment}]` : path ? `${path}.${segment}` : segment,
      '',
    );
}

/** A field name is the caller's text (a record key): shown in full up to 64 characters, never echoed whole. */
function clip(name: string): string {
  return name.length > 64 ? `${name.slice(0, 61)}…` : name;
}
