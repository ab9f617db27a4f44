import { decodeAccounting, decodeController, decodeJobState, encodeSubmitFor, expandedPaths } from './common.js';
import type { JobCodec } from './job-codec.js';

/**
 * Data parser v0.0.44 (Slurm 25.11). It adds `step_id` and `submit_line` to controller records and
 * `step_id` to `job_desc_msg`; none changes what is decoded here, so it reads records as v0.0.43 does.
 */
export const codecV0044: JobCodec = {
  version: 'v0.0.44',
  decodeControllerJob: (raw) => decodeController(raw, expandedPaths),
  decodeJobState,
  decodeAccountingJob: (raw) => decodeAccounting(raw, expandedPaths),
  encodeSubmit: (spec) => encodeSubmitFor('v0.0.44', spec),
};
