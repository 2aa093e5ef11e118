//! A real ax starting up: its instance id across restarts and kills, on SQLite, MariaDB and
//! PostgreSQL; one process per SQLite file; and what `/healthz` says when a part of it is gone.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ax_server::actors::Halt;
use serde_json::Value;

use crate::common::{
    config, free_port, host_port, on_each_backend, start_ax, Api, AxProcess, RedisProcess,
    TestStore,
};

fn every_store() -> [TestStore; 3] {
    [
        TestStore::sqlite(),
        TestStore::mysql(),
        TestStore::postgres(),
    ]
}

fn on(store: &TestStore) -> Vec<(String, String)> {
    vec![("AX_STORE_URL".into(), store.url())]
}

/// The instance id a healthy process reports.
async fn instance_id(process: &AxProcess) -> String {
    let (status, health) = Api::at(process.base()).get("/healthz").await;
    assert_eq!(status, 200, "{health}");
    health["instanceId"]
        .as_str()
        .expect("instanceId")
        .to_string()
}

/// Starts `ax serve` on `store` (with `AX_INSTANCE_ID` = `configured`, if given) and checks it
/// is refused because `holder` is in use.
fn assert_refused(store: &TestStore, configured: Option<&str>, holder: &str) {
    let expected =
        format!("ax: cannot start: instance id {holder} is in use by another running ax process");
    assert_eq!(refusal(store, configured), expected);
}

/// Starts `ax serve` on `store` (with `AX_INSTANCE_ID` = `configured`, if given), checks that it
/// exits 1 with one line on stderr, and returns that line.
fn refusal(store: &TestStore, configured: Option<&str>) -> String {
    let (code, line) = serve_refused(store, configured, &[]);
    assert_eq!(code, Some(1), "{line}");
    line
}

/// Starts `ax serve` on `store` (with `AX_INSTANCE_ID` = `configured`, if given, and `env`
/// besides), checks that it ends with one line on stderr, and returns its exit code and that
/// line.
fn serve_refused(
    store: &TestStore,
    configured: Option<&str>,
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ax"));
    command
        .arg("serve")
        .current_dir(dir.path())
        .env_remove("AX_INSTANCE_ID")
        .env_remove("AX_REDIS_URL")
        .env("AX_BIND", "127.0.0.1")
        .env("AX_PORT", free_port().to_string())
        .env("AX_STORE_URL", store.url())
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    if let Some(id) = configured {
        command.env("AX_INSTANCE_ID", id);
    }
    let output = command.output().expect("run ax serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "one line: {stderr}");
    (output.status.code(), line.to_string())
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_node_keeps_its_host_identity_across_restarts_and_kills() {
    for store in every_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut node = AxProcess::start_with_host_identity(dir.path(), "node", on(&store)).await;
        let id = instance_id(&node).await;
        let (_, suffix) = id.rsplit_once('-').expect("<host>-<hex>");
        assert!(
            suffix.len() == 8 && suffix.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
        assert_eq!(node.stop().await, Some(0));
        node.restart().await;
        assert_eq!(instance_id(&node).await, id, "after a clean stop");
        node.kill();
        actix_rt::time::sleep(Duration::from_millis(500)).await;
        let restarted = Instant::now();
        node.restart().await;
        let took = restarted.elapsed();
        assert!(
            took < Duration::from_secs(8),
            "restart after kill -9: {took:?}"
        );
        assert_eq!(instance_id(&node).await, id, "after kill -9");
        assert_eq!(node.stop().await, Some(0));
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_second_process_with_a_live_identity_is_refused() {
    // On SQLite a second process is refused whatever its id: see the next test.
    for store in [TestStore::mysql(), TestStore::postgres()] {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = AxProcess::start_with_host_identity(dir.path(), "first", on(&store)).await;
        let id = instance_id(&first).await;
        assert_refused(&store, None, &id);
        // A configured id is the same, and distinct ids run side by side.
        let named = AxProcess::start(dir.path(), "node-a", on(&store)).await;
        assert_refused(&store, Some("node-a"), "node-a");
        assert_refused(&store, Some(&id), &id);
        assert_eq!(instance_id(&first).await, id);
        assert_eq!(instance_id(&named).await, "node-a");
    }
}

/// A SQLite file is one process's: a second `ax serve` on it is refused whatever its instance
/// id, and one starts once the first has stopped.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_second_process_on_a_sqlite_file_is_refused() {
    let store = TestStore::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut first = AxProcess::start(dir.path(), "node-a", on(&store)).await;
    let path = store.url().trim_start_matches("sqlite://").to_string();
    let expected = format!(
        "ax: cannot start: the SQLite file {path} is in use by another running ax process (one \
         ax serve per SQLite file; several share a MySQL/MariaDB store)"
    );
    for id in [Some("node-b"), Some("node-a"), None] {
        assert_eq!(refusal(&store, id), expected, "instance id {id:?}");
    }
    assert_eq!(instance_id(&first).await, "node-a", "the first runs on");
    assert_eq!(first.stop().await, Some(0));
    let second = AxProcess::start(dir.path(), "node-b", on(&store)).await;
    assert_eq!(instance_id(&second).await, "node-b");
    assert_eq!(second.terminate().await, Some(0));
}

/// Redis refusing the credentials of `redis.url` is a setting to correct, not an outage to wait
/// out: `ax serve` exits 2 at once, its one line naming `redis.url` and not the password; a
/// wrong password and none at all alike. With the right one it starts, Redis up.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_password_redis_refuses_exits_2_naming_redis_url() {
    let port = free_port();
    let _redis = RedisProcess::start(port, &["--requirepass", "secret"]).await;
    let store = TestStore::sqlite();
    let wrong = format!("wrong-{}", uuid::Uuid::new_v4().simple());
    for (url, words) in [
        (
            format!("redis://:{wrong}@127.0.0.1:{port}"),
            "authentication failed",
        ),
        (format!("redis://127.0.0.1:{port}"), "NOAUTH"),
    ] {
        let started = Instant::now();
        let (code, line) = serve_refused(&store, None, &[("AX_REDIS_URL", &url)]);
        let took = started.elapsed();
        assert_eq!(code, Some(2), "{url}: {line}");
        let expected = format!("ax: cannot start: redis.url: Redis at 127.0.0.1:{port} refused");
        assert!(line.starts_with(&expected), "{url}: {line}");
        assert!(
            line.to_lowercase().contains(&words.to_lowercase()),
            "{url}: {line}"
        );
        assert!(!line.contains(&wrong), "the password shown: {line}");
        assert!(
            took < Duration::from_secs(5),
            "{url}: exited after {took:?}"
        );
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let right = format!("redis://:secret@127.0.0.1:{port}");
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), right),
    ];
    let ax = AxProcess::start(dir.path(), "password", env).await;
    let (status, health) = Api::at(ax.base()).get("/healthz").await;
    assert_eq!(
        (status, &health["redis"]),
        (200, &Value::from("up")),
        "{health}"
    );
    assert_eq!(ax.terminate().await, Some(0));
}

/// Polls `/healthz` until it answers `status`; returns how long that took and the body.
async fn wait_for_health(api: &Api, status: u16, timeout: Duration) -> (Duration, Value) {
    let started = Instant::now();
    loop {
        let (got, body) = api.get("/healthz").await;
        if got == status {
            return (started.elapsed(), body);
        }
        assert!(
            started.elapsed() < timeout,
            "/healthz still {got} after {timeout:?}, not {status}: {body}"
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn healthz_is_503_once_the_wheel_has_stopped() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "health-wheel")).await;
    let api = Api::new(&ax);
    let (_, health) = wait_for_health(&api, 200, Duration::from_secs(5)).await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["instanceId"], "health-wheel");
    assert_eq!(health["store"], "sqlite");
    assert!(health["wheelSize"].is_u64(), "{health}");
    ax.wheel().send(Halt).await.expect("the wheel takes Halt");
    let (_, health) = wait_for_health(&api, 503, Duration::from_secs(3)).await;
    assert_eq!(health["status"], "unavailable", "{health}");
    let reason = health["reason"].as_str().expect("reason");
    assert!(reason.contains("the wheel has stopped"), "{reason}");
    assert_eq!(health["instanceId"], "health-wheel");
    assert_eq!(health["wheelSize"], Value::Null);
    ax.shutdown().await;
}

on_each_backend!(healthz_follows_a_database_outage_on, mariadb: healthz_follows_a_database_outage, postgres: healthz_follows_a_database_outage_on_postgres);

async fn healthz_follows_a_database_outage_on(store: TestStore) {
    let server = host_port(store.server());
    let proxy = Proxy::start(server.clone());
    let mut config = config(&store, false, "health-db");
    let through_proxy = format!("127.0.0.1:{}", proxy.port);
    let url = store.url().replace(&server, &through_proxy);
    // MySQL's driver would move to the server's Unix socket, past the proxy, unless told not
    // to.
    config.store.url = match store {
        TestStore::Mysql(_) => format!("{url}?prefer_socket=false"),
        _ => url,
    };
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let (_, health) = wait_for_health(&api, 200, Duration::from_secs(5)).await;
    assert_eq!(health["store"], store.backend(), "{health}");

    proxy.cut();
    let (took, health) = wait_for_health(&api, 503, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(5), "503 after {took:?}");
    let reason = health["reason"].as_str().expect("reason");
    assert!(reason.contains("the store"), "{reason}");
    assert!(!reason.contains("wheel"), "{reason}");

    proxy.restore();
    let (took, health) = wait_for_health(&api, 200, Duration::from_secs(20)).await;
    assert!(took < Duration::from_secs(10), "200 again after {took:?}");
    assert_eq!(health["status"], "ok", "{health}");
    ax.shutdown().await;
}

/// A TCP proxy to the database that the test can cut (every connection closed, new ones
/// closed at once) and restore.
struct Proxy {
    port: u16,
    open: Arc<AtomicBool>,
    /// Set when it is dropped: its thread stops.
    stopped: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let open = Arc::new(AtomicBool::new(true));
        let stopped = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (accepting, stopping, tracked) = (open.clone(), stopped.clone(), connections.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if !accepting.load(Ordering::SeqCst) {
                    continue;
                }
                if let Ok(server) = TcpStream::connect(&target) {
                    relay(&client, &server, &tracked);
                }
            }
        });
        Proxy {
            port,
            open,
            stopped,
            connections,
        }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for stream in self.connections.lock().expect("lock").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    /// Closes its connections and stops its thread (woken by a last connection).
    fn drop(&mut self) {
        self.cut();
        self.stopped.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies both ways between `client` and `server` until either side closes.
fn relay(client: &TcpStream, server: &TcpStream, tracked: &Mutex<Vec<TcpStream>>) {
    let streams = [client, server].map(|s| s.try_clone());
    let [Ok(client), Ok(server)] = streams else {
        return;
    };
    for (from, to) in [(&client, &server), (&server, &client)] {
        let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
            return;
        };
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Both);
        });
    }
    tracked.lock().expect("lock").extend([client, server]);
}

/// A certificate authority made for a test: its PEM, and the issuer to sign with.
fn test_ca(name: &str) -> (String, rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().expect("CA key");
    let ca = rcgen::CertifiedIssuer::self_signed(params, key).expect("CA");
    (ca.pem(), ca)
}

/// The PEM files of a TLS Redis in `dir`: `ca.pem`, the CA that signed `server.pem` (for
/// 127.0.0.1) and its key `server.key`, and `other-ca.pem`, a CA that signed nothing.
struct TlsFiles {
    ca: String,
    other_ca: String,
    cert: String,
    key: String,
}

impl TlsFiles {
    fn make(dir: &std::path::Path) -> TlsFiles {
        let path = |name: &str| dir.join(name).display().to_string();
        let (ca_pem, ca) = test_ca("ax test CA");
        let (other_pem, _) = test_ca("another CA");
        let server_key = rcgen::KeyPair::generate().expect("server key");
        let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .expect("server params")
            .signed_by(&server_key, &ca)
            .expect("server certificate");
        let files = TlsFiles {
            ca: path("ca.pem"),
            other_ca: path("other-ca.pem"),
            cert: path("server.pem"),
            key: path("server.key"),
        };
        for (file, pem) in [
            (&files.ca, ca_pem),
            (&files.other_ca, other_pem),
            (&files.cert, server.pem()),
            (&files.key, server_key.serialize_pem()),
        ] {
            std::fs::write(file, pem).expect("write PEM");
        }
        files
    }

    /// A `redis-server` answering only TLS on `port`, with `password`.
    async fn redis(&self, port: u16, password: &str) -> RedisProcess {
        let port = port.to_string();
        let args = [
            "--port",
            "0",
            "--tls-port",
            &port,
            "--tls-cert-file",
            &self.cert,
            "--tls-key-file",
            &self.key,
            "--tls-ca-cert-file",
            &self.ca,
            "--tls-auth-clients",
            "no",
            "--requirepass",
            password,
        ];
        RedisProcess::start(port.parse().expect("port"), &args).await
    }

    /// A TLS connection to the Redis at `url`, checked against the test's CA.
    async fn conn(&self, url: &str) -> redis::aio::MultiplexedConnection {
        let certificates = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(std::fs::read(&self.ca).expect("CA")),
        };
        redis::Client::build_with_tls(url, certificates)
            .expect("TLS client")
            .get_multiplexed_async_connection()
            .await
            .expect("the test's TLS connection")
    }
}

/// The heartbeat keys of the Redis `conn` reaches.
async fn heartbeats(conn: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("*instance*")
        .query_async(conn)
        .await
        .expect("KEYS")
}

/// `redis.url = rediss://…` with `redis.ca_file`: ax checks Redis's certificate against the
/// CA file, connects (its heartbeat is written over TLS) and shows no password. A certificate
/// of another CA, a CA file that cannot be read, or a CA file for a URL without TLS: `ax
/// serve` exits 2 at once, naming the settings and not the password.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn rediss_is_checked_against_redis_ca_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let tls = TlsFiles::make(dir.path());
    let port = free_port();
    let _redis = tls.redis(port, "tls-secret").await;
    let ca_file = tls.ca.clone();
    let store = TestStore::sqlite();
    let url = format!("rediss://:tls-secret@127.0.0.1:{port}");

    let refusals = [
        (
            tls.other_ca.clone(),
            url.clone(),
            format!(
                "ax: cannot start: redis.url, redis.ca_file: the TLS certificate of Redis at \
                 127.0.0.1:{port} is not trusted"
            ),
        ),
        (
            path("missing.pem"),
            url.clone(),
            format!(
                "ax: cannot start: redis.ca_file: cannot read {}",
                path("missing.pem")
            ),
        ),
        (
            ca_file.clone(),
            format!("redis://:tls-secret@127.0.0.1:{port}"),
            "ax: cannot start: redis.ca_file is set but redis.url is not rediss://".to_string(),
        ),
    ];
    for (ca, url, expected) in refusals {
        let started = Instant::now();
        let env = [
            ("AX_REDIS_URL", url.as_str()),
            ("AX_REDIS_CA_FILE", ca.as_str()),
        ];
        let (code, line) = serve_refused(&store, None, &env);
        assert_eq!(code, Some(2), "{ca}: {line}");
        assert!(line.starts_with(&expected), "{ca}: {line}");
        assert!(!line.contains("tls-secret"), "the password shown: {line}");
        assert!(started.elapsed() < Duration::from_secs(5), "{ca}: slow");
    }

    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), url.clone()),
        ("AX_REDIS_CA_FILE".to_string(), ca_file.clone()),
        ("RUST_LOG".to_string(), "info".to_string()),
    ];
    let ax = AxProcess::start(dir.path(), "tls", env).await;
    let (status, health) = Api::at(ax.base()).get("/healthz").await;
    assert_eq!(
        (status, &health["redis"]),
        (200, &Value::from("up")),
        "{health}"
    );
    let written = heartbeats(&mut tls.conn(&url).await).await;
    assert!(
        written.iter().any(|key| key.ends_with(":tls")),
        "ax's heartbeat over TLS: {written:?}"
    );
    let log_path = ax.log_path();
    assert_eq!(ax.terminate().await, Some(0));
    let log = std::fs::read_to_string(log_path).expect("ax's log");
    assert!(!log.contains("tls-secret"), "the password logged:\n{log}");
}

/// `rediss+sentinel://` with `redis.ca_file` and `redis.sentinel_password`: ax asks a TLS
/// sentinel that has a password of its own for the primary, and reaches the primary over TLS
/// with the URL's password. Without the sentinel's password, `ax serve` exits 2. Neither
/// password is shown or logged.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn rediss_sentinel_takes_the_ca_file_and_the_sentinels_password() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tls = TlsFiles::make(dir.path());
    let primary_port = free_port();
    let _primary = tls.redis(primary_port, "data-secret").await;
    let sentinel_port = free_port();
    let tls_config = format!(
        "port 0\ntls-port {sentinel_port}\ntls-cert-file {}\ntls-key-file {}\n\
         tls-ca-cert-file {}\ntls-auth-clients no\ntls-replication yes\n\
         requirepass sentinel-secret\n",
        tls.cert, tls.key, tls.ca
    );
    let _sentinel = RedisProcess::sentinel_with(
        dir.path(),
        sentinel_port,
        "tlsprimary",
        primary_port,
        "data-secret",
        &tls_config,
    )
    .await;
    let store = TestStore::sqlite();
    let url = format!("rediss+sentinel://:data-secret@127.0.0.1:{sentinel_port}/tlsprimary");
    let env = [
        ("AX_REDIS_URL", url.as_str()),
        ("AX_REDIS_CA_FILE", tls.ca.as_str()),
    ];
    let (code, line) = serve_refused(&store, None, &env);
    assert_eq!(code, Some(2), "no sentinel password: {line}");
    let expected = format!(
        "ax: cannot start: redis.url, redis.sentinel_password: Redis at the primary of \
         `tlsprimary` (sentinels 127.0.0.1:{sentinel_port}) refused"
    );
    assert!(line.starts_with(&expected), "{line}");
    assert!(!line.contains("secret"), "a password shown: {line}");

    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), url),
        ("AX_REDIS_CA_FILE".to_string(), tls.ca.clone()),
        (
            "AX_REDIS_SENTINEL_PASSWORD".to_string(),
            "sentinel-secret".to_string(),
        ),
        ("RUST_LOG".to_string(), "info".to_string()),
    ];
    let ax = AxProcess::start(dir.path(), "tls-sentinel", env).await;
    let (status, health) = Api::at(ax.base()).get("/healthz").await;
    assert_eq!(
        (status, &health["redis"]),
        (200, &Value::from("up")),
        "{health}"
    );
    let primary_url = format!("rediss://:data-secret@127.0.0.1:{primary_port}");
    let written = heartbeats(&mut tls.conn(&primary_url).await).await;
    assert!(
        written.iter().any(|key| key.ends_with(":tls-sentinel")),
        "ax's heartbeat on the primary, over TLS: {written:?}"
    );
    let log_path = ax.log_path();
    assert_eq!(ax.terminate().await, Some(0));
    let log = std::fs::read_to_string(log_path).expect("ax's log");
    assert!(
        log.contains(&format!("names 127.0.0.1:{primary_port} the primary")),
        "{log}"
    );
    assert!(!log.contains("secret"), "a password logged:\n{log}");
}
