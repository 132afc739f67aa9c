// When runs started and ended, as far as this tab has seen: the protocol
// carries no timestamps, so a run's start is exact only when this tab saw
// its admission live, and otherwise the time it first saw the run (shown
// with "≥"). Kept in sessionStorage so that moving between pages keeps it.
import {duration} from './dom.js';

const KEY = 'oecp.runTimes';
const MAX_RUNS = 500;

function load() {
  try { return JSON.parse(sessionStorage.getItem(KEY)) || {}; } catch { return {}; }
}

function save(all) {
  const ids = Object.keys(all);
  for (const id of ids.slice(0, Math.max(0, ids.length - MAX_RUNS))) delete all[id];
  sessionStorage.setItem(KEY, JSON.stringify(all));
}

// note records what was just seen of a run: live says the event happened
// now (not a replay); started/ended say it was the run's admission/finish.
export function note(runId, {live = false, started = false, ended = false} = {}) {
  const all = load();
  const now = Date.now();
  const t = all[runId] || {start: now, exact: false, end: null};
  if (started && live && !t.exact) Object.assign(t, {start: now, exact: true});
  if (ended && live && t.end === null) t.end = now;
  all[runId] = t;
  save(all);
}

// ageAndDuration renders a run's age and its duration (to now while it is
// unfinished; unknown when it finished unseen).
export function ageAndDuration(runId, finished) {
  const t = load()[runId];
  if (!t) return {age: '—', duration: '—'};
  const now = Date.now();
  const pre = t.exact ? '' : '≥ ';
  let d = '—';
  if (!finished) d = pre + duration(now - t.start);
  else if (t.end !== null) d = pre + duration(t.end - t.start);
  return {age: pre + duration(now - t.start), duration: d};
}
