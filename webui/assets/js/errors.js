// Server errors in plain words.
import {RpcError, ConnectionLost} from './rpc.js';

const NO_FRONTIER = {
  exhausted: 'Nothing has failed that could be retried.',
  success: 'The last execution succeeded: there is nothing to retry.',
  active: 'An execution is still running: wait for it to end before retrying.',
  consumed: 'That failure has already been retried.',
};

// explain turns an error from a call into one sentence for a person.
export function explain(err) {
  if (err instanceof ConnectionLost) return 'Not connected to the server; the page reconnects by itself — try again in a moment.';
  if (!(err instanceof RpcError)) return String(err && err.message || err);
  const code = err.data && err.data.code;
  const d = (err.data && err.data.details) || {};
  switch (code) {
    case 'GENERATION_CONFLICT':
      return `The cluster changed while you were looking (it is now at generation ${d.currentGeneration ?? 'none'}). Look again and retry.`;
    case 'RUN_CONFLICT':
      return `This is no longer the cluster's current run (the current run is ${d.currentRunId ?? 'none'}).`;
    case 'INVALID_PHASE':
      return invalidPhase(err.message, d);
    case 'NO_RETRYABLE_FRONTIER':
      return NO_FRONTIER[d.reason] || 'There is no failure to retry.';
    case 'NOT_FOUND':
      return `${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}, or your identity cannot see it.`;
    case 'GONE':
      return err.message === 'Run history was deleted' ? 'This run\'s history was deleted.' : 'That execution is no longer running.';
    case 'SERVER_BUSY':
      return 'The server is busy; try again in a moment.';
    case 'IDEMPOTENCY_REUSE':
      return 'The server saw this request key before with different content; reload and try again.';
    case 'SCHEMA_VIOLATION':
      return 'The server refused the request as malformed' + (d.reason ? `: ${d.reason}` : '.');
  }
  if (err.code === -32603) return `The server failed internally (${code || 'INTERNAL_ERROR'}).`;
  return err.message;
}

function invalidPhase(message, d) {
  if (d.currentPhase) return `Not possible while the cluster is ${d.currentPhase}.`;
  if (d.dispatchState) return `Not possible while dispatch is ${d.dispatchState.replace('_', ' ')}` +
    (d.dispatchState === 'suspended' ? ': resume the run first.' : '.');
  if (message.startsWith('Backend does not support')) return `This server does not offer that: ${message.slice(8)}.`;
  return message + '.';
}
