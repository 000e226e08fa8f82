//! Leader election: the engine's `Election` behind a handle. A campaign runs on the binding's
//! threads and gives the leadership as its lease (`Leadership::into_lease`: its fencing token
//! is the term, unlocking it resigns), so the JavaScript side wraps a `NativeLease`; reading
//! the leader and waiting for a change run there too, the wait in bounded slices.

use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Buffer, Either};
use napi::{Env, JsFunction, JsObject, Result};
use napi_derive::napi;
use redlock::{Election, Leader, Leadership, RenewOptions};

use crate::convert::{self, ErrorInfo, FLAG_AUTO_RENEW};
use crate::{spawn, spawn_lease, NativeCancel};

/// The renewal of a leadership without `autoRenew`'s bounds: for as long as the process
/// lives (the engine's own default for a campaign), here with the `on_lost` callback.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A leader as read from the nodes.
#[napi(object)]
pub struct LeaderInfo {
    pub term: BigInt,
    pub value: Buffer,
    pub validity_ms: f64,
}

fn leader_info(l: Leader) -> LeaderInfo {
    LeaderInfo {
        term: BigInt::from(l.term),
        value: l.value.into(),
        validity_ms: l.validity.as_millis() as f64,
    }
}

type Read = Either<Option<LeaderInfo>, ErrorInfo>;

fn read(r: std::result::Result<Option<Leader>, redlock::Error>) -> Read {
    match r {
        Ok(l) => Either::A(l.map(leader_info)),
        Err(e) => Either::B(convert::error(&e)),
    }
}

#[napi]
pub struct NativeElection {
    e: Election,
}

impl NativeElection {
    /// The election `name` of `mgr`, or the error that refuses its name (nothing is sent).
    pub fn new(e: Election) -> Either<NativeElection, ErrorInfo> {
        match e.key() {
            Ok(_) => Either::A(NativeElection { e }),
            Err(err) => Either::B(convert::error(&err)),
        }
    }
}

#[napi]
impl NativeElection {
    /// Campaigns with `value` for a leadership of `ttl_ms`: the leadership's lease, or the
    /// error. `wait_ms` −1: until it leads; 0: once; > 0: that long. `lost` is called (on
    /// the event loop, not keeping it alive) once if renewal loses the leadership.
    #[allow(clippy::too_many_arguments)]
    #[napi(ts_return_type = "Promise<NativeLease | ErrorInfo>")]
    pub fn campaign(
        &self,
        env: Env,
        value: Buffer,
        ttl_ms: u32,
        wait_ms: i64,
        flags: u32,
        max_hold_ms: u32,
        max_extensions: u32,
        cancel: Option<&NativeCancel>,
        lost: Option<JsFunction>,
    ) -> Result<JsObject> {
        let options = convert::AcquireOptions {
            wait_ms,
            flags,
            owner: None,
            drop_out_ms: 0,
            max_hold_ms,
            max_extensions,
        };
        let mut renew = if flags & FLAG_AUTO_RENEW != 0 {
            convert::renew_options(max_hold_ms, max_extensions)
        } else {
            RenewOptions::new().max_hold(FOREVER)
        };
        if let Some(f) = lost {
            renew = crate::on_lost(&env, f, renew)?;
        }
        let mut opts = convert::lock_options(&options, Some(renew));
        if let Some(c) = cancel {
            opts = opts.cancel(c.c.clone());
        }
        let e = self.e.clone();
        let value = value.to_vec();
        spawn_lease(&env, move || {
            e.campaign(&value, Duration::from_millis(ttl_ms.into()), &opts)
                .map(Leadership::into_lease)
        })
    }

    /// The current leader (`null`: none held by a quorum), or the error.
    #[napi(ts_return_type = "Promise<LeaderInfo | null | ErrorInfo>")]
    pub fn leader(&self, env: Env) -> Result<JsObject> {
        let e = self.e.clone();
        spawn(&env, move || read(e.leader()))
    }

    /// Waits up to `timeout_ms` for a leader whose term is above `after_term`: the leader,
    /// `null` when the time is up, or the error (`cancelled` once `cancel` fires).
    #[napi(ts_return_type = "Promise<LeaderInfo | null | ErrorInfo>")]
    pub fn wait_change(
        &self,
        env: Env,
        after_term: BigInt,
        timeout_ms: u32,
        cancel: Option<&NativeCancel>,
    ) -> Result<JsObject> {
        let (negative, after, lossless) = after_term.get_u64();
        if negative || !lossless {
            return Err(napi::Error::from_reason("afterTerm must be in 0..2^64-1"));
        }
        let e = self.e.clone();
        let cancel = cancel.map(|c| c.c.clone());
        spawn(&env, move || {
            read(e.wait_change(
                after,
                Duration::from_millis(timeout_ms.into()),
                cancel.as_ref(),
            ))
        })
    }
}
