// A run's page (/ui/runs/<runId>): a cluster run's graph coloured live from
// its watch stream, or a native run's executions from run/watch; the event
// timeline, logs, the live output of an execution and the terminal result,
// with the actions the run admits.
import {h, replace, compact} from './dom.js';
import {explain} from './errors.js';
import {followCluster} from './follow.js';
import {phaseLabel, running, setTerminal, executionRef} from './fold.js';
import {drawGraph, paint} from './graph.js';
import {runHeader, timelinePanel, logsPanel, attachPanel, resultPanel} from './panels.js';
import {actionBar, clusterActions, clusterEnabled} from './actions.js';
import {nativePage} from './native.js';

export function runPage(conn, main, runId) {
  replace(main, h('p', {class: 'page-message', role: 'status'}, `Loading ${runId}…`));
  let page = null;
  let closed = false;
  conn.ready().then(async () => {
    const status = await nativeStatus(conn, runId);
    if (closed) return;
    page = status ? nativePage(conn, main, runId, status) : clusterPage(conn, main, runId);
  });
  return {close() {
    closed = true;
    page?.close();
  }};
}

// nativeStatus is the run/status of runId, or null when it is no native run
// (or the server serves none).
async function nativeStatus(conn, runId) {
  try {
    return await conn.call('run/status', {runId});
  } catch {
    return null;
  }
}

function clusterPage(conn, main, runId) {
  const head = runHeader('Cluster', runId);
  const bar = actionBar();
  clusterActions(bar, conn, runId);
  const graphBox = h('section', {class: 'panel graph-panel', 'aria-label': 'Graph'}, h('h2', {}, 'Graph'), h('p', {class: 'hint'}, 'Waiting for the run\'s admission…'));
  const timeline = timelinePanel();
  const logs = logsPanel('Log records of this cluster since this page opened; worker lines carry their execution as target.');
  const attach = attachPanel();
  const result = resultPanel();
  replace(main, head.el, bar.el, h('div', {class: 'run-grid'}, graphBox, h('div', {class: 'side'}, result.el, attach.el), timeline.el, logs.el));

  let graph = null;
  let attached = null;
  let current = false;
  const follower = followCluster(conn, runId, {
    onChange(run, entries) {
      if (!graph && run.spec) {
        graph = drawGraph(run.spec, (name) => select(name));
        replace(graphBox, h('h2', {}, 'Graph'), graph);
      }
      entries.forEach((e) => timeline.add(e));
      if (run.finished && !run.terminal) fetchTerminal(run);
      update(run);
    },
    onError(err) { head.set('unavailable', explain(err)); },
  });
  const update = (run) => {
    if (graph) paint(graph, run.nodes);
    const op = run.status?.operational;
    head.set(phaseLabel(run), [`generation ${run.status?.observedGeneration ?? '—'}`,
      op && `dispatch ${op.dispatchState.replace('_', ' ')}`, `${running(run).length} running`,
      run.seed !== undefined && `input ${compact(run.seed, 120)}`].filter(Boolean).join(' · '));
    bar.enable(clusterEnabled(run, current));
    if (run.finished) result.show(run.terminal, run.stopMode);
  };
  const fetchTerminal = async (run) => {
    const got = await conn.call('get', {}).catch(() => null);
    if (got?.status.currentRunId === runId && got.terminalResult) {
      setTerminal(run, got.terminalResult);
      update(run);
    }
  };
  const select = async (name) => {
    attached?.close();
    attached = null;
    const n = follower.run.nodes.get(name);
    logs.filter.value = `${runId}/${name}/`;
    logs.filter.dispatchEvent(new Event('input'));
    if (!n || n.state !== 'running') return attach.say(`${name} is ${n ? n.state : 'pending'}: its output is live only while it runs. Its log lines are filtered below.`);
    const ref = await executionRef(runId, name, n.begins);
    const sink = attach.open(ref);
    attached = conn.stream({method: 'agent/attach', params: () => ({execution: ref}),
      onEvent: (p) => sink.event(p.event), onEstablished: sink.established, onError: sink.error, onClosed: sink.closed});
  };
  const logStream = conn.stream({method: 'logs', params: () => ({}), onEvent: (p) => logs.add(p.record),
    onError: (err) => logs.add({level: 'info', target: 'page', message: explain(err)})});
  // Actions apply to the cluster's current run only.
  const checkCurrent = async () => {
    const got = await conn.call('get', {}).catch(() => null);
    current = got?.status.currentRunId === runId;
    update(follower.run);
  };
  conn.ready().then(checkCurrent);
  const onState = (e) => { if (e.detail === 'open') checkCurrent(); };
  conn.addEventListener('state', onState);
  const timer = setInterval(checkCurrent, 3000);
  return {close() {
    clearInterval(timer);
    conn.removeEventListener('state', onState);
    follower.close();
    logStream.close();
    attached?.close();
  }};
}
