import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { queueLogger } from '../../src/jobs/worker-runtime.ts';

test("graphile-worker's errors are logged with their type, message and stack, not as {}", () => {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const logger = queueLogger(log).scope({ label: 'worker' });
  // As graphile-worker calls it (main.js: `logger.error(\`Error with notify listener …\`, { error })`).
  const refused = Object.assign(new Error('terminating connection due to administrator command'), {
    code: '57P01',
    severity: 'FATAL',
  });
  logger.error('Error with notify listener', { error: refused });
  logger.warn('Failed to release jobs', { error: 'plain text', jobIds: ['1'] });
  const [first, second] = lines as Array<{ err?: Record<string, unknown>; error?: unknown; msg: string }>;
  assert.equal(first!.msg, 'Error with notify listener');
  assert.equal(first!.error, undefined);
  assert.equal(first!.err?.type, 'Error');
  assert.equal(first!.err?.message, 'terminating connection due to administrator command');
  assert.equal(first!.err?.code, '57P01');
  assert.match(String(first!.err?.stack), /^Error: terminating connection/);
  // A value that is no error is kept as it came, beside the other fields.
  assert.equal(second!.err, 'plain text');
  assert.deepEqual((second as unknown as { jobIds: string[] }).jobIds, ['1']);
});
