//! `redlock`: use the lock without writing code, see who holds what, find leaked lock keys.
//!
//!     redlock run --nodes URL[,URL…] --resource NAME --ttl MS [--wait MS] [--max-hold MS]
//!                 [--fenced] -- CMD [ARGS…]
//!     redlock inspect --nodes URL[,URL…] [--prefix P]
//!     redlock demo
//!
//! Exit statuses of `run` (documented in `redlock run --help` and the README): the command's
//! own status when it ran; 122 unavailable; 123 not acquired in time; 124 lease lost while the
//! command ran (it was terminated); 125 usage or other error; 126 command not executable;
//! 127 command not found.

mod demo;
mod inspect;
mod local;
mod run;

use std::process::ExitCode;
use std::time::Duration;

use redlock::{Config, Error};

/// A command-line argument that does not borrow the parser.
pub enum Opt {
    Long(String),
    Short(char),
    Value(std::ffi::OsString),
}

/// The next argument, owned.
pub fn next(p: &mut lexopt::Parser) -> Result<Option<Opt>, String> {
    Ok(p.next().map_err(|e| e.to_string())?.map(|a| match a {
        lexopt::Arg::Long(n) => Opt::Long(n.to_string()),
        lexopt::Arg::Short(c) => Opt::Short(c),
        lexopt::Arg::Value(v) => Opt::Value(v),
    }))
}

/// The error for an argument a command does not take.
pub fn unexpected(o: &Opt) -> String {
    match o {
        Opt::Long(n) => format!("unknown option --{n}"),
        Opt::Short(c) => format!("unknown option -{c}"),
        Opt::Value(v) => format!("unexpected argument {:?}", v.to_string_lossy()),
    }
}

/// Exit status for a usage error or any failure of the tool itself.
pub const EXIT_ERROR: u8 = 125;

const HELP: &str = "\
redlock — the Redlock distributed lock from the command line

usage:
  redlock run --nodes URL[,URL…] --resource NAME --ttl MS [options] -- CMD [ARGS…]
      run CMD while holding the lock (auto-renewed); see `redlock run --help`
  redlock inspect --nodes URL[,URL…] [--prefix P] [--max-ttl MS]
      show lock keys per node and find leaked ones; see `redlock inspect --help`
  redlock demo
      start three local redis-servers and show run and inspect at work
  redlock help | --help | -h
  redlock --version

Node URLs: redis://[user:password@]host[:port][/db] or host:port. Passwords are never printed.";

/// Options shared by the commands that talk to nodes.
pub struct NodeOpts {
    pub nodes: Vec<String>,
    pub quarantine: bool,
    pub max_ttl: Option<u64>,
    pub node_timeout: Option<u64>,
}

impl Default for NodeOpts {
    fn default() -> Self {
        NodeOpts {
            nodes: Vec::new(),
            quarantine: true,
            max_ttl: None,
            node_timeout: None,
        }
    }
}

impl NodeOpts {
    pub fn new() -> NodeOpts {
        NodeOpts::default()
    }

    /// Takes one of the shared options, if the long option `name` is one; `Ok(false)`
    /// otherwise.
    pub fn take(&mut self, name: &str, p: &mut lexopt::Parser) -> Result<bool, String> {
        match name {
            "nodes" => {
                let v = string(p, "--nodes")?;
                self.nodes
                    .extend(v.split(',').filter(|s| !s.is_empty()).map(str::to_string));
            }
            "no-quarantine" => self.quarantine = false,
            "max-ttl" => self.max_ttl = Some(ms(p, "--max-ttl")?),
            "node-timeout" => self.node_timeout = Some(ms(p, "--node-timeout")?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub fn config(&self) -> Result<Config, String> {
        if self.nodes.is_empty() {
            return Err("--nodes is required".into());
        }
        let mut c = Config::new(self.nodes.clone()).restart_quarantine(self.quarantine);
        if let Some(t) = self.max_ttl {
            c = c.max_ttl(Duration::from_millis(t));
        }
        if let Some(t) = self.node_timeout {
            c = c.node_timeout(Duration::from_millis(t));
        }
        Ok(c)
    }
}

pub const NODE_OPTS_HELP: &str = "\
  --nodes URL[,URL…]   the Redis masters (repeatable); redis://[user:password@]host[:port][/db]
  --no-quarantine      count nodes that restarted less than the maximum TTL ago (only for
                       nodes that persist every write, or were just started empty)
  --max-ttl MS         the largest TTL allowed, and the restart quarantine (default 60000)
  --node-timeout MS    per-node timeout of each step (default: each node's own, from its
                       round trips, 10 ms to a tenth of the TTL)";

pub fn string(p: &mut lexopt::Parser, name: &str) -> Result<String, String> {
    p.value()
        .map_err(|e| format!("{name}: {e}"))?
        .into_string()
        .map_err(|_| format!("{name}: not valid UTF-8"))
}

pub fn ms(p: &mut lexopt::Parser, name: &str) -> Result<u64, String> {
    let v = string(p, name)?;
    v.parse::<u64>()
        .map_err(|_| format!("{name}: expected a number of milliseconds, got {v:?}"))
}

/// A library error, for the user: bad input names what was wrong; the rest carries the
/// per-node report.
pub fn describe(e: &Error) -> String {
    e.to_string()
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(cmd) = args.next() else {
        eprintln!("{HELP}");
        return ExitCode::from(EXIT_ERROR);
    };
    let rest: Vec<_> = args.collect();
    let code = match cmd.to_str() {
        Some("run") => run::main(rest),
        Some("inspect") => inspect::main(rest),
        Some("demo") => demo::main(rest),
        Some("help" | "--help" | "-h") => {
            println!("{HELP}");
            0
        }
        Some("--version" | "-V") => {
            println!("redlock {}", env!("CARGO_PKG_VERSION"));
            0
        }
        _ => {
            eprintln!(
                "redlock: unknown command {:?}; try `redlock --help`",
                cmd.to_string_lossy()
            );
            EXIT_ERROR
        }
    };
    ExitCode::from(code)
}
