import type { SelectQueryBuilder } from 'kysely';

/**
 * Offset paging of the list endpoints, one definition for all of them (wire-contract §3: `page`, from 1, and
 * `page_size` in; `page`, `page_size`, `total_pages` and `count` out). The query schemas bound both numbers.
 */
export interface PageQuery {
  page?: number;
  page_size?: number;
}

/** Every listing's default page size. */
export const DEFAULT_PAGE_SIZE = 50;

/** The page asked for, as the limit (the page size) and offset of the repository query that reads it. */
export interface Page {
  page: number;
  limit: number;
  offset: number;
}

export function pageOf(query: PageQuery, defaultSize = DEFAULT_PAGE_SIZE): Page {
  const page = query.page ?? 1;
  const limit = query.page_size ?? defaultSize;
  return { page, limit, offset: (page - 1) * limit };
}

/** The paging fields of a listing's answer, given how many items match in all. */
export function pageFields(
  { page, limit }: Page,
  count: number,
): { page: number; page_size: number; total_pages: number; count: number } {
  return { page, page_size: limit, total_pages: Math.ceil(count / limit), count };
}

/** From this offset on, a listing counts first and reads the page only if it is not past the end. */
const DEEP_OFFSET = 1_000;

/**
 * A page's rows and how many items match in all. For the first pages the two statements run side by side;
 * deeper, the count runs first, and a page past the end is not read: its OFFSET walked every matching row to
 * return none (review: `GET /trades?page=1000000` over 200k trades, 260 ms of database time per request, for
 * any client to send).
 */
export async function rowsAndCount<R>(
  offset: number,
  rows: () => Promise<R[]>,
  count: () => Promise<number>,
): Promise<{ rows: R[]; count: number }> {
  if (offset < DEEP_OFFSET) {
    const [found, total] = await Promise.all([rows(), count()]);
    return { rows: found, count: total };
  }
  const total = await count();
  return { rows: offset >= total ? [] : await rows(), count: total };
}

/** How many rows `query` (a listing's filtered query) matches, for `rowsAndCount`. */
export async function countOf<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
): Promise<number> {
  // Cast: Kysely cannot name the selection of a builder whose tables are a type parameter.
  const { count } = (await query
    .clearSelect()
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow()) as { count: number | string };
  return Number(count);
}
