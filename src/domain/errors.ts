/**
 * The one error model of the domain: a stable code from a closed set and the messages that explain it.
 * Services throw these; only the HTTP layer knows statuses and wire bodies (src/http/error-handler.ts).
 */
export type DomainErrorCode =
  | 'invalid' // the request is understood but a field or business rule refuses it
  | 'unauthenticated'
  | 'forbidden' // the resource belongs to another platform, or the caller may not act on it
  | 'not_found'
  | 'conflict' // duplicate entity, or a lock that could not be acquired
  | 'unavailable'; // transient: safe to retry

export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    readonly messages: string[],
  ) {
    super(messages.join('; '));
    this.name = 'DomainError';
  }
}

/** 400: each message names its field, "<field>: <problem>". */
export const invalid = (...messages: string[]) => new DomainError('invalid', messages);
export const unauthenticated = (reason: string) => new DomainError('unauthenticated', [reason]);
export const forbidden = (reason: string) => new DomainError('forbidden', [reason]);
export const notFound = (what = 'Not Found') => new DomainError('not_found', [what]);
export const conflict = (reason: string) => new DomainError('conflict', [reason]);
export const unavailable = (reason: string) => new DomainError('unavailable', [reason]);

/**
 * What `work` gave or refused, for a caller that reports every fault of the input (400) before a refusal of who
 * acts (403), as wire-contract §9 orders them: its value, or its 400's messages to join the caller's own, or its
 * 403 to throw once there are none. Any other failure is thrown.
 */
export async function faultsBeforeRefusal<T>(
  work: Promise<T>,
): Promise<{ value?: T; problems: string[]; refusal?: DomainError }> {
  try {
    return { value: await work, problems: [] };
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    if (error.code === 'invalid') return { problems: error.messages };
    if (error.code === 'forbidden') return { problems: [], refusal: error };
    throw error;
  }
}

/** PostgreSQL error codes the domain turns into conflicts and the HTTP edge into retryable answers. */
export {
  PG_DEADLOCK,
  PG_LOCK_NOT_AVAILABLE,
  PG_READ_ONLY_TRANSACTION,
  PG_SERIALIZATION_FAILURE,
  PG_UNIQUE_VIOLATION,
  pgErrorCode,
} from '../store/pg-error-codes.ts';

/** A write whose connection was lost before PostgreSQL answered: it may or may not have been carried out. */
export { OutcomeUnknownError, refusedConnection } from '../store/database.ts';
