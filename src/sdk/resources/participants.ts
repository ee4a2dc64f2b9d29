import type {
  CreatedCustomer,
  ListParticipantsQuery,
  ListParticipantsResponse,
  ParticipantByEmail,
  PostCustomerBody,
} from '../../contract/participants.schemas.ts';
import { lookupOptions, type QueryValue, type CallOptions, type SvcClient } from '../client.ts';
import { SvcNotFoundError, SvcPermissionError } from '../errors.ts';
import type { RawResponse } from '../request-sender.ts';

export type {
  CreatedCustomer,
  ListParticipantsQuery,
  ListParticipantsResponse,
  ParticipantByEmail,
  ParticipantEntity,
  PostCustomerBody,
} from '../../contract/participants.schemas.ts';
import { pathSegment } from '../path-segment.ts';
import { REQUEST_ID_HEADER } from '../../contract/wire-values.ts';
import { spec73Text } from '../retry-policy.ts';
export { DATA_USED_WITH_DIFFERENT_REQUEST_ID, EMAIL_ALREADY_EXISTS } from '../../contract/wire-values.ts';

/**
 * What `createCustomer` resolves to (spec 7.2 last row, 7.3):
 * - `created`: the server's 201 to this call (or its replay: the same payload with the same `requestId`);
 * - `found`: the answer was lost (502/504 or no response) and the look-up by email found the participant,
 *   so the request is not sent again. The look-up (spec 7.2's check) cannot tell whether this call or an
 *   earlier one created it: for a new email it is this call's; if the email may be onboarded already, send
 *   a `requestId` and compare with {@link ParticipantsResource.list};
 * - `exists`: the server refused with a spec 7.3 400 (`conflict` is its message) and the look-up found the
 *   platform's participant with this email: the customer exists already, possibly with other data
 *   (`EMAIL_ALREADY_EXISTS`) — decide whether that is the person you meant.
 */
export type CustomerCreation =
  | { outcome: 'created'; participant_code: string; customer: CreatedCustomer }
  | { outcome: 'found'; participant_code: string; participant: ParticipantByEmail }
  | { outcome: 'exists'; participant_code: string; participant: ParticipantByEmail; conflict: string };

/** The envelope, or what a look-up found instead. */
type Answer =
  | { message: CreatedCustomer }
  | { found: ParticipantByEmail }
  | { exists: ParticipantByEmail; conflict: string };

/**
 * Customer onboarding and participant look-ups (spec 4.6, 7.2, 7.3). One method per endpoint; each goes
 * through `SvcClient.request` (the retry rules of spec 7) and throws the status family's `SvcError`.
 *
 * @example
 * const client = createClient({ baseUrl, apiKey, apiSecret, passphrase }); // client.participants is this resource
 * const result = await client.participants.createCustomer(profile, { requestId: crypto.randomUUID() });
 * console.log(result.outcome, result.participant_code); // e.g. 'created' 'K3M9QZ'
 */
/**
 * The call's headers with one X-REQUEST-ID: `requestId` if given (replacing one among the headers in any letter
 * case, which fetch would otherwise join to it as "a, b"), else one the caller put among the headers, else a new one.
 */
function withRequestId(
  headers: Record<string, string | undefined> | undefined,
  requestId: string | undefined,
): Record<string, string | undefined> {
  const others: Record<string, string | undefined> = {};
  let given: string | undefined;
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.toLowerCase() === REQUEST_ID_HEADER) given = value;
    else others[name] = value;
  }
  return { ...others, [REQUEST_ID_HEADER]: requestId ?? given ?? globalThis.crypto.randomUUID() };
}

export class ParticipantsResource {
  constructor(private readonly client: SvcClient) {}

  /**
   * `POST /participants/customers/new`: creates a customer; 201 with its new 6-character participant code
   * and status (`approved` when `kyc` and `sanction_screening` are `pass`, else `submitted`).
   *
   * Spec 7.2 and 7.3 are built in: after a 502/504 (or no response) the SDK looks the customer up by email
   * before resending, and resolves `found` if the creation happened; after a spec 7.3 400
   * ({@link EMAIL_ALREADY_EXISTS}, {@link DATA_USED_WITH_DIFFERENT_REQUEST_ID}) it looks the customer up and
   * resolves `exists` with the refusal in `conflict`. Any other 400 (a format error) throws
   * `SvcInvalidRequestError` listing each bad field. Send the same `requestId` (the `X-REQUEST-ID` header)
   * when you repeat a request yourself: the same payload with the same id returns the original answer.
   *
   * @example
   * const result = await client.participants.createCustomer(
   *   {
   *     first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', address_one: '1 Main St',
   *     city: 'Chicago', zip: '60601', jurisdiction_code: 'US-IL', date_of_birth: '1985-09-02',
   *     citizenship_code: 'US', tax_id: '123-45-6789', kyc: 'pass', kyc_timestamp: Date.now(),
   *     sanction_screening: 'pass', sanction_screening_timestamp: Date.now(), signed_timestamp: Date.now(),
   *     b_notice_receipt: false, is_w_form_certified: true, w_form_certification: Date.now(),
   *     signature: 'Ada Lovelace', signature_timestamp: Date.now(), payee_exemption: 'NONE',
   *     fatca_reporting_exemption: 'NONE', is_not_subject_backup_withholding: true,
   *   },
   *   { requestId: crypto.randomUUID() }, // keep it with the customer until the answer arrives
   * );
   * if (result.outcome === 'exists') console.warn(`already onboarded: ${result.conflict}`);
   * console.log(result.participant_code); // e.g. 'K3M9QZ'
   */
  async createCustomer(
    body: PostCustomerBody,
    options: CallOptions & { requestId?: string } = {},
  ): Promise<CustomerCreation> {
    const { requestId, ...call } = options;
    // Every call carries an X-REQUEST-ID, the caller's or one of its own, so that the SDK's own resend is the
    // same request again (spec 7.3: the original answer). Without one, a first attempt that went unanswered and
    // was done only after the look-up had checked made the resend "the same payload and no X-REQUEST-ID": refused,
    // and reported `exists` for the customer this very call created (review). Two calls still differ, as two
    // calls without an id do.
    const headers = withRequestId(call.headers, requestId);
    const email = (body as { email?: unknown }).email;
    // No email, no look-up: the sender then returns the indeterminate answer instead of resending blindly.
    const lookUp =
      typeof email === 'string' && email !== ''
        ? (startedAt: number) => this.findByEmail(email, lookupOptions(call, startedAt))
        : undefined;
    const answer = await this.client.request<Answer>(
      'POST',
      '/participants/customers/new',
      { ...call, headers, body },
      lookUp && {
        // spec 7.2: after 502/504 the state is unknown: validate with a GET whether the customer was created.
        idempotenceCheck: async (startedAt) => {
          const found = await lookUp(startedAt);
          return found && { found };
        },
        // spec 7.3: the conflict may mean "created already": return the existing participant.
        recover73: async (refusal: RawResponse, startedAt) => {
          const existing = await lookUp(startedAt);
          return existing && { exists: existing, conflict: conflictMessage(refusal.body) };
        },
      },
    );
    if ('found' in answer) {
      return { outcome: 'found', participant_code: answer.found.participant_code, participant: answer.found };
    }
    if ('exists' in answer) {
      return {
        outcome: 'exists',
        participant_code: answer.exists.participant_code,
        participant: answer.exists,
        conflict: answer.conflict,
      };
    }
    return {
      outcome: 'created',
      participant_code: answer.message.participant_code,
      customer: answer.message,
    };
  }

  /**
   * `GET /participants`: the platform's customers, oldest first, with the vendor's filters and pagination
   * (`page` from 1, `page_size` up to 100).
   *
   * @example
   * const { message, total_pages } = await client.participants.list({ status: 'submitted', page: 1 });
   */
  list(query: ListParticipantsQuery = {}, options: CallOptions = {}): Promise<ListParticipantsResponse> {
    return this.client.request<ListParticipantsResponse>('GET', '/participants', {
      ...options,
      query: query as Record<string, QueryValue>,
    });
  }

  /**
   * `GET /participants/{email}`: the platform's participant with this email (the check spec 7.2 asks for
   * after an uncertain customer creation). Unknown → `SvcNotFoundError`; another platform's → 403.
   *
   * @example
   * const { participant_code } = await client.participants.getByEmail('ada@example.com');
   */
  async getByEmail(email: string, options: CallOptions = {}): Promise<ParticipantByEmail> {
    const response = await this.client.request<{ message: ParticipantByEmail }>(
      'GET',
      `/participants/${pathSegment(email, 'email')}`,
      options,
    );
    return response.message;
  }

  /** The platform's participant with this email, or undefined (404; 403: another platform's, so not ours). */
  private async findByEmail(email: string, options: CallOptions): Promise<ParticipantByEmail | undefined> {
    try {
      return await this.getByEmail(email, options);
    } catch (error) {
      if (error instanceof SvcNotFoundError || error instanceof SvcPermissionError) return undefined;
      throw error;
    }
  }
}

/** The spec 7.3 message of a refusal (the first `errors` entry that carries one). */
function conflictMessage(body: unknown): string {
  const errors = (body as { errors?: unknown } | undefined)?.errors;
  return spec73Text(body) ?? (Array.isArray(errors) ? errors.map(String)[0] : String(body)) ?? '';
}
