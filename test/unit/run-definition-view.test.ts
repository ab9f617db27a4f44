import { describe, expect, it } from 'vitest';
import { runDefinitionView } from '../../src/views/views.js';

/**
 * A run's definition (GET /api/v1/runs/{id}) carries the pipeline's webhook URL and each step's
 * spec: shown as the run's own `webhook_url` and as a job's spec are (issue 30).
 */
describe("a run's definition as shown", () => {
  const definition = {
    webhookUrl: 'https://hooks:s3cret@example.org/notify?token=abc123',
    steps: [{ name: 'only', spec: { environment: ['DB_PASSWORD=hunter2-horse', 'MODE=fast'] } }],
  };

  it("keeps the webhook URL's credentials and query for admins only", () => {
    const shown = runDefinitionView(definition, { admin: false }) as typeof definition;
    expect(shown.webhookUrl).toBe('https://example.org/notify');
    expect(JSON.stringify(shown)).not.toMatch(/s3cret|abc123|hunter2/);
    const full = runDefinitionView(definition, { admin: true }) as typeof definition;
    expect(full.webhookUrl).toBe(definition.webhookUrl);
  });

  it("masks the steps' secret-looking environment values for everyone", () => {
    for (const admin of [false, true]) {
      const shown = runDefinitionView(definition, { admin }) as typeof definition;
      expect(shown.steps[0]?.spec.environment).toEqual(['DB_PASSWORD=[redacted:DB_PASSWORD]', 'MODE=fast']);
    }
  });
});
