use redlock::{Config, Error, LockOptions, Redlock, RenewOptions, Wait};
use std::time::Duration;

fn main() -> Result<(), Error> {
    let nodes = std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003".into());
    let mgr = Redlock::new(Config::new(nodes.split(',')))?;
    let opts = LockOptions::new()
        .wait(Wait::For(Duration::from_secs(5))) // or Wait::No, Wait::Retries (the default), Wait::Until(t)
        .fenced(true) // lease.fencing_token()
        .auto_renew(RenewOptions::new().max_hold(Duration::from_secs(600)));
    let lease = mgr.acquire("orders:42", Duration::from_secs(10), &opts)?;
    println!("fencing token {}", lease.fencing_token().unwrap_or(0));
    lease.unlock()?;
    Ok(())
}
