/** svc's exit codes (README "CLI"): 0 done, 1 failed, 2 a usage error, 3 no server answered. */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3 } as const;
