//! Fuzz tests, on the stable toolchain, with proptest: the RESP reply reader (`src/resp.rs`,
//! included here as a module since it is private to the library) and the C ABI's argument
//! handling (`redlock::ffi`, no server needed).
//!
//! Every property runs `REDLOCK_FUZZ_CASES` cases (default 2,000: a few seconds in a release
//! build). The long run of docs/testing.md:
//! `REDLOCK_FUZZ_CASES=2000000 cargo test --release --test fuzz -- --nocapture`
//! prints each property's count and time. A failure is shrunk and its seed recorded in
//! `proptest-regressions/fuzz.txt`, replayed first by every later run; byte streams worth
//! keeping as plain files go to `tests/fuzz_corpus/`, replayed by `corpus_replays`.

use std::ffi::{CString, c_char};
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

#[allow(dead_code)] // the library uses all of it; this test only the reader
#[path = "../src/resp.rs"]
mod resp;

use resp::{ReadError, Reply, ReplyReader, Trickle};

/// Cases per property: `REDLOCK_FUZZ_CASES`, or 2,000.
fn cases() -> u32 {
    std::env::var("REDLOCK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(2_000)
}

/// Runs `test` on `cases()` inputs from `strategy`, recording failures in
/// `proptest-regressions/fuzz.txt`, and prints the count and the time taken.
fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(),
        source_file: Some(file!()),
        // Relative to the package root, where cargo runs tests.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/fuzz.txt",
        ))),
        max_shrink_iters: 100_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let t = Instant::now();
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {e}");
    }
    println!(
        "fuzz {name}: {} cases in {:.1} s",
        cases(),
        t.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------
// The RESP reader
// ---------------------------------------------------------------------------------------

/// What a reader made of a stream: the replies, then the protocol error that stopped it (if
/// any; otherwise it was waiting for more bytes).
type Outcome = (Vec<Reply>, Option<String>);

/// Feeds `data` to a new reader, making the bytes available up to each of `cuts` in turn
/// (then all of them), at most `step` bytes per `read`, and calls `next` until it waits for
/// more. Fails if the reader loops without progress or its buffer grows beyond what it was
/// given.
fn feed(data: &[u8], cuts: &[usize], step: usize) -> Result<Outcome, TestCaseError> {
    let mut r = ReplyReader::new();
    let mut src = Trickle {
        data,
        pos: 0,
        step: step.max(1),
        limit: 0,
    };
    let mut replies = Vec::new();
    // Every reply takes at least 3 bytes, and each stop for more bytes ends one availability.
    let mut budget = data.len() / 3 + cuts.len() + 2;
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(data.len())).collect();
    cuts.sort_unstable();
    cuts.push(data.len());
    for cut in cuts {
        src.limit = cut;
        loop {
            prop_assert!(budget > 0, "the reader made no progress");
            budget -= 1;
            let got = r.next(&mut src);
            // No allocation ahead of the bytes: a declared length is not reserved.
            prop_assert!(
                r.capacity() <= 1024.max(2 * src.pos),
                "buffer of {} bytes after {} received",
                r.capacity(),
                src.pos
            );
            match got {
                Ok(Some(v)) => replies.push(v),
                Ok(None) => break,
                Err(ReadError::Protocol(e)) => return Ok((replies, Some(e))),
                Err(e) => return Err(TestCaseError::fail(format!("not a protocol error: {e:?}"))),
            }
        }
    }
    Ok((replies, None))
}

/// The reader's whole contract on one stream: whatever the chunking, the same replies and the
/// same error (or the same wait for more), no panic, no loop, no allocation ahead of the bytes.
fn check_stream(data: &[u8], cuts: &[usize], step: usize) -> Result<Outcome, TestCaseError> {
    let whole = feed(data, &[], usize::MAX)?;
    let chunked = feed(data, cuts, step)?;
    prop_assert_eq!(
        &chunked,
        &whole,
        "chunked (cuts {:?}, step {}) vs whole",
        cuts,
        step
    );
    if step <= 3 || cuts.len() < 3 {
        // Byte by byte, the worst chunking, once in a while.
        let bytewise = feed(data, &[], 1)?;
        prop_assert_eq!(&bytewise, &whole, "byte by byte vs whole");
    }
    Ok(whole)
}

/// The RESP2 encoding of `r` (a null is `$-1`, or `*-1` when `star_nil`).
fn encode(r: &Reply, star_nil: bool, out: &mut Vec<u8>) {
    match r {
        Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
        Reply::Nil if star_nil => out.extend_from_slice(b"*-1\r\n"),
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Reply::Bulk(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Status(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        Reply::Error { text, .. } => out.extend_from_slice(format!("-{text}\r\n").as_bytes()),
        Reply::Array(a) => {
            out.extend_from_slice(format!("*{}\r\n", a.len()).as_bytes());
            for item in a {
                encode(item, star_nil, out);
            }
        }
    }
}

/// Random replies, nested at most 8 deep (the reader's limit): every kind, any bytes in bulk
/// strings, any line text but CR and LF in status and error lines.
fn reply() -> impl Strategy<Value = Reply> {
    let line = "[^\r\n]{0,24}";
    let leaf = prop_oneof![
        Just(Reply::Ok),
        Just(Reply::Nil),
        any::<i64>().prop_map(Reply::Int),
        prop_oneof![-3i64..1000, any::<i64>()].prop_map(Reply::Int),
        proptest::collection::vec(any::<u8>(), 0..48).prop_map(Reply::Bulk),
        line.prop_filter_map("OK is Reply::Ok", |s: String| (s != "OK")
            .then_some(Reply::Status(s))),
        // (redis-rs drops what follows the code when it is empty, hence no space alone.)
        ("[A-Z]{1,10}", proptest::option::of("[^\r\n ][^\r\n]{0,29}")).prop_map(|(code, rest)| {
            let text = match rest {
                Some(r) => format!("{code} {r}"),
                None => code.clone(),
            };
            Reply::Error { code, text }
        }),
    ];
    leaf.prop_recursive(8, 64, 6, |inner| {
        proptest::collection::vec(inner, 0..6).prop_map(Reply::Array)
    })
}

/// Byte streams that look like RESP often enough to get deep into the parser: valid replies,
/// RESP fragments (type bytes, lengths near the limits, lone CR or LF) and random bytes, with
/// a few bytes then flipped.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        3 => (reply(), any::<bool>()).prop_map(|(r, star)| {
            let mut v = Vec::new();
            encode(&r, star, &mut v);
            v
        }),
        2 => proptest::sample::select(vec![
            &b"+"[..], b"-", b":", b"$", b"*", b"\r\n", b"\r", b"\n", b"OK", b"-1", b"0",
            b"-2", b"1", b"3", b"9", b"4194304", b"4194305", b"9223372036854775807",
            b"-9223372036854775808", b"99999999999999999999", b"+OK\r\n", b"$-1\r\n",
            b"*-1\r\n", b"*1\r\n", b"*2\r\n", b"$3\r\nabc", b"\0", b"\xff", b" ", b"%",
            b"_", b"#",
        ])
        .prop_map(<[u8]>::to_vec),
        1 => proptest::collection::vec(any::<u8>(), 0..8),
    ];
    (
        proptest::collection::vec(token, 0..12),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    )
        .prop_map(|(tokens, flips)| {
            let mut data = tokens.concat();
            if !data.is_empty() {
                for (at, b) in flips {
                    let at = at.index(data.len());
                    data[at] = b;
                }
            }
            data
        })
}

/// Where to cut a stream of `len` bytes, and the most bytes per read.
fn chunking() -> impl Strategy<Value = (Vec<usize>, usize)> {
    (
        proptest::collection::vec(0usize..2048, 0..8),
        prop_oneof![Just(usize::MAX), 1usize..17],
    )
}

/// Garbage and near-RESP: never a panic, a loop or an allocation ahead of the bytes; the same
/// outcome in any chunking.
#[test]
fn reader_is_chunking_invariant_on_any_bytes() {
    fuzz(
        "reader_any_bytes",
        (stream(), chunking()),
        |(data, (cuts, step))| {
            let cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            check_stream(&data, &cuts, step).map(drop)
        },
    );
}

/// Random reply trees, encoded: read back exactly, in any chunking, and the same as redis-rs
/// reads each one.
#[test]
fn reader_round_trips_valid_replies() {
    fuzz(
        "reader_round_trip",
        (
            proptest::collection::vec((reply(), any::<bool>()), 1..6),
            chunking(),
        ),
        |(replies, (cuts, step))| {
            let mut data = Vec::new();
            for (r, star) in &replies {
                let mut one = Vec::new();
                encode(r, *star, &mut one);
                let theirs = resp::convert(
                    redis::parse_redis_value(&one)
                        .map_err(|e| TestCaseError::fail(format!("redis-rs: {e}")))?,
                );
                prop_assert_eq!(
                    &theirs,
                    r,
                    "redis-rs reads {:?}",
                    String::from_utf8_lossy(&one)
                );
                data.extend_from_slice(&one);
            }
            let cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            let want: Vec<Reply> = replies.into_iter().map(|(r, _)| r).collect();
            let got = check_stream(&data, &cuts, step)?;
            prop_assert_eq!(got, (want, None));
            Ok(())
        },
    );
}

/// A valid stream cut short anywhere: the replies before the cut, then a wait for more, never
/// an error; the rest then completes it.
#[test]
fn reader_waits_on_any_prefix_of_valid_replies() {
    fuzz(
        "reader_prefix",
        (
            proptest::collection::vec(reply(), 1..4),
            any::<prop::sample::Index>(),
        ),
        |(replies, at)| {
            let mut data = Vec::new();
            let mut ends = Vec::new();
            for r in &replies {
                encode(r, false, &mut data);
                ends.push(data.len());
            }
            let at = at.index(data.len() + 1);
            let (got, err) = feed(&data[..at], &[], usize::MAX)?;
            prop_assert_eq!(err, None);
            prop_assert_eq!(got.len(), ends.iter().filter(|&&e| e <= at).count());
            prop_assert_eq!(&got[..], &replies[..got.len()]);
            prop_assert_eq!(feed(&data, &[at], 7)?, (replies, None));
            Ok(())
        },
    );
}

/// Every file in `tests/fuzz_corpus/` (inputs found by the fuzzer or written for an edge) is
/// read whole, byte by byte and split at every offset: the same outcome each time, and the
/// one its name promises: `ok-*` ends waiting for more bytes, `err-*` in a protocol error.
#[test]
fn corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/fuzz_corpus") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        let whole = check_stream(&data, &[], 1).unwrap_or_else(|e| panic!("{name}: {e}"));
        for split in 0..=data.len().min(4096) {
            let split_outcome =
                feed(&data, &[split], usize::MAX).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(split_outcome, whole, "{name} split at {split}");
        }
        if name.starts_with("ok-") {
            assert_eq!(whole.1, None, "{name}");
        } else if name.starts_with("err-") {
            assert!(whole.1.is_some(), "{name}: {whole:?}");
        } else {
            panic!("{name}: corpus files are named ok-* or err-*");
        }
        n += 1;
    }
    assert!(n > 0, "empty corpus");
}

// ---------------------------------------------------------------------------------------
// The C ABI
// ---------------------------------------------------------------------------------------

use redlock::ffi::{self, redlock_status, redlock_status::*};

/// An error buffer of `len` bytes (or NULL) with guard bytes after it.
struct ErrBuf {
    bytes: Vec<u8>,
    len: usize,
    null: bool,
}

const GUARD: usize = 16;

impl ErrBuf {
    fn new(len: usize, null: bool) -> ErrBuf {
        ErrBuf {
            bytes: vec![0xA5; len + GUARD],
            len,
            null,
        }
    }

    fn ptr(&mut self) -> *mut c_char {
        if self.null {
            std::ptr::null_mut()
        } else {
            self.bytes.as_mut_ptr().cast()
        }
    }

    /// Checks what the library wrote: nothing on success, a NUL-terminated message within the
    /// buffer on failure, never a byte past it; returns the message.
    fn check(&self, status: redlock_status) -> Result<String, TestCaseError> {
        prop_assert!(
            self.bytes[self.len..].iter().all(|&b| b == 0xA5),
            "written past err_len"
        );
        if self.null || self.len == 0 || status == REDLOCK_STATUS_OK {
            prop_assert!(
                self.bytes.iter().all(|&b| b == 0xA5),
                "written when it may not"
            );
            return Ok(String::new());
        }
        let nul = self.bytes[..self.len].iter().position(|&b| b == 0);
        prop_assert!(nul.is_some(), "message not NUL-terminated within err_len");
        let msg = &self.bytes[..nul.unwrap()];
        prop_assert!(
            std::str::from_utf8(msg).is_ok(),
            "message cut inside a character"
        );
        Ok(String::from_utf8_lossy(msg).into_owned())
    }
}

/// One of `choices`, literally (a bare string would be a regex).
fn lit(choices: &[&'static str]) -> impl Strategy<Value = &'static str> + use<> {
    proptest::sample::select(choices.to_vec())
}

/// URL-ish bytes: a scheme or none, credentials, a host, a port and a database, each drawn
/// from valid and broken forms, or plain random bytes (invalid UTF-8 included).
fn url_bytes() -> impl Strategy<Value = Vec<u8>> {
    let structured = (
        lit(&[
            "redis://",
            "rediss://",
            "unix://",
            "http://",
            "",
            "redis:/",
            "://",
        ]),
        lit(&["", "alice:hunter2@", ":hunter2@", "u:p%40w@", "@", "a:b:c@"]),
        lit(&[
            "127.0.0.1",
            "localhost",
            "[::1]",
            "",
            "exa mple",
            "h\u{e9}te",
            "[::1",
        ]),
        prop_oneof![
            Just(String::new()),
            (0u32..70000).prop_map(|p| format!(":{p}")),
            "[:0-9a-z]{0,8}"
        ],
        prop_oneof![
            Just(String::new()),
            any::<i64>().prop_map(|d| format!("/{d}")),
            "(/[0-9a-z?#%]{0,12}){0,2}"
        ],
    )
        .prop_map(|(a, b, c, d, e)| format!("{a}{b}{c}{d}{e}").into_bytes());
    prop_oneof![
        3 => structured,
        1 => proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

/// `redlock_config_add_node` and the other setters with random arguments (NULLs, URLs, any
/// bytes, any numbers, error buffers of any size): the status the Rust API implies, never a
/// panic, never a byte written outside the error buffer, never the password in a message.
#[test]
fn ffi_config_arguments() {
    fuzz(
        "ffi_config",
        (
            url_bytes(),
            (0usize..80, any::<bool>(), 0u8..20),
            (any::<f64>(), prop_oneof![0.0..1.0, -1.0..2.0]),
            (any::<u32>(), any::<u32>(), 0u32..10),
        ),
        |(url, (err_len, err_null, nulls), (f_any, f_near), (a, b, small))| {
            let cfg = if nulls == 0 {
                std::ptr::null_mut()
            } else {
                ffi::redlock_config_new()
            };
            let url_c = CString::new(url.iter().map(|&b| b.max(1)).collect::<Vec<u8>>()).unwrap();
            let url_ptr = if nulls == 1 {
                std::ptr::null()
            } else {
                url_c.as_ptr()
            };
            let mut err = ErrBuf::new(err_len, err_null);
            // SAFETY: `cfg` is NULL or live, `url_ptr` NULL or NUL-terminated, `err` NULL or
            // `err_len` writable bytes.
            let st = unsafe { ffi::redlock_config_add_node(cfg, url_ptr, err.ptr(), err_len) };
            let msg = err.check(st)?;
            let want = if cfg.is_null() || url_ptr.is_null() {
                REDLOCK_STATUS_NULL_ARGUMENT
            } else {
                match url_c.to_str().map(redlock::NodeAddr::parse) {
                    Ok(Ok(_)) => REDLOCK_STATUS_OK,
                    _ => REDLOCK_STATUS_INVALID_ARGUMENT,
                }
            };
            prop_assert_eq!(st, want, "{:?}: {}", url_c, msg);
            prop_assert!(!msg.contains("hunter2"), "password in {}", msg);

            for factor in [f_any, f_near] {
                let mut err = ErrBuf::new(err_len, err_null);
                // SAFETY: as above.
                let st = unsafe {
                    ffi::redlock_config_set_drift_factor(cfg, factor, err.ptr(), err_len)
                };
                err.check(st)?;
                let want = if cfg.is_null() {
                    REDLOCK_STATUS_NULL_ARGUMENT
                } else if factor.is_finite() && (0.0..1.0).contains(&factor) {
                    REDLOCK_STATUS_OK
                } else {
                    REDLOCK_STATUS_INVALID_ARGUMENT
                };
                prop_assert_eq!(st, want, "drift factor {}", factor);
            }
            for (connect, node) in [(a, b), (small, a), (b, small)] {
                let mut err = ErrBuf::new(err_len, err_null);
                // SAFETY: as above.
                let st = unsafe {
                    ffi::redlock_config_set_timeouts(cfg, connect, node, err.ptr(), err_len)
                };
                err.check(st)?;
                let want = match (cfg.is_null(), connect) {
                    (true, _) => REDLOCK_STATUS_NULL_ARGUMENT,
                    (false, 0) => REDLOCK_STATUS_INVALID_ARGUMENT,
                    _ => REDLOCK_STATUS_OK,
                };
                prop_assert_eq!(st, want, "timeouts {} {}", connect, node);
            }
            for ttl in [a, small] {
                let mut err = ErrBuf::new(err_len, err_null);
                // SAFETY: as above.
                let st = unsafe { ffi::redlock_config_set_max_ttl(cfg, ttl, err.ptr(), err_len) };
                err.check(st)?;
                prop_assert!(st != REDLOCK_STATUS_PANIC, "max ttl {}: {}", ttl, st as i32);
            }
            // SAFETY: NULL or from redlock_config_new, freed once.
            unsafe { ffi::redlock_config_free(cfg) };
            Ok(())
        },
    );
}

/// The acquisition functions' argument checks, with a manager over one closed port (no
/// connection is made for a rejected argument): NULL manager, NULL out, NULL resource with a
/// length, empty and over-long resources, out-of-range TTLs, any bytes as a name. Only the
/// statuses are checked; a valid request meets the closed port (UNAVAILABLE).
#[test]
fn ffi_acquire_arguments() {
    let mut cfg_err = ErrBuf::new(256, false);
    let cfg = ffi::redlock_config_new();
    let url = CString::new("redis://127.0.0.1:1").unwrap();
    let mut mgr: *mut ffi::redlock_manager = std::ptr::null_mut();
    // SAFETY: a live config, a NUL-terminated URL, a 256-byte error buffer, a writable out.
    unsafe {
        assert_eq!(
            ffi::redlock_config_add_node(cfg, url.as_ptr(), cfg_err.ptr(), 256),
            REDLOCK_STATUS_OK
        );
        assert_eq!(
            ffi::redlock_config_set_max_ttl(cfg, 10_000, cfg_err.ptr(), 256),
            REDLOCK_STATUS_OK
        );
        assert_eq!(
            ffi::redlock_config_set_timeouts(cfg, 5, 5, cfg_err.ptr(), 256),
            REDLOCK_STATUS_OK
        );
        assert_eq!(
            ffi::redlock_manager_new(cfg, &mut mgr, cfg_err.ptr(), 256),
            REDLOCK_STATUS_OK
        );
        ffi::redlock_config_free(cfg);
    }
    let mgr_addr = mgr as usize;
    fuzz(
        "ffi_acquire",
        (
            0u8..16,
            prop_oneof![Just(0usize), 1usize..64, 1020usize..1030, Just(usize::MAX)],
            prop_oneof![0u32..4, 9_990u32..10_010, any::<u32>()],
            (0usize..64, any::<bool>()),
            any::<u8>(),
        ),
        |(nulls, len, ttl, (err_len, err_null), fill)| {
            let mgr = if nulls == 0 {
                std::ptr::null_mut()
            } else {
                mgr_addr as *mut ffi::redlock_manager
            };
            // Never read past the bytes: a huge length goes only with NULL (or is not read,
            // because the manager or out is NULL).
            let huge = len > 4096;
            let name = vec![fill; if huge { 0 } else { len }];
            let res_ptr = if nulls == 1 || huge {
                std::ptr::null()
            } else {
                name.as_ptr()
            };
            let mut lease: *mut ffi::redlock_lease = std::ptr::null_mut();
            let out: *mut *mut ffi::redlock_lease = if nulls == 2 {
                std::ptr::null_mut()
            } else {
                &mut lease
            };
            let expect = if mgr.is_null() || out.is_null() || (res_ptr.is_null() && len > 0) {
                Some(REDLOCK_STATUS_NULL_ARGUMENT)
            } else if len == 0 || len > redlock::MAX_RESOURCE_LEN || !(3..=10_000).contains(&ttl) {
                Some(REDLOCK_STATUS_INVALID_ARGUMENT)
            } else {
                None
            };
            if expect.is_none() && fill % 8 != 0 {
                // A valid request goes to the network; keep those to one in eight.
                return Ok(());
            }
            let mut err = ErrBuf::new(err_len, err_null);
            // SAFETY: `mgr` NULL or live; `res_ptr` NULL or `len` readable bytes (a NULL
            // pointer with a length is the case under test and is checked before any read);
            // `out` NULL or writable; `err` NULL or `err_len` writable bytes.
            let st =
                unsafe { ffi::redlock_try_lock(mgr, res_ptr, len, ttl, out, err.ptr(), err_len) };
            let msg = err.check(st)?;
            match expect {
                Some(want) => prop_assert_eq!(st, want, "{}", msg),
                None => prop_assert_eq!(st, REDLOCK_STATUS_UNAVAILABLE, "{}", msg),
            }
            prop_assert!(lease.is_null(), "a lease written on failure");
            Ok(())
        },
    );
    // SAFETY: from redlock_manager_new, freed once, no call in progress.
    unsafe { ffi::redlock_manager_free(mgr) };
}
