import { seesEveryOwner } from '../../access/principal.js';
import { type Html, html } from './html.js';
import { isAdmin, principalOfLogin, type UiSession } from './sessions.js';

export const UI_PREFIX = '/ui';

const NAV = [
  ['jobs', 'Jobs'],
  ['pipelines', 'Pipelines'],
  ['runs', 'Runs'],
  ['history', 'History'],
  ['cluster', 'Cluster'],
  ['profiles', 'Profiles'],
] as const;

export type NavKey = (typeof NAV)[number][0] | 'queues' | 'audit' | 'login';

export interface PageInput {
  title: string;
  nav: NavKey;
  session: UiSession | null;
  body: Html;
  /** Live updates: `all` refreshes on any change; `watched` only for what the page marks. */
  live?: 'all' | 'watched';
  /** Also fetch the page's content again this often (for figures no job change announces). */
  refreshEverySec?: number;
  flash?: { text: string; error?: boolean } | null;
}

/** The whole document around a page's body: header, navigation, session, and the assets. */
export function page(input: PageInput): string {
  const { session } = input;
  const nav = session
    ? html`<nav aria-label="main">${NAV.map(
        ([key, label]) =>
          html` <a href="${UI_PREFIX}/${key}"${input.nav === key ? html` aria-current="page"` : ''}>${label}</a>`,
      )}${
        // The queue board holds every owner's jobs: only admins and auditors have it.
        seesEveryOwner(principalOfLogin(session))
          ? html` <a href="${UI_PREFIX}/${isAdmin(session) ? 'queues-admin' : 'queues'}/"${
              input.nav === 'queues' ? html` aria-current="page"` : ''
            }>Queues</a> <a href="${UI_PREFIX}/audit"${input.nav === 'audit' ? html` aria-current="page"` : ''}>Audit</a>`
          : ''
      }</nav>
<div class="who"><span>${session.who}${isAdmin(session) ? ' · admin' : ' · read-only'} · owner ${session.owner}</span>
<form method="post" action="${UI_PREFIX}/logout"><input type="hidden" name="_csrf" value="${session.csrfToken}"><button type="submit">Log out</button></form></div>`
    : '';
  const live = input.live
    ? html` data-live="${UI_PREFIX}/events"${input.live === 'all' ? html` data-live-all` : ''}`
    : '';
  const refresh = input.refreshEverySec ? html` data-refresh-every="${String(input.refreshEverySec)}"` : '';
  const flash = input.flash
    ? html`<p class="flash${input.flash.error ? ' error' : ''}" role="status">${input.flash.text}</p>`
    : '';
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${input.title} · schedflow</title>
<link rel="stylesheet" href="${UI_PREFIX}/assets/app.css"></head>
<body><header class="top"><span class="brand">schedflow</span>${nav}</header>
<main id="main"${live}${refresh}>${flash}${input.body}</main>
<script src="${UI_PREFIX}/assets/app.js" defer></script></body></html>`.text;
}

/** A POST form of one button, with the session's CSRF token; `confirm` asks first. */
export function actionButton(
  session: UiSession,
  action: string,
  label: string,
  options: { danger?: boolean; confirm?: string; fields?: Record<string, string>; ariaLabel?: string } = {},
): Html {
  return html`<form class="inline" method="post" action="${action}"${
    options.confirm ? html` data-confirm="${options.confirm}"` : ''
  }><input type="hidden" name="_csrf" value="${session.csrfToken}">${Object.entries(options.fields ?? {}).map(
    ([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`,
  )}<button type="submit"${options.danger ? html` class="danger"` : ''}${
    options.ariaLabel ? html` aria-label="${options.ariaLabel}"` : ''
  }>${label}</button></form>`;
}
