import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CRON_PIPELINE = 'soak-cron';

/**
 * The pipeline the soak's daemon runs every minute: two short steps, the second after the
 * first, a webhook at the run's end. `overlap: skip`, so a run held up by a fault is not
 * joined by the next tick's.
 */
export function writeCronPipeline(pipelinesDir: string, webhookUrl: string): void {
  const text = `schedule:
  cron: "* * * * *"
  overlap: skip
  catchup: latest
webhook: ${webhookUrl}/run
defaults: { time_limit: 5 }
steps:
  prepare:
    script: "#!/bin/sh\\nsleep 1\\necho prepared\\n"
  report:
    needs: [prepare]
    script: "#!/bin/sh\\necho reported\\n"
`;
  writeFileSync(join(pipelinesDir, `${CRON_PIPELINE}.yaml`), text);
}
