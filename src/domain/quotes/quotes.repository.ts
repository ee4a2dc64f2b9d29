import { sql, type Insertable, type Selectable } from 'kysely';
import type { Executor } from '../../store/database.ts';
import type { QuoteKind, QuotesTable } from '../../store/tables/trades.tables.ts';

export type QuoteRow = Selectable<QuotesTable>;

export async function insertQuote(db: Executor, quote: Insertable<QuotesTable>): Promise<QuoteRow> {
  return db.insertInto('quotes').values(quote).returningAll().executeTakeFirstOrThrow();
}

/**
 * wire-contract §7: marks the quote executed if, and only if, it is this platform's, of this kind, not
 * executed yet and not expired, in one statement. Concurrent callers queue on the row lock and re-check
 * the condition after the winner commits, so exactly one gets the row, on any number of instances; if the
 * winner rolls back (say, insufficient balance), the next one gets it.
 */
export async function claimQuoteForExecution(
  db: Executor,
  platformCode: string,
  kind: QuoteKind,
  quoteId: string,
  now: Date,
): Promise<QuoteRow | undefined> {
  return db
    .updateTable('quotes')
    .set({ executed_at: now })
    .where('platform_code', '=', platformCode)
    .where('kind', '=', kind)
    .where('quote_id', '=', quoteId)
    .where('executed_at', 'is', null)
    .where('expire_at', '>', now)
    .returningAll()
    .executeTakeFirst();
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
