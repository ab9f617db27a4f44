import type { CallContext, Produced } from './proxy-context.js';
import { slurmErrorEntry } from './proxy-context.js';
import type { Plugin } from './render/meta.js';
import { noVal } from './render/templates.js';
import { SlurmError } from './slurm-errno.js';

/**
 * The answers slurmrestd builds itself when a request cannot go through, as a real 25.11.7
 * sends them (test/fixtures/differential): a query it cannot parse, and a credential the
 * daemon behind it refused.
 */

/** HTTP status slurmrestd gives a Slurm error 1007 (a credential slurmctld refused). */
export const CONTROLLER_REFUSED_STATUS = 511;

/** slurmctld's refusal of the credential, as an `errors[]` entry of the endpoint's own answer. */
export function credentialRefusedEntry(description: string, source: string): Record<string, unknown> {
  return slurmErrorEntry(new SlurmError('SLURM_PROTOCOL_AUTHENTICATION_ERROR', description, source));
}

/**
 * slurmdbd refused the credential: slurmrestd cannot even open its connection, so every
 * accounting endpoint answers the same 502, before it looks at the query.
 */
export function accountingRefused(call: CallContext): Produced {
  const error = new SlurmError(
    'ESLURM_DB_CONNECTION',
    'Failed to open slurmdbd connection, authentication error',
    'openapi_get_db_conn',
  );
  return { status: 502, body: call.envelope('slurmdbd', [slurmErrorEntry(error)]) };
}

/** An endpoint of slurmctld's, as far as its answer without slurmctld goes. */
export type ControllerEndpoint =
  | 'jobs'
  | 'jobsState'
  | 'job'
  | 'submit'
  | 'cancel'
  | 'partitions'
  | 'nodes'
  | 'reservations';

/**
 * What slurmrestd answers when slurmctld cannot be reached (25.11.7, slurmctld killed): each
 * operation its own way. Ping is not here: it answers 200 with `pinged: DOWN`.
 */
export function controllerUnreachable(call: CallContext, endpoint: ControllerEndpoint, jobId?: number): Produced {
  const envelope = (error: SlurmError) => call.envelope('slurmctld', [slurmErrorEntry(error)]);
  const noJobs = { jobs: [], last_backfill: noVal(0), last_update: noVal(0) };
  const connect = (description: string, source: string) =>
    new SlurmError('SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR', description, source);
  switch (endpoint) {
    case 'jobs':
      return { status: 502, body: { ...noJobs, ...envelope(connect('Unable to query jobs', 'slurm_load_jobs()')) } };
    case 'jobsState': {
      const error = new SlurmError('SLURM_ERROR', 'Unable to query job states', 'slurm_load_job_state()');
      return { status: 500, body: { jobs: null, ...envelope(error) } };
    }
    case 'job': {
      const error = new SlurmError('SLURM_ERROR', `Unable to query JobId=${jobId ?? 0}`, '_handle_job_get');
      return { status: 500, body: { ...noJobs, ...envelope(error) } };
    }
    case 'submit':
      return { status: 502, body: envelope(connect('Batch job submission failed', 'slurm_submit_batch_job()')) };
    case 'cancel': {
      const error = new SlurmError('EPERM', 'Signal request failed', 'slurm_kill_jobs()');
      return { status: 500, body: { status: [], ...envelope(error) } };
    }
    // Not observed on a real cluster: answered as the job listing is.
    case 'partitions':
      return { status: 502, body: envelope(connect('Unable to query partitions', 'op_handler_partitions')) };
    case 'nodes':
      return { status: 502, body: envelope(connect('Failure to query nodes', '_dump_nodes')) };
    case 'reservations':
      return { status: 502, body: envelope(connect('Unable to query reservations', 'op_handler_reservations')) };
  }
}

/** slurmdbd cannot be reached: slurmrestd cannot open its connection, 502 to every accounting read. */
export function accountingUnreachable(call: CallContext): Produced {
  const error = new SlurmError('ESLURM_DB_CONNECTION', 'Failed to open slurmdbd connection', 'openapi_get_db_conn');
  return { status: 502, body: call.envelope('slurmdbd', [slurmErrorEntry(error)]) };
}

/** A parameter slurmrestd could not convert (9202), named by its path, e.g. `#/start_time/`. */
export function conversionError(parameter: string, description: string): SlurmError {
  return new SlurmError('ESLURM_DATA_CONV_FAILED', description, `#/${parameter}/`);
}

/**
 * 422: the operation refused its parameters (9000), after whatever conversion errors led to it.
 * `description` is the operation's own words ("Rejecting request. Failure parsing query").
 */
export function queryRejected(
  call: CallContext,
  plugin: Plugin,
  source: string,
  description: string,
  causes: SlurmError[] = [],
): Produced {
  const rejection = new SlurmError('ESLURM_REST_INVALID_QUERY', description, source);
  return { status: 422, body: call.envelope(plugin, [...causes, rejection].map(slurmErrorEntry)) };
}

/** A `warnings[]` entry: slurmrestd's notes on an answer that is not an error. */
export function warning(description: string, source: string): Record<string, string> {
  return { description, source };
}

/** Query parameters as slurmrestd reads them: a repeated parameter is a list, a single one a list of one. */
export function listParam(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value : [value];
}

/** A job id as slurmrestd's parser takes it: digits only (no array or het suffix in the simulator). */
export function parseJobId(text: string): number | undefined {
  return /^\d+$/.test(text) ? Number(text) : undefined;
}
