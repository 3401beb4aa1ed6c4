//! The `weibo-etl` command line: global options, subcommand dispatch, logging and exit codes.

mod cmd;

// Cleaning allocates a few short strings per field; mimalloc's thread-local free lists make
// that several times cheaper than glibc malloc under rayon.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`weibo-etl fs cat ... | head`): Rust ignores SIGPIPE by default, which turns a closed
    // pipe into a panic in println!.
    // SAFETY: called first thing, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        );
    }
    let parsed = cmd::Cli::command()
        .try_get_matches()
        .and_then(|m| cmd::Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((mut cli, matches)) => {
            cli.global.namespace_on_command_line =
                matches.value_source("namespace") == Some(clap::parser::ValueSource::CommandLine);
            cli
        }
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    cmd::init_logging(&cli.global);
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = weibo_etl::error::exit_code_of(&err);
            // One line for cron mail: the outermost context first, then each cause.
            let mut line = format!("error: {err}");
            for cause in err.chain().skip(1) {
                // Library errors already quote their source; say each cause once.
                let cause = cause.to_string();
                if !line.contains(&cause) {
                    line.push_str(&format!(": {cause}"));
                }
            }
            eprintln!("{line}");
            ExitCode::from(code as u8)
        }
    }
}
