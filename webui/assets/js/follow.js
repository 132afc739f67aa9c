// Followers keep a run's model up to date from its watch stream, across
// reconnects: a cluster run from watch, a native run from run/watch. Each
// resumes strictly after the last cursor it folded and drops repeats.
import {newRun, apply} from './fold.js';
import {note} from './times.js';

// resumable opens a watch-like stream (watch, run/watch) that resumes from
// cursor() after a drop. onEvent(params, live) gets each event; live is
// false while the stream replays history up to the tail it was opened at.
export function resumable(conn, method, params, cursor, onEvent, {onEstablished, onError, onClosed}) {
  let tail = null;
  let live = false;
  return conn.stream({
    method, params, onError, onClosed,
    onEstablished(res) {
      onEstablished?.(res);
      tail = res.atCursor;
      live = tail === null || tail === cursor();
    },
    onEvent(p) {
      onEvent(p, live);
      if (p.cursor === tail) live = true;
    },
  });
}

// followCluster follows runId (or, when null, the cluster's current run,
// parked until there is one). onChange(run, entries) is called after each
// new event with the timeline entries it added.
export function followCluster(conn, runId, {onChange, onError}) {
  const run = newRun(runId);
  const params = () => (run.runId ? {runId: run.runId, fromCursor: run.cursor} : {});
  const stream = resumable(conn, 'watch', params, () => run.cursor, (p, live) => {
    if (!run.runId) run.runId = p.runId;
    const fresh = apply(run, p.cursor, p.event);
    const t = p.event.type;
    note(run.runId, {live, started: t === 'phase' && !!p.event.admission, ended: t === 'finished'});
    if (fresh) onChange(run, run.timeline.slice(-1));
  }, {onEstablished: (res) => { if (res.runId) run.runId = res.runId; }, onError});
  return {run, close: () => stream.close()};
}

// newNative is the model of a native run: its RunStatusResult fields, and
// the executions seen active (execution → {node, state: running|ended}).
export function newNative(runId) {
  return {runId, title: '', source: null, size: '', status: null, cursor: null, seen: new Set(),
    executions: new Map(), timeline: []};
}

// foldNative folds one RunStatusResult-shaped record (a run/status result
// or a run/watch event); it returns the timeline entries it adds.
export function foldNative(run, rec) {
  if (rec.cursor !== undefined) {
    if (run.seen.has(rec.cursor)) return [];
    run.seen.add(rec.cursor);
    run.cursor = rec.cursor;
  }
  Object.assign(run, {title: rec.title, source: rec.source, size: rec.size});
  const added = [];
  const at = rec.cursor || rec.atCursor || '';
  const say = (type, text) => added.push({cursor: at, type, text});
  if (run.status?.phase !== rec.status.phase) say('phase', `run ${rec.status.phase}`);
  const active = new Map((rec.status.activeExecutions || []).map((a) => [a.execution, a.node]));
  for (const [execution, node] of active) {
    if (run.executions.get(execution)?.state === 'running') continue;
    run.executions.set(execution, {node, state: 'running'});
    say('node_begin', `${node} started (${execution})`);
  }
  for (const [execution, e] of run.executions) {
    if (e.state !== 'running' || active.has(execution)) continue;
    e.state = 'ended';
    say('node_end', `${e.node} ended (${execution})`);
  }
  run.status = rec.status;
  run.timeline.push(...added);
  return added;
}

// followNative follows a native run from its first record, or after from
// (a RunStatusResult already read) when given.
export function followNative(conn, runId, {onChange, onError, onClosed}, from = null) {
  const run = newNative(runId);
  if (from) {
    foldNative(run, from);
    run.cursor = from.atCursor;
  }
  const params = () => ({runId, fromCursor: run.cursor});
  const stream = resumable(conn, 'run/watch', params, () => run.cursor, (p, live) => {
    const added = foldNative(run, p);
    note(runId, {live, started: added.some((e) => e.text === 'run admitted'), ended: p.status.phase === 'finished'});
    if (added.length) onChange(run, added);
  }, {onError, onClosed});
  return {run, close: () => stream.close()};
}
