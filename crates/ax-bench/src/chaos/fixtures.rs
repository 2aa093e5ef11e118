//! What the suite starts for itself, so that it may kill and pause it: a MariaDB server with its
//! own data folder, Redis servers (one, or a primary, a replica and three Sentinels), and a
//! network namespace joined to the host by a veth pair. All of it listens on loopback (and on
//! the veth pair's host address when there is one), and all of it goes when dropped, whatever
//! happened.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::faults::{self, Signal};
use crate::load::cluster::free_port;

/// How long a server may take to answer after it is started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A server the suite runs as its child, with its output in a log file.
pub struct Daemon {
    name: String,
    child: Child,
}

impl Daemon {
    fn spawn(name: &str, program: &str, args: &[String], log: &Path) -> anyhow::Result<Daemon> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let err = out.try_clone().context("cannot open a log twice")?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("cannot start {name} ({program})"))?;
        Ok(Daemon {
            name: name.to_string(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        faults::send(self.pid(), signal).with_context(|| format!("signalling {}", self.name))
    }

    /// `kill -9`, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `ready` says yes, or fails after [`READY_TIMEOUT`] naming `what`.
async fn wait_ready(what: &str, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    while !ready() {
        if Instant::now() > deadline {
            bail!("{what} did not come up within {READY_TIMEOUT:?}");
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Sends one inline Redis command and returns the first line of the reply; `None` when the
/// server does not answer within a second.
pub fn redis_command(port: u16, command: &str) -> Option<String> {
    let address = ("127.0.0.1", port);
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut buffer = [0u8; 4096];
    let n = stream.read(&mut buffer).ok()?;
    Some(String::from_utf8_lossy(&buffer[..n]).into_owned())
}

/// The strings of a RESP reply of flat arrays of bulk strings, without the length lines.
fn words(reply: &str) -> Vec<&str> {
    reply
        .split("\r\n")
        .filter(|line| !line.is_empty() && !line.starts_with(['*', '$']))
        .collect()
}

/// A `redis-server` of the suite, restartable on the same port.
pub struct Redis {
    pub port: u16,
    name: String,
    args: Vec<String>,
    log: PathBuf,
    daemon: Option<Daemon>,
}

impl Redis {
    /// Starts a Redis listening on `binds` (loopback first) with no persistence, and `extra`
    /// arguments (`--replicaof …`).
    pub async fn start(
        name: &str,
        dir: &Path,
        binds: &[String],
        extra: &[String],
    ) -> anyhow::Result<Redis> {
        let port = free_port("127.0.0.1")?;
        let mut args = vec!["--port".to_string(), port.to_string(), "--bind".to_string()];
        args.extend(binds.iter().cloned());
        args.extend(
            ["--save", "", "--appendonly", "no", "--protected-mode", "no"]
                .iter()
                .map(|arg| arg.to_string()),
        );
        // A folder each: a replica's full sync writes its RDB file there.
        let data = dir.join(name);
        std::fs::create_dir_all(&data)
            .with_context(|| format!("cannot create {}", data.display()))?;
        args.extend(["--dir".to_string(), data.display().to_string()]);
        args.extend(extra.iter().cloned());
        let mut redis = Redis {
            port,
            name: name.to_string(),
            args,
            log: dir.join(format!("{name}.log")),
            daemon: None,
        };
        redis.restart().await?;
        Ok(redis)
    }

    /// Starts it again (after [`Redis::kill`]) and waits until it answers.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.daemon = Some(Daemon::spawn(
            &self.name,
            "redis-server",
            &self.args,
            &self.log,
        )?);
        let port = self.port;
        wait_ready(&self.name, || {
            redis_command(port, "PING").is_some_and(|reply| reply.starts_with("+PONG"))
        })
        .await
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            daemon.kill();
        }
    }

    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        match &self.daemon {
            Some(daemon) => daemon.signal(signal),
            None => bail!("{} is not running", self.name),
        }
    }

    /// Its URL on `host`.
    pub fn url(&self, host: &str) -> String {
        format!("redis://{host}:{}", self.port)
    }
}

/// A MariaDB server of the suite: its own data folder (`mariadb-install-db`), its own port, root
/// with no password from any address it listens on; restartable on the same folder and port.
pub struct Mariadb {
    pub port: u16,
    name: String,
    args: Vec<String>,
    socket: String,
    log: PathBuf,
    /// A Galera joiner's data folder: a state transfer writes it through an rsync daemon that
    /// runs as `nobody`, so `nobody` owns it before every start (the server, root, reads it).
    joiner: Option<PathBuf>,
    daemon: Option<Daemon>,
}

/// The database the ax processes share.
pub const DATABASE: &str = "ax_chaos";

impl Mariadb {
    /// Installs and starts the suite's MariaDB server, listening on `binds`.
    pub async fn start(dir: &Path, binds: &[String]) -> anyhow::Result<Mariadb> {
        let mut server = Mariadb::install("mariadb", dir, binds, &[], false)?;
        server.restart().await?;
        server.let_root_in()?;
        Ok(server)
    }

    /// Makes the data folder `dir/name` and the arguments of a server on a free port, with
    /// `extra` arguments (Galera's); starts nothing. An `empty` folder is a Galera joiner's:
    /// its state transfer fills it.
    fn install(
        name: &str,
        dir: &Path,
        binds: &[String],
        extra: &[String],
        empty: bool,
    ) -> anyhow::Result<Mariadb> {
        let data = dir.join(name);
        std::fs::create_dir_all(&data)
            .with_context(|| format!("cannot create {}", data.display()))?;
        let datadir = format!("--datadir={}", data.display());
        if !empty {
            faults::run(
                "mariadb-install-db",
                &[
                    "--no-defaults",
                    &datadir,
                    "--user=root",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                ],
            )
            .with_context(|| format!("cannot create the data folder of {name}"))?;
        }
        let port = free_port("127.0.0.1")?;
        let socket = dir.join(format!("{name}.sock")).display().to_string();
        let mut args: Vec<String> = vec![
            "--no-defaults".into(),
            datadir,
            format!("--socket={socket}"),
            format!("--pid-file={}", dir.join(format!("{name}.pid")).display()),
            format!("--port={port}"),
            format!("--bind-address={}", binds.join(",")),
            "--user=root".into(),
            "--skip-name-resolve".into(),
            "--innodb-buffer-pool-size=128M".into(),
            "--max-connections=400".into(),
        ];
        args.extend(extra.iter().cloned());
        Ok(Mariadb {
            port,
            name: name.to_string(),
            args,
            socket,
            log: dir.join(format!("{name}.log")),
            joiner: empty.then_some(data),
            daemon: None,
        })
    }

    /// Starts the server (again) with `extra` arguments for this start only, and waits until
    /// it answers.
    async fn start_with(&mut self, extra: &[String]) -> anyhow::Result<()> {
        if let Some(data) = &self.joiner {
            faults::run(
                "chown",
                &["-R", "nobody:nogroup", &data.display().to_string()],
            )
            .with_context(|| format!("cannot open {} to the state transfer", data.display()))?;
        }
        let mut args = self.args.clone();
        args.extend(extra.iter().cloned());
        self.daemon = Some(Daemon::spawn(&self.name, "mariadbd", &args, &self.log)?);
        let socket = format!("--socket={}", self.socket);
        wait_ready(&self.name, || {
            faults::run("mysqladmin", &[&socket, "-uroot", "ping"]).is_ok()
        })
        .await
    }

    /// Starts the server again (after [`Mariadb::kill`]) and waits until it answers.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.start_with(&[]).await
    }

    /// Root from any address the server listens on (no name resolution: `localhost` would not
    /// match a TCP client).
    fn let_root_in(&self) -> anyhow::Result<()> {
        faults::run(
            "mariadb",
            &[
                &format!("--socket={}", self.socket),
                "-uroot",
                "-e",
                "CREATE USER IF NOT EXISTS 'root'@'%'; \
                 GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;",
            ],
        )
        .with_context(|| format!("cannot let root into {} over TCP", self.name))
    }

    /// The store URL of the ax processes, reaching it on `host`.
    pub fn url(&self, host: &str) -> String {
        format!("mysql://root@{host}:{}/{DATABASE}", self.port)
    }

    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        match &self.daemon {
            Some(daemon) => daemon.signal(signal),
            None => bail!("{} is not running", self.name),
        }
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            daemon.kill();
        }
    }
}

/// Galera's provider library, from Debian's `galera-4`.
pub const GALERA: &str = "/usr/lib/galera/libgalera_smm.so";

/// Three MariaDB servers in one Galera cluster on loopback (replication, IST and rsync SST on
/// ports of their own).
pub struct Galera {
    pub nodes: Vec<Mariadb>,
}

impl Galera {
    /// Bootstraps the first node, then joins the others to it one at a time (a full state
    /// transfer each, by rsync).
    pub async fn start(dir: &Path) -> anyhow::Result<Galera> {
        let loopback = ["127.0.0.1".to_string()];
        let ports: Vec<[u16; 3]> = (0..3)
            .map(|_| {
                Ok([
                    free_port("127.0.0.1")?,
                    free_port("127.0.0.1")?,
                    free_port("127.0.0.1")?,
                ])
            })
            .collect::<anyhow::Result<_>>()?;
        let members: Vec<String> = ports
            .iter()
            .map(|[group, ..]| format!("127.0.0.1:{group}"))
            .collect();
        let mut nodes = Vec::new();
        for (n, [group, ist, sst]) in ports.iter().enumerate() {
            let extra = vec![
                "--wsrep-on=ON".to_string(),
                format!("--wsrep-provider={GALERA}"),
                format!("--wsrep-cluster-address=gcomm://{}", members.join(",")),
                "--wsrep-cluster-name=ax_chaos".to_string(),
                format!("--wsrep-node-name=galera-{}", n + 1),
                format!("--wsrep-node-address=127.0.0.1:{group}"),
                // A dead node suspected after 1 s, as docs/production.md recommends: the
                // cluster holds every commit until it is.
                format!(
                    "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{group};\
                     ist.recv_addr=127.0.0.1:{ist};evs.keepalive_period=PT0.2S;\
                     evs.inactive_check_period=PT0.2S;evs.suspect_timeout=PT1S"
                ),
                "--wsrep-sst-method=rsync".to_string(),
                format!("--wsrep-sst-receive-address=127.0.0.1:{sst}"),
                "--binlog-format=ROW".to_string(),
                "--innodb-autoinc-lock-mode=2".to_string(),
            ];
            let name = format!("galera-{}", n + 1);
            let mut node = Mariadb::install(&name, dir, &loopback, &extra, n > 0)?;
            if n == 0 {
                node.start_with(&["--wsrep-new-cluster".to_string()])
                    .await?;
                node.let_root_in()?;
            } else {
                node.restart().await?;
            }
            nodes.push(node);
        }
        Ok(Galera { nodes })
    }

    /// A store URL listing every node, node `first` first: the process it is given writes to
    /// that node and moves on to the next when it dies.
    pub fn url_from(&self, first: usize) -> String {
        let count = self.nodes.len();
        let hosts: Vec<String> = (0..count)
            .map(|n| format!("127.0.0.1:{}", self.nodes[(first + n) % count].port))
            .collect();
        format!("mysql://root@{}/{DATABASE}", hosts.join(","))
    }
}

/// The Sentinel set of the failover scenario: a primary, a replica and three Sentinels
/// watching them as `mymaster`.
pub struct Sentinels {
    pub primary: Redis,
    _replica: Redis,
    _sentinels: Vec<Daemon>,
    ports: Vec<u16>,
}

/// The name the Sentinels know the primary by.
pub const SENTINEL_MASTER: &str = "mymaster";

impl Sentinels {
    pub async fn start(dir: &Path) -> anyhow::Result<Sentinels> {
        let loopback = ["127.0.0.1".to_string()];
        let primary = Redis::start("redis-primary", dir, &loopback, &[]).await?;
        let replicaof = [
            "--replicaof".to_string(),
            "127.0.0.1".to_string(),
            primary.port.to_string(),
        ];
        let replica = Redis::start("redis-replica", dir, &loopback, &replicaof).await?;
        let mut sentinels = Vec::new();
        let mut ports = Vec::new();
        for n in 1..=3 {
            let port = free_port("127.0.0.1")?;
            // Sentinel rewrites its config file: one each, in the suite's folder.
            let config = dir.join(format!("sentinel-{n}.conf"));
            std::fs::write(
                &config,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\n\
                     sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} 2000\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 10000\n\
                     sentinel parallel-syncs {SENTINEL_MASTER} 1\n",
                    dir.display(),
                    primary.port
                ),
            )
            .with_context(|| format!("cannot write {}", config.display()))?;
            let args = [config.display().to_string(), "--sentinel".to_string()];
            let log = dir.join(format!("sentinel-{n}.log"));
            sentinels.push(Daemon::spawn(
                &format!("sentinel-{n}"),
                "redis-server",
                &args,
                &log,
            )?);
            ports.push(port);
        }
        let sentinels = Sentinels {
            primary,
            _replica: replica,
            _sentinels: sentinels,
            ports,
        };
        // Every Sentinel knows the replica and the other Sentinels before any fault.
        let ports = sentinels.ports.clone();
        wait_ready("the Sentinels", || {
            ports.iter().all(|port| {
                let reply = redis_command(*port, &format!("SENTINEL MASTER {SENTINEL_MASTER}"));
                reply.is_some_and(|reply| {
                    let words = words(&reply);
                    let field = |name: &str| {
                        let at = words.iter().position(|word| *word == name)?;
                        words.get(at + 1).copied()
                    };
                    field("num-slaves") == Some("1") && field("num-other-sentinels") == Some("2")
                })
            })
        })
        .await?;
        Ok(sentinels)
    }

    /// ax's URL of the set: `redis+sentinel://h:p,h:p,h:p/mymaster/0`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{SENTINEL_MASTER}/0", hosts.join(","))
    }

    /// The primary's port as the first Sentinel sees it.
    pub fn primary_port(&self) -> Option<u16> {
        let reply = redis_command(
            self.ports[0],
            &format!("SENTINEL GET-MASTER-ADDR-BY-NAME {SENTINEL_MASTER}"),
        )?;
        // An array of two bulk strings: the host, then the port.
        words(&reply).get(1)?.parse().ok()
    }
}

/// A network namespace and the veth pair joining it to the host: the host end holds
/// `169.254.N.1/30`, the namespace's end `169.254.N.2/30`; nothing routes beyond the pair.
pub struct Netns {
    pub name: String,
    host_link: String,
    ns_link: String,
    /// The host's address on the pair: the suite's servers listen on it too.
    pub host_address: String,
    /// The namespace's address on the pair: the ax process in it binds it.
    pub ns_address: String,
}

impl Netns {
    /// Creates the namespace and the pair, named and numbered after this process's id so two
    /// suites on one machine do not meet. Cleans up what it made if a step fails.
    pub fn create() -> anyhow::Result<Netns> {
        let id = std::process::id();
        let subnet = 1 + id % 250;
        let netns = Netns {
            name: format!("axchaos{id}"),
            host_link: format!("axh{}", id % 100_000),
            ns_link: format!("axn{}", id % 100_000),
            host_address: format!("169.254.{subnet}.1"),
            ns_address: format!("169.254.{subnet}.2"),
        };
        netns.set_up().context(
            "cannot create the network namespace and its veth pair (CAP_NET_ADMIN needed)",
        )?;
        Ok(netns)
    }

    fn set_up(&self) -> anyhow::Result<()> {
        let (ns, host, inside) = (&self.name, &self.host_link, &self.ns_link);
        faults::run("ip", &["netns", "add", ns])?;
        faults::run(
            "ip",
            &["link", "add", host, "type", "veth", "peer", "name", inside],
        )?;
        faults::run("ip", &["link", "set", inside, "netns", ns])?;
        let host_cidr = format!("{}/30", self.host_address);
        let ns_cidr = format!("{}/30", self.ns_address);
        faults::run("ip", &["addr", "add", &host_cidr, "dev", host])?;
        faults::run("ip", &["link", "set", host, "up"])?;
        self.in_ns(&["ip", "addr", "add", &ns_cidr, "dev", inside])?;
        self.in_ns(&["ip", "link", "set", inside, "up"])?;
        self.in_ns(&["ip", "link", "set", "lo", "up"])?;
        Ok(())
    }

    fn in_ns(&self, command: &[&str]) -> anyhow::Result<()> {
        let mut args = vec!["netns", "exec", &self.name];
        args.extend_from_slice(command);
        faults::run("ip", &args)
    }

    /// The command prefix that runs a program inside the namespace.
    pub fn wrapper(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name]
            .iter()
            .map(|part| part.to_string())
            .collect()
    }

    /// Cuts the pair (its end in the namespace down: the host keeps its address, so the
    /// processes outside still reach the servers on it) or joins it again.
    pub fn set_cut(&self, cut: bool) -> anyhow::Result<()> {
        let state = if cut { "down" } else { "up" };
        self.in_ns(&["ip", "link", "set", &self.ns_link, state])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and with it the host's end.
        let _ = faults::run("ip", &["netns", "del", &self.name]);
        let _ = faults::run("ip", &["link", "del", &self.host_link]);
    }
}
