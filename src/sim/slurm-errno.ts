/**
 * The Slurm error numbers the simulator can return, with slurm_strerror() texts.
 * Numbers are those of slurm/slurm_errno.h; a client sees them in `errors[]`
 * (submit) or `status[].error` (cancel), exactly as a real slurmrestd sends them.
 */
export const SLURM_ERRNO = {
  SLURM_ERROR: { number: -1, text: 'Unspecified error' },
  EPERM: { number: 1, text: 'Operation not permitted' },
  ESLURM_INVALID_PARTITION_NAME: { number: 2000, text: 'Invalid partition name specified' },
  ESLURM_ACCESS_DENIED: { number: 2002, text: 'Access/permission denied' },
  ESLURM_TOO_MANY_REQUESTED_CPUS: { number: 2005, text: 'More processors requested than permitted' },
  ESLURM_JOB_SCRIPT_MISSING: { number: 2009, text: 'Job script not specified' },
  ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE: {
    number: 2014,
    text: 'Requested node configuration is not available',
  },
  ESLURM_INVALID_JOB_ID: { number: 2017, text: 'Invalid job id specified' },
  ESLURM_INVALID_NODE_NAME: { number: 2018, text: 'Invalid node name specified' },
  ESLURM_WRITING_TO_FILE: { number: 2019, text: 'I/O error writing script/environment to file' },
  ESLURM_ALREADY_DONE: { number: 2021, text: 'Job/step already completing or completed' },
  ESLURM_NOT_SUPPORTED: { number: 2036, text: 'Requested operation not supported on this system' },
  ESLURM_DEPENDENCY: { number: 2038, text: 'Job dependency problem' },
  ESLURM_INVALID_ACCOUNT: {
    number: 2045,
    text: 'Invalid account or account/partition combination specified',
  },
  ESLURM_INVALID_QOS: { number: 2066, text: 'Invalid qos specification' },
  ESLURM_JOB_NOT_PENDING: { number: 2073, text: 'Job is no longer pending execution' },
  ESLURM_INVALID_ARRAY: { number: 2081, text: 'Invalid job array specification' },
  ESLURM_ACCOUNTING_POLICY: {
    number: 2050,
    text: "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
  },
  ESLURM_INVALID_TIME_LIMIT: {
    number: 2051,
    text: 'Requested time limit is invalid (missing or exceeds some limit)',
  },
  ESLURM_REST_INVALID_QUERY: { number: 9000, text: 'Query empty or not RFC7320 compliant' },
  ESLURM_REST_FAIL_PARSING: { number: 9001, text: 'Failure during parsing' },
  ESLURM_REST_INVALID_JOBS_DESC: {
    number: 9002,
    text: 'Jobs description entry not found, empty or not dictionary or list',
  },
  ESLURM_REST_EMPTY_RESULT: { number: 9003, text: 'Nothing found with query' },
  ESLURM_DATA_PATH_NOT_FOUND: { number: 9200, text: 'Unable to resolve path' },
  ESLURM_DATA_CONV_FAILED: { number: 9202, text: 'Unable to convert Data type' },
  SLURM_PROTOCOL_AUTHENTICATION_ERROR: { number: 1007, text: 'Protocol authentication error' },
  SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR: {
    number: 1800,
    text: 'Unable to contact slurm controller (connect failure)',
  },
  ESLURM_DB_CONNECTION: { number: 7000, text: 'Unable to connect to database' },
} as const;

export type SlurmErrnoName = keyof typeof SLURM_ERRNO;

/** An error the simulated controller raises; rendered into a body by the HTTP layer. */
export class SlurmError extends Error {
  readonly errno: number;
  readonly errnoName: SlurmErrnoName;

  constructor(
    name: SlurmErrnoName,
    /** Long form, like slurmrestd's `description`. */
    readonly description: string,
    /** Where it was detected, like slurmrestd's `source`. */
    readonly source: string,
  ) {
    super(SLURM_ERRNO[name].text);
    this.name = 'SlurmError';
    this.errno = SLURM_ERRNO[name].number;
    this.errnoName = name;
  }
}
