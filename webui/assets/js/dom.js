// Small DOM helpers shared by every page.

// h builds an element: h('button', {class: 'x', 'aria-label': 'Stop', onclick: fn}, 'Stop').
// Attributes starting with "on" are event listeners; children may be
// strings, nodes, arrays or null.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// runPath is the stable address of a run's page.
export function runPath(runId) {
  return '/ui/runs/' + encodeURIComponent(runId);
}

// navigate moves to an app path without reloading the page.
export function navigate(path) {
  history.pushState(null, '', path);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

// link is an in-app anchor that navigates without a reload.
export function link(path, text, attrs = {}) {
  return h('a', {...attrs, href: path, onclick: (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(path);
  }}, text);
}

// duration renders milliseconds as "4 s", "3 min 5 s", "2 h 1 min".
export function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return '—';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

// randomKey is a fresh idempotency key (crypto.getRandomValues works on
// plain-HTTP origins too, unlike crypto.randomUUID).
export function randomKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return 'ui-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// compact renders a JSON value on one line, cut to max characters.
export function compact(v, max = 200) {
  const s = v === undefined ? '' : JSON.stringify(v);
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}
