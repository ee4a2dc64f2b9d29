import type { Caller } from '../domain/platforms/authenticator.ts';

/** What the public-request plugins attach to each request. */
declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Raw body bytes as received (wire-contract §1 signs them); undefined when there was none. Read as JSON into
     * `body` only after authentication (input-checks.ts).
     */
    rawBody: Buffer | undefined;
    /** The authenticated platform; set by the authentication plugin on public routes. */
    caller: Caller | null;
    /**
     * The answer's line is logged at debug, not info: a 429 within a block, of which the first (the block's start) is
     * logged (rate-limit.plugin.ts); a stranger's refusal after its first in a while (refusal-log.ts).
     */
    quietLog: boolean;
    /**
     * The X-Simulator-Scenario that made the answer (cert), told in its line: a simulated 500 read as a real one
     * without a cause (log probe).
     */
    simulated: string | null;
  }
}

export function callerOf(request: { caller: Caller | null }): Caller {
  if (!request.caller) throw new Error('route registered outside the authenticated scope');
  return request.caller;
}
