//! Connections to the nodes: non-blocking connect, handshake, write and read buffers, and the
//! bookkeeping that keeps every reply matched to the command that asked for it.
//!
//! This is the only module that uses `socket2`. A [`ConnSet`] holds one connection per node and
//! runs one *step*: the same command written to every node, replies read as they arrive, until
//! the caller's `decided` says the outcome is known or every node has answered or timed out.
//!
//! A reply that arrives after its step ended is not lost track of: the connection counts the
//! replies it still owes and discards exactly that many before handing anything to a later
//! step. Replies are in order on a connection, so a late reply can never be taken for the
//! answer to a later command. A connection that owes a reply for longer than the stale limit is
//! closed instead (the node is hung or paused), and the node is reconnected with backoff.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::NodeAddr;
use crate::error::NodeOutcome;
use crate::mux::{self, Interest, Readiness, Source};
use crate::resp::{self, ReadError, Reply, ReplyReader};

/// More unanswered bytes than this from one node between two replies is a protocol error: our
/// replies are tiny, so only a broken or hostile node sends this much.
const MAX_REPLY_BYTES: usize = 4 << 20;

/// More queued outgoing bytes than this to one node means it stopped reading.
const MAX_QUEUED_BYTES: usize = 4 << 20;

/// Settings that apply to every connection of a manager.
#[derive(Clone, Debug)]
pub(crate) struct ConnSettings {
    pub connect_timeout: Duration,
    pub stale_limit: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

/// What a handshake command is for, and so what an error reply to it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hs {
    /// `AUTH`, `SELECT`, `SCRIPT LOAD`: an error makes the node unusable as configured.
    Required,
    /// `INFO server`: the node's identity and age; an error only disables restart detection.
    Info,
    /// `CONFIG GET appendonly|appendfsync`: an error only means the setting is unknown.
    Config,
}

/// A node's identity as of its last handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `run_id`: changes whenever the server process restarts.
    pub run_id: String,
    /// `uptime_in_seconds` (whole seconds, truncated by the server).
    pub uptime: Duration,
    /// When the reply was read (client monotonic clock): the uptime was at least `uptime` then.
    pub seen_at: Instant,
}

/// A configured node and its shared state: reconnect backoff and identity.
pub(crate) struct Node {
    pub index: usize,
    pub addr: NodeAddr,
    /// `addr` as text, passwords redacted (reports copy it rather than format it each time).
    pub addr_text: String,
    sockaddr: Option<SocketAddr>,
    handshake: Vec<u8>,
    handshake_kinds: Vec<Hs>,
    failures: AtomicU32,
    health: Mutex<Health>,
    identity: Mutex<Option<Identity>>,
    /// Restarts seen (a changed run_id on reconnect).
    restarts: AtomicU64,
    info_warned: AtomicBool,
    persistence: Mutex<Persistence>,
}

#[derive(Default)]
struct Persistence {
    appendonly: Option<String>,
    appendfsync: Option<String>,
    answered: usize,
    warned: bool,
}

#[derive(Default)]
struct Health {
    retry_at: Option<Instant>,
    last_error: String,
    /// A warning was logged in the current failure streak.
    warned: bool,
}

impl Node {
    /// A node reached at `sockaddr`, with the handshake its address asks for (`AUTH`,
    /// `SELECT`) followed by `SCRIPT LOAD` of every script and `INFO server` (identity and
    /// uptime, for restart detection). With `check_persistence`, it also reads `appendonly`
    /// and `appendfsync`, to warn about a node that does not persist every write.
    pub(crate) fn new(
        index: usize,
        addr: NodeAddr,
        sockaddr: Option<SocketAddr>,
        scripts: &[&str],
        check_persistence: bool,
    ) -> Node {
        let mut handshake = Vec::new();
        let mut kinds = Vec::new();
        if let Some(pw) = addr.password() {
            match addr.username() {
                Some(user) => {
                    resp::pack(&[b"AUTH", user.as_bytes(), pw.as_bytes()], &mut handshake)
                }
                None => resp::pack(&[b"AUTH", pw.as_bytes()], &mut handshake),
            }
            kinds.push(Hs::Required);
        }
        if addr.db() != 0 {
            resp::pack(
                &[b"SELECT", addr.db().to_string().as_bytes()],
                &mut handshake,
            );
            kinds.push(Hs::Required);
        }
        for s in scripts {
            resp::pack(&[b"SCRIPT", b"LOAD", s.as_bytes()], &mut handshake);
            kinds.push(Hs::Required);
        }
        resp::pack(&[b"INFO", b"server"], &mut handshake);
        kinds.push(Hs::Info);
        if check_persistence {
            for setting in [&b"appendonly"[..], b"appendfsync"] {
                resp::pack(&[b"CONFIG", b"GET", setting], &mut handshake);
                kinds.push(Hs::Config);
            }
        }
        Node {
            index,
            addr_text: addr.to_string(),
            addr,
            sockaddr,
            handshake,
            handshake_kinds: kinds,
            failures: AtomicU32::new(0),
            health: Mutex::new(Health::default()),
            identity: Mutex::new(None),
            restarts: AtomicU64::new(0),
            info_warned: AtomicBool::new(false),
            persistence: Mutex::new(Persistence::default()),
        }
    }

    /// The node's identity as of its last handshake, if it answered `INFO`.
    pub(crate) fn identity(&self) -> Option<Identity> {
        self.identity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Restarts seen so far (a new run_id on reconnect).
    pub(crate) fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Reads `run_id` and `uptime_in_seconds` from an `INFO server` reply.
    fn observe_info(&self, reply: &Reply, now: Instant) {
        let text = match reply {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => {
                if !self.info_warned.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "node {} ({}) does not answer INFO ({}): restarts of this node cannot \
                         be detected, so restart quarantine cannot protect it",
                        self.index,
                        self.addr,
                        other.describe()
                    );
                }
                return;
            }
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        let (Some(run_id), Some(uptime)) = (
            field("run_id"),
            field("uptime_in_seconds").and_then(|u| u.parse::<u64>().ok()),
        ) else {
            return;
        };
        let mut id = self.identity.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = id.as_ref()
            && old.run_id != run_id
        {
            self.restarts.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "node {} ({}) restarted (new run_id; up for {uptime} s)",
                self.index,
                self.addr
            );
        }
        *id = Some(Identity {
            run_id,
            uptime: Duration::from_secs(uptime),
            seen_at: now,
        });
    }

    /// Reads a `CONFIG GET appendonly|appendfsync` reply; once both are in, warns (once) if
    /// the node does not persist every write.
    fn observe_config(&self, reply: &Reply) {
        let mut p = self.persistence.lock().unwrap_or_else(|p| p.into_inner());
        p.answered += 1;
        if let Reply::Array(items) = reply
            && let [Reply::Bulk(k), Reply::Bulk(v)] = items.as_slice()
        {
            let v = String::from_utf8_lossy(v).into_owned();
            match k.as_slice() {
                b"appendonly" => p.appendonly = Some(v),
                b"appendfsync" => p.appendfsync = Some(v),
                _ => {}
            }
        }
        if p.answered < 2 || p.warned {
            return;
        }
        p.warned = true;
        match (p.appendonly.as_deref(), p.appendfsync.as_deref()) {
            (Some("yes"), Some("always")) => {}
            (Some(aof), Some(fsync)) => log::warn!(
                "node {} ({}) does not persist every write (appendonly {aof}, appendfsync \
                 {fsync}) and restart quarantine is off: if it restarts it may grant a lock \
                 that another client holds",
                self.index,
                self.addr
            ),
            _ => log::warn!(
                "node {} ({}): cannot read its persistence settings (CONFIG GET refused) and \
                 restart quarantine is off: make sure it runs with appendfsync always",
                self.index,
                self.addr
            ),
        }
    }

    fn backoff(&self, now: Instant) -> Option<String> {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        match h.retry_at {
            Some(t) if now < t => Some(h.last_error.clone()),
            _ => None,
        }
    }

    /// Records a failure. Connection-level failures start (or lengthen) the reconnect backoff
    /// and warn once per failure streak; timeouts and error replies only count.
    fn record_failure(&self, now: Instant, what: &str, settings: &ConnSettings, connection: bool) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.last_error = what.to_string();
        if connection {
            let shift = (n - 1).min(20);
            let wait = settings
                .backoff_min
                .saturating_mul(1u32 << shift)
                .min(settings.backoff_max);
            h.retry_at = Some(now + wait);
            if !h.warned {
                h.warned = true;
                log::warn!("node {} ({}) unreachable: {what}", self.index, self.addr);
            }
        }
        log::debug!("node {} ({}): {what}", self.index, self.addr);
    }

    fn record_success(&self) {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        self.failures.store(0, Ordering::Relaxed);
        if h.warned {
            log::info!("node {} ({}) reachable again", self.index, self.addr);
        }
        h.warned = false;
        h.retry_at = None;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Handshake,
    Ready,
}

/// One connection to one node.
pub(crate) struct Conn {
    sock: Socket,
    phase: Phase,
    out: Vec<u8>,
    out_pos: usize,
    reader: ReplyReader,
    bytes_since_reply: usize,
    handshake_left: usize,
    /// Replies owed for commands of earlier steps; discarded on arrival.
    owed: usize,
    /// When the oldest owed reply (or the unfinished connect/handshake) was asked for.
    owed_since: Option<Instant>,
    /// The end of the last step that used this connection.
    last_used: Instant,
    /// Commands written (or queued) on this connection over its life, handshake included.
    sent: u64,
    /// Replies received over its life, discarded ones included; `u64::MAX` once closed.
    /// Shared with [`Ticket`]s so that a lease can tell whether its command was processed.
    acked: Arc<AtomicU64>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closed: whatever was sent is either processed or never will be.
        self.acked.store(u64::MAX, Ordering::Release);
    }
}

/// Tells whether one command sent on one connection has been answered (and therefore
/// processed by the node), or the connection is gone.
#[derive(Clone, Debug)]
pub(crate) struct Ticket {
    acked: Arc<AtomicU64>,
    seq: u64,
}

impl Ticket {
    /// True once the node has answered the command or the connection was closed.
    pub(crate) fn done(&self) -> bool {
        self.acked.load(Ordering::Acquire) >= self.seq
    }
}

impl Conn {
    /// Starts a non-blocking connect and queues the handshake (`AUTH`, `SELECT`,
    /// `SCRIPT LOAD`). Commands queued after it are pipelined behind it: they are written as
    /// soon as the connection is established, without waiting for the handshake replies, so a
    /// fresh connection costs one round trip more than a warm one, not two. If a handshake
    /// command fails, the node is failed and the connection closed, and the replies behind it
    /// are never used.
    fn connect(node: &Node, now: Instant) -> io::Result<Conn> {
        let addr = node
            .sockaddr
            .ok_or_else(|| io::Error::new(io::ErrorKind::AddrNotAvailable, "no address"))?;
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
            out: node.handshake.clone(),
            out_pos: 0,
            reader: ReplyReader::new(),
            bytes_since_reply: 0,
            handshake_left: node.handshake_kinds.len(),
            owed: 0,
            owed_since: Some(now),
            last_used: now,
            sent: node.handshake_kinds.len() as u64,
            acked: Arc::new(AtomicU64::new(0)),
        };
        if connected {
            c.connected();
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
            reader: ReplyReader::new(),
            bytes_since_reply: 0,
            handshake_left: 0,
            owed: 0,
            owed_since: None,
            last_used: Instant::now(),
            sent: 0,
            acked: Arc::new(AtomicU64::new(0)),
        }
    }

    fn connected(&mut self) {
        if self.handshake_left > 0 {
            self.phase = Phase::Handshake;
        } else {
            self.phase = Phase::Ready;
            if self.owed == 0 {
                self.owed_since = None;
            }
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

    fn next_reply(&mut self) -> Result<Option<Reply>, ReadError> {
        let mut limited = Limited {
            sock: &self.sock,
            used: &mut self.bytes_since_reply,
        };
        let r = self.reader.next(&mut limited);
        if let Ok(Some(_)) = r {
            self.bytes_since_reply = 0;
            // Single writer (the thread holding this connection); readers only compare.
            let n = self.acked.load(Ordering::Relaxed);
            self.acked.store(n.saturating_add(1), Ordering::Release);
        }
        r
    }

    fn stale(&self, now: Instant, limit: Duration) -> bool {
        let owing = self.owed > 0 || self.phase != Phase::Ready;
        owing
            && self
                .owed_since
                .is_some_and(|t| now.duration_since(t) > limit)
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

/// The result of one node in one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeResult {
    /// Still waiting (only seen by `decided` during the step).
    Waiting,
    /// The node answered.
    Reply(Reply),
    /// The node did not answer; why.
    Failed(NodeOutcome),
}

/// What one step sends: the same command to every node, and an optional fallback sent to a
/// node that answers `NOSCRIPT` (the `EVAL` form of an `EVALSHA`).
pub(crate) struct Command<'a> {
    pub bytes: &'a [u8],
    pub noscript_fallback: Option<&'a [u8]>,
    /// Nodes not to contact in this step (by index), with the outcome to report for them;
    /// shorter than the node list (or empty) means the rest are contacted.
    pub skip: &'a [Option<NodeOutcome>],
}

struct Slot<'a> {
    node: &'a Node,
    conn: &'a mut Option<Conn>,
    settings: &'a ConnSettings,
    cmd: &'a Command<'a>,
    sent: bool,
    sent_at: Option<Instant>,
    latency: Option<Duration>,
    used_fallback: bool,
    deadline: Instant,
    result: NodeResult,
}

impl Slot<'_> {
    fn fail(&mut self, now: Instant, outcome: NodeOutcome) {
        let what = match &outcome {
            NodeOutcome::Unreachable(s) | NodeOutcome::Protocol(s) => s.clone(),
            other => format!("{other:?}"),
        };
        self.node.record_failure(now, &what, self.settings, true);
        *self.conn = None;
        self.result = NodeResult::Failed(outcome);
    }

    fn send(&mut self, bytes: &[u8], now: Instant) {
        let Some(c) = self.conn.as_mut() else { return };
        c.out.extend_from_slice(bytes);
        c.sent += 1;
        self.sent = true;
        self.sent_at.get_or_insert(now);
        if let Err(e) = c.flush() {
            self.fail(now, unreachable_from(&e));
        }
    }

    fn on_reply(&mut self, reply: Reply, now: Instant) {
        let Some(c) = self.conn.as_mut() else { return };
        // On the wire: the handshake replies first, then replies owed to earlier steps, then
        // this step's reply.
        match c.phase {
            Phase::Connecting => {
                self.fail(now, NodeOutcome::Protocol("reply before connect".into()));
            }
            Phase::Handshake => {
                let kinds = &self.node.handshake_kinds;
                let kind = kinds[kinds.len() - c.handshake_left];
                match (kind, &reply) {
                    (Hs::Required, Reply::Error { text, .. }) => {
                        // WRONGPASS, NOAUTH, an out-of-range SELECT: the node is unusable as
                        // configured. Close the connection so that the commands pipelined
                        // behind the handshake are never taken for answers.
                        let text = format!("handshake failed: {text}");
                        self.node.record_failure(now, &text, self.settings, true);
                        *self.conn = None;
                        self.result = NodeResult::Failed(NodeOutcome::ServerError(text));
                        return;
                    }
                    (Hs::Required, _) => {}
                    (Hs::Info, r) => self.node.observe_info(r, now),
                    (Hs::Config, r) => self.node.observe_config(r),
                }
                c.handshake_left -= 1;
                if c.handshake_left == 0 {
                    c.phase = Phase::Ready;
                    if c.owed == 0 {
                        c.owed_since = None;
                    }
                    self.node.record_success();
                }
            }
            Phase::Ready if c.owed > 0 => {
                // A late reply to a command of an earlier step: discard it.
                c.owed -= 1;
                if c.owed == 0 {
                    c.owed_since = None;
                }
            }
            Phase::Ready => {
                if !self.sent {
                    self.fail(now, NodeOutcome::Protocol("unsolicited reply".into()));
                    return;
                }
                if !self.used_fallback
                    && reply.is_error_code("NOSCRIPT")
                    && let Some(fb) = self.cmd.noscript_fallback
                {
                    self.used_fallback = true;
                    self.send(fb, now);
                    return;
                }
                self.node.record_success();
                self.latency = self.sent_at.map(|t| now.saturating_duration_since(t));
                self.result = NodeResult::Reply(reply);
            }
        }
    }

    /// Reads, without waiting, replies that earlier steps are owed and handshake replies;
    /// anything else is a broken connection.
    fn drain_owed(&mut self, now: Instant) {
        loop {
            let Some(c) = self.conn.as_mut() else { return };
            if c.phase == Phase::Connecting || (c.owed == 0 && c.phase == Phase::Ready) {
                return;
            }
            match c.next_reply() {
                Ok(Some(reply)) => {
                    if c.phase == Phase::Handshake {
                        self.on_reply(reply, now);
                    } else {
                        c.owed -= 1;
                        if c.owed == 0 {
                            c.owed_since = None;
                        }
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    *self.conn = None;
                    return;
                }
            }
        }
    }

    /// Reads what the connection owes, as [`drain_owed`](Self::drain_owed); then, if it owes
    /// nothing more, closes it when the node has closed it (or sent more than was owed).
    fn settle(&mut self, now: Instant) {
        self.drain_owed(now);
        if let Some(c) = self.conn.as_mut()
            && c.phase == Phase::Ready
            && c.owed == 0
            && !matches!(c.next_reply(), Ok(None))
        {
            *self.conn = None;
        }
    }

    fn read_replies(&mut self, now: Instant) {
        loop {
            if !matches!(self.result, NodeResult::Waiting) {
                return;
            }
            let Some(c) = self.conn.as_mut() else { return };
            match c.next_reply() {
                Ok(Some(reply)) => self.on_reply(reply, now),
                Ok(None) => return,
                Err(ReadError::Closed) => {
                    return self.fail(
                        now,
                        NodeOutcome::Unreachable("connection closed by the node".into()),
                    );
                }
                Err(ReadError::Io(e)) => return self.fail(now, unreachable_from(&e)),
                Err(ReadError::Protocol(s)) => return self.fail(now, NodeOutcome::Protocol(s)),
            }
        }
    }
}

fn unreachable_from(e: &io::Error) -> NodeOutcome {
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

impl Source for Slot<'_> {
    fn interest(&self) -> Option<(RawFd, Interest)> {
        if !matches!(self.result, NodeResult::Waiting) {
            return None;
        }
        let c = self.conn.as_ref()?;
        let fd = c.sock.as_raw_fd();
        if c.phase == Phase::Connecting {
            return Some((
                fd,
                Interest {
                    read: false,
                    write: true,
                },
            ));
        }
        Some((
            fd,
            Interest {
                read: true,
                write: c.queued() > 0,
            },
        ))
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn on_ready(&mut self, ready: Readiness, now: Instant) {
        let Some(c) = self.conn.as_mut() else { return };
        if c.phase == Phase::Connecting {
            if !(ready.writable || ready.error) {
                return;
            }
            match c.sock.take_error() {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => return self.fail(now, unreachable_from(&e)),
            }
            c.connected();
            if let Err(e) = c.flush() {
                self.fail(now, unreachable_from(&e));
            }
            return;
        }
        if ready.writable
            && c.queued() > 0
            && let Err(e) = c.flush()
        {
            return self.fail(now, unreachable_from(&e));
        }
        if ready.readable || ready.error {
            self.read_replies(now);
        }
    }

    fn on_deadline(&mut self, now: Instant) {
        // Keep the connection: a slow node's reply is discarded when it comes (the step's
        // command is counted as owed at the end of the step), and a node that stays silent is
        // closed by the stale limit at the start of a later step.
        let connecting = self.conn.as_ref().is_some_and(|c| c.phase != Phase::Ready);
        let what = if connecting {
            "connect or handshake timeout"
        } else {
            "timeout"
        };
        self.node.record_failure(now, what, self.settings, false);
        self.result = NodeResult::Failed(NodeOutcome::Timeout);
    }
}

/// How long one step may wait for each node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepLimits {
    /// How long to wait for a node's reply once its command is sent (plus the connect timeout
    /// when the node must be connected first).
    pub node_timeout: Duration,
    /// No node waits past this instant (an extension must not outlive the current validity).
    pub cap: Option<Instant>,
}

#[cfg(test)]
impl StepLimits {
    /// Limits with no cap.
    pub(crate) fn timeout(node_timeout: Duration) -> StepLimits {
        StepLimits {
            node_timeout,
            cap: None,
        }
    }
}

/// One connection (or none yet) per node, parallel to the manager's node list. Owned by one
/// thread at a time; the manager pools them.
pub(crate) struct ConnSet {
    /// Unique within its manager, so that a lease can ask for the set that carried its
    /// acquisition (see `Pool::checkout_preferring`).
    pub(crate) id: u64,
    conns: Vec<Option<Conn>>,
    /// Per node, how long it took to answer in the last step (None if it did not answer).
    latencies: Vec<Option<Duration>>,
}

impl ConnSet {
    pub(crate) fn new(n: usize, id: u64) -> ConnSet {
        ConnSet {
            id,
            conns: (0..n).map(|_| None).collect(),
            latencies: vec![None; n],
        }
    }

    #[cfg(test)]
    pub(crate) fn from_conns(conns: Vec<Option<Conn>>) -> ConnSet {
        let n = conns.len();
        ConnSet {
            id: 0,
            conns,
            latencies: vec![None; n],
        }
    }

    /// How long each node took to answer in the last step (None where it did not answer).
    pub(crate) fn latencies(&self) -> &[Option<Duration>] {
        &self.latencies
    }

    /// A ticket for the last command sent to node `i`, if it has a connection.
    pub(crate) fn ticket(&self, i: usize) -> Option<Ticket> {
        self.conns.get(i)?.as_ref().map(|c| Ticket {
            acked: Arc::clone(&c.acked),
            seq: c.sent,
        })
    }

    /// Runs one step: writes `cmd` to every node (connecting first where needed), then reads
    /// replies until `decided` returns true or every node has answered, failed or passed its
    /// deadline. Each node's deadline is `node_timeout` after the start (plus the connect
    /// timeout when it must connect), never later than `cap`.
    ///
    /// Returns one result per node; nodes still waiting when the step was decided are
    /// reported as [`NodeOutcome::Pending`].
    pub(crate) fn step(
        &mut self,
        nodes: &[Node],
        settings: &ConnSettings,
        cmd: &Command<'_>,
        limits: StepLimits,
        now: &dyn Fn() -> Instant,
        mut decided: impl FnMut(&[NodeResult]) -> bool,
    ) -> io::Result<Vec<NodeResult>> {
        let start = now();
        self.drop_dead_idle(nodes, start);
        let mut slots: Vec<Slot<'_>> = Vec::with_capacity(nodes.len());
        for (node, conn) in nodes.iter().zip(self.conns.iter_mut()) {
            let mut slot = Slot {
                node,
                conn,
                settings,
                cmd,
                sent: false,
                sent_at: None,
                latency: None,
                used_fallback: false,
                deadline: start,
                result: NodeResult::Waiting,
            };
            prepare(&mut slot, start, limits);
            slots.push(slot);
        }
        let mut results: Vec<NodeResult> = Vec::with_capacity(slots.len());
        let r = mux::drive(&mut slots, now, |slots| {
            results.clear();
            results.extend(slots.iter().map(|s| s.result.clone()));
            decided(&results)
        });
        // Bytes still queued (say, a connect that completed just as the step was decided):
        // push them out now rather than at this set's next step.
        let end = now();
        for slot in slots.iter_mut() {
            if let Some(c) = slot.conn.as_mut() {
                c.last_used = end;
                if c.queued() > 0 && c.flush().is_err() {
                    *slot.conn = None;
                }
            }
        }
        let mut out = Vec::with_capacity(slots.len());
        let latencies: Vec<Option<Duration>> = slots.iter().map(|s| s.latency).collect();
        for slot in slots {
            let result = match slot.result {
                NodeResult::Waiting => NodeResult::Failed(NodeOutcome::Pending),
                other => other,
            };
            // A command sent but not answered within the step: its reply is owed, and will
            // be discarded when it arrives.
            if matches!(
                result,
                NodeResult::Failed(NodeOutcome::Pending | NodeOutcome::Timeout)
            ) && slot.sent
                && let Some(c) = slot.conn.as_mut()
            {
                c.owed += 1;
                c.owed_since.get_or_insert(start);
            }
            out.push(result);
        }
        self.latencies = latencies;
        r.map(|_| out)
    }

    /// Closes idle connections the node has closed (a restarted node) before they are used,
    /// so that the step reconnects at once instead of failing that node. One zero-timeout
    /// `poll(2)` for the whole set; no backoff, since the node may well be back. Only
    /// connections idle for [`PROBE_AFTER`] that owe nothing: for one that still owes
    /// replies, readable says nothing, and [`prepare`] reads it instead (`Slot::settle`).
    fn drop_dead_idle(&mut self, nodes: &[Node], now: Instant) {
        let idle: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .filter(|c| {
                        c.phase == Phase::Ready
                            && c.owed == 0
                            && c.queued() == 0
                            && now.saturating_duration_since(c.last_used) > PROBE_AFTER
                    })
                    .map(|_| i)
            })
            .collect();
        if idle.is_empty() {
            return;
        }
        let fds: Vec<RawFd> = idle
            .iter()
            .filter_map(|&i| self.conns[i].as_ref().map(|c| c.sock.as_raw_fd()))
            .collect();
        let Ok(flags) = mux::probe_idle(&fds) else {
            return;
        };
        for (&i, dead) in idle.iter().zip(flags) {
            if dead {
                log::debug!(
                    "node {} ({}): idle connection closed by the node; reconnecting",
                    nodes[i].index,
                    nodes[i].addr
                );
                self.conns[i] = None;
            }
        }
    }

    /// Writes `bytes` to every node that has a connection, without waiting for replies
    /// (they are discarded when they arrive). Used to release after a failed acquisition, so
    /// that the caller does not wait a round trip for cleanup.
    pub(crate) fn send_detached(
        &mut self,
        nodes: &[Node],
        settings: &ConnSettings,
        bytes: &[u8],
        now: Instant,
    ) {
        self.send_detached_to(nodes, settings, bytes, now, &|_| true);
    }

    /// [`send_detached`](Self::send_detached) to the nodes `to` selects (by index).
    pub(crate) fn send_detached_to(
        &mut self,
        nodes: &[Node],
        settings: &ConnSettings,
        bytes: &[u8],
        now: Instant,
        to: &dyn Fn(usize) -> bool,
    ) {
        for (node, slot) in nodes.iter().zip(self.conns.iter_mut()) {
            if !to(node.index) {
                continue;
            }
            // Queued behind whatever this connection already carries (a handshake, the
            // command being cleaned up), so the node runs it after them.
            let Some(c) = slot.as_mut() else { continue };
            c.out.extend_from_slice(bytes);
            c.sent += 1;
            c.owed += 1;
            c.owed_since.get_or_insert(now);
            if let Err(e) = c.flush() {
                node.record_failure(now, &e.to_string(), settings, true);
                *slot = None;
            }
        }
    }

    /// How many replies each connection still owes (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn owed(&self) -> Vec<Option<usize>> {
        self.conns
            .iter()
            .map(|c| c.as_ref().map(|c| c.owed))
            .collect()
    }
}

/// How long a connection must have been idle before a step checks, before using it, whether
/// the node closed it. In a tight loop the check would cost a system call per step for
/// nothing; a node that restarts within this window is simply failed for one step.
const PROBE_AFTER: Duration = Duration::from_millis(5);

/// Gets a slot's connection ready to carry the step's command and sets its deadline.
fn prepare(slot: &mut Slot<'_>, now: Instant, limits: StepLimits) {
    let StepLimits { node_timeout, cap } = limits;
    let settings = slot.settings;
    if let Some(Some(outcome)) = slot.cmd.skip.get(slot.node.index) {
        // Not asked in this step; still read what it owes (late replies, a handshake), so
        // a node skipped for a while (in restart quarantine) does not end up with a
        // connection past the stale limit when it is asked again.
        slot.drain_owed(now);
        slot.result = NodeResult::Failed(outcome.clone());
        return;
    }
    if slot.conn.as_ref().is_some_and(|c| {
        (c.owed > 0 || c.phase == Phase::Handshake)
            && now.saturating_duration_since(c.last_used) > PROBE_AFTER
    }) {
        // Idle for a while, yet still owing replies: an earlier step returned at quorum
        // before this node answered, or before its handshake completed. Read what has
        // arrived; if the node closed the connection behind it (a restart), reconnect now
        // rather than fail this node for the step. The idle probe cannot tell this case,
        // since owed replies make the socket readable anyway.
        slot.settle(now);
        if !matches!(slot.result, NodeResult::Waiting) {
            return; // the handshake failed
        }
    }
    if slot
        .conn
        .as_ref()
        .is_some_and(|c| c.stale(now, settings.stale_limit))
    {
        // Owed a reply for longer than the stale limit: the node is hung or paused. Close the
        // connection rather than pile more commands behind the missing reply.
        slot.node.record_failure(
            now,
            &format!("no reply for over {} ms", settings.stale_limit.as_millis()),
            settings,
            true,
        );
        *slot.conn = None;
    }
    let mut deadline = now + node_timeout;
    if slot.conn.is_none() {
        if let Some(last) = slot.node.backoff(now) {
            slot.result = NodeResult::Failed(NodeOutcome::Backoff(last));
            return;
        }
        match Conn::connect(slot.node, now) {
            Ok(c) => *slot.conn = Some(c),
            Err(e) => return slot.fail(now, unreachable_from(&e)),
        }
    }
    if slot.conn.as_ref().is_some_and(|c| c.phase != Phase::Ready) {
        deadline += settings.connect_timeout;
    }
    slot.deadline = match cap {
        Some(cap) => deadline.min(cap),
        None => deadline,
    };
    // Written now if the connection is up; otherwise queued behind the handshake and
    // written the moment the connect completes.
    let bytes = slot.cmd.bytes;
    slot.send(bytes, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::thread;

    fn settings() -> ConnSettings {
        ConnSettings {
            connect_timeout: Duration::from_millis(100),
            stale_limit: Duration::from_secs(5),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(100),
        }
    }

    fn nodes(n: usize) -> Vec<Node> {
        (0..n)
            .map(|i| {
                Node::new(
                    i,
                    NodeAddr::parse(&format!("127.0.0.1:{}", 1 + i)).unwrap(),
                    None,
                    &[],
                    false,
                )
            })
            .collect()
    }

    /// A connection set over socket pairs; returns the peers' ends.
    fn pairs(n: usize) -> (ConnSet, Vec<UnixStream>) {
        let mut conns = Vec::new();
        let mut peers = Vec::new();
        for _ in 0..n {
            let (a, b) = UnixStream::pair().unwrap();
            conns.push(Some(Conn::from_socket(Socket::from(a))));
            peers.push(b);
        }
        (ConnSet::from_conns(conns), peers)
    }

    fn read_cmd(peer: &mut UnixStream, expect: &[u8]) {
        let mut buf = vec![0u8; expect.len()];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(buf, expect);
    }

    fn replies(r: &[NodeResult]) -> usize {
        r.iter()
            .filter(|r| matches!(r, NodeResult::Reply(_)))
            .count()
    }

    #[test]
    fn late_silent_and_half_replies() {
        let nodes = nodes(4);
        let (mut set, mut peers) = pairs(4);
        let cmd = Command {
            bytes: b"*1\r\n$4\r\nPING\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let mut p3 = peers.pop().unwrap();
        let p2 = peers.pop().unwrap();
        let mut p1 = peers.pop().unwrap();
        let mut p0 = peers.pop().unwrap();
        // Node 0 answers at once; node 1 late but in time; node 2 never; node 3 half a reply.
        let h1 = thread::spawn(move || {
            read_cmd(&mut p1, cmd_bytes());
            thread::sleep(Duration::from_millis(30));
            p1.write_all(b"+PONG\r\n").unwrap();
            p1
        });
        p0.write_all(b"").unwrap();
        let h0 = thread::spawn(move || {
            read_cmd(&mut p0, cmd_bytes());
            p0.write_all(b"+PONG\r\n").unwrap();
            p0
        });
        let h3 = thread::spawn(move || {
            read_cmd(&mut p3, cmd_bytes());
            p3.write_all(b"+PO").unwrap();
            p3
        });
        let start = Instant::now();
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits::timeout(Duration::from_millis(200)),
                &Instant::now,
                |_| false,
            )
            .unwrap();
        let elapsed = start.elapsed();
        let (_p0, mut p1, mut p3) = (h0.join().unwrap(), h1.join().unwrap(), h3.join().unwrap());
        assert_eq!(out[0], NodeResult::Reply(Reply::Status("PONG".into())));
        assert_eq!(out[1], NodeResult::Reply(Reply::Status("PONG".into())));
        assert_eq!(out[2], NodeResult::Failed(NodeOutcome::Timeout));
        assert_eq!(out[3], NodeResult::Failed(NodeOutcome::Timeout));
        assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(2));
        // Nodes 2 and 3 owe a reply now.
        assert_eq!(set.owed(), vec![Some(0), Some(0), Some(1), Some(1)]);

        // Next step: node 3 completes its stale reply then answers the new command with a
        // different value; node 1 answers; the stale half reply must not be taken for the new
        // one.
        let cmd2 = Command {
            bytes: b"*1\r\n$4\r\nECHO\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let h3 = thread::spawn(move || {
            read_cmd(&mut p3, b"*1\r\n$4\r\nECHO\r\n");
            p3.write_all(b"NG\r\n:42\r\n").unwrap();
            p3
        });
        let h1 = thread::spawn(move || {
            read_cmd(&mut p1, b"*1\r\n$4\r\nECHO\r\n");
            p1.write_all(b":7\r\n").unwrap();
            p1
        });
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd2,
                StepLimits::timeout(Duration::from_millis(300)),
                &Instant::now,
                |r| matches!(r[3], NodeResult::Reply(_)) && matches!(r[1], NodeResult::Reply(_)),
            )
            .unwrap();
        h3.join().unwrap();
        h1.join().unwrap();
        assert_eq!(out[3], NodeResult::Reply(Reply::Int(42)));
        assert_eq!(out[1], NodeResult::Reply(Reply::Int(7)));
        drop(p2);
    }

    fn cmd_bytes() -> &'static [u8] {
        b"*1\r\n$4\r\nPING\r\n"
    }

    /// A peer that, for each expected command, reads it and then writes the given reply.
    fn answer(
        mut peer: UnixStream,
        script: Vec<(&'static [u8], &'static [u8])>,
    ) -> thread::JoinHandle<UnixStream> {
        thread::spawn(move || {
            for (cmd, reply) in script {
                read_cmd(&mut peer, cmd);
                peer.write_all(reply).unwrap();
            }
            peer
        })
    }

    #[test]
    fn early_return_counts_owed_replies_and_discards_them() {
        let nodes = nodes(3);
        let (mut set, mut peers) = pairs(3);
        let cmd = Command {
            bytes: b"*1\r\n$1\r\nA\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let slow = peers.pop().unwrap();
        let fast: Vec<_> = peers
            .into_iter()
            .map(|p| answer(p, vec![(cmd.bytes, b":1\r\n")]))
            .collect();
        let start = Instant::now();
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits::timeout(Duration::from_secs(5)),
                &Instant::now,
                |r| replies(r) >= 2,
            )
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(out[2], NodeResult::Failed(NodeOutcome::Pending));
        assert_eq!(set.owed(), vec![Some(0), Some(0), Some(1)]);
        // The slow node answers the old command (":1") and then the new one (":2").
        let fast: Vec<_> = fast
            .into_iter()
            .map(|h| answer(h.join().unwrap(), vec![(cmd.bytes, b":2\r\n")]))
            .collect();
        let slow = answer(slow, vec![(cmd.bytes, b":1\r\n"), (cmd.bytes, b":2\r\n")]);
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits::timeout(Duration::from_secs(5)),
                &Instant::now,
                |r| replies(r) == 3,
            )
            .unwrap();
        assert!(
            out.iter().all(|r| *r == NodeResult::Reply(Reply::Int(2))),
            "{out:?}"
        );
        assert_eq!(set.owed(), vec![Some(0), Some(0), Some(0)]);
        for h in fast {
            h.join().unwrap();
        }
        slow.join().unwrap();
    }

    #[test]
    fn closed_and_garbage_peers_fail_without_waiting() {
        let nodes = nodes(2);
        let (mut set, mut peers) = pairs(2);
        let cmd = Command {
            bytes: b"*1\r\n$1\r\nA\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let garbage = answer(peers.pop().unwrap(), vec![(cmd.bytes, b"?garbage\r\n")]);
        let mut closer = peers.pop().unwrap();
        let closed = thread::spawn(move || read_cmd(&mut closer, b"*1\r\n$1\r\nA\r\n"));
        let start = Instant::now();
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits::timeout(Duration::from_secs(5)),
                &Instant::now,
                |_| false,
            )
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(
            matches!(&out[0], NodeResult::Failed(NodeOutcome::Unreachable(_))),
            "{out:?}"
        );
        assert!(
            matches!(&out[1], NodeResult::Failed(NodeOutcome::Protocol(_))),
            "{out:?}"
        );
        assert_eq!(set.owed(), vec![None, None]);
        closed.join().unwrap();
        garbage.join().unwrap();
    }

    #[test]
    fn idle_connections_closed_by_the_node_are_not_used() {
        let nodes = nodes(2);
        let (mut set, mut peers) = pairs(2);
        drop(peers.pop()); // node 1 went away while the connection sat in the pool
        let cmd = Command {
            bytes: b"*1\r\n$1\r\nA\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let alive = answer(peers.pop().unwrap(), vec![(cmd.bytes, b":1\r\n")]);
        thread::sleep(Duration::from_millis(10)); // idle long enough to be probed
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits::timeout(Duration::from_secs(5)),
                &Instant::now,
                |_| false,
            )
            .unwrap();
        assert_eq!(out[0], NodeResult::Reply(Reply::Int(1)));
        // Node 1's dead connection was replaced by a fresh connect attempt (which fails here
        // only because test nodes have no address), not written to.
        assert!(
            matches!(&out[1], NodeResult::Failed(NodeOutcome::Unreachable(s)) if s == "no address"),
            "{out:?}"
        );
        alive.join().unwrap();
    }

    #[test]
    fn noscript_falls_back_once() {
        let nodes = nodes(1);
        let (mut set, mut peers) = pairs(1);
        let cmd = Command {
            bytes: b"SHA\r\n",
            noscript_fallback: Some(b"EVAL\r\n"),
            skip: &[],
        };
        let mut p = peers.pop().unwrap();
        let h = thread::spawn(move || {
            read_cmd(&mut p, b"SHA\r\n");
            p.write_all(b"-NOSCRIPT No matching script\r\n").unwrap();
            read_cmd(&mut p, b"EVAL\r\n");
            p.write_all(b":1\r\n").unwrap();
            p
        });
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits::timeout(Duration::from_secs(5)),
                &Instant::now,
                |_| false,
            )
            .unwrap();
        h.join().unwrap();
        assert_eq!(out[0], NodeResult::Reply(Reply::Int(1)));
    }

    #[test]
    fn a_connection_closed_behind_owed_replies_is_reconnected_not_failed() {
        let nodes = nodes(2);
        let (mut set, peers) = pairs(2);
        let ping = Command {
            bytes: b"*1\r\n$4\r\nPING\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let step = |set: &mut ConnSet, ms| {
            set.step(
                &nodes,
                &settings(),
                &ping,
                StepLimits::timeout(Duration::from_millis(ms)),
                &Instant::now,
                |_| false,
            )
            .unwrap()
        };
        // Neither node answers within the step: both owe a reply.
        let out = step(&mut set, 20);
        assert!(
            out.iter()
                .all(|r| *r == NodeResult::Failed(NodeOutcome::Timeout))
        );
        assert_eq!(set.owed(), vec![Some(1), Some(1)]);
        // Both answer late; node 1 then closes the connection (it restarted).
        let mut peers = peers.into_iter();
        let mut p0 = peers.next().unwrap();
        let mut p1 = peers.next().unwrap();
        p0.write_all(b"+LATE\r\n").unwrap();
        p1.write_all(b"+LATE\r\n").unwrap();
        drop(p1);
        thread::sleep(PROBE_AFTER * 2);
        let h0 = thread::spawn(move || {
            let mut buf = [0u8; 28];
            p0.read_exact(&mut buf).unwrap(); // both PINGs
            p0.write_all(b"+PONG\r\n").unwrap();
            p0
        });
        let out = step(&mut set, 500);
        let _p0 = h0.join().unwrap();
        // Node 0: the late reply discarded, this step's answered. Node 1: its connection was
        // found closed before use and a new one attempted (this test's addresses refuse),
        // instead of the step writing to a dead connection.
        assert_eq!(out[0], NodeResult::Reply(Reply::Status("PONG".into())));
        assert_ne!(
            out[1],
            NodeResult::Failed(NodeOutcome::Unreachable(
                "connection closed by the node".into()
            ))
        );
        assert!(matches!(
            out[1],
            NodeResult::Failed(NodeOutcome::Unreachable(_))
        ));
    }

    #[test]
    fn stale_connections_are_closed_and_backoff_applies() {
        let nodes = nodes(1);
        let (mut set, _peers) = pairs(1);
        let s = ConnSettings {
            stale_limit: Duration::from_millis(20),
            ..settings()
        };
        let cmd = Command {
            bytes: b"X\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let out = set
            .step(
                &nodes,
                &s,
                &cmd,
                StepLimits::timeout(Duration::from_millis(5)),
                &Instant::now,
                |_| false,
            )
            .unwrap();
        assert_eq!(out[0], NodeResult::Failed(NodeOutcome::Timeout));
        thread::sleep(Duration::from_millis(30));
        // The owed reply is older than the stale limit: the connection is dropped, and the
        // node (which has no address here) is in backoff, so it is not contacted at all.
        let out = set
            .step(
                &nodes,
                &s,
                &cmd,
                StepLimits::timeout(Duration::from_millis(5)),
                &Instant::now,
                |_| false,
            )
            .unwrap();
        assert!(
            matches!(&out[0], NodeResult::Failed(NodeOutcome::Backoff(_))),
            "{out:?}"
        );
        assert_eq!(set.owed(), vec![None]);
    }

    #[test]
    fn cap_shortens_the_deadline() {
        let nodes = nodes(1);
        let (mut set, _peers) = pairs(1);
        let cmd = Command {
            bytes: b"X\r\n",
            noscript_fallback: None,
            skip: &[],
        };
        let start = Instant::now();
        let out = set
            .step(
                &nodes,
                &settings(),
                &cmd,
                StepLimits {
                    node_timeout: Duration::from_secs(5),
                    cap: Some(start + Duration::from_millis(20)),
                },
                &Instant::now,
                |_| false,
            )
            .unwrap();
        assert_eq!(out[0], NodeResult::Failed(NodeOutcome::Timeout));
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
