//! The `weibo-etl` command line: global options, subcommand dispatch, logging and exit codes.

mod cmd;

// Cleaning allocates a few short strings per field; mimalloc's thread-local free lists make
// that several times cheaper than glibc malloc under rayon.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cmd::Cli::try_parse() {
        Ok(cli) => cli,
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
                line.push_str(&format!(": {cause}"));
            }
            eprintln!("{line}");
            ExitCode::from(code as u8)
        }
    }
}
