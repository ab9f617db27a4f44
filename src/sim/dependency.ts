import { assertNever } from '../lib/assert-never.js';

/**
 * Slurm's `dependency` string (sbatch --dependency), the subset the simulator honours:
 * `after`, `afterany`, `afterok`, `afternotok`, each with one or more `:job_id`,
 * joined by `,` (all must hold) or `?` (any may hold).
 */
export type DependencyType = 'after' | 'afterany' | 'afterok' | 'afternotok';

export interface DependencyTerm {
  type: DependencyType;
  jobId: number;
}

export interface Dependency {
  /** `all`: every term must be satisfied (`,`); `any`: one is enough (`?`). */
  mode: 'all' | 'any';
  terms: DependencyTerm[];
}

export type DependencyStatus = 'satisfied' | 'waiting' | 'never';

/** What the dependency evaluation needs to know of a job it points at. */
export interface DependencyTarget {
  started: boolean;
  finished: boolean;
  completedOk: boolean;
}

const TYPES: readonly string[] = ['after', 'afterany', 'afterok', 'afternotok'];

export class DependencySyntaxError extends Error {
  override name = 'DependencySyntaxError';
}

/** Parses a dependency string; an empty string means no dependency (undefined). */
export function parseDependency(text: string): Dependency | undefined {
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  if (trimmed.includes(',') && trimmed.includes('?')) {
    throw new DependencySyntaxError(`cannot mix ',' and '?' in dependency "${text}"`);
  }
  const mode = trimmed.includes('?') ? 'any' : 'all';
  const terms: DependencyTerm[] = [];
  for (const part of trimmed.split(mode === 'any' ? '?' : ',')) {
    const [type, ...ids] = part.split(':');
    if (type === undefined || !TYPES.includes(type)) {
      throw new DependencySyntaxError(`unsupported dependency type "${type ?? ''}" (supported: ${TYPES.join(', ')})`);
    }
    if (ids.length === 0) throw new DependencySyntaxError(`"${part}" names no job id`);
    for (const id of ids) {
      // `afterok:123+10` (a delay) and array task ids are not simulated.
      if (!/^\d+$/.test(id)) throw new DependencySyntaxError(`"${id}" is not a job id`);
      terms.push({ type: type as DependencyType, jobId: Number(id) });
    }
  }
  return { mode, terms };
}

function termStatus(type: DependencyType, target: DependencyTarget | undefined): DependencyStatus {
  // A job the controller no longer knows cannot make progress either way.
  if (!target) return 'never';
  switch (type) {
    case 'after':
      return target.started || target.finished ? 'satisfied' : 'waiting';
    case 'afterany':
      return target.finished ? 'satisfied' : 'waiting';
    case 'afterok':
      if (!target.finished) return 'waiting';
      return target.completedOk ? 'satisfied' : 'never';
    case 'afternotok':
      if (!target.finished) return 'waiting';
      return target.completedOk ? 'never' : 'satisfied';
    default:
      return assertNever(type);
  }
}

export function evaluateDependency(
  dependency: Dependency,
  lookup: (jobId: number) => DependencyTarget | undefined,
): DependencyStatus {
  const statuses = dependency.terms.map((term) => termStatus(term.type, lookup(term.jobId)));
  if (dependency.mode === 'all') {
    if (statuses.includes('never')) return 'never';
    return statuses.every((s) => s === 'satisfied') ? 'satisfied' : 'waiting';
  }
  if (statuses.includes('satisfied')) return 'satisfied';
  return statuses.every((s) => s === 'never') ? 'never' : 'waiting';
}
