//! `redlock_config`: an opaque builder with one setter per option.

use std::ffi::{CStr, OsStr, c_char};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use super::{
    FfiError, bytes, c_str, guard, guard_or, handle, live_mut, redlock_status, release, take,
};
use crate::{Config, NodeAddr, TlsOptions};

/// Options for a manager: an opaque builder with one setter per option.
///
/// Create with `redlock_config_new`, set options, pass to `redlock_manager_new` (which copies
/// it), free with `redlock_config_free`. Not thread-safe: use one config from one thread at a
/// time.
///
/// Methods: `redlock_config_new`, `redlock_config_free`, `redlock_config_add_node`,
/// `redlock_config_set_retry`, `redlock_config_set_drift_factor`, `redlock_config_set_timeouts`,
/// `redlock_config_set_max_ttl`, `redlock_config_set_restart_quarantine`,
/// `redlock_config_set_key_prefix`, `redlock_config_set_label`, `redlock_config_set_tls_ca_file`,
/// `redlock_config_set_tls_client_cert`, `redlock_config_set_tls_server_name`,
/// `redlock_config_set_tls_insecure_skip_verify`.
pub struct redlock_config {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    pub(crate) inner: Config,
}

handle!(redlock_config, b"RLKCONFG");

/// Creates a configuration with no nodes and every option at its default (3 retries, a
/// 200 ms retry delay, drift factor 0.01, a 250 ms connect timeout, per-node timeouts derived
/// from the TTL). Free it with `redlock_config_free`. Returns NULL only if memory is exhausted.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_config_new() -> *mut redlock_config {
    guard_or(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(redlock_config {
            magic: <redlock_config as super::Handle>::MAGIC,
            inner: Config::default(),
        }))
    })
}

/// Frees a configuration. NULL is a no-op, and so is a handle found freed already (best
/// effort: see `REDLOCK_STATUS_INVALID_HANDLE`). Managers created from it are unaffected.
///
/// # Safety
/// `cfg` must be NULL or a pointer from `redlock_config_new` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_free(cfg: *mut redlock_config) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in redlock_config_new, freed at most once per contract;
        // a second free is detected (best effort) by `take`.
        if let Some(b) = unsafe { take(cfg) } {
            release(b);
        }
    });
}

/// Replaces the config behind `cfg` by what `f` makes of it (with the builder methods of the
/// public [`Config`]); on error it is left unchanged.
///
/// # Safety
/// `cfg` must be NULL or a live config used by one thread at a time; `err` NULL or `err_len`
/// writable bytes.
unsafe fn with_cfg(
    cfg: *mut redlock_config,
    err: *mut c_char,
    err_len: usize,
    f: impl FnOnce(Config) -> Result<Config, FfiError>,
) -> redlock_status {
    let run = || {
        // SAFETY: NULL or a live config used by one thread at a time, per the contract
        // (checked, best effort).
        let c = &mut unsafe { live_mut(cfg, "cfg") }?.inner;
        *c = f(c.clone())?;
        Ok(())
    };
    // SAFETY: `err` per this function's contract.
    unsafe { guard(err, err_len, run) }
}

/// Adds a node: `redis://[user:password@]host[:port][/db]` or `host:port`. The URL's syntax
/// is checked now (`REDLOCK_STATUS_INVALID_ARGUMENT` for a malformed URL, another scheme, port
/// 0, a database number beyond 2^31 − 1, …); duplicates and host names are checked by
/// `redlock_manager_new`. Error messages never contain the password.
///
/// Statuses: OK, NULL_ARGUMENT (`cfg` or `url`), INVALID_HANDLE (`cfg`), INVALID_ARGUMENT.
///
/// # Safety
/// `cfg` must be a live config; `url` a NUL-terminated string; `err` NULL or `err_len`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_add_node(
    cfg: *mut redlock_config,
    url: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |c: Config| {
        // SAFETY: NUL-terminated per the caller's contract.
        let url = unsafe { c_str(url, "url") }?;
        NodeAddr::parse(url)?;
        Ok(c.node(url))
    };
    // SAFETY: per this function's contract.
    unsafe { with_cfg(cfg, err, err_len, f) }
}

/// Sets the retry policy of `redlock_lock`: up to `retry_count` more attempts after the
/// first, each after a random pause drawn uniformly from [0, `retry_delay_ms`]. Defaults: 3
/// and 200 ms.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_retry(
    cfg: *mut redlock_config,
    retry_count: u32,
    retry_delay_ms: u32,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            Ok(c.retry_count(retry_count)
                .retry_delay(Duration::from_millis(retry_delay_ms.into())))
        })
    }
}

/// Sets the clock-drift factor: validity is shortened by `TTL × factor + 2 ms`. Must be finite
/// and in [0, 1). Default 0.01.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (the config is unchanged).
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_drift_factor(
    cfg: *mut redlock_config,
    factor: f64,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            Config::check_drift_factor(factor)?;
            Ok(c.drift_factor(factor))
        })
    }
}

/// Sets the connect timeout (must be > 0; default 250 ms) and the per-node I/O timeout of
/// every step, the same for every node (an extension still stops at the validity's end).
/// `node_ms` = 0 restores the default, a bound per kind of step: an acquisition waits a tenth
/// of the lock's TTL (at least 10 ms, at most 1 s), an extension until the current validity
/// ends, a release the stale limit (1 s); each adds 50 µs per key or semaphore slot beyond
/// the first. A step returns as soon as a quorum has decided, so these matter only while the
/// nodes a quorum needs have not answered.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (`connect_ms` = 0; the config
/// is unchanged).
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_timeouts(
    cfg: *mut redlock_config,
    connect_ms: u32,
    node_ms: u32,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            if connect_ms == 0 {
                return Err(FfiError::invalid("connect timeout must be > 0 ms"));
            }
            let c = c.connect_timeout(Duration::from_millis(connect_ms.into()));
            Ok(match node_ms {
                0 => c.derived_node_timeout(),
                ms => c.node_timeout(Duration::from_millis(ms.into())),
            })
        })
    }
}

/// Sets the largest TTL a lock may have (a larger one is INVALID_ARGUMENT at lock time); it is
/// also how long a node that may have lost keys stays in restart quarantine. 3 ms to `REDLOCK_MAX_TTL_MS`; default
/// 60000 (60 s). Hold locks longer with auto-renewal.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (out of range; the config is
/// unchanged).
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_max_ttl(
    cfg: *mut redlock_config,
    max_ttl_ms: u32,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            if max_ttl_ms < 3 {
                return Err(FfiError::invalid("maximum TTL must be at least 3 ms"));
            }
            Ok(c.max_ttl(Duration::from_millis(max_ttl_ms.into())))
        })
    }
}

/// Turns restart quarantine on (the default) or off. On: a node that may have lost the keys
/// it held (it restarted, or its keyspace was flushed; told by its marker `redlock-marker`,
/// which holds its `run_id`) does not count toward a quorum until the maximum TTL has passed;
/// unlocks and renewals still go to it. A brand-new cluster (no node has a marker, every node
/// is younger than the maximum TTL) counts at once. Turn it off only for nodes that persist
/// every write (`appendfsync always`); with it off, a warning is logged once for each node
/// that does not, and no marker is read or written.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_restart_quarantine(
    cfg: *mut redlock_config,
    enabled: bool,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe { with_cfg(cfg, err, err_len, |c| Ok(c.restart_quarantine(enabled))) }
}

/// Sets the credentials every failover group's sentinels are asked with (`AUTH [username]
/// password` on each connection to a sentinel): a `redis+sentinel://` URL's own credentials
/// are its master's. `username` NULL authenticates as the default user; `password` is
/// NUL-terminated UTF-8, not empty. Defaults to none (sentinels without `requirepass`).
///
/// Statuses: OK, NULL_ARGUMENT (`cfg`, `password`), INVALID_HANDLE, INVALID_ARGUMENT (not
/// UTF-8, an empty password or user name; the config is unchanged).
///
/// # Safety
/// `cfg` must be a live config; `username` NULL or NUL-terminated; `password` NUL-terminated;
/// `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_sentinel_auth(
    cfg: *mut redlock_config,
    username: *const c_char,
    password: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            let user = if username.is_null() {
                None
            } else {
                // SAFETY: NUL-terminated per the contract.
                Some(c_str(username, "sentinel username")?)
            };
            // SAFETY: NUL-terminated per the contract (NULL is refused).
            let pw = c_str(password, "sentinel password")?;
            if pw.is_empty() {
                return Err(FfiError::invalid(
                    "the sentinels' password must not be empty",
                ));
            }
            if user == Some("") {
                return Err(FfiError::invalid(
                    "the sentinels' user name must not be empty (NULL means the default user)",
                ));
            }
            Ok(c.sentinel_auth(user, pw))
        })
    }
}

/// Makes a grant count on a failover group (`redis+sentinel://`) only once `replicas` of its
/// master's replicas acknowledged it: `WAIT replicas timeout_ms` is written behind every grant
/// command, and a grant it did not see acknowledged in time does not count (it is released;
/// the node's outcome is `REDLOCK_NODE_UNACKNOWLEDGED`). Replication stays asynchronous, so
/// restart quarantine is still needed; plain nodes are not affected. Defaults to none.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (`replicas` or `timeout_ms`
/// 0; the config is unchanged).
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_replica_acks(
    cfg: *mut redlock_config,
    replicas: u32,
    timeout_ms: u32,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            if replicas == 0 || timeout_ms == 0 {
                return Err(FfiError::invalid(
                    "replica acknowledgements need at least 1 replica and a timeout > 0 ms",
                ));
            }
            Ok(c.replica_acks(replicas, Duration::from_millis(timeout_ms.into())))
        })
    }
}

/// Sets the prefix of every lock key: the key of a resource is the prefix followed by the
/// resource's bytes. `prefix` is `prefix_len` bytes (0 to `REDLOCK_MAX_KEY_PREFIX_LEN`, any
/// bytes); `NULL, 0` is the empty prefix. Defaults to `redlock:`.
///
/// The empty prefix names each key after the resource itself, as redsync and node-redlock do:
/// a plain lock is then the same `SET key value NX PX ttl` and compare-and-delete as theirs,
/// so services on either side of a migration exclude each other. A lock key may never fall in
/// the library's own namespaces (`redlock-fence:`, `redlock-marker`): acquiring such a resource
/// is INVALID_ARGUMENT.
///
/// Statuses: OK, NULL_ARGUMENT (`prefix` NULL with a length), INVALID_HANDLE,
/// INVALID_ARGUMENT (longer than `REDLOCK_MAX_KEY_PREFIX_LEN`).
///
/// # Safety
/// `cfg` must be a live config; `prefix` NULL (with 0) or `prefix_len` readable bytes; `err`
/// NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_key_prefix(
    cfg: *mut redlock_config,
    prefix: *const u8,
    prefix_len: usize,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            // SAFETY: `prefix_len` readable bytes per the contract.
            let p = bytes(prefix, prefix_len, "prefix")?;
            Config::check_key_prefix(p)?;
            Ok(c.key_prefix(p))
        })
    }
}

/// Sets a label naming this holder (for example `host:pid`), stored beside the token in the
/// value of every plain lock the manager takes, so that `redlock_holders_get` and
/// `redlock inspect` can say who holds a resource. `label` is NUL-terminated UTF-8 of at most
/// `REDLOCK_MAX_LABEL_LEN` bytes with no control characters; NULL or `""` means no label (the
/// default). A reentrant lock is labelled by its owner id instead. Anyone who can read the
/// keys can read the label: no secrets.
///
/// Statuses: OK, NULL_ARGUMENT (`cfg`), INVALID_HANDLE, INVALID_ARGUMENT (not UTF-8, too
/// long, a control character).
///
/// # Safety
/// `cfg` must be a live config; `label` NULL or NUL-terminated; `err` NULL or `err_len`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_label(
    cfg: *mut redlock_config,
    label: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per this function's contract.
    unsafe {
        with_cfg(cfg, err, err_len, |c| {
            let l = if label.is_null() {
                ""
            } else {
                // SAFETY: NUL-terminated per the contract.
                c_str(label, "label")?
            };
            Config::check_label(l)?;
            Ok(c.label(l))
        })
    }
}

/// A file path from a NUL-terminated string: any bytes but NUL (the OS's own encoding), not
/// empty.
///
/// # Safety
/// `ptr` must be NULL or NUL-terminated.
unsafe fn c_path(ptr: *const c_char, what: &str) -> Result<PathBuf, FfiError> {
    if ptr.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    if bytes.is_empty() {
        return Err(FfiError::invalid(format!("{what} is empty")));
    }
    Ok(PathBuf::from(OsStr::from_bytes(bytes)))
}

/// The config with its TLS options changed by `f`, if the new setting passed its `check`
/// (made with the setting alone, so that each setter reads only its own files).
fn with_tls(
    c: Config,
    check: Result<(), crate::Error>,
    f: impl FnOnce(TlsOptions) -> TlsOptions,
) -> Result<Config, FfiError> {
    check?;
    let tls = f(c.tls_options().clone());
    Ok(c.tls(tls))
}

/// Trusts the CA certificates of the PEM file `pem_path` (one or more `CERTIFICATE`
/// sections) for the `rediss://` nodes, instead of the system's trust store (the default).
/// The file is read now, and again by `redlock_manager_new`: one that is missing, unreadable
/// or holds no usable certificate is INVALID_ARGUMENT, with the path in the message (never the
/// file's content). Plain `redis://` nodes ignore TLS options.
///
/// Statuses: OK, NULL_ARGUMENT (`cfg`, `pem_path`), INVALID_HANDLE, INVALID_ARGUMENT (the
/// config is unchanged).
///
/// # Safety
/// `cfg` must be a live config; `pem_path` a NUL-terminated path; `err` NULL or `err_len`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_tls_ca_file(
    cfg: *mut redlock_config,
    pem_path: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |c: Config| {
        // SAFETY: NUL-terminated per the caller's contract.
        let path = unsafe { c_path(pem_path, "pem_path") }?;
        let check = Config::check_tls(&TlsOptions::new().ca_file(&path));
        with_tls(c, check, |t| t.ca_file(path))
    };
    // SAFETY: per this function's contract.
    unsafe { with_cfg(cfg, err, err_len, f) }
}

/// Presents a client certificate to the `rediss://` nodes that ask for one (mutual TLS, a
/// node with `tls-auth-clients yes`): `cert_pem_path` holds the certificate (then any
/// intermediates), `key_pem_path` its private key (PKCS#8, PKCS#1 or SEC1), both PEM. Both are
/// read now, and again by `redlock_manager_new`: a missing or unreadable file, one without
/// the expected PEM section, or a key that does not belong to the certificate is
/// INVALID_ARGUMENT naming the path (never the key or the certificate). Default: none.
///
/// Statuses: OK, NULL_ARGUMENT (`cfg`, either path), INVALID_HANDLE, INVALID_ARGUMENT (the
/// config is unchanged).
///
/// # Safety
/// `cfg` must be a live config; both paths NUL-terminated; `err` NULL or `err_len` writable
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_tls_client_cert(
    cfg: *mut redlock_config,
    cert_pem_path: *const c_char,
    key_pem_path: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |c: Config| {
        // SAFETY: NUL-terminated per the caller's contract.
        let cert = unsafe { c_path(cert_pem_path, "cert_pem_path") }?;
        // SAFETY: as above.
        let key = unsafe { c_path(key_pem_path, "key_pem_path") }?;
        let check = Config::check_tls(&TlsOptions::new().client_cert(&cert, &key));
        with_tls(c, check, |t| t.client_cert(cert, key))
    };
    // SAFETY: per this function's contract.
    unsafe { with_cfg(cfg, err, err_len, f) }
}

/// Sets the name every `rediss://` node's certificate must carry, and that is sent in the
/// handshake (SNI), instead of the host of each node's URL: for nodes addressed by IP whose
/// certificates name a host. `name` is a DNS name or an IP address. Default: each node's host.
///
/// Statuses: OK, NULL_ARGUMENT (`cfg`, `name`), INVALID_HANDLE, INVALID_ARGUMENT (not UTF-8,
/// not a DNS name or an IP address; the config is unchanged).
///
/// # Safety
/// `cfg` must be a live config; `name` NUL-terminated; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_tls_server_name(
    cfg: *mut redlock_config,
    name: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |c: Config| {
        // SAFETY: NUL-terminated per the caller's contract.
        let name = unsafe { c_str(name, "name") }?;
        let check = Config::check_tls(&TlsOptions::new().server_name(name));
        with_tls(c, check, |t| t.server_name(name))
    };
    // SAFETY: per this function's contract.
    unsafe { with_cfg(cfg, err, err_len, f) }
}

/// **Insecure: for tests only.** `skip` = true accepts any certificate from any `rediss://`
/// node: who signed it, when it expires and what it names are not checked, so anyone on the
/// path can read and change every command, and grant locks (the traffic is still encrypted).
/// `redlock_manager_new` logs a warning when it is on. Default: false.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `cfg` must be a live config; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_config_set_tls_insecure_skip_verify(
    cfg: *mut redlock_config,
    skip: bool,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |c: Config| with_tls(c, Ok(()), |t| t.insecure_skip_verify(skip));
    // SAFETY: per this function's contract.
    unsafe { with_cfg(cfg, err, err_len, f) }
}
