import type { JobHelpers } from 'graphile-worker';

/**
 * The mark of a task's own line for the operator (a purge's count): graphile-worker's info lines are its chatter
 * (every job started and completed) and go to debug (worker-runtime.ts); a line so marked goes to info.
 */
export const FOR_THE_OPERATOR = { svcForTheOperator: true } as const;

/** Logs what a task did at info, where the operator sees it (probe: the purges' counts were at debug). */
export function tellOperator(helpers: Pick<JobHelpers, 'logger'>, message: string): void {
  helpers.logger.info(message, FOR_THE_OPERATOR);
}
