import type { Caller } from '../domain/platforms/authenticator.ts';

/** What the public-request plugins attach to each request. */
declare module 'fastify' {
  interface FastifyRequest {
    /** Raw body bytes as received (wire-contract §1 signs them); undefined when there was none. */
    rawBody: Buffer | undefined;
    /** Why the body could not be read as JSON, else null; reported as 400 only after authentication (wire-contract §9). */
    bodyError: string | null;
    /** The authenticated platform; set by the authentication plugin on public routes. */
    caller: Caller | null;
  }
}

export function callerOf(request: { caller: Caller | null }): Caller {
  if (!request.caller) throw new Error('route registered outside the authenticated scope');
  return request.caller;
}
