import { sql, type Insertable, type Selectable } from 'kysely';
import type { Executor } from '../../store/database.ts';
import type { QuoteKind, QuotesTable } from '../../store/tables/trades.tables.ts';

export type QuoteRow = Selectable<QuotesTable>;

export async function insertQuote(db: Executor, quote: Insertable<QuotesTable>): Promise<QuoteRow> {
  return db.insertInto('quotes').values(quote).returningAll().executeTakeFirstOrThrow();
}

/** Whether `quoteId` (a UUID, any letter case) is one of `platformCode`'s quotes, executed, live or expired. */
export async function isQuoteOf(db: Executor, platformCode: string, quoteId: string): Promise<boolean> {
  const row = await db
    .selectFrom('quotes')
    .select('quote_id')
    .where('platform_code', '=', platformCode)
    .where('quote_id', '=', quoteId.toLowerCase())
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * wire-contract §7: marks the quote executed if, and only if, it is this platform's, of this kind, not
 * executed yet and not expired. The row is locked first (`for no key update`), whatever its state, and only then checked: concurrent
 * callers queue on the lock and see the winner's outcome, so exactly one gets the quote, on any number of
 * instances; if the winner rolls back (say, insufficient balance), the next one gets it. As one UPDATE filtered
 * by expiry, a caller that came after the expiry skipped the row instead of waiting for the execute holding it
 * (PostgreSQL only waits for rows its snapshot finds), and answered 404 while that execute was still booking its
 * trade, which spec 7.2 reads as "expired, requote" (fuzz: two trades). `now` is read once the lock is held.
 */
export async function claimQuoteForExecution(
  db: Executor,
  platformCode: string,
  kind: QuoteKind,
  quoteId: string,
  now: () => Date,
): Promise<QuoteRow | undefined> {
  const locked = await db
    .selectFrom('quotes')
    .select(['executed_at', 'expire_at'])
    .where('platform_code', '=', platformCode)
    .where('kind', '=', kind)
    .where('quote_id', '=', quoteId)
    // The strength the UPDATE below takes anyway (no key column changes): a trade's foreign key check on the
    // quote is not blocked by it.
    .forNoKeyUpdate()
    .executeTakeFirst();
  const at = now();
  if (!locked || locked.executed_at !== null || locked.expire_at <= at) return undefined;
  return db
    .updateTable('quotes')
    .set({ executed_at: at })
    .where('quote_id', '=', quoteId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Deletes up to `limit` quotes that expired before `before` without being executed (an executed quote stays
 * with its trade); returns how many. Batched so that one call holds its locks briefly.
 */
export async function deleteUnexecutedQuotesExpiredBefore(
  db: Executor,
  before: Date,
  limit: number,
): Promise<number> {
  // The batch's keys as an array, then probed one by one: as `quote_id in (select …)` the planner hash-joined
  // a sequential scan of every quote, executed ones included, once per batch (review: 300k quotes, 112–382
  // ms a batch). Oldest first, along the index of unexecuted quotes by expiry.
  const batch = db
    .selectFrom('quotes')
    .select('quote_id')
    .where('executed_at', 'is', null)
    .where('expire_at', '<', before)
    .orderBy('expire_at')
    .limit(limit);
  const result = await db
    .deleteFrom('quotes')
    .where(sql<boolean>`quote_id = any (array(${batch}))`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
