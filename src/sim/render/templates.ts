import type { ApiVersion } from '../../sched/versions.js';
import v42 from '../templates/v0.0.42.json' with { type: 'json' };
import v43 from '../templates/v0.0.43.json' with { type: 'json' };
import v44 from '../templates/v0.0.44.json' with { type: 'json' };

/**
 * Bodies captured from a real Slurm 25.11.7, one per data parser. Rendering starts
 * from a deep copy of these and sets the fields the simulator knows, so every
 * member a real slurmrestd sends is present with the type it really has.
 */
export interface VersionTemplates {
  job: Record<string, unknown>;
  slurmdbJob: Record<string, unknown>;
  meta: Record<string, unknown>;
  slurmdbMeta: Record<string, unknown>;
  /** One element of `associations[]` (`GET /slurmdb/{v}/associations`). */
  association: Record<string, unknown>;
}

const TEMPLATES: Record<ApiVersion, VersionTemplates> = {
  'v0.0.42': v42 as unknown as VersionTemplates,
  'v0.0.43': v43 as unknown as VersionTemplates,
  'v0.0.44': v44 as unknown as VersionTemplates,
};

export function templateFor(version: ApiVersion): VersionTemplates {
  return TEMPLATES[version];
}

/** Slurm's `{set, infinite, number}` wrapper; null renders as unset. */
export function noVal(value: number | null, infinite = false): { set: boolean; infinite: boolean; number: number } {
  if (infinite) return { set: false, infinite: true, number: 0 };
  if (value === null) return { set: false, infinite: false, number: 0 };
  return { set: true, infinite: false, number: value };
}
