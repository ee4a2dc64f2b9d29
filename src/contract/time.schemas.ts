import { Type, type Static } from 'typebox';

export const TimeResponse = Type.Object({
  message: Type.Object({
    epoch: Type.Integer(),
    epoch_units: Type.Literal('milliseconds'),
    iso_8601: Type.String(),
  }),
});
export type TimeResponse = Static<typeof TimeResponse>;
