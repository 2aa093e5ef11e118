//! ax on a three-node MariaDB Galera Cluster, its store URL listing the three, under load: the
//! node it writes to is cut off from the others (alive, refusing queries), then the node it
//! moved to is killed (`kill -9`); each time ax moves to another node, and every scheduled
//! second is still run once and delivered once. Then ax itself is killed and restarts under
//! its instance id once the lease a Galera store holds it by has expired. Before the faults,
//! API writes to a task another node's client keeps changing meet certification conflicts,
//! which ax tries again: every one answers 200.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ax_store::Db;
use chrono::Utc;
use serde_json::json;

use crate::common::{free_port, redis_url, rows_of, Api, AxProcess, Executor, Reply};

const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";
/// The nodes suspect a silent peer after 1 s instead of 5 s (checked every 0.2 s): until the
/// others agree it is gone the cluster holds every commit, and a stall longer than a late
/// tick's 2 s grace would fold a task's missed seconds into one catch-up run (the missed-run
/// policy). The other time-outs keep their defaults: shorter ones (2 s to install a view) made
/// the three nodes fall apart when the one cut off rejoined, on a busy machine.
const FAST_SUSPICION: &str =
    "evs.keepalive_period=PT0.2S;evs.inactive_check_period=PT0.2S;evs.suspect_timeout=PT1S";
const TASKS: usize = 4;
/// How long after a node ax writes to is killed firing must have resumed.
const RESUME_WITHIN: Duration = Duration::from_secs(10);
/// The same for a node cut off from the others: it finds itself alone only once it has
/// suspected them for `evs.suspect_timeout` (5 s), and refuses queries from then on.
const ISOLATED_RESUME_WITHIN: Duration = Duration::from_secs(12);
/// How long the load runs after each fault.
const AFTER_FAULT: Duration = Duration::from_secs(12);

/// A Galera node's ports: SQL, group communication, incremental and full state transfer.
#[derive(Clone, Copy)]
struct Ports {
    sql: u16,
    group: u16,
    ist: u16,
    sst: u16,
}

/// A three-node cluster on loopback ports, in a temporary folder; dropped, it kills every node
/// it started (the folder goes with it).
struct Galera {
    dir: KeptOnFailure,
    ports: Vec<Ports>,
    nodes: Vec<Option<Child>>,
}

impl Galera {
    /// Makes the first node's data folder, bootstraps the cluster on it, and has the others
    /// join one by one (each copies the first by rsync), waiting until all three are synced.
    async fn start() -> Galera {
        let dir = KeptOnFailure(Some(tempfile::tempdir().expect("dir")));
        // rsync receives a joiner's copy as `nobody`, who must reach its folder.
        run(Command::new("chmod").arg("755").arg(dir.path()));
        let ports = (0..3)
            .map(|_| Ports {
                sql: free_port(),
                group: free_port(),
                ist: free_port(),
                sst: free_port(),
            })
            .collect();
        let mut galera = Galera {
            dir,
            ports,
            nodes: Vec::new(),
        };
        run(Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", galera.data(0).display()))
            .args(["--user=root", "--auth-root-authentication-method=normal"])
            .arg("--skip-test-db"));
        for node in 0..3 {
            if node > 0 {
                std::fs::create_dir(galera.data(node)).expect("data folder");
                run(Command::new("chown")
                    .arg("nobody:nogroup")
                    .arg(galera.data(node)));
            }
            let child = galera.launch(node);
            galera.nodes.push(Some(child));
            galera.wait_synced(node).await;
        }
        galera
    }

    fn data(&self, node: usize) -> PathBuf {
        self.dir.path().join(format!("node{node}"))
    }

    fn launch(&self, node: usize) -> Child {
        let data = self.data(node);
        let Ports {
            sql,
            group,
            ist,
            sst,
        } = self.ports[node];
        let members: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{}", p.group))
            .collect();
        let mut command = Command::new("mariadbd");
        command
            .arg("--no-defaults")
            .arg("--user=root")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={sql}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", data.join("sock").display()))
            .arg(format!("--pid-file={}", data.join("pid").display()))
            .arg(format!("--log-error={}", data.join("error.log").display()))
            .arg("--wsrep_on=ON")
            .arg(format!("--wsrep_provider={PROVIDER}"))
            .arg("--wsrep_cluster_name=ax_test")
            .arg(format!(
                "--wsrep_cluster_address=gcomm://{}",
                members.join(",")
            ))
            .arg(format!("--wsrep_node_address=127.0.0.1:{group}"))
            .arg(format!(
                "--wsrep_provider_options=gmcast.listen_addr=tcp://127.0.0.1:{group};\
                 ist.recv_addr=127.0.0.1:{ist};{FAST_SUSPICION}"
            ))
            .arg(format!("--wsrep_sst_receive_address=127.0.0.1:{sst}"))
            .arg("--wsrep_sst_method=rsync")
            .arg(format!("--wsrep_node_name=node{node}"))
            // An rsync donor holds its writes while it copies: a node that rejoins takes its
            // copy from the last node, not the one ax moves to as a rule (the second).
            .arg("--wsrep_sst_donor=node2,")
            .arg("--binlog_format=ROW")
            .arg("--innodb_autoinc_lock_mode=2")
            .arg("--innodb_buffer_pool_size=64M")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if node == 0 {
            command.arg("--wsrep-new-cluster");
        }
        command.spawn().expect("mariadbd")
    }

    /// Waits until `node` says it is synced with the cluster.
    async fn wait_synced(&mut self, node: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.status(node, "wsrep_local_state_comment").as_deref() == Some("Synced") {
                return;
            }
            if let Some(Ok(Some(status))) = self.nodes[node].as_mut().map(Child::try_wait) {
                panic!("node {node} ended ({status}): see {}", self.log(node));
            }
            actix_rt::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("node {node} not synced within 60 s: see {}", self.log(node));
    }

    fn log(&self, node: usize) -> String {
        let log = std::fs::read_to_string(self.data(node).join("error.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// A status variable of `node`, if it answers.
    fn status(&self, node: usize, name: &str) -> Option<String> {
        let sql = format!("SHOW STATUS LIKE '{name}'");
        let row = self.query(node, &sql)?;
        row.split('\t').nth(1).map(str::to_string)
    }

    /// The first row `sql` gives on `node`, tab-separated, if it answers.
    fn query(&self, node: usize, sql: &str) -> Option<String> {
        let output = Command::new("mariadb")
            .args(["-h127.0.0.1", "-uroot", "-N", "--connect-timeout=2"])
            .arg(format!("-P{}", self.ports[node].sql))
            .args(["-e", sql])
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        output
            .status
            .success()
            .then(|| text.lines().next().unwrap_or_default().to_string())
    }

    /// `mysql://root@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/{database}`.
    fn url(&self, database: &str) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{}", p.sql))
            .collect();
        format!("mysql://root@{}/{database}", hosts.join(","))
    }

    /// Cuts `node` off from the others (`gmcast.isolate`), or lets it rejoin.
    fn isolate(&self, node: usize, isolated: bool) {
        let sql = format!(
            "SET GLOBAL wsrep_provider_options = 'gmcast.isolate={}'",
            u8::from(isolated)
        );
        assert!(self.query(node, &sql).is_some(), "{sql} on node {node}");
    }

    /// How many sessions ax has on `node` (0 if it does not answer).
    fn sessions_on(&self, node: usize) -> usize {
        let sql = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = 'axdb'";
        self.query(node, sql)
            .and_then(|n| n.parse().ok())
            .unwrap_or_default()
    }

    /// Fails unless ax's sessions are on `node`.
    fn assert_writes_to(&self, node: usize) {
        let sessions = self.sessions_on(node);
        assert!(sessions > 0, "ax's sessions on node {node}: {sessions}");
    }

    /// Which of `nodes` holds most of ax's sessions; fails if none holds any.
    fn writes_to_one_of(&self, nodes: &[usize]) -> usize {
        let counts: Vec<(usize, usize)> = nodes.iter().map(|&n| (n, self.sessions_on(n))).collect();
        let (node, sessions) = counts
            .iter()
            .copied()
            .max_by_key(|(_, sessions)| *sessions)
            .expect("a node");
        assert!(sessions > 0, "ax's sessions on nodes {counts:?}");
        node
    }

    /// `kill -9`.
    fn kill(&mut self, node: usize) {
        if let Some(mut child) = self.nodes[node].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Galera {
    fn drop(&mut self) {
        for node in 0..self.nodes.len() {
            self.kill(node);
        }
    }
}

/// A temporary folder kept, and named, if the test fails: the logs are in it.
struct KeptOnFailure(Option<tempfile::TempDir>);

impl KeptOnFailure {
    fn path(&self) -> &std::path::Path {
        self.0.as_ref().expect("the folder").path()
    }
}

impl Drop for KeptOnFailure {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take().filter(|_| std::thread::panicking()) {
            eprintln!("kept for its logs: {}", dir.keep().display());
        }
    }
}

fn run(command: &mut Command) {
    let output = command.output().expect("command");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_node_ax_writes_to_is_cut_off_then_killed_under_load() {
    let _serial = crate::serial().await;
    let started = Instant::now();
    let mut galera = Galera::start().await;
    let cluster_up = started.elapsed();
    let url = galera.url("axdb");
    let dir = KeptOnFailure(Some(tempfile::tempdir().expect("dir")));
    let executor = Executor::start(Reply::Success).await;
    let env = vec![
        ("AX_STORE_URL".to_string(), url.clone()),
        ("AX_REDIS_URL".to_string(), redis_url()),
        ("AX_STORE_BATCH_INTERVAL_MS".to_string(), "100".to_string()),
    ];
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let ax = AxProcess::start(dir.path(), &format!("galera-{}", &run_id[..8]), env).await;
    let api = Api::at(ax.base());
    let retried = api_writes_meet_conflicts(&galera, &api, &executor.url, ax.log_path()).await;
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let task = api
            .create_task(json!({
                "name": format!("galera-{i}"), "cron": "* * * * * *",
                "handlerUrl": executor.url, "maxRetry": 0, "timeoutMs": 2000,
            }))
            .await;
        tasks.push(task["id"].as_i64().expect("id"));
    }
    let loaded = Utc::now();
    actix_rt::time::sleep(Duration::from_secs(5)).await;
    assert!(
        executor.received().len() >= TASKS * 3,
        "{} deliveries before the faults",
        executor.received().len()
    );

    // The node ax writes to (the first of its URL, which answered) is cut off from the other
    // two: alive, it refuses every query once it finds itself out of the cluster's majority.
    galera.assert_writes_to(0);
    let (cut_at, isolated) = resumes_after(&executor, || galera.isolate(0, true)).await;
    galera.isolate(0, false);
    galera.wait_synced(0).await;
    // ax stays with the node it moved to (the next that answered: the second, or the third if
    // the second was slow to): that is the one killed.
    let moved_to = galera.writes_to_one_of(&[1, 2]);
    let (_, killed) = resumes_after(&executor, || galera.kill(moved_to)).await;
    let ended = Utc::now();
    assert!(
        killed <= RESUME_WITHIN,
        "firing resumed {killed:?} after the node was killed"
    );
    assert!(
        isolated <= ISOLATED_RESUME_WITHIN,
        "firing resumed {isolated:?} after the node was cut off"
    );
    // Killed, ax leaves its instance id's lease to expire (15 s, renewed every 5 s): the same
    // id starts again once it has; stopped, it gives the lease up.
    let mut ax = ax;
    ax.kill();
    let restart = Instant::now();
    ax.restart().await;
    let restarted = restart.elapsed();
    assert!(
        restarted <= Duration::from_secs(25),
        "restarted after {restarted:?}"
    );
    assert_eq!(ax.stop().await, Some(0), "see {}", ax.log_path().display());
    let leases = galera.query(
        0,
        "SELECT COUNT(*) FROM axdb.ax_lease WHERE name LIKE 'ax_instance:%'",
    );
    assert_eq!(leases.as_deref(), Some("0"), "the lease is given up");

    // Read through the same URL: one of its nodes is dead.
    let db = Db::connect(&url, 2).await.expect("store");
    let deliveries = executor.received();
    let mut per_run: HashMap<&str, usize> = HashMap::new();
    for d in &deliveries {
        *per_run.entry(d.request_id.as_str()).or_default() += 1;
    }
    let twice: Vec<&&str> = per_run.keys().filter(|r| per_run[**r] > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    // Every second from the first full one after the tasks were made to two before the end
    // has its run, delivered; but the node cut off failed commits (rather than holding them, as
    // the cluster does while it suspects a killed node) for longer than a late tick's 2 s, so
    // the missed-run policy folds those seconds into one catch-up run per task.
    let window = (loaded.timestamp() + 2)..=(ended.timestamp() - 2);
    let folded_span = cut_at..=(cut_at + isolated.as_secs() as i64 + 2);
    let (mut rows_total, mut folded) = (0, 0);
    for task in &tasks {
        let rows = rows_of(&db, *task).await;
        let by_second = crate::common::one_row_per_second(*task, &rows);
        let missing: BTreeSet<i64> = window
            .clone()
            .filter(|s| !by_second.contains_key(s))
            .collect();
        let lost: Vec<&i64> = missing
            .iter()
            .filter(|s| !folded_span.contains(s))
            .collect();
        assert!(lost.is_empty(), "task {task}: no run for {lost:?}");
        folded += missing.len();
        for (second, row) in by_second.range(window.clone()) {
            assert!(
                per_run.contains_key(row.request_id.as_str()),
                "task {task}: the run of {second} was not delivered: {row:?}"
            );
        }
        rows_total += rows.len();
    }
    println!(
        "galera test: cluster up in {cluster_up:?}, {retried} API writes tried again after a \
         certification conflict, {TASKS} every-second tasks, {rows_total} \
         runs, {} deliveries, 0 delivered twice; node cut off: firing resumed after \
         {isolated:?}, {folded} seconds folded into catch-up runs; node killed: firing resumed \
         after {killed:?}, 0 lost; ax killed and restarted under its id in {restarted:?}; \
         {:?} in all",
        deliveries.len(),
        started.elapsed()
    );
    executor.stop().await;
    drop(galera);
}

/// Pauses and resumes a task through ax (writing to the first node) while a client of the
/// second keeps changing the task's row: ax's transactions lose certification to the other
/// node's writes and are tried again. Every answer is 200; answers how many tries the log
/// says rolled back (at least one, or the test proved nothing).
async fn api_writes_meet_conflicts(
    galera: &Galera,
    api: &Api,
    handler_url: &str,
    log: PathBuf,
) -> usize {
    let task = api
        .create_task(json!({"name": "galera-conflicts", "cron": "0 0 0 1 1 *",
                            "handlerUrl": handler_url}))
        .await;
    let id = task["id"].as_i64().expect("id");
    // A change every 10 ms or so: often enough to meet ax's writes, not so often that one
    // meets a change on each of its tries.
    let updates: String = (0..400)
        .map(|n| {
            format!(
                "UPDATE axdb.ax_task SET params = '{{\"otherNode\":{n}}}' WHERE id = {id}; \
                 DO SLEEP(0.01);\n"
            )
        })
        .collect();
    let mut other_node = Command::new("mariadb")
        // `--force`: an update that loses certification to ax's write is skipped, not the end.
        .args(["-h127.0.0.1", "-uroot", "--force"])
        .arg(format!("-P{}", galera.ports[1].sql))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mariadb client");
    let mut stdin = other_node.stdin.take().expect("stdin");
    let feeding = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(updates.as_bytes())
    });
    let mut writes = 0;
    while other_node.try_wait().expect("client").is_none() {
        for action in ["pause", "resume"] {
            let (status, body) = api
                .post(&format!("/api/tasks/{id}/{action}"), json!({}))
                .await;
            assert_eq!(status, 200, "{action} #{writes}: {body}");
            writes += 1;
        }
    }
    feeding.join().expect("feeding").expect("updates written");
    let retried = std::fs::read_to_string(&log)
        .expect("ax log")
        .matches("a write rolled back, trying again")
        .count();
    assert!(retried > 0, "{writes} API writes met no conflict");
    retried
}

/// Applies `fault`, then runs the load for [`AFTER_FAULT`]; answers the second of the fault and
/// how soon after it a run scheduled after it was delivered.
async fn resumes_after(executor: &Executor, fault: impl FnOnce()) -> (i64, Duration) {
    fault();
    let at = Utc::now().timestamp();
    let started = Instant::now();
    let mut resumed = None;
    while started.elapsed() < AFTER_FAULT {
        let after = |d: &crate::common::Received| scheduled_second(d) > at;
        if resumed.is_none() && executor.received().iter().any(after) {
            resumed = Some(started.elapsed());
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    let resumed = resumed.unwrap_or_else(|| panic!("firing did not resume within {AFTER_FAULT:?}"));
    (at, resumed)
}

fn scheduled_second(received: &crate::common::Received) -> i64 {
    received.body["scheduledAt"]
        .as_str()
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map_or(i64::MIN, |at| at.timestamp())
}
