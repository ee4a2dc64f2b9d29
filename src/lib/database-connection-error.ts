/**
 * The start's first connection to PostgreSQL failed: whatever stopped it (refused, an unknown database or role, a
 * TLS handshake the server does not take) is the database's setting to mend. Its own module, so that the CLI can
 * tell it without loading the store.
 */
export class DatabaseConnectionError extends Error {
  override readonly name = 'DatabaseConnectionError';

  constructor(override readonly cause: unknown) {
    super((cause as { message?: string } | null)?.message ?? String(cause), { cause });
  }
}
