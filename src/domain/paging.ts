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
