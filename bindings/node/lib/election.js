'use strict';
// Leader election: Election (made by Redlock#election), Leadership (a campaign's outcome) and
// the leaders read or observed. The engine's election does the work; a leadership is the
// campaign's lease (its fencing token is the term), renewed by the engine until it resigns.
const { fromInfo, CancelledError, LeaseLostError, InvalidArgumentError } = require('./errors');
const { Lease } = require('./lease');
const opts = require('./options');
const native = require('./native');

/** The most bytes a leader's value may have (the engine's MAX_LEADER_VALUE). */
const MAX_LEADER_VALUE = 65536;

/**
 * How long one wait of observe() lasts at most (the Python binding's OBSERVE_SLICE_MS): the
 * observer is woken by each new term at once; the slice bounds each call on the binding's
 * threads, and an aborted signal ends the wait at once in any case.
 */
const OBSERVE_SLICE_MS = 1000;

const U64_MAX = (1n << 64n) - 1n;

function leaderValue(v) {
  const b = opts.bytes('value', v);
  if (b.length > MAX_LEADER_VALUE) {
    throw new InvalidArgumentError(`a leader's value is at most ${MAX_LEADER_VALUE} bytes, got ${b.length}`);
  }
  return b;
}

function term(name, v) {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new RangeError(`${name} must be a non-negative integer, not ${v}`);
    }
    return BigInt(v);
  }
  if (typeof v !== 'bigint') {
    throw new TypeError(`${name} must be a bigint or a number, not ${v === null ? 'null' : typeof v}`);
  }
  if (v < 0n || v > U64_MAX) throw new RangeError(`${name} must be in 0..2^64-1, not ${v}`);
  return v;
}

/** A leader as the nodes hold it: { term, value, validityMs }, or null; an error is thrown. */
function leaderOf(r, reason) {
  if (r === null || r === undefined) return null;
  if (r.kind !== undefined && r.message !== undefined) throw fromInfo(r, reason);
  return { term: r.term, value: r.value, validityMs: r.validityMs };
}

/** Resolves after ms, or at once when `signal` aborts (never rejects). */
function pause(ms, signal) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      if (signal) signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    if (signal) signal.addEventListener('abort', done, { once: true });
  });
}

class Leadership {
  #n;
  #lease;
  #election;
  #lost = new AbortController();
  #resigned = false;

  /** @internal */
  constructor(n, election) {
    this.#n = n;
    this.#election = election;
    this.#lease = new Lease(n, election);
  }

  /** The term (a bigint): this leadership's fencing token, above every earlier leader's. */
  get term() {
    return this.#n.fencingToken ?? 0n;
  }
  /** The value it campaigned with, or the latest it proclaimed (bytes). */
  get value() {
    return this.#n.leaderValue ?? Buffer.alloc(0);
  }
  /** The name of the election it leads, as given. */
  get election() {
    return this.#election;
  }
  /** The leadership's Lease (its fencing token is the term; releasing it resigns). */
  get lease() {
    return this.#lease;
  }
  /** Remaining validity in ms (0 once lost or resigned). */
  get validityMs() {
    return this.#n.validityMs;
  }
  /**
   * True once this process no longer leads: renewal could not confirm the leadership in time
   * (told a margin before its validity ends), a bound of `autoRenew` was reached, its
   * validity ran out, or it resigned.
   */
  get lost() {
    return this.#n.lost || !this.#n.valid;
  }
  /** Why renewal lost the leadership, else null. */
  get lostReason() {
    return this.#n.lostReason ?? null;
  }
  get resigned() {
    return this.#resigned;
  }
  /**
   * An AbortSignal aborted once the leadership is lost (its reason a LeaseLostError, `kind`
   * `lost`) or resigned (`kind` `resigned`): hand it to the work done as the leader.
   */
  get lostSignal() {
    if (!this.#lost.signal.aborted && this.lost) this._abort('lost');
    return this.#lost.signal;
  }

  /** @internal Aborts lostSignal (once). */
  _abort(kind) {
    if (this.#lost.signal.aborted) return;
    const message = kind === 'resigned'
      ? 'the leadership was resigned'
      : `the leadership was lost: ${this.lostReason ?? 'its validity ran out'}`;
    this.#lost.abort(new LeaseLostError({ kind, message }));
  }

  /**
   * Changes the leader's value, keeping the term: done once a quorum confirmed it while the
   * leadership was valid; observers see it (the same term: observe() does not yield it again).
   */
  async proclaim(value) {
    const v = leaderValue(value);
    const e = await this.#n.proclaim(v);
    if (e) throw fromInfo(e);
  }

  /** Resigns: releases the leadership at once, which wakes the waiting candidates. */
  async resign() {
    try {
      await this.#lease.release();
    } finally {
      if (this.#lease.released) this.#resigned = true;
      if (this.#resigned) this._abort('resigned');
      else if (this.lost) this._abort('lost');
    }
  }

  /**
   * Resolves true once the leadership is lost (at once if it is lost or over already), or
   * false when `timeoutMs` passes first.
   */
  async waitLost(timeoutMs) {
    opts.uint32('timeoutMs', timeoutMs);
    const signal = this.lostSignal;
    if (signal.aborted) return true;
    await pause(timeoutMs, signal);
    return this.lostSignal.aborted;
  }
}

if (Symbol.asyncDispose) {
  // `await using leadership = await election.campaign(...)`: resigns when the scope ends
  // (nothing if resigned already; a lost leadership's failed resignation is not thrown).
  Leadership.prototype[Symbol.asyncDispose] = async function dispose() {
    if (this.resigned) return;
    try {
      await this.resign();
    } catch (e) {
      if (!this.lost) throw e;
    }
  };
}

class Election {
  #n;
  #name;
  #calls;

  /** @internal */
  constructor(n, name, calls) {
    this.#n = n;
    this.#name = name;
    this.#calls = calls;
  }

  /** The election's name, as given. */
  get name() {
    return this.#name;
  }

  /**
   * Campaigns with `value` for a leadership of ttlMs, renewed automatically, and resolves with
   * the Leadership once this candidate leads. Without `waitMs` it waits until then; `0`: one
   * attempt; `> 0`: NotAcquiredError after that long. `signal` ends the wait (CancelledError),
   * leaving nothing held.
   */
  async campaign(value, ttlMs, options) {
    const v = leaderValue(value);
    opts.uint32('ttlMs', ttlMs);
    const o = opts.campaignOptions(options);
    let leadership = null;
    let lostEarly = false;
    const lost = () => {
      if (!leadership) {
        lostEarly = true;
        return;
      }
      leadership._abort('lost');
      if (o.onLost) o.onLost(leadership);
    };
    const r = await this.#calls.run(o.signal, o.waitMs !== 0, (cancel) => this.#n.campaign(v,
      ttlMs, o.waitMs, o.flags, o.maxHoldMs, o.maxExtensions, cancel, lost));
    if (!(r instanceof native.NativeLease)) throw fromInfo(r, o.signal && o.signal.reason);
    leadership = new Leadership(r, this.#name);
    if (lostEarly) queueMicrotask(lost);
    return leadership;
  }

  /**
   * Campaigns, runs `routine(signal, leadership)` while leading, and always resigns. `signal`
   * is the leadership's lostSignal: aborted if the leadership is lost meanwhile. `options`
   * may be left out.
   */
  async lead(value, ttlMs, options, routine) {
    if (typeof options === 'function' && routine === undefined) {
      routine = options;
      options = undefined;
    }
    if (typeof routine !== 'function') throw new TypeError('lead needs a routine (a function)');
    const leadership = await this.campaign(value, ttlMs, options);
    let ok = false;
    try {
      const v = await routine(leadership.lostSignal, leadership);
      ok = true;
      return v;
    } finally {
      try {
        await leadership.resign();
      } catch (e) {
        // A lost leadership, or a routine that threw: its error is the one that matters.
        if (ok && !leadership.lost) throw e; // eslint-disable-line no-unsafe-finally
      }
    }
  }

  /** The current leader, read from every node: { term, value, validityMs }, or null. */
  async leader() {
    return leaderOf(await this.#calls.run(undefined, false, () => this.#n.leader()));
  }

  /**
   * Waits up to timeoutMs (default 1000) for a leader whose term is above afterTerm (default
   * 0: any leader): the leader, or null when the time is up. Woken by each new term's
   * announcement; `signal` ends the wait (CancelledError).
   */
  async waitChange(afterTerm = 0n, timeoutMs = OBSERVE_SLICE_MS, options) {
    const after = term('afterTerm', afterTerm);
    opts.uint32('timeoutMs', timeoutMs);
    const o = opts.signalOptions(options);
    const r = await this.#calls.run(o.signal, true, (cancel) => this.#n.waitChange(after,
      timeoutMs, cancel));
    return leaderOf(r, o.signal && o.signal.reason);
  }

  /**
   * Every leader from now on, in increasing term order, never twice: an async iterator that
   * yields the current leader first (if any), then each new one as it is elected. It ends
   * when `signal` aborts (at once, also during a wait). Intermediate terms may be skipped,
   * never the latest; a proclamation keeps its term and is not yielded again.
   */
  observe(options) {
    const { signal } = opts.signalOptions(options);
    return this.#observe(signal);
  }

  async *#observe(signal) {
    let last = 0n;
    while (!(signal && signal.aborted)) {
      const t0 = Date.now();
      let found;
      try {
        found = await this.waitChange(last, OBSERVE_SLICE_MS, { signal });
      } catch (e) {
        if (e instanceof CancelledError && signal && signal.aborted) return;
        if (e.kind !== 'unavailable') throw e;
        // Too few nodes answered: wait them out (not faster than one try per 100 ms).
        if (Date.now() - t0 < 100) await pause(100, signal);
        continue;
      }
      if (found !== null && found.term > last) {
        last = found.term;
        yield found;
      }
    }
  }
}

module.exports = { Election, Leadership, MAX_LEADER_VALUE, OBSERVE_SLICE_MS };
