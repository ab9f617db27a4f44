import type { ApiVersion } from '../../sched/versions.js';
import { templateFor } from './templates.js';

export type Plugin = 'slurmctld' | 'slurmdbd';

export interface MetaContext {
  version: ApiVersion;
  clusterName: string;
  /** `host:port` of the caller, as slurmrestd reports the connection. */
  clientSource: string;
  user: string;
}

/** The `meta` member every slurmrestd body carries. */
export function renderMeta(plugin: Plugin, ctx: MetaContext): Record<string, unknown> {
  const template = templateFor(ctx.version);
  const meta = structuredClone(plugin === 'slurmctld' ? template.meta : template.slurmdbMeta) as {
    client: Record<string, unknown>;
    slurm: Record<string, unknown>;
  };
  meta.client = { source: ctx.clientSource, user: ctx.user, group: '' };
  meta.slurm = { ...meta.slurm, cluster: ctx.clusterName };
  return meta;
}

/** The envelope shared by all responses: meta, errors, warnings. */
export function envelope(
  plugin: Plugin,
  ctx: MetaContext,
  errors: unknown[] = [],
  warnings: unknown[] = [],
): Record<string, unknown> {
  return { meta: renderMeta(plugin, ctx), errors, warnings };
}
