//! The page's style sheet and its one script, served from `/static/` (the CSP allows no inline
//! style or script).

/// Plain CSS: a calm, dense layout for daily use.
pub(crate) const CSS: &str = r#":root {
  --bg: #f5f6f8; --card: #fff; --ink: #1d2330; --muted: #667085; --line: #e4e7ec;
  --accent: #2f5bea; --accent-ink: #fff; --ok: #127a48; --ok-bg: #e6f4ed; --bad: #b42318; --bad-bg: #fdecea;
  --warn-bg: #fff6e0; --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
code, pre { font-family: var(--mono); font-size: 12.5px; }
pre { white-space: pre-wrap; word-break: break-all; margin: 6px 0; }
header.top { position: sticky; top: 0; z-index: 2; display: flex; align-items: center; gap: 24px;
  padding: 10px 28px; background: #111827; color: #e5e7eb; }
header.top nav { display: flex; gap: 18px; flex: 1; }
header.top nav a { color: #cbd5e1; text-decoration: none; font-weight: 500; }
header.top nav a:hover { color: #fff; }
.brand { font-weight: 650; letter-spacing: .2px; display: flex; align-items: center; gap: 8px; }
.logo { display: inline-grid; place-items: center; width: 26px; height: 26px; border-radius: 7px;
  background: var(--accent); color: #fff; font: 700 12px var(--mono); }
.who { margin-right: 10px; color: #cbd5e1; }
main { max-width: 1280px; margin: 0 auto; padding: 22px 28px 60px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 18px 20px;
  margin-bottom: 20px; box-shadow: 0 1px 2px rgba(16,24,40,.04); }
.card h2 { margin: 0 0 14px; font-size: 16px; display: flex; align-items: center; gap: 10px; }
.narrow { max-width: 400px; margin: 12vh auto; }
.narrow h1 { font-size: 18px; display: flex; gap: 10px; align-items: center; margin: 0 0 18px; }
.badge { display: inline-block; min-width: 20px; padding: 0 6px; border-radius: 10px; background: #374151;
  color: #fff; font-size: 12px; text-align: center; }
.badge.hot { background: #e11d48; }
.live { font-size: 11px; font-weight: 500; color: var(--ok); background: var(--ok-bg); border-radius: 10px; padding: 1px 8px; }
.live.off { color: var(--muted); background: var(--bg); }
.button { display: inline-block; border: 1px solid var(--line); background: #fff; color: var(--ink);
  border-radius: 7px; padding: 6px 12px; font: inherit; font-weight: 500; cursor: pointer; text-decoration: none; }
.button:hover { border-color: #c7ccd6; }
.button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-ink); }
.button.danger { color: var(--bad); border-color: #f3c7c2; }
.button.ghost { background: transparent; }
header .button.ghost { color: #e5e7eb; border-color: #374151; }
.button.small { padding: 3px 9px; font-size: 12.5px; }
.button.wide { display: block; text-align: center; padding: 9px; }
form.inline { display: flex; align-items: center; margin: 0; }
form.row, form.filters { display: flex; flex-wrap: wrap; gap: 10px 14px; align-items: flex-end; margin-bottom: 14px; }
form.filters label { flex: 1 1 140px; }
form.filters .actions { display: flex; gap: 8px; flex-basis: 100%; }
form.stack { display: grid; gap: 12px; }
label { display: grid; gap: 4px; font-size: 12px; color: var(--muted); font-weight: 500; }
label.check { display: flex; align-items: center; gap: 6px; padding-bottom: 7px; }
input { font: inherit; color: var(--ink); padding: 6px 9px; border: 1px solid var(--line); border-radius: 7px; background: #fff; min-width: 0; }
input:focus { outline: 2px solid #c7d4fb; border-color: var(--accent); }
table.grid { width: 100%; border-collapse: collapse; }
table.grid th { text-align: left; font-size: 12px; color: var(--muted); font-weight: 600; padding: 7px 8px;
  border-bottom: 1px solid var(--line); background: #fafbfc; position: sticky; top: 0; }
table.grid td { padding: 7px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
table.grid tr:hover td { background: #fafbff; }
table.grid form { margin: 0; }
.scroll { max-height: 560px; overflow: auto; border: 1px solid var(--line); border-radius: 8px; }
.params code { color: #344054; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.nowrap { white-space: nowrap; }
.pill { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; background: var(--bg); color: var(--muted); }
.pill.ok, .pill.active { background: var(--ok-bg); color: var(--ok); }
.pill.bad, .pill.revoked, .pill.disabled { background: var(--bad-bg); color: var(--bad); }
.pill.expired { background: var(--warn-bg); color: #93600a; }
.pill.pending { background: var(--warn-bg); color: #93600a; }
.pill.approved { background: var(--ok-bg); color: var(--ok); }
.pill.rejected { background: var(--bad-bg); color: var(--bad); }
form.row label.grow { flex: 1 1 280px; }
form.row label.grow input { width: 100%; }
td form.decide { display: inline-flex; margin-right: 4px; }
.notice { padding: 10px 14px; border-radius: 8px; margin: 0 0 16px; }
.notice.ok { background: var(--ok-bg); color: var(--ok); }
.notice.error { background: var(--bad-bg); color: var(--bad); }
.key-once { border-color: #f0c36d; background: var(--warn-bg); }
.secret { background: #fff; border: 1px dashed #e0b44c; padding: 10px; border-radius: 6px; user-select: all; }
ul.inbox { list-style: none; margin: 0; padding: 0; display: grid; gap: 10px; }
li.pending { display: flex; gap: 16px; justify-content: space-between; align-items: flex-start;
  border: 1px solid var(--line); border-left: 4px solid #f59e0b; border-radius: 8px; padding: 12px 14px; }
li.pending .ask { min-width: 0; flex: 1; }
.what { background: #f8fafc; border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
.decide { display: flex; gap: 6px; flex-shrink: 0; }
.tool { background: #eef2ff; color: #3730a3; padding: 1px 6px; border-radius: 5px; }
.muted { color: var(--muted); }
.small { font-size: 12px; }
.empty { color: var(--muted); margin: 4px 0; }
.or { text-align: center; color: var(--muted); font-size: 12px; margin: 18px 0 12px; border-top: 1px solid var(--line); }
.or span { position: relative; top: -9px; background: #fff; padding: 0 8px; }
details summary { cursor: pointer; color: var(--muted); font-size: 12px; }
"#;

/// Live updates: the server's event stream says how many calls wait (admins) and a
/// fingerprint of the access requests the page lists; when either changes, that part is fetched
/// again (server-rendered, escaped HTML): the inbox from `/inbox`, the requests from `/requests`.
pub(crate) const JS: &str = r#""use strict";
(function () {
  var inbox = document.getElementById("inbox-body");
  var requests = document.getElementById("access-body");
  var count = document.getElementById("pending-count");
  var lights = [document.getElementById("live"), document.getElementById("requests-live")].filter(Boolean);
  if ((!inbox && !requests) || !window.EventSource) { return; }
  var last = null;
  function light(on) {
    lights.forEach(function (l) { l.classList.toggle("off", !on); l.textContent = on ? "live" : "reconnecting"; });
  }
  function load(path, into) {
    fetch(path, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { into.innerHTML = html; })
      .catch(function () { light(false); });
  }
  var events = new EventSource("/events");
  events.onopen = function () { light(true); };
  events.onerror = function () { light(false); };
  events.onmessage = function (e) {
    var now = JSON.parse(e.data);
    if (count) {
      count.textContent = String(now.pending);
      count.classList.toggle("hot", now.pending > 0);
    }
    if (last !== null) {
      // An event comes only when something changed: the waiting calls, or the requests.
      if (inbox) { load("/inbox", inbox); }
      if (requests && now.requests !== last.requests) { load("/requests", requests); }
    }
    last = now;
  };
})();
"#;
