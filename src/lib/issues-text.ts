import type { z } from 'zod';

/** A Zod error as one line: `path: message; path: message`. */
export function issuesText(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}
