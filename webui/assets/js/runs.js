// The runs page: every run this identity can see — the cluster's current
// run (get, then watch) and the native runs (run/list, then run/watch for
// each unfinished one) — kept live.
import {h, replace, link, runPath} from './dom.js';
import {explain} from './errors.js';
import {followCluster, followNative} from './follow.js';
import {phaseLabel, running, setTerminal} from './fold.js';
import {ageAndDuration, note} from './times.js';

// REFRESH_MS is how often the page re-reads get and run/list (to see a new
// cluster run or new native runs) and re-renders ages.
const REFRESH_MS = 3000;

export function runsPage(conn, main) {
  const body = h('tbody');
  const message = h('p', {class: 'page-message', role: 'status'});
  replace(main, h('h1', {}, 'Runs'), message,
    h('table', {class: 'runs', 'aria-label': 'Runs'},
      h('thead', {}, h('tr', {}, ...['Run', 'Kind', 'Title', 'Phase', 'Age', 'Duration', 'Active executions'].map((c) => h('th', {scope: 'col'}, c)))),
      body));
  const rows = new Map(); // runId → {view(), follower}
  let cluster = null;
  let nativeServed = true;
  const render = () => {
    const entries = [...rows.values()].map((r) => r.view());
    replace(body, entries.length ? entries.map(row) : h('tr', {}, h('td', {colspan: 7, class: 'empty'}, 'No runs yet.')));
  };
  const followCurrent = () => {
    cluster?.close();
    cluster = followCluster(conn, null, {onChange: (run, entries) => {
      rows.set(run.runId, {view: () => clusterView(run), follower: cluster});
      render();
      // get carries the terminal result once the run has finished.
      if (entries.some((e) => e.type === 'finished')) refresh();
    }, onError: (err) => { message.textContent = explain(err); }});
  };
  const refresh = async () => {
    try {
      const got = await conn.call('get', {});
      const id = got.status.currentRunId;
      if (!cluster || (id && cluster.run.runId && cluster.run.runId !== id)) followCurrent();
      else if (got.terminalResult && cluster.run.runId === id && !cluster.run.terminal) setTerminal(cluster.run, got.terminalResult);
      if (nativeServed) nativeServed = await listNative(conn, rows, render);
      message.textContent = '';
    } catch (err) {
      message.textContent = explain(err);
    }
    render();
  };
  const timer = setInterval(refresh, REFRESH_MS);
  conn.ready().then(refresh);
  return {close() {
    clearInterval(timer);
    for (const r of rows.values()) r.follower?.close();
    cluster?.close();
  }};
}

// listNative adds rows for native runs not yet shown; it returns false when
// the server does not serve them.
async function listNative(conn, rows, render) {
  let list;
  try {
    list = await conn.call('run/list', {});
  } catch (err) {
    if (err.data?.code === 'INVALID_PHASE') return false;
    throw err;
  }
  for (const item of list.runs) {
    if (rows.has(item.runId)) continue;
    note(item.runId);
    const entry = {view: null, follower: null};
    const onChange = () => render();
    if (item.status.phase === 'finished') {
      entry.view = () => nativeView(item);
    } else {
      entry.follower = followNative(conn, item.runId, {onChange, onError: () => {}}, item);
      entry.view = () => nativeView(entry.follower.run);
    }
    rows.set(item.runId, entry);
  }
  return true;
}

function clusterView(run) {
  const g = run.status?.observedGeneration;
  return {runId: run.runId, kind: 'cluster', title: g ? `generation ${g}` : '', phase: phaseLabel(run),
    finished: run.finished, active: running(run).map((n) => n.name)};
}

function nativeView(r) {
  const st = r.status;
  const phase = st.phase === 'finished' ? st.terminalResult.status : st.phase;
  return {runId: r.runId, kind: 'native', title: r.title, phase, finished: st.phase === 'finished',
    active: (st.activeExecutions || []).map((a) => a.node)};
}

function row(v) {
  const t = ageAndDuration(v.runId, v.finished);
  return h('tr', {'data-run': v.runId, 'data-phase': v.phase},
    h('th', {scope: 'row'}, link(runPath(v.runId), v.runId, {'aria-label': `Open run ${v.runId}`})),
    h('td', {}, v.kind), h('td', {}, v.title),
    h('td', {}, h('span', {class: 'phase', 'data-phase': v.phase}, v.phase)),
    h('td', {class: 'age', title: t.why || null}, t.age), h('td', {class: 'duration', title: t.why || null}, t.duration),
    h('td', {class: 'active'}, v.active.length ? v.active.join(', ') : '—'));
}
