/**
 * What checking a body costs against what parsing it costs, for bodies made to be expensive to check: every
 * element of a 1 MB array failing its schema, 100,000 unknown fields, 166,000 numbers without a canonical JSON
 * form. Before the bounds of src/contract/schema-bounds.ts and the onboarding check's own, the first took 9 s of
 * event loop for 30 ms of parsing. Printed per body: its size, the parse's and the check's median ms over the
 * rounds, and their ratio (the check against the parse of the same bytes in the same process: the machine's noise
 * moves both). Routes other than onboarding also get the same check without the bounds (ajv alone), for scale.
 *
 *   node --import tsx bench/body-validation.bench.ts        (BENCH_ROUNDS=n, default 5)
 */
import type { TSchema } from 'typebox';
import { ClientAuthTokenBody } from '../src/contract/funding.schemas.ts';
import { checkCustomerBody } from '../src/contract/participants.validation.ts';
import { LiquidityQuoteBody } from '../src/contract/quotes.schemas.ts';
import { compileBodyValidator, newBodyAjv } from '../src/http/body-validator.ts';
import { usCustomer } from '../test/helpers/onboarding-fixtures.ts';
import { median } from './bench-support.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const NOW = Date.now();

/** The app's body validator (src/app.ts). */
const bodyAjv = newBodyAjv();

interface Case {
  name: string;
  raw: string;
  check: (body: unknown) => unknown;
  /** The same check without the bounds, where there is one to call. */
  unbounded?: (body: unknown) => unknown;
}

const routeCase = (name: string, schema: TSchema, raw: string): Case => {
  const validate = bodyAjv.compile(schema);
  const bounded = compileBodyValidator(bodyAjv, schema);
  return { name, raw, check: (body) => bounded(body), unbounded: (body) => validate(body) };
};

const onboardingCase = (name: string, raw: string): Case => ({
  name,
  raw,
  check: (body) => checkCustomerBody(body, NOW),
});

const customer = (extra: Record<string, unknown>) => JSON.stringify(usCustomer(extra, NOW));
const repeated = (item: string, count: number) => Array.from({ length: count }, () => item).join(',');

const cases: Case[] = [
  onboardingCase(
    'onboarding: 340,000 empty agreements',
    customer({ signed_agreements: [] }).replace(
      '"signed_agreements":[]',
      `"signed_agreements":[${repeated('{}', 340_000)}]`,
    ),
  ),
  onboardingCase(
    'onboarding: metadata of 166,000 × 1e400',
    `{"metadata":{"a":[${repeated('1e400', 166_000)}]}}`,
  ),
  onboardingCase(
    'onboarding: 92,000 unknown fields',
    `{${Array.from({ length: 92_000 }, (_, i) => `"x${i}":1`).join(',')}}`,
  ),
  onboardingCase(
    'onboarding, valid: metadata of 92,000 fields',
    customer({ metadata: Object.fromEntries(Array.from({ length: 92_000 }, (_, i) => [`k${i}`, i])) }),
  ),
  routeCase('quote: 200,000 empty fees', LiquidityQuoteBody, `{"fees":[${repeated('{}', 200_000)}]}`),
  routeCase(
    'quote: 100,000 unknown fields',
    LiquidityQuoteBody,
    `{${Array.from({ length: 100_000 }, (_, i) => `"x${i}":1`).join(',')}}`,
  ),
  routeCase(
    'client token: 340,000 empty permissions',
    ClientAuthTokenBody,
    `{"participant_code":"ABCDEF","permissions":[${repeated('{}', 340_000)}]}`,
  ),
];

function timed(fn: () => unknown): number {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

console.log(`body validation against JSON.parse of the same bytes, medians of ${ROUNDS} rounds`);
for (const c of cases) {
  const parse: number[] = [];
  const check: number[] = [];
  const unbounded: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    parse.push(timed(() => JSON.parse(c.raw)));
    // A body of its own for each check: ajv's useDefaults writes into what it validates.
    const body = JSON.parse(c.raw) as unknown;
    check.push(timed(() => c.check(body)));
    if (c.unbounded) {
      const again = JSON.parse(c.raw) as unknown;
      unbounded.push(timed(() => c.unbounded!(again)));
    }
  }
  const p = median(parse);
  const k = median(check);
  const without = c.unbounded
    ? `; without the bounds ${median(unbounded).toFixed(1)} ms (${(median(unbounded) / p).toFixed(1)}×)`
    : '';
  console.log(
    `${c.name} (${(c.raw.length / 1024).toFixed(0)} KB): parse ${p.toFixed(1)} ms, check ${k.toFixed(1)} ms, ` +
      `check/parse ${(k / p).toFixed(2)}${without}`,
  );
}
