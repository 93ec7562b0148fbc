//! [`LocalCluster`]: a scheduler and N executors of the `gpujoin-ballista` binary as child
//! processes on this machine, for tests, benchmarks and trying it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// What [`LocalCluster::start`] starts.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Executors (default 2).
    pub executors: usize,
    /// The CUDA device of each executor, in turn (default `[0]`: all share device 0; `[0, 1]`
    /// with two executors: one per GPU).
    pub gpus: Vec<usize>,
    /// Install `GpuJoinRule` in the scheduler's sessions (default `true`).
    pub gpu_rule: bool,
    /// Task slots per executor (default: the CPU cores divided among the executors, at least 2).
    pub vcores: Option<usize>,
    /// Where executors log the `GpuJoinExec`s they decode (see [`crate::JOIN_LOG_ENV`]).
    pub join_log: Option<PathBuf>,
    /// How long to wait for the scheduler to see every executor (default 60 s).
    pub startup_timeout: Duration,
    /// Pull-staged scheduling (executors poll for tasks) instead of Ballista's default
    /// push-staged (see [`SchedulerOptions::policy`](crate::SchedulerOptions::policy)).
    pub pull: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions { executors: 2, gpus: vec![0], gpu_rule: true, vcores: None, join_log: None, startup_timeout: Duration::from_secs(60), pull: false }
    }
}

/// Seconds between executor heartbeats and until the scheduler counts a silent executor as
/// dead, in a local cluster: short, so that a killed executor or a restarted scheduler is
/// noticed within seconds.
const HEARTBEAT_S: u64 = 2;
const EXECUTOR_TIMEOUT_S: u64 = 8;

/// A scheduler and executors running as child processes of this one; [`Drop`] kills them
/// (also when a test panics).
///
/// ```no_run
/// # async fn f() -> gpujoin_ballista::Result<()> {
/// use gpujoin_ballista::{ClusterOptions, LocalCluster};
/// let cluster = LocalCluster::start("target/debug/gpujoin-ballista".as_ref(), ClusterOptions::default())?;
/// let ctx = gpujoin_ballista::client(&cluster.url(), None).await?;
/// ctx.sql("SELECT 1").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalCluster {
    bin: PathBuf,
    options: ClusterOptions,
    dir: tempfile::TempDir,
    scheduler_addr: SocketAddr,
    scheduler: Option<Child>,
    scheduler_starts: usize,
    executors: Vec<Option<Child>>,
}

/// A port that was free a moment ago.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A scheduler port that was free a moment ago, with its guard port
/// ([`crate::guard::guard_addr`]) free too.
fn free_scheduler_port() -> Result<u16> {
    for _ in 0..100 {
        let port = free_port()?;
        let guard = crate::guard::guard_addr(SocketAddr::from(([127, 0, 0, 1], port)));
        if port.checked_add(crate::guard::GUARD_PORT_OFFSET).is_some() && TcpListener::bind(guard).is_ok() {
            return Ok(port);
        }
    }
    Err(Error::Cluster("no free scheduler port whose guard port is free too".into()))
}

impl LocalCluster {
    /// Starts a scheduler and `options.executors` executors of the `gpujoin-ballista` binary
    /// `bin` on free local ports, and waits until the scheduler has seen them all.
    pub fn start(bin: &Path, options: ClusterOptions) -> Result<Self> {
        if options.executors == 0 {
            return Err(Error::Usage("a cluster needs at least one executor".into()));
        }
        if !bin.is_file() {
            return Err(Error::Usage(format!("no gpujoin-ballista binary at {}", bin.display())));
        }
        let mut dir = tempfile::Builder::new().prefix("gpujoin-ballista-").tempdir()?;
        // GPUJOIN_BALLISTA_KEEP_LOGS=1: keep the logs (and shuffle files) after the cluster stops.
        if std::env::var("GPUJOIN_BALLISTA_KEEP_LOGS").is_ok_and(|v| v == "1") {
            dir.disable_cleanup(true);
            eprintln!("gpujoin-ballista: keeping the cluster's logs in {}", dir.path().display());
        }
        let scheduler_addr = SocketAddr::from(([127, 0, 0, 1], free_scheduler_port()?));
        let mut cluster = LocalCluster { bin: bin.to_path_buf(), options, dir, scheduler_addr, scheduler: None, scheduler_starts: 0, executors: Vec::new() };
        cluster.spawn_scheduler()?;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let vcores = cluster.options.vcores.unwrap_or((cores / cluster.options.executors).max(2));
        for i in 0..cluster.options.executors {
            let gpu = *cluster.options.gpus.get(i % cluster.options.gpus.len().max(1)).unwrap_or(&0);
            let work = cluster.dir.path().join(format!("executor-{i}"));
            std::fs::create_dir_all(&work)?;
            let mut cmd = Command::new(&cluster.bin);
            cmd.arg("executor")
                .args(["--gpu", &gpu.to_string()])
                .args(["--scheduler", &cluster.scheduler_addr.to_string()])
                .args(["--port", &free_port()?.to_string()])
                .args(["--grpc-port", &free_port()?.to_string()])
                .args(["--vcores", &vcores.to_string()])
                .args(["--heartbeat", &HEARTBEAT_S.to_string()])
                .arg("--work-dir")
                .arg(&work);
            if cluster.options.pull {
                cmd.arg("--pull");
            }
            if let Some(log) = &cluster.options.join_log {
                cmd.env(crate::JOIN_LOG_ENV, log);
            }
            let child = cluster.spawn(cmd, &format!("executor-{i}"))?;
            cluster.executors.push(Some(child));
        }
        cluster.wait_ready(cluster.options.executors)?;
        Ok(cluster)
    }

    fn spawn(&self, mut cmd: Command, name: &str) -> Result<Child> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path(name))?;
        cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "warn");
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // The child dies with this process even if it is killed without running Drop.
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        cmd.spawn().map_err(|e| Error::Cluster(format!("starting {} {name}: {e}", self.bin.display())))
    }

    fn spawn_scheduler(&mut self) -> Result<()> {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("scheduler")
            .args(["--bind", &self.scheduler_addr.to_string()])
            .args(["--min-executors", &self.options.executors.to_string()])
            .args(["--executor-timeout", &EXECUTOR_TIMEOUT_S.to_string()]);
        if !self.options.gpu_rule {
            cmd.arg("--no-rule");
        }
        if self.options.pull {
            cmd.arg("--pull");
        }
        self.scheduler_starts += 1;
        self.scheduler = Some(self.spawn(cmd, "scheduler")?);
        Ok(())
    }

    /// The log file of `name` (`scheduler`, `executor-0`, ...): the child's stdout and stderr.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// The scheduler's address.
    pub fn scheduler_addr(&self) -> SocketAddr {
        self.scheduler_addr
    }

    /// The URL clients connect to (`df://127.0.0.1:<port>`).
    pub fn url(&self) -> String {
        format!("df://{}", self.scheduler_addr)
    }

    /// How many times a scheduler was started (1, plus one per restart).
    pub fn scheduler_starts(&self) -> usize {
        self.scheduler_starts
    }

    /// Executors started (killed ones included).
    pub fn executors(&self) -> usize {
        self.executors.len()
    }

    /// Kills executor `i` (SIGKILL: no goodbye to the scheduler, as a crash).
    pub fn kill_executor(&mut self, i: usize) -> Result<()> {
        let child = self.executors.get_mut(i).and_then(Option::take).ok_or_else(|| Error::Usage(format!("no running executor {i}")))?;
        stop(child);
        Ok(())
    }

    /// Kills the scheduler and starts a new one on the same port, then waits until the running
    /// executors have registered with it again (they do at their next heartbeat).
    pub fn restart_scheduler(&mut self) -> Result<()> {
        if let Some(child) = self.scheduler.take() {
            stop(child);
        }
        self.spawn_scheduler()?;
        let running = self.executors.iter().filter(|e| e.is_some()).count();
        self.wait_ready(running)
    }

    /// Waits until the scheduler's `/readyz` says 200 (it has seen `min_ready_executors`
    /// executors), failing early when the scheduler process has exited.
    fn wait_ready(&mut self, executors: usize) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.scheduler.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(Error::Cluster(format!("the scheduler exited ({status}); its log:\n{}", self.tail("scheduler"))));
                }
            }
            for (i, e) in self.executors.iter_mut().enumerate() {
                if let Some(child) = e {
                    if let Ok(Some(status)) = child.try_wait() {
                        let name = format!("executor-{i}");
                        return Err(Error::Cluster(format!("{name} exited ({status}); its log:\n{}", self.tail(&name))));
                    }
                }
            }
            if http_status(self.scheduler_addr, "/readyz") == Some(200) {
                return Ok(());
            }
            if start.elapsed() > self.options.startup_timeout {
                return Err(Error::Cluster(format!(
                    "the scheduler did not see {executors} executors within {:?}; its log:\n{}",
                    self.options.startup_timeout,
                    self.tail("scheduler")
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last lines of a child's log (for error messages).
    pub fn tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.log_path(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// SIGKILL, then reap.
fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for child in self.executors.drain(..).flatten() {
            stop(child);
        }
        if let Some(child) = self.scheduler.take() {
            stop(child);
        }
    }
}

/// The HTTP status of `GET path` on `addr` (HTTP/1.1, as the scheduler's axum router serves
/// its health routes next to gRPC), or `None` when it does not answer.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = std::str::from_utf8(&buf[..n]).ok()?;
    head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}
