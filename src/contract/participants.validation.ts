import { isIP } from 'node:net';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Type, type TObject } from 'typebox';
import { hasLoneSurrogate } from '../lib/unicode.ts';
import { NOT_ALL_CHECKED, sayingWhatWasCut, withinSchemaBounds, type Cuts } from './schema-bounds.ts';
import { readCoordinate } from './coordinates.ts';
import { withFormats } from './schema-formats.ts';
import {
  CITIZENSHIP_CODES,
  COORDINATE_PATTERN,
  CUSTOMER_BODY_VARIANTS,
  CUSTOMER_FIELDS,
  EPOCH_MS_FIELDS,
  PASSPORT_ID_TYPES,
  WINDOWED_TIMESTAMP_FIELDS,
  type PostCustomerBody,
} from './participants.schemas.ts';

/**
 * Validation of `POST /participants/customers/new` bodies (spec 7.3 "format errors"; wire-contract §9: a 400
 * lists every bad field). The vendor's body is one of several variants; JSON Schema alone cannot say which
 * variant's errors to report, and some vendor rules are conditional ("tax_id: required when citizenship_code
 * is US") or depend on the clock ("within the last year"). So one function does all of it, in one pass,
 * and reports the errors of the variant the body came closest to.
 *
 * Errors come out in ajv's shape so that the route's validator hands them to the one error handler
 * (src/http/error-handler.ts), which words every 400 the same way.
 */
export type FieldError = Pick<ErrorObject, 'instancePath' | 'schemaPath' | 'keyword' | 'params' | 'message'>;

export type CustomerBodyCheck =
  | { ok: true; body: PostCustomerBody; variant: string }
  | { ok: false; variant: string; errors: FieldError[] };

// Bodies: strict types, no coercion, no defaults written into what the platform sent (the body is hashed
// for spec 7.3 exactly as received). `verbose`, as src/app.ts's: each error carries its schema, whose description
// says a pattern in words (without it, a control character in a name was answered with the regex: review).
const bodyAjv = withFormats(
  new Ajv({ allErrors: true, coerceTypes: false, useDefaults: false, strict: false, verbose: true }),
);

interface CompiledVariant {
  title: string;
  accepts: Set<string>;
  validate: ValidateFunction;
}

const VARIANTS: CompiledVariant[] = CUSTOMER_BODY_VARIANTS.map((schema: TObject) => ({
  title: String((schema as { title?: string }).title),
  accepts: new Set(Object.keys(schema.properties)),
  validate: bodyAjv.compile(schema),
}));
const PARTIAL_VARIANT = 'Partially Onboarded Participant';
/**
 * Every field by the rule the variants share (none narrows an array, nor a field inside one), no other allowed: the
 * body is cut to these bounds once (schema-bounds.ts), which are each variant's too, and every variant checks what is
 * left. A field none of them takes is refused by all, so the first 100 of those stand for the rest (92,000 were cut
 * for each variant, four times: 3.5 times the body's parse, the bench). Each variant counts the same 100, so the
 * closest variant is the one it would be without the cut (cut for each variant, to 100 fields it does not take of
 * its own, the counts tied and another variant was told: review).
 */
const EVERY_FIELD = Type.Object(CUSTOMER_FIELDS, { additionalProperties: false });

const DAY_MS = 86_400_000;
const PO_BOX = /\bp\.?\s*o\.?\s*box\b|\bpost\s+office\s+box\b/i;
const INVISIBLE = /\p{Default_Ignorable_Code_Point}/gu;
const US_TAX_ID = /^\d{3}-?\d{2}-?\d{4}$/;
const COORDINATE_RE = new RegExp(COORDINATE_PATTERN);
const EPOCH_MS = new Set<string>(EPOCH_MS_FIELDS);

const error = (path: string, message: string, keyword = 'customer'): FieldError => ({
  instancePath: path,
  schemaPath: `#/${keyword}`,
  keyword,
  params: {},
  message,
});

/** ajv errors in the words a platform developer needs; one line per problem. */
function reword(errors: ErrorObject[]): FieldError[] {
  const unions = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath));
  const out: FieldError[] = [];
  for (const e of errors) {
    const field = e.instancePath.split('/')[1] ?? '';
    // A union (metadata) reports each branch; one line says what is accepted.
    if (unions.has(e.instancePath) && e.keyword !== 'anyOf') continue;
    if (e.keyword === 'anyOf') {
      out.push(
        error(e.instancePath, 'must be a JSON object or a string of at most 10000 characters', 'anyOf'),
      );
    } else if (
      EPOCH_MS.has(field) &&
      e.instancePath === `/${field}` &&
      ['type', 'minimum', 'maximum'].includes(e.keyword)
    ) {
      out.push(error(e.instancePath, 'must be an epoch time in milliseconds (13 digits)', e.keyword));
    } else if (e.keyword === 'format' && (e.params as { format?: string }).format === 'date') {
      out.push(error(e.instancePath, 'must be a real date in the format YYYY-MM-DD', 'format'));
    } else if (e.keyword === 'enum') {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
      out.push(
        error(
          e.instancePath,
          allowed.length <= 16
            ? `must be one of ${allowed.join(', ')}`
            : `must be one of the ${allowed.length} codes the API accepts`,
          'enum',
        ),
      );
    } else if (e.keyword === 'const' && e.instancePath === '/partial') {
      out.push(error(e.instancePath, 'must be true', 'const'));
    } else {
      out.push(e);
    }
  }
  return out;
}

const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
/**
 * The same moment a calendar year earlier (UTC), 29 February going to the 28th: the vendor's "one (1) year in the
 * past" is a year, not 365 days (probe: a KYC 366 days old, within the year through a 29 February, was refused).
 */
function aYearBefore(ms: number): number {
  const at = new Date(ms);
  const year = at.getUTCFullYear() - 1;
  const month = at.getUTCMonth();
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  at.setUTCFullYear(year, month, Math.min(at.getUTCDate(), lastDay));
  return at.getTime();
}
/** YYYY-MM-DD naming a day that exists (the format check reports the others). */
const isRealDate = (value: unknown): value is string =>
  typeof value === 'string' &&
  /^\d{4}-\d{2}-\d{2}$/.test(value) &&
  !Number.isNaN(Date.parse(`${value}T00:00:00Z`)) &&
  new Date(`${value}T00:00:00Z`).toISOString().startsWith(value);

/** Rules beyond JSON Schema that hold whatever the variant: dates, time windows, addresses, text. */
function semanticErrors(body: Record<string, unknown>, now: number): FieldError[] {
  const errors: FieldError[] = [];
  const today = utcDay(now);
  const text = (name: string) => (typeof body[name] === 'string' ? (body[name] as string) : undefined);

  const dob = body.date_of_birth;
  if (isRealDate(dob)) {
    if (dob >= today) errors.push(error('/date_of_birth', 'must be in the past'));
    else if (dob < '1900-01-01') errors.push(error('/date_of_birth', 'must be on or after 1900-01-01'));
  }
  const issued = body.id_issuing_date;
  if (isRealDate(issued) && issued > today)
    errors.push(error('/id_issuing_date', 'must not be in the future'));
  const expires = body.id_expiration_date;
  if (isRealDate(issued) && isRealDate(expires) && expires <= issued) {
    errors.push(error('/id_expiration_date', 'must be after id_issuing_date'));
  }
  // vendor: "must be from no longer than one (1) year in the past or one (1) day in the future", for the
  // body's timestamps and each signed agreement's.
  const windowed: Array<[path: string, at: unknown]> = WINDOWED_TIMESTAMP_FIELDS.map((name) => [
    `/${name}`,
    body[name],
  ]);
  const agreements = body.signed_agreements;
  if (Array.isArray(agreements)) {
    agreements.forEach((agreement: unknown, i) => {
      if (agreement !== null && typeof agreement === 'object')
        windowed.push([
          `/signed_agreements/${i}/signed_timestamp`,
          (agreement as Record<string, unknown>).signed_timestamp,
        ]);
    });
  }
  const earliest = aYearBefore(now);
  for (const [path, at] of windowed) {
    // Values that are not epoch ms at all are reported by the schema, once.
    if (typeof at !== 'number' || at < 1e12 || at > 9_999_999_999_999) continue;
    if (at < earliest || at > now + DAY_MS) {
      errors.push(error(path, 'must be within the last year and at most one day ahead'));
    }
  }
  // vendor: "PO Box addresses are not accepted".
  for (const name of ['address_one', 'address_two']) {
    const value = text(name);
    // As it reads, whatever forms its letters take (identity probe: a fullwidth "Ｐ.Ｏ. Ｂｏｘ" was taken), and without
    // what prints as nothing (review: "P.O. B\u200box" was taken).
    if (value !== undefined && PO_BOX.test(value.normalize('NFKC').replace(INVISIBLE, ''))) {
      errors.push(error(`/${name}`, 'PO Box addresses are not accepted'));
    }
  }
  const coordinates = body.proof_of_address_coordinates;
  if (coordinates !== null && typeof coordinates === 'object' && !Array.isArray(coordinates)) {
    for (const axis of ['latitude', 'longitude'] as const) {
      const value = (coordinates as Record<string, unknown>)[axis];
      // A value the schema's pattern refuses is reported by the schema, once.
      if (typeof value !== 'string' || !COORDINATE_RE.test(value)) continue;
      const reading = readCoordinate(value, axis);
      if ('problem' in reading) errors.push(error(`/proof_of_address_coordinates/${axis}`, reading.problem));
    }
  }
  const ip = text('ip_address');
  if (ip !== undefined && isIP(ip) === 0)
    errors.push(error('/ip_address', 'must be an IPv4 or IPv6 address'));
  if (body.citizenship_code === 'US' && text('tax_id') !== undefined && !US_TAX_ID.test(text('tax_id')!)) {
    errors.push(error('/tax_id', 'must be a 9-digit SSN or ITIN, e.g. 000-00-0000'));
  }
  // One more than kept, to know whether there are more: if so the 400 says, even where its lines fold into fewer.
  const found = errors.length;
  collectUnhashable(body, '', errors, found + UNHASHABLE_KEPT + 1);
  if (errors.length - found > UNHASHABLE_KEPT) errors.splice(found + UNHASHABLE_KEPT, 1, NOT_ALL_CHECKED);
  return errors;
}

/**
 * The most values without a canonical JSON form reported: one more than a 400 lists (50), so that it says there are
 * more. `metadata` takes any object, so nothing else bounds them: 1 MB of `1e400` was 166,000 errors, and
 * 1,400 of them under a 16 KB key held the event loop for 8.7 s (probe: strings that long hash alike in V8, and
 * {@link distance} puts every error's path in a Set).
 */
const UNHASHABLE_KEPT = 51;

/**
 * What has no canonical JSON form (RFC 8785), so that spec 7.3 could not hash the body: a string, or an
 * object's key (in `metadata`, which takes any object), with a lone UTF-16 surrogate, and a number JSON.parse
 * made infinite (`1e400`); until `errors` holds `upTo`.
 */
function collectUnhashable(value: unknown, path: string, errors: FieldError[], upTo: number): void {
  if (errors.length >= upTo) return;
  if (typeof value === 'string') {
    if (hasLoneSurrogate(value)) errors.push(error(path, 'must be well-formed Unicode text'));
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value)) errors.push(error(path, 'must be a number within the range of a double'));
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length && errors.length < upTo; i++)
      collectUnhashable(value[i], `${path}/${i}`, errors, upTo);
  } else if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      if (errors.length >= upTo) return;
      if (hasLoneSurrogate(key)) errors.push(error(path, 'has a key that is not well-formed Unicode text'));
      else collectUnhashable((value as Record<string, unknown>)[key], `${path}/${key}`, errors, upTo);
    }
  }
}

/**
 * The vendor's "Required when …" rules, checked for the fields the variant accepts (a variant that has no
 * `id_number` cannot be asked for one).
 */
function conditionalErrors(body: Record<string, unknown>, accepts: Set<string>): FieldError[] {
  const errors: FieldError[] = [];
  const has = (name: string) => body[name] !== undefined;
  const need = (name: string, because: string) => {
    if (accepts.has(name) && !has(name)) errors.push(error(`/${name}`, `is required when ${because}`));
  };
  // Only a valid citizenship decides what else is needed; an invalid one is reported by the schema.
  const citizenship = (CITIZENSHIP_CODES as readonly unknown[]).includes(body.citizenship_code)
    ? body.citizenship_code
    : undefined;
  const taxId = typeof body.tax_id === 'string' ? body.tax_id.replaceAll('-', '') : undefined;
  if (citizenship === 'US') need('tax_id', 'citizenship_code is US');
  if (typeof citizenship === 'string' && citizenship !== 'US') {
    need('id_number', 'citizenship_code is not US');
    need('id_number_type', 'citizenship_code is not US');
  }
  // vendor: a US ITIN is 9 digits starting with 9, and then an ID document is required as well.
  if (citizenship === 'US' && taxId !== undefined && /^9\d{8}$/.test(taxId)) {
    need('id_number', 'tax_id is an ITIN');
    need('id_number_type', 'tax_id is an ITIN');
  }
  // vendor: zip is "required if `country` is `USA`" (only the general variant takes `country`).
  if (body.country === 'USA') need('zip', 'country is USA');
  if (has('id_number')) need('id_issuing_authority', 'id_number is given');
  if ((PASSPORT_ID_TYPES as readonly unknown[]).includes(body.id_number_type)) {
    need('place_of_birth', `id_number_type is ${String(body.id_number_type)}`);
    need('id_expiration_date', `id_number_type is ${String(body.id_number_type)}`);
  }
  if (body.id_number_type === 'non_us_other') need('non_us_other_type', 'id_number_type is non_us_other');
  if (body.tx_relationship_term_with_service === 'other') {
    need('tx_relationship_term_with_service_other_explanation', 'tx_relationship_term_with_service is other');
  }
  if (body.purpose_of_transactions === 'other') {
    need('purpose_of_transactions_other_explanation', 'purpose_of_transactions is other');
  }
  const w8 = body.w8_ben;
  if (accepts.has('w8_ben') && w8 !== null && typeof w8 === 'object' && !Array.isArray(w8)) {
    const form = w8 as Record<string, unknown>;
    if (form.ftin_required === undefined) {
      errors.push(error('/w8_ben/ftin_required', 'is required when w8_ben is given'));
    } else if (form.ftin_required !== false && form.ftin === undefined) {
      errors.push(error('/w8_ben/ftin', 'is required unless ftin_required is false'));
    }
    const claim = form.treaty_claim as Record<string, unknown> | undefined;
    if (claim && typeof claim === 'object' && claim.is_eligible === true) {
      for (const name of [
        'country',
        'residence_certification',
        'income_type',
        'withholding_rate',
        'article_paragraph',
        'additional_conditions',
      ]) {
        if (claim[name] === undefined) {
          errors.push(error(`/w8_ben/treaty_claim/${name}`, 'is required when is_eligible is true'));
        }
      }
    }
  }
  return errors;
}

/**
 * How far a body is from a variant, compared in order: fields the variant does not accept, then fields it
 * requires that are missing, then every other bad field. The shape decides first because it is what tells
 * the vendor's forms apart; a wrong value is wrong in every form. Fields of the body itself: an unknown field inside
 * one (`w8_ben`) is a wrong value, and counted with the shape, a misspelt key in `w8_ben` told a US customer that
 * `w8_ben` was not allowed, and the 100 a cut keeps of an object's unknown fields changed the variant told (review).
 */
function distance(errors: FieldError[]): [number, number, number] {
  const fields = new Set(
    errors.map((e) => {
      const p = e.params as { missingProperty?: string; additionalProperty?: string };
      return `${e.instancePath}/${p.missingProperty ?? p.additionalProperty ?? ''}`;
    }),
  );
  return [
    errors.filter((e) => e.keyword === 'additionalProperties' && e.instancePath === '').length,
    errors.filter((e) => e.keyword === 'required').length,
    fields.size,
  ];
}

const closer = (a: [number, number, number], b: [number, number, number]) =>
  a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2];

/**
 * Checks a body against every variant and accepts it when one is satisfied; otherwise reports the errors of
 * the closest variant (see {@link distance}; ties go to the earlier, more general variant). `partial: true`
 * selects the partially onboarded variant, which no other variant accepts.
 */
export function checkCustomerBody(body: unknown, now: number): CustomerBodyCheck {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { ok: false, variant: '', errors: [error('', 'must be a JSON object', 'type')] };
  }
  const record = body as Record<string, unknown>;
  const cuts: Cuts = { unknownFields: 0 };
  const bounded = withinSchemaBounds(record, EVERY_FIELD, cuts) as Record<string, unknown>;
  const common = semanticErrors(bounded, now);
  const wantsPartial = record.partial !== undefined;
  let best: { variant: string; errors: FieldError[]; distance: [number, number, number] } | undefined;
  for (const candidate of VARIANTS) {
    if ((candidate.title === PARTIAL_VARIANT) !== wantsPartial) continue;
    const schemaOk = candidate.validate(bounded);
    const errors = [
      ...(schemaOk ? [] : reword(candidate.validate.errors ?? [])),
      ...conditionalErrors(record, candidate.accepts),
      ...common,
    ];
    if (errors.length === 0) return { ok: true, body: record as PostCustomerBody, variant: candidate.title };
    const score = distance(errors);
    if (!best || closer(score, best.distance)) best = { variant: candidate.title, errors, distance: score };
  }
  return { ok: false, variant: best!.variant, errors: sayingWhatWasCut(best!.errors, cuts) };
}

/** A Fastify validator of the body of `POST /participants/customers/new`: {@link checkCustomerBody} at `now()`. */
export interface CustomerBodyValidator {
  (data: unknown): boolean;
  errors?: FieldError[] | null;
}

export function customerBodyValidator(now: () => number): CustomerBodyValidator {
  const validate: CustomerBodyValidator = (data: unknown) => {
    const result = checkCustomerBody(data, now());
    validate.errors = result.ok ? null : result.errors;
    return result.ok;
  };
  return validate;
}
