// A native run's page: run/status for its title and source, run/watch for
// its phase and executions, run/logs for its log lines (replayed from the
// start), run/attach for the live output of an active execution, run/force.
import {h, replace} from './dom.js';
import {explain} from './errors.js';
import {followNative, resumable} from './follow.js';
import {runHeader, timelinePanel, logsPanel, attachPanel, resultPanel} from './panels.js';
import {actionBar, nativeActions, nativeReasons} from './actions.js';
import {exportLinks} from './exports.js';
import {traceLink} from './trace.js';
import {ageAndDuration} from './times.js';

// END_RECORD begins an execution's last log record; its outcome follows
// ("succeeded", "failed (CODE: REASON)", "cancelled (…)").
const END_RECORD = 'execution ended: ';
// RECEIPT_RECORD begins a git delivery's receipt record; the receipt
// follows as JSON (capsule.ReceiptRecordPrefix).
const RECEIPT_RECORD = 'delivery receipt: ';
// TICK_MS is how often the page re-renders the run's age and duration.
const TICK_MS = 1000;

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
  const trace = traceLink(runId);
  replace(main, head.el, bar.el, exports.el, trace.el, h('div', {class: 'run-grid'},
    h('section', {class: 'panel graph-panel', 'aria-label': 'Executions'}, h('h2', {}, 'Executions'),
      h('p', {class: 'hint'}, 'The protocol does not carry a native run\'s graph: these are the executions it has run.'), execs),
    h('div', {class: 'side'}, result.el, attach.el), timeline.el, logs.el));

  const select = (execution) => attach.follow(conn, 'run/attach', {runId, execution}, execution);
  const usage = new Map(); // execution -> token usage and cost its agent turns reported
  let last = null;
  // How each execution ended, from its end record in the run's logs (the
  // run's status says only that it is no longer active), and its last
  // other line, which usually says why a failure failed.
  const outcomes = new Map();
  const lastLines = new Map();
  const stateOf = (execution, e) => {
    const o = outcomes.get(execution);
    if (e.state === 'running' || !o) return {state: e.state === 'running' ? 'running' : 'ended', text: e.state};
    const failed = o.startsWith('failed');
    const why = failed && lastLines.has(execution) ? `; last line: ${lastLines.get(execution)}` : '';
    return {state: failed ? 'failed' : o.startsWith('succeeded') ? 'succeeded' : 'ended', text: o + why};
  };
  // renderHead shows the phase, title, source, size, age and duration.
  const renderHead = (run) => {
    const st = run.status;
    const src = run.source ? `${run.source.repository}@${run.source.branch} ${run.source.revision.slice(0, 12)}` : '';
    const t = ageAndDuration(runId, st.phase === 'finished');
    head.set(st.phase === 'finished' ? st.terminalResult.status : st.phase,
      [run.title, src, run.size, `age ${t.age}`, `duration ${t.duration}`].filter(Boolean).join(' · '), t.why);
  };
  const update = (run) => {
    last = run;
    const st = run.status;
    renderHead(run);
    bar.enable(st.phase === 'finished' ? [] : ['force'], nativeReasons(st));
    replace(execs, [...run.executions].map(([execution, e]) => {
      const st = stateOf(execution, e);
      return h('button', {type: 'button', class: 'node leaf', 'data-node': e.node, 'data-state': st.state,
        'aria-label': `execution ${execution} of ${e.node}: ${st.text}`, title: st.text, onclick: () => select(execution)},
      h('span', {class: 'node-name'}, e.node), h('span', {class: 'node-worker'}, execution), h('span', {class: 'node-state'}, st.text),
      usage.has(execution) ? h('span', {class: 'node-usage'}, usageText(usage.get(execution))) : '');
    }));
    if (st.phase === 'finished') result.show(st.terminalResult, null);
  };
  const follower = followNative(conn, runId, {
    onChange(run, added) {
      added.forEach((e) => timeline.add(e));
      update(run);
    },
    onError(err) { head.set('unavailable', explain(err)); },
  }, null, status.atCursor);
  head.set(status.status.phase, status.title);
  let logCursor = null;
  const logStream = resumable(conn, 'run/logs', () => ({runId, fromCursor: logCursor}), () => logCursor, (p) => {
    logCursor = p.cursor;
    logs.add(p.record, p.execution);
    if (!p.execution) return;
    const msg = p.record.message;
    if (msg.startsWith(RECEIPT_RECORD)) {
      try { result.delivered(JSON.parse(msg.slice(RECEIPT_RECORD.length))); } catch { /* not a receipt */ }
    }
    const u = parseUsage(msg);
    if (u) {
      const sum = usage.get(p.execution) || {input: 0, cached: 0, output: 0, reasoning: 0, cost: 0};
      for (const k of Object.keys(sum)) sum[k] += u[k];
      usage.set(p.execution, sum);
      if (last) update(last);
      return;
    }
    if (!msg.startsWith(END_RECORD)) return lastLines.set(p.execution, msg);
    outcomes.set(p.execution, msg.slice(END_RECORD.length));
    const e = follower.run.executions.get(p.execution);
    // An execution ref is <runId>/<node>/<n>.
    const node = e ? e.node : p.execution.split('/').slice(-2, -1)[0];
    timeline.add({cursor: p.cursor, type: 'node_end', text: `${node} ${stateOf(p.execution, {state: 'ended'}).text} (${p.execution})`});
    if (follower.run.status) update(follower.run);
  }, {onError: (err) => logs.add({level: 'info', target: 'page', message: explain(err)})});
  const tick = setInterval(() => { if (last) renderHead(last); }, TICK_MS);
  return {close() {
    clearInterval(tick);
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
