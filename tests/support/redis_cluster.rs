//! Redis Clusters for tests: real `redis-server --cluster-enabled yes` processes, each in its
//! own temporary directory on its own loopback ports (the client port and the cluster bus),
//! joined by `redis-cli --cluster create`.

use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use super::{RedisServer, eventually, free_port};

/// One Redis Cluster: `primaries` shards, each with `replicas` replicas.
pub struct RedisCluster {
    /// Every server, as `redis-cli --cluster create` was given them: the primaries first.
    pub servers: Vec<RedisServer>,
}

/// `redis-cli`, beside the `redis-server` the tests run.
fn redis_cli() -> String {
    std::env::var("REDLOCK_TEST_REDIS_CLI").unwrap_or_else(|_| "redis-cli".into())
}

impl RedisCluster {
    /// Starts the servers, creates the cluster (the slots split evenly between the primaries,
    /// each replica assigned a primary by `redis-cli`), and waits until every server reports
    /// `cluster_state:ok` and sees every other.
    pub fn start(primaries: usize, replicas: usize) -> RedisCluster {
        assert!(primaries >= 1);
        let total = primaries * (1 + replicas);
        let handles: Vec<_> = (0..total)
            .map(|_| {
                thread::spawn(|| {
                    let bus = free_port().to_string();
                    RedisServer::start_with(&[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        &bus,
                        "--cluster-node-timeout",
                        "2000",
                    ])
                })
            })
            .collect();
        let servers: Vec<RedisServer> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let mut cmd = Command::new(redis_cli());
        cmd.arg("--cluster").arg("create");
        for s in &servers {
            cmd.arg(format!("127.0.0.1:{}", s.port));
        }
        let out = cmd
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let c = RedisCluster { servers };
        let ready = eventually(Duration::from_secs(30), || {
            c.servers.iter().all(|s| {
                let info = c.cluster_info(s);
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{total}\r"))
            })
        });
        assert!(ready, "the cluster did not become ready within 30 s");
        c
    }

    fn cluster_info(&self, s: &RedisServer) -> String {
        redis::cmd("CLUSTER")
            .arg("INFO")
            .query::<String>(&mut s.client())
            .unwrap_or_default()
    }

    /// `CLUSTER KEYSLOT key`, as the first server computes it.
    pub fn keyslot(&self, key: &[u8]) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.servers[0].client())
            .expect("CLUSTER KEYSLOT")
    }

    /// The slot ranges each primary serves, by port, from `CLUSTER SLOTS` on the first server.
    pub fn slot_ranges(&self) -> Vec<(u16, u16, u16)> {
        let v: redis::Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.servers[0].client())
            .expect("CLUSTER SLOTS");
        let redis::Value::Array(ranges) = v else {
            panic!("CLUSTER SLOTS: {v:?}")
        };
        let int = |v: &redis::Value| match v {
            redis::Value::Int(i) => *i as u16,
            other => panic!("CLUSTER SLOTS: not an integer: {other:?}"),
        };
        ranges
            .iter()
            .map(|r| {
                let redis::Value::Array(r) = r else {
                    panic!("CLUSTER SLOTS: {r:?}")
                };
                let redis::Value::Array(primary) = &r[2] else {
                    panic!("CLUSTER SLOTS: {r:?}")
                };
                (int(&r[0]), int(&r[1]), int(&primary[1]))
            })
            .collect()
    }
}
