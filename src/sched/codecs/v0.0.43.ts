import { decodeAccounting, decodeController, decodeJobState, encodeSubmitFor, expandedPaths } from './common.js';
import type { JobCodec } from './job-codec.js';

/**
 * Data parser v0.0.43 (Slurm 25.05): the controller gives expanded output paths in `stdout_expanded`
 * and `stderr_expanded`, and `standard_output` keeps the pattern as submitted (`slurm-%j.out`).
 */
export const codecV0043: JobCodec = {
  version: 'v0.0.43',
  decodeControllerJob: (raw) => decodeController(raw, expandedPaths),
  decodeJobState,
  decodeAccountingJob: (raw) => decodeAccounting(raw, expandedPaths),
  encodeSubmit: (spec) => encodeSubmitFor('v0.0.43', spec),
};
