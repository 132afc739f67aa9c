// A run's page (/ui/runs/<runId>): a cluster run's graph coloured live from
// its watch stream, or a native run's executions from run/watch; the event
// timeline, logs, the live output of an execution and the terminal result,
// with the actions the run admits.
import {h, replace, compact} from './dom.js';
import {explain} from './errors.js';
import {RpcError} from './rpc.js';
import {followCluster} from './follow.js';
import {phaseLabel, running, setTerminal, executionRef} from './fold.js';
import {drawGraph, paint} from './graph.js';
import {runHeader, timelinePanel, logsPanel, attachPanel, resultPanel} from './panels.js';
import {actionBar, clusterActions, clusterEnabled, clusterReasons} from './actions.js';
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
  let current = false;
  let failure = null;
  const update = (run) => {
    if (failure) return head.set('unavailable', failure);
    if (graph) paint(graph, run.nodes);
    const op = run.status?.operational;
    head.set(phaseLabel(run), [`generation ${run.status?.observedGeneration ?? '—'}`,
      op && `dispatch ${op.dispatchState.replace('_', ' ')}`, `${running(run).length} running`,
      run.seed !== undefined && `input ${compact(run.seed, 120)}`].filter(Boolean).join(' · '));
    bar.enable(clusterEnabled(run, current), clusterReasons(run, current));
    if (run.finished) result.show(run.terminal, run.stopMode);
  };
  const select = (name) => selectNode(conn, follower.run, name, attach, logs);
  const follower = followCluster(conn, runId, {
    onChange(run, entries) {
      if (!graph && run.spec) {
        graph = drawGraph(run.spec, select);
        replace(graphBox, h('h2', {}, 'Graph'), graph);
      }
      entries.forEach((e) => timeline.add(e));
      if (entries.some((e) => e.type === 'finished')) poller.now();
      update(run);
    },
    onError(err) {
      if (err instanceof RpcError && err.data?.code === 'NOT_FOUND') {
        close();
        return notFoundPage(main, runId, err);
      }
      failure = explain(err);
      update(follower.run);
    },
  });
  // Actions apply to the cluster's current run only; get carries the
  // terminal result once it has finished.
  const poller = pollGet(conn, (got) => {
    current = got.status.currentRunId === runId;
    if (current && got.terminalResult && !follower.run.terminal) setTerminal(follower.run, got.terminalResult);
    update(follower.run);
  });
  const logStream = conn.stream({method: 'logs', params: () => ({}), onEvent: (p) => logs.add(p.record),
    onError: (err) => logs.add({level: 'info', target: 'page', message: explain(err)})});
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    poller.close();
    follower.close();
    logStream.close();
    attach.close();
  };
  return {close};
}

// notFoundPage replaces a run's page by the one thing there is to say about
// a run the server does not know (or does not show this identity): no
// graph waiting for an admission, no result waiting for an end.
function notFoundPage(main, runId, err) {
  const head = runHeader('Unknown', runId);
  head.set('not found', explain(err));
  replace(main, head.el, h('p', {class: 'page-message', role: 'status'},
    `There is no run ${runId} on this server. `, h('a', {href: '/ui/'}, 'See the runs.')));
}

// selectNode follows the live output of a node's running execution, and
// filters the logs to that node's executions.
async function selectNode(conn, run, name, attach, logs) {
  const n = run.nodes.get(name);
  logs.filter.value = `${run.runId}/${name}/`;
  logs.filter.dispatchEvent(new Event('input'));
  if (!n || n.state !== 'running') {
    return attach.say(`${name} is ${n ? n.state : 'pending'}: its output is live only while it runs. Its log lines are filtered below.`);
  }
  const ref = await executionRef(run.runId, name, n.begins);
  attach.follow(conn, 'agent/attach', {execution: ref}, ref);
}

// POLL_MS is how often a run's page re-reads get.
const POLL_MS = 3000;

// pollGet calls onGet with get's result now, every POLL_MS, after each
// reconnect and when asked (now()).
function pollGet(conn, onGet) {
  const now = () => conn.call('get', {}).then(onGet, () => {});
  const onState = (e) => { if (e.detail === 'open') now(); };
  conn.addEventListener('state', onState);
  conn.ready().then(now);
  const timer = setInterval(now, POLL_MS);
  return {now, close() {
    clearInterval(timer);
    conn.removeEventListener('state', onState);
  }};
}
