import { type Job, UnrecoverableError } from 'bullmq';
import { createRequest, getRequest, transition } from '../src/db/requests.js';
import { submitPayloadSchema } from '../src/queue/catalog.js';
import { SubmitRefusedError, submitRequest } from '../src/tracking/submitter.js';
import type { WorkerServices } from './services.js';

/** The `submit` queue: record the request if the producer could not, then submit it once. */
export function submitProcessor(services: WorkerServices) {
  return async (job: Job): Promise<string> => {
    const payload = submitPayloadSchema.parse(job.data);
    const { db, logger } = services;
    if (payload.request) {
      const { profile, spec, origin, acceptedAt } = payload.request;
      createRequest(db, {
        id: payload.requestId,
        profile,
        name: spec.name,
        spec,
        origin,
        at: acceptedAt,
        source: origin === 'cli' ? 'cli' : 'api',
      });
      transition(db, payload.requestId, { to: 'queued', source: 'submit', at: job.timestamp });
    }
    const row = getRequest(db, payload.requestId);
    if (!row) throw new UnrecoverableError(`no job request ${payload.requestId}`);
    try {
      return await submitRequest(
        { db, client: services.clients.get(row.profile), logger, signal: services.shutdown },
        payload.requestId,
      );
    } catch (error) {
      // Refused for good (403, Slurm refusal, bad spec): failed in the history, no more attempts.
      if (error instanceof SubmitRefusedError) throw new UnrecoverableError(error.message);
      throw error;
    }
  };
}
