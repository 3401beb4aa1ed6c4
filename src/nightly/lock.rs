//! The lock that keeps two runs of one job into one namespace apart: a small file created
//! exclusively (on HDFS or the local disk, wherever the job's root is), holding its owner's
//! host, pid and start time.
//!
//! Invariants: only the exclusive create takes the lock, so of two racing runs one wins;
//! the owner removes it when dropped, and only while the file still names it; a lock whose
//! owner is gone (same host, no such process) is *stale* and is broken only on request
//! (`--break-lock`), which is logged, under a guard file so that two breakers cannot both
//! win; a lock held by a live process is never broken.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// Who holds a lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub host: String,
    pub pid: u32,
    pub started_at: String,
}

impl Owner {
    fn me() -> Owner {
        Owner {
            host: hostname(),
            pid: std::process::id(),
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }

    /// Whether the owner is known to be gone: same host and no such process. On another
    /// host nothing can be known, so the lock counts as held.
    fn is_gone(&self) -> bool {
        if self.host != hostname() {
            return false;
        }
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        matches!(
            nix::sys::signal::kill(pid, None),
            Err(nix::errno::Errno::ESRCH)
        )
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on {} since {}",
            self.pid, self.host, self.started_at
        )
    }
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".into())
}

/// A held lock; dropping it releases it.
pub struct Lock {
    fs: FileSystems,
    location: Location,
    owner: Owner,
}

/// How to take a lock that is held.
#[derive(Clone, Copy, Debug, Default)]
pub struct LockOptions {
    /// Wait this long for the holder to finish before giving up.
    pub wait: Option<Duration>,
    /// Break a stale lock (its owner is gone).
    pub break_stale: bool,
}

impl Lock {
    /// Takes the lock at `location`, or fails with [`Error::Locked`] naming its holder.
    pub fn acquire(fs: &FileSystems, location: &Location, options: LockOptions) -> Result<Lock> {
        let deadline = options.wait.map(|w| Instant::now() + w);
        let owner = Owner::me();
        let text = serde_json::to_vec_pretty(&owner).unwrap_or_default();
        loop {
            if fs.create_new(location, &text)? {
                return Ok(Lock {
                    fs: fs.clone(),
                    location: location.clone(),
                    owner,
                });
            }
            let reason = match read_owner(fs, location)? {
                Some(h) if h.is_gone() => {
                    if options.break_stale && break_stale(fs, location, Some(&h))? {
                        continue;
                    }
                    format!("stale: {h} is gone; rerun with --break-lock to break it")
                }
                Some(h) => format!("by {h}"),
                None if !fs.exists(location)? => continue,
                None => {
                    // Being written by its owner this instant, or left empty by a crash.
                    std::thread::sleep(UNREADABLE_GRACE);
                    match read_owner(fs, location)? {
                        Some(_) => continue,
                        None if options.break_stale && break_stale(fs, location, None)? => continue,
                        None => format!(
                            "it has no readable owner; if no run is starting, rerun with \
                             --break-lock (or delete {location})"
                        ),
                    }
                }
            };
            match deadline {
                Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_millis(500)),
                _ => {
                    return Err(Error::Locked {
                        lock: location.to_string(),
                        reason,
                    })
                }
            }
        }
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }
}

/// How long a lock may be unreadable while its owner writes it.
const UNREADABLE_GRACE: Duration = Duration::from_secs(3);

/// Breaks the lock if it still names `stale` (`None`: still unreadable), under a guard
/// file, so that of two runs breaking it at once only one deletes it (the other then finds
/// the winner's lock, which names a live owner). Returns whether it was broken.
fn break_stale(fs: &FileSystems, location: &Location, stale: Option<&Owner>) -> Result<bool> {
    let guard = location
        .parent()
        .map(|p| {
            p.join(&format!(
                "{}.break",
                location.file_name().unwrap_or_default()
            ))
        })
        .unwrap_or_else(|| location.clone());
    let me = serde_json::to_vec(&Owner::me()).unwrap_or_default();
    if !fs.create_new(&guard, &me)? {
        // Another breaker is at it, or died at it.
        if read_owner(fs, &guard)?.is_some_and(|g| g.is_gone()) {
            fs.delete(&guard)?;
        }
        return Ok(false);
    }
    let still = read_owner(fs, location)?;
    let broken = match (still.as_ref(), stale) {
        (Some(now), Some(old)) => now == old,
        (None, None) => fs.exists(location)?,
        _ => false,
    };
    if broken {
        match stale {
            Some(h) => log::warn!("breaking the stale lock {location} of {h}, which is gone"),
            None => log::warn!("breaking the lock {location}, which names no owner"),
        }
        fs.delete(location)?;
    }
    fs.delete(&guard)?;
    Ok(broken)
}

fn read_owner(fs: &FileSystems, location: &Location) -> Result<Option<Owner>> {
    match fs.read_to_vec(location) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        // Released between our create and this read.
        Err(_) if !fs.exists(location)? => Ok(None),
        Err(e) => Err(e),
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Only our own: a lock broken and taken by another run is theirs now.
        if let Ok(Some(holder)) = read_owner(&self.fs, &self.location) {
            if holder == self.owner {
                if let Err(e) = self.fs.delete(&self.location) {
                    log::warn!("could not release the lock {}: {e}", self.location);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner on this host whose process has ended.
    fn gone_owner() -> Owner {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        Owner { pid, ..Owner::me() }
    }

    #[test]
    fn one_holder_at_a_time_and_stale_locks_break_only_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let at = fs
            .parse(dir.path().join("runs/nightly.lock").to_str().unwrap())
            .unwrap();
        let first = Lock::acquire(&fs, &at, LockOptions::default()).unwrap();
        // Held by a live process (this one): refused, even when asked to break stale locks.
        let options = LockOptions {
            wait: Some(Duration::from_millis(600)),
            break_stale: true,
        };
        let e = Lock::acquire(&fs, &at, options).err().unwrap();
        assert!(matches!(e, Error::Locked { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(first);
        assert!(!fs.exists(&at).unwrap());

        // A lock left by a process that is gone.
        let stale = gone_owner();
        fs.write_atomic(&at, &serde_json::to_vec(&stale).unwrap())
            .unwrap();
        let e = Lock::acquire(&fs, &at, LockOptions::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("stale") && e.to_string().contains("--break-lock"));
        let options = LockOptions {
            break_stale: true,
            ..LockOptions::default()
        };
        let taken = Lock::acquire(&fs, &at, options).unwrap();
        assert_eq!(taken.owner().pid, std::process::id());
    }

    #[test]
    fn of_runs_breaking_one_stale_lock_at_once_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let at = fs
            .parse(dir.path().join("nightly.lock").to_str().unwrap())
            .unwrap();
        let stale = gone_owner();
        for _ in 0..5 {
            fs.write_atomic(&at, &serde_json::to_vec(&stale).unwrap())
                .unwrap();
            let barrier = std::sync::Barrier::new(6);
            let won = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|scope| {
                for _ in 0..6 {
                    scope.spawn(|| {
                        let options = LockOptions {
                            break_stale: true,
                            ..LockOptions::default()
                        };
                        barrier.wait();
                        let lock = Lock::acquire(&fs, &at, options);
                        if lock.is_ok() {
                            won.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        // Held until every thread has tried.
                        barrier.wait();
                        drop(lock);
                    });
                }
            });
            assert_eq!(won.into_inner(), 1);
            assert!(!fs.exists(&at).unwrap(), "the winner released it");
        }
    }
}
