/**
 * A tiny HTML template helper: every interpolated value is escaped unless it
 * is already `Html` (made by this tag or by `raw`), so a page cannot be made
 * to carry markup from a job name, a reason or an output file.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(out);
}

/** Markup made by our own code (never from data). */
export const raw = (text: string): Html => new Html(text);

/**
 * A time shown in the viewer's zone by the page's script (from the ISO
 * `datetime`), with the UTC value as the text until then and on hover. Takes
 * milliseconds or the ISO text of a view (src/views/).
 */
export function time(at: number | string | null | undefined): Html {
  if (at === null || at === undefined) return html`<span class="muted">—</span>`;
  const iso = new Date(at).toISOString();
  const utc = `${iso.slice(0, 19).replace('T', ' ')} UTC`;
  return html`<time datetime="${iso}" title="${utc}">${utc}</time>`;
}

/** `12 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** A state badge: its colour comes from the state's class (see the CSS). */
export function stateBadge(state: string, attrs: { liveId?: string } = {}): Html {
  return html`<span class="state state-${state.toLowerCase()}"${
    attrs.liveId ? html` data-live-state="${attrs.liveId}"` : ''
  }>${state}</span>`;
}
