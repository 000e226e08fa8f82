//! One connection to one node: a non-blocking socket, its output buffer, and the reply reader.
//!
//! This is the only module that uses `socket2`. A connection knows bytes and replies, not
//! which caller a reply belongs to (that is the link's job), and not what a command means.
//!
//! A new connection writes its handshake (`AUTH`, `SELECT`, `SCRIPT LOAD`, `INFO`) first and
//! holds every command queued behind it until the link reports the handshake done: a command
//! must never run on a connection whose `AUTH` or `SELECT` failed, where it would act in the
//! wrong database or as the wrong user. That costs one round trip per new connection, never
//! per step.
//!
//! A `rediss://` connection puts the node's TLS session ([`crate::tls::Session`]) between the
//! buffers and the socket: the output buffer holds TLS records (so writers outside the lock
//! write bytes as before), and the reply reader reads what the session decrypts. Its TLS
//! handshake is one more phase of connecting: the handshake's records go out and come in
//! through the same buffers and the same `poll(2)` as commands, and the Redis handshake is
//! queued behind it. So a node whose TLS handshake hangs costs its callers nothing more than
//! a node whose TCP connect hangs: its deadline.
//!
//! A plain Redis server on the port of a `rediss://` URL reads the ClientHello as the start of
//! an inline command and waits, silent, for its end (a line end that comes after a NUL byte,
//! which it never looks past): the handshake alone would only time out. So a TLS handshake
//! that has received nothing by the time the link asks ([`probe`](Conn::probe), halfway
//! through the connect timeout) gets a *probe*: a second, plain connection to the same
//! address that sends `PING`. An answer in RESP (`+PONG`, `-NOAUTH …`) proves the node does
//! not speak TLS, and the connection fails at once saying so; anything else (a TLS server
//! refuses the bytes and closes) proves nothing, and the handshake goes on untouched. A node
//! whose first bytes in the handshake are RESP is told apart the same way, at once.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use socket2::{Domain, Protocol, Socket, Type};

use crate::error::NodeOutcome;
use crate::mux::{Interest, Readiness};
use crate::park;
use crate::resp::{ReadError, Reply, ReplyReader};
use crate::tls;

/// More unanswered bytes than this from one node between two replies is a protocol error: our
/// replies are tiny, so only a broken or hostile node sends this much.
const MAX_REPLY_BYTES: usize = 4 << 20;

/// More queued outgoing bytes than this to one node means it stopped reading.
const MAX_QUEUED_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The TCP connect is in progress.
    Connecting,
    /// Connected; the TLS handshake is in progress (`rediss://` only).
    Tls,
    /// Connected; the handshake's replies have not all arrived.
    Handshake,
    /// Commands may be written.
    Ready,
}

/// One connection to one node.
///
/// Its methods never block and, apart from connecting and reading, make no system call: the
/// link queues commands with [`send`](Self::send) under its lock, and one writer at a time
/// takes the queued bytes ([`take_output`](Self::take_output)), writes them outside the lock
/// ([`write_some`]) and gives back what the socket did not take
/// ([`put_back`](Self::put_back)). Commands queued meanwhile by other callers go out with the
/// writer's next batch.
pub(crate) struct Conn {
    sock: Arc<Socket>,
    phase: Phase,
    /// Bytes waiting to be written, in order.
    out: Vec<u8>,
    /// An empty buffer to swap with `out` when a writer takes it (no allocation per write).
    spare: Vec<u8>,
    /// A writer holds bytes taken from `out` (they go before whatever `out` holds now).
    writing: bool,
    /// Commands queued before the handshake completed.
    held: Vec<u8>,
    reader: ReplyReader,
    bytes_since_reply: usize,
    /// The handshake's replies have not all arrived yet.
    handshake_pending: bool,
    /// The TLS session, for a `rediss://` node: `out` then holds its records.
    tls: Option<tls::Session>,
    /// On a TLS connection, commands queued since the last write, encrypted when a writer
    /// takes the output: what was queued together goes out as one record, not one each.
    plain: Vec<u8>,
    /// The handshake's commands, while the TLS handshake they go behind is in progress.
    early: Vec<u8>,
    /// The node's address, for a probe.
    addr: Option<SocketAddr>,
    /// The first byte the node sent on this connection, if any.
    first: Option<u8>,
    /// A TLS handshake that has received nothing is probed from this time on (at most once).
    probe_at: Option<Instant>,
    /// The probe in progress, if any.
    probe: Option<Probe>,
}

/// What a node that does not speak TLS is told by.
const NOT_TLS: &str = "the node does not speak TLS (it answered in plain RESP): is this its \
     TLS port? (plain nodes are redis://)";

/// The first byte of every RESP reply (RESP2 and RESP3).
fn is_resp(b: u8) -> bool {
    b"+-:$*_,#!=(%~>|".contains(&b)
}

impl Conn {
    /// Starts a non-blocking connect to `addr` and queues `handshake`, to be written as soon
    /// as the connection is established: over TLS with `tls` (after the TLS handshake, whose
    /// first records are queued now), else in plain.
    pub(crate) fn connect(
        addr: SocketAddr,
        handshake: &[u8],
        tls: Option<&tls::Client>,
    ) -> io::Result<Conn> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_nonblocking(true)?;
        sock.set_tcp_nodelay(true)?;
        let connected = match sock.connect(&addr.into()) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
            Err(e) => return Err(e),
        };
        let mut c = Conn::new(sock, Phase::Connecting);
        c.addr = Some(addr);
        match tls {
            Some(client) => {
                let mut session = client.session()?;
                session.flush(&mut c.out); // the ClientHello
                c.tls = Some(session);
                c.early.extend_from_slice(handshake);
            }
            None => c.out.extend_from_slice(handshake),
        }
        c.handshake_pending = !handshake.is_empty();
        if connected {
            c.established();
        }
        Ok(c)
    }

    fn new(sock: Socket, phase: Phase) -> Conn {
        park::opened();
        Conn {
            sock: Arc::new(sock),
            phase,
            out: Vec::new(),
            spare: Vec::new(),
            writing: false,
            held: Vec::new(),
            reader: ReplyReader::new(),
            bytes_since_reply: 0,
            handshake_pending: false,
            tls: None,
            plain: Vec::new(),
            early: Vec::new(),
            addr: None,
            first: None,
            probe_at: None,
            probe: None,
        }
    }

    /// On a TLS connection, probes the node from `at` on if its TLS handshake has received
    /// nothing by then (see the module's documentation).
    pub(crate) fn probe_from(&mut self, at: Instant) {
        if self.tls.is_some() {
            self.probe_at = Some(at);
        }
    }

    /// When the connection wants [`probe`](Self::probe) called though nothing is ready: the
    /// time its probe is due, while the TLS handshake has received nothing and no probe was
    /// started.
    pub(crate) fn probe_due(&self) -> Option<Instant> {
        self.probe_at
            .filter(|_| self.phase == Phase::Tls && self.first.is_none())
    }

    /// The probe's descriptor and what to wait for, while one is in progress.
    pub(crate) fn probe_interest(&self) -> Option<(RawFd, Interest)> {
        self.probe.as_ref().map(Probe::interest)
    }

    /// Starts the probe if it is due at `now`, and moves it on (never waits). `Some(why)`:
    /// the node does not speak TLS, the connection is done for.
    pub(crate) fn probe(&mut self, now: Instant) -> Option<String> {
        if self.probe_due().is_some_and(|at| at <= now) {
            self.probe_at = None;
            self.probe = self.addr.and_then(|a| Probe::start(a).ok());
        }
        if self.first.is_some() {
            self.probe = None; // the handshake has an answer of its own
        }
        let verdict = self.probe.as_mut()?.step();
        match verdict {
            Some(true) => Some(NOT_TLS.into()),
            Some(false) => {
                self.probe = None; // it proved nothing
                None
            }
            None => None,
        }
    }

    /// A ready connection over an already connected socket (tests use socket pairs).
    #[cfg(test)]
    pub(crate) fn from_socket(sock: Socket) -> Conn {
        sock.set_nonblocking(true).unwrap();
        Conn::new(sock, Phase::Ready)
    }

    fn established(&mut self) {
        if self.phase == Phase::Connecting {
            self.phase = if self.tls.is_some() {
                Phase::Tls
            } else {
                Phase::Handshake
            };
        }
        if !self.handshake_pending {
            self.handshake_done();
        }
    }

    /// After a read: once the TLS handshake has completed, the handshake's commands go out
    /// (and, with none, what was held).
    fn tls_progress(&mut self) {
        if self.phase != Phase::Tls || self.tls.as_ref().is_none_or(|t| t.is_handshaking()) {
            return;
        }
        self.phase = Phase::Handshake;
        let early = std::mem::take(&mut self.early);
        self.push_out(&early);
        if !self.handshake_pending {
            self.handshake_done();
        }
    }

    /// Appends bytes to the output (on a TLS connection, to what the next writer encrypts);
    /// returns how much waits to be written.
    fn push_out(&mut self, bytes: &[u8]) -> usize {
        let buf = if self.tls.is_some() {
            &mut self.plain
        } else {
            &mut self.out
        };
        buf.extend_from_slice(bytes);
        self.out.len() + self.plain.len()
    }

    /// Encrypts what waits in `plain` into records at the end of `out`.
    fn seal(&mut self) -> io::Result<()> {
        match &mut self.tls {
            Some(t) if !self.plain.is_empty() => {
                let r = t.write(&self.plain, &mut self.out);
                self.plain.clear();
                r
            }
            _ => Ok(()),
        }
    }

    /// True until the handshake has completed.
    pub(crate) fn is_starting(&self) -> bool {
        self.phase != Phase::Ready
    }

    /// True while bytes wait to be written (held behind the handshake, queued, or taken by a
    /// writer that has not given the rest back).
    pub(crate) fn has_output(&self) -> bool {
        !self.out.is_empty() || !self.plain.is_empty() || !self.held.is_empty() || self.writing
    }

    /// The handshake's replies have all arrived and none failed: what was held may go out.
    pub(crate) fn handshake_done(&mut self) {
        self.handshake_pending = false;
        if self.phase == Phase::Handshake {
            self.phase = Phase::Ready;
            if !self.held.is_empty() {
                let held = std::mem::take(&mut self.held);
                self.push_out(&held);
            }
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// What to poll for: writability while connecting or while bytes wait that no writer has
    /// taken, and always readability once connected.
    pub(crate) fn interest(&self) -> Interest {
        if self.phase == Phase::Connecting {
            return Interest {
                read: false,
                write: true,
            };
        }
        Interest {
            read: true,
            write: (!self.out.is_empty() || !self.plain.is_empty()) && !self.writing,
        }
    }

    /// Queues a command: for the next write when the connection is ready, held until the
    /// handshake completes otherwise.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let queued = if self.phase == Phase::Ready {
            self.push_out(bytes)
        } else {
            self.held.extend_from_slice(bytes);
            self.held.len()
        };
        if queued > MAX_QUEUED_BYTES {
            return Err(io::Error::other("the node stopped reading its socket"));
        }
        Ok(())
    }

    /// Takes the commands held behind the handshake: a failover group's connection to a
    /// sentinel hands them on to the next connection (another sentinel's, or the master's).
    pub(crate) fn take_held(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    /// Queues one more handshake command, written at once (after the handshake's other
    /// commands, ahead of everything held behind them): a reply to the handshake asked for it.
    pub(crate) fn send_handshake(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.push_out(bytes) > MAX_QUEUED_BYTES {
            return Err(io::Error::other("the node stopped reading its socket"));
        }
        Ok(())
    }

    /// Queues a command ahead of those held behind the handshake (written right after the
    /// handshake itself); on a ready connection, the same as [`send`](Self::send).
    pub(crate) fn send_first(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.phase == Phase::Ready {
            return self.send(bytes);
        }
        self.held.splice(0..0, bytes.iter().copied());
        Ok(())
    }

    /// Takes the bytes waiting to be written (on a TLS connection, the commands queued since
    /// the last write sealed into records first), with the socket to write them to, unless the
    /// connection is still connecting, nothing waits, or another writer is at it. `Err`: the
    /// TLS session refused the data.
    pub(crate) fn take_output(&mut self) -> io::Result<Option<(Arc<Socket>, Vec<u8>)>> {
        if self.phase == Phase::Connecting || self.writing {
            return Ok(None);
        }
        self.seal()?;
        if self.out.is_empty() {
            return Ok(None);
        }
        self.writing = true;
        let spare = std::mem::take(&mut self.spare);
        Ok(Some((
            Arc::clone(&self.sock),
            std::mem::replace(&mut self.out, spare),
        )))
    }

    /// The writer is done with `buf`, of which the socket took the first `sent` bytes: the
    /// rest goes back ahead of anything queued meanwhile.
    pub(crate) fn put_back(&mut self, mut buf: Vec<u8>, sent: usize) -> io::Result<()> {
        self.writing = false;
        if sent < buf.len() {
            self.out.splice(0..0, buf[sent..].iter().copied());
            if self.out.len() > MAX_QUEUED_BYTES {
                return Err(io::Error::other("the node stopped reading its socket"));
            }
        }
        buf.clear();
        self.spare = buf;
        Ok(())
    }

    /// Completes a connect that `poll(2)` reported writable (or in error). Writing is left to
    /// [`take_output`](Self::take_output), reading to [`next_reply`](Self::next_reply).
    pub(crate) fn on_writable(&mut self, ready: Readiness) -> io::Result<()> {
        if self.phase == Phase::Connecting && (ready.writable || ready.error) {
            if let Some(e) = self.sock.take_error()? {
                return Err(e);
            }
            self.established();
        }
        Ok(())
    }

    /// Reads the next complete reply, if one has arrived (never waits). On a TLS connection
    /// this also moves the TLS handshake on: what the node sent is processed, and what the
    /// session must answer is queued for the next write.
    pub(crate) fn next_reply(&mut self) -> Result<Option<Reply>, ReadError> {
        if self.phase == Phase::Connecting {
            return Ok(None);
        }
        let mut limited = Limited {
            sock: &self.sock,
            used: &mut self.bytes_since_reply,
            first: &mut self.first,
        };
        let r = match &mut self.tls {
            None => self.reader.next(&mut limited),
            Some(session) => self.reader.next(Decrypted {
                session,
                sock: limited,
                out: &mut self.out,
            }),
        };
        let r = match r {
            // Not a TLS record: a plain server's reply.
            Err(ReadError::Io(e))
                if self.phase == Phase::Tls
                    && tls::failure(&e).is_some()
                    && self.first.is_some_and(is_resp) =>
            {
                Err(ReadError::Tls(NOT_TLS.into()))
            }
            Err(ReadError::Io(e)) => Err(match tls::failure(&e) {
                Some(why) => ReadError::Tls(why),
                None => ReadError::Io(e),
            }),
            Err(ReadError::Closed) if self.phase == Phase::Tls => Err(ReadError::Tls(
                "the node closed the connection during the TLS handshake (is this its TLS \
                 port? does it want a client certificate this client lacks?)"
                    .into(),
            )),
            other => other,
        };
        if let Ok(Some(_)) = r {
            self.bytes_since_reply = 0;
        }
        if r.is_ok() {
            self.tls_progress();
        }
        r
    }
}

/// The plaintext of a TLS connection, as a reader for the reply reader.
struct Decrypted<'a> {
    session: &'a mut tls::Session,
    sock: Limited<'a>,
    out: &'a mut Vec<u8>,
}

impl Read for Decrypted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.session.read(&mut self.sock, buf, self.out)
    }
}

/// Writes as much of `bytes` as the socket takes now; returns how much that was.
pub(crate) fn write_some(sock: &Socket, bytes: &[u8]) -> io::Result<usize> {
    let mut pos = 0;
    while pos < bytes.len() {
        // MSG_NOSIGNAL: a write to a connection the node closed must be an error here, not a
        // SIGPIPE that kills the host process (C, Python and Go hosts do not all ignore it).
        match sock.send_with_flags(&bytes[pos..], libc::MSG_NOSIGNAL) {
            Ok(n) => pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(pos)
}

/// A socket reader that refuses to deliver more than [`MAX_REPLY_BYTES`] between two replies,
/// and notes the connection's first byte.
struct Limited<'a> {
    sock: &'a Socket,
    used: &'a mut usize,
    first: &'a mut Option<u8>,
}

impl Read for Limited<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if *self.used >= MAX_REPLY_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply larger than 4 MiB",
            ));
        }
        loop {
            match (&*self.sock).read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(n) => {
                    *self.used += n;
                    if n > 0 && self.first.is_none() {
                        *self.first = Some(buf[0]);
                    }
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A plain connection that asks a node whether it speaks RESP: `PING`, and the first byte of
/// the answer.
struct Probe {
    sock: Socket,
    sent: bool,
}

impl Probe {
    fn start(addr: SocketAddr) -> io::Result<Probe> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        park::opened();
        sock.set_nonblocking(true)?;
        match sock.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        Ok(Probe { sock, sent: false })
    }

    fn interest(&self) -> (RawFd, Interest) {
        let interest = Interest {
            read: self.sent,
            write: !self.sent,
        };
        (self.sock.as_raw_fd(), interest)
    }

    /// Moves on without waiting: `Some(true)`, the node answered in RESP; `Some(false)`, it
    /// did something else (refused, closed, answered otherwise); `None`, not yet.
    fn step(&mut self) -> Option<bool> {
        if !self.sent {
            if !matches!(self.sock.take_error(), Ok(None)) {
                return Some(false);
            }
            if self.sock.peer_addr().is_err() {
                return None; // still connecting
            }
            // Six bytes on a new connection: the socket takes them whole.
            match self.sock.send_with_flags(b"PING\r\n", libc::MSG_NOSIGNAL) {
                Ok(6) => self.sent = true,
                _ => return Some(false),
            }
        }
        let mut b = [0u8; 1];
        match (&self.sock).read(&mut b) {
            Ok(1) => Some(is_resp(b[0])),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                None
            }
            _ => Some(false),
        }
    }
}

/// The outcome a socket error stands for.
pub(crate) fn unreachable_from(e: &io::Error) -> NodeOutcome {
    let text = match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        io::ErrorKind::ConnectionReset => "connection reset".to_string(),
        io::ErrorKind::BrokenPipe => "connection closed by the node".to_string(),
        io::ErrorKind::InvalidData => format!("protocol error: {e}"),
        _ => e.to_string(),
    };
    if e.kind() == io::ErrorKind::InvalidData {
        NodeOutcome::Protocol(text)
    } else {
        NodeOutcome::Unreachable(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::os::unix::net::UnixStream;

    #[test]
    fn commands_wait_for_the_handshake() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Conn::connect(l.local_addr().unwrap(), b"HS\r\n", None).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        c.send(b"CMD\r\n").unwrap();
        assert!(c.is_starting());
        let ready = Readiness {
            readable: false,
            writable: true,
            error: false,
        };
        c.on_writable(ready).unwrap();
        let write = |c: &mut Conn| {
            let (sock, buf) = c.take_output().unwrap().expect("bytes to write");
            let n = write_some(&sock, &buf).unwrap();
            c.put_back(buf, n).unwrap();
        };
        write(&mut c);
        let mut buf = [0u8; 4];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"HS\r\n");
        // Nothing more until the handshake is done.
        assert!(c.take_output().unwrap().is_none());
        c.handshake_done();
        assert!(!c.is_starting());
        write(&mut c);
        let mut buf = [0u8; 5];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"CMD\r\n");
    }

    #[test]
    fn one_writer_at_a_time_and_unsent_bytes_keep_their_place() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut c = Conn::from_socket(Socket::from(a));
        c.send(b"one ").unwrap();
        let (sock, buf) = c.take_output().unwrap().unwrap();
        // Queued while the first writer holds its batch: it waits for the next one.
        c.send(b"two ").unwrap();
        assert!(c.take_output().unwrap().is_none() && !c.interest().write);
        // The socket took only two bytes: the rest goes back ahead of "two ".
        let n = write_some(&sock, &buf[..2]).unwrap();
        c.put_back(buf, n).unwrap();
        let (sock, buf) = c.take_output().unwrap().unwrap();
        assert_eq!(buf, b"e two ");
        let n = write_some(&sock, &buf).unwrap();
        c.put_back(buf, n).unwrap();
        assert!(!c.has_output());
        let mut got = [0u8; 8];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"one two ");
    }

    /// Steps `p` until it has a verdict (bounded: a loopback peer that has answered).
    fn verdict(p: &mut Probe) -> Option<bool> {
        for _ in 0..5000 {
            if let Some(v) = p.step() {
                return Some(v);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        None
    }

    #[test]
    fn a_probe_tells_a_resp_answer_from_anything_else() {
        // What the peer answers `PING` with, and whether that is RESP.
        let cases: [(&[u8], bool); 4] = [
            (b"+PONG\r\n", true),
            (b"-NOAUTH Authentication required.\r\n", true),
            (b"\x15\x03\x03\x00\x02\x02\x46", false), // a TLS alert record
            (b"", false),                             // closed without a word
        ];
        for (answer, resp) in cases {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut p = Probe::start(l.local_addr().unwrap()).unwrap();
            let (mut peer, _) = l.accept().unwrap();
            // Accepted, so connected: the first step sends `PING`, and nothing is back yet.
            assert_eq!(p.step(), None);
            assert!(p.sent);
            let mut ping = [0u8; 6];
            peer.read_exact(&mut ping).unwrap();
            assert_eq!(&ping, b"PING\r\n");
            peer.write_all(answer).unwrap();
            drop(peer);
            assert_eq!(verdict(&mut p), Some(resp), "{answer:?}");
        }
    }

    #[test]
    fn every_descriptor_a_wait_may_name_is_counted_as_opened() {
        // A park that remembers descriptors by number relies on this count to tell a number
        // reused by a new connection. Other tests open descriptors too: the count only grows.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let before = park::descriptors_opened();
        let _c = Conn::connect(l.local_addr().unwrap(), b"", None).unwrap();
        let after_connect = park::descriptors_opened();
        assert!(after_connect > before, "a connection's socket");
        let _p = Probe::start(l.local_addr().unwrap()).unwrap();
        assert!(
            park::descriptors_opened() > after_connect,
            "a probe's socket"
        );
    }

    #[test]
    fn replies_are_limited_and_eof_is_closed() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut c = Conn::from_socket(Socket::from(a));
        assert!(matches!(c.next_reply(), Ok(None)));
        b.write_all(b":1\r\n").unwrap();
        assert_eq!(c.next_reply().unwrap(), Some(Reply::Int(1)));
        drop(b);
        assert!(matches!(c.next_reply(), Err(ReadError::Closed)));
    }
}
