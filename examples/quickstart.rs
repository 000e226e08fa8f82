use redlock::{Config, Error, Redlock};
use std::time::Duration;

fn main() -> Result<(), Error> {
    // REDLOCK_NODES=redis://10.0.0.1:6379,redis://:password@10.0.0.2:6379/0,10.0.0.3:6379
    let nodes = std::env::var("REDLOCK_NODES")
        .unwrap_or_else(|_| "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003".into());
    let mgr = Redlock::new(Config::new(nodes.split(',')))?;
    let lease = mgr.lock("orders:42", Duration::from_secs(10))?; // 3 retries by default
    println!(
        "acquired orders:42, valid for {} ms",
        lease.validity().as_millis()
    );
    // ... finish the critical section within lease.validity() ...
    lease.extend(Duration::from_secs(10))?;
    lease.unlock()?;
    println!("released orders:42");

    let _guard = mgr
        .try_lock(b"orders:43", Duration::from_secs(5))?
        .into_guard(); // unlocks on drop
    match mgr.try_lock("orders:43", Duration::from_secs(5)) {
        Err(Error::NotAcquired(_)) => println!("orders:43 is held (by our guard), as expected"),
        other => drop(other?),
    }
    Ok(())
}
