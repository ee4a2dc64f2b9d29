import pino from 'pino';

/** Structured JSON logs; credentials never reach them (wire-contract §1 "Never log secrets"). */
export const REDACTED_PATHS = [
  'req.headers["x-scx-signed"]',
  'req.headers["x-scx-passphrase"]',
  'req.headers["x-scx-api-key"]',
  'req.headers.authorization',
  'api_secret',
  'passphrase',
  'secret',
  '*.api_secret',
  '*.passphrase',
  '*.secret',
];

export function createLogger(level: string, destination?: pino.DestinationStream): pino.Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}
