import type { FoundationTables } from './tables/foundation.tables.ts';
import type { FundingTables } from './tables/funding.tables.ts';
import type { TradesTables } from './tables/trades.tables.ts';

/**
 * The typed view of the whole database for Kysely: one interface per migration area, composed here.
 * Add an area's tables by intersecting its `<area>.tables.ts` interface.
 */
export type Database = FoundationTables & FundingTables & TradesTables;
