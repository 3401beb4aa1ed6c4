//! `weibo-etl fs ls|put|get|cat|rm`: the file operations an operator needs around the jobs,
//! on HDFS or local disk, with the same URL rules the jobs use.

use std::io::{self, Read, Write};

use anyhow::{Context as _, Result};
use weibo_etl::hdfs::{FileSystems, Location};

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl fs put sample_data hdfs:///weibo/raw/dt=2026-11-29
  weibo-etl fs ls -r hdfs:///weibo/raw
  weibo-etl fs get hdfs:///weibo/graph/friends/dt=2026-11-29 friends-29
  weibo-etl fs cat hdfs:///weibo/raw/dt=2026-11-29/users/users.csv | head
  weibo-etl fs rm hdfs:///tmp/old-run";

/// List, upload, download, print and delete files on HDFS or local disk. Copies are atomic
/// per file: each file appears under its final name only once all of its bytes are written.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// List a folder (or one file)
    Ls {
        url: String,
        /// Descend into sub-folders
        #[arg(short, long)]
        recursive: bool,
    },
    /// Copy a local file or folder tree to a URL (replacing files of the same name)
    Put { local: String, url: String },
    /// Copy a file or folder tree at a URL to a local path (replacing files of the same
    /// name), so outputs on HDFS can be read with local tools
    Get { url: String, local: String },
    /// Print a file to stdout
    Cat { url: String },
    /// Delete a file or folder tree
    Rm { url: String },
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let fs = &ctx.fs;
    match args.action {
        Action::Ls { url, recursive } => {
            let location = fs.parse(&url)?;
            let entry = fs
                .status(&location)?
                .with_context(|| format!("{url}: no such file or folder"))?;
            let entries = if entry.is_dir {
                fs.list(&location, recursive)?
            } else {
                vec![entry]
            };
            let mut out = io::stdout().lock();
            for e in entries {
                let kind = if e.is_dir { "d" } else { "-" };
                writeln!(out, "{kind} {:>12} {}", e.len, e.location)?;
            }
        }
        Action::Put { local, url } => {
            let (files, bytes) = put(fs, &local, &url)?;
            println!("put {files} files, {bytes} bytes into {url}");
        }
        Action::Get { url, local } => {
            let (files, bytes) = copy_tree(fs, &fs.parse(&url)?, &Location::Local(local.into()))?;
            println!("got {files} files, {bytes} bytes from {url}");
        }
        Action::Cat { url } => {
            let location = fs.parse(&url)?;
            let mut reader = fs.open(&location)?;
            let mut out = io::stdout().lock();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = reader
                    .read(&mut buf)
                    .with_context(|| format!("reading {location}"))?;
                if n == 0 {
                    break;
                }
                if let Err(e) = out.write_all(&buf[..n]) {
                    if e.kind() == io::ErrorKind::BrokenPipe {
                        return Ok(());
                    }
                    return Err(e.into());
                }
            }
        }
        Action::Rm { url } => {
            let location = fs.parse(&url)?;
            fs.delete(&location)?;
            println!("deleted {location}");
        }
    }
    Ok(())
}

/// Copies a local file or tree under `url`; returns (files, bytes).
pub fn put(fs: &FileSystems, local: &str, url: &str) -> Result<(u64, u64)> {
    let target = fs.parse(url)?;
    fs.check_reachable(&target)?;
    copy_tree(fs, &Location::Local(local.into()), &target)
}

/// Copies a file, or every file of a tree, from `source` to `target` (keeping the relative
/// paths, hidden names included); returns (files, bytes).
fn copy_tree(fs: &FileSystems, source: &Location, target: &Location) -> Result<(u64, u64)> {
    let entry = fs
        .status(source)?
        .with_context(|| format!("{source}: no such file or folder"))?;
    let pairs: Vec<(Location, Location)> = if entry.is_dir {
        fs.list(source, true)?
            .into_iter()
            .filter(|e| !e.is_dir)
            .filter_map(|e| {
                let rel = e.location.relative_to(source)?;
                Some((e.location, target.join(&rel)))
            })
            .collect()
    } else {
        vec![(source.clone(), target.clone())]
    };
    let mut bytes = 0u64;
    for (from, to) in &pairs {
        let mut reader = fs.open(from)?;
        let mut writer = fs.create_atomic(to)?;
        bytes += io::copy(&mut reader, &mut writer)
            .with_context(|| format!("copying {from} to {to}"))?;
        writer.commit()?;
    }
    Ok((pairs.len() as u64, bytes))
}
