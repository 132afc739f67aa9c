// Followers keep a run's model up to date from its watch stream, across
// reconnects: a cluster run from watch, a native run from run/watch. Each
// resumes strictly after the last cursor it folded and drops repeats.
import {newRun, apply} from './fold.js';
import {note} from './times.js';

// seq is the sequence of a native run's cursor ("v2:N"), or null for
// another cursor.
function seq(cursor) {
  const m = /^v2:(\d+)$/.exec(cursor || '');
  return m ? Number(m[1]) : null;
}

// reached reports whether cursor is at or past tail. A native run's watch
// and logs share one sequence of cursors, so the tail a run/watch opens
// at may be a log record's, which the watch never sends: its events are
// compared by sequence.
function reached(cursor, tail) {
  const c = seq(cursor);
  const t = seq(tail);
  return c !== null && t !== null ? c >= t : cursor === tail;
}

// resumable opens a watch-like stream (watch, run/watch, run/logs) that
// resumes from cursor() after a drop. onEvent(params, live) gets each
// event; live is false while the stream replays history up to its tail.
// A cluster's watch answers its tail as atCursor; a native run's streams
// answer the cursor they start after, so their tail is given as
// historyEnd (run/status's atCursor when the page opened), and since a
// native run's watch and logs share one sequence, an event past it is
// live even when the tail itself is a record this stream never sends.
export function resumable(conn, method, params, cursor, onEvent, {onEstablished, onError, onClosed, historyEnd}) {
  let tail = historyEnd ?? null;
  let live = false;
  return conn.stream({
    method, params, onError, onClosed,
    onEstablished(res) {
      onEstablished?.(res);
      if (historyEnd === undefined) {
        tail = res.atCursor;
        live = tail === null || reached(cursor(), tail);
      } else {
        live = live || tail === null || reached(cursor(), tail);
      }
    },
    onEvent(p) {
      if (!live && historyEnd !== undefined && seq(p.cursor) !== null && seq(p.cursor) > seq(tail)) live = true;
      onEvent(p, live);
      if (reached(p.cursor, tail)) live = true;
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
// (a RunStatusResult already read) when given; historyEnd is the run's
// cursor when the page read its status (events after it are live), by
// default from's.
export function followNative(conn, runId, {onChange, onError, onClosed}, from = null, historyEnd = from?.atCursor) {
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
  }, {onError, onClosed, historyEnd: historyEnd ?? null});
  return {run, close: () => stream.close()};
}
