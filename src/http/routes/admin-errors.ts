import { Error400, Error401, Error409, Error500, OperatorError } from '../../contract/responses.ts';

/** The error answers every operator route can give. */
export const adminErrorResponses = {
  400: Error400,
  401: Error401,
  404: OperatorError,
  409: Error409,
  500: Error500,
  503: OperatorError,
};
