//! The N-API addon of the Node.js binding: the engine's calls, each run as a coroutine on the
//! event loop of the JavaScript thread that made it (`looped`; on the binding's threads,
//! `pool`, where that loop cannot be used), settling a Promise through N-API's thread-safe
//! deferred. Nothing here decides anything: options are mapped in, leases and errors mapped
//! out.

#![deny(clippy::all)]

// Called from JavaScript only (the benchmark's harness): `#[napi]` registers them in the
// addon, which a test build (`cargo clippy --all-targets`) does not make.
#[cfg_attr(test, allow(dead_code))]
mod bench;
mod convert;
mod election;
mod lease;
mod looped;
mod pool;
#[cfg_attr(test, allow(dead_code))]
mod proxy;
mod settle;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Either, ToNapiValue};
use napi::threadsafe_function::{ErrorStrategy, ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, JsFunction, JsObject, JsUnknown, NapiValue, Result};
use napi_derive::napi;
use redlock::{Cancel, Config, Error, Lease, Redlock, RenewOptions, TlsOptions};

use convert::{AcquireOptions, ErrorInfo};
pub use election::NativeElection;
pub use lease::NativeLease;

pub(crate) type Resolver = Box<dyn FnOnce(Env) -> Result<JsUnknown> + Send>;

/// A JavaScript value made from `v` (on the JavaScript thread).
pub(crate) fn js<T: ToNapiValue>(env: Env, v: T) -> Result<JsUnknown> {
    unsafe {
        let raw = T::to_napi_value(env.raw(), v)?;
        Ok(JsUnknown::from_raw_unchecked(env.raw(), raw))
    }
}

/// A Promise settled with what `work`, run on the event loop (see [`run`]), gives back (a
/// panic becomes an `internal` error object: the process goes on).
pub(crate) fn spawn<F, T>(env: &Env, work: F) -> Result<JsObject>
where
    F: FnOnce() -> T + Send + 'static,
    T: ToNapiValue + Send + 'static,
{
    let (pending, promise) = settle::promise(env)?;
    run(
        env,
        Box::new(move || {
            let out = catch_unwind(AssertUnwindSafe(work));
            Box::new(move || {
                pending.settle(Box::new(move |env| match out {
                    Ok(v) => js(env, v),
                    Err(_) => js(env, convert::internal("a panic in the Node binding's call")),
                }))
            })
        }),
    );
    Ok(promise)
}

/// Runs `job` on the event loop (`looped`), or on one of the binding's threads (`pool`) where
/// the loop cannot be used.
fn run(env: &Env, job: pool::Job) {
    if let Err(job) = looped::submit(env, job) {
        pool::submit(job);
    }
}

/// [`spawn`] for an acquisition: a lease granted after its JavaScript environment was torn
/// down (a worker thread terminated during the wait) can reach no one, so it is released at
/// once rather than left to expire.
pub(crate) fn spawn_lease<F>(env: &Env, work: F) -> Result<JsObject>
where
    F: FnOnce() -> std::result::Result<Lease, Error> + Send + 'static,
{
    let (pending, promise) = settle::promise(env)?;
    run(
        env,
        Box::new(move || {
            let out = catch_unwind(AssertUnwindSafe(work));
            if let Ok(Ok(lease)) = &out {
                if pending.is_closed() {
                    let _ = lease.unlock();
                }
            }
            Box::new(move || {
                pending.settle(Box::new(move |env| match out {
                    Ok(r) => js(env, acquired(r)),
                    Err(_) => js(env, convert::internal("a panic in the Node binding's call")),
                }))
            })
        }),
    );
    Ok(promise)
}

/// The outcome of a call that returns nothing: `null`, or the error.
pub(crate) fn done(r: std::result::Result<(), Error>) -> Option<ErrorInfo> {
    r.err().as_ref().map(convert::error)
}

/// A JavaScript callback the renewal thread calls once when a lease is lost. The thread-safe
/// function does not keep the process alive.
pub(crate) fn on_lost(env: &Env, f: JsFunction, r: RenewOptions) -> Result<RenewOptions> {
    let mut tsfn: ThreadsafeFunction<(), ErrorStrategy::Fatal> =
        f.create_threadsafe_function(0, |_ctx| Ok(Vec::<JsUnknown>::new()))?;
    tsfn.unref(env)?;
    Ok(r.on_lost(move |_l: &Lease| {
        tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking);
    }))
}

/// A manager's options, as `lib/config.js` has checked them.
#[napi(object)]
pub struct ManagerOptions {
    pub retry_count: Option<u32>,
    pub retry_delay_ms: Option<u32>,
    pub drift_factor: Option<f64>,
    pub connect_timeout_ms: Option<u32>,
    pub node_timeout_ms: Option<u32>,
    pub max_ttl_ms: Option<u32>,
    pub restart_quarantine: Option<bool>,
    pub label: Option<String>,
    pub key_prefix: Option<Buffer>,
    pub tls_ca_file: Option<String>,
    pub tls_client_cert: Option<String>,
    pub tls_client_key: Option<String>,
    pub tls_server_name: Option<String>,
    pub tls_insecure_skip_verify: Option<bool>,
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    pub replica_acks: Option<u32>,
    pub replica_ack_timeout_ms: Option<u32>,
}

fn millis(ms: u32) -> Duration {
    Duration::from_millis(ms.into())
}

fn config(nodes: Vec<String>, o: ManagerOptions) -> Config {
    let mut c = Config::new(nodes);
    if let Some(n) = o.retry_count {
        c = c.retry_count(n);
    }
    if let Some(ms) = o.retry_delay_ms {
        c = c.retry_delay(millis(ms));
    }
    if let Some(f) = o.drift_factor {
        c = c.drift_factor(f);
    }
    if let Some(ms) = o.connect_timeout_ms {
        c = c.connect_timeout(millis(ms));
    }
    match o.node_timeout_ms {
        Some(0) => c = c.derived_node_timeout(),
        Some(ms) => c = c.node_timeout(millis(ms)),
        None => {}
    }
    if let Some(ms) = o.max_ttl_ms {
        c = c.max_ttl(millis(ms));
    }
    if let Some(on) = o.restart_quarantine {
        c = c.restart_quarantine(on);
    }
    if let Some(l) = o.label {
        c = c.label(l);
    }
    if let Some(p) = o.key_prefix {
        c = c.key_prefix(&p[..]);
    }
    let mut tls = TlsOptions::new();
    if let Some(ca) = o.tls_ca_file {
        tls = tls.ca_file(ca);
    }
    if let (Some(cert), Some(key)) = (o.tls_client_cert, o.tls_client_key) {
        tls = tls.client_cert(cert, key);
    }
    if let Some(name) = o.tls_server_name {
        tls = tls.server_name(name);
    }
    tls = tls.insecure_skip_verify(o.tls_insecure_skip_verify.unwrap_or(false));
    c = c.tls(tls);
    if let Some(pw) = o.sentinel_password {
        c = c.sentinel_auth(o.sentinel_username.as_deref(), &pw);
    }
    if o.replica_acks.is_some() || o.replica_ack_timeout_ms.is_some() {
        let n = o.replica_acks.unwrap_or(1);
        c = c.replica_acks(n, millis(o.replica_ack_timeout_ms.unwrap_or(100)));
    }
    c
}

/// A cancel handle: `fire()` ends the acquisitions it was given to with `cancelled`.
#[napi]
pub struct NativeCancel {
    c: Cancel,
}

#[napi]
impl NativeCancel {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeCancel { c: Cancel::new() }
    }

    #[napi]
    pub fn fire(&self) {
        self.c.fire();
    }
}

impl Default for NativeCancel {
    fn default() -> Self {
        Self::new()
    }
}

/// The engine's manager, until `close` drops it (calls in progress keep their own handle, so
/// the connections close once the last of them returns and no lease or election made by it
/// is left).
#[napi]
pub struct NativeManager {
    mgr: std::sync::RwLock<Option<Redlock>>,
    node_count: u32,
    quorum: u32,
}

impl NativeManager {
    fn new(mgr: Redlock) -> Self {
        NativeManager {
            node_count: mgr.node_count() as u32,
            quorum: mgr.quorum() as u32,
            mgr: std::sync::RwLock::new(Some(mgr)),
        }
    }

    /// The manager, or an error once it was closed (the JavaScript side refuses such calls
    /// first, with a `ClosedError`).
    fn mgr(&self) -> Result<Redlock> {
        self.mgr
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| napi::Error::from_reason("the manager is closed"))
    }
}

/// A manager, or the error that refused its configuration (nothing is sent either way).
#[napi]
pub fn create_manager(
    nodes: Vec<String>,
    options: ManagerOptions,
) -> Either<NativeManager, ErrorInfo> {
    match Redlock::new(config(nodes, options)) {
        Ok(mgr) => Either::A(NativeManager::new(mgr)),
        Err(e) => Either::B(convert::error(&e)),
    }
}

fn lock_options(
    env: &Env,
    o: &AcquireOptions,
    cancel: Option<&NativeCancel>,
    lost: Option<JsFunction>,
) -> Result<redlock::LockOptions> {
    let renew = if o.flags & convert::FLAG_AUTO_RENEW != 0 {
        let r = convert::renew_options(o.max_hold_ms, o.max_extensions);
        Some(match lost {
            Some(f) => on_lost(env, f, r)?,
            None => r,
        })
    } else {
        None
    };
    let mut l = convert::lock_options(o, renew);
    if let Some(c) = cancel {
        l = l.cancel(c.c.clone());
    }
    Ok(l)
}

type Acquired = Either<NativeLease, ErrorInfo>;

fn acquired(r: std::result::Result<Lease, Error>) -> Acquired {
    match r {
        Ok(l) => Either::A(NativeLease::new(l)),
        Err(e) => Either::B(convert::error(&e)),
    }
}

#[napi]
impl NativeManager {
    #[napi(getter)]
    pub fn node_count(&self) -> u32 {
        self.node_count
    }

    #[napi(getter)]
    pub fn quorum(&self) -> u32 {
        self.quorum
    }

    /// Drops this handle's manager: later calls fail. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.mgr.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    #[allow(clippy::too_many_arguments)]
    #[napi(ts_return_type = "Promise<NativeLease | ErrorInfo>")]
    pub fn acquire(
        &self,
        env: Env,
        resource: Buffer,
        ttl_ms: u32,
        wait_ms: i64,
        flags: u32,
        owner: Option<Buffer>,
        drop_out_ms: u32,
        max_hold_ms: u32,
        max_extensions: u32,
        cancel: Option<&NativeCancel>,
        lost: Option<JsFunction>,
    ) -> Result<JsObject> {
        let options = AcquireOptions {
            wait_ms,
            flags,
            owner,
            drop_out_ms,
            max_hold_ms,
            max_extensions,
        };
        let opts = lock_options(&env, &options, cancel, lost)?;
        let mgr = self.mgr()?;
        let resource = resource.to_vec();
        spawn_lease(&env, move || mgr.acquire(&resource, millis(ttl_ms), &opts))
    }

    #[allow(clippy::too_many_arguments)]
    #[napi(ts_return_type = "Promise<NativeLease | ErrorInfo>")]
    pub fn acquire_many(
        &self,
        env: Env,
        resources: Vec<Buffer>,
        ttl_ms: u32,
        wait_ms: i64,
        flags: u32,
        owner: Option<Buffer>,
        drop_out_ms: u32,
        max_hold_ms: u32,
        max_extensions: u32,
        cancel: Option<&NativeCancel>,
        lost: Option<JsFunction>,
    ) -> Result<JsObject> {
        let options = AcquireOptions {
            wait_ms,
            flags,
            owner,
            drop_out_ms,
            max_hold_ms,
            max_extensions,
        };
        let opts = lock_options(&env, &options, cancel, lost)?;
        let mgr = self.mgr()?;
        let resources: Vec<Vec<u8>> = resources.iter().map(|r| r.to_vec()).collect();
        spawn_lease(&env, move || {
            mgr.acquire_many(&resources, millis(ttl_ms), &opts)
        })
    }

    /// Checks a semaphore's name and permit count (sends nothing): `null` or the error.
    #[napi]
    pub fn check_semaphore(&self, name: Buffer, permits: u32) -> Result<Option<ErrorInfo>> {
        Ok(done(self.mgr()?.semaphore(&name[..], permits).map(|_| ())))
    }

    #[allow(clippy::too_many_arguments)]
    #[napi(ts_return_type = "Promise<NativeLease | ErrorInfo>")]
    pub fn semaphore_acquire(
        &self,
        env: Env,
        name: Buffer,
        permits: u32,
        ttl_ms: u32,
        wait_ms: i64,
        flags: u32,
        owner: Option<Buffer>,
        drop_out_ms: u32,
        max_hold_ms: u32,
        max_extensions: u32,
        cancel: Option<&NativeCancel>,
        lost: Option<JsFunction>,
    ) -> Result<JsObject> {
        let options = AcquireOptions {
            wait_ms,
            flags,
            owner,
            drop_out_ms,
            max_hold_ms,
            max_extensions,
        };
        let opts = lock_options(&env, &options, cancel, lost)?;
        let mgr = self.mgr()?;
        let name = name.to_vec();
        spawn_lease(&env, move || {
            mgr.semaphore_acquire(&name, permits, millis(ttl_ms), &opts)
        })
    }

    /// The election `name` (sends nothing), or the error that refuses its name.
    #[napi]
    pub fn election(&self, name: Buffer) -> Result<Either<NativeElection, ErrorInfo>> {
        Ok(NativeElection::new(self.mgr()?.election(&name[..])))
    }

    #[napi(ts_return_type = "Promise<HoldersInfo | ErrorInfo>")]
    pub fn holders(&self, env: Env, resource: Buffer) -> Result<JsObject> {
        let mgr = self.mgr()?;
        let resource = resource.to_vec();
        spawn(&env, move || match mgr.holders(&resource) {
            Ok(h) => Either::<convert::HoldersInfo, ErrorInfo>::A(convert::holders(
                &h,
                &mgr.node_addrs(),
            )),
            Err(e) => Either::B(convert::error(&e)),
        })
    }

    #[napi]
    pub fn metrics(&self) -> Result<String> {
        Ok(self.mgr()?.metrics().to_prometheus())
    }

    #[napi]
    pub fn node_states(&self) -> Result<Vec<convert::NodeStateInfo>> {
        Ok(self
            .mgr()?
            .node_states()
            .iter()
            .map(convert::node_state)
            .collect())
    }
}

/// Threads the binding has started so far (the tests check that calls run on them).
#[napi]
pub fn threads_started() -> f64 {
    pool::spawned() as f64
}

pub(crate) fn arc_lease(l: Lease) -> Arc<Lease> {
    Arc::new(l)
}
