import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { packageRoot } from '../lib/package-info.js';

/**
 * How to run schedflow, for the commands a message suggests: the checkout's `./schedflow`
 * (its path from elsewhere), or `schedflow` where the package was installed (it has no such
 * script; npm put the command on the PATH). Never `npx schedflow`, which rebuilt the project
 * before answering and, outside it, asked the public registry for a package of that name.
 */
export function cliInvocation(cwd = process.cwd()): string {
  const script = join(packageRoot(), 'schedflow');
  if (!existsSync(script)) return 'schedflow';
  return relative(cwd, script) === 'schedflow' ? './schedflow' : script;
}
