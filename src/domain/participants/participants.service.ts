import type { PARTICIPANT_STATUS_VALUES } from '../../contract/wire-values.ts';
import type { ParticipantStatusChanged } from '../../contract/webhook-payloads.ts';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { sql } from 'kysely';
import {
  REQUEST_ONLY_CUSTOMER_FIELDS,
  type CreatedCustomer,
  type ListParticipantsQuery,
  type ListParticipantsResponse,
  type ParticipantByEmail,
  type ParticipantEntity,
  type PostCustomerBody,
} from '../../contract/participants.schemas.ts';
import { readCoordinate, type CoordinateAxis } from '../../contract/coordinates.ts';
import { newParticipantCode } from '../../lib/ids.ts';
import { inOneSnapshot, type Executor, type Trx } from '../../store/database.ts';
import type { DomainDeps } from '../deps.ts';
import { conflict, forbidden, invalid, notFound, pgErrorCode, PG_UNIQUE_VIOLATION } from '../errors.ts';
import { recordNotification } from '../webhooks/outbox.ts';
import {
  codeOnOtherPlatform,
  findPlatformParticipant,
  emailOnOtherPlatform,
  findParticipant,
  findParticipantsByEmail,
  findPlatformParticipantByEmail,
  findSubmissionByPayload,
  findSubmissionByRequestId,
  insertSubmission,
  listPlatformCustomers,
  lockOnboardingKey,
  ONBOARDING_LOCK,
} from './participants.repository.ts';
import { pageFields, pageOf } from '../paging.ts';
import { DATA_USED_WITH_DIFFERENT_REQUEST_ID, EMAIL_ALREADY_EXISTS } from '../../contract/wire-values.ts';

export type ParticipantStatus = (typeof PARTICIPANT_STATUS_VALUES)[number];

export interface ParticipantView {
  participant_code: string;
  platform_code: string;
  email: string | null;
  first_name: string | null;
  last_name: string | null;
  status: string;
  reason_code: string | null;
  created_at: number;
  updated_at: number;
}

type ParticipantRow = NonNullable<Awaited<ReturnType<typeof findParticipant>>>;

export function participantView(row: ParticipantRow): ParticipantView {
  return {
    participant_code: row.participant_code,
    platform_code: row.platform_code,
    email: row.email,
    first_name: row.first_name,
    last_name: row.last_name,
    status: row.status,
    reason_code: row.reason_code,
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime(),
  };
}

/** wire-contract §5: participant = {participant_code, participant_status, reason_code?, timestamp}. */
export async function recordParticipantStatus(
  trx: Executor,
  row: ParticipantRow,
  timestamp: number,
): Promise<void> {
  await recordNotification(trx, {
    platformCode: row.platform_code,
    payloadType: 'participant_status_changed',
    resourceKey: `participant:${row.participant_code}`,
    payload: {
      participant_code: row.participant_code,
      // The table's check constraint holds it to these values.
      participant_status: row.status as ParticipantStatusChanged['participant_status'],
      ...(row.reason_code ? { reason_code: row.reason_code } : {}),
      timestamp,
    } satisfies ParticipantStatusChanged,
  });
}

export interface NewParticipant {
  platform_code: string;
  email: string;
  first_name: string;
  last_name: string;
  status?: ParticipantStatus;
}

/**
 * Inserts a customer participant with a fresh 6-character code inside the caller's transaction, retrying
 * on the (rare) code collision with a savepoint. A duplicate email on the platform is a conflict.
 */
export async function insertParticipant(
  trx: Trx,
  input: NewParticipant,
  timestamp: number,
): Promise<ParticipantRow> {
  for (let attempt = 0; ; attempt++) {
    const code = newParticipantCode();
    await sql`savepoint new_participant`.execute(trx);
    let row: ParticipantRow;
    try {
      row = await trx
        .insertInto('participants')
        .values({
          participant_code: code,
          platform_code: input.platform_code,
          email: input.email,
          first_name: input.first_name,
          last_name: input.last_name,
          status: input.status ?? 'approved',
          // The creation's one time: its participant_status_changed says `timestamp`, and GET /participants
          // `created_at`/`updated_at` must say the same (the column default, now(), differed by a few ms: review).
          created_at: new Date(timestamp),
          updated_at: new Date(timestamp),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await sql`release savepoint new_participant`.execute(trx);
    } catch (error) {
      await sql`rollback to savepoint new_participant`.execute(trx);
      const isUnique = pgErrorCode(error) === PG_UNIQUE_VIOLATION;
      const detail = String((error as { constraint?: string }).constraint ?? '');
      // Also its name while migration 0042 builds it, before it takes the old one's.
      if (isUnique && /^participants_platform_email(_ascii)?$/.test(detail)) {
        throw conflict(`participant with email ${input.email} already exists for this platform`);
      }
      if (isUnique && attempt < 5) continue;
      throw error;
    }
    // Outside the savepoint's try: a failure here must surface as itself, not as "no such savepoint".
    await recordParticipantStatus(trx, row, timestamp);
    return row;
  }
}

/**
 * spec 7.3 "same payload" is the same JSON value: the SHA-256 of its RFC 8785 canonical form, so key order and
 * white space make no difference (canonicalize: the reference implementation of RFC 8785).
 */
export function payloadHash(body: unknown): string {
  const canonical = canonicalize(body);
  if (canonical === undefined) throw invalid('body: must be a JSON object');
  return createHash('sha256').update(canonical).digest('hex');
}

/**
 * Approved when the platform reports that KYC and sanctions screening passed, else submitted: the spec leaves a new
 * customer's status open; this rule is the README's (Customer onboarding).
 */
export function initialCustomerStatus(body: { kyc: string; sanction_screening: string }): ParticipantStatus {
  return body.kyc === 'pass' && body.sanction_screening === 'pass' ? 'approved' : 'submitted';
}

/**
 * The submitted fields the vendor's answer has: those it has not are not echoed (REQUEST_ONLY_CUSTOMER_FIELDS), from
 * a new submission or from one stored before they were left out.
 */
function echoed<T extends object>(submitted: T): T {
  const copy = { ...submitted } as Record<string, unknown>;
  for (const field of REQUEST_ONLY_CUSTOMER_FIELDS) delete copy[field];
  return copy as T;
}

/**
 * The body's `proof_of_address_coordinates` as the 201 shows them: in decimal degrees (vendor: "Accepts both
 * Decimal Degrees (DD) and Degrees/Minutes/Seconds (DMS) formats. Values are returned in DD format"). Nothing
 * when the body has none; the body itself, hashed for spec 7.3, stays as sent.
 */
function inDecimalDegrees(body: PostCustomerBody): Pick<CreatedCustomer, 'proof_of_address_coordinates'> {
  const coordinates = (body as { proof_of_address_coordinates?: { latitude: string; longitude: string } })
    .proof_of_address_coordinates;
  if (!coordinates) return {};
  const degrees = (axis: CoordinateAxis) => {
    const reading = readCoordinate(coordinates[axis], axis);
    // The body check refused every value that does not read (participants.validation.ts).
    if ('problem' in reading) throw new Error(`${axis} passed the body check unread: ${reading.problem}`);
    return reading.degrees;
  };
  return { proof_of_address_coordinates: { latitude: degrees('latitude'), longitude: degrees('longitude') } };
}

export interface CreateCustomerInput {
  platformCode: string;
  body: PostCustomerBody;
  /** The X-REQUEST-ID header as sent; undefined when there was none. */
  requestId?: string;
}

export interface CreateCustomerResult {
  customer: CreatedCustomer;
  /** True when this is the original answer again (same payload, same X-REQUEST-ID). */
  replayed: boolean;
}

/**
 * How long a request waits for another one holding the same email or X-REQUEST-ID before it gives up with a
 * retryable 503 (lock_not_available; wire-contract §9: a duplicate in flight may wait, or get a retryable answer).
 */
const ONBOARDING_LOCK_TIMEOUT = '5s';

export function createParticipantsService(deps: DomainDeps) {
  const { db, clock } = deps;

  /**
   * spec 7.3 in order (wire-contract §9): the X-REQUEST-ID rule first, where an absent id equals no other id,
   * then the email rule. Runs under advisory locks on the request id and the email, so that concurrent
   * duplicates take turns; the unique indexes of migration 0006 and participants_platform_email hold even
   * if a lock were bypassed.
   */
  async function createCustomerOnce(input: CreateCustomerInput): Promise<CreateCustomerResult> {
    const { platformCode, body, requestId } = input;
    const hash = payloadHash(body);
    return db.transaction().execute(async (trx) => {
      await sql`select set_config('lock_timeout', ${ONBOARDING_LOCK_TIMEOUT}, true)`.execute(trx);
      // Always the request id before the email: one order, no deadlock between two requests.
      if (requestId !== undefined) {
        await lockOnboardingKey(trx, ONBOARDING_LOCK.requestId, platformCode, requestId);
      }
      await lockOnboardingKey(trx, ONBOARDING_LOCK.email, platformCode, body.email.toLowerCase());

      if (requestId !== undefined) {
        const earlier = await findSubmissionByRequestId(trx, platformCode, requestId);
        if (earlier) {
          // Same payload, same X-REQUEST-ID: the original 201 again. Different payload: refused.
          if (earlier.payload_hash === hash) {
            return { customer: echoed(earlier.response as CreatedCustomer), replayed: true };
          }
          throw invalid(DATA_USED_WITH_DIFFERENT_REQUEST_ID);
        }
      }
      // Same payload with another id, or without one on either side.
      if (await findSubmissionByPayload(trx, platformCode, hash)) {
        throw invalid(DATA_USED_WITH_DIFFERENT_REQUEST_ID);
      }
      // Different data for an email the platform already has (however that participant was created).
      if (await findPlatformParticipantByEmail(trx, platformCode, body.email)) {
        throw invalid(EMAIL_ALREADY_EXISTS);
      }

      const now = clock.now();
      const row = await insertParticipant(
        trx,
        {
          platform_code: platformCode,
          email: body.email,
          first_name: body.first_name,
          last_name: body.last_name,
          status: initialCustomerStatus(body),
        },
        now,
      );
      const customer = {
        ...echoed(body),
        ...inDecimalDegrees(body),
        participant_code: row.participant_code,
        platform_code: platformCode,
        status: row.status,
      } as CreatedCustomer;
      await insertSubmission(trx, {
        participant_code: row.participant_code,
        platform_code: platformCode,
        request_id: requestId ?? null,
        payload_hash: hash,
        payload: body,
        response: customer,
      });
      return { customer, replayed: false };
    });
  }

  return {
    /**
     * `POST /participants/customers/new` (spec 4.6, 7.3; wire-contract §7): creates the customer with a new
     * participant code and its participant_status_changed notification, or answers as spec 7.3 says.
     */
    async createCustomer(input: CreateCustomerInput): Promise<CreateCustomerResult> {
      try {
        return await createCustomerOnce(input);
      } catch (error) {
        // Only reachable if a write raced past the locks (e.g. the operator API creating the same email):
        // the constraint refused it and nothing was written; a retry gets the spec 7.3 answer.
        if (pgErrorCode(error) === PG_UNIQUE_VIOLATION) {
          throw conflict('a request for this customer was being processed at the same time; retry');
        }
        throw error;
      }
    },

    /**
     * `GET /participants/{email}` (spec 7.2: validates a creation). Another platform's participant → 403,
     * none → 404 (wire-contract §9).
     */
    async findByEmail(platformCode: string, email: string): Promise<ParticipantByEmail> {
      const row = await findPlatformParticipantByEmail(db, platformCode, email);
      if (row) return { participant_code: row.participant_code, email: row.email ?? email };
      if (await emailOnOtherPlatform(db, platformCode, email)) {
        throw forbidden('participant belongs to another platform');
      }
      throw notFound();
    },

    /**
     * `GET /participants`: the platform's customers, filtered and paginated. A filter that names another
     * platform's participant is refused with 403, as a path naming it would be (wire-contract §9).
     */
    async list(platformCode: string, query: ListParticipantsQuery): Promise<ListParticipantsResponse> {
      const page = pageOf(query);
      const today = new Date(clock.now());
      const filters = {
        participantCode: query.participant_code,
        email: query.email,
        status: query.status,
        // Minors: born less than 18 years before today (the date of birth is YYYY-MM-DD text).
        bornAfter:
          query.minors === 'true'
            ? `${today.getUTCFullYear() - 18}-${String(today.getUTCMonth() + 1).padStart(2, '0')}-${String(today.getUTCDate()).padStart(2, '0')}`
            : undefined,
        // Every customer created here is an individual.
        matchesNothing: query.entity_type !== undefined && query.entity_type !== 'individual',
      };
      const { rows, total } = await inOneSnapshot(db, (trx) =>
        listPlatformCustomers(trx, platformCode, filters, page),
      );
      if (total === 0) {
        const foreign =
          (filters.participantCode !== undefined &&
            !(await findPlatformParticipant(db, platformCode, filters.participantCode)) &&
            (await codeOnOtherPlatform(db, platformCode, filters.participantCode))) ||
          (filters.email !== undefined &&
            !(await findPlatformParticipantByEmail(db, platformCode, filters.email)) &&
            (await emailOnOtherPlatform(db, platformCode, filters.email)));
        if (foreign) throw forbidden('the named participant belongs to another platform');
      }
      return {
        message: rows.map((row): ParticipantEntity => ({
          participant_code: row.participant_code,
          participant_name: [row.first_name, row.last_name].filter(Boolean).join(' '),
          ...(row.email ? { email: row.email } : {}),
          status: row.status,
          ...(row.reason_code ? { reason_code: row.reason_code } : {}),
          ...(row.jurisdiction_code ? { jurisdiction_code: row.jurisdiction_code } : {}),
          // We enforce no per-participant transaction limits, so there are none to report.
          limits: [],
          updated_at: row.updated_at.getTime(),
        })),
        ...pageFields(page, total),
      };
    },

    /** Operator onboarding (DESIGN §3): the participant exists at once, with the given status. */
    async create(input: NewParticipant): Promise<ParticipantView> {
      const platform = await db
        .selectFrom('platforms')
        .select('platform_code')
        .where('platform_code', '=', input.platform_code)
        .executeTakeFirst();
      if (!platform) throw invalid(`platform_code: platform ${input.platform_code} not found`);
      const row = await db.transaction().execute((trx) => insertParticipant(trx, input, clock.now()));
      return participantView(row);
    },

    /** `GET /admin/participants?email=`: whichever platforms have a participant with this email (support's lookup). */
    async findEverywhereByEmail(email: string): Promise<ParticipantView[]> {
      return (await findParticipantsByEmail(db, email)).map(participantView);
    },

    async get(participantCode: string): Promise<ParticipantView> {
      const row = await findParticipant(db, participantCode);
      if (!row) throw notFound(`participant ${participantCode} not found`);
      return participantView(row);
    },

    /**
     * Sets the status and reason code. wire-contract §5 "participant on status change": a status change and
     * its participant_status_changed notification commit together; a new reason code under the same status
     * is recorded without a notification. `reasonCode` left out keeps the stored one while the status stays,
     * and drops it with a status change; null drops it. Left out, it was dropped always: setting the status
     * again without it erased the reason an operator had given (review).
     */
    async setStatus(
      participantCode: string,
      status: ParticipantStatus,
      reasonCode?: string | null,
    ): Promise<ParticipantView> {
      const row = await db.transaction().execute(async (trx) => {
        const current = await trx
          .selectFrom('participants')
          .selectAll()
          .where('participant_code', '=', participantCode)
          .forUpdate()
          .executeTakeFirst();
        if (!current) throw notFound(`participant ${participantCode} not found`);
        // GET shows it (a platform is a participant with its own code): "not found" here contradicted that (probe).
        if (current.kind === 'platform')
          throw conflict(`participant ${participantCode} is a platform: its status is not set here`);
        const reason =
          reasonCode !== undefined ? reasonCode : current.status === status ? current.reason_code : null;
        if (current.status === status && reason === current.reason_code) return current;
        const now = clock.now();
        const updated = await trx
          .updateTable('participants')
          .set({ status, reason_code: reason, updated_at: new Date(now) })
          .where('participant_code', '=', participantCode)
          .returningAll()
          .executeTakeFirstOrThrow();
        if (updated.status !== current.status) await recordParticipantStatus(trx, updated, now);
        return updated;
      });
      return participantView(row);
    },
  };
}

export type ParticipantsService = ReturnType<typeof createParticipantsService>;
