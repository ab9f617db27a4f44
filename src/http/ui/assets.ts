/**
 * The UI's one stylesheet and one script, served from memory (no build step).
 * The script: local times, live updates over Server-Sent Events, and confirm
 * prompts on destructive forms.
 */

export const APP_CSS = `
:root { --fg:#1d232a; --muted:#5d6873; --bg:#fff; --panel:#f4f6f8; --line:#d6dce1; --accent:#1f5fbf;
  --ok:#1e7d32; --bad:#b3261e; --warn:#9a6700; --run:#1f5fbf; --wait:#6b4fa8; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
a { color:var(--accent); }
header.top { display:flex; flex-wrap:wrap; align-items:center; gap:.25rem 1rem; padding:.5rem 1rem; background:#17212b; color:#fff; }
header.top a { color:#fff; text-decoration:none; padding:.25rem .1rem; }
header.top a[aria-current=page] { border-bottom:2px solid #fff; }
header.top .brand { font-weight:700; margin-right:.5rem; }
header.top .who { margin-left:auto; font-size:.85rem; opacity:.85; display:flex; gap:.5rem; align-items:center; }
header.top form { display:inline; }
header.top button { background:transparent; color:#fff; border:1px solid #fff6; }
main { padding:1rem; max-width:1200px; margin:0 auto; }
h1 { font-size:1.4rem; margin:.25rem 0 1rem; word-break:break-word; }
h2 { font-size:1.1rem; margin:1.5rem 0 .5rem; }
.muted { color:var(--muted); }
.table-wrap { overflow-x:auto; }
table { border-collapse:collapse; width:100%; font-size:.9rem; }
th, td { text-align:left; padding:.35rem .5rem; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:var(--panel); font-weight:600; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:.25rem 1rem; margin:0; }
dl.facts dt { color:var(--muted); }
dl.facts dd { margin:0; word-break:break-word; }
.panel { background:var(--panel); border:1px solid var(--line); border-radius:6px; padding:.75rem 1rem; margin:.5rem 0 1rem; }
.state { display:inline-block; padding:0 .45rem; border-radius:999px; font-size:.8rem; font-weight:600; color:#fff; background:var(--muted); white-space:nowrap; }
.state-completed, .state-succeeded { background:var(--ok); }
.state-failed, .state-submit_failed, .state-timeout, .state-node_fail, .state-out_of_memory, .state-boot_fail, .state-deadline, .state-lost { background:var(--bad); }
.state-running, .state-submitted, .state-submitting { background:var(--run); }
.state-pending, .state-queued, .state-accepted { background:var(--wait); }
.state-cancelled, .state-preempted, .state-skipped { background:var(--warn); }
.held { display:inline-block; padding:0 .45rem; border-radius:999px; font-size:.8rem; font-weight:600; border:1px solid var(--warn); color:var(--warn); white-space:nowrap; }
form.inline label { font-size:.85rem; color:var(--muted); margin-right:.35rem; }
.stale { color:var(--bad); font-weight:600; }
button, .button { font:inherit; padding:.35rem .8rem; border-radius:4px; border:1px solid var(--accent); background:var(--accent); color:#fff; cursor:pointer; text-decoration:none; display:inline-block; }
button.danger { background:var(--bad); border-color:var(--bad); }
button.secondary { background:#fff; color:var(--accent); }
form.inline { display:inline; }
.actions { display:flex; flex-wrap:wrap; gap:.5rem; margin:.5rem 0 1rem; }
form.filters { display:flex; flex-wrap:wrap; gap:.5rem 1rem; align-items:end; margin-bottom:1rem; }
form.filters label, form.stack label { display:flex; flex-direction:column; font-size:.85rem; color:var(--muted); }
form.stack { display:flex; flex-direction:column; gap:.75rem; max-width:28rem; }
input, select { font:inherit; padding:.3rem .4rem; border:1px solid var(--line); border-radius:4px; color:var(--fg); }
ol.timeline { list-style:none; padding:0; margin:0; border-left:3px solid var(--line); }
ol.timeline li { padding:.3rem .75rem; position:relative; }
ol.timeline li::before { content:""; position:absolute; left:-7px; top:.75rem; width:11px; height:11px; border-radius:50%; background:var(--line); }
pre.output { background:#10161c; color:#e6edf3; padding:.75rem; border-radius:6px; overflow:auto; max-height:24rem; font-size:.8rem; }
.flash { padding:.5rem .75rem; border-radius:4px; margin-bottom:1rem; background:#e7f0fb; border:1px solid #b6cff0; }
.flash.error { background:#fbeaea; border-color:#f0b6b6; }
svg text { font:12px system-ui, sans-serif; }
.charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(320px, 1fr)); gap:1rem; }
.legend span { margin-right:.75rem; font-size:.8rem; }
.legend i { display:inline-block; width:.7rem; height:.7rem; margin-right:.25rem; border-radius:2px; }
.login { max-width:26rem; margin:3rem auto; }
.node-state { display:inline-block; padding:0 .45rem; border-radius:999px; font-size:.8rem; font-weight:600; color:#fff; white-space:nowrap; }
table.cluster td .num { white-space:nowrap; margin-right:.35rem; }
svg.cpu-bar { vertical-align:middle; border-radius:2px; background:var(--line); }
p.range a { margin-right:.5rem; font-size:.85rem; }
.legend svg.swatch { margin-right:.25rem; vertical-align:middle; }
h3 { font-size:.95rem; margin:1rem 0 .25rem; }
p.cpu-summary { margin:.25rem 0; }
p.range a[aria-current] { font-weight:700; color:var(--fg); text-decoration:none; }
@media (max-width: 640px) {
  main { padding:.6rem; }
  header.top .who { margin-left:0; width:100%; }
  table.responsive thead { display:none; }
  table.responsive tr { display:block; border-bottom:1px solid var(--line); padding:.3rem 0; }
  table.responsive td { display:flex; gap:.5rem; border:0; padding:.15rem .25rem; }
  table.responsive td::before { content:attr(data-label); color:var(--muted); min-width:7rem; }
  dl.facts { grid-template-columns:1fr; }
  dl.facts dt { margin-top:.4rem; }
  /* The charts' text is in their viewBox's units: scaled down to a phone it would be unreadable. */
  .charts svg text { font-size:20px; }
}
`;

export const APP_JS = `
(function () {
  'use strict';
  var fmt = new Intl.DateTimeFormat(undefined, { year:'numeric', month:'2-digit', day:'2-digit', hour:'2-digit', minute:'2-digit', second:'2-digit', timeZoneName:'short' });
  function localTimes(root) {
    root.querySelectorAll('time[datetime]').forEach(function (el) {
      var d = new Date(el.getAttribute('datetime'));
      if (!isNaN(d)) el.textContent = fmt.format(d);
    });
  }
  function confirmForms(root) {
    root.querySelectorAll('form[data-confirm]').forEach(function (form) {
      form.addEventListener('submit', function (e) { if (!window.confirm(form.getAttribute('data-confirm'))) e.preventDefault(); });
    });
  }
  localTimes(document);
  confirmForms(document);
  // Live updates: the server says which requests and runs changed; a page that
  // shows one of them fetches itself again and swaps its <main> (no reload).
  // Pages whose figures change without a job changing (profiles: last poll, budget) also
  // fetch themselves every few seconds.
  var main = document.querySelector('main');
  if (!main || (!main.hasAttribute('data-live') && !main.hasAttribute('data-refresh-every'))) return;
  var refreshing = false, again = false;
  function watched() {
    var ids = {};
    document.querySelectorAll('[data-live-state],[data-watch]').forEach(function (el) {
      ids[el.getAttribute('data-live-state') || el.getAttribute('data-watch')] = true;
    });
    return ids;
  }
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch(location.href, { headers: { 'x-schedflow-fragment': 'main' }, credentials: 'same-origin' })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'text/html');
        var fresh = doc.querySelector('main');
        var active = document.activeElement;
        if (fresh && !(active && main.contains(active) && /INPUT|SELECT|TEXTAREA/.test(active.tagName))) {
          main.innerHTML = fresh.innerHTML;
          localTimes(main);
          confirmForms(main);
        }
      })
      .catch(function () {})
      .then(function () { refreshing = false; if (again) { again = false; refresh(); } });
  }
  var every = Number(main.getAttribute('data-refresh-every'));
  if (every > 0) setInterval(refresh, every * 1000);
  if (!main.hasAttribute('data-live') || !window.EventSource) return;
  var source = new EventSource(main.getAttribute('data-live'));
  // The stream tells only what changes once it is open: a change between this page's render
  // and its stream's open (or while it reconnects) would be shown by no event.
  source.addEventListener('open', refresh);
  source.addEventListener('change', function (e) {
    var data; try { data = JSON.parse(e.data); } catch (_) { return; }
    var ids = watched();
    var all = main.hasAttribute('data-live-all');
    for (var i = 0; i < data.length; i++) {
      var c = data[i];
      if (all || ids[c.id] || (c.run && ids[c.run])) {
        document.querySelectorAll('[data-live-state="' + c.id + '"]').forEach(function (el) {
          if (c.state) { el.textContent = c.state; el.className = 'state state-' + c.state; }
        });
        refresh();
        return;
      }
    }
  });
  // The session or its token ended: reconnecting would only meet the login page.
  source.addEventListener('ended', function () { source.close(); });
})();
`;
