import { AMOUNT_DECIMALS } from '../../contract/quotes.schemas.ts';
import type { Executor } from '../../store/database.ts';
import type { DomainDeps } from '../deps.ts';
import { invalid } from '../errors.ts';
import { Dec, isDecimalString, toDecimalString } from '../../lib/decimal.ts';

/** The operator-set price source (DESIGN §1: external liquidity is out of scope, prices come from here). */
const PAIR_RE = /^([A-Z0-9]{1,12})\/([A-Z0-9]{1,12})$/;

export async function findPrice(
  db: Executor,
  underlying: string,
  quotedCurrency: string,
): Promise<string | null> {
  if (underlying === quotedCurrency) return '1';
  const row = await db
    .selectFrom('prices')
    .select('price')
    .where('underlying', '=', underlying)
    .where('quoted_currency', '=', quotedCurrency)
    .executeTakeFirst();
  return row?.price ?? null;
}

/** Whether any underlying has a price in `quotedCurrency`: whether the currency is one the price source quotes in. */
export async function isQuotedCurrency(db: Executor, quotedCurrency: string): Promise<boolean> {
  const row = await db
    .selectFrom('prices')
    .select('underlying')
    .where('quoted_currency', '=', quotedCurrency)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export function createPricesService(deps: DomainDeps) {
  return {
    async set(pairs: Record<string, string>) {
      const errors: string[] = [];
      const rows = Object.entries(pairs).map(([pair, price]) => {
        const match = PAIR_RE.exec(pair);
        // The key is the caller's text: named, but never echoed at any length.
        const field = `pairs.${pair.length > 64 ? `${pair.slice(0, 61)}…` : pair}`;
        if (!match) errors.push(`${field}: pair must look like "BTC/USD"`);
        // Such a price is never read (an asset in itself is 1), so storing and listing it only misled (review).
        else if (match[1] === match[2]) errors.push(`${field}: the two assets must differ`);
        if (typeof price !== 'string' || !isDecimalString(price) || !new Dec(price).gt(0)) {
          errors.push(`${field}: price must be a positive decimal string`);
        } else if (new Dec(price).decimalPlaces() > AMOUNT_DECIMALS) {
          // Quotes and trades carry AMOUNT_DECIMALS places: a finer price could only be quoted rounded away.
          errors.push(`${field}: price must have at most ${AMOUNT_DECIMALS} decimal places`);
        }
        return { underlying: match?.[1] ?? '', quoted_currency: match?.[2] ?? '', price };
      });
      if (rows.length === 0) errors.push('pairs: must name at least one pair');
      if (errors.length) throw invalid(...errors);
      const now = new Date(deps.clock.now());
      await deps.db
        .insertInto('prices')
        .values(rows.map((r) => ({ ...r, updated_at: now })))
        .onConflict((oc) =>
          oc
            .columns(['underlying', 'quoted_currency'])
            .doUpdateSet((eb) => ({ price: eb.ref('excluded.price'), updated_at: now })),
        )
        .execute();
      return this.list();
    },

    async list() {
      const rows = await deps.db
        .selectFrom('prices')
        .selectAll()
        .orderBy('underlying')
        .orderBy('quoted_currency')
        .execute();
      return rows.map((r) => ({
        pair: `${r.underlying}/${r.quoted_currency}`,
        // As every decimal is answered: a price set as "1.50" is "1.5" (the column keeps its scale).
        price: toDecimalString(r.price),
        updated_at: r.updated_at.getTime(),
      }));
    },
  };
}

export type PricesService = ReturnType<typeof createPricesService>;
