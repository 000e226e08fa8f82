//! RESP encoding, reply parsing, script hashing and URL parsing.
//!
//! This is the only module that imports the `redis` crate. It knows nothing of time or sockets:
//! replies are read from any [`Read`], and a reader that answers `WouldBlock` simply means "no
//! complete reply yet" (the parser keeps its partial state and resumes on the next call).

use std::io::{self, Read};

/// One reply from a Redis server, reduced to what this library needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+OK`.
    Ok,
    /// A null bulk string or null array.
    Nil,
    /// `:n`.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// A status reply other than `OK`.
    Status(String),
    /// An error reply: its code (`ERR`, `NOSCRIPT`, `WRONGPASS`, …) and the full text.
    Error { code: String, text: String },
    /// An array of replies.
    Array(Vec<Reply>),
    /// Any other RESP3 type (never sent to a RESP2 client); kept for diagnostics.
    Other(String),
}

impl Reply {
    /// True when this is an error reply whose code is `code`.
    pub(crate) fn is_error_code(&self, code: &str) -> bool {
        matches!(self, Reply::Error { code: c, .. } if c == code)
    }

    /// A short human-readable form, for error messages (never longer than about 120 bytes).
    pub(crate) fn describe(&self) -> String {
        let s = match self {
            Reply::Ok => "+OK".to_string(),
            Reply::Nil => "nil".to_string(),
            Reply::Int(n) => format!("integer {n}"),
            Reply::Bulk(b) => format!("bulk string of {} bytes", b.len()),
            Reply::Status(s) => format!("status {s}"),
            Reply::Error { text, .. } => text.clone(),
            Reply::Array(a) => format!("array of {} elements", a.len()),
            Reply::Other(s) => s.clone(),
        };
        truncate_chars(s, 120)
    }
}

fn truncate_chars(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

fn convert(v: redis::Value) -> Reply {
    use redis::Value as V;
    match v {
        V::Okay => Reply::Ok,
        V::Nil => Reply::Nil,
        V::Int(n) => Reply::Int(n),
        V::BulkString(b) => Reply::Bulk(b),
        V::SimpleString(s) if s == "OK" => Reply::Ok,
        V::SimpleString(s) => Reply::Status(s),
        V::Array(a) => Reply::Array(a.into_iter().map(convert).collect()),
        V::ServerError(e) => {
            let code = e.code().to_string();
            let text = match e.details() {
                Some(d) if !d.is_empty() => format!("{code} {d}"),
                _ => code.clone(),
            };
            Reply::Error { code, text }
        }
        other => Reply::Other(format!("unexpected RESP3 reply {other:?}")),
    }
}

/// Why a reply could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection.
    Closed,
    /// A socket error.
    Io(io::Error),
    /// Bytes that are not RESP.
    Protocol(String),
}

/// An incremental reply reader: one per connection, for the connection's whole life.
pub(crate) struct ReplyReader {
    parser: redis::Parser,
}

impl ReplyReader {
    pub(crate) fn new() -> Self {
        ReplyReader {
            parser: redis::Parser::new(),
        }
    }

    /// Reads the next complete reply. `Ok(None)` means the reader returned `WouldBlock` before a
    /// whole reply arrived; the partial state is kept and the next call resumes it.
    pub(crate) fn next<R: Read>(&mut self, reader: R) -> Result<Option<Reply>, ReadError> {
        let mut tracked = Tracked {
            inner: reader,
            error: None,
        };
        match self.parser.parse_value(&mut tracked) {
            Ok(v) => Ok(Some(convert(v))),
            Err(e) => match tracked.error {
                Some((io::ErrorKind::WouldBlock, _)) => Ok(None),
                Some((kind, text)) => Err(ReadError::Io(io::Error::new(kind, text))),
                None if e.is_io_error() => Err(ReadError::Closed),
                None => Err(ReadError::Protocol(truncate_chars(e.to_string(), 160))),
            },
        }
    }
}

/// Remembers the last error the underlying reader returned, so that `WouldBlock` ("no more
/// bytes for now") is told apart from a closed connection and from bytes that are not RESP.
struct Tracked<R> {
    inner: R,
    error: Option<(io::ErrorKind, String)>,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            self.error = Some((e.kind(), e.to_string()));
        })
    }
}

/// Encodes one command (`args[0]` is the command name) as a RESP array of bulk strings.
pub(crate) fn pack(args: &[&[u8]], out: &mut Vec<u8>) {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    cmd.write_packed_command(out);
}

/// The SHA1 hex digest Redis uses to name a script in `EVALSHA`.
pub(crate) fn script_sha(source: &str) -> String {
    redis::Script::new(source).get_hash().to_string()
}

/// The parts of a node URL this library uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlParts {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
}

/// Parses `redis://[user:password@]host[:port][/db]` or `host:port`.
pub(crate) fn parse_url(input: &str) -> Result<UrlParts, String> {
    use redis::IntoConnectionInfo;
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err("empty node address".into());
    }
    if trimmed.len() != input.len() {
        return Err("node address has leading or trailing whitespace".into());
    }
    let with_scheme = if input.contains("://") {
        input.to_string()
    } else {
        // `host:port` without a scheme: a port is then required, so that a typo such as
        // "127.0.0.1" does not silently mean the default port.
        match input.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && !p.is_empty() => format!("redis://{input}"),
            _ => return Err("expected redis://host:port or host:port".into()),
        }
    };
    let scheme = with_scheme.split("://").next().unwrap_or_default();
    if scheme != "redis" {
        return Err(format!(
            "unsupported scheme {scheme:?}: only redis:// (plain TCP) is supported"
        ));
    }
    if with_scheme.contains('?') {
        return Err("query parameters are not supported in node URLs".into());
    }
    if with_scheme.contains('#') {
        return Err("fragments are not supported in node URLs".into());
    }
    let info = with_scheme
        .as_str()
        .into_connection_info()
        .map_err(|e| redact_redis_error(&e.to_string()))?;
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
        _ => return Err("only TCP addresses are supported".into()),
    };
    if port == 0 {
        return Err("port 0 is not a valid node port".into());
    }
    if host.is_empty() {
        return Err("missing host".into());
    }
    // The URL crate silently uses 6379 when the port is missing; require it to be explicit
    // unless the URL really has no port (then 6379 is the documented Redis default).
    let settings = info.redis_settings();
    let db = settings.db();
    if db < 0 {
        return Err(format!("invalid database number {db}"));
    }
    Ok(UrlParts {
        host,
        port,
        username: settings.username().map(str::to_string),
        password: settings.password().map(str::to_string),
        db,
    })
}

// redis-rs error texts never contain the URL, but be defensive: keep only the description.
fn redact_redis_error(s: &str) -> String {
    let s = s.split(" - ").next().unwrap_or(s);
    format!("malformed node URL: {s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader over a fixed byte slice that hands out at most `step` bytes per call and then
    /// answers `WouldBlock` at the end instead of EOF, like a non-blocking socket.
    struct Trickle<'a> {
        data: &'a [u8],
        pos: usize,
        step: usize,
        limit: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let end = self.limit.min(self.data.len());
            if self.pos >= end {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.step).min(end - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    const STREAM: &[u8] = b"+OK\r\n$-1\r\n:1\r\n:0\r\n$5\r\nab\r\nc\r\n-NOSCRIPT No matching script\r\n*2\r\n:7\r\n$0\r\n\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

    fn expected() -> Vec<Reply> {
        vec![
            Reply::Ok,
            Reply::Nil,
            Reply::Int(1),
            Reply::Int(0),
            Reply::Bulk(b"ab\r\nc".to_vec()),
            Reply::Error {
                code: "NOSCRIPT".into(),
                text: "NOSCRIPT No matching script".into(),
            },
            Reply::Array(vec![Reply::Int(7), Reply::Bulk(vec![])]),
            Reply::Error {
                code: "WRONGTYPE".into(),
                text: "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            },
        ]
    }

    fn read_all(step: usize) -> Vec<Reply> {
        let mut r = ReplyReader::new();
        let mut src = Trickle {
            data: STREAM,
            pos: 0,
            step,
            limit: usize::MAX,
        };
        let mut out = Vec::new();
        let mut idle = 0;
        while out.len() < expected().len() {
            match r.next(&mut src).unwrap() {
                Some(v) => out.push(v),
                None => {
                    idle += 1;
                    assert!(idle < 10_000, "reader made no progress");
                }
            }
        }
        assert!(r.next(&mut src).unwrap().is_none());
        out
    }

    #[test]
    fn parses_a_whole_stream() {
        assert_eq!(read_all(usize::MAX), expected());
    }

    #[test]
    fn parses_byte_by_byte() {
        assert_eq!(read_all(1), expected());
    }

    #[test]
    fn resumes_after_a_split_at_every_offset() {
        for split in 0..=STREAM.len() {
            let mut r = ReplyReader::new();
            let mut src = Trickle {
                data: STREAM,
                pos: 0,
                step: usize::MAX,
                limit: split,
            };
            let mut out = Vec::new();
            while let Some(v) = r.next(&mut src).unwrap() {
                out.push(v);
            }
            // Everything before the split that forms whole replies was delivered.
            assert!(out.len() <= expected().len());
            src.limit = usize::MAX;
            while let Some(v) = r.next(&mut src).unwrap() {
                out.push(v);
            }
            assert_eq!(out, expected(), "split at {split}");
        }
    }

    #[test]
    fn eof_is_closed_and_garbage_is_a_protocol_error() {
        let mut r = ReplyReader::new();
        assert!(matches!(r.next(&b""[..]), Err(ReadError::Closed)));
        let mut r = ReplyReader::new();
        assert!(matches!(r.next(&b"+OK\r"[..]), Err(ReadError::Closed)));
        let mut r = ReplyReader::new();
        assert!(matches!(
            r.next(&b"?what\r\n"[..]),
            Err(ReadError::Protocol(_))
        ));
    }

    #[test]
    fn packs_binary_arguments() {
        let mut out = Vec::new();
        pack(&[b"SET", b"a\0\r\nb", b"\xff"], &mut out);
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$5\r\na\0\r\nb\r\n$1\r\n\xff\r\n".to_vec()
        );
    }

    #[test]
    fn script_sha_matches_redis() {
        // `redis-cli SCRIPT LOAD "return 1"` prints this digest.
        assert_eq!(
            script_sha("return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn url_forms() {
        let p = parse_url("redis://127.0.0.1:7001").unwrap();
        assert_eq!((p.host.as_str(), p.port, p.db), ("127.0.0.1", 7001, 0));
        let p = parse_url("127.0.0.1:7002").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("127.0.0.1", 7002));
        let p = parse_url("redis://alice:s3cr%40t@localhost:7003/2").unwrap();
        assert_eq!(p.username.as_deref(), Some("alice"));
        assert_eq!(p.password.as_deref(), Some("s3cr@t"));
        assert_eq!(p.db, 2);
        let p = parse_url("redis://:pw@127.0.0.1:7004").unwrap();
        assert_eq!(p.username, None);
        assert_eq!(p.password.as_deref(), Some("pw"));
    }

    #[test]
    fn malformed_urls_are_rejected_without_leaking_passwords() {
        for bad in [
            "",
            " redis://127.0.0.1:1",
            "127.0.0.1",
            "redis://127.0.0.1:99999",
            "redis://127.0.0.1:0",
            "redis://127.0.0.1:abc",
            "rediss://127.0.0.1:7001",
            "unix:///tmp/redis.sock",
            "http://127.0.0.1:7001",
            "redis://127.0.0.1:7001/notadb",
            "redis://127.0.0.1:7001/-1",
            "redis://127.0.0.1:7001?protocol=resp3",
            "redis://user:hunter2@:7001",
            ":7001",
        ] {
            let e = parse_url(bad).expect_err(bad);
            assert!(!e.contains("hunter2"), "{e}");
        }
    }
}
