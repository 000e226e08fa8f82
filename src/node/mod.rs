//! One node: its connection ([`conn`]), what is known of it ([`health`]: identity, restarts,
//! quarantine, backoff), and the link that shares one connection between every caller of a
//! manager ([`link`]).

pub(crate) mod call;
pub(crate) mod conn;
pub(crate) mod entry;
pub(crate) mod health;
pub(crate) mod link;
pub(crate) mod sub;

pub(crate) use call::{Call, Slot};
pub(crate) use health::{Ack, ConnSettings, Group, Node, Peers, QuarantinePolicy, Standing};
pub(crate) use link::{Combine, Expect, Link, MakeShard, Shards};
