//! Redis Clusters for tests: real `redis-server --cluster-enabled yes` processes, each in its
//! own temporary directory on its own loopback ports (the client port and the cluster bus),
//! joined by `redis-cli --cluster create`.

use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use super::{RedisServer, eventually};

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
    /// `cluster_state:ok` and sees every other. Without replicas the cluster is made by hand
    /// (`redis-cli --cluster create` wants at least three primaries): each primary adds its
    /// share of the slots, and the first meets the others.
    pub fn start(primaries: usize, replicas: usize) -> RedisCluster {
        RedisCluster::start_with(primaries, replicas, &[])
    }

    /// The same, each server started with `args` too.
    pub fn start_with(primaries: usize, replicas: usize, args: &[&str]) -> RedisCluster {
        assert!(primaries >= 1);
        let total = primaries * (1 + replicas);
        let handles: Vec<_> = (0..total)
            .map(|_| {
                let mut all = vec!["--cluster-node-timeout".to_string(), "2000".to_string()];
                all.extend(args.iter().map(|a| a.to_string()));
                thread::spawn(move || {
                    let all: Vec<&str> = all.iter().map(String::as_str).collect();
                    RedisServer::start_cluster_node(&all)
                })
            })
            .collect();
        let (servers, buses): (Vec<RedisServer>, Vec<u16>) =
            handles.into_iter().map(|h| h.join().unwrap()).unzip();
        let c = RedisCluster { servers };
        if replicas == 0 {
            c.create_by_hand(&buses);
        } else {
            c.create_with_redis_cli(replicas);
        }
        c.wait_ready(total);
        c
    }

    /// A cluster of `primaries` primaries that speaks only TLS (`tls`, the bus too:
    /// `--tls-cluster yes`), made by hand like [`start`](Self::start) without replicas. The bus
    /// always asks for a client certificate: each node presents the tests' client one.
    pub fn start_tls(primaries: usize, tls: &super::tls::TlsServe) -> RedisCluster {
        let handles: Vec<_> = (0..primaries)
            .map(|_| {
                let tls = tls.clone();
                thread::spawn(move || {
                    let cert = tls.client_cert.display().to_string();
                    let key = tls.client_key.display().to_string();
                    let args = [
                        "--cluster-node-timeout",
                        "2000",
                        "--tls-cluster",
                        "yes",
                        "--tls-client-cert-file",
                        &cert,
                        "--tls-client-key-file",
                        &key,
                    ];
                    RedisServer::start_cluster_node_tls(&tls, &args)
                })
            })
            .collect();
        let (servers, buses): (Vec<RedisServer>, Vec<u16>) =
            handles.into_iter().map(|h| h.join().unwrap()).unzip();
        let c = RedisCluster { servers };
        c.create_by_hand(&buses);
        c.wait_ready(primaries);
        c
    }

    /// Waits until every server reports `cluster_state:ok` and knows `total` nodes.
    fn wait_ready(&self, total: usize) {
        let ready = eventually(Duration::from_secs(30), || {
            self.servers.iter().all(|s| {
                let info = self.cluster_info(s);
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{total}\r"))
            })
        });
        if !ready {
            let logs: Vec<String> = (self.servers.iter())
                .map(|s| std::fs::read_to_string(s.dir.join("redis.log")).unwrap_or_default())
                .collect();
            let info: Vec<String> = self.servers.iter().map(|s| self.cluster_info(s)).collect();
            panic!(
                "the cluster did not become ready within 30 s: {info:?}\n{}",
                logs.join("\n")
            );
        }
    }

    fn create_with_redis_cli(&self, replicas: usize) {
        let mut cmd = Command::new(redis_cli());
        cmd.arg("--cluster").arg("create");
        for s in &self.servers {
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
    }

    fn create_by_hand(&self, buses: &[u16]) {
        let n = self.servers.len();
        let slots = usize::from(redlock::slot::SLOTS);
        for (i, s) in self.servers.iter().enumerate() {
            let (from, to) = (i * slots / n, (i + 1) * slots / n - 1);
            let mut conn = s.client();
            let _: () = redis::cmd("CLUSTER")
                .arg("SET-CONFIG-EPOCH")
                .arg(i + 1)
                .query(&mut conn)
                .expect("CLUSTER SET-CONFIG-EPOCH");
            let _: () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(from)
                .arg(to)
                .query(&mut conn)
                .expect("CLUSTER ADDSLOTSRANGE");
        }
        let mut first = self.servers[0].client();
        for (s, bus) in self.servers.iter().zip(buses).skip(1) {
            let _: () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(s.port)
                .arg(*bus)
                .query(&mut first)
                .expect("CLUSTER MEET");
        }
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
        self.slot_ranges_seen_by(&self.servers[0])
    }

    /// The slot ranges each primary serves, by port, as server `s` sees them (`CLUSTER SLOTS`).
    pub fn slot_ranges_seen_by(&self, s: &RedisServer) -> Vec<(u16, u16, u16)> {
        let v: redis::Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut s.client())
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

impl RedisCluster {
    /// The node id of server `s` (`CLUSTER MYID`).
    pub fn id(&self, s: &RedisServer) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut s.client())
            .expect("CLUSTER MYID")
    }

    /// The server that serves `port`.
    pub fn at(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|s| s.port == port)
            .expect("a server of this cluster")
    }

    /// Gives `slot` (which must hold no key) to `to`: `CLUSTER SETSLOT slot NODE id` on the
    /// new owner first, then on every other server; then waits (bounded) until every server
    /// names `to` as the owner, several reads in a row.
    ///
    /// The wait is needed: the new owner's config epoch comes from its own view of the
    /// cluster's epochs, which may lag (another primary may have bumped its epoch for another
    /// slot a moment ago). A server not yet told of the move then answers the new owner's
    /// gossip with an `UPDATE` naming the old owner, whose epoch is higher, and the new owner
    /// gives the slot back in its own view, while every other server names it. Such a server
    /// is told again until all agree.
    pub fn move_empty_slot(&self, slot: u16, to: &RedisServer) {
        let id = self.id(to);
        let set = |s: &RedisServer| {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&id)
                .query(&mut s.client())
                .expect("CLUSTER SETSLOT NODE");
        };
        let order = std::iter::once(to).chain(self.servers.iter().filter(|s| s.port != to.port));
        for s in order {
            set(s);
        }
        let until = std::time::Instant::now() + Duration::from_secs(30);
        let mut agreeing = 0;
        while agreeing < 5 {
            let stale: Vec<&RedisServer> = (self.servers.iter())
                .filter(|s| self.owner_seen_by(s, slot) != Some(to.port))
                .collect();
            if stale.is_empty() {
                agreeing += 1;
            } else {
                agreeing = 0;
                assert!(
                    std::time::Instant::now() < until,
                    "slot {slot}: the servers did not agree on its new owner within 30 s"
                );
                for s in stale {
                    eprintln!(
                        "slot {slot}: 127.0.0.1:{} names {:?} as its owner, not {}: told again",
                        s.port,
                        self.owner_seen_by(s, slot),
                        to.port
                    );
                    set(s);
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port of the primary that serves `slot`, as server `s` sees it (`None`: no owner).
    fn owner_seen_by(&self, s: &RedisServer, slot: u16) -> Option<u16> {
        (self.slot_ranges_seen_by(s).into_iter())
            .find(|(from, to, _)| (*from..=*to).contains(&slot))
            .map(|r| r.2)
    }

    /// Starts moving `slot` from `from` to `to`: `IMPORTING` on `to`, `MIGRATING` on `from`.
    /// Keys of the slot that `from` does not hold are then served by `to`, after `ASK`.
    pub fn begin_migration(&self, slot: u16, from: &RedisServer, to: &RedisServer) {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(self.id(from))
            .query(&mut to.client())
            .expect("CLUSTER SETSLOT IMPORTING");
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(self.id(to))
            .query(&mut from.client())
            .expect("CLUSTER SETSLOT MIGRATING");
    }

    /// `GET key` on `s` after `ASKING` (a key of a slot `s` is importing).
    pub fn get_asking(&self, s: &RedisServer, key: &[u8]) -> Option<Vec<u8>> {
        let (_, v): ((), Option<Vec<u8>>) = redis::pipe()
            .cmd("ASKING")
            .cmd("GET")
            .arg(key)
            .query(&mut s.client())
            .expect("ASKING, GET");
        v
    }
}

/// One slot migration in progress, step by step (as `redis-cli --cluster reshard` does it).
pub struct Migration<'c> {
    cluster: &'c RedisCluster,
    slot: u16,
    from: &'c RedisServer,
    to: &'c RedisServer,
}

impl RedisCluster {
    /// Starts moving `slot` from `from` to `to` (see [`begin_migration`](Self::begin_migration));
    /// the returned migration moves the keys and then hands the slot over.
    pub fn migrate<'c>(
        &'c self,
        slot: u16,
        from: &'c RedisServer,
        to: &'c RedisServer,
    ) -> Migration<'c> {
        self.begin_migration(slot, from, to);
        Migration {
            cluster: self,
            slot,
            from,
            to,
        }
    }
}

impl Migration<'_> {
    /// `MIGRATE`s every key of the slot from the source to the target, in batches (keys keep
    /// their TTLs).
    pub fn move_keys(&self) {
        let mut src = self.from.client();
        for _ in 0..10_000 {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(100)
                .query(&mut src)
                .expect("CLUSTER GETKEYSINSLOT");
            if keys.is_empty() {
                return;
            }
            let mut m = redis::cmd("MIGRATE");
            m.arg("127.0.0.1")
                .arg(self.to.port)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS");
            for k in &keys {
                m.arg(k);
            }
            // A key may expire or be deleted meanwhile: NOKEY is fine.
            let _: redis::RedisResult<String> = m.query(&mut src);
        }
        panic!("slot {} never emptied", self.slot);
    }

    /// Hands the slot to the target on every server (the target first).
    pub fn finish(self) {
        self.cluster.move_empty_slot(self.slot, self.to);
    }
}
