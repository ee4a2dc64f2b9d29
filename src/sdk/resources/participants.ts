import type {
  CreatedCustomer,
  ListParticipantsQuery,
  ListParticipantsResponse,
  ParticipantByEmail,
  PostCustomerBody,
} from '../../contract/participants.schemas.ts';
import { REQUEST_ID_HEADER } from '../../contract/responses.ts';
import type { QueryValue, RequestOptions, SvcClient } from '../client.ts';

export type {
  CreatedCustomer,
  ListParticipantsQuery,
  ListParticipantsResponse,
  ParticipantByEmail,
  ParticipantEntity,
  PostCustomerBody,
} from '../../contract/participants.schemas.ts';
export {
  DATA_USED_WITH_DIFFERENT_REQUEST_ID,
  EMAIL_ALREADY_EXISTS,
} from '../../contract/participants.schemas.ts';

type CallOptions = Pick<RequestOptions, 'headers' | 'retry'>;

/**
 * Customer onboarding and participant look-ups (spec 4.6, 7.2, 7.3). One method per endpoint; each goes
 * through `SvcClient.request` (the retry rules of spec 7) and throws the status family's `SvcError`.
 *
 * @example
 * const participants = new ParticipantsResource(new SvcClient({ baseUrl, apiKey, apiSecret, passphrase }));
 * const customer = await participants.createCustomer(profile, { requestId: crypto.randomUUID() });
 * console.log(customer.participant_code, customer.status); // e.g. 'K3M9QZ' 'approved'
 */
export class ParticipantsResource {
  constructor(private readonly client: SvcClient) {}

  /**
   * `POST /participants/customers/new`: creates a customer; 201 with its new 6-character participant code
   * and status (`approved` when `kyc` and `sanction_screening` are `pass`, else `submitted`).
   *
   * Send the same `requestId` (the `X-REQUEST-ID` header) when you repeat a request: the same payload with
   * the same id returns the original answer again. Any other repeat is a 400 of spec 7.3
   * ({@link EMAIL_ALREADY_EXISTS}, {@link DATA_USED_WITH_DIFFERENT_REQUEST_ID}); look the customer up with
   * {@link ParticipantsResource.getByEmail} to see whether it exists.
   *
   * @example
   * const requestId = crypto.randomUUID(); // keep it with the customer until the answer arrives
   * const customer = await participants.createCustomer(
   *   {
   *     first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', address_one: '1 Main St',
   *     city: 'Chicago', zip: '60601', jurisdiction_code: 'US-IL', date_of_birth: '1985-09-02',
   *     citizenship_code: 'US', tax_id: '123-45-6789', kyc: 'pass', kyc_timestamp: Date.now(),
   *     sanction_screening: 'pass', sanction_screening_timestamp: Date.now(), signed_timestamp: Date.now(),
   *     b_notice_receipt: false, is_w_form_certified: true, w_form_certification: Date.now(),
   *     signature: 'Ada Lovelace', signature_timestamp: Date.now(), payee_exemption: 'NONE',
   *     fatca_reporting_exemption: 'NONE', is_not_subject_backup_withholding: true,
   *   },
   *   { requestId },
   * );
   */
  async createCustomer(
    body: PostCustomerBody,
    options: CallOptions & { requestId?: string } = {},
  ): Promise<CreatedCustomer> {
    const { requestId, ...call } = options;
    const headers =
      requestId === undefined ? call.headers : { ...call.headers, [REQUEST_ID_HEADER]: requestId };
    const response = await this.client.request<{ message: CreatedCustomer }>(
      'POST',
      '/participants/customers/new',
      { ...call, headers, body },
    );
    return response.message;
  }

  /**
   * `GET /participants`: the platform's customers, oldest first, with the vendor's filters and pagination
   * (`page` from 1, `page_size` up to 100).
   *
   * @example
   * const { message, total_pages } = await participants.list({ status: 'submitted', page: 1 });
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
   * const { participant_code } = await participants.getByEmail('ada@example.com');
   */
  async getByEmail(email: string, options: CallOptions = {}): Promise<ParticipantByEmail> {
    const response = await this.client.request<{ message: ParticipantByEmail }>(
      'GET',
      `/participants/${encodeURIComponent(email)}`,
      options,
    );
    return response.message;
  }
}
