import type { FastifyReply, FastifyRequest } from 'fastify';
import type { NetworkRules } from '../../domain/platforms/network-rules.ts';
import type { RateLimiter } from '../../domain/ratelimit/rate-limiter.ts';
import type { RefusalLog } from '../refusal-log.ts';
import { firewallHook } from './firewall.plugin.ts';
import { rateLimitHook } from './rate-limit.plugin.ts';

/**
 * The checks every request to the public API passes first, in wire-contract §9's order: the firewall
 * (§2.1, 1020 for an IP on no allow-list), then the per-IP rate limit (§2.3), both before authentication.
 *
 * They guard more than the public routes: a path no route matches (404) and a URL the router refuses
 * (400) are requests to the public API too. Without them there, a stranger could map the routes, and a
 * blocked IP could go on sending unmatched paths, uncounted and never refused.
 */
export type EdgeHook = (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => unknown;

export function publicEdgeHooks(deps: {
  networkRules: NetworkRules;
  rateLimiter?: RateLimiter;
  refusals: RefusalLog;
}): EdgeHook[] {
  const hooks: EdgeHook[] = [firewallHook(deps.networkRules, deps.refusals)];
  if (deps.rateLimiter) hooks.push(rateLimitHook(deps.rateLimiter) as EdgeHook);
  return hooks;
}

/**
 * Runs `hooks` as Fastify runs onRequest hooks, for answers given where Fastify runs none (its
 * `frameworkErrors`): in order, each to its end (a callback or a promise), stopping at the first that
 * answers; then `next`. A hook's error goes to `onError` (by default the reply's context's error handler).
 */
export function runEdgeHooks(
  hooks: EdgeHook[],
  request: FastifyRequest,
  reply: FastifyReply,
  next: () => void,
  onError: (err: unknown) => void = (err) => void reply.send(err),
): void {
  let i = 0;
  const step = (err?: unknown): void => {
    if (err !== undefined && err !== null) {
      onError(err);
      return;
    }
    if (reply.sent) return;
    const hook = hooks[i++];
    if (!hook) return next();
    const result = hook(request, reply, step);
    if (result instanceof Promise) result.then(() => step(), step);
  };
  step();
}
