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

use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::mux::{Interest, Readiness};
use crate::resp::{ReadError, Reply, ReplyReader};

/// More unanswered bytes than this from one node between two replies is a protocol error: our
/// replies are tiny, so only a broken or hostile node sends this much.
const MAX_REPLY_BYTES: usize = 4 << 20;

/// More queued outgoing bytes than this to one node means it stopped reading.
const MAX_QUEUED_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The TCP connect is in progress.
    Connecting,
    /// Connected; the handshake's replies have not all arrived.
    Handshake,
    /// Commands may be written.
    Ready,
}

/// One connection to one node.
pub(crate) struct Conn {
    sock: Socket,
    phase: Phase,
    /// Bytes to write; `out[out_pos..]` is not yet written.
    out: Vec<u8>,
    out_pos: usize,
    /// Commands queued before the handshake completed.
    held: Vec<u8>,
    reader: ReplyReader,
    bytes_since_reply: usize,
    /// The handshake's replies have not all arrived yet.
    handshake_pending: bool,
}

impl Conn {
    /// Starts a non-blocking connect to `addr` and queues `handshake`, to be written as soon
    /// as the connection is established.
    pub(crate) fn connect(addr: SocketAddr, handshake: &[u8]) -> io::Result<Conn> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_nonblocking(true)?;
        sock.set_tcp_nodelay(true)?;
        let connected = match sock.connect(&addr.into()) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
            Err(e) => return Err(e),
        };
        let mut c = Conn {
            sock,
            phase: Phase::Connecting,
            out: handshake.to_vec(),
            out_pos: 0,
            held: Vec::new(),
            reader: ReplyReader::new(),
            bytes_since_reply: 0,
            handshake_pending: !handshake.is_empty(),
        };
        if connected {
            c.established()?;
        }
        Ok(c)
    }

    /// A ready connection over an already connected socket (tests use socket pairs).
    #[cfg(test)]
    pub(crate) fn from_socket(sock: Socket) -> Conn {
        sock.set_nonblocking(true).unwrap();
        Conn {
            sock,
            phase: Phase::Ready,
            out: Vec::new(),
            out_pos: 0,
            held: Vec::new(),
            reader: ReplyReader::new(),
            bytes_since_reply: 0,
            handshake_pending: false,
        }
    }

    fn established(&mut self) -> io::Result<()> {
        if self.phase == Phase::Connecting {
            self.phase = Phase::Handshake;
        }
        if self.handshake_pending {
            self.flush()
        } else {
            self.handshake_done()
        }
    }

    /// True until the handshake has completed.
    pub(crate) fn is_starting(&self) -> bool {
        self.phase != Phase::Ready
    }

    /// True while bytes wait to be written (held behind the handshake, or not yet taken by
    /// the socket).
    pub(crate) fn has_output(&self) -> bool {
        self.queued() > 0 || !self.held.is_empty()
    }

    /// The handshake's replies have all arrived and none failed: write what was held.
    pub(crate) fn handshake_done(&mut self) -> io::Result<()> {
        self.handshake_pending = false;
        if self.phase == Phase::Handshake {
            self.phase = Phase::Ready;
            if !self.held.is_empty() {
                let held = std::mem::take(&mut self.held);
                self.out.extend_from_slice(&held);
            }
        }
        self.flush()
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// What to poll for: writability while connecting or while bytes are queued, and always
    /// readability once connected.
    pub(crate) fn interest(&self) -> Interest {
        if self.phase == Phase::Connecting {
            return Interest {
                read: false,
                write: true,
            };
        }
        Interest {
            read: true,
            write: self.queued() > 0,
        }
    }

    /// Queues a command: written now (as far as the socket takes it) when the connection is
    /// ready, held until the handshake completes otherwise.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.phase == Phase::Ready {
            self.out.extend_from_slice(bytes);
            self.flush()
        } else {
            self.held.extend_from_slice(bytes);
            Ok(())
        }
    }

    fn queued(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Writes as much of the output buffer as the socket takes now.
    fn flush(&mut self) -> io::Result<()> {
        if self.phase == Phase::Connecting {
            return Ok(());
        }
        while self.out_pos < self.out.len() {
            // MSG_NOSIGNAL: a write to a connection the node closed must be an error here,
            // not a SIGPIPE that kills the host process (C, Python and Go hosts do not all
            // ignore it).
            match self
                .sock
                .send_with_flags(&self.out[self.out_pos..], libc::MSG_NOSIGNAL)
            {
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        } else if self.queued() > MAX_QUEUED_BYTES {
            return Err(io::Error::other("the node stopped reading its socket"));
        }
        Ok(())
    }

    /// Handles what `poll(2)` reported for writing: completes a connect, flushes. Reading is
    /// left to [`next_reply`](Self::next_reply).
    pub(crate) fn on_writable(&mut self, ready: Readiness) -> io::Result<()> {
        if self.phase == Phase::Connecting {
            if !(ready.writable || ready.error) {
                return Ok(());
            }
            if let Some(e) = self.sock.take_error()? {
                return Err(e);
            }
            return self.established();
        }
        if ready.writable && self.queued() > 0 {
            self.flush()?;
        }
        Ok(())
    }

    /// Reads the next complete reply, if one has arrived (never waits).
    pub(crate) fn next_reply(&mut self) -> Result<Option<Reply>, ReadError> {
        if self.phase == Phase::Connecting {
            return Ok(None);
        }
        let mut limited = Limited {
            sock: &self.sock,
            used: &mut self.bytes_since_reply,
        };
        let r = self.reader.next(&mut limited);
        if let Ok(Some(_)) = r {
            self.bytes_since_reply = 0;
        }
        r
    }
}

/// A socket reader that refuses to deliver more than [`MAX_REPLY_BYTES`] between two replies.
struct Limited<'a> {
    sock: &'a Socket,
    used: &'a mut usize,
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
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
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
        let mut c = Conn::connect(l.local_addr().unwrap(), b"HS\r\n").unwrap();
        let (mut peer, _) = l.accept().unwrap();
        c.send(b"CMD\r\n").unwrap();
        assert!(c.is_starting());
        let ready = Readiness {
            readable: false,
            writable: true,
            error: false,
        };
        c.on_writable(ready).unwrap();
        let mut buf = [0u8; 4];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"HS\r\n");
        // Nothing more until the handshake is done.
        peer.set_nonblocking(true).unwrap();
        assert!(peer.read(&mut buf).is_err());
        c.handshake_done().unwrap();
        assert!(!c.is_starting());
        peer.set_nonblocking(false).unwrap();
        let mut buf = [0u8; 5];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"CMD\r\n");
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
