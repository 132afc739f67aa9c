// When runs started and ended. The protocol carries no timestamps, so a
// run's start is read from its id when the id is a UUIDv7 (as `oecp run
// submit` makes them: its leading 48 bits are the time it was made, and
// `oecp run list` reads its age the same way); otherwise it is exact only
// when this tab saw the run's admission live, and else the time the tab
// first saw the run (shown with "≥"). A run's end is known only when this
// tab saw it finish live: a run that finished unseen has no duration to
// show, and says why. Kept in sessionStorage so that moving between pages
// keeps it.
import {duration} from './dom.js';

const KEY = 'oecp.runTimes';
const MAX_RUNS = 500;
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// UNSEEN_END says why a finished run shows no duration.
export const UNSEEN_END = 'The run finished before this page saw it, and the protocol records no end time.';

function load() {
  try { return JSON.parse(sessionStorage.getItem(KEY)) || {}; } catch { return {}; }
}

function save(all) {
  const ids = Object.keys(all);
  for (const id of ids.slice(0, Math.max(0, ids.length - MAX_RUNS))) delete all[id];
  sessionStorage.setItem(KEY, JSON.stringify(all));
}

// idTime is the time (ms since the epoch) a UUIDv7 run id was made, or
// null for any other id.
export function idTime(runId) {
  if (!UUID_V7.test(runId)) return null;
  return parseInt(runId.slice(0, 8) + runId.slice(9, 13), 16);
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
// unfinished; once finished, to the end this tab saw, else unknown):
// {age, duration, why}, why saying what a "—" or "≥" means.
export function ageAndDuration(runId, finished) {
  const t = load()[runId];
  const fromId = idTime(runId);
  if (!t && fromId === null) return {age: '—', duration: '—', why: 'This page has not seen the run start, and its id carries no time.'};
  const now = Date.now();
  const start = fromId ?? t.start;
  const pre = fromId !== null || t.exact ? '' : '≥ ';
  const why = pre ? 'At least: this page did not see the run start, and its id carries no time.' : '';
  let d = '—';
  if (!finished) d = pre + duration(now - start);
  else if (t && t.end !== null) d = pre + duration(t.end - start);
  else return {age: pre + duration(now - start), duration: d, why: UNSEEN_END};
  return {age: pre + duration(now - start), duration: d, why};
}
