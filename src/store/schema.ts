import type { AccountsTables } from './tables/accounts.tables.ts';
import type { FoundationTables } from './tables/foundation.tables.ts';
import type { FundingTables } from './tables/funding.tables.ts';
import type { JobsTables } from './tables/jobs.tables.ts';
import type { ParticipantsTables } from './tables/participants.tables.ts';
import type { TradesTables } from './tables/trades.tables.ts';
import type { WebhooksTables } from './tables/webhooks.tables.ts';

/**
 * The typed view of the whole database for Kysely: one interface per migration area, composed here.
 * Add an area's tables by intersecting its `<area>.tables.ts` interface.
 */
export type Database = FoundationTables &
  FundingTables &
  AccountsTables &
  TradesTables &
  ParticipantsTables &
  WebhooksTables &
  JobsTables;
