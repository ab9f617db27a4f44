/**
 * Slurm's host lists (`node[01-03,7],gpu1`): the names they stand for. Only the forms slurmctld
 * writes are read: bracketed ranges and single numbers, zero padding kept, commas between
 * hosts outside the brackets. Anything else is taken as one host name, as written.
 */
export function expandHostlist(list: string | null | undefined): string[] {
  if (!list) return [];
  const hosts: string[] = [];
  for (const part of splitTopLevel(list)) {
    const open = part.indexOf('[');
    const close = part.lastIndexOf(']');
    if (open === -1 || close < open) {
      if (part) hosts.push(part);
      continue;
    }
    const prefix = part.slice(0, open);
    const suffix = part.slice(close + 1);
    const expanded: string[] = [];
    let readable = true;
    for (const range of part.slice(open + 1, close).split(',')) {
      const match = /^(\d+)(?:-(\d+))?$/.exec(range);
      if (!match?.[1]) {
        readable = false;
        break;
      }
      const from = Number(match[1]);
      const to = match[2] === undefined ? from : Number(match[2]);
      const width = match[1].length;
      // A range of a million hosts is not a cluster's: refuse it rather than allocate it.
      if (to < from || to - from > 100_000) {
        readable = false;
        break;
      }
      for (let n = from; n <= to; n++) expanded.push(`${prefix}${String(n).padStart(width, '0')}${suffix}`);
    }
    hosts.push(...(readable ? expanded : [part]));
  }
  return hosts;
}

/** Splits at the commas outside brackets. */
function splitTopLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (c === '[') depth++;
    else if (c === ']') depth = Math.max(0, depth - 1);
    else if (c === ',' && depth === 0) {
      parts.push(list.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(list.slice(start).trim());
  return parts.filter((p) => p !== '');
}
