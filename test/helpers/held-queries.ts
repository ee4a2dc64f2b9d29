import type { QueryId, RootOperationNode } from 'kysely';
import type { Db, Trx } from '../../src/store/database.ts';

/**
 * A view of `db` (another instance's connection, say) whose statements matching `holds` run but are answered
 * only when the test calls `release`: the database has done the work (a row read, an uncommitted insert),
 * the caller does not have the result yet. For races that a real interleaving decides, without timing.
 */
export function holdingQueries(db: Db, holds: (node: RootOperationNode) => boolean) {
  const held = new Set<QueryId>();
  let holding = true;
  let reached!: () => void;
  const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const view = db.withPlugin({
    transformQuery: ({ node, queryId }) => {
      if (holding && holds(node)) held.add(queryId);
      return node;
    },
    transformResult: async ({ result, queryId }) => {
      if (held.has(queryId)) {
        reached();
        await gate;
      }
      return result;
    },
  });
  return {
    db: view,
    /** Resolves once a held statement has run (its result is waiting). */
    reached: reachedPromise,
    /** Statements from now on are answered at once; those held still wait for `release`. */
    stopHolding: () => {
      holding = false;
    },
    /** Answers the held statements, and holds no more. */
    release: () => {
      holding = false;
      open();
    },
  };
}

/**
 * A transaction on `db` that runs `take` (taking its locks: a row `for update`, an advisory lock) and is then held
 * open until `release`: what another request or job does while it holds them. Resolves once `take` has run.
 */
export async function heldTransaction(
  db: Db,
  take: (trx: Trx) => Promise<unknown>,
): Promise<{ release(): Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let taken!: () => void;
  const isTaken = new Promise<void>((resolve) => (taken = resolve));
  const holding = db.transaction().execute(async (trx) => {
    await take(trx);
    taken();
    await released;
  });
  await Promise.race([isTaken, holding]);
  return {
    release: async () => {
      release();
      await holding;
    },
  };
}
