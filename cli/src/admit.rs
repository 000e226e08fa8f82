//! `redlock admit`: the operator's word that nodes are new, so that restart quarantine trusts
//! them at once (`Redlock::admit_new_nodes`).

use std::ffi::OsString;

use redlock::{Error, Redlock};

use crate::args::{Opt, next, unexpected};
use crate::run::EXIT_UNAVAILABLE;
use crate::{EXIT_ERROR, NODE_OPTS_HELP, NodeOpts, describe};

/// This command's `--help`.
pub const HELP: &str = "\
redlock admit — trust nodes you know are new, without waiting out restart quarantine

usage: redlock admit -n URL[,URL…] NODE [NODE…]
e.g.   redlock admit -n 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 2

Restart quarantine cannot tell a new server from one that restarted empty: neither holds a
marker. So nodes added to a cluster that has held locks before (say, growing from 3 nodes
to 5) wait out the maximum TTL before their grants count. NODE is the index of a node in
the list (0 for the first, as messages say \"node 2\"); each one is contacted, trusted and
its marker written, confirmed before redlock exits. Admit only servers you started empty
yourself: if one did hold a lock and lost it, a second holder may be granted that lock
before the first one's TTL is over. A node quarantined for what it did (a restart seen, a
promotion, a marker of another server) is refused: it is not new.

options:
NODE_OPTS
  -h, --help                   this help

exit status:
  0    every NODE is trusted now
  122  a node did not answer, or its marker write was not confirmed
  125  usage error, or a NODE that is not new";

/// Short options of `redlock admit`.
const SHORTS: [(char, &str); 2] = [('n', "nodes"), ('h', "help")];

pub fn main(args: Vec<OsString>) -> u8 {
    let mut nodes = NodeOpts::default();
    let mut admit: Vec<usize> = Vec::new();
    let mut p = lexopt::Parser::from_args(args);
    let parsed: Result<bool, String> = (|| {
        while let Some(arg) = next(&mut p, &SHORTS)? {
            if let Opt::Long(name) = &arg
                && nodes.take(name, &mut p)?
            {
                continue;
            }
            match &arg {
                Opt::Long(n) if n == "help" => return Ok(false),
                Opt::Value(v) => {
                    let v = v.to_string_lossy();
                    let i = v.parse::<usize>().map_err(|_| {
                        format!("NODE {v:?} is not a node index (0 for the first node)")
                    })?;
                    admit.push(i);
                }
                other => return Err(unexpected(other)),
            }
        }
        if admit.is_empty() {
            return Err("name the nodes to admit by index: redlock admit -n URL,… 2".into());
        }
        nodes.resolve().map(|_| true)
    })();
    match parsed {
        Ok(true) => {}
        Ok(false) => {
            println!("{}", HELP.replace("NODE_OPTS", NODE_OPTS_HELP));
            return 0;
        }
        Err(e) => {
            eprintln!("redlock admit: {e} (see `redlock admit --help`)");
            return EXIT_ERROR;
        }
    }
    let admitted = Redlock::new(nodes.config()).and_then(|m| m.admit_new_nodes(&admit));
    match admitted {
        Ok(()) => {
            for i in &admit {
                println!("node {i} is trusted");
            }
            0
        }
        Err(e) => {
            eprintln!("redlock admit: {}", describe(&e));
            match e {
                Error::Unavailable(_) | Error::Auth(_) => EXIT_UNAVAILABLE,
                _ => EXIT_ERROR,
            }
        }
    }
}
