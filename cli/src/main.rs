//! `redlock`: use the lock without writing code, see who holds what, find leaked lock keys.
//!
//!     redlock run -n URL[,URL…] -r NAME -t TTL [-w WAIT] [-f] [-E N] [options] -- CMD [ARGS…]
//!     redlock inspect -n URL[,URL…] [-p PREFIX] [--max-ttl DURATION] [--fail-on-leak]
//!     redlock elect -n URL[,URL…] -r NAME [-v VALUE] [-t TTL] -- CMD [ARGS…] | --observe
//!     redlock demo
//!
//! Durations take units (`500ms`, `10s`, `1.5s`, `2m`, `1h`, `1m30s`); a bare number other
//! than 0 is refused, with a message that shows both spellings (`10s` or `10ms`).
//! Options not given on the command line are read from `REDLOCK_NODES`, `REDLOCK_TTL`,
//! `REDLOCK_WAIT`, `REDLOCK_MAX_HOLD`, `REDLOCK_GRACE`, `REDLOCK_CONFLICT_EXIT_CODE`,
//! `REDLOCK_MAX_TTL` and `REDLOCK_NODE_TIMEOUT`; never the resource, which `run` itself
//! exports to its command as `REDLOCK_RESOURCE` (with `REDLOCK_TTL_MS`, `REDLOCK_VALIDITY_MS`
//! and `REDLOCK_FENCING_TOKEN`), so a nested `redlock run` cannot take the outer lock's name
//! by accident.
//!
//! Exit statuses of `run` (documented in `redlock run --help` and docs/cli.md): the command's
//! own status when it ran; 122 unavailable; 123 not acquired in time (or `--conflict-exit-code`);
//! 124 lease lost while the command ran (it was terminated); 125 usage or other error; 126
//! command not executable; 127 command not found.
//!
//! `run --metrics-listen ADDR` serves the manager's Prometheus text at `http://ADDR/metrics`
//! (`metrics.rs`, tiny_http: the library itself never listens).
//!
//! If `run` is killed, its command dies with it (see `run.rs`: a parent-death signal on Linux
//! and a watcher process that kills the command's process group).

mod admit;
mod args;
mod demo;
mod elect;
mod group;
mod inspect;
mod local;
mod metrics;
mod run;

use std::process::ExitCode;
use std::time::Duration;

use redlock::{Config, DEFAULT_MAX_TTL, Error, MAX_TTL, NodeOutcome, QuarantineReason};

use args::{duration_arg, duration_or_env, env, show_ms, string};

/// Exit status for a usage error or any failure of the tool itself.
pub const EXIT_ERROR: u8 = 125;

/// `redlock --help`.
pub const HELP: &str = "\
redlock — the Redlock distributed lock from the command line

usage:
  redlock run -n URL[,URL…] -r NAME -t TTL [options] -- CMD [ARGS…]
      run CMD while holding the lock (auto-renewed); see `redlock run --help`
  redlock inspect -n URL[,URL…] [-p PREFIX] [--max-ttl DURATION]
      show lock keys per node and find leaked ones; see `redlock inspect --help`
  redlock elect -n URL[,URL…] -r NAME [-v VALUE] -- CMD [ARGS…]
      run CMD while this process leads the election; --observe prints each leader
  redlock admit -n URL[,URL…] NODE [NODE…]
      trust nodes you know are new, without waiting out restart quarantine
  redlock demo
      start three local redis-servers and show run and inspect at work
  redlock help | --help | -h
  redlock --version | -V

Node URLs: redis://[user:password@]host[:port][/db] or host:port. Passwords are never printed
(and stay out of `ps` when given in REDLOCK_NODES rather than on the command line).
Durations: 500ms, 10s, 1.5s, 2m, 1h or 1m30s; a number needs a unit, except 0.
Options left off the command line are read from REDLOCK_* variables: see each command's help.";

/// Options shared by the commands that talk to nodes.
#[derive(Default)]
pub struct NodeOpts {
    /// Node URLs from `--nodes` (or, when there is none, `REDLOCK_NODES`).
    pub nodes: Vec<String>,
    /// False with `--no-quarantine`.
    pub no_quarantine: bool,
    /// `--max-ttl` in milliseconds, if given (see [`NodeOpts::max_ttl_ms`]).
    pub max_ttl: Option<u64>,
    /// `--node-timeout` in milliseconds, if given.
    pub node_timeout: Option<u64>,
    /// `--key-prefix`, if given (or `REDLOCK_KEY_PREFIX`): the library's default otherwise.
    pub key_prefix: Option<String>,
}

/// The short options of [`NodeOpts`].
pub const NODE_SHORTS: [(char, &str); 1] = [('n', "nodes")];

impl NodeOpts {
    /// Takes one of the shared options, if the long option `name` is one; `Ok(false)`
    /// otherwise.
    pub fn take(&mut self, name: &str, p: &mut lexopt::Parser) -> Result<bool, String> {
        match name {
            "nodes" => {
                let v = string(p, "--nodes")?;
                self.nodes.extend(split_nodes(&v));
            }
            "no-quarantine" => self.no_quarantine = true,
            "max-ttl" => self.max_ttl = Some(duration_arg(p, "--max-ttl")?),
            "node-timeout" => self.node_timeout = Some(duration_arg(p, "--node-timeout")?),
            "key-prefix" => self.key_prefix = Some(string(p, "--key-prefix")?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Fills what the command line left out from the environment (`REDLOCK_NODES`,
    /// `REDLOCK_MAX_TTL`, `REDLOCK_NODE_TIMEOUT`), and checks the values.
    pub fn resolve(&mut self) -> Result<(), String> {
        if self.nodes.is_empty()
            && let Some(v) = env("REDLOCK_NODES")?
        {
            self.nodes.extend(split_nodes(&v));
        }
        if self.nodes.is_empty() {
            return Err("--nodes (or REDLOCK_NODES) is required".into());
        }
        self.max_ttl = duration_or_env(self.max_ttl, "REDLOCK_MAX_TTL")?;
        self.node_timeout = duration_or_env(self.node_timeout, "REDLOCK_NODE_TIMEOUT")?;
        if self.key_prefix.is_none() {
            self.key_prefix = env("REDLOCK_KEY_PREFIX")?;
        }
        if let Some(kp) = &self.key_prefix {
            Config::check_key_prefix(kp.as_bytes()).map_err(|e| format!("--key-prefix: {e}"))?;
        }
        let max = MAX_TTL.as_millis() as u64;
        if let Some(t) = self.max_ttl
            && !(3..=max).contains(&t)
        {
            return Err(format!(
                "--max-ttl must be from 3ms to {max}ms (about 49.7 days), got {}",
                show_ms(t)
            ));
        }
        if self.node_timeout == Some(0) {
            return Err("--node-timeout must be more than 0".into());
        }
        Ok(())
    }

    /// The maximum TTL in milliseconds: `--max-ttl`, or the library's default (60 s).
    pub fn max_ttl_ms(&self) -> u64 {
        self.max_ttl.unwrap_or(DEFAULT_MAX_TTL.as_millis() as u64)
    }

    /// The library configuration (call [`NodeOpts::resolve`] first).
    pub fn config(&self) -> Config {
        let mut c = Config::new(self.nodes.clone()).restart_quarantine(!self.no_quarantine);
        if let Some(t) = self.max_ttl {
            c = c.max_ttl(Duration::from_millis(t));
        }
        if let Some(t) = self.node_timeout {
            c = c.node_timeout(Duration::from_millis(t));
        }
        if let Some(p) = &self.key_prefix {
            c = c.key_prefix(p);
        }
        c
    }
}

/// The node URLs of a comma-separated list, each without the white space around it (`"a, b"`
/// is two nodes, as written by hand). A failover group's URL lists its sentinels with commas
/// too: its pieces run until the one that names the service (`/SERVICE`).
fn split_nodes(v: &str) -> impl Iterator<Item = String> + '_ {
    let mut out: Vec<String> = Vec::new();
    let mut open = false; // the last URL is a sentinel URL still listing sentinels
    let mut seeds = false; // the last URL is a cluster URL: what follows with no scheme is a seed
    for piece in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match out.last_mut() {
            Some(last) if open || (seeds && !piece.contains("://")) => {
                last.push(',');
                last.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
        let last = out.last().expect("pushed above");
        open = ["redis+sentinel://", "rediss+sentinel://"]
            .iter()
            .find_map(|s| last.strip_prefix(s))
            .is_some_and(|rest| !rest.contains('/'));
        seeds = ["redis+cluster://", "rediss+cluster://"]
            .iter()
            .any(|s| last.starts_with(s));
    }
    out.into_iter()
}

/// The help lines of [`NodeOpts`], in the commands' option tables.
pub const NODE_OPTS_HELP: &str =
    "  -n, --nodes URL[,URL…]       the Redis masters, comma-separated or repeated:
                               redis://[user:password@]host[:port][/db]       [REDLOCK_NODES]
                               or a failover group:
                               redis+sentinel://host[:port][,host…]/SERVICE
                               or a Redis Cluster (seeds; after it, a node
                               with no scheme is one more seed):
                               redis+cluster://host[:port][,host[:port]…]
      --no-quarantine          count nodes that restarted less than the maximum TTL ago:
                               only for nodes that persist every write (appendfsync always),
                               or a brand-new cluster that has never held a lock
      --max-ttl DURATION       the largest TTL allowed, and how long a restarted node stays
                               in quarantine (default 60s)                  [REDLOCK_MAX_TTL]
      --node-timeout DURATION  each node's timeout per step (default: from its round trips,
                               10ms to a tenth of the TTL)             [REDLOCK_NODE_TIMEOUT]
      --key-prefix PREFIX      the prefix of every lock key (default redlock:; '' for none,
                               to share keys with redsync, node-redlock) [REDLOCK_KEY_PREFIX]";

/// A library error, for the user: bad input names what was wrong; the rest carries the
/// per-node report, and, when nodes in restart quarantine stood in the way, what to do about
/// it on the command line.
pub fn describe(e: &Error) -> String {
    let mut msg = e.to_string();
    if let Some(hint) = quarantine_hint(e) {
        msg.push_str("\nhint: ");
        msg.push_str(&hint);
    }
    msg
}

/// What to do when nodes in restart quarantine did not count, in terms of this tool's flags
/// (the library's message names only the nodes and why).
fn quarantine_hint(e: &Error) -> Option<String> {
    let r = e.report()?;
    let quarantined: Vec<(usize, Duration, QuarantineReason)> = r
        .nodes
        .iter()
        .filter_map(|n| match &n.outcome {
            NodeOutcome::Quarantined {
                remaining, reason, ..
            } => Some((n.index, *remaining, *reason)),
            _ => None,
        })
        .collect();
    let longest = quarantined.iter().map(|q| q.1).max()?;
    let no_marker: Vec<String> = (quarantined.iter())
        .filter(|q| q.2 == QuarantineReason::NoMarker)
        .map(|q| q.0.to_string())
        .collect();
    let names: Vec<String> = quarantined
        .iter()
        .map(|q| format!("node {}", q.0))
        .collect();
    // Whole seconds, rounded up; the wait gets one more for the attempt itself.
    let secs = (longest.as_millis() as u64).div_ceil(1000).max(1);
    // A node without a marker is counted from when this process first saw it, so a new
    // run starts the count again; the others are counted from the node's start.
    let how = if quarantined
        .iter()
        .any(|q| q.2 == QuarantineReason::NoMarker)
    {
        "If they are new servers you started empty yourself, `redlock admit -n … {nomarker}` \
         trusts them now. Otherwise wait it out within one run, with --wait {wait} or \
         longer: a node without a marker is counted from when each new run first sees it (so \
         a later run starts the count again), and once one run has waited it out the node is \
         trusted again by all."
    } else {
        "Run again after that, or wait it out within this run with --wait {wait} or longer."
    };
    Some(format!(
        "{} of {} node(s) ({}) restarted or lost their data less than the maximum TTL \
         (--max-ttl) ago, so they may have lost lock keys, and do not count for up to {secs}s \
         more. {} Pass --no-quarantine only if these nodes persist every write (appendfsync \
         always) or are a brand-new cluster that never held a lock.",
        quarantined.len(),
        r.nodes.len(),
        names.join(", "),
        how.replace("{wait}", &show_ms((secs + 1) * 1000))
            .replace("{nomarker}", &no_marker.join(" ")),
    ))
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
        Some("elect") => elect::main(rest),
        Some("demo") => demo::main(rest),
        Some("admit") => admit::main(rest),
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_node_list_may_have_spaces_after_its_commas() {
        let nodes: Vec<String> =
            crate::split_nodes("redis://127.0.0.1:1, 127.0.0.1:2 ,,127.0.0.1:3 ").collect();
        assert_eq!(nodes, ["redis://127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]);
    }

    #[test]
    fn a_failover_groups_sentinels_stay_in_its_url() {
        let nodes: Vec<String> = crate::split_nodes(
            "redis+sentinel://a:1, b:2,c/svc,127.0.0.1:2,rediss+sentinel://d/s2/1",
        )
        .collect();
        assert_eq!(
            nodes,
            [
                "redis+sentinel://a:1,b:2,c/svc",
                "127.0.0.1:2",
                "rediss+sentinel://d/s2/1"
            ]
        );
    }

    #[test]
    fn a_clusters_seeds_stay_in_its_url() {
        let nodes: Vec<String> = crate::split_nodes(
            "redis+cluster://a:1, b:2,redis://c:3,rediss+cluster://d,e:5,redis+cluster://f",
        )
        .collect();
        assert_eq!(
            nodes,
            [
                "redis+cluster://a:1,b:2",
                "redis://c:3",
                "rediss+cluster://d,e:5",
                "redis+cluster://f"
            ]
        );
    }

    /// Every help text: option descriptions start in one column, the `[VARIABLE]` tags end in
    /// one column, and no line is wider than that.
    #[test]
    fn help_is_aligned_in_columns() {
        let run = crate::run::HELP.replace("NODE_OPTS", crate::NODE_OPTS_HELP);
        let inspect = crate::inspect::HELP.replace("NODE_OPTS", crate::NODE_OPTS_HELP);
        let admit = crate::admit::HELP.replace("NODE_OPTS", crate::NODE_OPTS_HELP);
        let elect = crate::elect::HELP.replace("NODE_OPTS", crate::NODE_OPTS_HELP);
        for help in [
            crate::HELP,
            &run,
            &inspect,
            &admit,
            &elect,
            crate::demo::HELP,
        ] {
            for line in help.lines() {
                let width = line.chars().count();
                assert!(width <= 93, "wider than 93 columns: {line:?}");
                if line.contains("[REDLOCK_") {
                    assert!(
                        line.ends_with(']') && width == 93,
                        "tag not at column 93: {line:?}"
                    );
                }
                if let Some(rest) = line.strip_prefix("  -") {
                    let desc = rest.find("  ").map(|i| i + 3).unwrap();
                    let col = line[..desc].chars().count()
                        + line[desc..].chars().take_while(|c| *c == ' ').count();
                    assert_eq!(col, 31, "description not at column 31: {line:?}");
                }
            }
        }
    }
}
