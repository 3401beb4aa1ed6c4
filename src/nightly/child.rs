//! The stages as child processes of this binary: each one's stdout goes to our stderr (our
//! stdout is the summary), and it dies with us, so a killed run leaves no stage running on.
//!
//! Invariant: once [`catch_stop_signals`] ran, SIGTERM and SIGINT stop the running stage
//! first (SIGTERM, then SIGKILL after 30 s) and end the run with an error, so the lock is
//! released on the way out.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The signal that asked this run to stop (SIGTERM or SIGINT), 0 while none did.
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(signal: i32) {
    STOP.store(signal, Ordering::SeqCst);
}

/// From now on SIGTERM and SIGINT ask the run to stop (see [`spawn`]) instead of ending it
/// with the lock still held.
pub fn catch_stop_signals() -> Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for signal in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(|e| Error::Io {
            op: "install",
            path: format!("a handler of {signal}"),
            source: e.into(),
        })?;
    }
    Ok(())
}

/// Runs this binary with `args`; returns its exit code. Its stdout goes to our stderr (our
/// stdout is the summary), and it dies with us (a killed run leaves no stage running on).
/// When the run is asked to stop, the stage is stopped first (SIGTERM, then SIGKILL).
pub fn spawn(args: &[String]) -> Result<i32> {
    use std::os::fd::AsFd;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let io = |op: &'static str| {
        move |e: std::io::Error| Error::Io {
            op,
            path: "a stage's process".into(),
            source: e,
        }
    };
    let exe = std::env::current_exe().map_err(io("find"))?;
    let stdout = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(io("open"))?;
    let parent = std::process::id();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout));
    // SAFETY: prctl and getppid are async-signal-safe and touch nothing of the parent's.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            // The run died before the death signal was armed: do not run on without it.
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err(std::io::Error::other(
                    "the run that started this stage is gone",
                ));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(io("start"))?;
    let mut asked = None;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io("wait for"))? {
            break status;
        }
        let signal = STOP.load(Ordering::SeqCst);
        if signal != 0 && asked.is_none() {
            log::warn!("stopping the running stage (signal {signal})");
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            asked = Some(Instant::now());
        }
        if asked.is_some_and(|t| t.elapsed() > Duration::from_secs(30)) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if let Some(signal) = (STOP.load(Ordering::SeqCst) != 0).then(|| STOP.load(Ordering::SeqCst)) {
        return Err(Error::Io {
            op: "run",
            path: "the stage".into(),
            source: std::io::Error::other(format!("stopped by signal {signal}")),
        });
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
