/**
 * What domain code logs with: the three pino methods it calls, so that a domain part depends on no logging library
 * and a test can hand it a logger that captures its lines. pino's and Fastify's loggers fit as they are.
 */
export interface Log {
  info(obj: object, message?: string): void;
  warn(obj: object, message?: string): void;
  error(obj: object, message?: string): void;
}
