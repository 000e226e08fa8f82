use redlock::{Cancel, Config, Error, LockOptions, Redlock, Wait};
use std::time::Duration;

fn main() -> Result<(), Error> {
    let nodes = std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003".into());
    let mgr = Redlock::new(Config::new(nodes.split(',')))?;
    let cancel = Cancel::new(); // clone it to another thread; cancel.fire() ends the wait at once
    let opts = LockOptions::new()
        .wait(Wait::For(Duration::from_secs(30)))
        .cancel(cancel.clone());
    match mgr.acquire("reports:daily", Duration::from_secs(10), &opts) {
        Ok(lease) => lease.unlock()?,
        Err(Error::Cancelled) => eprintln!("cancelled; no key was left behind"),
        Err(e) => return Err(e),
    }
    Ok(())
}
