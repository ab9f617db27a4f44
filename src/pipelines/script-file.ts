import { readFileSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { ConfigError } from '../errors.js';

/**
 * A step's `script_file`, read from the pipeline file's folder and never from
 * outside it. A script is sent to the cluster and its text shows in the job's
 * record, so `../../etc/shadow`, an absolute path or a symlink out of the
 * folder would let whoever writes pipeline files read any file the daemon can.
 * Both paths go through realpath, so a symlink is judged by where it points
 * (and a symlinked pipelines folder itself still works).
 *
 * Read at load (to check it) and again when a run is made (a changed script is
 * picked up), each time through here, so a file swapped for a symlink after
 * the check is refused too.
 */
export function readScriptFile(pipelineFile: string, scriptFile: string): string {
  const wanted = resolve(dirname(pipelineFile), scriptFile);
  let folder: string;
  let real: string;
  try {
    folder = realpathSync(dirname(pipelineFile));
    real = realpathSync(wanted);
  } catch {
    throw new ConfigError(`cannot read ${wanted}`);
  }
  const inside = relative(folder, real);
  if (inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
    const via = real === wanted ? '' : ` (it resolves to ${real})`;
    throw new ConfigError(`${scriptFile}${via} is outside the pipelines folder ${folder}: keep scripts in it`);
  }
  try {
    return readFileSync(real, 'utf8');
  } catch {
    throw new ConfigError(`cannot read ${wanted}`);
  }
}
