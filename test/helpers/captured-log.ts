import { Writable } from 'node:stream';
import { createLogger } from '../../src/main/logger.ts';
import type { LogLevel } from '../../src/config.ts';

/** A service logger at `level` whose lines are kept in `lines` (one JSON line each, without its newline), for tests that read the log. */
export function capturedLogger(level: LogLevel): {
  logger: ReturnType<typeof createLogger>;
  lines: string[];
} {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: createLogger(level, stream), lines };
}
