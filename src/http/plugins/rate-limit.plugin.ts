import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { retryAfterSeconds, type RateLimiter } from '../../domain/ratelimit/rate-limiter.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';

export interface RateLimitPluginOptions {
  limiter: Pick<RateLimiter, 'decide'>;
}

// wire-contract §2.3 / §3: the 429 body.
export const TOO_MANY_REQUESTS_BODY = '{"error":"Too Many Requests"}';

/**
 * The onRequest hook: asks the limiter about `request.ip` (the app's `trustProxy` makes it the
 * source IP of wire-contract §2.4) and answers 429 when refused. Callback style all the way to the
 * store, so a request costs no promise, whether the decision is known at once (memory store, cached
 * block) or comes from Redis.
 */
export function rateLimitHook(limiter: Pick<RateLimiter, 'decide'>): onRequestHookHandler {
  return function rateLimitOnRequest(request: FastifyRequest, reply: FastifyReply, done) {
    limiter.decide(request.ip, (decision) => {
      if (decision.allowed) {
        done();
        return;
      }
      // Within a block, a refusal is logged at debug: a flooding client's every request was a line at info (probe);
      // the refusal that started the block stays at info, and the metrics count them all.
      if (!decision.blockStarted) request.quietLog = true;
      // Replying from an onRequest hook ends the request here; `done` is not called.
      reply
        .code(429)
        .header('retry-after', retryAfterSeconds(decision.retryAfterMs))
        .type('application/json; charset=utf-8')
        .send(TOO_MANY_REQUESTS_BODY);
    });
  };
}

/**
 * Per-IP rate limit (spec part 8, wire-contract §2.3) for the scope that registers it, on its own: for a
 * scope that needs the limit and nothing else in front of it (the limiter's tests and benchmark). The app
 * itself puts the hook in front of its public routes, after the firewall, with publicEdgeHooks
 * (public-edge.ts), which also guard the answers given outside any route.
 *
 * Like the other network plugins it applies to the registering scope (skip-override, see
 * plugin-scope.ts): a plain plugin's hook would cover only routes registered inside the plugin and
 * limit nothing. It goes no further than that scope: siblings (admin) and the root are untouched.
 */
export const rateLimitPlugin = appliesToRegisteringScope(
  'rate-limit',
  async function rateLimit(app: FastifyInstance, options: RateLimitPluginOptions): Promise<void> {
    app.addHook('onRequest', rateLimitHook(options.limiter));
  },
);
