import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Flavor } from '../flavor.js';
import { admit, cachedGet, type ProxyContext, proxyError } from '../proxy-context.js';
import { noVal } from '../render/templates.js';
import type { SimReservation } from '../reservations.js';
import { CONTROLLER_REFUSED_STATUS, controllerUnreachable, credentialRefusedEntry } from '../slurmrestd-answers.js';

type VersionParams = { version: string };

/** One element of `reservations[]`, member for member as Slurm 25.11.7 answers (`Nodes=` of the one node). */
export function renderReservation(r: SimReservation, ctx: ProxyContext): Record<string, unknown> {
  return {
    accounts: r.accounts.join(','),
    burst_buffer: '',
    core_count: ctx.config.cpus,
    core_specializations: [],
    end_time: noVal(r.endTime),
    features: '',
    flags: r.flags,
    groups: '',
    licenses: '',
    max_start_delay: 0,
    name: r.name,
    node_count: 1,
    node_list: ctx.config.nodeName,
    partition: r.partition ?? '',
    // PurgeCompleted's default, which 25.11.7 sends set (300 s) whatever the flags.
    purge_completed: { time: noVal(300) },
    start_time: noVal(r.startTime),
    watts: {},
    tres: `cpu=${ctx.config.cpus}`,
    users: r.users.join(','),
  };
}

/** `GET {prefix}/{version}/reservations`: slurmctld's reservations. */
export function registerReservationRoutes(app: FastifyInstance, ctx: ProxyContext, flavor: Flavor): void {
  app.get<{ Params: VersionParams }>(`${flavor.controller}/:version/reservations`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'reservations', 'slurmctld', () => {
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'reservations');
      if (!call.principal) {
        const refused = credentialRefusedEntry('Unable to query reservations', 'slurm_load_reservations()');
        return { status: CONTROLLER_REFUSED_STATUS, body: call.envelope('slurmctld', [refused]) };
      }
      return {
        status: 200,
        body: {
          reservations: ctx.reservations.list().map((r) => renderReservation(r, ctx)),
          last_update: noVal(Math.floor(ctx.clock.now() / 1000)),
          ...call.envelope('slurmctld'),
        },
      };
    });
  });
}

const reservationBody = z.strictObject({
  /** Unix seconds, or seconds from now when `startInSec` is given instead. */
  startTime: z.number().int().positive().optional(),
  startInSec: z.number().int().min(0).optional(),
  durationMin: z.number().int().positive(),
  users: z.array(z.string().min(1)).default([]),
  accounts: z.array(z.string().min(1)).default([]),
  flags: z.array(z.string().regex(/^[A-Z_]+$/)).default([]),
  partition: z.string().min(1).nullable().default(null),
});

/**
 * The stand-in for `scontrol create reservation ReservationName=<name> Nodes=<the node> …` and
 * `scontrol delete ReservationName=<name>` (admin routes: the caller of registerAdmin checks
 * the admin token). Like scontrol with `Nodes=`, the flags get SPEC_NODES.
 */
export function registerReservationAdmin(app: FastifyInstance, adminPrefix: string, ctx: ProxyContext): void {
  app.put<{ Params: { name: string }; Body: unknown }>(`${adminPrefix}/reservations/:name`, async (req, reply) => {
    const parsed = reservationBody.safeParse(req.body);
    if (!parsed.success) return proxyError(reply, 400, 'Bad Request', parsed.error.message);
    const b = parsed.data;
    if (b.users.length === 0 && b.accounts.length === 0) {
      // scontrol: "Either Users and/or Accounts must be specified".
      return proxyError(reply, 400, 'Bad Request', 'a reservation needs users or accounts');
    }
    const start = b.startTime ?? Math.floor(ctx.clock.now() / 1000) + (b.startInSec ?? 0);
    const reservation: SimReservation = {
      name: req.params.name,
      startTime: start,
      endTime: start + b.durationMin * 60,
      users: b.users,
      accounts: b.accounts,
      flags: [...new Set([...b.flags, 'SPEC_NODES'])],
      partition: b.partition,
    };
    ctx.reservations.set(reservation);
    return reservation;
  });
  app.delete<{ Params: { name: string } }>(`${adminPrefix}/reservations/:name`, async (req, reply) => {
    if (!ctx.reservations.delete(req.params.name)) {
      return proxyError(reply, 404, 'Not Found', `no reservation ${req.params.name}`);
    }
    return { deleted: req.params.name };
  });
}
