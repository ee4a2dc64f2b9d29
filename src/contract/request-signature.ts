import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * wire-contract §1: X-SCX-SIGNED = base64(HMAC-SHA256(key = base64-decode(secret), message)) where
 * message = timestamp + METHOD + route (path and ?query exactly as sent) + body (raw; "{}" when none).
 * Shared by the server's authentication and the SDK's request signing.
 */
export const AUTH_HEADERS = {
  apiKey: 'x-scx-api-key',
  signed: 'x-scx-signed',
  timestamp: 'x-scx-timestamp',
  passphrase: 'x-scx-passphrase',
} as const;

export const EMPTY_BODY = '{}';

export function signingMessage(
  timestamp: string,
  method: string,
  route: string,
  body: string | Buffer | undefined,
): Buffer {
  const bodyBytes = body === undefined || body.length === 0 ? Buffer.from(EMPTY_BODY) : Buffer.from(body);
  return Buffer.concat([Buffer.from(`${timestamp}${method.toUpperCase()}${route}`, 'utf8'), bodyBytes]);
}

export function signRequest(secretBase64: string, message: Buffer | string): string {
  return createHmac('sha256', Buffer.from(secretBase64, 'base64')).update(message).digest('base64');
}

/**
 * Constant-time comparison of a presented signature with the expected one, as text: node's base64 decoder
 * is lenient (it ignores anything after the padding and skips invalid characters), so comparing decoded
 * bytes would accept many spellings of one signature.
 */
export function signatureMatches(secretBase64: string, message: Buffer, presented: string): boolean {
  const expected = Buffer.from(signRequest(secretBase64, message), 'utf8');
  const given = Buffer.from(presented, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
