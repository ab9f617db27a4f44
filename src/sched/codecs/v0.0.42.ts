import { z } from 'zod';
import {
  decodeAccounting,
  decodeController,
  decodeJobState,
  encodeSubmitFor,
  expandedPaths,
  type PathsSchema,
  pathOf,
} from './common.js';
import type { JobCodec } from './job-codec.js';

/**
 * Data parser v0.0.42 (Slurm 24.11). Its controller records have no `*_expanded` members:
 * `standard_output` and `standard_error` already hold the expanded paths (Slurm 25.11 sends
 * `/tmp/slurm-25110001.out` there, where v0.0.43 sends `slurm-%j.out`).
 */
const controllerPaths: PathsSchema = z
  .object({ standard_output: z.string().optional(), standard_error: z.string().optional() })
  .transform((job) => ({ stdout_path: pathOf(job.standard_output), stderr_path: pathOf(job.standard_error) }));

export const codecV0042: JobCodec = {
  version: 'v0.0.42',
  decodeControllerJob: (raw) => decodeController(raw, controllerPaths),
  decodeJobState,
  decodeAccountingJob: (raw) => decodeAccounting(raw, expandedPaths),
  encodeSubmit: (spec) => encodeSubmitFor('v0.0.42', spec),
};
