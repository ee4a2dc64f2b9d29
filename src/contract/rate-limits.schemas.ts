import { Type, type Static } from 'typebox';
import { Envelope } from './responses.ts';

/** Operator view of the per-IP rate limit (DESIGN §3 `GET`/`DELETE /admin/rate_limits/{ip}`). */
export const RateLimitIpParams = Type.Object({
  ip: Type.String({
    minLength: 1,
    maxLength: 64,
    description: 'IPv4 or IPv6 address, or the IPv6 network the view names ("2001:db8:1:2::/64")',
  }),
});
export type RateLimitIpParams = Static<typeof RateLimitIpParams>;

export const RateLimitState = Type.Object(
  {
    ip: Type.String({
      description:
        'what the address is counted as: IPv4-mapped IPv6 as IPv4, IPv6 canonical, as its network ("2001:db8:1:2::/64") below SVC_RATE_LIMIT_IPV6_PREFIX bits',
    }),
    count: Type.Integer({ minimum: 0, description: 'accepted requests inside the current window' }),
    limit: Type.Integer({ minimum: 1 }),
    window_ms: Type.Integer({ minimum: 1 }),
    blocked: Type.Boolean(),
    blocked_until: Type.Union([Type.Integer(), Type.Null()], {
      description: 'epoch ms; null when not blocked',
    }),
    retry_after_seconds: Type.Integer({ minimum: 0, description: '0 when not blocked' }),
  },
  { additionalProperties: false },
);
export type RateLimitState = Static<typeof RateLimitState>;

export const RateLimitStateResponse = Envelope(RateLimitState);
