//! The local cluster: a real HDFS + HBase + Thrift stack in one JVM, built from Maven
//! artifacts by the project in `cluster/` and owned by this module.
//!
//! `up` compiles the Java side once (Maven resolves the artifacts on first use), starts the
//! JVM in its own process group with its logs, pid file and data under
//! `target/local-cluster/`, and returns only when the JVM prints its `READY` line, which it
//! does once HDFS, HBase and both Thrift gateways answer real calls. `down` sends SIGTERM
//! (the JVM shuts the mini clusters down cleanly) and escalates to SIGKILL after a grace
//! period.
//!
//! Invariants:
//! - One cluster per machine: the ports are fixed (NameNode 9000, Thrift1 9090, Thrift2 9091).
//!   `up` reuses a cluster whose ports all answer and refuses to start over a port that some
//!   other process holds.
//! - Whoever started a cluster may stop it; a harness that found one running leaves it up.
//!   A cluster started with `watch_pid` stops by itself when that process exits, so a test
//!   run never leaves a JVM behind, even if it is killed.

use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The ports of the local cluster.
pub const NAMENODE_PORT: u16 = 9000;
pub const THRIFT_PORT: u16 = 9090;
pub const THRIFT2_PORT: u16 = 9091;
/// The cluster JVM's control port: bulk loads run inside it ([`bulk_load`]).
pub const CONTROL_PORT: u16 = 9092;

/// JVM options HBase needs on JDK 17 (as in its `bin/hbase`).
const JDK17_FLAGS: &[&str] = &[
    "--add-modules=jdk.unsupported",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
];

/// Where the Java project and the cluster's state live.
#[derive(Clone, Debug)]
pub struct ClusterPaths {
    /// The Maven project (`cluster/`).
    pub project: PathBuf,
    /// Logs, pid file, classpath and data (`target/local-cluster/`).
    pub state: PathBuf,
}

impl ClusterPaths {
    /// `$WEIBO_ETL_HOME` if set (an installed binary), else the source tree it was built from.
    pub fn discover() -> ClusterPaths {
        let home = std::env::var_os("WEIBO_ETL_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        ClusterPaths {
            project: home.join("cluster"),
            state: home.join("target").join("local-cluster"),
        }
    }

    pub fn pid_file(&self) -> PathBuf {
        self.state.join("cluster.pid")
    }

    pub fn log_file(&self) -> PathBuf {
        self.state.join("cluster.log")
    }

    /// The pid a running cluster watches (it stops when that process exits).
    fn watch_file(&self) -> PathBuf {
        self.state.join("cluster.watch")
    }

    fn ready_file(&self) -> PathBuf {
        self.state.join("cluster.out")
    }

    fn classpath_file(&self) -> PathBuf {
        self.state.join("classpath.txt")
    }
}

/// Which parts of the cluster answer right now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    pub hdfs: bool,
    pub thrift: bool,
    pub thrift2: bool,
    /// The pid in the pid file, if that process is alive.
    pub pid: Option<u32>,
}

impl Status {
    pub fn all_up(&self) -> bool {
        self.hdfs && self.thrift && self.thrift2
    }

    pub fn any_up(&self) -> bool {
        self.hdfs || self.thrift || self.thrift2
    }
}

fn port_answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

fn pid_alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

fn read_pid(paths: &ClusterPaths) -> Option<u32> {
    fs::read_to_string(paths.pid_file())
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&pid| pid_alive(pid))
}

fn watched_pid(paths: &ClusterPaths) -> Option<u32> {
    fs::read_to_string(paths.watch_file())
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

pub fn status(paths: &ClusterPaths) -> Status {
    Status {
        hdfs: port_answers(NAMENODE_PORT),
        thrift: port_answers(THRIFT_PORT),
        thrift2: port_answers(THRIFT2_PORT),
        pid: read_pid(paths),
    }
}

/// Options for [`up`].
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// Stop the cluster when this process exits (test harnesses pass their own pid).
    pub watch_pid: Option<u32>,
    /// How long to wait for the READY line once the JVM runs.
    pub ready_timeout: Duration,
    /// JVM heap, e.g. `3g`.
    pub heap: String,
    /// Also start YARN (MapReduce on a MiniMRYarnCluster), in a running cluster too.
    pub yarn: bool,
}

impl Default for UpOptions {
    fn default() -> Self {
        UpOptions {
            watch_pid: None,
            ready_timeout: Duration::from_secs(300),
            heap: std::env::var("WEIBO_ETL_CLUSTER_HEAP").unwrap_or_else(|_| "3g".into()),
            yarn: false,
        }
    }
}

/// What [`up`] did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UpOutcome {
    /// The JVM's pid, if known (a reused cluster may have been started by someone else).
    pub pid: Option<u32>,
    pub already_running: bool,
    /// Seconds from launching the JVM to READY (0 when reused).
    pub seconds: f64,
    /// The ResourceManager's address, when YARN was asked for.
    pub yarn: Option<String>,
}

/// Starts the cluster unless it already runs (and its YARN, if asked, unless that runs);
/// returns once it is ready.
pub fn up(paths: &ClusterPaths, options: &UpOptions) -> Result<UpOutcome> {
    let mut outcome = start(paths, options)?;
    if options.yarn {
        outcome.yarn = Some(start_yarn()?);
    }
    Ok(outcome)
}

fn start(paths: &ClusterPaths, options: &UpOptions) -> Result<UpOutcome> {
    // A cluster that is stopping (its JVM shuts the mini clusters down) or starting holds
    // some ports but not all for a while: wait for it to settle before deciding.
    let settle_deadline = Instant::now() + Duration::from_secs(90);
    let mut now = status(paths);
    // A cluster whose watched process is gone is about to stop: do not reuse it.
    let doomed = |now: &Status| now.any_up() && watched_pid(paths).is_some_and(|p| !pid_alive(p));
    while ((now.any_up() && !now.all_up()) || doomed(&now)) && Instant::now() < settle_deadline {
        std::thread::sleep(Duration::from_millis(500));
        now = status(paths);
    }
    if now.all_up() {
        return Ok(UpOutcome {
            pid: now.pid,
            already_running: true,
            seconds: 0.0,
            yarn: None,
        });
    }
    if now.any_up() {
        return Err(Error::Cluster(format!(
            "some cluster ports are taken but not all answer (hdfs {NAMENODE_PORT}: {}, thrift \
             {THRIFT_PORT}: {}, thrift2 {THRIFT2_PORT}: {}); a cluster may be starting or \
             stopping, or another program holds a port. Try `weibo-etl cluster down`.",
            now.hdfs, now.thrift, now.thrift2
        )));
    }
    fs::create_dir_all(&paths.state).map_err(|e| io_err("create", &paths.state, e))?;
    let classpath = prepare(paths)?;

    let log =
        fs::File::create(paths.log_file()).map_err(|e| io_err("create", &paths.log_file(), e))?;
    let out = fs::File::create(paths.ready_file())
        .map_err(|e| io_err("create", &paths.ready_file(), e))?;
    let mut cmd = Command::new(java());
    cmd.arg(format!("-Xmx{}", options.heap))
        .args(JDK17_FLAGS)
        .arg("-cp")
        .arg(classpath)
        .arg("weibo.cluster.LocalCluster")
        .arg("--data-dir")
        .arg(paths.state.join("data"))
        .current_dir(&paths.state)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(log);
    let _ = fs::remove_file(paths.watch_file());
    if let Some(pid) = options.watch_pid {
        cmd.arg("--watch-pid").arg(pid.to_string());
        fs::write(paths.watch_file(), format!("{pid}\n"))
            .map_err(|e| io_err("write", &paths.watch_file(), e))?;
    }
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a Ctrl-C meant for the CLI must not kill the cluster.
        cmd.process_group(0);
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::Cluster(format!("cannot start java: {e}")))?;
    let pid = child.id();
    fs::write(paths.pid_file(), format!("{pid}\n"))
        .map_err(|e| io_err("write", &paths.pid_file(), e))?;

    loop {
        if ready_line(paths).is_some() {
            return Ok(UpOutcome {
                pid: Some(pid),
                already_running: false,
                seconds: started.elapsed().as_secs_f64(),
                yarn: None,
            });
        }
        if let Ok(Some(exit)) = child.try_wait() {
            let _ = fs::remove_file(paths.pid_file());
            return Err(Error::Cluster(format!(
                "the cluster JVM exited ({exit}) before it was ready; last log lines:\n{}",
                log_tail(paths, 15)
            )));
        }
        if started.elapsed() > options.ready_timeout {
            let _ = stop_pid(pid, Duration::from_secs(30));
            let _ = fs::remove_file(paths.pid_file());
            return Err(Error::Cluster(format!(
                "the cluster was not ready after {:?}; log: {}",
                options.ready_timeout,
                paths.log_file().display()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ready_line(paths: &ClusterPaths) -> Option<String> {
    let file = fs::File::open(paths.ready_file()).ok()?;
    BufReader::new(file)
        .lines()
        .map_while(|l| l.ok())
        .find(|l| l.starts_with("READY"))
}

/// The last `n` lines of the cluster log.
pub fn log_tail(paths: &ClusterPaths, n: usize) -> String {
    let text = fs::read_to_string(paths.log_file()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Stops the cluster named by the pid file. Returns false if none was running.
pub fn down(paths: &ClusterPaths) -> Result<bool> {
    let Some(pid) = read_pid(paths) else {
        let _ = fs::remove_file(paths.pid_file());
        return Ok(false);
    };
    stop_pid(pid, Duration::from_secs(60))?;
    let _ = fs::remove_file(paths.pid_file());
    Ok(true)
}

/// A folder with the `hbase-site.xml` a client JVM needs to find the running cluster (its
/// ZooKeeper and its HDFS); a JVM reads it first on its classpath.
fn client_conf(paths: &ClusterPaths, name: &str) -> Result<PathBuf> {
    let zk_file = paths.state.join("data").join("zookeeper-port");
    let zk = fs::read_to_string(&zk_file).map_err(|e| io_err("read", &zk_file, e))?;
    let conf = paths.state.join(format!("{name}-conf"));
    fs::create_dir_all(&conf).map_err(|e| io_err("create", &conf, e))?;
    let site = conf.join("hbase-site.xml");
    let property = |name: &str, value: &str| {
        format!("<property><name>{name}</name><value>{value}</value></property>")
    };
    fs::write(
        &site,
        format!(
            "<configuration>{}{}{}{}{}</configuration>\n",
            // As the cluster reads ZSTD (cluster/src/main/resources/hbase-site.xml, which
            // this file shadows): HBase's own codec, since Maven's libhadoop has no zstd.
            property(
                "hbase.io.compress.zstd.codec",
                "org.apache.hadoop.hbase.io.compress.zstd.ZstdCodec"
            ),
            property("hbase.zookeeper.quorum", "127.0.0.1"),
            property("hbase.zookeeper.property.clientPort", zk.trim()),
            property("hbase.thrift.info.port", "-1"),
            property("fs.defaultFS", &format!("hdfs://127.0.0.1:{NAMENODE_PORT}")),
        ),
    )
    .map_err(|e| io_err("write", &site, e))?;
    Ok(conf)
}

/// HBase's HFile printer and checker (`hbase hfile`).
pub const HFILE_TOOL: &str = "org.apache.hadoop.hbase.io.hfile.HFilePrettyPrinter";

/// HBase's MapReduce TSV importer (`hbase importtsv`), run by Hadoop's local job runner.
pub const IMPORTTSV_TOOL: &str = "org.apache.hadoop.hbase.mapreduce.ImportTsv";

/// Sends one request line to the cluster JVM's control port and returns what follows `OK `.
fn control(request: &str) -> Result<String> {
    use std::io::Write as _;
    let addr = SocketAddr::from(([127, 0, 0, 1], CONTROL_PORT));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| {
        Error::Cluster(format!(
            "the control port {CONTROL_PORT} does not answer ({e}): is the cluster up?"
        ))
    })?;
    let failed = |e: std::io::Error| Error::Cluster(format!("{request}: {e}"));
    writeln!(stream, "{request}").map_err(failed)?;
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(failed)?;
    let line = line.trim();
    match line.strip_prefix("OK ") {
        Some(answer) => Ok(answer.to_string()),
        None => Err(Error::Cluster(format!(
            "{request} failed: {}",
            line.strip_prefix("ERR ").unwrap_or(line)
        ))),
    }
}

/// Hands the HFiles under `dir` (`<dir>/<family>/<file>`) to `table` with HBase's own bulk
/// load, run inside the cluster's JVM through its control port; returns how many files
/// HBase loaded.
pub fn bulk_load(dir: &str, table: &str) -> Result<u64> {
    let answer = control(&format!("BULKLOAD {dir} {table}"))?;
    answer
        .parse()
        .map_err(|_| Error::Cluster(format!("the control port answered {answer:?}")))
}

/// Starts the cluster's YARN (a MiniMRYarnCluster in its JVM, on its HDFS) unless it runs;
/// returns the ResourceManager's address.
pub fn start_yarn() -> Result<String> {
    control("YARN")
}

/// How a streaming job run by the local cluster ended.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StreamingOutcome {
    /// StreamJob's exit status: 0 when the job succeeded.
    pub exit: i32,
    pub job_id: String,
    /// YARN's final state of the job (SUCCEEDED, FAILED, KILLED).
    pub state: String,
    pub tracking_url: String,
}

/// Runs a Hadoop Streaming job (the arguments of `mapred streaming`) on the cluster's YARN,
/// inside its JVM, and waits for its end.
pub fn run_streaming(args: &[String]) -> Result<StreamingOutcome> {
    if let Some(bad) = args.iter().find(|a| a.contains(['\t', '\n'])) {
        return Err(Error::Usage(format!(
            "a streaming argument holds a tab or a line break: {bad:?}"
        )));
    }
    let answer = control(&format!("STREAMING\t{}", args.join("\t")))?;
    let mut words = answer.splitn(4, ' ');
    let mut next = || words.next().unwrap_or("-").to_string();
    let exit = next();
    Ok(StreamingOutcome {
        exit: exit
            .parse()
            .map_err(|_| Error::Cluster(format!("the control port answered {answer:?}")))?,
        job_id: next(),
        state: next(),
        tracking_url: next(),
    })
}

/// Major-compacts `table` and returns once HBase reports no compaction running on it.
pub fn major_compact(table: &str) -> Result<()> {
    control(&format!("COMPACT {table}")).map(|_| ())
}

/// Runs one of HBase's command-line tools (a `main` class from the cluster's artifacts)
/// against the running cluster, as `hbase <tool>` would on a real one, and returns its exit
/// status and output.
pub fn run_tool(
    paths: &ClusterPaths,
    class: &str,
    args: &[String],
) -> Result<std::process::Output> {
    if !status(paths).all_up() {
        return Err(Error::Cluster(
            "the local cluster is not running (`weibo-etl cluster up`)".into(),
        ));
    }
    let conf = client_conf(paths, "tool")?;
    Command::new(java())
        .arg("-Xmx512m")
        .args(JDK17_FLAGS)
        .arg("-cp")
        .arg(format!("{}:{}", conf.display(), prepare(paths)?))
        .arg(class)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Cluster(format!("cannot run {class}: {e}")))
}

/// A second Thrift1 gateway in a JVM of its own, in front of the running local cluster (found
/// through its ZooKeeper), so a test can kill a gateway for real (SIGKILL: every connection
/// drops, nothing is flushed) and start it again, while the cluster itself stays up. Killed
/// when dropped.
pub struct Gateway {
    child: std::process::Child,
    pub port: u16,
}

impl Gateway {
    /// Starts the gateway on `port` and waits until it answers (or `timeout` passes).
    pub fn start(paths: &ClusterPaths, port: u16, timeout: Duration) -> Result<Gateway> {
        let log_path = paths.state.join(format!("gateway-{port}.log"));
        let log = fs::File::create(&log_path).map_err(|e| io_err("create", &log_path, e))?;
        let conf = client_conf(paths, &format!("gateway-{port}"))?;
        let port_text = port.to_string();
        let child = Command::new(java())
            .arg("-Xmx512m")
            .args(JDK17_FLAGS)
            .arg("-cp")
            .arg(format!("{}:{}", conf.display(), prepare(paths)?))
            .arg("org.apache.hadoop.hbase.thrift.ThriftServer")
            .args([
                "-port",
                &port_text,
                "-bind",
                "127.0.0.1",
                "-threadpool",
                "start",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| io_err("open", &log_path, e))?)
            .stderr(log)
            .spawn()
            .map_err(|e| Error::Cluster(format!("cannot start a Thrift gateway: {e}")))?;
        let mut gateway = Gateway { child, port };
        let deadline = Instant::now() + timeout;
        // Answering means a real call returns, not merely that the port accepts.
        while Instant::now() < deadline {
            if let Ok(Some(status)) = gateway.child.try_wait() {
                return Err(Error::Cluster(format!(
                    "the Thrift gateway on {port} exited ({status}); see {}",
                    log_path.display()
                )));
            }
            let addr = format!("127.0.0.1:{port}");
            if crate::hbase::Connection::connect(&addr, crate::hbase::Timeouts::default())
                .and_then(|mut c| c.table_names())
                .is_ok()
            {
                return Ok(gateway);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        gateway.kill();
        Err(Error::Cluster(format!(
            "the Thrift gateway on {port} did not answer in {timeout:?}; see {}",
            log_path.display()
        )))
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

fn stop_pid(pid: u32, grace: Duration) -> Result<()> {
    use nix::sys::signal::{kill, Signal};
    let target = nix::unistd::Pid::from_raw(pid as i32);
    let _ = kill(target, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        // A zombie leader can linger while the JVM's other threads still hold the ports, so
        // "stopped" also means the ports are closed.
        let gone = !pid_alive(pid) || is_zombie(pid);
        if gone
            && ![NAMENODE_PORT, THRIFT_PORT, THRIFT2_PORT]
                .into_iter()
                .any(port_answers)
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = kill(target, Signal::SIGKILL);
    Ok(())
}

fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn java() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|home| Path::new(&home).join("bin").join("java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"))
}

/// Compiles the Java side and writes its classpath, unless both are newer than the sources.
/// Returns the classpath to run with.
fn prepare(paths: &ClusterPaths) -> Result<String> {
    let classes = paths.project.join("target").join("classes");
    let cp_file = paths.classpath_file();
    let newest_source =
        newest_mtime(&paths.project.join("src")).max(mtime(&paths.project.join("pom.xml")));
    let built = mtime(&cp_file).min(newest_mtime(&classes));
    if built.is_none() || built < newest_source {
        let out = Command::new("mvn")
            .args(["-B", "-q", "-f"])
            .arg(paths.project.join("pom.xml"))
            .args(["compile", "dependency:build-classpath"])
            .arg(format!("-Dmdep.outputFile={}", cp_file.display()))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Cluster(format!("cannot run mvn (is Maven installed?): {e}")))?;
        if !out.status.success() {
            return Err(Error::Cluster(format!(
                "building the cluster with Maven failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
    }
    let deps = fs::read_to_string(&cp_file).map_err(|e| io_err("read", &cp_file, e))?;
    Ok(format!("{}:{}", classes.display(), deps.trim()))
}

fn mtime(path: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = mtime(dir);
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let t = if path.is_dir() {
                newest_mtime(&path)
            } else {
                mtime(&path)
            };
            newest = newest.max(t);
        }
    }
    newest
}

fn io_err(op: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.display().to_string(),
        source: e,
    }
}
