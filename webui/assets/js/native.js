// A native run's page: run/status for its title and source, run/watch for
// its phase and executions, run/logs for its log lines (replayed from the
// start), run/attach for the live output of an active execution, run/force.
import {h, replace} from './dom.js';
import {explain} from './errors.js';
import {followNative, resumable} from './follow.js';
import {runHeader, timelinePanel, logsPanel, attachPanel, resultPanel} from './panels.js';
import {actionBar, nativeActions} from './actions.js';
import {exportLinks} from './exports.js';

export function nativePage(conn, main, runId, status) {
  const head = runHeader('Native', runId);
  const bar = actionBar();
  nativeActions(bar, conn, runId);
  const execs = h('div', {class: 'executions', role: 'group', 'aria-label': 'Executions'});
  const timeline = timelinePanel();
  const logs = logsPanel('Log lines of this run, from its start.');
  const attach = attachPanel();
  const result = resultPanel();
  const exports = exportLinks(runId);
  replace(main, head.el, bar.el, exports.el, h('div', {class: 'run-grid'},
    h('section', {class: 'panel graph-panel', 'aria-label': 'Executions'}, h('h2', {}, 'Executions'),
      h('p', {class: 'hint'}, 'The protocol does not carry a native run\'s graph: these are the executions it has run.'), execs),
    h('div', {class: 'side'}, result.el, attach.el), timeline.el, logs.el));

  const select = (execution) => attach.follow(conn, 'run/attach', {runId, execution}, execution);
  const usage = new Map(); // execution -> token usage and cost its agent turns reported
  let last = null;
  const update = (run) => {
    last = run;
    const st = run.status;
    const src = run.source ? `${run.source.repository}@${run.source.branch} ${run.source.revision.slice(0, 12)}` : '';
    head.set(st.phase === 'finished' ? st.terminalResult.status : st.phase, [run.title, src, run.size].filter(Boolean).join(' · '));
    bar.enable(st.phase === 'finished' ? [] : ['force']);
    replace(execs, [...run.executions].map(([execution, e]) => h('button', {type: 'button', class: 'node leaf',
      'data-node': e.node, 'data-state': e.state === 'running' ? 'running' : 'ended',
      'aria-label': `execution ${execution} of ${e.node}: ${e.state}`, onclick: () => select(execution)},
    h('span', {class: 'node-name'}, e.node), h('span', {class: 'node-worker'}, execution), h('span', {class: 'node-state'}, e.state),
    usage.has(execution) ? h('span', {class: 'node-usage'}, usageText(usage.get(execution))) : '')));
    if (st.phase === 'finished') result.show(st.terminalResult, null);
  };
  const follower = followNative(conn, runId, {
    onChange(run, added) {
      added.forEach((e) => timeline.add(e));
      update(run);
    },
    onError(err) { head.set('unavailable', explain(err)); },
  });
  head.set(status.status.phase, status.title);
  let logCursor = null;
  const logStream = resumable(conn, 'run/logs', () => ({runId, fromCursor: logCursor}), () => logCursor, (p) => {
    logCursor = p.cursor;
    logs.add(p.record, p.execution);
    const u = parseUsage(p.record.message);
    if (u && p.execution) {
      const sum = usage.get(p.execution) || {input: 0, cached: 0, output: 0, reasoning: 0, cost: 0};
      for (const k of Object.keys(sum)) sum[k] += u[k];
      usage.set(p.execution, sum);
      if (last) update(last);
    }
  }, {onError: (err) => logs.add({level: 'info', target: 'page', message: explain(err)})});
  return {close() {
    follower.close();
    logStream.close();
    attach.close();
  }};
}

// parseUsage reads the "usage: …" line an agent turn ends with.
function parseUsage(message) {
  const m = /^usage: input (\d+) tokens \((\d+) cached\), output (\d+) \((\d+) reasoning\)(?:, cost ([\d.]+) USD)?$/.exec(message || '');
  return m && {input: +m[1], cached: +m[2], output: +m[3], reasoning: +m[4], cost: m[5] ? +m[5] : 0};
}

function usageText(u) {
  const cost = u.cost > 0 ? ` · $${u.cost.toFixed(4)}` : '';
  return `${u.input} in (${u.cached} cached) · ${u.output} out${cost}`;
}
