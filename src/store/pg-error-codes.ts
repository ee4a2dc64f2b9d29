/**
 * PostgreSQL's error codes (SQLSTATE, appendix A of its manual) that this service acts on, in one place: the store
 * waits out a lock timeout, the domain turns a unique violation into a conflict, the HTTP edge answers the
 * transient ones as retryable.
 */
export const PG_UNIQUE_VIOLATION = '23505';
export const PG_SERIALIZATION_FAILURE = '40001';
export const PG_DEADLOCK = '40P01';
/** lock_not_available: a lock_timeout ran out. */
export const PG_LOCK_NOT_AVAILABLE = '55P03';
export const PG_READ_ONLY_TRANSACTION = '25006';
/** invalid_password: "password authentication failed for user …". */
export const PG_INVALID_PASSWORD = '28P01';
/** insufficient_privilege: "permission denied for …", "must be owner of …". */
export const PG_INSUFFICIENT_PRIVILEGE = '42501';

/** The SQLSTATE of a pg error (any `code` it carries), or undefined. */
export function pgErrorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error
    ? String((error as { code: unknown }).code)
    : undefined;
}
