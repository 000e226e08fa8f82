// Types of redlock-quorum (checked by `tsc --noEmit` over examples/ in CI).

/// <reference types="node" />

/** A resource name: a string (UTF-8) or bytes, 1 to 1024 bytes. */
export type Resource = string | Uint8Array;

/** A manager's options: the Python binding's keywords, in camelCase. */
export interface RedlockOptions {
  /** Retries of an acquisition without `waitMs` (default 3). */
  retryCount?: number;
  /** The largest random pause between two retries (default 200 ms). */
  retryDelayMs?: number;
  /** Clock drift allowance as a fraction of the TTL (default 0.01). */
  driftFactor?: number;
  connectTimeoutMs?: number;
  /** Per-node timeout of a step; 0 or absent: derived from each node's measured round trips. */
  nodeTimeoutMs?: number;
  /** The largest TTL, and how long a node that may have lost keys stays out (default 60000). */
  maxTtlMs?: number;
  /** Restart quarantine (default true); off only for nodes that persist every write. */
  restartQuarantine?: boolean;
  /** Names this holder in every plain lock's value (at most 256 bytes). */
  label?: string;
  /** The prefix of every lock key (default `redlock:`; `""`: the name itself, as node-redlock). */
  keyPrefix?: string | Uint8Array;
  tlsCaFile?: string;
  tlsClientCert?: string;
  tlsClientKey?: string;
  tlsServerName?: string;
  tlsInsecureSkipVerify?: boolean;
  sentinelUsername?: string;
  sentinelPassword?: string;
  replicaAcks?: number;
  replicaAckTimeoutMs?: number;
}

/** Renewal options (with `autoRenew: true`, or `lease.autoRenew()`). */
export interface RenewOptions {
  /** The longest the lease is renewed, from the acquisition (default one hour). */
  maxHoldMs?: number;
  /** The most automatic extensions (default no limit). */
  maxExtensions?: number;
  /** Called once if the lease is lost (renewal failed or reached a bound). */
  onLost?: (lease: Lease) => void;
}

/** The options every acquisition form takes. */
export interface WaitOptions extends RenewOptions {
  /** absent: the retry policy; 0: one attempt; > 0: keep trying (woken by releases) this long. */
  waitMs?: number;
  /** Renew from the grant on until released (or a bound). */
  autoRenew?: boolean;
  /** Aborting it cancels the acquisition (CancelledError); nothing is left held. */
  signal?: AbortSignal;
}

export interface PermitOptions extends WaitOptions {
  /** Also grant a fencing token. */
  fenced?: boolean;
  /** With waitMs > 0: sleep until a release is announced (default) or poll (false). */
  notify?: boolean;
}

export interface AcquireOptions extends PermitOptions {
  /** Reentrant for this owner (1 to 512 bytes). */
  owner?: string | Uint8Array;
  /** A shared (read) lock. */
  shared?: boolean;
  /** A fair (first come, first served) lock. */
  fair?: boolean;
  /** A fair waiter's drop-out time. */
  dropOutMs?: number;
}

export type ManyOptions = WaitOptions;

/** One node's outcome of a step. */
export interface NodeResult {
  index: number;
  addr: string;
  outcome:
    | 'success' | 'rejected' | 'pending' | 'timeout' | 'unreachable' | 'backoff'
    | 'serverError' | 'authFailed' | 'protocol' | 'tls' | 'sentinel' | 'unacknowledged'
    | 'duplicate' | 'quarantined' | 'other';
  message?: string;
  remainingMs?: number;
  reason?: string;
  duplicateOf?: number;
}

export class Lease {
  private constructor();
  /** What was locked, as given (an array for acquireMany). */
  readonly resource: Resource | Resource[];
  /** Every resource the lease holds: [resource], or those given to acquireMany. */
  readonly resources: Resource[];
  /** Remaining validity in ms; 0 once expired, released or lost. */
  readonly validityMs: number;
  readonly ttlMs: number;
  /** A fenced lease's fencing token (exact over 64 bits), else null. */
  readonly fencingToken: bigint | null;
  /** A fair lease's ticket when it queued, else null. */
  readonly ticket: bigint | null;
  readonly lost: boolean;
  readonly lostReason: string | null;
  readonly renewing: boolean;
  readonly released: boolean;
  readonly token: string;
  readonly value: string;
  readonly key: Buffer;
  readonly shared: boolean;
  readonly fair: boolean;
  /** A semaphore permit's slot and the permit count; null for a lock. */
  readonly permit: { slot: number; permits: number } | null;
  release(): Promise<void>;
  extend(ttlMs: number): Promise<void>;
  autoRenew(options?: RenewOptions): void;
  stopRenewal(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export class Semaphore {
  private constructor();
  readonly name: Resource;
  readonly permits: number;
  acquire(ttlMs: number, options?: PermitOptions): Promise<Lease>;
}

/** A campaign's options. A leadership is always fenced (the term is its fencing token) and
 * renewed automatically; `autoRenew: true` bounds the renewal with `maxHoldMs` and
 * `maxExtensions`. */
export interface CampaignOptions {
  /** absent: wait until this candidate leads; 0: one attempt; > 0: NotAcquiredError after that long. */
  waitMs?: number;
  /** With a wait: sleep until a resignation is announced (default) or poll (false). */
  notify?: boolean;
  /** Aborting it ends the wait (CancelledError); nothing is left held. */
  signal?: AbortSignal;
  /** Bound the renewal by maxHoldMs and maxExtensions (default: renewed while the process lives). */
  autoRenew?: boolean;
  maxHoldMs?: number;
  maxExtensions?: number;
  /** Called once, with the leadership, if it is lost (on the event loop). */
  onLost?: (leadership: Leadership) => void;
}

/** An election's leader as a quorum of nodes held it when read: a snapshot. */
export interface Leader {
  /** The leader's term: its leadership's fencing token, above every earlier leader's. */
  term: bigint;
  /** The value it campaigned with, or the latest it proclaimed. */
  value: Buffer;
  /** How long its leadership stayed valid at least when read, in ms (unless renewed). */
  validityMs: number;
}

/** This process's leadership of an election ({@link Election.campaign}). */
export class Leadership {
  private constructor();
  /** The term (the fencing token of the leadership's lease), above every earlier leader's. */
  readonly term: bigint;
  /** The value it campaigned with, or the latest it proclaimed. */
  readonly value: Buffer;
  /** The election's name, as given. */
  readonly election: Resource;
  /** The underlying lease (releasing it resigns). */
  readonly lease: Lease;
  /** Remaining validity in ms; 0 once lost or resigned. */
  readonly validityMs: number;
  /** True once it no longer leads: lost by renewal, a renewal bound reached, expired, or resigned. */
  readonly lost: boolean;
  readonly lostReason: string | null;
  readonly resigned: boolean;
  /** Aborted once the leadership is lost or resigned; its reason is a LeaseLostError
   * (`kind`: `'lost'` or `'resigned'`). */
  readonly lostSignal: AbortSignal;
  /** A new value for observers; the term stays. */
  proclaim(value: string | Uint8Array): Promise<void>;
  /** Releases the leadership at once, waking the waiting candidates. */
  resign(): Promise<void>;
  /** true once lost (at once if already lost), false when timeoutMs passes first. */
  waitLost(timeoutMs: number): Promise<boolean>;
  /** `await using`: resigns at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A leader election ({@link Redlock.election}); the handle sends nothing itself. */
export class Election {
  private constructor();
  readonly name: Resource;
  /** Campaigns with `value` (at most MAX_LEADER_VALUE bytes) until this candidate leads. */
  campaign(value: string | Uint8Array, ttlMs: number, options?: CampaignOptions): Promise<Leadership>;
  /** Campaigns, runs the routine while leading (`signal`: the leadership's lostSignal), always resigns. */
  lead<T>(value: string | Uint8Array, ttlMs: number,
    routine: (signal: AbortSignal, leadership: Leadership) => Promise<T> | T): Promise<T>;
  lead<T>(value: string | Uint8Array, ttlMs: number, options: CampaignOptions | undefined,
    routine: (signal: AbortSignal, leadership: Leadership) => Promise<T> | T): Promise<T>;
  /** The current leader, read from every node, or null when none is held by a quorum. */
  leader(): Promise<Leader | null>;
  /** One wait (default 1000 ms) for a leader whose term is above afterTerm (default 0). */
  waitChange(afterTerm?: bigint | number, timeoutMs?: number,
    options?: { signal?: AbortSignal }): Promise<Leader | null>;
  /** Every leader from now on, in increasing term order, never twice; ends when `signal` aborts. */
  observe(options?: { signal?: AbortSignal }): AsyncIterableIterator<Leader>;
}

export interface Holder {
  kind: 'lock' | 'reentrant' | 'shared' | 'other';
  id: Buffer;
  label?: string;
  heldForMs?: number;
  ttlMs?: number;
}

export interface Holders {
  resource: Buffer;
  key: Buffer;
  quorum: number;
  holder: Holder | null;
  locked: boolean;
  heldOn: number;
  failed: number;
  nodes: Array<{ state: 'free' | 'held' | 'failed' | 'other'; holder: Holder | null; failure: NodeResult | null }>;
}

export interface NodeState {
  index: number;
  addr: string;
  quarantined: boolean;
  remainingMs: number;
  reason?: string;
  trusted: boolean;
  runId?: string;
  rttMs?: number;
}

export class Redlock {
  constructor(nodes: string[], options?: RedlockOptions);
  readonly nodeCount: number;
  readonly quorum: number;
  acquire(resource: Resource, ttlMs: number, options?: AcquireOptions): Promise<Lease>;
  /** An array: acquireMany (node-redlock's form). */
  acquire(resources: Resource[], ttlMs: number, options?: ManyOptions): Promise<Lease>;
  acquireMany(resources: Resource[], ttlMs: number, options?: ManyOptions): Promise<Lease>;
  semaphore(name: Resource, permits: number): Semaphore;
  /** The leader election `name` (checked as a resource name); sends nothing. */
  election(name: Resource): Election;
  using<T>(resource: Resource | Resource[], ttlMs: number,
    routine: (signal: AbortSignal, lease: Lease) => Promise<T> | T): Promise<T>;
  using<T>(resource: Resource | Resource[], ttlMs: number, options: AcquireOptions | undefined,
    routine: (signal: AbortSignal, lease: Lease) => Promise<T> | T): Promise<T>;
  holders(resource: Resource): Promise<Holders>;
  metrics(): string;
  nodeStates(): NodeState[];
  /** True once close() was called. */
  readonly closed: boolean;
  /**
   * Closes the manager: later calls throw a ClosedError, waits in progress end with one;
   * resolves once every call in progress has settled. Leases stay usable. Idempotent.
   */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class RedlockError extends Error {
  readonly kind: string;
  readonly op: 'acquire' | 'release' | 'extend' | 'fence' | null;
  readonly successes: number | null;
  readonly quorum: number | null;
  readonly detail: string | null;
  readonly expiresInMs: number | null;
  readonly nodes: NodeResult[];
}
export class NotAcquiredError extends RedlockError {}
export class NotHeldError extends RedlockError {}
export class UnavailableError extends RedlockError {}
export class AuthFailedError extends UnavailableError {}
export class CancelledError extends RedlockError {
  readonly code: 'ABORT_ERR';
}
export class InternalError extends RedlockError {}
export class LeaseLostError extends RedlockError {}
/** The manager was closed: a call made after close(), or a wait that close() ended. */
export class ClosedError extends RedlockError {}
export class InvalidArgumentError extends RangeError {
  readonly kind: 'invalidArgument';
  readonly nodes: NodeResult[];
}

/** The most bytes a leader's value may have (65536). */
export const MAX_LEADER_VALUE: number;

/** Threads the binding has started so far (its own, never libuv's): calls run on the event loop, so only a torn-down worker's pending calls and the benchmark's comparison use them. */
export function threadsStarted(): number;
/** The file the native addon was loaded from: redlock.node, a cargo build, or a prebuilt package's. */
export const addonPath: string;
export const version: string;
