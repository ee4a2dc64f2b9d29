import type { CronItem, Task, TaskList } from 'graphile-worker';
import { serialCronItem, SWEEP_SCHEDULE, sweepTask } from '../../jobs/cron.ts';
import {
  isUuid,
  REVIVE_SETTLEMENTS_TASK,
  SETTLE_TASK,
  type SettleJobPayload,
  type TradesService,
} from './trades.service.ts';
import { TRADE_STATES } from '../../contract/wire-values.ts';

/** How long past its due time a trade's next step may stay undone before the sweep adds its job again. */
export const SETTLEMENT_STALLED_AFTER_MS = 10 * 60_000;

/**
 * The settlement worker (spec 3.1, wire-contract §7): each trade has one pending job that moves it to its
 * next state when the configured delay has passed (SVC_SETTLEMENT_ACTIVE_AFTER_MS, then
 * SVC_SETTLEMENT_TERMINATE_AFTER_MS). The job is enqueued in the transaction that books or advances the
 * trade, so a committed trade always has its next step scheduled. A step that fails (say the balance fell
 * short at settlement) throws, and graphile-worker retries it with backoff: the trade stays `active`,
 * "settlement attempted but not complete".
 */
function parsePayload(payload: unknown): SettleJobPayload | null {
  if (typeof payload !== 'object' || payload === null) return null;
  const { trade_id: tradeId, from } = payload as Record<string, unknown>;
  if (typeof tradeId !== 'string' || !isUuid(tradeId)) return null;
  if (typeof from !== 'string' || !TRADE_STATES.includes(from as never) || from === 'terminated') return null;
  return { trade_id: tradeId, from: from as SettleJobPayload['from'] };
}

export function tradesTaskList(trades: TradesService): TaskList {
  const settle: Task = async (payload, helpers) => {
    // STYLE: job payloads are validated when the job starts; a malformed one can never succeed.
    const parsed = parsePayload(payload);
    if (!parsed) {
      helpers.logger.error(`${SETTLE_TASK}: malformed payload ${JSON.stringify(payload)}; dropped`);
      return;
    }
    await trades.settleStep(parsed);
  };
  const reviveStalledSettlements = sweepTask(
    REVIVE_SETTLEMENTS_TASK,
    () => trades.reviveStalledSettlements(SETTLEMENT_STALLED_AFTER_MS),
    `trades whose next settlement step was ${SETTLEMENT_STALLED_AFTER_MS / 60_000} min overdue`,
  );
  return { [SETTLE_TASK]: settle, [REVIVE_SETTLEMENTS_TASK]: reviveStalledSettlements };
}

export const tradesCronItems: CronItem[] = [serialCronItem(REVIVE_SETTLEMENTS_TASK, SWEEP_SCHEDULE)];
