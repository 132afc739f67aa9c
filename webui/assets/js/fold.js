// The state of one cluster run, folded from its watch events. Node states:
// pending (not begun), running (begun, not ended), succeeded, failed (its
// last execution failed), held (that failure holds the run until retry or
// stop), voided (a par/map loser cut off, or cut off by a force stop).
// Terminal nodes (succeed, fail) take the state of the result they gave.

export function newRun(runId) {
  return {
    runId, spec: null, seed: undefined, status: null, finished: false, stopMode: null,
    terminal: null, nodes: new Map(), held: null, lastFailed: null, cursor: null,
    seen: new Set(), timeline: [],
  };
}

// node returns the record of a node, creating it pending.
export function node(run, name) {
  let n = run.nodes.get(name);
  if (!n) {
    n = {name, state: 'pending', attempt: 0, begins: 0, outcome: null};
    run.nodes.set(name, n);
  }
  return n;
}

// running lists the nodes with an execution in flight.
export function running(run) {
  return [...run.nodes.values()].filter((n) => n.state === 'running');
}

// phaseLabel is the one-word state of the run shown in lists and headers.
export function phaseLabel(run) {
  if (run.finished) {
    if (run.terminal) return run.terminal.status;
    return run.stopMode ? 'stopped' : 'finished';
  }
  const ds = run.status?.operational?.dispatchState;
  if (run.held) return 'held';
  if (ds && ds !== 'active') return ds.replace('_', ' ');
  return run.status?.phase || 'unknown';
}

// apply folds one watch event; it returns false for a repeated cursor
// (delivery is at least once).
export function apply(run, cursor, ev) {
  if (run.seen.has(cursor)) return false;
  run.seen.add(cursor);
  run.cursor = cursor;
  const text = (HANDLERS[ev.type] || unknown)(run, ev);
  run.timeline.push({cursor, type: ev.type, text});
  return true;
}

const HANDLERS = {
  phase(run, ev) {
    const before = run.status?.operational;
    run.status = ev.status;
    if (ev.admission) {
      run.spec = ev.admission.spec;
      run.seed = ev.admission.seedInput;
      return `run admitted (generation ${ev.status.observedGeneration})`;
    }
    return lifecycleText(before, ev.status.operational);
  },
  node_begin(run, ev) {
    const n = node(run, ev.node.node);
    n.begins++;
    n.attempt = ev.node.attempt;
    n.state = 'running';
    if (run.held === n.name) run.held = null;
    return `${n.name} started (attempt ${n.attempt})`;
  },
  node_end(run, ev) {
    const n = node(run, ev.node.node);
    n.outcome = ev.outcome;
    n.state = ev.outcome.status === 'error' ? 'failed' : 'succeeded';
    if (n.state === 'failed') run.lastFailed = n.name;
    return `${n.name} ${outcomeText(ev.outcome)}`;
  },
  fault(run, ev) {
    const f = ev.fault;
    const name = f.executionRef ? refNode(run.runId, f.executionRef) : null;
    if (name && f.consequence === 'no_observable_effect') node(run, name).state = 'voided';
    return `fault: ${f.summary}`;
  },
  bookmark(run) {
    if (run.finished) return 'bookmark';
    if (running(run).length > 0) return 'execution cut off';
    if (run.held) {
      node(run, run.held).state = 'failed';
      run.held = null;
      return 'retry granted';
    }
    const failed = run.lastFailed && run.nodes.get(run.lastFailed);
    if (failed && failed.state === 'failed') {
      failed.state = 'held';
      run.held = failed.name;
      return `held: ${failed.name} failed (retry or stop)`;
    }
    return 'bookmark';
  },
  finished(run, ev) {
    run.finished = true;
    run.status = ev.final_status;
    run.stopMode = ev.stop_mode || null;
    run.held = null;
    for (const n of running(run)) n.state = 'voided';
    return ev.stop_mode ? `run stopped (${ev.stop_mode})` : 'run finished';
  },
};

function unknown(_run, ev) {
  return ev.type;
}

function lifecycleText(before, after) {
  if (!after) return 'phase changed';
  if (before && before.dispatchState !== after.dispatchState) {
    const words = {suspended: 'suspended', active: 'resumed', draining: 'stop requested (drain)',
      force_stopping: 'stop requested (force)', stopped: 'stopped'};
    return words[after.dispatchState] || `dispatch ${after.dispatchState}`;
  }
  return 'lifecycle updated';
}

// outcomeText describes a WorkerOutcome after the node name.
export function outcomeText(o) {
  if (o.status === 'error') return `failed: ${o.code} (${o.reason})`;
  if (o.status === 'verifier') {
    const sig = Object.entries(o.signals || {}).map(([k, v]) => `${k}=${v}`).join(', ');
    return `verified${sig ? ': ' + sig : ''}`;
  }
  return 'succeeded';
}

// refNode is the node name of an ExecutionRef "<runId>/<node>/<k>" (a
// hashed "#…" name stays as it is).
export function refNode(runId, ref) {
  if (!ref.startsWith(runId + '/')) return null;
  const rest = ref.slice(runId.length + 1);
  const i = rest.lastIndexOf('/');
  return i > 0 ? rest.slice(0, i) : null;
}

// setTerminal records the terminal result of a run whose finished event
// has been folded (so its graph is known), and marks the terminal node that
// gave it, when exactly one node of the graph can have.
export function setTerminal(run, result) {
  if (!run.finished || !result) return;
  run.terminal = result;
  if (!run.spec) return;
  const candidates = terminals(run.spec.root).filter((t) => result.status === 'succeeded'
    ? t.kind === 'succeed' : t.kind === 'fail' && t.reason === result.reason);
  if (candidates.length === 1) node(run, candidates[0].name).state = result.status;
}

function terminals(g, out = []) {
  if (g.kind === 'succeed' || g.kind === 'fail') out.push(g);
  for (const c of children(g)) terminals(c, out);
  return out;
}

// children lists a graph node's child nodes in source order.
export function children(g) {
  switch (g.kind) {
    case 'seq': return g.children;
    case 'par': return g.branches;
    case 'choice': return [...g.branches.map((b) => b.node), ...(g.otherwise ? [g.otherwise] : [])];
    case 'loop': case 'map': return [g.body];
    default: return [];
  }
}

// executionRef is the reference of the k-th dispatch of a node, as the
// engine mints it: "<runId>/<node>/<k>", or with the node replaced by "#"
// and 16 hex digits of its SHA-256 when longer than 128 bytes.
export async function executionRef(runId, name, k) {
  const enc = new TextEncoder();
  const ref = `${runId}/${name}/${k}`;
  if (enc.encode(ref).length <= 128) return ref;
  if (!crypto.subtle) throw new Error('this page needs a secure origin to address an execution with a long name');
  const sum = new Uint8Array(await crypto.subtle.digest('SHA-256', enc.encode(name)));
  const hex = Array.from(sum.slice(0, 8), (b) => b.toString(16).padStart(2, '0')).join('');
  const hashed = enc.encode(`${runId}/#${hex}/${k}`);
  return new TextDecoder().decode(hashed.slice(Math.max(0, hashed.length - 128)));
}
