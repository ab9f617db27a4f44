import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Job } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { seesEveryOwner } from '../../access/principal.js';
import { DELIVER_JOB } from '../../notify/delivery-dispatcher.js';
import type { UiContext } from './context.js';
import { UI_PREFIX } from './layout.js';
import { isAdmin, principalOfLogin } from './sessions.js';

export const QUEUE_BOARD_PATH = `${UI_PREFIX}/queues`;
export const QUEUE_BOARD_ADMIN_PATH = `${UI_PREFIX}/queues-admin`;

/**
 * What the read-only board shows of the notify queue. A `deliver` job's failure is the
 * receiver's answer (its status, the first bytes of its error body, a connection's error code),
 * which only admins may read (issue 30: any reader could otherwise point a job's webhook at an
 * address and read what answers there). They have it on the admin board and the job page.
 */
class ReceiverHidingAdapter extends BullMQAdapter {
  override async getJob(id: string): Promise<Job | undefined> {
    const job = await super.getJob(id);
    if (job) hideReceiver(job);
    return job;
  }

  override async getJobs(...args: Parameters<BullMQAdapter['getJobs']>): Promise<Job[]> {
    const jobs = await super.getJobs(...args);
    for (const job of jobs) hideReceiver(job);
    return jobs;
  }
}

/** Blanks a fetched delivery job's failure (the instance is this request's own, read from Redis). */
function hideReceiver(job: Job): void {
  if (job.name !== DELIVER_JOB || (!job.failedReason && !job.stacktrace?.length)) return;
  job.failedReason =
    'the attempt failed; why (the receiver’s answer) is shown to admins: queues-admin, or the job’s page';
  job.stacktrace = [];
}

/**
 * The BullMQ dashboard (bull-board), behind the UI's login. bull-board's
 * read-only mode is a setting of each queue adapter, not of a request, so
 * there are two boards on the same queues: `/ui/queues`, read-only, for admins
 * and auditors (its jobs are every owner's), and `/ui/queues-admin`, with retry, clean, pause
 * and the rest, for sessions with the admin scope (the UI's guard refuses others, and the
 * board's own writes unless they come from a page of this origin).
 */
export async function registerQueueBoards(app: FastifyInstance, ctx: UiContext): Promise<void> {
  const queues = Object.values(ctx.deps.queues);
  for (const [path, readOnlyMode] of [
    [QUEUE_BOARD_PATH, true],
    [QUEUE_BOARD_ADMIN_PATH, false],
  ] as const) {
    const serverAdapter = new FastifyAdapter();
    serverAdapter.setBasePath(path);
    createBullBoard({
      queues: queues.map((q) =>
        readOnlyMode && q.name === 'notify'
          ? new ReceiverHidingAdapter(q, { readOnlyMode })
          : new BullMQAdapter(q, { readOnlyMode }),
      ),
      serverAdapter,
      options: {
        uiConfig: {
          boardTitle: readOnlyMode ? 'schedflow queues (read-only)' : 'schedflow queues',
          miscLinks: [{ text: 'Back to schedflow', url: `${UI_PREFIX}/jobs` }],
        },
      },
    });
    await app.register(async (board) => {
      board.addHook('onRequest', async (request, reply) => {
        const session = request.uiSession;
        if (!readOnlyMode) {
          if (!session || !isAdmin(session)) {
            return reply.code(403).type('text/plain').send('the queue dashboard with actions is for admins');
          }
          return;
        }
        // Its jobs are every owner's: only who reads every owner's sees them (admins, auditors).
        if (!session || !seesEveryOwner(principalOfLogin(session))) {
          return reply.code(403).type('text/plain').send('the queue dashboard is for admins and auditors');
        }
      });
      await board.register(serverAdapter.registerPlugin(), { prefix: path });
    });
  }
}
