//! A lease's handle: its facts read at once (no I/O), release and extend on the binding's
//! threads.

use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Buffer};
use napi::{Env, JsFunction, JsObject, Result};
use napi_derive::napi;
use redlock::{Leadership, Lease};

use crate::convert::{self, ErrorInfo};
use crate::{done, spawn};

#[napi(object)]
pub struct PermitInfo {
    pub slot: u32,
    pub permits: u32,
}

#[napi]
pub struct NativeLease {
    lease: Arc<Lease>,
}

impl NativeLease {
    pub fn new(l: Lease) -> Self {
        NativeLease {
            lease: crate::arc_lease(l),
        }
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_millis() as f64
}

#[napi]
impl NativeLease {
    #[napi(ts_return_type = "Promise<ErrorInfo | null>")]
    pub fn release(&self, env: Env) -> Result<JsObject> {
        let l = self.lease.clone();
        spawn(&env, move || done(l.unlock()))
    }

    #[napi(ts_return_type = "Promise<ErrorInfo | null>")]
    pub fn extend(&self, env: Env, ttl_ms: u32) -> Result<JsObject> {
        let l = self.lease.clone();
        spawn(&env, move || {
            done(l.extend(std::time::Duration::from_millis(ttl_ms.into())))
        })
    }

    /// A leadership's new value (the term stays): `null` once a quorum confirmed it, or the
    /// error (invalid input for a lease that is not a leadership).
    #[napi(ts_return_type = "Promise<ErrorInfo | null>")]
    pub fn proclaim(&self, env: Env, value: Buffer) -> Result<JsObject> {
        let l = self.lease.clone();
        let value = value.to_vec();
        spawn(&env, move || done(Leadership::proclaim_on(&l, &value)))
    }

    /// A leadership's value (the latest proclaimed); `null` for a lease that is not one.
    #[napi(getter)]
    pub fn leader_value(&self) -> Option<Buffer> {
        Leadership::value_of(&self.lease).map(Buffer::from)
    }

    /// True while the remaining validity is positive.
    #[napi(getter)]
    pub fn valid(&self) -> bool {
        self.lease.is_valid()
    }

    /// Starts (or restarts) renewal; no I/O. `null` or the error.
    #[napi]
    pub fn auto_renew(
        &self,
        env: Env,
        max_hold_ms: u32,
        max_extensions: u32,
        lost: Option<JsFunction>,
    ) -> Result<Option<ErrorInfo>> {
        let mut r = convert::renew_options(max_hold_ms, max_extensions);
        if let Some(f) = lost {
            r = crate::on_lost(&env, f, r)?;
        }
        Ok(done(self.lease.auto_renew(r)))
    }

    #[napi]
    pub fn stop_renewal(&self) {
        self.lease.stop_renewal();
    }

    #[napi(getter)]
    pub fn validity_ms(&self) -> f64 {
        ms(self.lease.validity())
    }

    #[napi(getter)]
    pub fn ttl_ms(&self) -> f64 {
        ms(self.lease.ttl())
    }

    #[napi(getter)]
    pub fn fencing_token(&self) -> Option<BigInt> {
        self.lease.fencing_token().map(BigInt::from)
    }

    #[napi(getter)]
    pub fn ticket(&self) -> Option<BigInt> {
        self.lease.ticket().map(BigInt::from)
    }

    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.lease.is_lost()
    }

    #[napi(getter)]
    pub fn renewing(&self) -> bool {
        self.lease.is_renewing()
    }

    #[napi(getter)]
    pub fn lost_reason(&self) -> Option<String> {
        self.lease.lost_reason().map(|r| r.to_string())
    }

    #[napi(getter)]
    pub fn resource(&self) -> Buffer {
        self.lease.resource().to_vec().into()
    }

    #[napi(getter)]
    pub fn resources(&self) -> Vec<Buffer> {
        self.lease
            .resources()
            .into_iter()
            .map(|r| r.to_vec().into())
            .collect()
    }

    #[napi(getter)]
    pub fn key(&self) -> Buffer {
        self.lease.key().to_vec().into()
    }

    #[napi(getter)]
    pub fn token(&self) -> String {
        self.lease.token().to_string()
    }

    #[napi(getter)]
    pub fn value(&self) -> String {
        self.lease.value().to_string()
    }

    #[napi(getter)]
    pub fn shared(&self) -> bool {
        self.lease.is_shared()
    }

    #[napi(getter)]
    pub fn fair(&self) -> bool {
        self.lease.is_fair()
    }

    /// For a semaphore's permit: the slot it holds and the permit count (the engine's
    /// `Lease::permit` gives them in that order, as `redlock_lease_permit` reads them).
    #[napi(getter)]
    pub fn permit(&self) -> Option<PermitInfo> {
        self.lease
            .permit()
            .map(|(slot, permits)| PermitInfo { slot, permits })
    }
}
